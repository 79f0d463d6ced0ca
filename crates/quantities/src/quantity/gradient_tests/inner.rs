//! InnerTest.

use crate::persample::PerSampleNeeds;
use crate::quantity::base::{Quantity, StepContext, needs_two, read_scalars, sum_over_params};
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

impl Quantity for InnerTest {
    fn name(&self) -> &str {
        "InnerTest"
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
        let dots = stats.dots.first().map(Vec::as_slice).unwrap_or_default();
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
