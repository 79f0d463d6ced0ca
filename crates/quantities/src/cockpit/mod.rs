//! The [`Cockpit`]: runs each quantity on its schedule and collects the output; one call per
//! training step with [`Cockpit::step`].

mod base;
mod constructors;
mod previous;
mod record;
mod report;
mod step;
mod update_check;

pub use base::{Cockpit, EpochLog, MAX_WARNINGS, ReadTiming};
pub use report::StepReport;
pub use step::{OnBatch, StepForward, StepOptions, Stepped};
