//! Cockpit's `tic_gauge`: Takeuchi's information criterion, TICDiag with TICTrace on a twin axis (drawn here; the Python plotter raises on TICTrace).

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::DashboardData;

/// Draws the instrument; `false` when its data is missing.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let diag = Plot {
        series: &data.tic_diag,
        label: "TIC (diag)",
        log: false,
    };
    let trace = Plot {
        series: &data.tic_trace,
        label: "TIC (trace)",
        log: false,
    };
    if data.tic_diag.is_empty() {
        return scatter_ema(area, scale, "TIC", trace, None);
    }
    scatter_ema(area, scale, "TIC", diag, Some(trace))
}
