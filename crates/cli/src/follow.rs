//! [`Follower`]: a growing log followed at the cost of what was appended, for `cockpit serve`.
//!
//! A JSON-lines stream (`.jsonl`, what a running training writes) is read by its tail
//! ([`StreamTail`]): each look reads the bytes appended since the last one and merges their
//! lines into the output in place. A run record is read as an overview
//! ([`RecordReader::read_overview`]) once, then by the steps after the last one shown; when
//! the shown run holds twice the overview's steps it is read as an overview again, so memory
//! stays bounded whatever the run's length. Cockpit's JSON log (`.json`) is rewritten whole by
//! each `Cockpit::write`, so each change of it is read whole.
//!
//! The diagnosis reads the whole run. It reruns in full when the run has grown by
//! [`RERUN_FRACTION`] of its steps since it last ran (at least one step), or
//! [`RERUN_AFTER`] after it last ran if anything arrived since, and at once when the log was
//! rewritten: on a run of `n` steps written one at a time that is every `n/64` steps (about
//! `64·(2 + ln(n/64))` reruns in all), so its cost per appended step stays about 64 times its
//! cost per step, not `n` times.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cockpit_diagnose::Diagnoser;
use cockpit_quantities::Output;
use cockpit_quantities::log::{Reader, StreamTail, read_any_with};
use cockpit_quantities::persample::ErrorChain;
use cockpit_quantities::record::{DEFAULT_OVERVIEW_STEPS, RecordReader, is_record};

/// The diagnosis reruns once the run grew by this fraction of its steps (1/64).
pub const RERUN_FRACTION: usize = 64;
/// ... or this long after its last run, if anything arrived since.
pub const RERUN_AFTER: Duration = Duration::from_secs(10);

/// What one [`Follower::look`] changed.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Look {
    /// The shown output changed.
    pub changed: bool,
    /// The shown output's last step.
    pub last_step: Option<usize>,
    /// The diagnosis verdict, when it was rerun by this look.
    pub verdict: Option<String>,
    /// What is wrong with the log now (a bad line, a log that went back), if anything.
    pub problem: Option<String>,
}

/// Follows one log (see the module's documentation).
#[derive(Debug)]
pub struct Follower {
    log: PathBuf,
    /// The stream's tail (`.jsonl` only).
    tail: Option<StreamTail>,
    /// How a JSON log is read whole.
    reader: Reader,
    /// A rewritten log being read while it is behind the shown run (which stays on the page
    /// until the new one catches up).
    pending: Option<Output>,
    /// The shown run's last step and the time when the diagnosis last ran.
    diagnosed: Option<(Option<usize>, Instant)>,
    /// Something arrived since the diagnosis last ran.
    undiagnosed: bool,
    /// Following a run record: the last step shown from it (the record is opened at each
    /// look, so a record replaced by a new run is seen as such).
    record: Option<Option<u64>>,
}

impl Follower {
    /// A follower of `log`, nothing read yet, reading within `reader`'s limit.
    pub fn new(reader: &Reader, log: impl AsRef<Path>) -> Self {
        let log = log.as_ref().to_path_buf();
        let tail = log
            .extension()
            .is_some_and(|e| e == "jsonl")
            .then(|| StreamTail::with_reader(reader, &log));
        Self {
            log,
            tail,
            reader: *reader,
            pending: None,
            diagnosed: None,
            undiagnosed: false,
            record: None,
        }
    }

    /// Reads a run record's new steps into `shown` (see the module's documentation).
    fn look_at_record(&mut self, shown: &mut Output) -> Result<bool, String> {
        let words = |err: cockpit_quantities::record::RecordError| ErrorChain(&err).to_string();
        let mut reader = RecordReader::open(&self.log).map_err(words)?;
        let seen = self.record.get_or_insert(None);
        let last = reader.summary().map_err(words)?.last;
        let went_back = matches!((last, *seen), (Some(l), Some(s)) if l < s) || last.is_none();
        let too_many = shown.steps().count() > 2 * DEFAULT_OVERVIEW_STEPS;
        if seen.is_none() || went_back || too_many {
            // A record resumed from an earlier checkpoint was cut back: shown as it is now.
            *shown = reader
                .read_overview(DEFAULT_OVERVIEW_STEPS)
                .map_err(words)?;
            *seen = last;
            return Ok(true);
        }
        if last == *seen {
            return Ok(false);
        }
        let from = seen.map_or(0, |s| s + 1);
        let appended = reader.read_range(from, u64::MAX).map_err(words)?;
        if shown.parameter_names().is_empty() {
            shown.set_parameter_names(appended.parameter_names().to_vec());
        }
        shown.merge(appended);
        *seen = last;
        Ok(true)
    }

    /// Reads what changed in the log into `shown`, and reruns the diagnosis when it is due.
    /// A log that went back (cut, or rewritten by a new run) leaves `shown` as it was, says so
    /// in [`Look::problem`], and replaces it once the new run has caught up.
    ///
    /// # Errors
    ///
    /// The log's read error, in words (the file is not there yet, unreadable, too large).
    pub fn look(&mut self, shown: &mut Output) -> Result<Look, String> {
        let mut look = Look::default();
        let words = |err: &cockpit_quantities::log::LogError| ErrorChain(err).to_string();
        match &mut self.tail {
            Some(tail) => {
                if self.pending.is_none() && tail.rewritten().map_err(|e| words(&e))? {
                    self.pending = Some(Output::new());
                }
                let target = self.pending.as_mut().unwrap_or(shown);
                let tailed = tail.poll_into(target).map_err(|e| words(&e))?;
                look.changed = tailed.lines > 0 || tailed.restarted;
                look.problem = tailed
                    .problem
                    .map(|e| format!("{}; showing the lines before it", words(&e)));
            }
            None if self.record.is_some() || is_record(&self.log) => {
                look.changed = self.look_at_record(shown)?;
            }
            None => {
                let read = read_any_with(&self.reader, &self.log).map_err(|e| words(&e))?;
                self.pending = Some(read);
                look.changed = true;
            }
        }
        if let Some(pending) = self.pending.take() {
            let (was, now) = (shown.last_step(), pending.last_step());
            if was.is_some() && now < was {
                look.problem = Some(format!(
                    "the log went back from step {} to {}: showing the last good read (was it \
                     cut or rewritten?)",
                    was.unwrap_or_default(),
                    now.map_or_else(|| "no step".to_string(), |s| format!("step {s}"))
                ));
                look.changed = false;
                self.pending = self.tail.is_some().then_some(pending);
            } else {
                *shown = pending;
                self.diagnosed = None;
            }
        }
        look.last_step = shown.last_step();
        self.undiagnosed |= look.changed;
        if self.diagnosis_due(look.last_step) {
            let diagnosis = Diagnoser::new().run(shown);
            look.verdict = Some(
                diagnosis
                    .summary
                    .unwrap_or_else(|| "nothing flagged".to_string()),
            );
            self.diagnosed = Some((look.last_step, Instant::now()));
            self.undiagnosed = false;
        }
        Ok(look)
    }

    /// Whether the diagnosis should rerun for a run whose last step is `last`.
    fn diagnosis_due(&self, last: Option<usize>) -> bool {
        let Some((at_step, at_time)) = self.diagnosed else {
            return true;
        };
        if !self.undiagnosed {
            return false;
        }
        let grown = last.unwrap_or(0).saturating_sub(at_step.unwrap_or(0));
        grown >= (last.unwrap_or(0) / RERUN_FRACTION).max(1) || at_time.elapsed() >= RERUN_AFTER
    }
}

#[cfg(test)]
mod tests {
    use cockpit_quantities::Value;
    use cockpit_quantities::log::{JsonLinesWriter, read_stream};

    use super::*;

    fn line(step: usize) -> Output {
        let mut values = Output::new();
        values.insert(step, "Loss", Value::Float(1.0 / (1.0 + step as f64)));
        values
    }

    /// At every look the shown run equals a full read; the diagnosis reruns on the schedule
    /// (first look, then every n/64 steps, at least every step early on) and its verdict
    /// equals a full diagnosis of the run at that look.
    #[test]
    fn a_followed_stream_equals_a_full_read_and_the_diagnosis_reruns_on_schedule() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut writer = JsonLinesWriter::create(&path).unwrap();
        let mut follower = Follower::new(&Reader::default(), &path);
        let mut shown = Output::new();
        let mut reruns = Vec::new();
        for step in 0..400 {
            writer.append(step, &line(step)).unwrap();
            let look = follower.look(&mut shown).unwrap();
            assert!(look.changed && look.problem.is_none());
            assert_eq!(look.last_step, Some(step));
            assert_eq!(shown, read_stream(&path).unwrap());
            if let Some(verdict) = look.verdict {
                let full = Diagnoser::new().run(&shown);
                assert_eq!(
                    verdict,
                    full.summary.unwrap_or_else(|| "nothing flagged".into())
                );
                reruns.push(step);
            }
        }
        // Every step up to 64, then every last/64 steps.
        assert!(reruns[..65].iter().copied().eq(0..65), "{reruns:?}");
        // About 64·(2 + ln(n/64)) reruns in n steps (here 213 of 400; 20 000 steps: ~500).
        let bound = 64.0 * (2.0 + (400.0f64 / 64.0).ln());
        assert!(
            (reruns.len() as f64) < bound,
            "{} reruns in 400 steps",
            reruns.len()
        );
        for pair in reruns.windows(2) {
            assert!(
                pair[1] - pair[0] <= (pair[1] / RERUN_FRACTION).max(1),
                "{reruns:?}"
            );
        }
        // Nothing new: no change and no rerun.
        let idle = follower.look(&mut shown).unwrap();
        assert!(!idle.changed && idle.verdict.is_none());
    }

    /// A stream rewritten by a new, shorter run keeps the old run shown with the problem until
    /// the new one catches up; then the new run is shown.
    #[test]
    fn a_rewritten_stream_is_shown_once_it_catches_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut writer = JsonLinesWriter::create(&path).unwrap();
        let mut follower = Follower::new(&Reader::default(), &path);
        let mut shown = Output::new();
        for step in 0..6 {
            writer.append(step, &line(step)).unwrap();
        }
        follower.look(&mut shown).unwrap();
        drop(writer);
        let mut writer = JsonLinesWriter::create(&path).unwrap();
        for step in 0..3 {
            let mut values = Output::new();
            values.insert(step, "Loss", Value::Float(9.0));
            writer.append(step, &values).unwrap();
        }
        let behind = follower.look(&mut shown).unwrap();
        assert!(
            behind
                .problem
                .as_deref()
                .is_some_and(|p| p.contains("went back from step 5 to step 2")),
            "{behind:?}"
        );
        assert_eq!(shown.last_step(), Some(5));
        assert_eq!(shown.get(0, "Loss"), Some(&Value::Float(1.0)));
        for step in 3..6 {
            let mut values = Output::new();
            values.insert(step, "Loss", Value::Float(9.0));
            writer.append(step, &values).unwrap();
        }
        let caught_up = follower.look(&mut shown).unwrap();
        assert!(caught_up.problem.is_none() && caught_up.verdict.is_some());
        assert_eq!(shown, read_stream(&path).unwrap());
    }

    /// A record is read by its new steps only, and shown again whole when a resume cut it
    /// back (or a new run replaced it).
    #[test]
    fn a_followed_record_reads_its_new_steps_and_follows_a_cut() {
        use cockpit_quantities::record::{RecordReader, RunRecord};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.db");
        let mut record = RunRecord::create(&path).unwrap();
        let write = |record: &mut RunRecord, steps: std::ops::Range<usize>| {
            for step in steps {
                record.write_values(&line(step), &[]).unwrap();
            }
            record.commit().unwrap();
        };
        write(&mut record, 0..10);
        let mut follower = Follower::new(&Reader::default(), &path);
        let mut shown = Output::new();
        let look = follower.look(&mut shown).unwrap();
        assert!(look.changed);
        assert_eq!(look.last_step, Some(9));
        assert!(!follower.look(&mut shown).unwrap().changed, "nothing new");
        write(&mut record, 10..15);
        let look = follower.look(&mut shown).unwrap();
        assert!(look.changed);
        assert_eq!(
            shown,
            RecordReader::open(&path).unwrap().read_all().unwrap()
        );
        drop(record);
        let mut again = RunRecord::create(&path).unwrap();
        write(&mut again, 0..3);
        let look = follower.look(&mut shown).unwrap();
        assert_eq!(look.last_step, Some(2));
        assert_eq!(shown.steps().count(), 3);
    }
}
