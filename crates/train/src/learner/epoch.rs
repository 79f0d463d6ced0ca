//! Epoch logging: Cockpit's epoch entry and log file, written at burn's epoch ends.

use std::sync::{Arc, Mutex};

use super::state::State;
use crate::metric::EpochSink;

/// The one handle that writes the epoch entry; given to one metric by
/// [`CockpitLearner::register`](crate::CockpitLearner::register).
pub(crate) struct EpochWriter(pub(crate) Arc<Mutex<State>>);

impl EpochSink for EpochWriter {
    fn end_epoch(&self, learning_rate: Option<f64>) {
        State::lock(&self.0).end_epoch(learning_rate);
    }
}
