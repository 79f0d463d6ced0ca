//! Where a Cockpit's values go as training runs: [`Sink`]s, each fed every tracked step's
//! values and every epoch entry. The Cockpit holds a list of them and knows none: the
//! JSON-lines stream ([`JsonLinesWriter`](crate::log::JsonLinesWriter)), the JSON log and the
//! per-example table ([`LogFile`]), TensorBoard (the
//! `cockpit-tensorboard` crate), the burn-train Learner's board, or a user's own.

mod base;
mod error;
mod log_file;
mod shared;
mod stream;

pub use base::{Origin, Record, Sink};
pub use error::SinkError;
pub use log_file::LogFile;
