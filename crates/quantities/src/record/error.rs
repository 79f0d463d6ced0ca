//! Why a run record cannot be opened, written or read.

use std::path::PathBuf;

use super::codec::CodecError;

/// Why a [`RunRecord`](super::RunRecord) or [`RecordReader`](super::RecordReader) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file (or its lock file) could not be opened or created.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// "open", "create" or "lock".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// Another writer holds the record (a second run pointed at the same path).
    #[error(
        "`{}` is being written by another run (its lock is held); give this run its own record",
        path.display()
    )]
    Busy {
        /// The record.
        path: PathBuf,
    },
    /// SQLite refused an operation (a disk that refuses a write, a file that is not a
    /// database, a database cut short).
    #[error("the run record `{}` could not be {action}", path.display())]
    Sqlite {
        /// "read", "written", "opened", …
        action: &'static str,
        /// The record.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is a database but not a run record, or one of a newer format.
    #[error("`{}` is not a run record of this version: {reason}", path.display())]
    NotARecord {
        /// The file.
        path: PathBuf,
        /// What is missing or different.
        reason: NotARecord,
    },
    /// A stored value or state cannot be decoded.
    #[error("`{}` holds a damaged value at step {step} (`{key}`)", path.display())]
    Damaged {
        /// The record.
        path: PathBuf,
        /// The step of the value.
        step: u64,
        /// The value's key (`"state"` for a saved Cockpit state).
        key: String,
        /// Why it cannot be decoded.
        #[source]
        source: CodecError,
    },
    /// No Cockpit state was saved for the step a resume asked for.
    #[error(
        "`{}` has no Cockpit state saved for step {step} (saved: {}); resume from the step of a \
         checkpoint taken with `Cockpit::checkpoint`",
        path.display(),
        if saved.is_empty() { "none".to_string() } else {
            saved.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        }
    )]
    NoState {
        /// The record.
        path: PathBuf,
        /// The step asked for.
        step: u64,
        /// The steps with a saved state.
        saved: Vec<u64>,
    },
}

impl RecordError {
    /// Wraps SQLite's errors as [`RecordError::Sqlite`] of `path` (one closure for every
    /// `map_err` of the record's reads and writes).
    pub(crate) fn sqlite(
        action: &'static str,
        path: &std::path::Path,
    ) -> impl Fn(rusqlite::Error) -> Self + use<> {
        let path = path.to_path_buf();
        move |source| Self::Sqlite {
            action,
            path: path.clone(),
            source,
        }
    }
}

/// What makes a database not a run record ([`RecordError::NotARecord`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotARecord {
    /// The record's own tables are missing.
    #[error("it has no `{0}` table")]
    MissingTable(&'static str),
    /// The record says it is of another format version.
    #[error("its format is version {found}, this build reads version {expected}")]
    Version {
        /// The version in the file.
        found: String,
        /// The version this build writes.
        expected: u32,
    },
}
