//! Cockpit's `cabs_gauge`: the batch size CABS suggests.

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
        series: &data.cabs,
        label: "batch size",
        log: false,
    };
    scatter_ema(area, scale, "CABS", main, None)
}
