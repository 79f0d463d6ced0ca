//! MeanGSNR.

use serde::Deserialize;

use super::base::{QuantityType, Awaiting, Enqueued, enqueue_ratio_sums, Quantity, StepContext, check_epsilon};
use super::spec::{Needs, QuantitySpec, ValueShape};
use crate::persample::{PerSampleNeeds, Statistic};
use crate::{CockpitError, QuantityError, Schedule, Value};

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
    awaiting: Awaiting,
    /// The number of gradient elements `D` of the enqueued step.
    numel: usize,
}

impl MeanGSNR {
    /// MeanGSNR on the given schedule, with Cockpit's `ε = 1e-5`.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            epsilon: 1e-5,
            awaiting: Awaiting::default(),
            numel: 0,
        }
    }
}

/// MeanGSNR's settings (Cockpit's keyword arguments).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MeanGSNRSettings {
    /// `ε` in the denominator (Cockpit: 1e-5).
    pub epsilon: f64,
}

impl Default for MeanGSNRSettings {
    fn default() -> Self {
        Self { epsilon: 1e-5 }
    }
}

impl QuantityType for MeanGSNR {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "MeanGSNR",
        shape: ValueShape::Scalar,
        needs: Needs::per_sample(PerSampleNeeds::of(Statistic::SumSq)),
    };
    type Settings = MeanGSNRSettings;

    fn with_settings(schedule: Schedule, settings: MeanGSNRSettings) -> Self {
        Self {
            epsilon: settings.epsilon,
            ..Self::new(schedule)
        }
    }
}

impl Quantity for MeanGSNR {
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
        let epsilon = self.epsilon;
        // g² / (Σ_n g_n² / B − g² + ε).
        let (enqueued, numel) = enqueue_ratio_sums(&mut self.awaiting, ctx, |g2, ss, b| {
            g2.clone() / (ss.div_scalar(b) - g2).add_scalar(epsilon)
        })?;
        self.numel = numel;
        Ok(enqueued)
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, _) = self.awaiting.take()?;
        let total: f64 = host.iter().sum();
        Ok(Some((step, Value::Float(total / self.numel as f64))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{float_at_zero, close, two_samples};

    /// S = (10/2, 4/2) = (5, 2), S − g² = (1, 1): mean(4/1, 1/1) = 2.5 (ε = 0).
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]);
        let mut q =
            MeanGSNR::with_settings(Schedule::every_step(), MeanGSNRSettings { epsilon: 0.0 });
        let v = float_at_zero(&mut q, &step);
        assert!(close(v, 2.5, 1e-12), "{v}");
    }
}
