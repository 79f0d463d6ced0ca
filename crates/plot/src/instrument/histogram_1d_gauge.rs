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
    let (Some(&x0), Some(&x1)) = (hist.edges.first(), hist.edges.last()) else {
        return Ok(false);
    };
    if hist.hist.is_empty() || !drawable_edges(&hist.edges, hist.hist.len()) {
        return Ok(false);
    }
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
        .x_label_formatter(&|v| number(*v))
        .y_labels(decades + 1)
        .y_label_formatter(&|v| power_of_ten(*v))
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(
            hist.edges
                .windows(2)
                .zip(&heights)
                .filter(|(_, h)| h.is_finite())
                .map(|(e, &h)| Rectangle::new([(e[0], FLOOR), (e[1], h)], ORANGE.filled())),
        )
        .map_err(draw_err)?;
    Ok(true)
}
