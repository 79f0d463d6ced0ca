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
}

impl StepReport {
    pub(super) fn untracked(step: usize) -> Self {
        Self {
            step,
            tracked: false,
            failures: Vec::new(),
        }
    }

    pub(super) fn tracked(step: usize, failures: Vec<(String, QuantityError)>) -> Self {
        Self {
            step,
            tracked: true,
            failures,
        }
    }

    /// Whether every quantity due at this step was computed.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
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
    pub fn into_result(self) -> Result<(), CockpitError> {
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
