//! Distance.

use super::base::{Quantity, StepContext, sqrt_list};
use crate::{QuantityError, Schedule, Snapshot, Value};

/// Layer-wise L2 distance from the initial parameters, `‖θ_t^p − θ_0^p‖₂` (Cockpit's
/// `Distance`).
///
/// A two-step quantity whose start point is always step 0: θ_0 is cached at step 0 whatever the
/// schedule, so step 0 must be tracked.
///
/// # Cost
///
/// Keeps one extra reference to θ_0 (no copy while the parameters are replaced rather than
/// mutated, which is what burn's optimizers do; at most `D` elements); one reduction per
/// parameter and a host read of `P` numbers per tracked step.
#[derive(Debug, Clone)]
pub struct Distance {
    schedule: Schedule,
    init: Option<Snapshot>,
}

impl Distance {
    /// Distance on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            init: None,
        }
    }
}

impl Quantity for Distance {
    fn name(&self) -> &str {
        "Distance"
    }

    fn should_compute(&self, step: usize) -> bool {
        step == 0 || self.schedule.is_active(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        if ctx.step == 0 {
            self.init = Some(ctx.params.clone());
        }
        if !self.schedule.is_active(ctx.step) {
            return Ok(None);
        }
        let Some(init) = &self.init else {
            return Err(QuantityError::MissingReference(
                "Distance measures from the parameters of step 0, which was not tracked".into(),
            ));
        };
        Ok(Some((ctx.step, sqrt_list(ctx.params.sq_distances(init)?)?)))
    }
}
