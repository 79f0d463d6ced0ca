//! Exact curvature diagonals of feed-forward nets (Linear layers and elementwise activations)
//! with MSE or cross-entropy, without double backward.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::module::ParamId;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::{Tensor, TensorData};

use super::base::{CurvatureSource, DiagonalKind, OutputLoss};
use super::random::SplitMix;
use crate::persample::Elementwise;
use crate::{ParamEntry, QuantityError, Snapshot};

/// The elementwise activation after a Linear layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// None.
    Identity,
    /// `max(0, z)` (`σ'(0) = 0`, `σ'' = 0`, as PyTorch).
    Relu,
    /// `1/(1 + e^{−z})`.
    Sigmoid,
    /// `tanh z`.
    Tanh,
}

impl Activation {
    fn apply(self, z: Tensor<2>) -> Tensor<2> {
        match self {
            Self::Identity => z,
            Self::Relu => burn::tensor::activation::relu(z),
            Self::Sigmoid => sigmoid(z),
            Self::Tanh => z.tanh(),
        }
    }

    /// `(σ'(z), σ''(z))`.
    fn derivatives(self, z: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        match self {
            Self::Identity => (z.ones_like(), z.zeros_like()),
            Self::Relu => (
                z.clone().greater_elem(0.0).float().cast(z.dtype()),
                z.zeros_like(),
            ),
            // σ'' as the activation drop-ins record it (one formula per function).
            Self::Sigmoid => {
                let s = sigmoid(z.clone());
                let d1 = s.clone() * s.neg().add_scalar(1.0);
                (d1, Elementwise::Sigmoid.second_derivative(z))
            }
            Self::Tanh => {
                let d1 = z.clone().tanh().square().neg().add_scalar(1.0);
                (d1, Elementwise::Tanh.second_derivative(z))
            }
        }
    }
}

/// One Linear layer `z = a W + b` (burn layout `W` `[d_in, d_out]`) with its input and
/// pre-activation at this step, and the activation after it.
#[derive(Debug, Clone)]
pub struct MlpLayer {
    /// The weight's id.
    pub weight_id: ParamId,
    /// The bias's id.
    pub bias_id: Option<ParamId>,
    /// The weight, `[d_in, d_out]`.
    pub weight: Tensor<2>,
    /// The layer's input `A_{l−1}`, `[B, d_in]`.
    pub input: Tensor<2>,
    /// The pre-activation `Z_l`, `[B, d_out]`.
    pub pre_activation: Tensor<2>,
    /// The activation applied to `Z_l`.
    pub activation: Activation,
}

/// Exact curvature diagonals of a chain of Linear layers and elementwise activations
/// (`CURVATURE_MATH` §3–4): the per-sample Hessian with respect to each pre-activation,
/// `H_z = D H_a D + diag(σ'' ⊙ ∂L/∂a)`, is propagated down as `[B, d, d]` matrices
/// (`H_a = W H_z Wᵀ`), and the weight diagonal is `(A²)ᵀ diag(H_z)`. Dropping the residual
/// `σ''` term gives the exact GGN diagonal; replacing the loss Hessian by `u uᵀ` with one
/// sampled column (`u_n = (p_n − e_ŷ)/√B`, `ŷ ~ p_n`, for cross-entropy; `√(2/(BC))·ξ_n` for MSE)
/// gives the Monte-Carlo GGN diagonal.
///
/// Hessian-vector products are exact (Pearlmutter's R-operator through the chain, forward then
/// backward, no autodiff and no finite differences), accurate to the float type's rounding:
/// float32 training gets products good to ~1e-6 relative, where central differences of
/// float32 gradients give ~1e-3 or worse. [`MlpCurvature::with_hvp`] delegates them to another
/// source instead (e.g. [`FiniteDifferenceHvp`]).
///
/// # Cost
///
/// No autodiff. Diagonals: per layer `B·d_l·d_{l−1}(d_l + d_{l−1})` flops and
/// `B·max(d_l, d_{l−1})²` memory for the propagated Hessian blocks. Products: six matrix
/// products per layer (about two gradient passes of the net), after one backward sweep per
/// step that every product reuses.
///
/// [`FiniteDifferenceHvp`]: super::FiniteDifferenceHvp
#[derive(Debug)]
pub struct MlpCurvature {
    layers: Vec<MlpLayer>,
    loss: OutputLoss,
    hvp: Option<Arc<dyn CurvatureSource>>,
    rng: SplitMix,
    /// One computation per kind and step, shared by every quantity (one Monte-Carlo draw).
    cache: Mutex<HashMap<DiagonalKind, Vec<(Tensor<1>, Tensor<1>)>>>,
    /// The backward sweep every exact product reuses.
    sweep: Mutex<Option<Arc<Sweep>>>,
}

/// The step's backward sweep: per layer `σ'(Z_l)`, `σ''(Z_l)`, `∂L/∂A_l` (the layer's output)
/// and `δ_l = ∂L/∂Z_l`; the softmax for cross-entropy.
#[derive(Debug)]
struct Sweep {
    d1: Vec<Tensor<2>>,
    d2: Vec<Tensor<2>>,
    grad_a: Vec<Tensor<2>>,
    delta: Vec<Tensor<2>>,
    probs: Option<Tensor<2>>,
}

impl MlpCurvature {
    /// Diagonals of the net `layers` (input to output) under `loss`; `seed` drives the
    /// Monte-Carlo draws.
    pub fn new(layers: Vec<MlpLayer>, loss: OutputLoss, seed: u64) -> Self {
        // Everything on the inner backend: operations on autodiff tensors leave graph nodes
        // behind even when nothing requires a gradient, which the step's backward pass then
        // has to wade through.
        let plain = |t: Tensor<2>| t.detach().without_autodiff();
        let layers = layers
            .into_iter()
            .map(|l| MlpLayer {
                weight: plain(l.weight),
                input: plain(l.input),
                pre_activation: plain(l.pre_activation),
                ..l
            })
            .collect();
        let loss = match loss {
            OutputLoss::Mse(y) => OutputLoss::Mse(plain(y)),
            OutputLoss::CrossEntropy(y) => OutputLoss::CrossEntropy(plain(y)),
            positions @ OutputLoss::Positions(_) => positions,
        };
        Self {
            layers,
            loss,
            hvp: None,
            rng: SplitMix::new(seed),
            cache: Mutex::new(HashMap::new()),
            sweep: Mutex::new(None),
        }
    }

    /// Hessian-vector products from `source` instead of the exact ones.
    pub fn with_hvp(mut self, source: impl CurvatureSource + 'static) -> Self {
        self.hvp = Some(Arc::new(source));
        self
    }

    /// The net's output `f = σ_L(Z_L)`.
    fn output(&self) -> Result<Tensor<2>, QuantityError> {
        let last = self
            .layers
            .last()
            .ok_or_else(|| QuantityError::Shape("no layer".into()))?;
        Ok(last.activation.apply(last.pre_activation.clone()))
    }

    /// The direct route: the exact Hessian diagonal, propagating per-sample `[B, d, d]`
    /// blocks (needed when a curved activation adds its `σ''` residual).
    fn hessian_diagonals(&self) -> Result<Vec<(Tensor<1>, Tensor<1>)>, QuantityError> {
        let f = self.output()?;
        let [batch, classes] = f.dims();
        let (b, c) = (batch as f64, classes as f64);
        let device = f.device();
        let eye = |n: usize| -> Tensor<3> {
            let mut data = vec![0.0; n * n];
            for i in 0..n {
                data[i * n + i] = 1.0;
            }
            Tensor::<2>::from_data(TensorData::new(data, [n, n]), (&device, f.dtype()))
                .reshape([1, n, n])
        };
        // ∂L/∂f and the per-sample loss Hessian.
        let (mut grad_a, mut hess_a): (Tensor<2>, Tensor<3>) = match &self.loss {
            OutputLoss::Mse(y) => (
                (f.clone() - y.clone()).mul_scalar(2.0 / (b * c)),
                eye(classes).repeat_dim(0, batch).mul_scalar(2.0 / (b * c)),
            ),
            OutputLoss::CrossEntropy(y) => {
                let p = softmax(f.clone(), 1);
                let diag = p.clone().unsqueeze_dim::<3>(2) * eye(classes);
                (
                    (p.clone() - y.clone()).div_scalar(b),
                    (diag - outer(p)).div_scalar(b),
                )
            }
            OutputLoss::Positions(_) => return Err(positions_unsupported()),
        };
        let mut out = Vec::with_capacity(self.layers.len());
        for layer in self.layers.iter().rev() {
            let (d1, d2) = layer.activation.derivatives(layer.pre_activation.clone());
            let d = d1.dims()[1];
            let mut hess_z =
                d1.clone().unsqueeze_dim::<3>(2) * hess_a * d1.clone().unsqueeze_dim::<3>(1);
            hess_z = hess_z + (d2 * grad_a.clone()).unsqueeze_dim::<3>(2) * eye(d);
            let hd = (hess_z.clone() * eye(d)).sum_dim(2).reshape([batch, d]);
            let d_in = layer.input.dims()[1];
            let diag_w = layer
                .input
                .clone()
                .square()
                .transpose()
                .matmul(hd.clone())
                .reshape([d_in * d]);
            let diag_b = hd.sum_dim(0).reshape([d]);
            out.push((diag_w, diag_b));
            if out.len() == self.layers.len() {
                break; // nothing below the first layer
            }
            let delta = d1 * grad_a;
            grad_a = delta.matmul(layer.weight.clone().transpose());
            let w = layer
                .weight
                .clone()
                .unsqueeze_dim::<3>(0)
                .repeat_dim(0, batch);
            hess_a = w.clone().matmul(hess_z).matmul(w.swap_dims(1, 2));
        }
        out.reverse();
        Ok(out)
    }

    /// The factor route (BackPACK's): for the GGN, and for the Hessian when every activation
    /// is piecewise linear (no `σ''` residual, so `diag_h = diag_ggn`). Propagates the loss
    /// Hessian's square-root factor `F` `[V, B, d]` (`V = C` columns, or 1 sampled column)
    /// instead of `[B, d, d]` blocks: `V·B·d_l·d_{l−1}` flops per layer.
    fn factor_diagonals(
        &self,
        kind: DiagonalKind,
    ) -> Result<Vec<(Tensor<1>, Tensor<1>)>, QuantityError> {
        let f = self.output()?;
        let [batch, classes] = f.dims();
        let (b, c) = (batch as f64, classes as f64);
        let device = f.device();
        let float = |data: Vec<f64>, shape: [usize; 3]| {
            Tensor::<3>::from_data(TensorData::new(data, shape), (&device, f.dtype()))
        };
        let mut factor: Tensor<3> = match (&self.loss, kind) {
            (OutputLoss::Mse(_), DiagonalKind::GgnMc) => {
                let xi: Vec<f64> = (0..batch * classes).map(|_| self.rng.gaussian()).collect();
                float(xi, [1, batch, classes]).mul_scalar((2.0 / (b * c)).sqrt())
            }
            (OutputLoss::Mse(_), _) => {
                let mut data = vec![0.0; classes * batch * classes];
                for v in 0..classes {
                    for n in 0..batch {
                        data[(v * batch + n) * classes + v] = (2.0 / (b * c)).sqrt();
                    }
                }
                float(data, [classes, batch, classes])
            }
            (OutputLoss::CrossEntropy(_), DiagonalKind::GgnMc) => {
                let p = softmax(f.clone(), 1);
                let probs = crate::readback::read_values(p.clone().reshape([batch * classes]))?;
                let mut onehot = vec![0.0; batch * classes];
                for n in 0..batch {
                    let r = self.rng.uniform();
                    let mut acc = 0.0;
                    let mut k = classes - 1;
                    for (j, pj) in probs[n * classes..(n + 1) * classes].iter().enumerate() {
                        acc += pj;
                        if r < acc {
                            k = j;
                            break;
                        }
                    }
                    onehot[n * classes + k] = 1.0;
                }
                (p.unsqueeze_dim::<3>(0) - float(onehot, [1, batch, classes])).div_scalar(b.sqrt())
            }
            (OutputLoss::CrossEntropy(_), _) => {
                // Column v of S_n: √p_{n,v}·(e_v − p_n)/√B.
                let p =
                    crate::readback::read_values(softmax(f.clone(), 1).reshape([batch * classes]))?;
                let mut data = vec![0.0; classes * batch * classes];
                for v in 0..classes {
                    for n in 0..batch {
                        let root = p[n * classes + v].sqrt() / b.sqrt();
                        for k in 0..classes {
                            let e = if k == v { 1.0 } else { 0.0 };
                            data[(v * batch + n) * classes + k] = root * (e - p[n * classes + k]);
                        }
                    }
                }
                float(data, [classes, batch, classes])
            }
            (OutputLoss::Positions(_), _) => return Err(positions_unsupported()),
        };
        let mut out = Vec::with_capacity(self.layers.len());
        for (index, layer) in self.layers.iter().enumerate().rev() {
            let (d1, _) = layer.activation.derivatives(layer.pre_activation.clone());
            let [columns, _, d] = factor.dims();
            factor = factor * d1.unsqueeze_dim::<3>(0);
            let q = factor.clone().square().sum_dim(0).reshape([batch, d]);
            let d_in = layer.input.dims()[1];
            out.push((
                layer
                    .input
                    .clone()
                    .square()
                    .transpose()
                    .matmul(q.clone())
                    .reshape([d_in * d]),
                q.sum_dim(0).reshape([d]),
            ));
            if index == 0 {
                break;
            }
            factor = factor
                .reshape([columns * batch, d])
                .matmul(layer.weight.clone().transpose())
                .reshape([columns, batch, d_in]);
        }
        out.reverse();
        Ok(out)
    }

    /// The backward sweep, computed at the first product of the step.
    fn sweep(&self) -> Result<Arc<Sweep>, QuantityError> {
        if let Some(sweep) = self.sweep.lock().ok().and_then(|s| s.clone()) {
            return Ok(sweep);
        }
        let f = self.output()?;
        let [batch, classes] = f.dims();
        let (b, c) = (batch as f64, classes as f64);
        let (grad_f, probs) = match &self.loss {
            OutputLoss::Mse(y) => ((f - y.clone()).mul_scalar(2.0 / (b * c)), None),
            OutputLoss::CrossEntropy(y) => {
                let p = softmax(f, 1);
                ((p.clone() - y.clone()).div_scalar(b), Some(p))
            }
            OutputLoss::Positions(_) => return Err(positions_unsupported()),
        };
        let n = self.layers.len();
        let (mut d1, mut d2) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for layer in &self.layers {
            let (first, second) = layer.activation.derivatives(layer.pre_activation.clone());
            d1.push(first);
            d2.push(second);
        }
        let mut grad_a = vec![grad_f; n];
        let mut delta: Vec<Tensor<2>> = Vec::with_capacity(n);
        for l in (0..n).rev() {
            if l + 1 < n {
                grad_a[l] = delta[0]
                    .clone()
                    .matmul(self.layers[l + 1].weight.clone().transpose());
            }
            delta.insert(0, d1[l].clone() * grad_a[l].clone());
        }
        let sweep = Arc::new(Sweep {
            d1,
            d2,
            grad_a,
            delta,
            probs,
        });
        if let Ok(mut slot) = self.sweep.lock() {
            *slot = Some(sweep.clone());
        }
        Ok(sweep)
    }

    /// The exact product `H v` by the R-operator: `R{Z_l} = R{A_{l−1}} W_l + A_{l−1} V_l + v_b`,
    /// `R{A_l} = σ' ⊙ R{Z_l}` forward; the loss Hessian on `R{f}`; then
    /// `R{δ_l} = σ'' ⊙ R{Z_l} ⊙ ∂L/∂A_l + σ' ⊙ R{∂L/∂A_l}`,
    /// `R{∂L/∂A_{l−1}} = R{δ_l} W_lᵀ + δ_l V_lᵀ` backward, and
    /// `(Hv)_{W_l} = R{A_{l−1}}ᵀ δ_l + A_{l−1}ᵀ R{δ_l}`, `(Hv)_{b_l} = Σ_n R{δ_l}`.
    fn exact_hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        let sweep = self.sweep()?;
        let direction = |id: ParamId, shape: [usize; 2]| -> Option<Tensor<2>> {
            v.get(id).map(|e| e.value.clone().reshape(shape))
        };
        let n = self.layers.len();
        // Forward: R{Z_l} and R{A_{l−1}} (None for the input, which does not move).
        let mut r_z: Vec<Tensor<2>> = Vec::with_capacity(n);
        let mut r_in: Vec<Option<Tensor<2>>> = Vec::with_capacity(n);
        let mut r_a: Option<Tensor<2>> = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let [d_in, d_out] = layer.weight.dims();
            let mut z = layer.pre_activation.zeros_like();
            if let Some(ra) = &r_a {
                z = z + ra.clone().matmul(layer.weight.clone());
            }
            if let Some(vw) = direction(layer.weight_id, [d_in, d_out]) {
                z = z + layer.input.clone().matmul(vw);
            }
            if let Some(vb) = layer.bias_id.and_then(|id| direction(id, [1, d_out])) {
                z = z + vb;
            }
            r_in.push(r_a.take());
            r_a = Some(sweep.d1[l].clone() * z.clone());
            r_z.push(z);
        }
        let r_f = r_a.ok_or_else(|| QuantityError::Shape("no layer".into()))?;
        let [batch, classes] = r_f.dims();
        let (b, c) = (batch as f64, classes as f64);
        let mut r_grad = match &sweep.probs {
            None => r_f.mul_scalar(2.0 / (b * c)),
            Some(p) => {
                let pr = p.clone() * r_f;
                (pr.clone() - p.clone() * pr.sum_dim(1)).div_scalar(b)
            }
        };
        let mut products: HashMap<ParamId, Tensor<1>> = HashMap::new();
        for l in (0..n).rev() {
            let layer = &self.layers[l];
            let [d_in, d_out] = layer.weight.dims();
            let mut r_delta = sweep.d1[l].clone() * r_grad.clone();
            if !matches!(layer.activation, Activation::Identity | Activation::Relu) {
                r_delta = r_delta + sweep.d2[l].clone() * r_z[l].clone() * sweep.grad_a[l].clone();
            }
            let mut hv_w = layer.input.clone().transpose().matmul(r_delta.clone());
            if let Some(ra) = &r_in[l] {
                hv_w = hv_w + ra.clone().transpose().matmul(sweep.delta[l].clone());
            }
            products.insert(layer.weight_id, hv_w.reshape([d_in * d_out]));
            if let Some(id) = layer.bias_id {
                products.insert(id, r_delta.clone().sum_dim(0).reshape([d_out]));
            }
            if l > 0 {
                r_grad = r_delta.matmul(layer.weight.clone().transpose());
                if let Some(vw) = direction(layer.weight_id, [d_in, d_out]) {
                    r_grad = r_grad + sweep.delta[l].clone().matmul(vw.transpose());
                }
            }
        }
        params
            .entries()
            .iter()
            .map(|entry| {
                products
                    .remove(&entry.id)
                    .map(|value| ParamEntry {
                        value,
                        ..entry.clone()
                    })
                    .ok_or_else(|| {
                        QuantityError::Unsupported(format!(
                            "parameter `{}` is not a Linear layer of the described net",
                            entry.name
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Snapshot::from_entries)
    }

    /// Whether every activation is piecewise linear (then `diag_h = diag_ggn_exact`).
    fn piecewise_linear(&self) -> bool {
        self.layers
            .iter()
            .all(|l| matches!(l.activation, Activation::Identity | Activation::Relu))
    }
}

/// `u_n u_nᵀ` per sample, `[B, C, C]`.
fn outer(u: Tensor<2>) -> Tensor<3> {
    u.clone().unsqueeze_dim::<3>(2) * u.unsqueeze_dim::<3>(1)
}

impl CurvatureSource for MlpCurvature {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        match &self.hvp {
            Some(source) => source.hvp(params, v),
            None => self.exact_hvp(params, v),
        }
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        let cached = self.cache.lock().ok().and_then(|c| c.get(&kind).cloned());
        let diagonals = match cached {
            Some(d) => d,
            None => {
                let d = if kind != DiagonalKind::Hessian || self.piecewise_linear() {
                    self.factor_diagonals(kind)?
                } else {
                    self.hessian_diagonals()?
                };
                if let Ok(mut cache) = self.cache.lock() {
                    cache.insert(kind, d.clone());
                }
                d
            }
        };
        params
            .entries()
            .iter()
            .map(|entry| {
                self.layers
                    .iter()
                    .zip(&diagonals)
                    .find_map(|(layer, (w, b))| {
                        if layer.weight_id == entry.id {
                            Some(w.clone())
                        } else if layer.bias_id == Some(entry.id) {
                            Some(b.clone())
                        } else {
                            None
                        }
                    })
                    .ok_or_else(|| {
                        QuantityError::Unsupported(format!(
                            "parameter `{}` is not a Linear layer of the described net",
                            entry.name
                        ))
                    })
            })
            .collect()
    }
}

/// [`MlpCurvature`] is for an MLP's `[B, C]` output; position losses go to
/// [`RecordedCurvature`](super::RecordedCurvature).
fn positions_unsupported() -> QuantityError {
    QuantityError::Unsupported(
        "MlpCurvature takes an MLP's [B, C] output; for token or pixel losses \
         (OutputLoss::Positions) use RecordedCurvature"
            .into(),
    )
}
