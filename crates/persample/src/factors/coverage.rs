//! What the fast path covers: layers that refused to record, and the coverage report.

use burn::module::ParamId;

use crate::{PerSampleError, Snapshot};

/// A layer that cannot give per-sample gradients in its current mode (training-mode
/// BatchNorm): its parameters and why.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub(crate) params: Vec<ParamId>,
    pub(crate) reason: String,
}

/// One error for every layer that refused (each named once, each distinct reason once), or
/// `None` when none of them holds a parameter of `params`.
pub(crate) fn refusal_of(refused: &[Refusal], params: &Snapshot) -> Option<PerSampleError> {
    let mut layers: Vec<&str> = Vec::new();
    let mut reasons: Vec<&str> = Vec::new();
    for refusal in refused {
        let Some(entry) = params
            .entries()
            .iter()
            .find(|e| refusal.params.contains(&e.id))
        else {
            continue;
        };
        if !layers.contains(&entry.name.as_str()) {
            layers.push(&entry.name);
        }
        if !reasons.contains(&refusal.reason.as_str()) {
            reasons.push(&refusal.reason);
        }
    }
    (!layers.is_empty()).then(|| PerSampleError::SamplesCoupled {
        layer: layers.join(", "),
        reason: reasons.join("; "),
    })
}

/// What the fast path covers for a model ([`Recording::coverage`](crate::Recording::coverage)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Dotted names of the parameters on the fast path.
    pub covered: Vec<String>,
    /// Dotted names of the others, with the reason.
    pub uncovered: Vec<(String, String)>,
}

impl Coverage {
    /// Whether every parameter is on the fast path.
    pub fn is_complete(&self) -> bool {
        self.uncovered.is_empty()
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.covered.len() + self.uncovered.len();
        writeln!(f, "fast path: {} of {total} parameters", self.covered.len())?;
        for name in &self.covered {
            writeln!(f, "  covered      {name}")?;
        }
        let mut previous: Option<&str> = None;
        for (name, reason) in &self.uncovered {
            if previous == Some(reason.as_str()) {
                writeln!(f, "  not covered  {name}: as above")?;
            } else {
                writeln!(f, "  not covered  {name}: {reason}")?;
            }
            previous = Some(reason);
        }
        Ok(())
    }
}
