//! [`Recording`]: what a recorded step holds (each drop-in's factors, the dense per-sample
//! gradients of the rest) and the per-sample statistics computed from it.

use burn::module::ParamId;
use burn::tensor::Tensor;

use super::accumulator::{Accumulator, direction_of};
use super::coverage::{Coverage, Refusal, refusal_of};
use crate::base::{Elements, PerSampleSource, Request};
use crate::layers::Elementwise;
use crate::reduce::{
    kernel_row_sq_sums, max_dim_nonnegative, max_nonnegative, row_products, row_squares, sum_dim,
};
use crate::statistic::{PerSampleStats, Statistic};
use crate::{ParamEntry, PerSampleError, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `[d_in, d_out]` (burn's `Linear`).
    InOut,
    /// `[d_out, d_in]` (convolutions: `[C_out, C_in·k_h·k_w]`).
    OutIn,
}

/// The recorded factors of one Linear layer: inputs `a` `[B, T, d_in]` and true per-sample
/// output gradients `e = B·∂L/∂y` `[B, T, d_out]` (`T = 1` for plain `[B, d]` inputs).
#[derive(Debug, Clone)]
pub(crate) struct LayerFactors {
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

/// Per-sample gradients of one parameter, materialised `[B, numel]` (normalisation layers'
/// `γ` and `β`, whose per-sample gradients are as small as a batch of activations).
#[derive(Debug, Clone)]
pub(crate) struct DenseGradients {
    /// The parameter's id.
    pub param: ParamId,
    /// True per-sample gradients `∇_p ℓ_n`, `[B, numel]`.
    pub g: Tensor<2>,
}

/// A curved elementwise activation `a = σ(z)` as a recording saw it
/// ([`Recorder::start_with_activations`](crate::Recorder::start_with_activations)).
#[derive(Debug, Clone)]
pub struct RecordedActivation {
    /// The function.
    pub function: Elementwise,
    /// Its input `z`, `[B, units]` (detached).
    pub input: Tensor<2>,
    /// `∂L/∂a` `[B, units]` of the pass's root (with the mean loss's `1/B`), where the pass
    /// reached the activation.
    pub output_gradient: Option<Tensor<2>>,
}

impl RecordedActivation {
    /// The activation's residual `r = ∂L/∂a ⊙ σ''(z)` `[B, units]`: the Hessian with
    /// respect to `z` is `J_aᵀ ∇²_a L J_a + diag(r)`. `None` where the pass did not reach it.
    pub fn residual(&self) -> Option<Tensor<2>> {
        let gradient = self.output_gradient.clone()?;
        Some(gradient * self.function.second_derivative(self.input.clone()))
    }
}

/// What one recorded step holds ([`Recorder::finish`](crate::Recorder::finish)): the
/// per-sample gradients of every drop-in that ran, in factored form where the layer is
/// linear in its weight (Linear, Embedding, the convolutions and transposed convolutions,
/// attention's and the recurrent gates' projections: `g_n = Σ_t a_{n,t} e_{n,t}ᵀ`, the bias
/// `Σ_t e_{n,t}`) and materialised `[B, numel]` for the norms' and PRelu's small parameters;
/// the layers that refused or could not split the batch, with their reasons
/// ([`Recording::coverage`]); and the curved layers that ran ([`Recording::curved_layers`]).
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
pub struct Recording {
    batch: usize,
    layers: Vec<LayerFactors>,
    dense: Vec<DenseGradients>,
    refused: Vec<Refusal>,
    unsplit: Vec<(ParamId, String)>,
    curved: Vec<String>,
    activations: Vec<RecordedActivation>,
}

impl Recording {
    /// Factors of a batch of `batch` samples.
    pub(crate) fn new(batch: usize, layers: Vec<LayerFactors>) -> Self {
        Self {
            batch,
            layers,
            dense: Vec::new(),
            refused: Vec::new(),
            unsplit: Vec::new(),
            curved: Vec::new(),
            activations: Vec::new(),
        }
    }

    /// With the curved activations tapped while recording.
    pub(crate) fn with_activations(self, activations: Vec<RecordedActivation>) -> Self {
        Self {
            activations,
            ..self
        }
    }

    /// The curved elementwise activations that ran, in order, where the recorder tapped them
    /// ([`Recorder::start_with_activations`](crate::Recorder::start_with_activations));
    /// empty otherwise.
    pub fn activations(&self) -> &[RecordedActivation] {
        &self.activations
    }

    /// The entries of `params` this recording covers (after
    /// [`Recorder::finish_reached`](crate::Recorder::finish_reached), the parameters the
    /// pass reached).
    pub fn recorded(&self, params: &Snapshot) -> Snapshot {
        if self.refusal(params).is_some() {
            return Snapshot::from_entries(Vec::new());
        }
        Snapshot::from_entries(
            params
                .entries()
                .iter()
                .filter(|e| self.records(e.id))
                .cloned()
                .collect(),
        )
    }

    /// With the curved layers that ran while recording.
    pub(crate) fn with_curved(self, curved: Vec<String>) -> Self {
        Self { curved, ..self }
    }

    /// The kinds of drop-in that ran while recording and are curved beyond a piecewise-linear
    /// map (`"normalisation"`, `"attention softmax"`, `"recurrent gates"`, `"smooth
    /// activation"`): where one ran, the loss's Hessian diagonal differs from the
    /// Gauss–Newton diagonal in the parameters upstream of it. Empty when only Linear,
    /// convolution, embedding and PReLU drop-ins ran (what runs between them, the recorder
    /// cannot see).
    pub fn curved_layers(&self) -> &[String] {
        &self.curved
    }

    /// With parameters whose layer ran on fewer rows than the batch (a broadcast lookup), so
    /// that no per-sample split was recorded: not covered, for the given reason.
    pub(crate) fn with_unsplit(self, unsplit: Vec<(ParamId, String)>) -> Self {
        Self { unsplit, ..self }
    }

    /// With layers that refused to record (training-mode BatchNorm).
    pub(crate) fn with_refused(self, refused: Vec<Refusal>) -> Self {
        Self { refused, ..self }
    }

    /// The typed error of a layer among `params` that couples the samples
    /// ([`PerSampleError::SamplesCoupled`], naming it), if one ran while recording: per-sample
    /// gradients of the model are then not defined, on the fast path or any other.
    pub fn refusal(&self, params: &Snapshot) -> Option<PerSampleError> {
        refusal_of(&self.refused, params)
    }

    /// With parameters whose per-sample gradients were recorded in full.
    pub(crate) fn with_dense(self, dense: Vec<DenseGradients>) -> Self {
        Self { dense, ..self }
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
            } else if let Some((_, reason)) = self.unsplit.iter().find(|(id, _)| *id == entry.id) {
                coverage
                    .uncovered
                    .push((entry.name.clone(), reason.clone()));
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
        // A parameter with an unsplit use lacks part of its per-sample gradient.
        !self.unsplit.iter().any(|(u, _)| *u == id)
            && (self.find(id).is_some() || self.find_dense(id).is_some())
    }

    fn find_dense(&self, id: ParamId) -> Option<&DenseGradients> {
        self.dense.iter().find(|d| d.param == id)
    }

    /// Each one-position layer's per-sample `(‖a_n‖², ‖e_n‖²)`, by layer, where the kernels
    /// run: every such layer's row sums in one launch per eight factors (`None` for the other
    /// layers; empty where the kernels do not run, and the caller reduces layer by layer).
    #[allow(clippy::type_complexity)]
    fn single_position_row_sq_sums(&self) -> Vec<Option<(Tensor<1>, Tensor<1>)>> {
        let single: Vec<usize> = (0..self.layers.len())
            .filter(|&l| self.layers[l].a.dims()[1] == 1)
            .collect();
        let factors: Vec<Tensor<2>> = single
            .iter()
            .flat_map(|&l| {
                let layer = &self.layers[l];
                let [batch, _, d_in] = layer.a.dims();
                let d_out = layer.e.dims()[2];
                [
                    layer.a.clone().reshape([batch, d_in]),
                    layer.e.clone().reshape([batch, d_out]),
                ]
            })
            .collect();
        let Some(sums) = kernel_row_sq_sums(&factors) else {
            return Vec::new();
        };
        let batch = self.batch;
        let row = |k: usize| sums.clone().slice(k..k + 1).reshape([batch]);
        let mut by_layer = vec![None; self.layers.len()];
        for (k, &l) in single.iter().enumerate() {
            by_layer[l] = Some((row(2 * k), row(2 * k + 1)));
        }
        by_layer
    }

    /// The layer holding parameter `id`, its index, and whether `id` is its weight.
    fn find(&self, id: ParamId) -> Option<(usize, &LayerFactors, bool)> {
        self.layers.iter().enumerate().find_map(|(k, l)| {
            if l.weight == id {
                Some((k, l, true))
            } else if l.bias == Some(id) {
                Some((k, l, false))
            } else {
                None
            }
        })
    }
}

impl PerSampleSource for Recording {
    fn batch_size(&self) -> usize {
        self.batch
    }

    fn reduce(
        &self,
        params: &Snapshot,
        mut request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        if let Some(refusal) = self.refusal(params) {
            return Err(refusal);
        }
        if !params.entries().iter().all(|e| self.records(e.id)) {
            return Err(PerSampleError::Unsupported(format!(
                "the fast path does not cover the model: replace the layers below with the \
                 persample drop-ins, or let other layers take single-sample passes \
                 (`Cockpit::step`: `StepOptions::with_exact_fallback(true)`; the Learner: \
                 `Instrumented::with_exact_fallback`; by hand: `ExactPerSample` or \
                 `PerSample::auto`).\n{}",
                self.coverage(params)
            )));
        }
        let mut stats = Accumulator::new(self.batch, &request);
        let row_sq = if request.wants(Statistic::SqNorm) {
            self.single_position_row_sq_sums()
        } else {
            Vec::new()
        };
        for (index, entry) in params.entries().iter().enumerate() {
            if let Some(dense) = self.find_dense(entry.id) {
                let chunk = chunk_samples(request.chunk_elements, entry.numel(), self.batch);
                for start in (0..self.batch).step_by(chunk) {
                    let end = (start + chunk).min(self.batch);
                    let g = dense.g.clone().slice(start..end);
                    stats.add_partial(index, entry, g, None, &mut request)?;
                }
                continue;
            }
            let Some((layer_index, layer, is_weight)) = self.find(entry.id) else {
                return Err(not_covered(entry));
            };
            let [batch, positions, d_in] = layer.a.dims();
            let d_out = layer.e.dims()[2];
            // `‖a_n‖²` and `‖e_n‖²` of a one-position layer, where the kernels summed them.
            let known = row_sq.get(layer_index).cloned().flatten();
            if !is_weight {
                // One position: the bias's per-sample gradient is `e` itself, no reduction,
                // and its squared norms are `‖e_n‖²`.
                let (g, sq) = match positions {
                    1 => (
                        layer.e.clone().reshape([batch, d_out]),
                        known.map(|(_, e_sq)| e_sq),
                    ),
                    _ => (sum_dim(layer.e.clone(), 1).reshape([batch, d_out]), None),
                };
                stats.add_partial(index, entry, g, sq, &mut request)?;
                continue;
            }
            if (positions > 1 || layer.layout == Layout::OutIn)
                && request.elements.is_none()
                && request
                    .statistics()
                    .iter()
                    .all(|s| matches!(s, Statistic::SqNorm | Statistic::Dot(_)))
            {
                // Norms and projections only: no per-sample gradient is formed.
                factored_sequence_stats(layer, entry, index, &request, &mut stats)?;
                continue;
            }
            // A statistic without a rank-one formula below is taken from the formed rows.
            let rank_one = request.statistics().iter().all(|s| {
                matches!(
                    s,
                    Statistic::SqNorm | Statistic::Dot(_) | Statistic::SumSq | Statistic::AbsMax
                )
            });
            if positions > 1 || layer.layout == Layout::OutIn || !rank_one {
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
                    stats.add_partial(index, entry, g, None, &mut request)?;
                }
                continue;
            }
            let a = layer.a.clone().reshape([batch, d_in]);
            let e = layer.e.clone().reshape([batch, d_out]);
            let mut projections = request.projections()?.into_iter();
            for statistic in request.statistics().iter() {
                let part = match statistic {
                    Statistic::SqNorm => match known.clone() {
                        Some((a_sq, e_sq)) => a_sq * e_sq,
                        None => row_squares(a.clone()) * row_squares(e.clone()),
                    },
                    Statistic::Dot(_) => {
                        let (_, direction) = projections.next().ok_or_else(|| {
                            PerSampleError::Shape("a projection without its direction".into())
                        })?;
                        let v = direction_of(direction, entry, &a.device())?.reshape([d_in, d_out]);
                        row_products(a.clone().matmul(v), e.clone())
                    }
                    Statistic::SumSq => a
                        .clone()
                        .square()
                        .transpose()
                        .matmul(e.clone().square())
                        .reshape([d_in * d_out]),
                    Statistic::AbsMax => max_nonnegative(
                        max_dim_nonnegative(a.clone().abs(), 1)
                            * max_dim_nonnegative(e.clone().abs(), 1),
                    ),
                    // Not reached: a statistic without a rank-one formula forms the rows above.
                    #[allow(unreachable_patterns)]
                    other => {
                        return Err(PerSampleError::Shape(format!(
                            "no rank-one formula for {}",
                            other.formula()
                        )));
                    }
                };
                stats.push(statistic, index, part);
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
        stats.finish(params.len())
    }
}

/// `‖g_n‖²` and `⟨g_n, V⟩` of a layer applied at `T` positions, `g_n = Σ_t a_{n,t} e_{n,t}ᵀ`,
/// without forming `g_n`:
/// - `‖g_n‖² = Σ_{t,s} (a_t·a_s)(e_t·e_s)`, the sum of `(A_n A_nᵀ) ∘ (E_n E_nᵀ)` (Gram route,
///   `B·T²·(d_in + d_out)` work) when `T·(d_in + d_out) < d_in·d_out`; otherwise `g_n` by a
///   batched matmul in sample chunks (`B·T·d_in·d_out`);
/// - `⟨g_n, V⟩ = Σ_t (a_tᵀ V)·e_t = Σ_t a_t·(V e_t)`: one matmul, `[B·T, d_in] × [d_in, d_out]`
///   or `[B·T, d_out] × [d_out, d_in]` (whichever keeps the narrower `[B·T, min(d_in, d_out)]`
///   product), and a row sum over it.
fn factored_sequence_stats(
    layer: &LayerFactors,
    entry: &ParamEntry,
    index: usize,
    request: &Request<'_>,
    stats: &mut Accumulator,
) -> Result<(), PerSampleError> {
    let [batch, positions, d_in] = layer.a.dims();
    let d_out = layer.e.dims()[2];
    let (a, e) = (layer.a.clone(), layer.e.clone());
    if request.wants(Statistic::SqNorm) {
        let sq = if positions * (d_in + d_out) < d_in * d_out {
            let gram_a = a.clone().matmul(a.clone().swap_dims(1, 2));
            let gram_e = e.clone().matmul(e.clone().swap_dims(1, 2));
            row_products(
                gram_a.reshape([batch, positions * positions]),
                gram_e.reshape([batch, positions * positions]),
            )
        } else {
            let chunk = chunk_samples(request.chunk_elements, d_in * d_out, batch);
            let parts: Vec<Tensor<1>> = (0..batch)
                .step_by(chunk)
                .map(|start| {
                    let end = (start + chunk).min(batch);
                    let g = a
                        .clone()
                        .slice(start..end)
                        .swap_dims(1, 2)
                        .matmul(e.clone().slice(start..end));
                    row_squares(g.reshape([end - start, d_in * d_out]))
                })
                .collect();
            Tensor::cat(parts, 0)
        };
        stats.push(Statistic::SqNorm, index, sq);
    }
    let rows = a.reshape([batch * positions, d_in]);
    let e_rows = e.reshape([batch * positions, d_out]);
    for (direction, v) in request.projections()? {
        let v = direction_of(v, entry, &rows.device())?;
        let v = match layer.layout {
            Layout::InOut => v.reshape([d_in, d_out]),
            Layout::OutIn => v.reshape([d_out, d_in]).transpose(),
        };
        // The product through the narrower side: `(A V)·E` keeps `[B·T, d_out]` values,
        // `A·(E Vᵀ)` keeps `[B·T, d_in]` (a vocabulary head's `d_out` is 30× its `d_in`).
        // The product and its sum over each sample's `T·d` values in one row reduction
        // (spread over many cubes where the row is long).
        let dots = if d_out <= d_in {
            row_products(
                rows.clone().matmul(v).reshape([batch, positions * d_out]),
                e_rows.clone().reshape([batch, positions * d_out]),
            )
        } else {
            row_products(
                e_rows
                    .clone()
                    .matmul(v.transpose())
                    .reshape([batch, positions * d_in]),
                rows.clone().reshape([batch, positions * d_in]),
            )
        };
        stats.push(Statistic::Dot(direction), index, dots);
    }
    Ok(())
}

/// How many samples fit in a chunk of at most `max_elements` elements (at least one).
pub(crate) fn chunk_samples(max_elements: usize, numel: usize, batch: usize) -> usize {
    (max_elements / numel.max(1)).clamp(1, batch.max(1))
}

fn not_covered(entry: &ParamEntry) -> PerSampleError {
    PerSampleError::Unsupported(format!(
        "parameter `{}` is not in an instrumented layer (a `persample` drop-in for a burn-nn \
         layer); use ExactPerSample or PerSample::auto for other layers",
        entry.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statistic::Direction;
    use crate::testing::{tensor, values64 as values};

    /// Norms and projections of `Σ_t a_t e_tᵀ` without forming it — Gram route (`T = 2`) and
    /// batched matmul (`T = 6`), both weight layouts — equal the brute-force per-sample
    /// gradients.
    #[test]
    fn sequence_norms_and_projections_equal_brute_force() {
        let (b, d_in, d_out) = (3, 4, 5);
        for positions in [2, 6] {
            for layout in [Layout::InOut, Layout::OutIn] {
                let value = |i: usize, salt: usize| ((i * 7 + salt * 13) % 17) as f64 / 8.0 - 1.0;
                let a: Vec<f64> = (0..b * positions * d_in).map(|i| value(i, 1)).collect();
                let e: Vec<f64> = (0..b * positions * d_out).map(|i| value(i, 2)).collect();
                let v: Vec<f64> = (0..d_in * d_out).map(|i| value(i, 3)).collect();
                let id = ParamId::new();
                let shape = match layout {
                    Layout::InOut => vec![d_in, d_out],
                    Layout::OutIn => vec![d_out, d_in],
                };
                let entry = ParamEntry {
                    id,
                    name: "w".into(),
                    shape,
                    value: tensor(&vec![0.0; d_in * d_out], [d_in * d_out]),
                };
                let params = Snapshot::from_entries(vec![entry.clone()]);
                let direction = Snapshot::from_entries(vec![ParamEntry {
                    value: tensor(&v, [d_in * d_out]),
                    ..entry
                }]);
                let factors = Recording::new(
                    b,
                    vec![LayerFactors {
                        weight: id,
                        bias: None,
                        layout,
                        a: tensor(&a, [b, positions, d_in]),
                        e: tensor(&e, [b, positions, d_out]),
                    }],
                );
                // Brute force: g_n[i][o] = Σ_t a[n,t,i]·e[n,t,o], flattened in the layout.
                let g = |n: usize| -> Vec<f64> {
                    let at = |t: usize, i: usize| a[(n * positions + t) * d_in + i];
                    let et = |t: usize, o: usize| e[(n * positions + t) * d_out + o];
                    let entry =
                        |i: usize, o: usize| (0..positions).map(|t| at(t, i) * et(t, o)).sum();
                    match layout {
                        Layout::InOut => (0..d_in)
                            .flat_map(|i| (0..d_out).map(move |o| (i, o)))
                            .map(|(i, o)| entry(i, o))
                            .collect(),
                        Layout::OutIn => (0..d_out)
                            .flat_map(|o| (0..d_in).map(move |i| (i, o)))
                            .map(|(i, o)| entry(i, o))
                            .collect(),
                    }
                };
                let expected_sq: Vec<f64> =
                    (0..b).map(|n| g(n).iter().map(|x| x * x).sum()).collect();
                let expected_dots: Vec<f64> = (0..b)
                    .map(|n| g(n).iter().zip(&v).map(|(x, y)| x * y).sum())
                    .collect();
                let request = Request::new()
                    .with(Statistic::SqNorm)
                    .project_on(Direction::Gradient, &direction);
                let stats = factors
                    .reduce(&params, request)
                    .unwrap_or_else(|err| panic!("{err}"));
                let first = |s: Statistic| values(stats.get(s).unwrap_or_default()[0].clone());
                let sq = first(Statistic::SqNorm);
                let dots = first(Statistic::Dot(Direction::Gradient));
                let close = |x: &[f64], y: &[f64]| {
                    x.len() == y.len()
                        && x.iter()
                            .zip(y)
                            .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
                };
                let what = format!("T = {positions}, {layout:?}");
                assert!(close(&sq, &expected_sq), "{what}: {sq:?} {expected_sq:?}");
                assert!(
                    close(&dots, &expected_dots),
                    "{what}: {dots:?} {expected_dots:?}"
                );
            }
        }
    }
}
