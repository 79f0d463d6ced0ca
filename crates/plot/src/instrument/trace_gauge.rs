//! Cockpit's `trace_gauge`: the Hessian trace (HessTrace summed over layers).

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
        series: &data.trace,
        label: "trace",
        log: false,
    };
    scatter_ema(area, scale, "Trace", main, None)
}
