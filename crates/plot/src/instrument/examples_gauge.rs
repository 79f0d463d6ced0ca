//! The examples view (beyond Cockpit): how concentrated the gradient is on few examples over
//! the iterations, and which examples carried the last tracked step's gradient.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::{GREEN, INK, ORANGE, PANEL};

/// How many of the last step's examples are listed.
const LISTED: usize = 10;

/// Draws the concentration (left) and the last step's largest shares (right); `false` when
/// the log has no Examples.
///
/// # Errors
///
/// [`PlotError::Draw`] if the backend fails.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let Some((step, top)) = &data.examples_top else {
        return Ok(false);
    };
    let (w, _) = area.dim_in_pixel();
    let (chart, list) = match &data.examples_map {
        Some(map) => {
            let (left, rest) = area.split_horizontally(w * 2 / 5);
            let (middle, list) = rest.split_horizontally(w * 3 / 10);
            draw_map(&middle, scale, map)?;
            (left, list)
        }
        None => area.split_horizontally(w * 3 / 5),
    };
    scatter_ema(
        &chart,
        scale,
        "Examples: share of the batch carrying half of Σ‖g_n‖²",
        Plot {
            series: &data.examples_half,
            label: "share of the batch",
            log: false,
        },
        None,
    )?;
    let line = scale.px(24.0) as i32;
    let x = scale.px(12.0) as i32;
    let mut y = scale.px(12.0) as i32;
    let mut text = |words: String, size: f64| -> Result<(), PlotError> {
        list.draw(&Text::new(
            words,
            (x, y),
            scale
                .font(size)
                .color(&INK)
                .pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(draw_err)?;
        y += line;
        Ok(())
    };
    text(
        format!(
            "step {step}: {} of {} examples carry half",
            top.half, top.batch
        ),
        14.0,
    )?;
    let who = if top.ids_known { "id" } else { "position" };
    text(format!("{who:>10}   share    loss"), 13.0)?;
    for example in top.top.iter().take(LISTED) {
        text(
            format!(
                "{:>10}  {:>5.1} %  {:>6.3}",
                example.id,
                100.0 * example.share,
                example.loss
            ),
            13.0,
        )?;
    }
    if !top.ids_known {
        text("(no sample ids: positions in the batch)".into(), 12.0)?;
    }
    Ok(true)
}

/// The data map in the examples view: each example at its variability (x) and confidence
/// (y), coloured by its region (easy green, ambiguous orange, hard red), the run's borders.
fn draw_map<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    map: &crate::data::ExamplesMap,
) -> Result<(), PlotError> {
    let (points, borders) = (&map.points, &map.borders);
    use cockpit_quantities::examples::Region;
    let x_max = points.iter().map(|p| p.0).fold(0.05_f64, f64::max) * 1.08;
    let mut chart = ChartBuilder::on(&super::base::titled(area, "Data map", scale)?)
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(super::base::X_LABELS))
        .y_label_area_size(scale.text(40.0))
        .build_cartesian_2d(0.0..x_max.min(1.0), 0.0..1.0)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("variability")
        .y_desc("confidence")
        .label_style(scale.font(11.0))
        .axis_desc_style(scale.font(12.0))
        .x_labels(3)
        .y_labels(3)
        .draw()
        .map_err(draw_err)?;
    let radius = scale.px(2.0).max(1);
    let red = RGBColor(0xc0, 0x39, 0x2b);
    chart
        .draw_series(points.iter().map(|(x, y, region)| {
            let colour = match region {
                Region::EasyToLearn => GREEN,
                Region::Ambiguous => ORANGE,
                _ => red,
            };
            Circle::new((*x, *y), radius, colour.mix(0.6).filled())
        }))
        .map_err(draw_err)?;
    crate::map::draw_borders(&mut chart, borders, 1)
}
