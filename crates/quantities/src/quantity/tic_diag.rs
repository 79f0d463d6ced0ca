//! TICDiag and TICTrace.

use burn::tensor::Tensor;

use serde::Deserialize;

use super::base::{
    Awaiting, Enqueued, Quantity, QuantityType, StepContext, check_epsilon, check_mc_samples,
};
use super::spec::{Needs, QuantitySpec, ValueShape};
use crate::curvature::DiagonalKind;
use crate::persample::{PerSampleNeeds, Statistic};
use crate::{CockpitError, QuantityError, Schedule, Value};

/// Takeuchi's information criterion with a diagonal curvature (Thomas et al., 2019),
/// Cockpit's `TICDiag`: `Σ_j S_j / (h_j + ε)`, with `S_j = (1/B) Σ_n g_{n,j}²` the uncentred
/// second moment of the per-sample gradients, `h` the curvature diagonal (`diag_h` by default),
/// `ε = 1e-7`, and no clamping of negative `h_j`.
///
/// # Cost
///
/// Per-sample sums of squares (shared with CABS, EarlyStopping, MeanGSNR) and the curvature
/// diagonal (shared with HessTrace); elementwise work over `D`; one host read.
#[derive(Debug, Clone)]
pub struct TICDiag {
    schedule: Schedule,
    curvature: DiagonalKind,
    epsilon: f64,
    mc_samples: usize,
    awaiting: Awaiting,
}

/// TIC with the trace of the curvature (Cockpit's `TICTrace`): `Σ_j S_j / (Σ_j h_j + ε)`.
///
/// # Cost
///
/// As [`TICDiag`].
#[derive(Debug, Clone)]
pub struct TICTrace {
    schedule: Schedule,
    curvature: DiagonalKind,
    epsilon: f64,
    mc_samples: usize,
    awaiting: Awaiting,
}

/// TICDiag's and TICTrace's settings (Cockpit's keyword arguments).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TicSettings {
    /// Which diagonal: `"diag_h"` (default), `"diag_ggn_exact"` or `"diag_ggn_mc"`.
    pub curvature: DiagonalKind,
    /// Monte-Carlo samples of `diag_ggn_mc`; only 1 (Cockpit's default) is implemented.
    pub mc_samples: usize,
    /// `ε` added to the curvature (Cockpit: 1e-7).
    pub epsilon: f64,
}

impl Default for TicSettings {
    fn default() -> Self {
        Self {
            curvature: DiagonalKind::Hessian,
            mc_samples: 1,
            epsilon: 1e-7,
        }
    }
}

macro_rules! tic_builders {
    ($t:ident, $name:literal) => {
        impl $t {
            /// With `diag_h` and `ε = 1e-7` on the given schedule.
            pub fn new(schedule: Schedule) -> Self {
                Self {
                    schedule,
                    curvature: DiagonalKind::Hessian,
                    epsilon: 1e-7,
                    mc_samples: 1,
                    awaiting: Awaiting::default(),
                }
            }

            /// Which curvature diagonal to use.
            pub fn with_curvature(mut self, curvature: DiagonalKind) -> Self {
                self.curvature = curvature;
                self
            }
        }

        impl QuantityType for $t {
            const SPEC: QuantitySpec = QuantitySpec {
                name: $name,
                shape: ValueShape::Scalar,
                needs: Needs {
            curvature: true,
            ..Needs::per_sample(PerSampleNeeds::of(Statistic::SumSq))
        },
            };
            type Settings = TicSettings;

            fn with_settings(schedule: Schedule, settings: TicSettings) -> Self {
                Self {
                    curvature: settings.curvature,
                    epsilon: settings.epsilon,
                    mc_samples: settings.mc_samples,
                    ..Self::new(schedule)
                }
            }
        }
    };
}

tic_builders!(TICDiag, "TICDiag");
tic_builders!(TICTrace, "TICTrace");

/// The per-parameter sums `Σ_j S_j/(h_j + ε)`, `Σ_j S_j` and `Σ_j h_j` on the device, in that
/// order (read in the step's batched read; [`tic_totals`] adds them up).
fn tic_parts(
    ctx: &StepContext<'_>,
    curvature: DiagonalKind,
    epsilon: f64,
) -> Result<Vec<Tensor<1>>, QuantityError> {
    let stats = ctx.per_sample_stats()?;
    let b = stats.batch_size as f64;
    let sum_sq = stats.get(Statistic::SumSq).unwrap_or_default();
    let diagonal = ctx.curvature()?.diagonal(ctx.params, curvature)?;
    let mut ratio: Vec<Tensor<1>> = Vec::new();
    let mut second: Vec<Tensor<1>> = Vec::new();
    let mut trace: Vec<Tensor<1>> = Vec::new();
    for (ss, h) in sum_sq.iter().zip(&diagonal) {
        let s = ss.clone().div_scalar(b);
        ratio.push((s.clone() / h.clone().add_scalar(epsilon)).sum());
        second.push(s.sum());
        trace.push(h.clone().sum());
    }
    Ok(ratio.into_iter().chain(second).chain(trace).collect())
}

/// `(Σ_j S_j/(h_j + ε), Σ_j S_j, Σ_j h_j)` summed over the parameters, from the host values
/// of [`tic_parts`].
fn tic_totals(values: &[f64]) -> [f64; 3] {
    let n = values.len() / 3;
    let total = |k: usize| values[k * n..(k + 1) * n].iter().sum::<f64>();
    [total(0), total(1), total(2)]
}

/// How each of the two quantities turns the totals `(Σ S/(h + ε), Σ S, Σ h)` into its value.
trait TicValue {
    fn value(totals: [f64; 3], epsilon: f64) -> f64;
}

impl TicValue for TICDiag {
    fn value([ratio, _, _]: [f64; 3], _: f64) -> f64 {
        ratio
    }
}

impl TicValue for TICTrace {
    fn value([_, second, trace]: [f64; 3], epsilon: f64) -> f64 {
        second / (trace + epsilon)
    }
}

/// The [`Quantity`] impl both share: settings checks, needs, and the enqueued parts of
/// [`tic_parts`], finished through [`TicValue`].
macro_rules! tic_quantity {
    ($t:ident) => {
        impl Quantity for $t {
            fn spec(&self) -> &'static QuantitySpec {
                &Self::SPEC
            }

            fn check(&self) -> Result<(), CockpitError> {
                check_mc_samples(Self::SPEC.name, self.mc_samples)?;
                check_epsilon(Self::SPEC.name, self.epsilon)
            }

            fn should_compute(&self, step: usize) -> bool {
                self.schedule.is_active(step)
            }

            fn uses_curvature(&self, step: usize) -> bool {
                self.should_compute(step)
            }

            fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
                let parts = tic_parts(ctx, self.curvature, self.epsilon)?;
                Ok(self.awaiting.read(ctx.step, 0, parts))
            }

            fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
                let (step, _) = self.awaiting.take()?;
                let value = Self::value(tic_totals(host), self.epsilon);
                Ok(Some((step, Value::Float(value))))
            }
        }
    };
}

tic_quantity!(TICDiag);
tic_quantity!(TICTrace);

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{close, two_samples};

    /// S = (10/2, 4/2) = (5, 2) and h = (2, 4): TICDiag 5/2 + 2/4 = 3, TICTrace 7/6 (ε = 0).
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]).with_curvature(vec![vec![2.0, 4.0]]);
        let settings = TicSettings {
            epsilon: 0.0,
            ..TicSettings::default()
        };
        let mut diag = TICDiag::with_settings(Schedule::every_step(), settings);
        let Some((0, Value::Float(v))) = diag.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(v, 3.0, 1e-12), "{v}");
        let mut trace = TICTrace::with_settings(Schedule::every_step(), settings);
        let Some((0, Value::Float(v))) = trace.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(v, 7.0 / 6.0, 1e-12), "{v}");
    }
}
