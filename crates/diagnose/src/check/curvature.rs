//! Curvature that rises sharply.

use crate::run::{Scalars, ends, median, values};
use crate::{Code, Finding, Run};

/// `rising-curvature`: the median of the last 10 % at least this many times the first 10 %'s.
pub(crate) const RISE: f64 = 10.0;

/// HessMaxEV (or the summed HessTrace) rose [`RISE`]-fold in a run that did not learn
/// ([`Run::learned`]); it counts from the first step past √RISE times the start.
pub(crate) fn rising(run: &Run) -> Option<Finding> {
    let (key, series): (&str, &Scalars) = if run.max_ev.len() >= 4 {
        ("HessMaxEV", &run.max_ev)
    } else {
        ("HessTrace", &run.trace)
    };
    // A network that fits its data sharpens the surface it settles in (progressive
    // sharpening, Cohen et al. 2021): in a run that learned, that is no finding.
    if series.len() < 4 || run.learned() {
        return None;
    }
    let (first, last) = ends(series, 0.1);
    let (a, b) = (median(values(first)), median(values(last)));
    if !(a > 0.0 && b >= RISE * a) {
        return None;
    }
    let since = series
        .iter()
        .find(|(_, v)| *v >= RISE.sqrt() * a)
        .map_or(last[0].0, |(s, _)| *s);
    Some(
        Finding::new(
            Code::RisingCurvature,
            "the curvature rose sharply: the loss surface is getting sharper",
            format!(
                "median {key} {a:.3e} at the start, {b:.3e} at the end ({:.0}×)",
                b / a
            ),
            last.iter().map(|(s, _)| *s).collect(),
        )
        .starting_at(since),
    )
}
