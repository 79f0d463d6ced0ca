//! Cockpit's `early_stopping_gauge`: the evidence-based early-stopping criterion (stop when positive).

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
        series: &data.early_stopping,
        label: "criterion",
        log: false,
    };
    scatter_ema(area, scale, "Early Stopping", main, None)
}
