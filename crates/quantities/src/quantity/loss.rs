//! Loss.

use super::base::{Quantity, StepContext};
use crate::{QuantityError, Schedule, Value};

/// The mini-batch loss `L(θ_t)` (Cockpit's `Loss`, a byproduct quantity).
///
/// # Cost
///
/// None: the loss is read from the device once per tracked step, shared by all quantities.
#[derive(Debug, Clone)]
pub struct Loss {
    schedule: Schedule,
}

impl Loss {
    /// Loss on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self { schedule }
    }
}

impl Quantity for Loss {
    fn name(&self) -> &str {
        "Loss"
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        Ok(Some((ctx.step, Value::Float(ctx.loss))))
    }
}
