//! # cockpit-train
//!
//! Cockpit's quantities as burn-train metrics: watch a `Learner` run the way a hand-written
//! loop watches one with [`cockpit_quantities::Cockpit`].
//!
//! burn-train metrics never see the model or the gradients, so the work happens where they
//! are: [`Instrumented`] wraps the model and computes the quantities in `TrainStep::optimize`
//! (θ_t and the gradient the optimizer applies); the metrics [`CockpitLearner::register`]
//! adds on the training split read the values of their iteration from a shared handle.
//!
//! ```ignore
//! let cockpit = CockpitLearner::new(Configuration::Economy, Schedule::every_step(), OptimizerInfo::sgd(LR))?
//!     .with_artifact_dir(DIR)?;
//! let learner = Learner::new(cockpit.instrument(model)?, SgdConfig::new().init(), LR);
//! cockpit.register(SupervisedTraining::new(DIR, train, valid)).launch(learner);
//! cockpit.write()?;
//! ```
//!
//! The model's `TrainStep::step` builds its output with [`train_output`] (or
//! [`train_output_per_sample`], which Alpha needs) instead of `TrainOutput::new`: one line, so
//! the Cockpit sees the loss and the per-sample layers' records.
//!
//! Logs: burn's metric files (`<dir>/train/epoch-N/Cockpit_<Quantity>.log`), Cockpit's log
//! `<dir>/cockpit.json` (rewritten at each epoch end) and the stream `<dir>/cockpit.jsonl`.

mod board;
mod error;
mod learner;
pub mod metric;
mod step;

pub use error::TrainError;
pub use learner::{CockpitLearner, Instrumented, LOG_FILE, STREAM_FILE, Transport, Watch};
pub use metric::{CockpitMetric, CockpitNotesMetric, CockpitTextMetric};
pub use step::{
    train_output, train_output_per_sample, train_output_with_ids, train_output_with_loss,
    train_output_with_margins,
};
