//! GradNorm.

use super::base::{Quantity, StepContext, sqrt_list};
use crate::{QuantityError, Schedule, Value};

/// Layer-wise gradient norms `‖∇_p L(θ_t)‖₂`, one per parameter (Cockpit's `GradNorm`).
///
/// # Cost
///
/// One reduction per parameter on the device and one host read of `P` numbers.
#[derive(Debug, Clone)]
pub struct GradNorm {
    schedule: Schedule,
}

impl GradNorm {
    /// GradNorm on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self { schedule }
    }
}

impl Quantity for GradNorm {
    fn name(&self) -> &str {
        "GradNorm"
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        Ok(Some((ctx.step, sqrt_list(ctx.grads.sq_norms())?)))
    }
}
