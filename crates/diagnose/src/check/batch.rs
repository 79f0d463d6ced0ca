//! The batch size: is the mini-batch gradient mostly noise? The gradient tests (Byrd et al.
//! 2012; Bollapragada et al. 2017) estimate the noise of the mean gradient relative to its
//! norm; the mini-batch loss jumping from step to step is the same noise seen in the loss.

use crate::run::{median, values};
use crate::{Code, Finding, Run};

/// `small-batch`: the median NormTest over the run at least this. NormTest estimates
/// `(σ²/B)/‖ḡ‖²`, and since `E‖ḡ‖² = ‖∇L‖² + σ²/B` it hovers near 1 (not above) once noise
/// dominates: 0.9 means noise is ≥ 90 % of the mean gradient's squared norm.
pub(crate) const NOISE_SHARE: f64 = 0.9;
/// …together with a mini-batch loss whose median step-to-step change is at least this share
/// of its median level.
pub(crate) const LOSS_JITTER: f64 = 0.25;

/// The gradient tests near their limit together with a jittering mini-batch loss, in a run
/// that did not learn ([`Run::learned`]).
pub(crate) fn small_batch(run: &Run) -> Option<Finding> {
    let norm_test = run
        .tests
        .iter()
        .find(|(k, _)| *k == "NormTest")
        .map(|(_, s)| s)?;
    // A run whose loss fell threefold or more learned despite the noise: most healthy runs
    // have a mini-batch gradient that is mostly noise (NormTest ≈ 1) for most of their steps.
    if norm_test.len() < 4 || run.loss.len() < 4 || run.learned() {
        return None;
    }
    let noise = median(values(norm_test));
    let jitter = median(run.loss.windows(2).map(|w| (w[1].1 - w[0].1).abs()))
        / median(values(&run.loss)).abs();
    if !(noise >= NOISE_SHARE && jitter >= LOSS_JITTER) {
        return None;
    }
    let others: Vec<String> = run
        .tests
        .iter()
        .filter(|(k, s)| *k != "NormTest" && !s.is_empty())
        .map(|(k, s)| format!("{k} {:.2}", median(values(s))))
        .collect();
    Some(Finding::new(
        Code::SmallBatch,
        "the batch is too small: the mini-batch gradient is mostly noise",
        format!(
            "median NormTest {noise:.2} over {} steps{}; the mini-batch loss moves by {:.0} % of its level from step to step",
            norm_test.len(),
            if others.is_empty() {
                String::new()
            } else {
                format!(" ({})", others.join(", "))
            },
            100.0 * jitter
        ),
        norm_test
            .iter()
            .filter(|(_, v)| *v >= NOISE_SHARE)
            .map(|(s, _)| *s)
            .collect(),
    ))
}
