//! Cockpit's `gradient_tests_gauge`: the norm, inner-product and orthogonality tests.

use plotters::prelude::*;

use super::base::{
    Area, Plot, Points, Scale, X_LABELS, bounds, inside, label_count, legend_above, number,
    power_of_ten, step_bounds, tick, titled,
};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{BLUE, GREEN, INK, ORANGE, PANEL};

const LINTHRESH: f64 = 0.1;
const LIMIT: f64 = 2.0;

/// matplotlib's symlog with `linthresh` 0.1 and `linscale` 1: linear within ±0.1, one decade
/// per unit outside.
pub fn symlog(x: f64) -> f64 {
    let a = x.abs();
    let y = if a <= LINTHRESH {
        a / LINTHRESH
    } else {
        1.0 + (a / LINTHRESH).log10()
    };
    y.copysign(x)
}

/// Centre: symlog axes on ±2 with a "+" at 0, a circle of radius = the last NormTest, a
/// horizontal band ±(last InnerTest) and a vertical band ±(last OrthoTest) — a test is passed
/// while the gradient's noise stays inside its shape. Right: the three tests' histories on
/// log axes.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let (norm, inner, ortho) = (
        data.norm_test.last(),
        data.inner_test.last(),
        data.ortho_test.last(),
    );
    if norm.is_none() && inner.is_none() && ortho.is_none() {
        return Ok(false);
    }
    let (w, _) = area.dim_in_pixel();
    let (centre, histories) = area.split_horizontally(w * 11 / 20);
    let s = symlog(LIMIT);
    let mut chart = ChartBuilder::on(&titled(&centre, "Gradient Tests", scale)?)
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(52.0))
        .build_cartesian_2d(-s..s, -s..s)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    let unsymlog = |v: &f64| {
        let a = v.abs();
        let x = if a <= 1.0 {
            a * LINTHRESH
        } else {
            LINTHRESH * 10f64.powf(a - 1.0)
        };
        number(x.copysign(*v))
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("orthogonal")
        .y_desc("parallel")
        .label_style(scale.font(11.0))
        .axis_desc_style(scale.font(12.0))
        .x_label_formatter(&unsymlog)
        .y_label_formatter(&unsymlog)
        .x_labels(5)
        .y_labels(5)
        .draw()
        .map_err(draw_err)?;
    if let Some(inner) = inner.filter(|v| *v > 0.0) {
        let y = symlog(inner).min(s);
        chart
            .draw_series([Rectangle::new([(-s, -y), (s, y)], ORANGE.mix(0.3).filled())])
            .map_err(draw_err)?;
    }
    if let Some(ortho) = ortho.filter(|v| *v > 0.0) {
        let x = symlog(ortho).min(s);
        chart
            .draw_series([Rectangle::new([(-x, -s), (x, s)], GREEN.mix(0.3).filled())])
            .map_err(draw_err)?;
    }
    if let Some(norm) = norm.filter(|v| *v > 0.0) {
        let circle: Vec<(f64, f64)> = (0..=180)
            .map(|i| std::f64::consts::TAU * i as f64 / 180.0)
            .map(|t| (symlog(norm * t.cos()), symlog(norm * t.sin())))
            .collect();
        chart
            .draw_series([Polygon::new(circle.clone(), BLUE.mix(0.3).filled())])
            .map_err(draw_err)?;
        chart
            .draw_series(LineSeries::new(circle, BLUE.stroke_width(scale.px(2.0))))
            .map_err(draw_err)?;
    }
    chart
        .draw_series([Cross::new((0.0, 0.0), scale.px(6.0), INK.stroke_width(2))])
        .map_err(draw_err)?;

    histories_chart(&histories, scale, data)?;
    Ok(true)
}

/// The three tests' histories in one chart on a log axis, each in its colour in the centre
/// drawing (norm blue, inner orange, ortho green): points and their moving average, a legend
/// above. One chart rather than three stacked keeps its plot as tall as the centre's.
fn histories_chart<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<(), PlotError> {
    let tests: Vec<(&str, RGBColor, Points, Points)> = [
        ("norm", BLUE, &data.norm_test),
        ("inner", ORANGE, &data.inner_test),
        ("ortho", GREEN, &data.ortho_test),
    ]
    .into_iter()
    .map(|(label, colour, series)| {
        let (points, smooth) = Plot {
            series,
            label,
            log: true,
        }
        .points();
        (label, colour, points, smooth)
    })
    .collect();
    let all = || tests.iter().flat_map(|(_, _, p, s)| p.iter().chain(s));
    let (Some((x0, x1)), Some((y0, y1))) =
        (step_bounds(all().map(|p| p.0)), bounds(all().map(|p| p.1)))
    else {
        return Ok(());
    };
    let mut chart = ChartBuilder::on(&titled(area, "Histories", scale)?)
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(52.0))
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    let span = y1 - y0;
    let y_label = |v: &f64| {
        if span >= 1.0 {
            power_of_ten(*v)
        } else {
            number(10f64.powf(*v))
        }
    };
    let (_, h) = area.dim_in_pixel();
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("iteration")
        .label_style(scale.font(11.0))
        .axis_desc_style(scale.font(12.0))
        .x_label_formatter(&|v| tick(*v, x1 - x0))
        .y_label_formatter(&y_label)
        .x_labels(4)
        .y_labels(label_count(h, scale))
        .draw()
        .map_err(draw_err)?;
    let (xr, yr) = (x0..x1, y0..y1);
    for (_, colour, points, smooth) in &tests {
        let smooth = inside(smooth, &xr, &yr);
        chart
            .draw_series(LineSeries::new(smooth, colour.stroke_width(scale.px(2.0))))
            .map_err(draw_err)?;
        chart
            .draw_series(
                inside(points, &xr, &yr)
                    .into_iter()
                    .map(|p| Circle::new(p, scale.px(2.5), colour.mix(0.8).filled())),
            )
            .map_err(draw_err)?;
    }
    let legend: Vec<(String, RGBColor)> = tests
        .iter()
        .map(|(label, colour, _, _)| ((*label).to_string(), *colour))
        .collect();
    legend_above(area, chart.plotting_area(), scale, &legend)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::symlog;

    #[test]
    fn symlog_is_linear_inside_and_logarithmic_outside() {
        assert!((symlog(0.05) - 0.5).abs() < 1e-12);
        assert!((symlog(-1.0) + 2.0).abs() < 1e-12);
        assert!((symlog(10.0) - 3.0).abs() < 1e-12);
    }
}
