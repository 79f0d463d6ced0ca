//! InnerTest.

use crate::persample::PerSampleNeeds;
use crate::quantity::base::{Quantity, StepContext, needs_two, read_scalars, sum_over_params};
use crate::quantity::spec::{Needs, NoSettings, QuantitySpec, QuantityType, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// The inner-product test (Bollapragada et al., 2017), Cockpit's `InnerTest`: with
/// `π_n = g_nᵀg`,
///
/// `sqrt( Σ_n (π_n − ‖g‖²)² / ((B−1)·B·‖g‖⁴) ) = sqrt( (Σ_n π_n² − B‖g‖⁴) / ((B−1)·B·‖g‖⁴) )`.
///
/// NaN for `B = 1` or a zero gradient.
///
/// # Cost
///
/// Per-sample dot products with the mean gradient: one `[B, d_in]·[d_in, d_out]` matmul per
/// Linear layer on the fast path; one host read of two numbers.
#[derive(Debug, Clone)]
pub struct InnerTest {
    schedule: Schedule,
}

impl InnerTest {
    /// InnerTest on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self { schedule }
    }
}

impl QuantityType for InnerTest {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "InnerTest",
        shape: ValueShape::Scalar,
        needs: Needs {
            per_sample: true,
            ..Needs::NOTHING
        },
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for InnerTest {
    fn name(&self) -> &str {
        Self::SPEC.name
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn per_sample_needs(&self, _step: usize) -> PerSampleNeeds {
        PerSampleNeeds {
            dots_with_grad: true,
            ..PerSampleNeeds::NONE
        }
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let stats = ctx.per_sample_stats()?;
        let dots = stats.dots_with_grad.as_deref().unwrap_or_default();
        let pi_sq = sum_over_params(dots)?.square().sum();
        let [pi_sq, g2] = read_scalars(vec![pi_sq, ctx.grads.sq_norms().sum()])?[..] else {
            return Err(QuantityError::Read("expected two numbers".into()));
        };
        let b = stats.batch_size as f64;
        let value = needs_two(stats.batch_size, || {
            ((pi_sq - b * g2 * g2) / ((b - 1.0) * b * g2 * g2)).sqrt()
        });
        Ok(Some((ctx.step, Value::Float(value))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{close, two_samples};

    /// π = (4, 6), ‖g‖² = 5: Σ (π_n − 5)² = 2 over (B−1)·B·‖g‖⁴ = 50: √0.04 = 0.2.
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]);
        let mut q = InnerTest::new(Schedule::every_step());
        let Some((0, Value::Float(v))) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(v, 0.2, 1e-12), "{v}");
    }
}
