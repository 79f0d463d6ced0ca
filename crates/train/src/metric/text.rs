//! A text metric per Cockpit histogram.

use std::sync::Arc;

use burn::tensor::TensorReadError;
use burn::train::metric::{Metric, MetricMetadata, MetricName, SerializedEntry};

use super::base::{EpochSink, metric_name, text_value};
use crate::board::Board;

/// A Cockpit histogram (GradHist1d, GradHist2d) as a text burn-train metric: one line per
/// tracked step with the range, the count and a bar per bin. The histogram itself is in the
/// Cockpit log.
///
/// Made only by [`CockpitLearner::register`](crate::CockpitLearner::register), which
/// registers it on the training split.
#[derive(Clone)]
pub struct CockpitTextMetric {
    key: String,
    name: MetricName,
    board: Arc<Board>,
    updates: usize,
    last: Option<String>,
}

impl CockpitTextMetric {
    pub(crate) fn new(key: String, board: Arc<Board>) -> Self {
        Self {
            name: Arc::new(metric_name(&key)),
            key,
            board,
            updates: 0,
            last: None,
        }
    }
}

impl Metric for CockpitTextMetric {
    type Input = ();

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn description(&self) -> Option<String> {
        Some(format!(
            "Cockpit's {} (the histogram is in the Cockpit log)",
            self.key
        ))
    }

    fn update(
        &mut self,
        _item: &(),
        _metadata: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        self.updates += 1;
        Ok(match self.board.take(self.updates, &self.key) {
            Some((step, value)) => {
                let text = format!("step {step} {}", text_value(&value));
                self.last = Some(text.clone());
                SerializedEntry::new(text.clone(), text)
            }
            None => SerializedEntry::not_available(None),
        })
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        Ok(match &self.last {
            Some(text) => SerializedEntry::new(text.clone(), text.clone()),
            None => SerializedEntry::not_available(None),
        })
    }

    fn clear(&mut self) {
        self.last = None;
    }
}

/// The adapter's warnings in burn's dashboard: how many there are and the latest (a quantity
/// that could not be computed, plain layers that the per-sample engine does not cover, a step
/// whose loss was not handed over). All of them are in
/// [`CockpitLearner::warnings`](crate::CockpitLearner::warnings) and were printed to stderr.
///
/// Always registered, it also reports burn's epoch ends to the adapter (Cockpit's epoch entry,
/// the log file, the diagnosis), whatever quantities are configured.
///
/// Made only by [`CockpitLearner::register`](crate::CockpitLearner::register).
#[derive(Clone)]
pub struct CockpitNotesMetric {
    name: MetricName,
    board: Arc<Board>,
    epoch: Arc<dyn EpochSink>,
    learning_rate: Option<f64>,
}

impl CockpitNotesMetric {
    pub(crate) fn new(board: Arc<Board>, epoch: Arc<dyn EpochSink>) -> Self {
        Self {
            name: Arc::new("Cockpit notes".to_string()),
            board,
            epoch,
            learning_rate: None,
        }
    }

    fn entry(&self) -> SerializedEntry {
        match self.board.notes() {
            (0, _) | (_, None) => SerializedEntry::new("none".into(), "none".into()),
            (count, Some(latest)) => {
                let text = format!("{count} (latest: {latest})");
                SerializedEntry::new(text.clone(), text)
            }
        }
    }
}

impl Metric for CockpitNotesMetric {
    type Input = ();

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn description(&self) -> Option<String> {
        Some("Cockpit's warnings: quantities not computed and why".into())
    }

    fn update(
        &mut self,
        _item: &(),
        metadata: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        if let Some(lr) = &metadata.lr {
            self.learning_rate = Some(lr.base());
        }
        Ok(self.entry())
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        self.epoch.end_epoch(self.learning_rate);
        Ok(self.entry())
    }

    fn clear(&mut self) {}
}
