//! A record exported to the formats other tools read: the Cockpit JSON log (the Python
//! `CockpitPlotter`'s input) and the JSON-lines stream, written one step at a time.

use std::io::{BufWriter, Write};
use std::path::Path;

use super::error::RecordError;
use super::reader::RecordReader;
use crate::Output;
use crate::log::{JsonLinesWriter, LogError, to_log_string, write_atomic};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The record could not be read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The output file could not be written.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// The steps of `reader`, ordered as the JSON log orders its keys (as text: `"0"`, `"1"`,
/// `"10"`, …, as Python's `json.dumps(sort_keys=True)` does).
fn steps_as_text(reader: &mut RecordReader) -> Result<Vec<u64>, RecordError> {
    let mut steps = Vec::new();
    let mut last = None;
    reader.for_each_step_number(|step| {
        if last != Some(step) {
            steps.push(step);
            last = Some(step);
        }
    })?;
    steps.sort_by_cached_key(u64::to_string);
    Ok(steps)
}

/// Writes the record as a Cockpit JSON log (what [`write_log`](crate::log::write_log) writes for
/// the same values, byte for byte), replacing `path` atomically. Memory holds one step at a
/// time and the list of step numbers.
///
/// # Errors
///
/// [`ExportError::Record`] if the record cannot be read, [`ExportError::Log`] if the file
/// cannot be written (the previous file is then left as it was).
pub fn export_log(reader: &mut RecordReader, path: impl AsRef<Path>) -> Result<(), ExportError> {
    let path = path.as_ref();
    let steps = steps_as_text(reader)?;
    let first = steps.iter().min().copied();
    let names = reader.parameter_names()?;
    let mut failure = None;
    let written = write_atomic(path, |file| {
        let mut out = BufWriter::new(file);
        if steps.is_empty() {
            return out.write_all(b"{}\n");
        }
        out.write_all(b"{")?;
        for (i, &step) in steps.iter().enumerate() {
            let mut one = match reader.read_range(step, step + 1) {
                Ok(one) => one,
                Err(e) => {
                    failure = Some(e);
                    return Err(std::io::Error::other("the record could not be read"));
                }
            };
            if Some(step) == first {
                one.set_parameter_names(names.clone());
            } else {
                one = without_frame(one);
            }
            let text = to_log_string(&one);
            // `{\n    "<step>": …\n}`: the step's entry without the document's braces.
            let inner = text
                .strip_prefix("{\n")
                .and_then(|t| t.strip_suffix("\n}"))
                .unwrap_or(&text);
            out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            out.write_all(inner.as_bytes())?;
        }
        out.write_all(b"\n}\n")?;
        out.flush()
    });
    if let Some(e) = failure {
        return Err(e.into());
    }
    written.map_err(|source| {
        ExportError::Log(LogError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
    })
}

/// The values alone (the names and kinds go with the first step only).
fn without_frame(output: Output) -> Output {
    let mut bare = Output::new();
    for (step, key, value) in output.iter() {
        bare.insert(step, key, value.clone());
    }
    bare
}

/// Writes the record as a JSON-lines stream, one line per step (`tracked_at` its step).
///
/// # Errors
///
/// As [`export_log`].
pub fn export_stream(reader: &mut RecordReader, path: impl AsRef<Path>) -> Result<(), ExportError> {
    let mut writer = JsonLinesWriter::create(path)?;
    let names = reader.parameter_names()?;
    let mut step_values = Output::new();
    let mut current = None;
    let mut named = false;
    reader.for_each(0, u64::MAX, |step, key, value| {
        if current.is_some_and(|c| c != step) {
            let done = std::mem::take(&mut step_values);
            writer.append(current.unwrap_or_default() as usize, &done)?;
        }
        current = Some(step);
        if !named {
            step_values.set_parameter_names(names.clone());
            named = true;
        }
        step_values.insert(step as usize, key, value);
        Ok::<(), ExportError>(())
    })?;
    if let Some(step) = current {
        writer.append(step as usize, &step_values)?;
    }
    Ok(())
}
