//! Errors of reading and writing logs.

use std::path::PathBuf;

/// Why a log could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The file could not be read or written.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// "read", "write" or "create".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// Another writer holds the stream file (a second run writing to the same path).
    #[error(
        "`{}` is being written by another run (its lock is held); give this run its own stream file",
        path.display()
    )]
    Busy {
        /// The file.
        path: PathBuf,
    },
    /// The file is not JSON (or not JSON lines).
    #[error("`{}` is not valid JSON{}", path.display(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line of a JSON-lines file, if any.
        line: Option<usize>,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// The file is larger than the readers take ([`Reader::limit`](super::Reader::limit)); nothing
    /// beyond the limit was read.
    #[error(
        "`{}` is larger than {limit} bytes, the most a reader takes; raise the limit \
         (`cockpit --max-input-bytes N`, or `log::Reader::with_limit`) if it is a real log",
        path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The JSON is not a Cockpit log (e.g. a step key that is not a number).
    #[error("`{}` is not a Cockpit log: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The per-example table ([`examples::write_table`](crate::examples::write_table)) could
    /// not be written or is not one.
    #[error("`{}` is not a per-example table", path.display())]
    Table {
        /// The file.
        path: PathBuf,
        /// What the CSV reader or writer said.
        #[source]
        source: csv::Error,
    },
    /// A run record (SQLite) could not be read.
    #[error(transparent)]
    Record(Box<crate::record::RecordError>),
}

impl From<crate::record::RecordError> for LogError {
    fn from(err: crate::record::RecordError) -> Self {
        Self::Record(Box::new(err))
    }
}
