//! Loss.

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// The mini-batch loss `L(θ_t)` (Cockpit's `Loss`, a byproduct quantity).
///
/// # Cost
///
/// One number in the step's batched read (which always holds the loss).
#[derive(Debug, Clone)]
pub struct Loss {
    schedule: Schedule,
    awaiting: Awaiting,
}

impl Loss {
    /// Loss on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for Loss {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "Loss",
        shape: ValueShape::Scalar,
        needs: Needs::NOTHING,
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for Loss {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        Ok(self
            .awaiting
            .read(ctx.step, 0, vec![ctx.info.loss().clone()]))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, _) = self.awaiting.take()?;
        let loss = host.first().copied().unwrap_or(f64::NAN);
        Ok(Some((step, Value::Float(loss))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::two_samples;

    #[test]
    fn stores_the_step_loss() {
        let step = two_samples(&[ParamId::new()]);
        let mut q = Loss::new(Schedule::every_step());
        assert_eq!(
            q.compute(&step.ctx()).unwrap(),
            Some((0, Value::Float(2.0)))
        );
    }
}
