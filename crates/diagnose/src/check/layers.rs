//! Parameters that stopped moving.

use crate::run::{ends, median};
use crate::{Code, Finding, Run};

/// `frozen-layer`: every update of the last 10 % of steps at most this (absolute)…
pub(crate) const FROZEN_ABSOLUTE: f64 = 1e-12;
/// …or at most this share of the median update of all parameters.
pub(crate) const FROZEN_RELATIVE: f64 = 1e-6;

/// Parameters whose update size over the last 10 % of steps is (near) zero, in one finding.
pub(crate) fn frozen(run: &Run) -> Option<Finding> {
    let series = &run.update_size;
    if series.len() < 4 {
        return None;
    }
    let (_, last) = ends(series, 0.1);
    let layers = last.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
    let overall = median(last.iter().flat_map(|(_, l)| l.iter().copied()));
    let frozen: Vec<(usize, f64)> = (0..layers)
        .map(|p| (p, last.iter().map(|(_, l)| l[p].abs()).fold(0.0, f64::max)))
        .filter(|(_, largest)| {
            *largest <= FROZEN_ABSOLUTE || (overall > 0.0 && *largest <= FROZEN_RELATIVE * overall)
        })
        .collect();
    if frozen.is_empty() {
        return None;
    }
    // Since when: the first step from which every frozen parameter's update stays tiny.
    let tiny = |l: &[f64]| {
        frozen.iter().all(|(p, _)| {
            l.get(*p)
                .is_some_and(|u| u.abs() <= FROZEN_ABSOLUTE.max(FROZEN_RELATIVE * overall))
        })
    };
    let since = series
        .iter()
        .rposition(|(_, l)| !tiny(l))
        .map_or(series[0].0, |i| series[(i + 1).min(series.len() - 1)].0);
    let names: Vec<String> = frozen.iter().map(|(p, _)| run.name(*p)).collect();
    Some(
        Finding::new(
            Code::FrozenLayer,
            format!(
                "{} of {layers} parameters stopped moving (dead units, a detached layer or a zero learning rate)",
                frozen.len()
            ),
            format!(
                "update size at most {:.3e} over the last {} steps (median of all parameters {overall:.3e}): {}",
                frozen.iter().map(|(_, u)| *u).fold(0.0, f64::max),
                last.len(),
                names.join(", ")
            ),
            last.iter().map(|(s, _)| *s).collect(),
        )
        .with_parameters(names)
        .starting_at(since),
    )
}
