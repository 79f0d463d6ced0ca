//! CABS.

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext, sum_over_params};
use super::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::persample::{PerSampleNeeds, Statistic};
use crate::{QuantityError, Schedule, Value};

/// The batch size CABS suggests (Balles et al., 2017, eq. 22), Cockpit's `CABS`:
///
/// `lr · Σ_j (Σ_n g_{n,j}² − B·g_j²) / (B · L) = lr · tr(Σ̂) / L`,
///
/// with the **biased** gradient covariance `Σ̂ = (1/B) Σ_n (g_n − g)(g_n − g)ᵀ` and the
/// mini-batch loss `L`. Only for plain SGD (zero momentum, dampening and weight decay, no
/// Nesterov): any other optimizer is refused with [`QuantityError::Unsupported`], as Cockpit
/// raises `ValueError`.
///
/// # Cost
///
/// Per-sample sums of squares: one `[d_in, B]·[B, d_out]` matmul per Linear layer on the fast
/// path; three numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct CABS {
    schedule: Schedule,
    awaiting: Awaiting,
    lr: f64,
}

impl CABS {
    /// CABS on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
            lr: f64::NAN,
        }
    }
}

impl QuantityType for CABS {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "CABS",
        shape: ValueShape::Scalar,
        needs: Needs {
            plain_sgd: true,
            announced_sgd: true,
            ..Needs::per_sample(PerSampleNeeds::of(Statistic::SumSq))
        },
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for CABS {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        self.lr = ctx.plain_sgd_lr("CABS")?;
        let stats = ctx.per_sample_stats()?;
        let sum_sq = stats.get(Statistic::SumSq).unwrap_or_default();
        let totals: Vec<_> = sum_sq.iter().map(|s| s.clone().sum()).collect();
        let parts = vec![
            sum_over_params(&totals)?,
            ctx.grad_sq_norm(),
            ctx.info.loss().clone(),
        ];
        Ok(self.awaiting.read(ctx.step, stats.batch_size, parts))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let lr = self.lr;
        self.awaiting.finish_scalar(host, |batch, [sum_sq, g2, loss]| {
            let b = batch as f64;
            lr * (sum_sq - b * g2) / (b * loss)
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::OptimizerInfo;
    use crate::quantity::testing::{float_at_zero, close, two_samples};

    /// Σ_j (Σ_n g²_{n,j} − B·g_j²) = (10 − 8) + (4 − 2) = 4; lr·4/(B·L) = 0.1·4/4.
    #[test]
    fn worked_example_and_refusal_of_momentum() {
        let ids = [ParamId::new()];
        let step = two_samples(&ids).with_optimizer(OptimizerInfo::sgd(0.1));
        let mut q = CABS::new(Schedule::every_step());
        let v = float_at_zero(&mut q, &step);
        assert!(close(v, 0.1, 1e-12), "{v}");
        let momentum = two_samples(&ids).with_optimizer(OptimizerInfo::sgd_momentum(0.1, 0.9));
        assert!(matches!(
            q.compute(&momentum.ctx()),
            Err(QuantityError::Unsupported(_))
        ));
        assert!(matches!(
            q.compute(&two_samples(&ids).ctx()),
            Err(QuantityError::MissingInfo("optimizer"))
        ));
    }
}
