//! [`Named`]: a quantity stored under another output key.

use crate::persample::{Elements, PerSampleNeeds};
use crate::quantity::{Quantity, StepContext};
use crate::{CockpitError, ParamEntry, QuantityError, Value};

/// A quantity whose values are stored under `key` instead of its own name (e.g. a variant
/// `GradHist1d[bins=20]` beside the default `GradHist1d`). Everything else is the quantity's.
pub struct Named {
    key: String,
    inner: Box<dyn Quantity>,
}

impl Named {
    /// `inner` under `key`.
    pub fn new(key: impl Into<String>, inner: Box<dyn Quantity>) -> Self {
        Self {
            key: key.into(),
            inner,
        }
    }
}

/// `err` naming the quantity by `key` when it is about the quantity's settings.
pub(crate) fn under_key(err: CockpitError, key: &str) -> CockpitError {
    match err {
        CockpitError::InvalidSettings { reason, .. } => CockpitError::InvalidSettings {
            quantity: key.to_string(),
            reason,
        },
        other => other,
    }
}

impl std::fmt::Debug for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Named")
            .field("key", &self.key)
            .field("quantity", &self.inner.name())
            .finish()
    }
}

impl Quantity for Named {
    fn name(&self) -> &str {
        &self.key
    }

    fn check(&self) -> Result<(), CockpitError> {
        self.inner.check().map_err(|err| under_key(err, &self.key))
    }

    fn should_compute(&self, step: usize) -> bool {
        self.inner.should_compute(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        self.inner.compute(ctx)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        self.inner.per_sample_needs(step)
    }

    fn take_warnings(&mut self) -> Vec<String> {
        self.inner.take_warnings()
    }

    fn uses_curvature(&self, step: usize) -> bool {
        self.inner.uses_curvature(step)
    }

    fn uses_per_sample(&self, step: usize) -> bool {
        self.inner.uses_per_sample(step)
    }

    fn accept_chunk(
        &mut self,
        step: usize,
        index: usize,
        entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError> {
        self.inner.accept_chunk(step, index, entry, elements)
    }
}
