//! GradNorm.

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, Reduction, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// Layer-wise gradient norms `‖∇_p L(θ_t)‖₂`, one per parameter (Cockpit's `GradNorm`).
///
/// # Cost
///
/// One reduction per parameter on the device; `P` numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct GradNorm {
    schedule: Schedule,
    awaiting: Awaiting,
}

impl GradNorm {
    /// GradNorm on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for GradNorm {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "GradNorm",
        shape: ValueShape::PerParameter(Reduction::RootSumOfSquares),
        needs: Needs::NOTHING,
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for GradNorm {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        Ok(self
            .awaiting
            .read(ctx.step, 0, vec![ctx.grad_sq_norms().sqrt()]))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        self.awaiting.finish_list(host)
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{TinyStep, close};

    /// One norm per parameter: ‖(3, 4)‖ = 5, ‖(−12)‖ = 12.
    #[test]
    fn per_parameter_norms() {
        let ids = [ParamId::new(), ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.0, 0.0], &[0.0]],
            &[vec![vec![3.0, 4.0], vec![-12.0]]],
            1.0,
        );
        let mut q = GradNorm::new(Schedule::every_step());
        let Some((0, Value::List(norms))) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(
            close(norms[0], 5.0, 1e-12) && close(norms[1], 12.0, 1e-12),
            "{norms:?}"
        );
    }
}
