//! NormTest.

use crate::persample::PerSampleNeeds;
use crate::quantity::base::{Quantity, StepContext, needs_two, read_scalars, sum_over_params};
use crate::{QuantityError, Schedule, Value};

/// The norm test (Byrd et al., 2012), Cockpit's `NormTest`:
///
/// `sqrt( Σ_n ‖g_n − g‖² / ((B−1)·B·‖g‖²) ) = sqrt( (Σ_n‖g_n‖²/‖g‖² − B) / (B(B−1)) )`,
///
/// with `g_n` the per-sample gradients and `g` the mini-batch gradient, summed over all
/// parameters. NaN for `B = 1` or a zero gradient.
///
/// # Cost
///
/// Per-sample squared norms: `O(B·(d_in + d_out))` per Linear layer on the fast path; one host
/// read of two numbers.
#[derive(Debug, Clone)]
pub struct NormTest {
    schedule: Schedule,
}

impl NormTest {
    /// NormTest on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self { schedule }
    }
}

impl Quantity for NormTest {
    fn name(&self) -> &str {
        "NormTest"
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn per_sample_needs(&self, _step: usize) -> PerSampleNeeds {
        PerSampleNeeds {
            sq_norms: true,
            ..PerSampleNeeds::NONE
        }
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let stats = ctx.per_sample_stats()?;
        let sq_norms = stats.sq_norms.as_deref().unwrap_or_default();
        let sum_sq = sum_over_params(sq_norms)?.sum();
        let [sum_sq, g2] = read_scalars(vec![sum_sq, ctx.grads.sq_norms().sum()])?[..] else {
            return Err(QuantityError::Read("expected two numbers".into()));
        };
        let b = stats.batch_size as f64;
        let value = needs_two(stats.batch_size, || {
            ((sum_sq - b * g2) / ((b - 1.0) * b * g2)).sqrt()
        });
        Ok(Some((ctx.step, Value::Float(value))))
    }
}
