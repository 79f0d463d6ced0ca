//! EarlyStopping.

use serde::Deserialize;

use super::base::{
    Awaiting, Enqueued, Quantity, QuantityType, StepContext, check_epsilon, enqueue_ratio_sums,
    needs_two,
};
use super::spec::{Needs, QuantitySpec, ValueShape};
use crate::persample::{PerSampleNeeds, Statistic};
use crate::{CockpitError, QuantityError, Schedule, Value};

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
    awaiting: Awaiting,
    /// The number of gradient elements `D` of the enqueued step.
    numel: usize,
}

impl EarlyStopping {
    /// EarlyStopping on the given schedule, with Cockpit's `ε = 1e-5`.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            epsilon: 1e-5,
            awaiting: Awaiting::default(),
            numel: 0,
        }
    }
}

/// EarlyStopping's settings (Cockpit's keyword arguments).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EarlyStoppingSettings {
    /// `ε` in the denominator (Cockpit: 1e-5).
    pub epsilon: f64,
}

impl Default for EarlyStoppingSettings {
    fn default() -> Self {
        Self { epsilon: 1e-5 }
    }
}

impl QuantityType for EarlyStopping {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "EarlyStopping",
        shape: ValueShape::Scalar,
        needs: Needs {
            plain_sgd: true,
            announced_sgd: true,
            ..Needs::per_sample(PerSampleNeeds::of(Statistic::SumSq))
        },
    };
    type Settings = EarlyStoppingSettings;

    fn with_settings(schedule: Schedule, settings: EarlyStoppingSettings) -> Self {
        Self {
            epsilon: settings.epsilon,
            ..Self::new(schedule)
        }
    }
}

impl Quantity for EarlyStopping {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_epsilon(Self::SPEC.name, self.epsilon)
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        ctx.plain_sgd_lr("EarlyStopping")?;
        let epsilon = self.epsilon;
        // g² / (sample variance + ε), the variance (Σ_n g_n² − B·g²) / (B − 1).
        let (enqueued, numel) = enqueue_ratio_sums(&mut self.awaiting, ctx, |g2, ss, b| {
            let var = (ss - g2.clone().mul_scalar(b)).div_scalar(b - 1.0);
            g2 / var.add_scalar(epsilon)
        })?;
        self.numel = numel;
        Ok(enqueued)
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, batch) = self.awaiting.take()?;
        let total: f64 = host.iter().sum();
        let (b, d) = (batch as f64, self.numel as f64);
        let value = needs_two(batch, || 1.0 - b * total / d);
        Ok(Some((step, Value::Float(value))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::OptimizerInfo;
    use crate::quantity::testing::{float_at_zero, close, two_samples};

    /// σ² = ((10 − 8)/1, (4 − 2)/1) = (2, 2): 1 − B·mean(4/2, 1/2) = 1 − 2·1.25 = −1.5 (with
    /// ε = 0 to compare exactly).
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]).with_optimizer(OptimizerInfo::sgd(0.1));
        let mut q = EarlyStopping::with_settings(
            Schedule::every_step(),
            EarlyStoppingSettings { epsilon: 0.0 },
        );
        let v = float_at_zero(&mut q, &step);
        assert!(close(v, -1.5, 1e-12), "{v}");
        assert!(
            EarlyStopping::with_settings(
                Schedule::every_step(),
                EarlyStoppingSettings { epsilon: f64::NAN }
            )
            .check()
            .is_err()
        );
    }
}
