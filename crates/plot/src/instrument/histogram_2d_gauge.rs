//! Cockpit's `histogram_2d_gauge`: gradient elements against parameter values.

use cockpit_quantities::Histogram2d;
use plotters::prelude::*;

use super::base::{Area, Scale, X_LABELS, Y_LABELS, drawable_edges, number};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{INK, ORANGE, PANEL, viridis};

/// The last GradHist2d (see [`draw_histogram`]).
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    match &data.hist2d {
        Some((step, hist)) => draw_histogram(
            area,
            scale,
            &format!("Gradient/Parameter Histogram (step {step})"),
            hist,
        ),
        None => Ok(false),
    }
}

/// A heatmap of `log10(count + 1)`: parameter values along x, gradient elements along y, with
/// log marginals — parameters on top, gradients on the right — and zero lines.
pub fn draw_histogram<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    title: &str,
    hist: &Histogram2d,
) -> Result<bool, PlotError> {
    let (nx, ny) = hist.bins;
    // Edges that cannot be drawn (a log cut short, edited by hand) leave the panel blank
    // rather than being indexed out of bounds.
    if nx == 0
        || ny == 0
        || nx.checked_mul(ny) != Some(hist.hist.len())
        || !drawable_edges(&hist.x_edges, nx)
        || !drawable_edges(&hist.y_edges, ny)
    {
        return Ok(false);
    }
    // Counts are [x = gradient bins, y = parameter bins]; draw parameters along x.
    let count = |g: usize, p: usize| hist.hist[g * ny + p].max(0) as f64;
    let (g0, g1) = (hist.x_edges[0], hist.x_edges[nx]);
    let (p0, p1) = (hist.y_edges[0], hist.y_edges[ny]);
    let area = area.titled(title, scale.font(17.0)).map_err(draw_err)?;
    let (w, h) = area.dim_in_pixel();
    let margin = (w.min(h) as f64 * 0.18) as u32;
    let (body, right) = area.split_horizontally(w - margin);
    let (top, body) = body.split_vertically(margin);
    let (_, right) = right.split_vertically(margin);

    let max_log = hist
        .hist
        .iter()
        .map(|&c| (c.max(0) as f64 + 1.0).log10())
        .fold(0.0, f64::max)
        .max(1e-12);
    let mut chart = ChartBuilder::on(&body)
        .margin(scale.px(4.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(Y_LABELS))
        .build_cartesian_2d(p0..p1, g0..g1)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("parameter value")
        .y_desc("gradient")
        .label_style(scale.font(11.0))
        .axis_desc_style(scale.font(12.0))
        .x_label_formatter(&|v| number(*v))
        .y_label_formatter(&|v| number(*v))
        .x_labels(4)
        .y_labels(5)
        .draw()
        .map_err(draw_err)?;
    chart
        .draw_series(
            (0..nx)
                .flat_map(|g| (0..ny).map(move |p| (g, p)))
                .map(|(g, p)| {
                    let t = (count(g, p) + 1.0).log10() / max_log;
                    Rectangle::new(
                        [
                            (hist.y_edges[p], hist.x_edges[g]),
                            (hist.y_edges[p + 1], hist.x_edges[g + 1]),
                        ],
                        viridis(t).filled(),
                    )
                }),
        )
        .map_err(draw_err)?;
    for line in [vec![(0.0, g0), (0.0, g1)], vec![(p0, 0.0), (p1, 0.0)]] {
        chart
            .draw_series(LineSeries::new(line, INK.mix(0.4)))
            .map_err(draw_err)?;
    }

    // Marginals (log10 of the summed counts).
    let by_param: Vec<f64> = (0..ny)
        .map(|p| ((0..nx).map(|g| count(g, p)).sum::<f64>() + 1.0).log10())
        .collect();
    let by_grad: Vec<f64> = (0..nx)
        .map(|g| ((0..ny).map(|p| count(g, p)).sum::<f64>() + 1.0).log10())
        .collect();
    let y_area = scale.text(Y_LABELS) + scale.px(4.0);
    let top = top.margin(0, 0, y_area, scale.px(4.0));
    let peak = by_param.iter().copied().fold(1e-12, f64::max);
    let mut marginal = ChartBuilder::on(&top)
        .build_cartesian_2d(p0..p1, 0.0..peak * 1.05)
        .map_err(draw_err)?;
    marginal
        .draw_series(by_param.iter().enumerate().map(|(p, &v)| {
            Rectangle::new(
                [(hist.y_edges[p], 0.0), (hist.y_edges[p + 1], v)],
                ORANGE.filled(),
            )
        }))
        .map_err(draw_err)?;
    let right = right.margin(scale.px(4.0), scale.text(X_LABELS) + scale.px(4.0), 0, 0);
    let peak = by_grad.iter().copied().fold(1e-12, f64::max);
    let mut marginal = ChartBuilder::on(&right)
        .build_cartesian_2d(0.0..peak * 1.05, g0..g1)
        .map_err(draw_err)?;
    marginal
        .draw_series(by_grad.iter().enumerate().map(|(g, &v)| {
            Rectangle::new(
                [(0.0, hist.x_edges[g]), (v, hist.x_edges[g + 1])],
                ORANGE.filled(),
            )
        }))
        .map_err(draw_err)?;
    Ok(true)
}
