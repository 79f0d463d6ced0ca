//! MeanGSNR.

use burn::tensor::Tensor;

use super::base::{Quantity, StepContext, read_scalars};
use crate::persample::PerSampleNeeds;
use crate::{QuantityError, Schedule, Value};

/// The mean gradient signal-to-noise ratio (Liu et al., 2020), Cockpit's `MeanGSNR`:
///
/// `mean_j [ g_j² / (S_j − g_j² + ε) ]`, `S_j = (1/B) Σ_n g_{n,j}²`, `ε = 1e-5`
/// (the variance is the **biased** `1/B` one).
///
/// # Cost
///
/// Per-sample sums of squares (shared with CABS, EarlyStopping, TIC); elementwise work over the
/// `D` parameters; one host read of one number.
#[derive(Debug, Clone)]
pub struct MeanGSNR {
    schedule: Schedule,
    epsilon: f64,
}

impl MeanGSNR {
    /// MeanGSNR on the given schedule, with Cockpit's `ε = 1e-5`.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            epsilon: 1e-5,
        }
    }
}

impl Quantity for MeanGSNR {
    fn name(&self) -> &str {
        "MeanGSNR"
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
        let stats = ctx.per_sample_stats()?;
        let b = stats.batch_size as f64;
        let sum_sq = stats.sum_sq.as_deref().unwrap_or_default();
        let mut parts: Vec<Tensor<1>> = Vec::new();
        for (entry, ss) in ctx.grads.entries().iter().zip(sum_sq) {
            let g2 = entry.value.clone().square();
            let second_moment = ss.clone().div_scalar(b);
            parts.push((g2.clone() / (second_moment - g2).add_scalar(self.epsilon)).sum());
        }
        let total: f64 = read_scalars(parts)?.iter().sum();
        let value = total / ctx.grads.numel() as f64;
        Ok(Some((ctx.step, Value::Float(value))))
    }
}
