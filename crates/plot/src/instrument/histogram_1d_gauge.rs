//! Cockpit's `histogram_1d_gauge`: the last histogram of gradient elements.

use plotters::prelude::*;

use super::base::{Area, Scale, X_LABELS, Y_LABELS, drawable_edges, number, power_of_ten};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{ORANGE, PANEL};

/// The bottom of the log count axis, in decades: a bin with one element shows a bar from here
/// to 0 (`log10(1)`).
const FLOOR: f64 = -0.3;

/// Bars of the last GradHist1d on a log count axis (matplotlib's `log=True`: a bar reaches
/// `log10(count)`, empty bins draw nothing), ticked at the powers of ten.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let Some((step, hist)) = &data.hist1d else {
        return Ok(false);
    };
    if hist.hist.is_empty() || !drawable_edges(&hist.edges, hist.hist.len()) {
        return Ok(false);
    }
    let (x0, x1) = occupied(&hist.hist, &hist.edges).unwrap_or((
        hist.edges.first().copied().unwrap_or(-1.0),
        hist.edges.last().copied().unwrap_or(1.0),
    ));
    let heights: Vec<f64> = hist
        .hist
        .iter()
        .map(|&c| if c >= 1.0 { c.log10() } else { f64::NAN })
        .collect();
    let top = heights
        .iter()
        .copied()
        .filter(|h| h.is_finite())
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.05;
    let decades = top.ceil() as usize + 1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("Gradient Element Histogram (step {step})"),
            scale.font(17.0),
        )
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(Y_LABELS))
        .build_cartesian_2d(x0..x1, FLOOR..top)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("gradient element value")
        .y_desc("count")
        .label_style(scale.font(12.0))
        .axis_desc_style(scale.font(13.0))
        .x_label_formatter(&|v| {
            // A tick at zero computed as −2.2e-16 reads as zero.
            if v.abs() < 1e-9 * (x1 - x0) {
                "0".to_string()
            } else {
                number(*v)
            }
        })
        .y_labels(decades + 1)
        .y_label_formatter(&|v| power_of_ten(*v))
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(
            hist.edges
                .windows(2)
                .zip(&heights)
                .filter(|(e, h)| h.is_finite() && e[0] >= x0 && e[1] <= x1)
                .map(|(e, &h)| Rectangle::new([(e[0], FLOOR), (e[1], h)], ORANGE.filled())),
        )
        .map_err(draw_err)?;
    Ok(true)
}

/// Bins shown either side of the populated ones, and the fewest bins an axis shows.
const MARGIN_BINS: usize = 2;
const MIN_BINS: usize = 8;

/// The axis range a histogram is drawn over: the bins its counts occupy, with
/// [`MARGIN_BINS`] either side and at least [`MIN_BINS`] wide, within its edges. The quantity
/// keeps Cockpit's bins (100 on `[−2, 2]`); a network whose gradient elements all sit in the
/// bins around zero would otherwise show one bar in the middle of an empty axis. `None` where
/// nothing is counted (the whole range is drawn, empty).
fn occupied(counts: &[f64], edges: &[f64]) -> Option<(f64, f64)> {
    let first = counts.iter().position(|c| *c > 0.0)?;
    let last = counts.iter().rposition(|c| *c > 0.0)?;
    let bins = counts.len();
    let (mut lo, mut hi) = (
        first.saturating_sub(MARGIN_BINS),
        (last + MARGIN_BINS).min(bins - 1),
    );
    while hi - lo + 1 < MIN_BINS.min(bins) {
        lo = lo.saturating_sub(1);
        hi = (hi + 1).min(bins - 1);
    }
    Some((edges[lo], edges[hi + 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts in the two bins around zero of Cockpit's 100 bins on [−2, 2] are drawn over
    /// eight bins around them, not the whole range; counts spread over the range keep it.
    #[test]
    fn the_axis_spans_the_populated_bins() {
        let edges: Vec<f64> = (0..=100).map(|i| -2.0 + 0.04 * i as f64).collect();
        let mut counts = vec![0.0; 100];
        counts[49] = 30.0;
        counts[50] = 50.0;
        let (lo, hi) = occupied(&counts, &edges).unwrap();
        assert!(
            (lo + 0.16).abs() < 1e-9 && (hi - 0.16).abs() < 1e-9,
            "{lo} {hi}"
        );
        counts[0] = 1.0;
        counts[99] = 1.0;
        assert_eq!(occupied(&counts, &edges), Some((-2.0, 2.0)));
        assert_eq!(occupied(&[0.0; 100], &edges), None);
    }
}
