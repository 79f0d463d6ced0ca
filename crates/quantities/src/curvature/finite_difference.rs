//! Hessian-vector products from central differences of gradients.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{DType, Tensor};

use super::base::CurvatureSource;
use crate::{ParamEntry, QuantityError, Snapshot};

type GradFn<M> = dyn Fn(&M) -> Result<GradientsParams, QuantityError> + Send + Sync;

/// `H v ≈ (∇L(θ + εv) − ∇L(θ − εv)) / 2ε` for any burn model: `grads_of(model)` must return the
/// gradients of the step's mean mini-batch loss (same batch, same dropout masks, BatchNorm
/// frozen) at the given parameters.
///
/// The step follows the error balance of central differences (truncation `O(ε²)`, rounding
/// `O(u/ε)`): `ε = u^{1/3}·max(1, ‖θ‖)/‖v‖`, with `u` the unit round-off of the parameters'
/// float type. In float64 the products are accurate to ~1e-10 relative; in float32 to ~1e-4
/// (ReLU nets can cross a kink inside `±εv`: run curvature passes in float64 where exactness
/// matters).
///
/// # Cost
///
/// Two forward and backward passes per product, and two model copies' worth of parameters
/// while they run. No read: `ε` stays on the device. `‖θ‖` is computed once, at the first
/// product (every product is taken at the same parameters), not once per product.
pub struct FiniteDifferenceHvp<M: Module> {
    model: M,
    grads_of: Box<GradFn<M>>,
    /// `‖θ‖` on the device, from the first product's parameters.
    theta: std::sync::OnceLock<Tensor<1>>,
}

impl<M: Module> std::fmt::Debug for FiniteDifferenceHvp<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FiniteDifferenceHvp")
            .finish_non_exhaustive()
    }
}

impl<M: Module + Sync + 'static> FiniteDifferenceHvp<M> {
    /// Products at the parameters of `model` (cloned; cheap), with gradients from `grads_of`.
    pub fn new(
        model: &M,
        grads_of: impl Fn(&M) -> Result<GradientsParams, QuantityError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            model: model.clone(),
            grads_of: Box::new(grads_of),
            theta: std::sync::OnceLock::new(),
        }
    }

    /// The gradients at `θ + ε·v` (`eps` a one-element device tensor).
    fn grads_at(
        &self,
        params: &Snapshot,
        v: &Snapshot,
        eps: Tensor<1>,
    ) -> Result<Snapshot, QuantityError> {
        let moved = shifted(&self.model, v, eps);
        let grads = (self.grads_of)(&moved)?;
        // Align with `params` (ids are kept by the mapper).
        let snapshot = Snapshot::of_grads(&moved, &grads)?;
        let entries = params
            .entries()
            .iter()
            .map(|p| {
                snapshot.get(p.id).cloned().ok_or_else(|| {
                    QuantityError::Shape(format!(
                        "no gradient for `{}` at the shifted point",
                        p.name
                    ))
                })
            })
            .collect::<Result<Vec<ParamEntry>, _>>()?;
        Ok(Snapshot::from_entries(entries))
    }
}

/// `model` at `θ + ε·v` (`eps` a one-element device tensor; parameter ids kept).
pub(super) fn shifted<M: Module>(model: &M, v: &Snapshot, eps: Tensor<1>) -> M {
    let mut shift = Shift {
        steps: v
            .entries()
            .iter()
            .map(|e| (e.id, e.value.clone() * eps.clone()))
            .collect(),
    };
    model.clone().map(&mut shift)
}

/// The central differences' step `ε = u^{1/3}·max(1, ‖θ‖)/‖v‖` on the device (`theta` is
/// `‖θ‖`), and whether `v` is nonzero (a zero direction gets `ε = 1`).
pub(super) fn step_size(
    params: &Snapshot,
    v: &Snapshot,
    theta: Tensor<1>,
) -> (Tensor<1>, Tensor<1>) {
    let v_norm = v.flatten().square().sum().sqrt();
    let nonzero = v_norm.clone().not_equal_elem(0.0);
    let eps = (theta
        .clamp_min(1.0)
        .mul_scalar(cube_root_roundoff(params))
        .div(v_norm))
    .mask_fill(nonzero.clone().bool_not(), 1.0);
    let dtype = eps.dtype();
    (eps, nonzero.float().cast(dtype))
}

/// Adds its step (`ε·v`) to every parameter that has one.
struct Shift {
    steps: HashMap<ParamId, Tensor<1>>,
}

impl ModuleMapper for Shift {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(step) = self.steps.get(&param.id) else {
            return param;
        };
        let (id, tensor, mapper) = param.consume();
        let shape = tensor.shape();
        let require_grad = tensor.is_require_grad();
        let shifted = (tensor.detach() + step.clone().reshape(shape)).detach();
        let shifted = if require_grad {
            shifted.require_grad()
        } else {
            shifted
        };
        Param::from_mapped_value(id, shifted, mapper)
    }
}

/// `u^{1/3}` for the float type of the parameters.
fn cube_root_roundoff(params: &Snapshot) -> f64 {
    let f64_params = params
        .entries()
        .first()
        .is_some_and(|e| e.value.dtype() == DType::F64);
    if f64_params {
        (0.5 * f64::EPSILON).cbrt()
    } else {
        (0.5 * f32::EPSILON as f64).cbrt()
    }
}

impl<M: Module + Sync + 'static> CurvatureSource for FiniteDifferenceHvp<M> {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        // ε on the device: a product reads nothing back (the eigenvalue solvers read once per
        // product, for their own numbers).
        let theta = self
            .theta
            .get_or_init(|| params.flatten().square().sum().sqrt())
            .clone();
        // A zero direction moves nothing and its product is zero (ε = 1 keeps 0/2ε finite).
        let (eps, nonzero) = step_size(params, v, theta);
        let plus = self.grads_at(params, v, eps.clone())?;
        let minus = self.grads_at(params, v, eps.clone().neg())?;
        let diff = plus.difference(&minus)?;
        let scale = eps.mul_scalar(2.0).recip() * nonzero;
        Ok(Snapshot::from_entries(
            diff.entries()
                .iter()
                .map(|e| ParamEntry {
                    value: e.value.clone() * scale.clone(),
                    ..e.clone()
                })
                .collect(),
        ))
    }
}
