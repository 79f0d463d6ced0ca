//! The fast path: per-sample statistics of Linear layers from their inputs and output
//! gradients, without materialising `[B, parameters]` where the statistic does not need it.

use burn::module::ParamId;
use burn::tensor::{Device, Tensor};

use super::base::{Elements, PerSampleSource, PerSampleStats, Request};
use super::recorder::Layout;
use super::recorder::Refusal;
use crate::{ParamEntry, QuantityError, Snapshot};

/// The recorded factors of one Linear layer: inputs `a` `[B, T, d_in]` and true per-sample
/// output gradients `e = B·∂L/∂y` `[B, T, d_out]` (`T = 1` for plain `[B, d]` inputs).
#[derive(Debug, Clone)]
pub struct LayerFactors {
    /// The weight's id.
    pub weight: ParamId,
    /// The bias's id, if any.
    pub bias: Option<ParamId>,
    /// How the weight is stored.
    pub layout: Layout,
    /// Inputs.
    pub a: Tensor<3>,
    /// True per-sample output gradients.
    pub e: Tensor<3>,
}

/// What the fast path covers for a model ([`LinearFactors::coverage`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Dotted names of the parameters on the fast path.
    pub covered: Vec<String>,
    /// Dotted names of the others, with the reason.
    pub uncovered: Vec<(String, String)>,
}

impl Coverage {
    /// Whether every parameter is on the fast path.
    pub fn is_complete(&self) -> bool {
        self.uncovered.is_empty()
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.covered.len() + self.uncovered.len();
        writeln!(f, "fast path: {} of {total} parameters", self.covered.len())?;
        for name in &self.covered {
            writeln!(f, "  covered      {name}")?;
        }
        for (name, reason) in &self.uncovered {
            writeln!(f, "  not covered  {name}: {reason}")?;
        }
        Ok(())
    }
}

/// Per-sample gradients of one parameter, materialised `[B, numel]` (normalisation layers'
/// `γ` and `β`, whose per-sample gradients are as small as a batch of activations).
#[derive(Debug, Clone)]
pub struct DenseGradients {
    /// The parameter's id.
    pub param: ParamId,
    /// True per-sample gradients `∇_p ℓ_n`, `[B, numel]`.
    pub g: Tensor<2>,
}

/// Per-sample gradients of Linear layers in factored form (the fast path): the per-sample
/// weight gradient is `g_n = Σ_t a_{n,t} e_{n,t}ᵀ` (burn layout `[d_in, d_out]`), the bias
/// gradient `Σ_t e_{n,t}`.
///
/// With `T = 1`:
/// - `‖g_n‖² = ‖a_n‖²‖e_n‖²`, `⟨g_n, V⟩ = a_nᵀ V e_n`: `O(B(d_in + d_out))` resp. one matmul;
/// - `Σ_n g_n^{⊙2} = (A^{⊙2})ᵀ E^{⊙2}`: one matmul;
/// - `max |g_n| = max_n max|a_n|·max|e_n|`.
///
/// Only the gradient elements (histograms) and `T > 1` materialise per-sample gradients, one
/// layer and one chunk of samples at a time.
///
/// # Cost
///
/// Memory: the recorded inputs and output gradients, `B·T·(d_in + d_out)` per layer; while
/// materialising, one chunk of at most `Request::chunk_elements` elements.
#[derive(Debug, Clone)]
pub struct LinearFactors {
    batch: usize,
    layers: Vec<LayerFactors>,
    dense: Vec<DenseGradients>,
    refused: Vec<Refusal>,
}

impl LinearFactors {
    /// Factors of a batch of `batch` samples.
    pub fn new(batch: usize, layers: Vec<LayerFactors>) -> Self {
        Self {
            batch,
            layers,
            dense: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// With layers that refused to record (training-mode BatchNorm).
    pub(crate) fn with_refused(self, refused: Vec<Refusal>) -> Self {
        Self { refused, ..self }
    }

    /// The typed error of a layer among `params` that couples the samples
    /// ([`QuantityError::SamplesCoupled`], naming it), if one ran while recording: per-sample
    /// gradients of the model are then not defined, on the fast path or any other.
    pub fn refusal(&self, params: &Snapshot) -> Option<QuantityError> {
        self.refused.iter().find_map(|refusal| {
            let entry = params
                .entries()
                .iter()
                .find(|e| refusal.params.contains(&e.id))?;
            Some(QuantityError::SamplesCoupled {
                layer: entry.name.clone(),
                reason: refusal.reason.clone(),
            })
        })
    }

    /// With parameters whose per-sample gradients were recorded in full.
    pub fn with_dense(self, dense: Vec<DenseGradients>) -> Self {
        Self { dense, ..self }
    }

    /// The parameters recorded in full.
    pub fn dense(&self) -> &[DenseGradients] {
        &self.dense
    }

    /// The recorded layers.
    pub fn layers(&self) -> &[LayerFactors] {
        &self.layers
    }

    /// Whether every parameter of `params` belongs to a recorded layer.
    pub fn covers(&self, params: &Snapshot) -> bool {
        self.refusal(params).is_none() && params.entries().iter().all(|e| self.records(e.id))
    }

    /// Which parameters of `params` the fast path covers at this step, and which would fall
    /// back to single-sample passes and why (print it: one line per parameter).
    pub fn coverage(&self, params: &Snapshot) -> Coverage {
        let mut coverage = Coverage::default();
        let refusal = self.refusal(params);
        for entry in params.entries() {
            if let Some(refusal) = &refusal {
                coverage
                    .uncovered
                    .push((entry.name.clone(), refusal.to_string()));
            } else if self.records(entry.id) {
                coverage.covered.push(entry.name.clone());
            } else {
                coverage.uncovered.push((
                    entry.name.clone(),
                    format!(
                        "shape {:?}: no instrumented layer recorded it during the step (a \
                         burn-nn or custom layer, or a convolution setting the fast path does \
                         not cover); swap in the persample drop-in or let PerSample::auto fall back",
                        entry.shape
                    ),
                ));
            }
        }
        coverage
    }

    fn records(&self, id: ParamId) -> bool {
        self.find(id).is_some() || self.find_dense(id).is_some()
    }

    fn find_dense(&self, id: ParamId) -> Option<&DenseGradients> {
        self.dense.iter().find(|d| d.param == id)
    }

    fn find(&self, id: ParamId) -> Option<(&LayerFactors, bool)> {
        self.layers.iter().find_map(|l| {
            if l.weight == id {
                Some((l, true))
            } else if l.bias == Some(id) {
                Some((l, false))
            } else {
                None
            }
        })
    }
}

impl PerSampleSource for LinearFactors {
    fn batch_size(&self) -> usize {
        self.batch
    }

    fn reduce(
        &self,
        params: &Snapshot,
        mut request: Request<'_>,
    ) -> Result<PerSampleStats, QuantityError> {
        if let Some(refusal) = self.refusal(params) {
            return Err(refusal);
        }
        let mut stats = Accumulator::new(self.batch, &request);
        for (index, entry) in params.entries().iter().enumerate() {
            stats.slot(index);
            if let Some(dense) = self.find_dense(entry.id) {
                let chunk = chunk_samples(request.chunk_elements, entry.numel(), self.batch);
                for start in (0..self.batch).step_by(chunk) {
                    let end = (start + chunk).min(self.batch);
                    let g = dense.g.clone().slice(start..end);
                    stats.add_partial(index, entry, g, &mut request)?;
                }
                continue;
            }
            let Some((layer, is_weight)) = self.find(entry.id) else {
                return Err(not_covered(entry));
            };
            let [batch, positions, d_in] = layer.a.dims();
            let d_out = layer.e.dims()[2];
            if !is_weight {
                let g = layer.e.clone().sum_dim(1).reshape([batch, d_out]);
                stats.add_partial(index, entry, g, &mut request)?;
                continue;
            }
            if positions > 1 || layer.layout == Layout::OutIn {
                // Σ_t a_t e_tᵀ per sample (or its transpose), chunk by chunk.
                let chunk = chunk_samples(request.chunk_elements, d_in * d_out, batch);
                for start in (0..batch).step_by(chunk) {
                    let end = (start + chunk).min(batch);
                    let a = layer.a.clone().slice(start..end);
                    let e = layer.e.clone().slice(start..end);
                    let g = match layer.layout {
                        Layout::InOut => a.swap_dims(1, 2).matmul(e),
                        Layout::OutIn => e.swap_dims(1, 2).matmul(a),
                    };
                    let g = g.reshape([end - start, d_in * d_out]);
                    stats.add_partial(index, entry, g, &mut request)?;
                }
                continue;
            }
            let a = layer.a.clone().reshape([batch, d_in]);
            let e = layer.e.clone().reshape([batch, d_out]);
            if request.sq_norms {
                let sq = a.clone().square().sum_dim(1) * e.clone().square().sum_dim(1);
                stats.push_sq_norms(index, sq.reshape([batch]));
            }
            for (k, direction) in request.directions.iter().enumerate() {
                let v = direction_of(direction, entry, &a.device())?.reshape([d_in, d_out]);
                let dots = (a.clone().matmul(v) * e.clone()).sum_dim(1);
                stats.push_dots(k, index, dots.reshape([batch]));
            }
            if request.sum_sq {
                let sum_sq = a.clone().square().transpose().matmul(e.clone().square());
                stats.add_sum_sq(index, sum_sq.reshape([d_in * d_out]));
            }
            if request.abs_max {
                let m = a.clone().abs().max_dim(1) * e.clone().abs().max_dim(1);
                stats.push_abs_max(index, m.max());
            }
            if let Some(sink) = request.elements.as_mut() {
                // Factored chunks hold `b·(d_in + d_out)` numbers: usually the whole batch.
                let chunk = chunk_samples(request.chunk_elements, d_in + d_out, batch);
                for start in (0..batch).step_by(chunk) {
                    let end = (start + chunk).min(batch);
                    let a = a.clone().slice(start..end);
                    let e = e.clone().slice(start..end);
                    sink(index, Elements::Outer { a, e })?;
                }
            }
        }
        stats.finish()
    }
}

/// How many samples fit in a chunk of at most `max_elements` elements (at least one).
pub(crate) fn chunk_samples(max_elements: usize, numel: usize, batch: usize) -> usize {
    (max_elements / numel.max(1)).clamp(1, batch.max(1))
}

pub(crate) fn not_covered(entry: &ParamEntry) -> QuantityError {
    QuantityError::Unsupported(format!(
        "parameter `{}` is not in an instrumented layer (persample::Linear, Conv1d, Conv2d, \
         Embedding, LayerNorm, RmsNorm, GroupNorm, InstanceNorm, PRelu); use ExactPerSample or PerSample::auto for other layers",
        entry.name
    ))
}

/// The direction's values for `entry`, on `device` (the per-sample gradients' device: with
/// several devices the direction may live on another one).
fn direction_of(
    direction: &Snapshot,
    entry: &ParamEntry,
    device: &Device,
) -> Result<Tensor<1>, QuantityError> {
    direction
        .get(entry.id)
        .map(|d| d.value.clone().to_device(device))
        .ok_or_else(|| QuantityError::Shape(format!("no direction for parameter `{}`", entry.name)))
}

/// Collects per-parameter statistics, from factored formulas or from materialised per-sample
/// gradients `[b, numel]`, possibly arriving in several sample chunks.
pub(crate) struct Accumulator {
    batch: usize,
    sq_norms: Vec<Vec<Tensor<1>>>,
    dots: Vec<Vec<Vec<Tensor<1>>>>,
    sum_sq: Vec<Option<Tensor<1>>>,
    abs_max: Vec<Vec<Tensor<1>>>,
    want: (bool, bool, bool),
}

impl Accumulator {
    pub(crate) fn new(batch: usize, request: &Request<'_>) -> Self {
        Self {
            batch,
            sq_norms: Vec::new(),
            dots: vec![Vec::new(); request.directions.len()],
            sum_sq: Vec::new(),
            abs_max: Vec::new(),
            want: (request.sq_norms, request.sum_sq, request.abs_max),
        }
    }

    /// Makes room for parameter `index`.
    pub(crate) fn slot(&mut self, index: usize) {
        if self.sq_norms.len() <= index {
            self.sq_norms.resize(index + 1, Vec::new());
            self.sum_sq.resize(index + 1, None);
            self.abs_max.resize(index + 1, Vec::new());
            for d in &mut self.dots {
                d.resize(index + 1, Vec::new());
            }
        }
    }

    pub(crate) fn push_sq_norms(&mut self, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.sq_norms[index].push(part);
    }

    pub(crate) fn push_dots(&mut self, direction: usize, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.dots[direction][index].push(part);
    }

    pub(crate) fn add_sum_sq(&mut self, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.sum_sq[index] = Some(match self.sum_sq[index].take() {
            Some(acc) => acc + part,
            None => part,
        });
    }

    pub(crate) fn push_abs_max(&mut self, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.abs_max[index].push(part);
    }

    /// Statistics of one parameter from per-sample gradients `g` `[b, numel]` of some of the
    /// samples (chunks arrive in sample order).
    pub(crate) fn add_partial(
        &mut self,
        index: usize,
        entry: &ParamEntry,
        g: Tensor<2>,
        request: &mut Request<'_>,
    ) -> Result<(), QuantityError> {
        self.slot(index);
        let numel = entry.numel();
        let b = g.dims()[0];
        let (want_sq, want_sum_sq, want_max) = self.want;
        if want_sq {
            self.push_sq_norms(index, g.clone().square().sum_dim(1).reshape([b]));
        }
        for (k, direction) in request.directions.iter().enumerate() {
            let v = direction_of(direction, entry, &g.device())?.reshape([numel, 1]);
            self.dots[k][index].push(g.clone().matmul(v).reshape([b]));
        }
        if want_sum_sq {
            self.add_sum_sq(index, g.clone().square().sum_dim(0).reshape([numel]));
        }
        if want_max {
            self.push_abs_max(index, g.clone().abs().max());
        }
        if let Some(sink) = request.elements.as_mut() {
            sink(index, Elements::Dense(g))?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<PerSampleStats, QuantityError> {
        let (want_sq, want_sum_sq, want_max) = self.want;
        let cat = |v: Vec<Vec<Tensor<1>>>| -> Result<Vec<Tensor<1>>, QuantityError> {
            v.into_iter()
                .map(|parts| {
                    if parts.is_empty() {
                        Err(QuantityError::Shape("a parameter has no statistic".into()))
                    } else {
                        Ok(Tensor::cat(parts, 0))
                    }
                })
                .collect()
        };
        let sum_sq = if want_sum_sq {
            Some(
                self.sum_sq
                    .into_iter()
                    .map(|t| {
                        t.ok_or_else(|| QuantityError::Shape("a parameter has no statistic".into()))
                    })
                    .collect::<Result<_, _>>()?,
            )
        } else {
            None
        };
        Ok(PerSampleStats {
            batch_size: self.batch,
            sq_norms: if want_sq {
                Some(cat(self.sq_norms)?)
            } else {
                None
            },
            dots: self.dots.into_iter().map(cat).collect::<Result<_, _>>()?,
            dots_with_grad: None,
            dots_with_previous_grad: None,
            sum_sq,
            abs_max: if want_max {
                Some(cat(self.abs_max)?.into_iter().map(|m| m.max()).collect())
            } else {
                None
            },
        })
    }
}
