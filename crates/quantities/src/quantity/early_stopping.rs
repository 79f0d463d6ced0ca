//! EarlyStopping.

use burn::tensor::Tensor;

use super::base::{Quantity, StepContext, needs_two, read_scalars};
use super::cabs::plain_sgd_lr;
use crate::persample::PerSampleNeeds;
use crate::{QuantityError, Schedule, Value};

/// The evidence-based early-stopping criterion (Mahsereci et al., 2017, eq. 7), Cockpit's
/// `EarlyStopping`:
///
/// `1 − B · mean_j [ g_j² / (σ_j² + ε) ]`, `σ_j² = (Σ_n g_{n,j}² − B·g_j²)/(B − 1)`
/// (**unbiased**), `ε = 1e-5`. Positive values suggest stopping. Plain SGD only, like
/// Cockpit; NaN for `B = 1`.
///
/// # Cost
///
/// Per-sample sums of squares (shared with CABS, MeanGSNR, TIC); elementwise work over the `D`
/// parameters; one host read of one number.
#[derive(Debug, Clone)]
pub struct EarlyStopping {
    schedule: Schedule,
    epsilon: f64,
}

impl EarlyStopping {
    /// EarlyStopping on the given schedule, with Cockpit's `ε = 1e-5`.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            epsilon: 1e-5,
        }
    }
}

impl Quantity for EarlyStopping {
    fn name(&self) -> &str {
        "EarlyStopping"
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn per_sample_needs(&self, _step: usize) -> PerSampleNeeds {
        PerSampleNeeds {
            sum_sq: true,
            ..PerSampleNeeds::NONE
        }
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        plain_sgd_lr(ctx, "EarlyStopping")?;
        let stats = ctx.per_sample_stats()?;
        let b = stats.batch_size as f64;
        let sum_sq = stats.sum_sq.as_deref().unwrap_or_default();
        let mut parts: Vec<Tensor<1>> = Vec::new();
        for (entry, ss) in ctx.grads.entries().iter().zip(sum_sq) {
            let g2 = entry.value.clone().square();
            let var = (ss.clone() - g2.clone().mul_scalar(b)).div_scalar(b - 1.0);
            parts.push((g2 / var.add_scalar(self.epsilon)).sum());
        }
        let total: f64 = read_scalars(parts)?.iter().sum();
        let d = ctx.grads.numel() as f64;
        let value = needs_two(stats.batch_size, || 1.0 - b * total / d);
        Ok(Some((ctx.step, Value::Float(value))))
    }
}
