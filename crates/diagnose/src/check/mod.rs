//! The checks, one family per file; each reads a [`Run`] and returns what it recognised.

mod batch;
mod curvature;
mod depth;
mod examples;
mod layers;
mod progress;
mod start;
mod step_size;

use crate::{Finding, Run};

/// Every check on `run`, in no particular order.
pub(crate) fn all(run: &Run) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.extend(progress::non_finite(run));
    findings.extend(step_size::too_large(run));
    findings.extend(step_size::too_small(run));
    findings.extend(start::exploding_start(run));
    findings.extend(start::misscaled_inputs(run));
    findings.extend(depth::imbalance(run));
    findings.extend(depth::over_time(run));
    findings.extend(layers::frozen(run));
    findings.extend(batch::small_batch(run));
    findings.extend(curvature::rising(run));
    findings.extend(progress::loss_not_decreasing(run));
    findings.extend(examples::few_examples(run));
    findings
}
