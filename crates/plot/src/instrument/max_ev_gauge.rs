//! Cockpit's `max_ev_gauge`: the Hessian's largest eigenvalue (HessMaxEV) on a log axis.

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
        series: &data.max_ev,
        label: "max eigenvalue",
        log: true,
    };
    scatter_ema(area, scale, "Max Eigenvalue", main, None)
}
