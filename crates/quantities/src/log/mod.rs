//! Cockpit-format logs: the JSON file (json_tricks encoding) and the JSON-lines stream.
//! (TensorBoard event files are the `cockpit-tensorboard` crate's.)

mod atomic;
mod error;
mod file;
mod json;
mod json_tricks;
mod limit;
mod stream;
mod tail;

pub use atomic::write_atomic;
pub use error::LogError;
pub use file::{parse_log, read_log, read_log_with, to_log_string, write_log};
pub use limit::{DEFAULT_READ_LIMIT, Reader, read_bounded};
pub use stream::{
    JsonLinesWriter, read_stream, read_stream_prefix, read_stream_prefix_with, read_stream_with,
};
pub use tail::{StreamTail, Tailed};

use std::path::Path;

use crate::Output;

/// What tells that a log changed since it was last read: its length and modification time,
/// and for a run record (SQLite in write-ahead mode, whose main file changes only at its
/// checkpoints) its `-wal` file's too. `None` while the file is not there.
pub fn change_stamp(log: impl AsRef<Path>) -> Option<(u64, Option<std::time::SystemTime>)> {
    let log = log.as_ref();
    let of = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .map(|m| (m.len(), m.modified().ok()))
    };
    let (len, time) = of(log)?;
    let mut wal = log.as_os_str().to_owned();
    wal.push("-wal");
    match of(Path::new(&wal)) {
        Some((wal_len, wal_time)) => Some((len.wrapping_add(wal_len), wal_time.max(time))),
        None => Some((len, time)),
    }
}

/// Reads a Cockpit JSON log ([`read_log`]), a JSON-lines stream ([`read_stream`]) when the
/// name ends in `.jsonl`, or a run record ([`RecordReader`](crate::record::RecordReader),
/// recognised by its first bytes) as an overview of at most
/// [`DEFAULT_OVERVIEW_STEPS`](crate::record::DEFAULT_OVERVIEW_STEPS) buckets
/// ([`RecordReader::read_overview`](crate::record::RecordReader::read_overview)): a record of any
/// length is read in bounded memory, every spike kept.
///
/// # Errors
///
/// As [`read_log`] and [`read_stream`].
pub fn read_any(log: impl AsRef<Path>) -> Result<Output, LogError> {
    read_any_with(&Reader::default(), log)
}

/// [`read_any`] within `reader`'s limit.
///
/// # Errors
///
/// As [`read_any`].
pub fn read_any_with(reader: &Reader, log: impl AsRef<Path>) -> Result<Output, LogError> {
    let log = log.as_ref();
    if crate::record::is_record(log) {
        let mut record = crate::record::RecordReader::open(log)?;
        return Ok(record.read_overview(crate::record::DEFAULT_OVERVIEW_STEPS)?);
    }
    if log.extension().is_some_and(|e| e == "jsonl") {
        read_stream_with(reader, log)
    } else {
        read_log_with(reader, log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Value;

    /// Each reader keeps its own limit: a small one refuses a stream the default reads, in
    /// the same process and at the same time (nothing is a setting of the process).
    #[test]
    fn two_readers_keep_their_own_limits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut writer = JsonLinesWriter::create(&path).unwrap();
        for step in 0..40 {
            let mut values = Output::new();
            values.insert(step, "Loss", Value::Float(1.0 / (1.0 + step as f64)));
            writer.append(step, &values).unwrap();
        }
        drop(writer);
        let bytes = std::fs::metadata(&path).unwrap().len();
        assert!(bytes > 2 * Reader::MIN_LIMIT, "{bytes} bytes");
        let small = Reader::with_limit(Reader::MIN_LIMIT);
        assert_eq!(Reader::with_limit(1).limit(), Reader::MIN_LIMIT);
        let refused = read_any_with(&small, &path).unwrap_err();
        assert!(
            matches!(refused, LogError::TooLarge { limit, .. } if limit == Reader::MIN_LIMIT),
            "{refused}"
        );
        assert_eq!(read_any(&path).unwrap().steps().count(), 40);
        let mut output = Output::new();
        let tail_refused = StreamTail::with_reader(&small, &path).poll_into(&mut output);
        assert!(matches!(tail_refused, Err(LogError::TooLarge { .. })));
        let tailed = StreamTail::new(&path).poll_into(&mut output).unwrap();
        assert_eq!((tailed.lines, output.steps().count()), (40, 40));
        assert_eq!(Reader::default().limit(), DEFAULT_READ_LIMIT);
    }
}
