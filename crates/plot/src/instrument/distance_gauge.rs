//! Cockpit's `distance_gauge`: distance from initialisation (root-sum-of-squares over layers) with the update size on a twin axis.

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::DashboardData;

/// Draws the instrument; `false` when its data is missing.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let distance = Plot {
        series: &data.distance,
        label: "distance",
        log: false,
    };
    let update = Plot {
        series: &data.update_size,
        label: "update size",
        log: false,
    };
    if data.distance.is_empty() {
        return scatter_ema(area, scale, "Distance", update, None);
    }
    scatter_ema(area, scale, "Distance", distance, Some(update))
}
