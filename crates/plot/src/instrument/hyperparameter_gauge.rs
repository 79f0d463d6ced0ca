//! Cockpit's `hyperparameter_gauge`: the learning rate over time.

use plotters::prelude::*;

use super::base::{
    Area, Scale, X_LABELS, Y_LABELS, bounds, legend_above, number, step_bounds, titled,
};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{BLUE, PANEL};

/// The learning rate `log()` recorded, as a line; the legend above the plot shows the last
/// value.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let lr = &data.learning_rate;
    let (Some((x0, x1)), Some((y0, y1)), Some(last)) = (
        step_bounds(lr.steps.iter().copied()),
        bounds(lr.values.iter().copied()),
        lr.last(),
    ) else {
        return Ok(false);
    };
    let mut chart = ChartBuilder::on(&titled(area, "Hyperparameters", scale)?)
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(Y_LABELS))
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("iteration")
        .y_desc("learning rate")
        .label_style(scale.font(12.0))
        .axis_desc_style(scale.font(13.0))
        .x_label_formatter(&|v| number(*v))
        .y_label_formatter(&|v| number(*v))
        .y_labels(4)
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(LineSeries::new(
            lr.steps.iter().copied().zip(lr.values.iter().copied()),
            BLUE.stroke_width(scale.px(2.0)),
        ))
        .map_err(draw_err)?;
    chart
        .draw_series(
            lr.steps
                .iter()
                .zip(&lr.values)
                .map(|(&x, &y)| Circle::new((x, y), scale.px(3.0), BLUE.filled())),
        )
        .map_err(draw_err)?;
    let legend = [(format!("lr = {}", number(last)), BLUE)];
    legend_above(area, chart.plotting_area(), scale, &legend)?;
    Ok(true)
}
