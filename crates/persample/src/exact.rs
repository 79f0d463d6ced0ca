//! The exact fallback: per-sample gradients from single-sample backward passes, for any burn
//! model.

use burn::module::ParamId;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::base::{PerSampleSource, Request};
use super::factors::{Accumulator, Coverage, Recording, chunk_samples, refusal_of};
use super::recorder::single_sample_pass;
use super::statistic::PerSampleStats;
use crate::{PerSampleError, Snapshot};

type SampleGrads = dyn Fn(usize) -> Result<GradientsParams, PerSampleError> + Send + Sync;

/// Per-sample gradients from one backward pass per sample (or per chunk the closure chooses):
/// `grads_of(n)` returns the gradients of the loss of sample `n` alone, `∇ℓ_n(θ_t)`, for the
/// parameters of the model at this step. Works for every burn module.
///
/// Statistics are reduced parameter by parameter while the samples go by: at most one
/// sample's gradient (`D` elements) plus the accumulators (`B` per parameter, and `D` for
/// `Σ_n g_n^{⊙2}`) are held at once.
///
/// A drop-in layer that couples the samples (a [`BatchNorm`](super::BatchNorm) in training
/// mode) makes it refuse with [`PerSampleError::SamplesCoupled`], naming every such layer, as
/// the fast path does: single-sample passes would normalise each sample by itself, another
/// model. The refused pass leaves the layer's running statistics as they were. (burn's own
/// `BatchNorm` cannot be seen from here: use the drop-in.)
///
/// # Cost
///
/// `B` extra forward and backward passes per call of [`PerSampleSource::reduce`]: one per
/// step for the single-step quantities, plus one per Alpha end point. A note in the
/// statistics says so (a warning in `Cockpit::warnings`, once per Cockpit; no process-wide
/// state).
pub struct ExactPerSample {
    batch: usize,
    grads_of: Box<SampleGrads>,
}

impl std::fmt::Debug for ExactPerSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactPerSample")
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl ExactPerSample {
    /// A fallback over `batch` samples; `grads_of(n)` must return `∇ℓ_n` (the gradient of the
    /// loss of sample `n` alone, e.g. `GradientsParams::from_grads(loss_n.backward(), &model)`).
    pub fn new(
        batch: usize,
        grads_of: impl Fn(usize) -> Result<GradientsParams, PerSampleError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            batch,
            grads_of: Box::new(grads_of),
        }
    }
}

fn flat_grad(grads: &GradientsParams, id: ParamId, rank: usize) -> Option<Tensor<1>> {
    fn flat<const D: usize>(t: Tensor<D>) -> Tensor<1> {
        let n = t.shape().num_elements();
        t.reshape([n])
    }
    match rank {
        1 => grads.get::<1>(id).map(flat),
        2 => grads.get::<2>(id).map(flat),
        3 => grads.get::<3>(id).map(flat),
        4 => grads.get::<4>(id).map(flat),
        5 => grads.get::<5>(id).map(flat),
        6 => grads.get::<6>(id).map(flat),
        _ => None,
    }
}

impl PerSampleSource for ExactPerSample {
    fn batch_size(&self) -> usize {
        self.batch
    }

    fn reduce(
        &self,
        params: &Snapshot,
        mut request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        let cost = format!(
            "per-sample gradients from the exact fallback cost {} extra backward passes per \
             tracked step; instrumented layers (persample::Linear, …) make them nearly free",
            self.batch
        );
        let entries = params.entries();
        if entries.is_empty() || self.batch == 0 {
            return Err(PerSampleError::Shape("no parameter or no sample".into()));
        }
        // One row per sample and parameter, gathered sample by sample, reduced per parameter.
        let mut rows: Vec<Vec<Tensor<2>>> = vec![Vec::new(); entries.len()];
        let mut stats = Accumulator::new(self.batch, &request);
        let max_rows = entries
            .iter()
            .map(|e| chunk_samples(request.chunk_elements, e.numel(), self.batch))
            .min()
            .unwrap_or(1);
        for n in 0..self.batch {
            let (grads, refused) = single_sample_pass(|| (self.grads_of)(n));
            if !refused.is_empty() {
                return Err(refusal_of(&refused, params).unwrap_or_else(|| {
                    PerSampleError::Unsupported(format!(
                        "a layer refused single-sample passes: {}",
                        refused[0].reason
                    ))
                }));
            }
            let grads = grads?;
            for (index, entry) in entries.iter().enumerate() {
                let g = flat_grad(&grads, entry.id, entry.shape.len()).ok_or_else(|| {
                    PerSampleError::Shape(format!(
                        "the single-sample gradients lack parameter `{}`",
                        entry.name
                    ))
                })?;
                rows[index].push(g.reshape([1, entry.numel()]));
            }
            if rows[0].len() == max_rows || n + 1 == self.batch {
                for (index, entry) in entries.iter().enumerate() {
                    let chunk = Tensor::cat(std::mem::take(&mut rows[index]), 0);
                    stats.add_partial(index, entry, chunk, None, &mut request)?;
                }
            }
        }
        let mut stats = stats.finish(params.len())?;
        stats.notes.push(cost);
        Ok(stats)
    }
}

/// Chooses the per-sample engine: the fast path when the recorded instrumented layers cover
/// every parameter ([`PerSample::coverage`]), otherwise the exact fallback — and then it says,
/// with the coverage report, which parameters sent it there and why: a note in the statistics
/// at every fallback (the Cockpit warns once per distinct note).
/// A layer that couples the samples (training-mode [`BatchNorm`](super::BatchNorm)) makes
/// it refuse instead of falling back.
#[derive(Debug)]
pub struct PerSample {
    fast: Option<Recording>,
    exact: Option<ExactPerSample>,
}

impl PerSample {
    /// Fast path if it covers the model, else `exact`.
    pub fn auto(fast: Option<Recording>, exact: ExactPerSample) -> Self {
        Self {
            fast,
            exact: Some(exact),
        }
    }

    /// Which parameters of `params` the fast path covers, and which would fall back and why
    /// (`None` without a fast-path recording).
    pub fn coverage(&self, params: &Snapshot) -> Option<Coverage> {
        self.fast.as_ref().map(|fast| fast.coverage(params))
    }
}

impl PerSampleSource for PerSample {
    fn batch_size(&self) -> usize {
        self.fast
            .as_ref()
            .map(PerSampleSource::batch_size)
            .or_else(|| self.exact.as_ref().map(PerSampleSource::batch_size))
            .unwrap_or(0)
    }

    fn reduce(
        &self,
        params: &Snapshot,
        request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        match (&self.fast, &self.exact) {
            // Not for a refusal (a layer coupling the samples): the single-sample passes would
            // normalise each sample by its own statistics, a different model; the fast path
            // returns the refusal.
            (Some(fast), Some(exact)) if !fast.covers(params) && fast.refusal(params).is_none() => {
                let note = format!(
                    "the per-sample fast path does not cover this model; falling back to \
                     single-sample passes.\n{}",
                    fast.coverage(params)
                );
                let mut stats = exact.reduce(params, request)?;
                stats.notes.insert(0, note);
                Ok(stats)
            }
            (Some(fast), _) => fast.reduce(params, request),
            (None, Some(exact)) => exact.reduce(params, request),
            (None, None) => Err(PerSampleError::MissingInfo("per-sample gradients")),
        }
    }
}
