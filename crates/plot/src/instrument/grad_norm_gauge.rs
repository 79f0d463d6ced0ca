//! Cockpit's `grad_norm_gauge`: the root-sum-of-squares of the layer-wise gradient norms, points plus moving average.

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
        series: &data.grad_norm,
        label: "gradient norm",
        log: false,
    };
    scatter_ema(area, scale, "Gradient Norm", main, None)
}
