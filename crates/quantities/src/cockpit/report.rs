//! What one call of [`Cockpit::track`](super::Cockpit::track) did.

use crate::{CockpitError, QuantityError};

/// The outcome of one tracked step: whether any quantity had work, and which ones could not
/// be computed and why. A failed quantity does not stop the others nor the run; the failures
/// are also printed to stderr once per quantity and reason (unless
/// [`Cockpit::with_console`](super::Cockpit::with_console) turned that off).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StepReport {
    /// The step number.
    pub step: usize,
    /// Whether any quantity's schedule asked for this step.
    pub tracked: bool,
    /// The quantities that could not be computed (output key, reason), in the order they run.
    pub failures: Vec<(String, QuantityError)>,
    /// Whether this step's read was deferred ([`ReadTiming::Deferred`](super::ReadTiming)):
    /// its values and failures come with the next call's report, as its `earlier`.
    pub deferred: bool,
    /// The report of an earlier step whose deferred read this call completed.
    pub earlier: Option<Box<StepReport>>,
}

impl StepReport {
    pub(super) fn untracked(step: usize) -> Self {
        Self {
            step,
            tracked: false,
            failures: Vec::new(),
            deferred: false,
            earlier: None,
        }
    }

    pub(super) fn deferred(step: usize) -> Self {
        Self {
            step,
            tracked: true,
            failures: Vec::new(),
            deferred: true,
            earlier: None,
        }
    }

    pub(super) fn tracked(step: usize, failures: Vec<(String, QuantityError)>) -> Self {
        Self {
            step,
            tracked: true,
            failures,
            deferred: false,
            earlier: None,
        }
    }

    /// Whether every quantity due at this step was computed (and at the earlier step this
    /// call completed, if any). A deferred step is not complete until its read is.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
            && !self.deferred
            && self.earlier.as_ref().is_none_or(|e| e.is_complete())
    }

    /// The failures in words, one line per reason: `NormTest, OrthoTest not computed: why`.
    pub fn failure_lines(&self) -> Vec<String> {
        crate::error::group_failures(&self.failures)
            .into_iter()
            .map(|(names, reason)| format!("{} not computed: {reason}", names.join(", ")))
            .collect()
    }

    /// The failures as an error, for a loop that wants any failed quantity to stop it.
    ///
    /// # Errors
    ///
    /// [`CockpitError::QuantitiesFailed`] if a quantity failed.
    /// The failures of an earlier step this call completed are given first.
    pub fn into_result(self) -> Result<(), CockpitError> {
        if let Some(earlier) = self.earlier {
            earlier.into_result()?;
        }
        if self.failures.is_empty() {
            Ok(())
        } else {
            Err(CockpitError::QuantitiesFailed {
                step: self.step,
                failures: self.failures,
            })
        }
    }
}
