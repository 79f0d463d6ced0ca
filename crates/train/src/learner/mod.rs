//! [`CockpitLearner`]: the Cockpit shared by an instrumented model and its metrics.
//!
//! Files import one way: `api` (the public type) → `instrumented` (the model's hooks) →
//! `tracker` (the shared state's handle; routes an optimizer step) → `ddp` (a data-parallel
//! worker's step: it only moves data between the workers) → `state` (the shared state, its
//! fields private, and what is done to it) → `group` (the data-parallel group's bookkeeping,
//! private likewise) → `union` (the one place where a step's parts — one micro-batch, `k`
//! accumulated ones, a `MultiDevice` step's devices, a DDP group's workers — are joined into
//! the Cockpit's `StepInfo`) → the crate's `step` (what a training step left). `epoch` (the
//! epoch-end writer) reads `state`. The single-device path goes from `tracker` to `state`.

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
