//! Alpha.

use std::sync::Arc;

use burn::tensor::Tensor;

use super::base::{QuantityType, Enqueued, Quantity, StepContext, sum_over_params};
use super::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::persample::reduce::sum_all;
use crate::persample::{Direction, PerSampleNeeds, PerSampleSource, Request, Statistic};
use super::{Carried, CarriedError};
use crate::{QuantityError, Schedule, Snapshot, Value};

/// One end of Alpha's step: parameters, loss and its variance, and how the step's
/// projections are had.
#[derive(Debug, Clone)]
struct Point {
    step: usize,
    params: Snapshot,
    f: f64,
    var_f: f64,
    /// How the projections are had, at a start point.
    path: Option<Path>,
}

/// Cockpit's two ways to the projections `g_nᵀd`.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per Alpha, moved, never copied
enum Path {
    /// Plain SGD: `d = −lr·∇L_s`. At the start point `⟨g_n, ∇L_s⟩` comes from the step's
    /// shared per-sample pass (the dots InnerTest and OrthoTest read), at the end point
    /// `⟨g_n, ∇L_s⟩` from the next step's pass (`Statistic::Dot(Direction::PreviousGradient)`).
    Sgd {
        lr: f64,
        /// `‖∇L_s‖²`, `[1]`: the start step's shared norm (no reductions again at the end).
        grad_sq_norm: Tensor<1>,
        /// `Σ_p ⟨g_{n,p}, ∇_p L_s⟩`, `[B]`.
        dots: Tensor<1>,
    },
    /// Any other optimizer: `d = θ_{s+1} − θ_s`, projected through the kept per-sample source.
    General { source: Arc<dyn PerSampleSource> },
}

/// The local step-size quality α (Cockpit's `Alpha`): where the step `d` landed on a
/// quadratic fitted along it. −1: no step or a concave fit; 0: the step reached the fitted
/// minimum; 1: it landed at the same height on the other side; < −1: uphill.
///
/// A two-step quantity computed at s+1 and stored under s. At both points it takes the
/// mini-batch loss `f` and the unbiased variance of the per-sample losses, the projected
/// per-sample gradients `y_n = g_nᵀd/‖d‖`, their mean and unbiased variance; it fits
/// `q(x) = μ₀ + μ₁x + μ₂x²` to `[f_s, f_{s+1}, df_s, df_{s+1}]` at `x = 0, t = ‖d‖` by weighted
/// least squares (weights `1/variance`, zero variances replaced by 1e-10) and returns
/// `α = 2t/(−μ₁/μ₂) − 1`. A singular fit gives −1 if `t = 0` and no value otherwise.
///
/// As in Cockpit, `d = −lr·∇L_s` when the step info names plain SGD
/// ([`OptimizerInfo::is_plain_sgd`](crate::OptimizerInfo::is_plain_sgd), learning rate > 0),
/// else `d = θ_{s+1} − θ_s` (any optimizer). The Cockpit checks the announced step against
/// the update actually taken (its first tracked steps, then every 16th); where a check
/// contradicts it, the α of that step is refused and later start points take
/// `d = θ_{s+1} − θ_s` until a check confirms the announced step again.
///
/// # Cost
///
/// SGD path: the projections come with the steps' shared per-sample passes: `⟨g_n, ∇L_s⟩` at
/// s (shared with InnerTest and OrthoTest), `⟨g_n, ∇L_s⟩` at s+1 (one matmul per Linear
/// layer); keeps θ_s for one step. Other optimizers: keeps θ_s and the step's
/// per-sample source (`B·(d_in + d_out)` per Linear layer on the fast path; the exact fallback
/// re-runs its `B` passes at the end point) and projects twice on `d` (one matmul per layer
/// each). `3B + 3` numbers (the loss, the per-sample losses and both points' projections)
/// in the step's batched read.
#[derive(Debug, Clone)]
pub struct Alpha {
    schedule: Schedule,
    start: Option<Point>,
    /// Whether the last start point took the SGD path (`None` before the first).
    sgd: Option<bool>,
    /// The step's enqueued point, until its numbers are read.
    awaited: Option<Awaited>,
}

/// What an Alpha step enqueued, kept until its numbers come back: the point taken (all but
/// the variance of its losses, read with the rest), whether it becomes the next start, and
/// the start it ends with the layout of its projections in the read.
#[derive(Debug, Clone)]
struct Awaited {
    point: Point,
    is_start: bool,
    batch: usize,
    end: Option<(Point, Projections)>,
}

/// Where an end point's numbers lie in the read, after the `B` per-sample losses.
#[derive(Debug, Clone, Copy)]
enum Projections {
    /// `‖∇L_s‖²`, the `bs` start dots and the `be` end dots.
    Sgd { lr: f64, bs: usize, be: usize },
    /// `‖d‖²` and the `bs` + `be` projections on `d`.
    General { bs: usize, be: usize },
}

impl Alpha {
    /// Alpha on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            start: None,
            sgd: None,
            awaited: None,
        }
    }

    /// The point of the context's step, but for its loss and the variance of its per-sample
    /// losses (`NaN` until they are read). The announced plain SGD step stands for the update
    /// where the Cockpit's update check has not contradicted it.
    fn point(ctx: &StepContext<'_>, is_start: bool) -> Result<Point, QuantityError> {
        let sgd_lr = ctx
            .info
            .optimizer()
            .filter(|o| ctx.sgd_trusted() && o.is_plain_sgd())
            .and_then(|o| o.lr())
            .filter(|lr| lr.is_finite() && *lr > 0.0);
        let path = match sgd_lr {
            _ if !is_start => None,
            Some(lr) => {
                let stats = ctx.per_sample_stats()?;
                let dots = stats
                    .get(Statistic::Dot(Direction::Gradient))
                    .ok_or(QuantityError::MissingInfo(
                        "per-sample dots with the gradient",
                    ))?;
                Some(Path::Sgd {
                    lr,
                    grad_sq_norm: ctx.grad_sq_norm(),
                    dots: sum_over_params(dots)?,
                })
            }
            None => Some(Path::General {
                source: ctx.per_sample_source()?.clone(),
            }),
        };
        Ok(Point {
            step: ctx.step,
            params: ctx.params.clone(),
            f: f64::NAN,
            var_f: f64::NAN,
            path,
        })
    }

    /// The device numbers of the step from `start` to the context's step (`end`): appended
    /// to `parts`, their layout returned.
    fn end_parts(
        &self,
        start: &Point,
        end: &Point,
        ctx: &StepContext<'_>,
        parts: &mut Vec<Tensor<1>>,
    ) -> Result<Projections, QuantityError> {
        let path = start
            .path
            .as_ref()
            .ok_or(QuantityError::MissingInfo("Alpha's start point"))?;
        match path {
            // `t = ‖d‖` and `y_n = g_nᵀd/‖d‖` for `d = −lr·∇L_s`, from the dots the steps'
            // shared passes computed.
            Path::Sgd {
                lr,
                grad_sq_norm,
                dots,
            } => {
                let stats = ctx.per_sample_stats()?;
                let end_dots = stats
                    .get(Statistic::Dot(Direction::PreviousGradient))
                    .ok_or(QuantityError::MissingInfo(
                        "per-sample dots with the previous gradient",
                    ))?;
                let end_dots = sum_over_params(end_dots)?;
                let (bs, be) = (dots.dims()[0], end_dots.dims()[0]);
                parts.extend([grad_sq_norm.clone(), dots.clone(), end_dots]);
                Ok(Projections::Sgd { lr: *lr, bs, be })
            }
            // `d = θ_{s+1} − θ_s`, through the start point's kept per-sample source and the
            // end point's.
            Path::General { source } => {
                let moved = end.params.difference(&start.params)?;
                let project =
                    |source: &Arc<dyn PerSampleSource>| -> Result<Tensor<1>, QuantityError> {
                        let request = Request::new().project_on(Direction::Update, &moved);
                        let stats = source.reduce(ctx.params, request)?;
                        sum_over_params(
                            stats
                                .get(Statistic::Dot(Direction::Update))
                                .unwrap_or_default(),
                        )
                    };
                let (ys, ye) = (project(source)?, project(ctx.per_sample_source()?)?);
                let (bs, be) = (ys.dims()[0], ye.dims()[0]);
                parts.extend([sum_all(moved.sq_norms()), ys, ye]);
                Ok(Projections::General { bs, be })
            }
        }
    }

    /// α from the host numbers of an end point: `t` and both points' projections.
    fn end(
        &self,
        start: &Point,
        end: &Point,
        projections: Projections,
        host: &[f64],
    ) -> Result<Option<f64>, QuantityError> {
        let short = |expected: usize| QuantityError::ReadCount {
            expected,
            got: host.len(),
        };
        let (t, ys, ye) = match projections {
            Projections::Sgd { lr, bs, be } => {
                let values = host.get(..1 + bs + be).ok_or_else(|| short(1 + bs + be))?;
                let norm = values[0].sqrt();
                // y_n = ⟨g_n, d⟩/‖d‖ with d = −lr·∇L_s.
                let project = |v: &[f64]| v.iter().map(|y| -y / norm).collect::<Vec<f64>>();
                (
                    lr * norm,
                    project(&values[1..1 + bs]),
                    project(&values[1 + bs..]),
                )
            }
            Projections::General { bs, be } => {
                let values = host.get(..1 + bs + be).ok_or_else(|| short(1 + bs + be))?;
                let t = values[0].sqrt();
                let project = |v: &[f64]| v.iter().map(|y| y / t).collect::<Vec<f64>>();
                (t, project(&values[1..1 + bs]), project(&values[1 + bs..]))
            }
        };
        if t == 0.0 {
            return Ok(Some(-1.0));
        }
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
            announced_sgd: true,
            ..Needs::NOTHING
        },
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for Alpha {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    /// The SGD path's start point is saved (its parameters, loss, variance and the two
    /// projections' device numbers); the general path's start keeps the whole per-sample
    /// source of its step, which is not saved: the α of the step before a resume is then
    /// missing (the resumed run says so in its warnings).
    fn carry(&self) -> Result<Carried, QuantityError> {
        let mut carried = Carried::new();
        if let Some(sgd) = self.sgd {
            carried = carried.with_numbers("sgd", vec![f64::from(u8::from(sgd))]);
        }
        if let Some(Point {
            step,
            params,
            f,
            var_f,
            path:
                Some(Path::Sgd {
                    lr,
                    grad_sq_norm,
                    dots,
                }),
        }) = &self.start
        {
            carried = carried
                .with_numbers("start", vec![*step as f64, *f, *var_f, *lr])
                .with_tensor("start_norm", grad_sq_norm)?
                .with_tensor("start_dots", dots)?
                .with_snapshot("start_params", params)?;
        }
        Ok(carried)
    }

    fn restore(&mut self, carried: &Carried, params: &Snapshot) -> Result<(), CarriedError> {
        let name = self.name().to_string();
        self.sgd = match carried.has("sgd") {
            true => Some(carried.number(&name, "sgd")? != 0.0),
            false => None,
        };
        self.start = None;
        self.awaited = None;
        if !carried.has("start") {
            return Ok(());
        }
        let &[step, f, var_f, lr] = carried.numbers(&name, "start")? else {
            return Err(CarriedError::Missing {
                owner: name,
                part: "start".into(),
            });
        };
        let device = params.device();
        let tensor = |part: &str| carried.tensor(&name, part, &device);
        self.start = Some(Point {
            step: step as usize,
            params: carried.snapshot(&name, "start_params", params)?,
            f,
            var_f,
            path: Some(Path::Sgd {
                lr,
                grad_sq_norm: tensor("start_norm")?,
                dots: tensor("start_dots")?,
            }),
        });
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step) || self.schedule.was_active_before(step)
    }

    fn uses_per_sample(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        let end_on_sgd_path = self.start.as_ref().is_some_and(|start| {
            start.step + 1 == step && matches!(start.path, Some(Path::Sgd { .. }))
        });
        let mut needs = PerSampleNeeds::NONE;
        // Asked for until a start point shows another optimizer (shared with the gradient
        // tests, so usually free).
        if self.schedule.is_active(step) && self.sgd != Some(false) {
            needs = needs.with(Statistic::Dot(Direction::Gradient));
        }
        if end_on_sgd_path {
            needs = needs.with(Statistic::Dot(Direction::PreviousGradient));
        }
        needs
    }

    /// The loss and the per-sample losses, and at an end point the projections: one batch of
    /// numbers.
    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let start = self.start.take().filter(|s| s.step + 1 == ctx.step);
        let is_start = self.schedule.is_active(ctx.step);
        let losses = ctx
            .info
            .individual_losses()
            .ok_or(QuantityError::MissingInfo("individual_losses"))?
            .clone();
        let batch = losses.dims()[0];
        let point = Self::point(ctx, is_start)?;
        let mut parts = vec![ctx.info.loss().clone(), losses];
        let end = match start.filter(|_| self.schedule.was_active_before(ctx.step)) {
            Some(start) => {
                let projections = self.end_parts(&start, &point, ctx, &mut parts)?;
                Some((start, projections))
            }
            None => None,
        };
        self.awaited = Some(Awaited {
            point,
            is_start,
            batch,
            end,
        });
        Ok(Enqueued::Read(parts.into_iter().map(Into::into).collect()))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let Awaited {
            mut point,
            is_start,
            batch,
            end,
        } = self
            .awaited
            .take()
            .ok_or_else(|| QuantityError::Unsupported("Alpha: nothing enqueued".into()))?;
        let (loss, host) = host.split_at(1.min(host.len()));
        let (losses, rest) = host.split_at(batch.min(host.len()));
        point.f = loss.first().copied().unwrap_or(f64::NAN);
        point.var_f = unbiased_variance(losses);
        let mut result = None;
        if let Some((start, projections)) = end
            && let Some(value) = self.end(&start, &point, projections, rest)?
        {
            result = Some((start.step, Value::Float(value)));
        }
        if is_start {
            self.sgd = Some(matches!(point.path, Some(Path::Sgd { .. })));
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
