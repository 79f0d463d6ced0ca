//! Where a Cockpit's values go as training runs: [`Sink`]s, each fed every tracked step's
//! values and every epoch entry. The Cockpit holds a list of them and knows none: the
//! JSON-lines stream ([`JsonLinesWriter`](crate::log::JsonLinesWriter)), TensorBoard (the
//! `cockpit-tensorboard` crate), the burn-train Learner's board, or a user's own.

mod base;
mod error;
mod shared;
mod stream;

pub use base::{Origin, Record, Sink};
pub use error::SinkError;
