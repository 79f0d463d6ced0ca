//! Cockpit's `performance_gauge`: the mini-batch loss with the accuracies `log()` recorded.

use plotters::prelude::*;

use super::base::{
    Area, Plot, RIGHT_LABELS, Scale, X_LABELS, Y_LABELS, bounds, label_count, legend_above,
    primary, scatter_ema, step_bounds, tick, titled,
};
use crate::PlotError;
use crate::data::{DashboardData, Series};
use crate::error::draw_err;

/// Training accuracy (matplotlib's `tab:blue`).
const TRAIN: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// Validation accuracy (matplotlib's `tab:red`).
const VALID: RGBColor = RGBColor(0xd6, 0x27, 0x28);

/// The mini-batch loss as points coloured by iteration with its moving average, and — as the
/// Python plotter draws them — the training and validation accuracies as two labelled lines
/// on a twin axis.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let loss = Plot {
        series: &data.loss,
        label: "mini-batch loss",
        log: false,
    };
    let accuracies: Vec<(&Series, &str, RGBColor)> = [
        (&data.train_accuracy, "train accuracy", TRAIN),
        (&data.valid_accuracy, "valid accuracy", VALID),
    ]
    .into_iter()
    .filter(|(s, _, _)| !s.is_empty())
    .collect();
    if accuracies.is_empty() || data.loss.is_empty() {
        // One series alone: the common scatter instrument.
        let Some((series, label, _)) = accuracies.first() else {
            return scatter_ema(area, scale, "Performance", loss, None);
        };
        let only = Plot {
            series,
            label,
            log: false,
        };
        return scatter_ema(area, scale, "Performance", only, None);
    }
    let (points, smooth) = loss.points();
    let xs = points.iter().map(|p| p.0).chain(
        accuracies
            .iter()
            .flat_map(|(s, _, _)| s.steps.iter().copied()),
    );
    let (Some((x0, x1)), Some((y0, y1)), Some((a0, a1))) = (
        step_bounds(xs),
        bounds(points.iter().chain(&smooth).map(|p| p.1)),
        bounds(
            accuracies
                .iter()
                .flat_map(|(s, _, _)| s.values.iter().copied()),
        ),
    ) else {
        return scatter_ema(area, scale, "Performance", loss, None);
    };
    let chart = ChartBuilder::on(&titled(area, "Performance", scale)?)
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(Y_LABELS))
        .right_y_label_area_size(scale.text(RIGHT_LABELS))
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_err)?;
    let (_, h) = area.dim_in_pixel();
    let y_count = label_count(h, scale);
    let mut chart = chart.set_secondary_coord(x0..x1, a0..a1);
    primary(&mut chart, scale, loss, &points, &smooth, y_count)?;
    chart
        .configure_secondary_axes()
        .y_desc("accuracy")
        .label_style(scale.font(12.0))
        .axis_desc_style(scale.font(13.0))
        .y_label_formatter(&|v| tick(*v, a1 - a0))
        .y_labels(y_count)
        .draw()
        .map_err(draw_err)?;
    let width = scale.px(2.5);
    for (series, _, colour) in &accuracies {
        let line = series
            .steps
            .iter()
            .copied()
            .zip(series.values.iter().copied());
        chart
            .draw_secondary_series(LineSeries::new(line, colour.stroke_width(width)))
            .map_err(draw_err)?;
    }
    let legend: Vec<(String, RGBColor)> = accuracies
        .iter()
        .map(|(_, label, colour)| ((*label).to_string(), *colour))
        .collect();
    legend_above(area, chart.plotting_area(), scale, &legend)?;
    Ok(true)
}
