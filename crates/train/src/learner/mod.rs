//! [`CockpitLearner`]: the Cockpit shared by an instrumented model and its metrics.

mod api;
mod ddp;
mod epoch;
mod state;

pub use api::CockpitLearner;
pub use ddp::Transport;
pub(crate) use state::Pending;

/// File names the adapter writes in its artifact directory.
pub const LOG_FILE: &str = "cockpit.json";
/// The JSON-lines stream, one line per tracked step, flushed as training runs.
pub const STREAM_FILE: &str = "cockpit.jsonl";
