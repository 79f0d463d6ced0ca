//! [`Monitor`]: the checks during training, at epoch ends, warning once per new finding.

use std::collections::BTreeSet;

use cockpit_quantities::Output;

use crate::{Code, Diagnoser, Diagnosis, Finding};

/// Runs the checks on everything tracked so far (call it at epoch ends) and logs a warning
/// (`log::warn!`) for each finding not reported before; opt-in for the hand-written loop, and
/// behind `CockpitLearner::with_diagnosis` in the Learner adapter.
///
/// ```
/// use cockpit_diagnose::Monitor;
/// # let output = cockpit_quantities::Output::new();
/// let mut monitor = Monitor::new();
/// // at the end of each epoch:
/// for finding in monitor.check(&output, &[]) {
///     eprintln!("cockpit: {}", finding.message);
/// }
/// ```
///
/// # Cost
///
/// One pass over the output's scalar and per-parameter series per call (no tensor work).
#[derive(Debug, Clone, Default)]
pub struct Monitor {
    reported: BTreeSet<Code>,
    last: Option<Diagnosis>,
}

impl Monitor {
    /// A monitor that has reported nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Diagnoses `output` (parameters named by `names`, possibly empty) and returns the findings
    /// whose code was not reported by an earlier call, each also logged as a warning.
    pub fn check(&mut self, output: &Output, names: &[String]) -> Vec<Finding> {
        let diagnosis = Diagnoser::new().with_names(names).run(output);
        let fresh: Vec<Finding> = diagnosis
            .all()
            .filter(|f| !self.reported.contains(&f.code))
            .cloned()
            .collect();
        for finding in &fresh {
            self.reported.insert(finding.code);
            log::warn!(
                "cockpit diagnose: [{}] from step {}: {} ({}); advice: {}",
                finding.code,
                finding.first_step,
                finding.message,
                finding.evidence,
                finding.code.advice()
            );
        }
        self.last = Some(diagnosis);
        fresh
    }

    /// The diagnosis of the latest [`Monitor::check`].
    pub fn last(&self) -> Option<&Diagnosis> {
        self.last.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cockpit_quantities::Value;

    #[test]
    fn each_finding_is_reported_once() {
        let mut out = Output::new();
        for s in 0..20 {
            out.insert(s, "NormTest", Value::Float(1.0));
            out.insert(s, "Loss", Value::Float(if s % 2 == 0 { 0.5 } else { 1.5 }));
        }
        let mut monitor = Monitor::new();
        let first = monitor.check(&out, &[]);
        assert_eq!(first.first().map(|f| f.code), Some(Code::SmallBatch));
        assert!(monitor.check(&out, &[]).is_empty());
        assert!(monitor.last().is_some_and(Diagnosis::is_flagged));
    }
}
