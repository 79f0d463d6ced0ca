//! Cockpit's `trace_gauge`: the Hessian trace (HessTrace summed over layers). Where the trace
//! is an estimate (Hutchinson's probes), the title says so, with its typical standard error.

use crate::data::DashboardData;
use crate::instrument::base::{Area, Plot, Scale, scatter_ema};

/// Draws the instrument; `false` when its data is missing.
///
/// # Errors
///
/// [`PlotError::Draw`](crate::PlotError::Draw) if the backend fails.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
) -> Result<bool, crate::PlotError> {
    let main = Plot {
        series: &data.trace,
        label: "trace",
        log: false,
    };
    let title = match median(&data.trace_stderr.values) {
        Some(stderr) => format!("Trace (estimate, standard error ~{stderr:.2e})"),
        None => "Trace".to_string(),
    };
    scatter_ema(area, scale, &title, main, None)
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}
