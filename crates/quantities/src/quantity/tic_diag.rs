//! TICDiag and TICTrace.

use burn::tensor::Tensor;

use super::base::{Quantity, StepContext, read_scalars};
use crate::curvature::DiagonalKind;
use crate::persample::PerSampleNeeds;
use crate::{QuantityError, Schedule, Value};

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
    name: String,
    curvature: DiagonalKind,
    epsilon: f64,
}

/// TIC with the trace of the curvature (Cockpit's `TICTrace`): `Σ_j S_j / (Σ_j h_j + ε)`.
///
/// # Cost
///
/// As [`TICDiag`].
#[derive(Debug, Clone)]
pub struct TICTrace {
    schedule: Schedule,
    name: String,
    curvature: DiagonalKind,
    epsilon: f64,
}

macro_rules! tic_builders {
    ($t:ident, $name:literal) => {
        impl $t {
            /// With `diag_h` and `ε = 1e-7` on the given schedule.
            pub fn new(schedule: Schedule) -> Self {
                Self {
                    schedule,
                    name: $name.into(),
                    curvature: DiagonalKind::Hessian,
                    epsilon: 1e-7,
                }
            }

            /// Which curvature diagonal to use.
            pub fn with_curvature(mut self, curvature: DiagonalKind) -> Self {
                self.curvature = curvature;
                self
            }

            /// The output key.
            pub fn with_name(mut self, name: impl Into<String>) -> Self {
                self.name = name.into();
                self
            }
        }
    };
}

tic_builders!(TICDiag, "TICDiag");
tic_builders!(TICTrace, "TICTrace");

/// `(Σ_j S_j/(h_j + ε), Σ_j S_j, Σ_j h_j)` summed over the parameters, one host read.
fn tic_parts(
    ctx: &StepContext<'_>,
    curvature: DiagonalKind,
    epsilon: f64,
) -> Result<[f64; 3], QuantityError> {
    let stats = ctx.per_sample_stats()?;
    let b = stats.batch_size as f64;
    let sum_sq = stats.sum_sq.as_deref().unwrap_or_default();
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
    let n = ratio.len();
    let values = read_scalars(ratio.into_iter().chain(second).chain(trace).collect())?;
    let total = |k: usize| values[k * n..(k + 1) * n].iter().sum::<f64>();
    Ok([total(0), total(1), total(2)])
}

impl Quantity for TICDiag {
    fn name(&self) -> &str {
        &self.name
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

    fn uses_curvature(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let [ratio, _, _] = tic_parts(ctx, self.curvature, self.epsilon)?;
        Ok(Some((ctx.step, Value::Float(ratio))))
    }
}

impl Quantity for TICTrace {
    fn name(&self) -> &str {
        &self.name
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

    fn uses_curvature(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let [_, second, trace] = tic_parts(ctx, self.curvature, self.epsilon)?;
        Ok(Some((
            ctx.step,
            Value::Float(second / (trace + self.epsilon)),
        )))
    }
}
