//! InnerTest.

use crate::persample::reduce::sum_all;
use crate::persample::{Direction, PerSampleNeeds, Statistic};
use crate::quantity::base::{Awaiting, Enqueued, Quantity, QuantityType, StepContext, needs_two};
use crate::quantity::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// The inner-product test (Bollapragada et al., 2017), Cockpit's `InnerTest`: with
/// `π_n = g_nᵀg`,
///
/// `sqrt( Σ_n (π_n − ‖g‖²)² / ((B−1)·B·‖g‖⁴) ) = sqrt( (Σ_n π_n² − B‖g‖⁴) / ((B−1)·B·‖g‖⁴) )`.
///
/// The sum is taken about the projections' own mean, `Σ_n (π_n − π̄)²` (`π̄ = ‖g‖²` in exact
/// arithmetic, since `g` is the mean of the `g_n`): Cockpit's difference `Σ π_n² − B‖g‖⁴`
/// cancels to a few per cent of its terms, and in float32 the rounding of `‖g‖²` against the
/// `π_n` (each reduced in its own order) is amplified as many times, 3e-4 relative on
/// cifar10_3c3d at B 2, or a negative difference and NaN. The centred sum is never
/// negative and keeps float32's precision (`tests/integration/cifar3c3d.rs`).
///
/// NaN for `B = 1` or a zero gradient.
///
/// # Cost
///
/// Per-sample dot products with the mean gradient: one `[B, d_in]·[d_in, d_out]` matmul per
/// Linear layer on the fast path; two numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct InnerTest {
    schedule: Schedule,
    awaiting: Awaiting,
}

impl InnerTest {
    /// InnerTest on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for InnerTest {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "InnerTest",
        shape: ValueShape::Scalar,
        needs: Needs::per_sample(PerSampleNeeds::of(Statistic::Dot(Direction::Gradient))),
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for InnerTest {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let stats = ctx.per_sample_stats()?;
        let pi = ctx.sample_grad_dots()?;
        let centred = sum_all((pi.clone() - pi.mean()).square());
        let numbers = vec![centred, ctx.grad_sq_norm()];
        Ok(self.awaiting.read(ctx.step, stats.batch_size, numbers))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        self.awaiting.finish_scalar(host, |batch, [centred, g2]| {
            let b = batch as f64;
            needs_two(batch, || (centred / ((b - 1.0) * b * g2 * g2)).sqrt())
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{float_at_zero, close, two_samples};

    /// π = (4, 6), ‖g‖² = 5: Σ (π_n − 5)² = 2 over (B−1)·B·‖g‖⁴ = 50: √0.04 = 0.2.
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]);
        let mut q = InnerTest::new(Schedule::every_step());
        let v = float_at_zero(&mut q, &step);
        assert!(close(v, 0.2, 1e-12), "{v}");
    }
}
