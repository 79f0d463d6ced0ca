//! Cockpit's `histogram_1d_gauge`: the last histogram of gradient elements.

use plotters::prelude::*;

use super::base::{Area, Scale, number};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{ORANGE, PANEL};

/// Bars of the last GradHist1d on a log count axis (`log10(count + 1)`).
pub fn draw<DB: DrawingBackend>(
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
    if !(x0.is_finite() && x1.is_finite() && x1 > x0) || hist.hist.is_empty() {
        return Ok(false);
    }
    let heights: Vec<f64> = hist
        .hist
        .iter()
        .map(|c| (c.max(0.0) + 1.0).log10())
        .collect();
    let top = heights.iter().copied().fold(0.0, f64::max).max(1.0) * 1.05;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("Gradient Element Histogram (step {step})"),
            scale.font(17.0),
        )
        .margin(scale.px(6.0))
        .x_label_area_size(scale.px(30.0))
        .y_label_area_size(scale.px(56.0))
        .build_cartesian_2d(x0..x1, 0.0..top)
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
        .y_label_formatter(&|v| format!("{:.0}", 10f64.powf(*v) - 1.0))
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(
            hist.edges
                .windows(2)
                .zip(&heights)
                .filter(|(_, h)| **h > 0.0)
                .map(|(e, &h)| Rectangle::new([(e[0], 0.0), (e[1], h)], ORANGE.filled())),
        )
        .map_err(draw_err)?;
    Ok(true)
}
