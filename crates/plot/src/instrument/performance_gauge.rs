//! Cockpit's `performance_gauge`: loss and accuracies.

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::{DashboardData, Series};
use plotters::prelude::DrawingBackend;

/// The mini-batch loss (points plus moving average) with the accuracies `log()` recorded on a
/// twin axis (training accuracy, else validation accuracy).
pub fn draw<DB: DrawingBackend>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, PlotError> {
    let accuracy: &Series = if data.train_accuracy.is_empty() {
        &data.valid_accuracy
    } else {
        &data.train_accuracy
    };
    let label = if data.train_accuracy.is_empty() {
        "valid accuracy"
    } else {
        "train accuracy"
    };
    let loss = Plot {
        series: &data.loss,
        label: "mini-batch loss",
        log: false,
    };
    let twin = Plot {
        series: accuracy,
        label,
        log: false,
    };
    if data.loss.is_empty() {
        return scatter_ema(area, scale, "Performance", twin, None);
    }
    scatter_ema(area, scale, "Performance", loss, Some(twin))
}
