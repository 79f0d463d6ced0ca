//! burn-train metrics that report the Cockpit's values.

mod base;
mod numeric;
mod text;

pub(crate) use base::EpochSink;
pub use base::{MetricForm, metric_name, text_value};
pub use numeric::CockpitMetric;
pub use text::{CockpitNotesMetric, CockpitTextMetric};
