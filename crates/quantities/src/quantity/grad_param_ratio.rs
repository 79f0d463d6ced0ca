//! GradParamRatio.

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, Reduction, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// Layer-wise relative gradient norms `‖∇_p L(θ_t)‖₂ / ‖θ_{t,p}‖₂`, one per parameter: how
/// large a step each layer is asked to take relative to its own size (not one of Cockpit's
/// quantities; `diagnose`'s depth check reads it). A parameter whose norm is zero gives `∞`
/// (`NaN` if its gradient is zero too). Network-wide: the largest layer's ratio
/// ([`Reduction::Max`]).
///
/// # Cost
///
/// Two reductions per parameter on the device; `P` numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct GradParamRatio {
    schedule: Schedule,
    awaiting: Awaiting,
}

impl GradParamRatio {
    /// GradParamRatio on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for GradParamRatio {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "GradParamRatio",
        shape: ValueShape::PerParameter(Reduction::Max),
        needs: Needs::NOTHING,
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for GradParamRatio {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let ratio = (ctx.grad_sq_norms() / ctx.params.sq_norms()).sqrt();
        Ok(self.awaiting.read(ctx.step, 0, vec![ratio]))
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

    /// ‖(3, 4)‖/‖(0, 10)‖ = 0.5, ‖(−12)‖/‖(−3)‖ = 4; network-wide the larger, 4; a parameter at
    /// zero gives ∞.
    #[test]
    fn per_parameter_ratios() {
        let ids = [ParamId::new(), ParamId::new(), ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.0, 10.0], &[-3.0], &[0.0]],
            &[vec![vec![3.0, 4.0], vec![-12.0], vec![1.0]]],
            1.0,
        );
        let mut q = GradParamRatio::new(Schedule::every_step());
        let Some((0, value)) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        let Value::List(ratios) = &value else {
            panic!("{value:?}")
        };
        assert!(
            close(ratios[0], 0.5, 1e-12) && close(ratios[1], 4.0, 1e-12),
            "{ratios:?}"
        );
        assert!(ratios[2].is_infinite(), "{ratios:?}");
        assert_eq!(
            crate::QuantityKind::GradParamRatio.network_value(&Value::List(ratios[..2].to_vec())),
            Some(4.0)
        );
    }
}
