//! OrthoTest.

use crate::persample::reduce::sum_all;
use crate::persample::{Direction, PerSampleNeeds, Statistic};
use crate::quantity::base::{Awaiting, Enqueued, Quantity, QuantityType, StepContext, needs_two};
use crate::quantity::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// The orthogonality test (Bollapragada et al., 2017), Cockpit's `OrthoTest`: with
/// `π_n = g_nᵀg`,
///
/// `sqrt( (Σ_n‖g_n‖² − Σ_n π_n²/‖g‖²) / ((B−1)·B·‖g‖²) )`, the numerator being
/// `Σ_n ‖g_n − (π_n/‖g‖²) g‖²`.
///
/// NaN for `B = 1` or a zero gradient.
///
/// # Cost
///
/// Per-sample squared norms and dot products with the mean gradient (shared with NormTest and
/// InnerTest); three numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct OrthoTest {
    schedule: Schedule,
    awaiting: Awaiting,
}

impl OrthoTest {
    /// OrthoTest on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for OrthoTest {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "OrthoTest",
        shape: ValueShape::Scalar,
        needs: Needs::per_sample(PerSampleNeeds::of(Statistic::SqNorm).with(Statistic::Dot(Direction::Gradient))),
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for OrthoTest {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let stats = ctx.per_sample_stats()?;
        let parts = vec![
            sum_all(ctx.sample_sq_norms()?),
            sum_all(ctx.sample_grad_dots()?.square()),
            ctx.grad_sq_norm(),
        ];
        Ok(self.awaiting.read(ctx.step, stats.batch_size, parts))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        self.awaiting.finish_scalar(host, |batch, [sum_sq, pi_sq, g2]| {
            let b = batch as f64;
            needs_two(batch, || ((sum_sq - pi_sq / g2) / ((b - 1.0) * b * g2)).sqrt())
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{float_at_zero, close, two_samples};

    /// g₁ − (4/5)g = (−0.6, 1.2), g₂ − (6/5)g = (0.6, −1.2): Σ ‖·‖² = 3.6 over
    /// (B−1)·B·‖g‖² = 10: √0.36 = 0.6.
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]);
        let mut q = OrthoTest::new(Schedule::every_step());
        let v = float_at_zero(&mut q, &step);
        assert!(close(v, 0.6, 1e-12), "{v}");
    }
}
