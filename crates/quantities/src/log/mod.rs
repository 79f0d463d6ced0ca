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
pub use file::{parse_log, read_log, to_log_string, write_log};
pub use limit::{DEFAULT_READ_LIMIT, read_bounded, read_limit, set_read_limit};
pub use stream::{JsonLinesWriter, read_stream, read_stream_prefix};
pub use tail::{StreamTail, Tailed};

use std::path::Path;

use crate::Output;

/// Reads a Cockpit JSON log ([`read_log`]), or a JSON-lines stream ([`read_stream`]) when the
/// name ends in `.jsonl`.
///
/// # Errors
///
/// As [`read_log`] and [`read_stream`].
pub fn read_any(log: impl AsRef<Path>) -> Result<Output, LogError> {
    let log = log.as_ref();
    if log.extension().is_some_and(|e| e == "jsonl") {
        read_stream(log)
    } else {
        read_log(log)
    }
}
