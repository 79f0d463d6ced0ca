//! Cockpit's `mean_gsnr_gauge`: the mean gradient signal-to-noise ratio.

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::DashboardData;
use plotters::prelude::DrawingBackend;

/// Draws the instrument; `false` when its data is missing.
pub fn draw<DB: DrawingBackend>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let main = Plot {
        series: &data.mean_gsnr,
        label: "mean GSNR",
        log: false,
    };
    scatter_ema(area, scale, "Mean GSNR", main, None)
}
