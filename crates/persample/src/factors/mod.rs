//! The fast path: per-sample statistics of a [`Recording`] — layers linear in their weight
//! from their inputs and output gradients, without materialising `[B, parameters]` where the
//! statistic does not need it.

mod accumulator;
mod coverage;
mod recording;

pub(crate) use accumulator::Accumulator;
pub use coverage::Coverage;
pub(crate) use coverage::{Refusal, refusal_of};
pub(crate) use recording::{DenseGradients, LayerFactors, Layout, chunk_samples};
pub use recording::{RecordedActivation, Recording};
