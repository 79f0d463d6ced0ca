//! Histogram counting for GradHist1d and GradHist2d: where the counting runs
//! ([`HistogramEngine`]), and the two ways it is done.
//!
//! Both of Cockpit's bin rules are monotone in the value, so an axis is described exactly by
//! its thresholds `T_k`, the smallest value whose bin is at least `k`: the bin of `x` is the
//! number of thresholds `x` reaches. The host counts with that rule directly (`host`), the
//! device by comparing every value with every threshold (`device`), so both engines put a
//! value on a bin edge where Cockpit's formula puts it.

mod adaptation;
pub(crate) mod device;
mod engine;
pub(crate) mod host;
mod scratch;

pub use adaptation::BinAdaptation;
pub(crate) use adaptation::linspace;
pub use engine::HistogramEngine;
pub(crate) use scratch::StepScratch;
