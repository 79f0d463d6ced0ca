//! Epoch logging: Cockpit's epoch entry and log file, written at burn's epoch ends.

use std::sync::{Arc, Mutex};

use cockpit_quantities::EpochLog;

use super::LOG_FILE;
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

impl State {
    /// An epoch ended: log Cockpit's epoch entry (epoch count, mean training loss, learning
    /// rate), rewrite the log file, run the diagnosis if asked for.
    pub(crate) fn end_epoch(&mut self, learning_rate: Option<f64>) {
        let state = self;
        state.epochs += 1;
        let step = state.step.saturating_sub(1);
        let since = state.last_epoch_step();
        let losses: Vec<f64> = state
            .cockpit
            .output()
            .series("Loss")
            .into_iter()
            .filter(|(s, _)| since.is_none_or(|since| *s > since))
            .filter_map(|(_, v)| v.as_f64())
            .collect();
        let train_loss =
            (!losses.is_empty()).then(|| losses.iter().sum::<f64>() / losses.len() as f64);
        let entry = EpochLog {
            epoch_count: state.epochs,
            train_loss,
            learning_rate,
            ..EpochLog::default()
        };
        if let Err(err) = state.cockpit.log(step, &entry) {
            state.problem(format!("cannot stream the epoch entry: {err}"));
        }
        if let Some(dir) = state.dir.clone()
            && let Err(err) = state.cockpit.write(dir.join(LOG_FILE))
        {
            state.problem(format!("cannot write the Cockpit log: {err}"));
        }
        if let Some(mut monitor) = state.monitor.take() {
            let names = state
                .cockpit
                .parameter_names()
                .map(<[String]>::to_vec)
                .unwrap_or_default();
            for finding in monitor.check(state.cockpit.output(), &names) {
                state.problem(format!(
                    "diagnose [{}] from step {}: {} ({})",
                    finding.code, finding.first_step, finding.message, finding.evidence
                ));
            }
            state.monitor = Some(monitor);
        }
    }

    fn last_epoch_step(&self) -> Option<usize> {
        self.cockpit
            .output()
            .steps()
            .filter(|s| self.cockpit.output().get(*s, "epoch_count").is_some())
            .last()
    }
}
