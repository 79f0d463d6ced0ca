//! [`CockpitLearner`]: the Cockpit shared by an instrumented model and its metrics.
//!
//! Files import one way: `api` (the public type and the hooks the instrumented model calls)
//! → `ddp` (the data-parallel step) and `epoch` (the epoch-end sink) → `state` (the shared
//! state and all its methods) → `group` (the data-parallel group's bookkeeping) and the
//! crate's `step` (what a training step left). The single-device path goes from `api` to
//! `state` only.

mod api;
mod ddp;
mod epoch;
mod group;
mod instrumented;
mod state;
mod tracker;
mod union;

pub use api::CockpitLearner;
pub use group::Transport;
pub use instrumented::{Instrumented, Watch};

/// File names the adapter writes in its artifact directory.
pub const LOG_FILE: &str = "cockpit.json";
/// The JSON-lines stream, one line per tracked step, flushed as training runs.
pub const STREAM_FILE: &str = "cockpit.jsonl";
