//! The JSON-lines stream: one line per tracked step, flushed as training goes, so a crash
//! loses nothing that was already tracked.
//!
//! Each line is `{"output": {"<step>": {"<Quantity>": value, ...}, ...}, "tracked_at": <step>}`
//! with the values computed during that `track` call (two-step quantities store under an
//! earlier step) in the same encoding as the log file.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::LogError;
use super::json::Json;
use super::json_tricks::{decode_output, encode_output};
use super::limit::Reader;
use crate::Output;

/// Appends one JSON line per tracked step to a file.
#[derive(Debug)]
pub struct JsonLinesWriter {
    path: PathBuf,
    file: File,
}

impl JsonLinesWriter {
    /// Creates (or truncates) the stream file and holds an exclusive lock on it for as long
    /// as the writer lives, so that a second run pointed at the same file is refused instead
    /// of interleaving its lines with this one's.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file cannot be created, [`LogError::Busy`] if another writer
    /// (in this process or another) holds it; the file is then left as it was.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, LogError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| LogError::Io {
            action: "create",
            path: path.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(LogError::Busy { path }),
            Err(std::fs::TryLockError::Error(source)) => return Err(io(source)),
        }
        file.set_len(0).map_err(io)?;
        Ok(Self { path, file })
    }

    /// The stream's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the values of one `track` (or `log`) call and flushes.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the write fails.
    pub fn append(&mut self, tracked_at: usize, values: &Output) -> Result<(), LogError> {
        let mut line = BTreeMap::new();
        line.insert("output".to_string(), encode_output(values));
        line.insert("tracked_at".to_string(), Json::Int(tracked_at as i64));
        let mut text = Json::Object(line).to_line();
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| LogError::Io {
                action: "write",
                path: self.path.clone(),
                source,
            })
    }
}

/// Reads a JSON-lines stream back into one output (within the
/// [`DEFAULT_READ_LIMIT`](super::DEFAULT_READ_LIMIT); [`read_stream_with`] for another). A
/// last line cut short by a crash is ignored; any other bad line is an error.
///
/// # Errors
///
/// [`LogError::Io`] if unreadable, [`LogError::TooLarge`] past the limit,
/// [`LogError::Parse`] / [`LogError::Format`] naming the line.
pub fn read_stream(path: impl AsRef<Path>) -> Result<Output, LogError> {
    read_stream_with(&Reader::default(), path)
}

/// [`read_stream`] within `reader`'s limit.
///
/// # Errors
///
/// As [`read_stream`].
pub fn read_stream_with(reader: &Reader, path: impl AsRef<Path>) -> Result<Output, LogError> {
    match read_stream_prefix_with(reader, path)? {
        (output, None) => Ok(output),
        (_, Some(err)) => Err(err),
    }
}

/// Reads the good lines of a JSON-lines stream up to the first bad one: the output of the
/// lines before it, and the bad line's error (`None` when every line is good; a last line cut
/// short by a crash is not an error). A live reader (`cockpit serve`) shows the run so far
/// and says what is wrong after it, rather than losing the run to garbage appended to it.
///
/// # Errors
///
/// [`LogError::Io`] if unreadable, [`LogError::TooLarge`] past the
/// [`DEFAULT_READ_LIMIT`](super::DEFAULT_READ_LIMIT).
pub fn read_stream_prefix(path: impl AsRef<Path>) -> Result<(Output, Option<LogError>), LogError> {
    read_stream_prefix_with(&Reader::default(), path)
}

/// [`read_stream_prefix`] within `reader`'s limit.
///
/// # Errors
///
/// As [`read_stream_prefix`], past `reader`'s limit.
pub fn read_stream_prefix_with(
    reader: &Reader,
    path: impl AsRef<Path>,
) -> Result<(Output, Option<LogError>), LogError> {
    let path = path.as_ref();
    let text = reader.read_text(path)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut output = Output::new();
    let last = lines.len();
    for (index, line) in lines.iter().enumerate() {
        match decode_line(path, index + 1, line) {
            Ok(Some(values)) => output.merge(values),
            Ok(None) => {}
            // A partial line from an interrupted write.
            Err(LogError::Parse { .. }) if index + 1 == last => break,
            Err(err) => return Ok((output, Some(err))),
        }
    }
    Ok((output, None))
}

/// Decodes line `number` of a stream: its values, `None` for a blank line, or why it is not a
/// stream line ([`LogError::Parse`] for text that is not JSON, [`LogError::Format`] for JSON
/// that is not a line of ours).
pub(super) fn decode_line(
    path: &Path,
    number: usize,
    line: &str,
) -> Result<Option<Output>, LogError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let parsed = Json::parse(line).map_err(|source| LogError::Parse {
        path: path.to_path_buf(),
        line: Some(number),
        source,
    })?;
    let format = |message: String| LogError::Format {
        path: path.to_path_buf(),
        message: format!("line {number}: {message}"),
    };
    let Json::Object(mut map) = parsed else {
        return Err(format("not an object".into()));
    };
    let values = map
        .remove("output")
        .ok_or_else(|| format("no `output` field".into()))?;
    decode_output(values).map(Some).map_err(format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;

    #[test]
    fn a_second_writer_is_refused_and_the_first_keeps_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut first = JsonLinesWriter::create(&path).unwrap();
        let mut values = Output::new();
        values.insert(0, "Loss", Value::Float(1.5));
        first.append(0, &values).unwrap();
        let second = JsonLinesWriter::create(&path).unwrap_err();
        assert!(matches!(second, LogError::Busy { .. }), "{second}");
        first.append(1, &values).unwrap();
        assert_eq!(read_stream(&path).unwrap().steps().count(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        drop(first);
        // Once the first writer is gone the file can be taken over (and is truncated).
        JsonLinesWriter::create(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }
}
