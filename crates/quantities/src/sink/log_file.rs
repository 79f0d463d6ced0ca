//! Cockpit's JSON log, and the per-example table beside it, as a sink.

use std::path::{Path, PathBuf};

use super::base::{Origin, Record, Sink};
use super::error::SinkError;
use crate::Output;
use crate::examples::{ExampleRecord, table_path, write_table};
use crate::log::{LogError, write_log};

/// Cockpit's JSON log (`write_log`'s format) as a sink: the run so far is rewritten at `path`
/// at every epoch entry ([`Cockpit::log`](crate::Cockpit::log)), and, where an
/// [`Examples`](crate::quantity::Examples) quantity keeps a record, its per-example table
/// beside it ([`table_path`]: `run.json` → `run.examples.csv`). Both files are replaced
/// atomically: an interruption leaves the previous file or the new one.
///
/// [`Cockpit::write`](crate::Cockpit::write) writes through the same code at any time.
///
/// # Cost
///
/// One rewrite of the whole log per epoch (the run's values as the Cockpit holds them; the
/// sink keeps no copy). The JSON-lines stream ([`Cockpit::with_stream`](crate::Cockpit::with_stream))
/// appends one line per call instead.
#[derive(Debug, Clone)]
pub struct LogFile {
    path: PathBuf,
}

impl LogFile {
    /// A log at exactly `path` (Cockpit appends `.json` to its argument; this does not).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `run` and, where there is one with rows, the per-example `record` beside it.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if a file cannot be written (the previous file stays),
    /// [`LogError::Table`] if a row cannot be encoded.
    pub fn write_run(&self, run: &Output, record: Option<&ExampleRecord>) -> Result<(), LogError> {
        write_log(&self.path, run)?;
        if let Some(record) = record.filter(|r| !r.is_empty()) {
            write_table(table_path(&self.path), record)?;
        }
        Ok(())
    }
}

impl Sink for LogFile {
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError> {
        // A Cockpit with a run record keeps no run in memory: the record is the log (exported
        // by `Cockpit::write`), nothing is rewritten here.
        if record.origin == Origin::Epoch && !record.run.is_empty() {
            self.write_run(record.run, record.examples)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;
    use crate::log::read_log;

    #[test]
    fn the_run_is_rewritten_at_each_epoch_entry_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let mut sink = LogFile::new(&path);
        let mut run = Output::new();
        run.insert(0, "Loss", Value::Float(1.5));
        let tracked = Record {
            origin: Origin::Tracked,
            step: 0,
            values: &run,
            parameter_names: &[],
            run: &run,
            examples: None,
        };
        sink.write(&tracked).unwrap();
        assert!(!path.exists(), "a tracked step does not rewrite the log");
        let mut epoch = Output::new();
        epoch.insert(0, "epoch_count", Value::Int(1));
        run.merge(epoch.clone());
        let entry = Record {
            origin: Origin::Epoch,
            step: 0,
            values: &epoch,
            parameter_names: &[],
            run: &run,
            examples: None,
        };
        sink.write(&entry).unwrap();
        let back = read_log(&path).unwrap();
        assert_eq!(back.get(0, "Loss"), Some(&Value::Float(1.5)));
        assert_eq!(back.get(0, "epoch_count"), Some(&Value::Int(1)));
        assert!(!table_path(&path).exists(), "no examples, no table");

        // A folder that does not exist: the log's own error, typed, as the sink's.
        let mut lost = LogFile::new(dir.path().join("no/such/run.json"));
        let err = lost.write(&entry).unwrap_err();
        assert!(
            matches!(err, SinkError::Log(LogError::Io { .. })),
            "{err:?}"
        );
    }
}
