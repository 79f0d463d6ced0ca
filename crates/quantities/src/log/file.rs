//! Reading and writing Cockpit log files.

use std::io::Write;
use std::path::Path;

use super::LogError;
use super::json::Json;
use super::json_tricks::{decode_output, encode_output};
use super::limit::Reader;
use crate::Output;

/// Writes `output` to `path` in Cockpit's format (what `Cockpit.write` produces; note that
/// Cockpit appends `.json` to its argument, this writes exactly to `path`). The file is
/// replaced atomically ([`write_atomic`](super::write_atomic)): an interruption leaves the
/// previous log or the new one, never a cut file.
///
/// # Errors
///
/// [`LogError::Io`] if the file cannot be written; `output` is untouched.
pub fn write_log(path: impl AsRef<Path>, output: &Output) -> Result<(), LogError> {
    let path = path.as_ref();
    let mut text = encode_output(output).to_pretty();
    text.push('\n');
    super::write_atomic(path, |file| file.write_all(text.as_bytes())).map_err(|source| {
        LogError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Reads a Cockpit log, written by burn-cockpit or by the Python Cockpit (within the
/// [`DEFAULT_READ_LIMIT`](super::DEFAULT_READ_LIMIT); [`read_log_with`] for another).
///
/// # Errors
///
/// [`LogError::Io`] if unreadable, [`LogError::TooLarge`] past the limit,
/// [`LogError::Parse`] if not JSON, [`LogError::Format`] if the JSON is not a Cockpit log.
pub fn read_log(path: impl AsRef<Path>) -> Result<Output, LogError> {
    read_log_with(&Reader::default(), path)
}

/// [`read_log`] within `reader`'s limit.
///
/// # Errors
///
/// As [`read_log`].
pub fn read_log_with(reader: &Reader, path: impl AsRef<Path>) -> Result<Output, LogError> {
    let path = path.as_ref();
    let text = reader.read_text(path)?;
    parse_log(&text).map_err(|err| match err {
        LogError::Parse { line, source, .. } => LogError::Parse {
            path: path.to_path_buf(),
            line,
            source,
        },
        LogError::Format { message, .. } => LogError::Format {
            path: path.to_path_buf(),
            message,
        },
        other => other,
    })
}

/// Parses the text of a Cockpit log.
///
/// # Errors
///
/// As [`read_log`], with an empty path.
pub fn parse_log(text: &str) -> Result<Output, LogError> {
    let json = Json::parse(text).map_err(|source| LogError::Parse {
        path: Default::default(),
        line: None,
        source,
    })?;
    decode_output(json).map_err(|message| LogError::Format {
        path: Default::default(),
        message,
    })
}

/// The text [`write_log`] writes for `output`.
pub fn to_log_string(output: &Output) -> String {
    encode_output(output).to_pretty()
}
