//! HessMaxEV.

use std::collections::BTreeMap;

use burn::tensor::{Tensor, TensorCreationOptions, TensorData};
use serde::Deserialize;

use super::base::{Enqueued, Quantity, QuantityType, StepContext, invalid};
use super::spec::{Needs, QuantitySpec, ValueShape};
use super::{Carried, CarriedError};
use crate::curvature::random::SplitMix;
use crate::curvature::{EigenEstimate, Target, lanczos_with_vector, power_iteration};
use crate::{CockpitError, QuantityError, Schedule, Snapshot, Value};

/// How HessMaxEV finds the eigenvalue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EigenMethod {
    /// Lanczos of largest magnitude started from the previous tracked step's eigenvector (the
    /// dominant eigenvector drifts slowly, so a few products converge it), with a small random
    /// admixture so that the start is never orthogonal to a new dominant direction; from a
    /// random start at the first tracked step. HessMaxEV's default.
    WarmLanczos {
        /// Relative residual `‖Hy − θy‖ ≤ tol·|θ|` (eigenvalue error about `tol²·|θ|²/gap`).
        tol: f64,
        /// Product budget.
        max_products: usize,
    },
    /// Cockpit's power iteration (`use_power=True`): stop when
    /// `|λ_old − λ| ≤ atol + rtol·|λ|`, at most `max_products` products.
    Power {
        /// Relative tolerance (Cockpit: 1e-3).
        rtol: f64,
        /// Absolute tolerance (Cockpit: 1e-6).
        atol: f64,
        /// Product budget (Cockpit: 100).
        max_products: usize,
    },
    /// Lanczos with full reorthogonalisation, stopped at relative residual `tol`.
    Lanczos {
        /// Relative residual.
        tol: f64,
        /// Product budget.
        max_products: usize,
        /// Which eigenvalue: largest magnitude (as power iteration), or largest algebraic (as
        /// Cockpit's `use_power=False`, scipy's `eigsh(which="LA")`).
        target: Target,
    },
}

/// The largest-magnitude eigenvalue of the Hessian of the mini-batch loss (Cockpit's
/// `HessMaxEV`), from Hessian-vector products of the step's
/// [`CurvatureSource`](crate::curvature::CurvatureSource).
///
/// Default: [`EigenMethod::WarmLanczos`] (relative residual 1e-2, so an eigenvalue error of
/// about 1e-4 relative for a well separated eigenvalue; at most 100 products),
/// started from the previous tracked step's eigenvector: the same eigenvalue as Cockpit's
/// power iteration (largest magnitude), converged rather than loosely stopped, in a few
/// products per step. [`EigenMethod::cockpit_power`] is Cockpit's own power iteration (rtol
/// 1e-3, atol 1e-6, at most 100 products) from a uniform `[0, 1)` start vector drawn from this
/// quantity's seeded generator (Cockpit draws from torch's global RNG, which Rust cannot
/// reproduce; [`HessMaxEV::with_start_vectors`] replays recorded ones), for parity with
/// recorded runs. Not converging within the budget gives a warning and the last estimate, as
/// Cockpit does.
///
/// # Cost
///
/// One Hessian-vector product per iteration (exact products of an
/// [`MlpCurvature`](crate::curvature::MlpCurvature) cost about two gradient passes; finite
/// differences two full forward and backward passes); warm-started Lanczos took a median of 13
/// (at most 25) products per step on the benchmark MLP (`BENCHMARKS.md`), power iteration
/// 5–51 on the fixtures. Lanczos keeps its basis (one parameter-sized
/// vector per product, as one matrix on the device) and the eigenvector until the next tracked
/// step. Reads: one per product (two numbers); start vectors are drawn and mixed on the
/// device.
#[derive(Debug, Clone)]
pub struct HessMaxEV {
    schedule: Schedule,
    method: EigenMethod,
    rng: SplitMix,
    start_vectors: BTreeMap<usize, Vec<f64>>,
    warnings: Vec<String>,
    /// The last tracked step's eigenvector (warm start).
    previous: Option<Snapshot>,
}

impl EigenMethod {
    /// Cockpit's power iteration: rtol 1e-3, atol 1e-6, at most 100 products.
    pub const fn cockpit_power() -> Self {
        Self::Power {
            rtol: 1e-3,
            atol: 1e-6,
            max_products: 100,
        }
    }
}

impl HessMaxEV {
    /// The most Hessian-vector products one estimate may take ([`Quantity::check`] refuses
    /// more): Lanczos keeps one basis vector of the model's size per product.
    pub const MAX_PRODUCTS: usize = 1000;

    /// HessMaxEV with warm-started Lanczos on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            method: EigenMethod::WarmLanczos {
                tol: 1e-2,
                max_products: 100,
            },
            rng: SplitMix::new(0x5EED_CAFE),
            start_vectors: BTreeMap::new(),
            warnings: Vec::new(),
            previous: None,
        }
    }

    /// The eigenvalue method.
    pub fn with_method(mut self, method: EigenMethod) -> Self {
        self.method = method;
        self
    }

    /// Seeds the start vectors' generator.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = SplitMix::new(seed);
        self
    }

    /// Start vectors for given steps (raw, before normalisation; all parameters concatenated
    /// in snapshot order and burn layout), e.g. the ones a recorded run used.
    pub fn with_start_vectors(mut self, vectors: BTreeMap<usize, Vec<f64>>) -> Self {
        self.start_vectors = vectors;
        self
    }

    /// The start vector of `step`: the recorded one if given, else drawn on the device.
    fn start(&mut self, params: &Snapshot, step: usize) -> Result<Snapshot, QuantityError> {
        let numel = params.numel();
        let (device, dtype) = match params.entries().first() {
            Some(e) => (e.value.device(), e.value.dtype()),
            None => return Ok(params.clone()),
        };
        let options = TensorCreationOptions::new(device).with_dtype(dtype);
        let flat = match self.start_vectors.get(&step) {
            Some(v) if v.len() == numel => {
                Tensor::<1>::from_data(TensorData::new(v.clone(), [numel]), options)
            }
            Some(v) => {
                return Err(QuantityError::Shape(format!(
                    "the start vector of step {step} has {} values for {numel} parameters",
                    v.len()
                )));
            }
            None => device_uniform(numel, self.rng.uniform(), options),
        };
        Ok(params.with_flat(flat)?)
    }

    /// The warm start: the previous eigenvector plus `10⁻³·‖·‖` of a fresh random start
    /// (`None` at the first step, or if the parameters changed), mixed on the device.
    fn warm_start(&mut self, params: &Snapshot, step: usize) -> Result<Snapshot, QuantityError> {
        let fresh = self.start(params, step)?;
        let Some(previous) = self.previous.take() else {
            return Ok(fresh);
        };
        if previous.ids() != params.ids() {
            return Ok(fresh);
        }
        let fresh = fresh.flatten();
        let mix = fresh.clone().square().sum().sqrt().recip().mul_scalar(1e-3);
        Ok(params.with_flat(previous.flatten() + fresh * mix)?)
    }
}

/// `numel` numbers in `[0, 1)` drawn on the device from `seed` (`[0, 1)`, one host draw per
/// start vector): a sine hash of the element's index, `frac(43758.5453·sin(12.9898·i + a))`
/// twice over. Enough for a start vector (it needs a component along the top eigenvector,
/// not statistical quality), the same bits for the same seed, and no `numel` host numbers to
/// upload.
fn device_uniform(numel: usize, seed: f64, options: TensorCreationOptions) -> Tensor<1> {
    let frac = |x: Tensor<1>| x.clone() - x.floor();
    let index = Tensor::<1, burn::tensor::Int>::arange(0..numel as i64, &options.device)
        .float()
        .cast(options.dtype_or(burn::tensor::DType::F32));
    let first = frac(
        (index.clone().mul_scalar(12.9898).add_scalar(1000.0 * seed))
            .sin()
            .mul_scalar(43758.5453),
    );
    frac(
        (first.mul_scalar(78.233) + index.mul_scalar(0.618_034))
            .sin()
            .mul_scalar(43758.5453),
    )
}

/// HessMaxEV's settings.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HessMaxEVSettings {
    /// `true` (default): the eigenvalue of largest magnitude (what Cockpit's power iteration
    /// approaches), by warm-started Lanczos. `false`: the largest algebraic eigenvalue,
    /// converged, as Cockpit's `use_power=False` (scipy's `eigsh(k=1, which="LA")`), by Lanczos.
    pub use_power: bool,
    /// With `use_power`: Cockpit's own power iteration from a fresh random start at every
    /// step, loosely stopped as Cockpit stops it (for parity with recorded runs; slower).
    pub cockpit_iteration: bool,
}

impl Default for HessMaxEVSettings {
    fn default() -> Self {
        Self {
            use_power: true,
            cockpit_iteration: false,
        }
    }
}

impl QuantityType for HessMaxEV {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "HessMaxEV",
        shape: ValueShape::Scalar,
        needs: Needs {
            curvature: true,
            ..Needs::NOTHING
        },
    };
    type Settings = HessMaxEVSettings;

    fn with_settings(schedule: Schedule, settings: HessMaxEVSettings) -> Self {
        let quantity = Self::new(schedule);
        if settings.use_power && settings.cockpit_iteration {
            quantity.with_method(EigenMethod::cockpit_power())
        } else if settings.use_power {
            quantity
        } else {
            quantity.with_method(EigenMethod::Lanczos {
                tol: 1e-9,
                max_products: 200,
                target: Target::LargestAlgebraic,
            })
        }
    }
}

impl Quantity for HessMaxEV {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn check(&self) -> Result<(), CockpitError> {
        let (tolerances, max_products) = match self.method {
            EigenMethod::Power {
                rtol,
                atol,
                max_products,
            } => ([rtol, atol], max_products),
            EigenMethod::Lanczos {
                tol, max_products, ..
            }
            | EigenMethod::WarmLanczos { tol, max_products } => ([tol, 0.0], max_products),
        };
        if max_products == 0 || max_products > Self::MAX_PRODUCTS {
            return Err(invalid(
                Self::SPEC.name,
                format!(
                    "max_products = {max_products}: must be between 1 and {} (Lanczos keeps a \
                     basis vector of the model's size per product)",
                    Self::MAX_PRODUCTS
                ),
            ));
        }
        if tolerances.iter().any(|t| !(t.is_finite() && *t >= 0.0)) {
            return Err(invalid(
                Self::SPEC.name,
                format!("tolerances must be finite and ≥ 0, got {:?}", self.method),
            ));
        }
        Ok(())
    }

    fn carry(&self) -> Result<Carried, QuantityError> {
        let state = self.rng.state();
        let mut carried = Carried::new().with_numbers(
            "rng",
            vec![(state >> 32) as f64, (state & 0xffff_ffff) as f64],
        );
        if let Some(previous) = &self.previous {
            carried = carried.with_snapshot("previous", previous)?;
        }
        Ok(carried)
    }

    fn restore(&mut self, carried: &Carried, params: &Snapshot) -> Result<(), CarriedError> {
        let &[high, low] = carried.numbers(self.name(), "rng")? else {
            return Err(CarriedError::Missing {
                owner: self.name().into(),
                part: "rng".into(),
            });
        };
        self.rng = SplitMix::new(((high as u64) << 32) | low as u64);
        self.previous = match carried.has("previous") {
            true => Some(carried.snapshot(self.name(), "previous", params)?),
            false => None,
        };
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn uses_curvature(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        self.value_now(ctx).map(Enqueued::Done)
    }
}

impl HessMaxEV {
    /// The value at the context's step, computed at once (no read is enqueued).
    fn value_now(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let source = ctx.curvature()?.clone();
        let lanczos = |start: &Snapshot, tol, max_products, target| {
            lanczos_with_vector(
                source.as_ref(),
                ctx.params,
                start,
                tol,
                max_products,
                target,
            )
        };
        let EigenEstimate {
            value,
            products,
            converged,
        } = match self.method {
            EigenMethod::Power {
                rtol,
                atol,
                max_products,
            } => {
                let start = self.start(ctx.params, ctx.step)?;
                power_iteration(
                    source.as_ref(),
                    ctx.params,
                    &start,
                    rtol,
                    atol,
                    max_products,
                )?
            }
            EigenMethod::Lanczos {
                tol,
                max_products,
                target,
            } => {
                lanczos(
                    &self.start(ctx.params, ctx.step)?,
                    tol,
                    max_products,
                    target,
                )?
                .0
            }
            EigenMethod::WarmLanczos { tol, max_products } => {
                let start = self.warm_start(ctx.params, ctx.step)?;
                let (estimate, vector) =
                    lanczos(&start, tol, max_products, Target::LargestMagnitude)?;
                self.previous = Some(vector);
                estimate
            }
        };
        log::debug!(
            "{} at step {}: {products} Hessian-vector products, converged: {converged}",
            Self::SPEC.name,
            ctx.step
        );
        if !converged {
            self.warnings.push(format!(
                "{} did not converge within {products} Hessian-vector products at step {}; \
                 returning the last estimate",
                Self::SPEC.name,
                ctx.step
            ));
        }
        Ok(Some((ctx.step, Value::Float(value))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{TinyStep, close};

    /// Hessian diag(2, −5, 1): the largest magnitude is −5 (power iteration); the largest
    /// algebraic is 2 (`use_power = false`).
    #[test]
    fn dominant_eigenvalues_of_a_diagonal_hessian() {
        let ids = [ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.0, 0.0, 0.0]],
            &[vec![vec![0.0, 0.0, 0.0]]],
            1.0,
        )
        .with_curvature(vec![vec![2.0, -5.0, 1.0]]);
        let mut power = HessMaxEV::new(Schedule::every_step());
        let Some((0, Value::Float(v))) = power.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(v, -5.0, 1e-2), "{v}");
        let mut largest = HessMaxEV::with_settings(
            Schedule::every_step(),
            HessMaxEVSettings {
                use_power: false,
                ..HessMaxEVSettings::default()
            },
        );
        let Some((0, Value::Float(v))) = largest.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(v, 2.0, 1e-6), "{v}"); // float32 tensors
        let zero_budget = HessMaxEV::new(Schedule::every_step()).with_method(EigenMethod::Power {
            rtol: 1e-3,
            atol: 1e-6,
            max_products: 0,
        });
        assert!(zero_budget.check().is_err());
        let unbounded =
            HessMaxEV::new(Schedule::every_step()).with_method(EigenMethod::WarmLanczos {
                tol: 1e-3,
                max_products: 1 << 40,
            });
        assert!(unbounded.check().is_err());
    }

    /// A seed fixes the start vectors: the same seed gives the same estimate to the last bit,
    /// another seed converges to the same eigenvalue from elsewhere.
    #[test]
    fn seeded_start_vectors() {
        let ids = [ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.0, 0.0, 0.0, 0.0]],
            &[vec![vec![0.0; 4]]],
            1.0,
        )
        .with_curvature(vec![vec![3.0, -1.0, 0.5, 2.0]]);
        let estimate = |seed: u64| {
            let mut q = HessMaxEV::new(Schedule::every_step()).with_seed(seed);
            match q.compute(&step.ctx()).unwrap() {
                Some((0, Value::Float(v))) => v,
                other => panic!("no value: {other:?}"),
            }
        };
        let (a, b, c) = (estimate(7), estimate(7), estimate(8));
        assert_eq!(a.to_bits(), b.to_bits());
        assert!(close(a, 3.0, 1e-2) && close(c, 3.0, 1e-2), "{a} {c}");
    }
}
