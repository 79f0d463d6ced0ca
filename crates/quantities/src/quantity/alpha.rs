//! Alpha.

use std::sync::Arc;

use burn::tensor::Tensor;

use super::base::{Quantity, StepContext, sum_over_params};
use super::spec::{Needs, NoSettings, QuantitySpec, QuantityType, ValueShape};
use crate::persample::{PerSampleSource, Request};
use crate::snapshot::read_values;
use crate::{QuantityError, Schedule, Snapshot, Value};

/// One end of Alpha's step: parameters, loss and its variance, and the per-sample gradients.
#[derive(Debug, Clone)]
struct Point {
    step: usize,
    params: Snapshot,
    f: f64,
    var_f: f64,
    source: Arc<dyn PerSampleSource>,
}

/// The local step-size quality α (Cockpit's `Alpha`): where the step `d = θ_{s+1} − θ_s`
/// landed on a quadratic fitted along it. −1: no step or a concave fit; 0: the step reached
/// the fitted minimum; 1: it landed at the same height on the other side; < −1: uphill.
///
/// A two-step quantity computed at s+1 and stored under s. At both points it takes the
/// mini-batch loss `f` and the unbiased variance of the per-sample losses, the projected
/// per-sample gradients `y_n = g_nᵀd/‖d‖`, their mean and unbiased variance; it fits
/// `q(x) = μ₀ + μ₁x + μ₂x²` to `[f_s, f_{s+1}, df_s, df_{s+1}]` at `x = 0, t = ‖d‖` by weighted
/// least squares (weights `1/variance`, zero variances replaced by 1e-10) and returns
/// `α = 2t/(−μ₁/μ₂) − 1`. A singular fit gives −1 if `t = 0` and no value otherwise.
///
/// `d` is always `θ_{s+1} − θ_s` (Cockpit's general path), which equals its SGD fast path's
/// `−lr·g` up to rounding, so it works for any optimizer.
///
/// # Cost
///
/// Keeps θ_s and the step's per-sample source for one step (`B·(d_in + d_out)` per Linear
/// layer on the fast path; the exact fallback re-runs its `B` passes at the end point); two
/// projections `⟨g_n, d⟩` (one matmul per layer each); one host read of `2B + 1` numbers plus
/// the per-sample losses.
#[derive(Debug, Clone)]
pub struct Alpha {
    schedule: Schedule,
    start: Option<Point>,
}

impl Alpha {
    /// Alpha on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            start: None,
        }
    }

    fn point(ctx: &StepContext<'_>) -> Result<Point, QuantityError> {
        let losses = ctx
            .info
            .individual_losses()
            .ok_or(QuantityError::MissingInfo("individual_losses"))?;
        let source = ctx.per_sample_source()?.clone();
        let losses = read_values(losses.clone())?;
        Ok(Point {
            step: ctx.step,
            params: ctx.params.clone(),
            f: ctx.loss,
            var_f: unbiased_variance(&losses),
            source,
        })
    }

    fn end(
        start: &Point,
        end: &Point,
        ctx: &StepContext<'_>,
    ) -> Result<Option<f64>, QuantityError> {
        let d = end.params.difference(&start.params)?;
        let project = |source: &Arc<dyn PerSampleSource>| -> Result<Tensor<1>, QuantityError> {
            let mut request = Request::new();
            request.directions = vec![&d];
            let stats = source.reduce(ctx.params, request)?;
            sum_over_params(stats.dots.first().map(Vec::as_slice).unwrap_or_default())
        };
        let (ys, ye) = (project(&start.source)?, project(&end.source)?);
        let (bs, be) = (ys.dims()[0], ye.dims()[0]);
        let values = read_values(Tensor::cat(vec![d.sq_norms().sum(), ys, ye], 0))?;
        let t = values[0].sqrt();
        if t == 0.0 {
            return Ok(Some(-1.0));
        }
        let ys: Vec<f64> = values[1..1 + bs].iter().map(|y| y / t).collect();
        let ye: Vec<f64> = values[1 + bs..1 + bs + be].iter().map(|y| y / t).collect();
        let observations = [start.f, end.f, mean(&ys), mean(&ye)];
        let variances = [
            start.var_f,
            end.var_f,
            unbiased_variance(&ys),
            unbiased_variance(&ye),
        ];
        Ok(alpha(t, observations, variances))
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn unbiased_variance(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)
}

/// α from the fit of `[f_0, f_t, df_0, df_t]` with their variances (Cockpit's
/// `_fit_quadratic` and `_get_alpha`).
pub(crate) fn alpha(t: f64, y: [f64; 4], variances: [f64; 4]) -> Option<f64> {
    let rows = [
        [1.0, 0.0, 0.0],
        [1.0, t, t * t],
        [0.0, 1.0, 0.0],
        [0.0, 1.0, 2.0 * t],
    ];
    let weights = variances.map(|v| if v == 0.0 { 1.0 / 1e-10 } else { 1.0 / v });
    let mut m = [[0.0; 3]; 3];
    let mut r = [0.0; 3];
    for k in 0..4 {
        for i in 0..3 {
            r[i] += rows[k][i] * weights[k] * y[k];
            for j in 0..3 {
                m[i][j] += rows[k][i] * weights[k] * rows[k][j];
            }
        }
    }
    let mu = match invert3(m) {
        Some(inv) => [0, 1, 2].map(|i| (0..3).map(|j| inv[i][j] * r[j]).sum::<f64>()),
        None => return if t == 0.0 { Some(-1.0) } else { None },
    };
    if mu[2] < 0.0 {
        return Some(-1.0);
    }
    Some(2.0 * t / (-mu[1] / mu[2]) - 1.0)
}

/// Gauss–Jordan inverse with partial pivoting; `None` for a singular matrix.
fn invert3(mut m: [[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let mut inv = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for col in 0..3 {
        let pivot = (col..3).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col] == 0.0 || !m[pivot][col].is_finite() {
            return None;
        }
        m.swap(col, pivot);
        inv.swap(col, pivot);
        let p = m[col][col];
        for j in 0..3 {
            m[col][j] /= p;
            inv[col][j] /= p;
        }
        for row in 0..3 {
            if row != col {
                let factor = m[row][col];
                for j in 0..3 {
                    m[row][j] -= factor * m[col][j];
                    inv[row][j] -= factor * inv[col][j];
                }
            }
        }
    }
    Some(inv)
}

impl QuantityType for Alpha {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "Alpha",
        shape: ValueShape::Scalar,
        needs: Needs {
            per_sample: true,
            next_step: true,
            ..Needs::NOTHING
        },
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for Alpha {
    fn name(&self) -> &str {
        Self::SPEC.name
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step) || self.schedule.was_active_before(step)
    }

    fn uses_per_sample(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let start = self.start.take().filter(|s| s.step + 1 == ctx.step);
        let point = Self::point(ctx)?;
        let mut result = None;
        if let Some(start) = start
            && self.schedule.was_active_before(ctx.step)
            && let Some(value) = Self::end(&start, &point, ctx)?
        {
            result = Some((start.step, Value::Float(value)));
        }
        if self.schedule.is_active(ctx.step) {
            self.start = Some(point);
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_of_exact_quadratics() {
        // q(x) = (x − 1)²: minimum at 1. A step of t = 1 lands at the minimum (α = 0), t = 2
        // on the other side at equal height (α = 1), t = 0.5 half-way (α = −0.5).
        let q = |x: f64| (x - 1.0).powi(2);
        let dq = |x: f64| 2.0 * (x - 1.0);
        for (t, expected) in [(1.0, 0.0), (2.0, 1.0), (0.5, -0.5)] {
            let a = alpha(t, [q(0.0), q(t), dq(0.0), dq(t)], [1.0, 1.0, 1.0, 1.0]).unwrap();
            assert!((a - expected).abs() < 1e-12, "t={t}: {a}");
        }
        // Concave fit: −1. Zero variances are replaced by 1e-10 (no division by zero).
        assert_eq!(alpha(1.0, [0.0, -1.0, 0.0, -2.0], [1.0; 4]), Some(-1.0));
        assert!(
            alpha(1.0, [q(0.0), q(1.0), dq(0.0), dq(1.0)], [0.0; 4])
                .unwrap()
                .abs()
                < 1e-9
        );
        // No step: singular fit, −1.
        assert_eq!(alpha(0.0, [1.0, 1.0, 0.5, 0.5], [1.0; 4]), Some(-1.0));
    }
}
