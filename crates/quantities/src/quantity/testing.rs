//! Tiny literal steps for the quantities' unit tests: parameters and per-sample gradients
//! written out by hand, statistics computed here on the host from those numbers (not by the
//! per-sample engine).

use burn::module::ParamId;
use burn::tensor::{Device, Tensor, TensorData};

use super::base::StepContext;
use crate::curvature::{CurvatureSource, DiagonalKind};
use crate::persample::{Direction, PerSampleStats, Statistic};
use crate::{ParamEntry, QuantityError, Snapshot, StepInfo};

pub(crate) fn device() -> Device {
    Device::flex()
}

pub(crate) fn tensor(values: &[f64]) -> Tensor<1> {
    Tensor::from_data(TensorData::new(values.to_vec(), [values.len()]), &device())
}

/// A snapshot of flat parameters named `p0`, `p1`, … with the given ids.
pub(crate) fn snapshot(ids: &[ParamId], values: &[&[f64]]) -> Snapshot {
    Snapshot::from_entries(
        ids.iter()
            .zip(values)
            .enumerate()
            .map(|(k, (id, v))| ParamEntry {
                id: *id,
                name: format!("p{k}"),
                shape: vec![v.len()],
                value: tensor(v),
            })
            .collect(),
    )
}

/// One step of a model with flat parameters, given per-sample gradients `g[n][p]`.
pub(crate) struct TinyStep {
    pub(crate) step: usize,
    pub(crate) params: Snapshot,
    pub(crate) grads: Snapshot,
    pub(crate) info: StepInfo,
    pub(crate) stats: PerSampleStats,
    pub(crate) loss: f64,
}

impl TinyStep {
    /// θ = `params`, per-sample gradients `per_sample[n][p]`, mean gradient their mean.
    pub(crate) fn new(
        step: usize,
        ids: &[ParamId],
        params: &[&[f64]],
        per_sample: &[Vec<Vec<f64>>],
        loss: f64,
    ) -> Self {
        let b = per_sample.len();
        let mean: Vec<Vec<f64>> = (0..params.len())
            .map(|p| {
                (0..params[p].len())
                    .map(|j| per_sample.iter().map(|g| g[p][j]).sum::<f64>() / b as f64)
                    .collect()
            })
            .collect();
        let per_param = |f: &dyn Fn(usize) -> Vec<f64>| -> Vec<Tensor<1>> {
            (0..params.len()).map(|p| tensor(&f(p))).collect()
        };
        let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
        let stats = PerSampleStats::new(b)
            .with(
                Statistic::SqNorm,
                per_param(&|p| per_sample.iter().map(|g| dot(&g[p], &g[p])).collect()),
            )
            .with(
                Statistic::Dot(Direction::Gradient),
                per_param(&|p| per_sample.iter().map(|g| dot(&g[p], &mean[p])).collect()),
            )
            .with(
                Statistic::SumSq,
                per_param(&|p| {
                    (0..params[p].len())
                        .map(|j| per_sample.iter().map(|g| g[p][j] * g[p][j]).sum())
                        .collect()
                }),
            )
            .with(
                Statistic::AbsMax,
                per_param(&|p| {
                    vec![
                        per_sample
                            .iter()
                            .flat_map(|g| g[p].iter().map(|v| v.abs()))
                            .fold(0.0, f64::max),
                    ]
                }),
            );
        let mean_refs: Vec<&[f64]> = mean.iter().map(Vec::as_slice).collect();
        Self {
            step,
            params: snapshot(ids, params),
            grads: snapshot(ids, &mean_refs),
            info: StepInfo::new(tensor(&[loss])).with_batch_size(b),
            stats,
            loss,
        }
    }

    /// With a quadratic's curvature: Hessian `diag(h)`.
    pub(crate) fn with_curvature(self, h: Vec<Vec<f64>>) -> Self {
        Self {
            info: self.info.with_curvature(DiagonalHessian(h)),
            ..self
        }
    }

    /// With the optimizer the step was taken with.
    pub(crate) fn with_optimizer(self, optimizer: crate::OptimizerInfo) -> Self {
        Self {
            info: self.info.with_optimizer(optimizer),
            ..self
        }
    }

    pub(crate) fn ctx(&self) -> StepContext<'_> {
        StepContext {
            step: self.step,
            params: &self.params,
            grads: &self.grads,
            info: &self.info,
            loss: self.loss.into(),
            grad_sq_norms: Default::default(),
            grad_sq_norm: Default::default(),
            sample_sq_norms: Default::default(),
            sample_grad_dots: Default::default(),
            per_sample: Ok(Some(&self.stats)),
            sgd_contradicted: None,
        }
    }
}

/// A quadratic loss with a diagonal Hessian: `H v = h ⊙ v`, diagonal `h` (every kind).
#[derive(Debug)]
pub(crate) struct DiagonalHessian(pub(crate) Vec<Vec<f64>>);

impl CurvatureSource for DiagonalHessian {
    fn hvp(&self, _params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        let entries = v
            .entries()
            .iter()
            .zip(&self.0)
            .map(|(e, h)| ParamEntry {
                value: e.value.clone() * tensor(h),
                ..e.clone()
            })
            .collect();
        Ok(Snapshot::from_entries(entries))
    }

    fn diagonal(
        &self,
        _params: &Snapshot,
        _kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        Ok(self.0.iter().map(|h| tensor(h)).collect())
    }
}

/// `|a − b| ≤ tol·max(1, |b|)`.
pub(crate) fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

/// The worked example of the unit tests: one parameter θ = (0.5, −1), two samples with
/// gradients g₁ = (1, 2), g₂ = (3, 0) (mean g = (2, 1), ‖g‖² = 5), loss 2.
pub(crate) fn two_samples(ids: &[ParamId]) -> TinyStep {
    TinyStep::new(
        0,
        ids,
        &[&[0.5, -1.0]],
        &[vec![vec![1.0, 2.0]], vec![vec![3.0, 0.0]]],
        2.0,
    )
}

/// The float value `quantity` computes at `step` (stored under step 0), or a panic naming what
/// came instead.
pub(crate) fn float_at_zero(quantity: &mut dyn crate::Quantity, step: &TinyStep) -> f64 {
    match quantity.compute(&step.ctx()) {
        Ok(Some((0, crate::Value::Float(v)))) => v,
        other => panic!("no float under step 0: {other:?}"),
    }
}
