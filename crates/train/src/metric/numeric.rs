//! A numeric metric per Cockpit quantity.

use std::sync::Arc;

use burn::tensor::TensorReadError;
use burn::train::metric::state::{FormatOptions, NumericMetricState};
use burn::train::metric::{
    Metric, MetricAttributes, MetricMetadata, MetricName, Numeric, NumericAttributes, NumericEntry,
    SerializedEntry,
};

use super::base::metric_name;
use crate::board::Board;
use cockpit_quantities::QuantityKind;

/// A Cockpit quantity as a numeric burn-train metric (`Cockpit GradNorm`, …).
///
/// Each update reports the value the Cockpit computed in that training iteration: for most
/// quantities the value of that step; for the two-step quantities (Distance, UpdateSize,
/// Alpha), which need θ_{t+1}, the value of the previous step. Iterations without a value (off
/// the schedule, or not computable) log nothing. The Cockpit log keeps every value under its
/// own step. The epoch value is the mean of the epoch's values.
///
/// Made only by [`CockpitLearner::register`](crate::CockpitLearner::register), which
/// registers it on the training split.
#[derive(Clone)]
pub struct CockpitMetric {
    key: String,
    /// The quantity's class: how a layer-wise value becomes one number (the key may be a
    /// variant's, such as `HessTrace[ggn]`, that names no class).
    kind: QuantityKind,
    name: MetricName,
    board: Arc<Board>,
    state: NumericMetricState,
    updates: usize,
    current: Option<f64>,
}

impl CockpitMetric {
    pub(crate) fn new(key: String, kind: QuantityKind, board: Arc<Board>) -> Self {
        Self {
            name: Arc::new(metric_name(&key)),
            key,
            kind,
            board,
            state: NumericMetricState::default(),
            updates: 0,
            current: None,
        }
    }

    fn format(&self) -> FormatOptions {
        FormatOptions::new(self.name.clone()).precision(4)
    }
}

impl Metric for CockpitMetric {
    type Input = ();

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn description(&self) -> Option<String> {
        Some(format!(
            "Cockpit's {} (layer-wise values reduced over layers as Cockpit's instruments draw them)",
            self.key
        ))
    }

    fn attributes(&self) -> MetricAttributes {
        NumericAttributes {
            unit: None,
            higher_is_better: false,
        }
        .into()
    }

    fn update(
        &mut self,
        _item: &(),
        _metadata: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        self.updates += 1;
        self.current = self
            .board
            .take(self.updates, &self.key)
            .and_then(|(_, value)| self.kind.network_value(&value));
        Ok(match self.current {
            Some(value) => {
                self.state.update(value, 1);
                self.state.compute_update(self.format())
            }
            None => SerializedEntry::not_available(None),
        })
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        Ok(self.state.compute_final(self.format()))
    }

    fn clear(&mut self) {
        self.state.reset();
        self.current = None;
    }
}

impl Numeric for CockpitMetric {
    fn value(&self) -> Option<NumericEntry> {
        self.current.map(NumericEntry::Value)
    }

    fn running_value(&self) -> Option<NumericEntry> {
        self.current.map(|_| self.state.running_value())
    }

    fn final_value(&self) -> NumericEntry {
        self.state.final_value()
    }
}
