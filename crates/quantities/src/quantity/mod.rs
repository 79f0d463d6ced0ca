//! Cockpit's quantities, one per file, named as Cockpit names them.

mod base;
mod distance;
mod grad_norm;
mod loss;
mod parameters;
mod time;
mod update_size;

pub use base::{Quantity, StepContext};
pub use distance::Distance;
pub use grad_norm::GradNorm;
pub use loss::Loss;
pub use parameters::{ParamView, Parameters};
pub use time::Time;
pub use update_size::UpdateSize;
