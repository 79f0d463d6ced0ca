//! Divergence (NaN/Inf) and a loss that does not fall.

use crate::run::{ends, median, values};
use crate::{Code, Finding, Run};

use crate::run::MIN_LOSSES;
/// `loss-not-decreasing`: the median loss of the last 10 % of steps is at least this share
/// of the first 10 %'s.
pub(crate) const FLAT_LOSS: f64 = 0.97;

/// NaN or ±∞ anywhere in the scalar and per-parameter series.
pub(crate) fn non_finite(run: &Run) -> Option<Finding> {
    let mut bad: Vec<(usize, &str)> = Vec::new();
    let scalar_series = [
        ("Loss", &run.loss),
        ("Alpha", &run.alpha),
        ("HessMaxEV", &run.max_ev),
    ];
    for (key, series) in scalar_series {
        bad.extend(
            series
                .iter()
                .filter(|(_, v)| !v.is_finite())
                .map(|(s, _)| (*s, key)),
        );
    }
    for (key, series) in [
        ("GradNorm", &run.grad_norm),
        ("UpdateSize", &run.update_size),
    ] {
        bad.extend(
            series
                .iter()
                .filter(|(_, l)| l.iter().any(|v| !v.is_finite()))
                .map(|(s, _)| (*s, key)),
        );
    }
    // A histogram whose range is NaN or infinite counted nothing meaningful: the gradient
    // elements it bins were not finite (or its adaptation read such a maximum).
    bad.extend(
        run.hist1d
            .iter()
            .filter(|(_, h)| h.edges.iter().any(|e| !e.is_finite()))
            .map(|(s, _)| (*s, "GradHist1d edges")),
    );
    if bad.is_empty() {
        return None;
    }
    bad.sort();
    let mut keys: Vec<&str> = bad.iter().map(|(_, k)| *k).collect();
    keys.sort_unstable();
    keys.dedup();
    Some(Finding::new(
        Code::NonFinite,
        "NaN or infinite values: the run diverged or the loss is undefined",
        format!(
            "{} values in {}, first at step {}",
            bad.len(),
            keys.join(", "),
            bad[0].0
        ),
        bad.iter().map(|(s, _)| *s).collect(),
    ))
}

/// The loss of the last 10 % of steps is not below that of the first 10 %.
pub(crate) fn loss_not_decreasing(run: &Run) -> Option<Finding> {
    if run.loss.len() < MIN_LOSSES {
        return None;
    }
    let (first, last) = ends(&run.loss, 0.1);
    let (a, b) = (median(values(first)), median(values(last)));
    if !(a.is_finite() && a > 0.0) || (b.is_finite() && b < FLAT_LOSS * a) {
        return None;
    }
    Some(Finding::new(
        Code::LossNotDecreasing,
        "the loss does not decrease",
        format!(
            "median loss {a:.4} over the first {} steps, {b:.4} over the last {}",
            first.len(),
            last.len()
        ),
        first.iter().map(|(s, _)| *s).collect(),
    ))
}
