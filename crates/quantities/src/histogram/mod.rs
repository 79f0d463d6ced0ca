//! Histogram counting for GradHist1d and GradHist2d: where the counting runs
//! ([`HistogramEngine`]), and the two ways it is done.
//!
//! Both of Cockpit's bin rules are monotone in the value, so an axis is described exactly by
//! its thresholds `T_k`, the smallest value whose bin is at least `k`: the bin of `x` is the
//! number of thresholds `x` reaches (`axis`). The host counts with that rule directly
//! (`rank_one` for rank-one gradients, `parallel` on every core), the device with the rule's
//! formula corrected against the thresholds (`device`), so both engines put a value on a bin
//! edge where Cockpit's formula puts it; GradHist2d's cells are a product of indicators
//! (`matmul`, host and device twins).

mod adaptation;
pub(crate) mod axis;
mod binning;
pub(crate) mod device;
mod engine;
mod matmul;
mod parallel;
mod rank_one;
mod scratch;

pub use adaptation::BinAdaptation;
pub(crate) use adaptation::linspace;
pub(crate) use axis::{Axis, MAX_BINS_2D, Rule, check_axis};
pub use binning::BinsElements;
pub use engine::HistogramEngine;
pub(crate) use matmul::device_matmul_tn;
pub(crate) use parallel::{add_into, count_in_parallel};
pub(crate) use rank_one::{outer_histogram, outer_histogram2d};
pub(crate) use scratch::StepScratch;
