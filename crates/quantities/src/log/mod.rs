//! Cockpit-format logs: the JSON file (json_tricks encoding) and the JSON-lines stream.

mod atomic;
mod error;
mod file;
mod json;
mod json_tricks;
mod stream;
pub mod tensorboard;

pub use atomic::write_atomic;
pub use error::LogError;
pub use file::{parse_log, read_log, to_log_string, write_log};
pub use stream::{JsonLinesWriter, read_stream};
