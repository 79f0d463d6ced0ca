//! HessMaxEV.

use std::collections::BTreeMap;

use burn::tensor::{Tensor, TensorCreationOptions, TensorData};
use serde::Deserialize;

use super::base::{Quantity, StepContext, invalid};
use super::spec::{Needs, QuantitySpec, QuantityType, ValueShape};
use crate::curvature::random::SplitMix;
use crate::curvature::{EigenEstimate, Target, lanczos_for, power_iteration};
use crate::{CockpitError, ParamEntry, QuantityError, Schedule, Snapshot, Value};

/// How HessMaxEV finds the eigenvalue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EigenMethod {
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
/// Default: Cockpit's power iteration (rtol 1e-3, atol 1e-6, at most 100 products) from a
/// uniform `[0, 1)` start vector drawn from this quantity's own seeded generator (Cockpit draws
/// from torch's global RNG, which Rust cannot reproduce; [`HessMaxEV::with_start_vectors`]
/// replays recorded ones). Not converging within the budget gives a warning and the last
/// estimate, as Cockpit does. Cockpit's loose stop can leave the value a few percent below the
/// true dominant eigenvalue; [`EigenMethod::Lanczos`] converges in fewer products.
///
/// # Cost
///
/// One Hessian-vector product per iteration (two gradient passes with finite differences):
/// typically 3–50 products; one host read of two numbers per product.
#[derive(Debug, Clone)]
pub struct HessMaxEV {
    schedule: Schedule,
    method: EigenMethod,
    rng: SplitMix,
    start_vectors: BTreeMap<usize, Vec<f64>>,
    warnings: Vec<String>,
}

impl HessMaxEV {
    /// HessMaxEV with Cockpit's power iteration on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            method: EigenMethod::Power {
                rtol: 1e-3,
                atol: 1e-6,
                max_products: 100,
            },
            rng: SplitMix::new(0x5EED_CAFE),
            start_vectors: BTreeMap::new(),
            warnings: Vec::new(),
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

    fn start(&mut self, params: &Snapshot, step: usize) -> Result<Snapshot, QuantityError> {
        let numel = params.numel();
        let values = match self.start_vectors.get(&step) {
            Some(v) if v.len() == numel => v.clone(),
            Some(v) => {
                return Err(QuantityError::Shape(format!(
                    "the start vector of step {step} has {} values for {numel} parameters",
                    v.len()
                )));
            }
            None => (0..numel).map(|_| self.rng.uniform()).collect(),
        };
        let mut offset = 0;
        let mut entries = Vec::with_capacity(params.len());
        for entry in params.entries() {
            let n = entry.numel();
            let options =
                TensorCreationOptions::new(entry.value.device()).with_dtype(entry.value.dtype());
            let value = Tensor::<1>::from_data(
                TensorData::new(values[offset..offset + n].to_vec(), [n]),
                options,
            );
            entries.push(ParamEntry {
                value,
                ..entry.clone()
            });
            offset += n;
        }
        Ok(Snapshot::from_entries(entries))
    }
}

/// HessMaxEV's settings.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HessMaxEVSettings {
    /// `true` (default): Cockpit's power iteration. `false`: the largest algebraic eigenvalue,
    /// converged, as Cockpit's `use_power=False` (scipy's `eigsh(k=1, which="LA")`), by Lanczos.
    pub use_power: bool,
}

impl Default for HessMaxEVSettings {
    fn default() -> Self {
        Self { use_power: true }
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
        if settings.use_power {
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
    fn name(&self) -> &str {
        Self::SPEC.name
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
            } => ([tol, 0.0], max_products),
        };
        if max_products == 0 {
            return Err(invalid(
                Self::SPEC.name,
                "max_products must be at least 1".into(),
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

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn uses_curvature(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let source = ctx.curvature()?.clone();
        let start = self.start(ctx.params, ctx.step)?;
        let EigenEstimate {
            value,
            products,
            converged,
        } = match self.method {
            EigenMethod::Power {
                rtol,
                atol,
                max_products,
            } => power_iteration(
                source.as_ref(),
                ctx.params,
                &start,
                rtol,
                atol,
                max_products,
            )?,
            EigenMethod::Lanczos {
                tol,
                max_products,
                target,
            } => lanczos_for(
                source.as_ref(),
                ctx.params,
                &start,
                tol,
                max_products,
                target,
            )?,
        };
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
            HessMaxEVSettings { use_power: false },
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
    }
}
