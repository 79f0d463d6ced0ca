//! Loss.

use super::base::{Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, QuantityType, ValueShape};
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
    fn name(&self) -> &str {
        Self::SPEC.name
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        Ok(Some((ctx.step, Value::Float(ctx.loss))))
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
