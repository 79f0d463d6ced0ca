//! A gauge for any quantity with a number per step (a scalar, or a per-parameter list reduced
//! as its spec says): the network-wide value over the iterations and its moving average. A
//! quantity beyond Cockpit's own instruments is drawn by naming its kind in the dashboard's
//! list ([`SECONDARY_QUANTITIES`](crate::dashboard::SECONDARY_QUANTITIES)).

use cockpit_quantities::QuantityKind;

use super::base::{Area, Plot, Scale, scatter_ema};
use crate::PlotError;
use crate::data::DashboardData;

/// Draws `kind`'s series; `false` when the log has none.
///
/// # Errors
///
/// [`PlotError::Draw`] if the backend fails.
pub fn draw<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
    kind: QuantityKind,
) -> Result<bool, PlotError> {
    let Some(series) = data.quantities.get(&kind) else {
        return Ok(false);
    };
    let main = Plot {
        series,
        label: kind.name(),
        log: false,
    };
    scatter_ema(area, scale, kind.name(), main, None)
}
