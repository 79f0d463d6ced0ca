//! The step records: values the Cockpit computed in one training iteration, kept until every
//! registered metric has read its own. The narrow handle metrics hold: they can read values,
//! nothing else of the Cockpit.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cockpit_quantities::Value;
use cockpit_quantities::sink::{self, Origin, Sink};

/// The values of one training iteration, until every metric read them.
#[derive(Debug)]
struct Record {
    /// Output key → (step the value is stored under, value).
    values: BTreeMap<String, (usize, Value)>,
    readers_left: usize,
}

#[derive(Debug, Default)]
struct Records {
    by_iteration: BTreeMap<usize, Record>,
    readers: usize,
}

/// Values per training iteration, written by the adapter after each tracked step and read
/// (once each) by the metrics.
#[derive(Debug, Default)]
pub(crate) struct Board {
    records: Mutex<Records>,
    /// The adapter's warnings so far (each once), for the notes metric.
    notes: Mutex<Vec<String>>,
    /// The training iteration being tracked ([`Board::begin`]), whose record the sink fills.
    iteration: AtomicUsize,
}

/// The board as one of the Learner's Cockpit's sinks: each tracked step's values become the
/// record of the iteration being run, for the metrics to read. Epoch entries are not a
/// metric's (burn ends the epoch itself).
#[derive(Debug, Clone)]
pub(crate) struct BoardSink(pub(crate) Arc<Board>);

impl Sink for BoardSink {
    fn write(&mut self, record: &sink::Record<'_>) -> Result<(), sink::SinkError> {
        if record.origin == Origin::Tracked {
            let values = record
                .values
                .iter()
                .map(|(at, key, value)| (key.to_string(), (at, value.clone())))
                .collect();
            self.0
                .publish(self.0.iteration.load(Ordering::Relaxed), values);
        }
        Ok(())
    }
}

impl Board {
    fn lock(&self) -> MutexGuard<'_, Records> {
        // Every update is a single assignment: a poisoned lock still holds consistent data.
        self.records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Adds a warning for the notes metric.
    pub(crate) fn note(&self, message: String) {
        self.notes
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(message);
    }

    /// How many warnings there are, and the latest.
    pub(crate) fn notes(&self) -> (usize, Option<String>) {
        let notes = self
            .notes
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        (notes.len(), notes.last().cloned())
    }

    /// The values the sink receives next belong to `iteration` (1-based, as metric updates
    /// count).
    pub(crate) fn begin(&self, iteration: usize) {
        self.iteration.store(iteration, Ordering::Relaxed);
    }

    /// One more metric will read every record.
    pub(crate) fn add_reader(&self) {
        self.lock().readers += 1;
    }

    /// Publishes the values computed during `iteration` (1-based, as metric updates count).
    pub(crate) fn publish(&self, iteration: usize, values: BTreeMap<String, (usize, Value)>) {
        let mut records = self.lock();
        if values.is_empty() || records.readers == 0 {
            return;
        }
        let readers_left = records.readers;
        records.by_iteration.insert(
            iteration,
            Record {
                values,
                readers_left,
            },
        );
    }

    /// The value of `key` for the metric's `update`-th call; the record goes once every reader
    /// has been served.
    pub(crate) fn take(&self, update: usize, key: &str) -> Option<(usize, Value)> {
        let mut records = self.lock();
        let record = records.by_iteration.get_mut(&update)?;
        let value = record.values.remove(key);
        record.readers_left = record.readers_left.saturating_sub(1);
        if record.readers_left == 0 {
            records.by_iteration.remove(&update);
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reader_takes_its_value_and_the_record_goes_after_the_last() {
        let board = Board::default();
        board.add_reader();
        board.add_reader();
        let values = BTreeMap::from([
            ("Loss".to_string(), (0, Value::Float(1.0))),
            ("GradNorm".to_string(), (0, Value::List(vec![3.0]))),
        ]);
        board.publish(1, values);
        assert_eq!(board.take(1, "Loss"), Some((0, Value::Float(1.0))));
        assert_eq!(board.take(2, "Loss"), None);
        assert!(board.take(1, "GradNorm").is_some());
        assert!(board.lock().by_iteration.is_empty());
    }

    #[test]
    fn nothing_is_kept_without_readers() {
        let board = Board::default();
        board.publish(1, BTreeMap::from([("Loss".into(), (0, Value::Float(1.0)))]));
        assert!(board.lock().by_iteration.is_empty());
    }
}
