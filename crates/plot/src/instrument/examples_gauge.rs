//! The examples view (beyond Cockpit): how concentrated the gradient is on few examples over
//! the iterations, and which examples carried the last tracked step's gradient.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::DashboardData;
use crate::error::draw_err;
use crate::style::INK;

/// How many of the last step's examples are listed.
const LISTED: usize = 10;

/// Draws the concentration (left) and the last step's largest shares (right); `false` when
/// the log has no Examples.
///
/// # Errors
///
/// [`PlotError::Draw`] if the backend fails.
pub fn draw<DB: DrawingBackend>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let Some((step, top)) = &data.examples_top else {
        return Ok(false);
    };
    let (w, _) = area.dim_in_pixel();
    let (chart, list) = area.split_horizontally(w * 3 / 5);
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
