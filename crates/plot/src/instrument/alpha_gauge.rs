//! Cockpit's `alpha_gauge`: where steps land on a unit parabola.

use plotters::prelude::*;

use super::base::{Area, Scale, X_LABELS, legend_above, number, titled};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{BAR_GREY, BLUE, INK, PANEL};

const X: f64 = 1.5;
const Y: f64 = 1.75;
const BINS: usize = 30;

/// The unit parabola `y = x²` on `[−1.5, 1.5]` with lines at α = −1, 0, 1, and histograms of
/// all α (grey) and of the last 10 % (blue), scaled to the panel; values beyond ±1.5 count in
/// the edge bins and are marked with an arrow and their number; a line says how a healthy run
/// reads (SGD just above 0, Adam below 0). Needs two values.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let alphas = &data.alpha.values;
    if alphas.len() < 2 {
        return Ok(false);
    }
    let recent = &alphas[alphas.len() - (alphas.len() / 10).max(1)..];
    let mut chart = ChartBuilder::on(&titled(area, "Alpha", scale)?)
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(52.0))
        .build_cartesian_2d(-X..X, 0.0..Y)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        // How to read it (Schneider et al. 2021 for SGD; an adaptive optimizer's steps are
        // its own, short and cautious where it is well tuned).
        .x_desc("local step length α (healthy: SGD just above 0, Adam below 0)")
        .label_style(scale.font(12.0))
        .axis_desc_style(scale.font(13.0))
        .x_label_formatter(&|v| number(*v))
        .y_label_formatter(&|v| number(*v))
        .draw()
        .map_err(draw_err)?;

    let all = histogram(alphas);
    let last = histogram(recent);
    let width = 2.0 * X / BINS as f64;
    for (counts, colour, share) in [(&all, BAR_GREY, 1.0), (&last, BLUE, 0.6)] {
        let max = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, &c)| {
                        let x = -X + i as f64 * width;
                        let pad = width * (1.0 - share) / 2.0;
                        Rectangle::new(
                            [(x + pad, 0.0), (x + width - pad, 1.5 * c as f64 / max)],
                            colour.mix(0.75).filled(),
                        )
                    }),
            )
            .map_err(draw_err)?;
    }
    let parabola: Vec<(f64, f64)> = (0..=120)
        .map(|i| -X + 2.0 * X * i as f64 / 120.0)
        .map(|x| (x, x * x))
        .collect();
    chart
        .draw_series(LineSeries::new(parabola, INK.stroke_width(scale.px(2.0))))
        .map_err(draw_err)?;
    for x in [-1.0, 0.0, 1.0] {
        chart
            .draw_series(LineSeries::new(
                vec![(x, 0.0), (x, Y)],
                INK.mix(0.5).stroke_width(1),
            ))
            .map_err(draw_err)?;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let legend = [
        (format!("all: μ = {}", number(mean(alphas))), BAR_GREY),
        (format!("last 10%: μ = {}", number(mean(recent))), BLUE),
    ];
    legend_above(area, chart.plotting_area(), scale, &legend)?;
    let (below, above) = (
        alphas.iter().filter(|a| **a < -X).count(),
        alphas.iter().filter(|a| **a > X).count(),
    );
    for (count, x, arrow) in [(below, -1.45, "◀"), (above, 1.2, "▶")] {
        if count > 0 {
            chart
                .draw_series([Text::new(
                    format!("{arrow} {count}"),
                    (x, 0.35),
                    scale.font(13.0),
                )])
                .map_err(draw_err)?;
        }
    }
    Ok(true)
}

/// Counts in `BINS` bins over `[−1.5, 1.5]`, out-of-range values in the edge bins.
fn histogram(values: &[f64]) -> Vec<usize> {
    let mut counts = vec![0; BINS];
    for v in values {
        let i = ((v + X) / (2.0 * X) * BINS as f64).floor();
        counts[i.clamp(0.0, (BINS - 1) as f64) as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_range_values_land_in_the_edge_bins() {
        let h = super::histogram(&[-9.0, 0.0, 9.0, 1.49]);
        assert_eq!((h[0], h[15], h[29]), (1, 1, 2));
    }
}
