//! The fast path's recorder: instrumented layers tap their input and output while a
//! [`Recorder`] is active on the current thread.
//!
//! A tap adds a zero-valued leaf `z` to the layer's output. burn's autodiff is first-order
//! only and has no hooks, but the leaf's gradient `∂L/∂z` is the gradient with respect to the
//! layer's output, produced by the same backward pass as the parameter gradients. With the
//! layer's input it gives every per-sample statistic of the layer.

use std::cell::RefCell;

use burn::module::ParamId;
use burn::tensor::{Gradients, Tensor};

use super::factors::{
    DenseGradients, LayerFactors, Layout, RecordedActivation, Recording, Refusal,
};
use crate::PerSampleError;
use crate::layers::Elementwise;
use crate::reduce::sum_dim;

/// One tap: what a layer recorded, and the zero leaf added to its output `[B, T, d_out]`.
#[derive(Debug)]
struct Tap {
    kind: TapKind,
    leaf: Tensor<3>,
}

/// The shapes of per-sample gradient the drop-ins record.
#[derive(Debug)]
enum TapKind {
    /// A linear map applied to `input` `[B, T, d_in]` at `T` positions (Linear, Embedding with
    /// one-hot inputs, the gates of the recurrent layers): `g_n = Σ_t a_{n,t} e_{n,t}ᵀ`.
    Linear {
        weight: ParamId,
        bias: Option<ParamId>,
        layout: Layout,
        input: Tensor<3>,
    },
    /// A convolution: a Linear over the unfolded positions of its (padded) input, unfolded
    /// only after the backward pass, by the convolution's own deferred step (`rows`, which
    /// holds the input), so the forward and backward passes hold the raw input instead of its
    /// `K`-times larger unfolding.
    Conv {
        weight: ParamId,
        bias: Option<ParamId>,
        rows: Deferred,
    },
    /// A transposed convolution: a Linear (`[d_in, d_out]` layout) over the positions of
    /// `input` `[B, T, C_in]`, whose output gradients are the unfolding of the layer's output
    /// gradient, made after the backward pass by `rows`; the bias's per-sample gradient is the
    /// output gradient summed over the output's positions.
    Transposed {
        weight: ParamId,
        bias: Option<ParamId>,
        input: Tensor<3>,
        rows: DeferredGradient,
    },
    /// An elementwise affine map `y = x̂ ⊙ γ (+ β)` of a normalised input `x̂` `[B, T, d]`
    /// (LayerNorm, RmsNorm): `g_{n,γ} = Σ_t e_{n,t} ⊙ x̂_{n,t}`, `g_{n,β} = Σ_t e_{n,t}`.
    Affine {
        gamma: ParamId,
        beta: Option<ParamId>,
        normalized: Tensor<3>,
    },
}

impl TapKind {
    /// The parameters the tap records.
    fn params(&self) -> Vec<ParamId> {
        let (first, second) = match self {
            TapKind::Linear { weight, bias, .. }
            | TapKind::Conv { weight, bias, .. }
            | TapKind::Transposed { weight, bias, .. } => (*weight, *bias),
            TapKind::Affine { gamma, beta, .. } => (*gamma, *beta),
        };
        std::iter::once(first).chain(second).collect()
    }
}

/// A curved elementwise activation's tap: its input `z` `[B, units]` (on the autodiff graph,
/// so a pass can start from it) and the zero leaf added to its output.
#[derive(Debug)]
struct ActivationTap {
    function: Elementwise,
    input: Tensor<2>,
    leaf: Tensor<2>,
}

/// What a recording holds: the taps, the layers that refused to tap, the curved layers that
/// ran, and the curved activations where they are tapped.
#[derive(Debug, Default)]
struct Taps {
    taps: Vec<Tap>,
    refused: Vec<Refusal>,
    curved: Vec<&'static str>,
    /// `Some` where the recorder taps activations.
    activations: Option<Vec<ActivationTap>>,
}

thread_local! {
    static ACTIVE: RefCell<Option<Taps>> = const { RefCell::new(None) };
    /// The refusals of the single-sample passes running on this thread
    /// ([`single_sample_pass`]), when one is.
    static SINGLE_SAMPLE: RefCell<Option<Vec<Refusal>>> = const { RefCell::new(None) };
}

/// Runs `pass` (one single-sample forward and backward pass of the exact fallback) and
/// returns what it returned with the refusals of the layers it ran: a layer that couples the
/// samples refuses instead of computing (and leaves its state, e.g. BatchNorm's running
/// statistics, untouched).
pub(crate) fn single_sample_pass<R>(pass: impl FnOnce() -> R) -> (R, Vec<Refusal>) {
    let outer = SINGLE_SAMPLE.with(|probe| probe.borrow_mut().replace(Vec::new()));
    let result = pass();
    let refused = SINGLE_SAMPLE.with(|probe| {
        let mut probe = probe.borrow_mut();
        let refused = probe.take().unwrap_or_default();
        *probe = outer;
        refused
    });
    (result, refused)
}

/// Whether a single-sample pass of the exact fallback runs on this thread: layers that
/// couple the samples then [`refuse`] and keep their state as it is.
pub(crate) fn in_single_sample_pass() -> bool {
    SINGLE_SAMPLE.with(|probe| probe.borrow().is_some())
}

/// Whether a [`Recorder`] is active on this thread (instrumented layers then tap).
pub fn is_recording() -> bool {
    ACTIVE.with(|active| active.borrow().is_some())
}

/// Called by instrumented layers: records `input` `[B, T, d_in]` and returns the output with a
/// zero leaf added, when a recorder is active; otherwise returns `output` untouched.
pub(crate) fn tap(
    weight: ParamId,
    bias: Option<ParamId>,
    layout: Layout,
    input: &Tensor<3>,
    output: Tensor<3>,
) -> Tensor<3> {
    push(
        TapKind::Linear {
            weight,
            bias,
            layout,
            input: input.clone().detach().without_autodiff(),
        },
        output,
    )
}

/// A convolution's deferred unfolding: the rows `[B, T, d_in]` of its Linear from the input
/// it holds, made after the backward pass.
pub(crate) struct Deferred(Box<dyn FnOnce() -> Tensor<3>>);

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deferred(unfolding)")
    }
}

/// A transposed convolution's deferred unfolding of its output gradient `[B, T_out, C_out]`
/// into the output-gradient rows `[B, T, d_out]` of its Linear.
pub(crate) struct DeferredGradient(Box<dyn FnOnce(Tensor<3>) -> Tensor<3>>);

impl std::fmt::Debug for DeferredGradient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeferredGradient(unfolding)")
    }
}

/// Called by the convolution drop-ins: records how to make the rows `[B, T, d_in]` of the
/// convolution's Linear after the backward pass (`rows`, holding the detached padded input),
/// and returns a zero leaf of shape `dims` `[B, T, C_out]`, made on `output`'s device in its
/// dtype, when a recorder is active: the drop-in adds it to its output through a view of the
/// output's own shape, so the leaf's gradient is the output gradient as rows.
pub(crate) fn tap_deferred<const D: usize>(
    weight: ParamId,
    bias: Option<ParamId>,
    rows: impl FnOnce() -> Tensor<3> + 'static,
    dims: [usize; 3],
    output: &Tensor<D>,
) -> Option<Tensor<3>> {
    leaf(
        TapKind::Conv {
            weight,
            bias,
            rows: Deferred(Box::new(rows)),
        },
        || Tensor::zeros(dims, (&output.device(), output.dtype())),
    )
}

/// Called by the transposed-convolution drop-ins: records the input rows `[B, T, C_in]` and
/// how to unfold the output gradient's rows `[B, T_out, C_out]` into the Linear's
/// output-gradient rows `[B, T, d_out]` after the backward pass, and returns a zero leaf of
/// shape `dims` `[B, T_out, C_out]` (on `output`'s device, in its dtype) for the drop-in to
/// add to its output through a view, when a recorder is active.
pub(crate) fn tap_transposed<const D: usize>(
    weight: ParamId,
    bias: Option<ParamId>,
    input: Tensor<3>,
    rows: impl FnOnce(Tensor<3>) -> Tensor<3> + 'static,
    dims: [usize; 3],
    output: &Tensor<D>,
) -> Option<Tensor<3>> {
    leaf(
        TapKind::Transposed {
            weight,
            bias,
            input: input.detach().without_autodiff(),
            rows: DeferredGradient(Box::new(rows)),
        },
        || Tensor::zeros(dims, (&output.device(), output.dtype())),
    )
}

/// Called by instrumented normalisation layers: records the normalised input `x̂`
/// `[B, T, d]` of `y = x̂ ⊙ γ (+ β)` and returns the output with a zero leaf added, when a
/// recorder is active; otherwise returns `output` untouched.
pub(crate) fn tap_affine(
    gamma: ParamId,
    beta: Option<ParamId>,
    normalized: Tensor<3>,
    output: Tensor<3>,
) -> Tensor<3> {
    // A normalised input is curved in everything upstream of it.
    mark_curved("normalisation");
    push(
        TapKind::Affine {
            gamma,
            beta,
            normalized: normalized.detach().without_autodiff(),
        },
        output,
    )
}

/// Called by the activation drop-ins with a curved `function`: records `input` (keeping its
/// graph) and returns `output` with a zero leaf added, when a recorder tapping activations
/// is active; otherwise returns `output` untouched.
pub(crate) fn tap_activation<const D: usize>(
    function: Elementwise,
    input: Tensor<D>,
    output: Tensor<D>,
) -> Tensor<D> {
    ACTIVE.with(|active| {
        let mut active = active.borrow_mut();
        let Some(activations) = active.as_mut().and_then(|taps| taps.activations.as_mut()) else {
            return output;
        };
        let dims = output.dims();
        let batch = dims.first().copied().unwrap_or(1).max(1);
        let units = output.shape().num_elements() / batch;
        let leaf =
            Tensor::<2>::zeros([batch, units], (&output.device(), output.dtype())).require_grad();
        activations.push(ActivationTap {
            function,
            input: input.reshape([batch, units]),
            leaf: leaf.clone(),
        });
        output + leaf.reshape(dims)
    })
}

/// Called by drop-ins whose output is curved in their input or their parameters beyond a
/// piecewise-linear map (normalisation, attention's softmax, recurrent gates, smooth
/// activations inside a block): the recording then names `layer` in
/// [`Recording::curved_layers`], so curvature sources know the Hessian's diagonal is not
/// the Gauss–Newton matrix's.
pub(crate) fn mark_curved(layer: &'static str) {
    ACTIVE.with(|active| {
        if let Some(recording) = active.borrow_mut().as_mut()
            && !recording.curved.contains(&layer)
        {
            recording.curved.push(layer);
        }
    });
}

/// Called by a layer that cannot tap in its current mode: per-sample statistics of `params`
/// (and, for a layer that couples the samples, of every layer below it) are refused with
/// `reason`, when a recorder is active.
pub(crate) fn refuse(params: Vec<ParamId>, reason: &str) {
    let refusal = Refusal {
        params,
        reason: reason.to_string(),
    };
    SINGLE_SAMPLE.with(|probe| {
        if let Some(refused) = probe.borrow_mut().as_mut() {
            refused.push(refusal.clone());
        }
    });
    ACTIVE.with(|active| {
        if let Some(recording) = active.borrow_mut().as_mut() {
            recording.refused.push(refusal);
        }
    });
}

/// Records a tap and returns its output `[B, T, d_out]` with a zero leaf added, when a
/// recorder is active; otherwise `output` untouched.
fn push(kind: TapKind, output: Tensor<3>) -> Tensor<3> {
    match leaf(kind, || output.zeros_like()) {
        Some(leaf) => output + leaf,
        None => output,
    }
}

/// Records a tap whose zero leaf `[B, T, d_out]` (made by `zeros`) the caller adds to its
/// output, and returns the leaf, when a recorder is active.
fn leaf(kind: TapKind, zeros: impl FnOnce() -> Tensor<3>) -> Option<Tensor<3>> {
    ACTIVE.with(|active| {
        let mut active = active.borrow_mut();
        let recording = active.as_mut()?;
        let leaf = zeros().detach().require_grad();
        recording.taps.push(Tap {
            kind,
            leaf: leaf.clone(),
        });
        Some(leaf)
    })
}

/// Records the inputs and output gradients of instrumented layers between
/// [`Recorder::start`] and [`Recorder::finish`], on the current thread. Dropping it stops the
/// recording.
///
/// ```ignore
/// let recorder = Recorder::start();        // before the forward pass
/// let loss = loss_fn(model.forward(x), y);
/// let grads = loss.backward();
/// let per_sample = recorder.finish(&grads)?; // before the gradients are consumed
/// let grads = GradientsParams::from_grads(grads, &model);
/// ```
#[derive(Debug)]
pub struct Recorder {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Recorder {
    /// Starts recording on this thread (a recording already active is discarded).
    pub fn start() -> Self {
        ACTIVE.with(|active| *active.borrow_mut() = Some(Taps::default()));
        Self {
            _not_send: std::marker::PhantomData,
        }
    }

    /// Starts recording on this thread, and also taps the curved elementwise activations (the
    /// [activation drop-ins](crate::Elementwise)): their inputs, on the autodiff graph
    /// ([`Recorder::activation_inputs`]), and their output gradients
    /// ([`Recording::activations`]). What curvature sources need; per-sample statistics do
    /// not.
    pub fn start_with_activations() -> Self {
        ACTIVE.with(|active| {
            *active.borrow_mut() = Some(Taps {
                activations: Some(Vec::new()),
                ..Taps::default()
            })
        });
        Self {
            _not_send: std::marker::PhantomData,
        }
    }

    /// The inputs `z` `[B, units]` of the curved activations tapped so far, in the order they
    /// ran, on the autodiff graph: a pass may start from them (`(z·c).sum().backward()`)
    /// before [`Recorder::finish_reached`]. Empty unless started with
    /// [`Recorder::start_with_activations`].
    pub fn activation_inputs(&self) -> Vec<Tensor<2>> {
        ACTIVE.with(|active| {
            active
                .borrow()
                .as_ref()
                .and_then(|taps| taps.activations.as_ref())
                .map(|taps| taps.iter().map(|t| t.input.clone()).collect())
                .unwrap_or_default()
        })
    }

    /// [`Recorder::finish`] for a backward pass that started inside the network (from an
    /// activation's input): the layers it did not reach are left out of the recording (their
    /// parameters uncovered; see [`Recording::recorded`]) instead of being an error.
    ///
    /// # Errors
    ///
    /// As [`Recorder::finish`].
    pub fn finish_reached(self, grads: &Gradients) -> Result<Recording, PerSampleError> {
        self.finish_with(grads, true)
    }

    /// Stops recording and reads the output gradients from `grads` (the gradients of the mean
    /// mini-batch loss, before they are turned into `GradientsParams`).
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if a tap's gradient is missing. What cannot be recorded is
    /// not an error here but left uncovered, with its reason in the factors'
    /// [`coverage`](Recording::coverage) report (and in the error of reducing them): no
    /// instrumented layer ran (0 of N), or a layer ran on fewer rows than the batch (a lookup
    /// of one row broadcast over the batch), named with the fix.
    pub fn finish(self, grads: &Gradients) -> Result<Recording, PerSampleError> {
        self.finish_with(grads, false)
    }

    fn finish_with(self, grads: &Gradients, reached: bool) -> Result<Recording, PerSampleError> {
        let Taps {
            taps,
            refused,
            curved,
            activations,
        } = ACTIVE
            .with(|active| active.borrow_mut().take())
            .unwrap_or_default();
        let curved = curved.into_iter().map(String::from).collect();
        // A curved activation's output gradient, where the pass reached it.
        let activations: Vec<RecordedActivation> = activations
            .unwrap_or_default()
            .into_iter()
            .map(|tap| RecordedActivation {
                function: tap.function,
                input: tap.input.detach(),
                output_gradient: tap.leaf.grad(grads),
            })
            .collect();
        if taps.is_empty() {
            // Nothing recorded: factors that cover no parameter, so the coverage report
            // (0 of N, each parameter with its reason) says what happened, and
            // PerSample::auto falls back.
            return Ok(Recording::new(0, Vec::new())
                .with_refused(refused)
                .with_curved(curved)
                .with_activations(activations));
        }
        // The batch is the largest any layer saw: a layer applied to fewer rows (a lookup
        // shared by the whole batch and broadcast over it) has no per-sample split to record.
        let batch = taps.iter().map(|t| t.leaf.dims()[0]).max().unwrap_or(0);
        // Per weight, the inputs and output gradients of every application, in order.
        let mut uses: Vec<Uses> = Vec::new();
        let mut dense: Vec<DenseGradients> = Vec::new();
        let mut unsplit: Vec<(ParamId, String)> = Vec::new();
        for tap in taps {
            let [b, t, d_out] = tap.leaf.dims();
            if b != batch {
                let reason = if b == 1 {
                    format!(
                        "the layer ran on a batch of 1 that was broadcast over the batch of \
                         {batch} (e.g. a position embedding looked up with a [1, T] index): \
                         its gradient is a sum over the samples with no per-sample split. \
                         Give it the batch (index [B, T], e.g. `positions.expand([{batch}, T])`) \
                         or let PerSample::auto fall back"
                    )
                } else {
                    format!(
                        "the layer ran on {b} rows while the batch has {batch}: its rows are \
                         not the batch's samples"
                    )
                };
                for id in tap.kind.params() {
                    unsplit.push((id, reason.clone()));
                }
                continue;
            }
            let Some(delta) = tap.leaf.grad(grads) else {
                if reached {
                    continue;
                }
                return Err(PerSampleError::Shape(
                    "an instrumented layer's output did not reach the loss".into(),
                ));
            };
            // ∂L/∂z carries the 1/B of the mean loss; the true per-sample gradients are B·δ.
            let e = delta.mul_scalar(batch as f64).reshape([b, t, d_out]);
            match tap.kind {
                TapKind::Linear {
                    weight,
                    bias,
                    layout,
                    input,
                } => Uses::add(&mut uses, weight, bias, layout, input, e),
                TapKind::Conv { weight, bias, rows } => {
                    let input = (rows.0)();
                    Uses::add(&mut uses, weight, bias, Layout::OutIn, input, e);
                }
                TapKind::Transposed {
                    weight,
                    bias,
                    input,
                    rows,
                } => {
                    if let Some(bias) = bias {
                        add_dense(&mut dense, bias, sum_dim(e.clone(), 1).reshape([b, d_out]));
                    }
                    let e = (rows.0)(e);
                    Uses::add(&mut uses, weight, None, Layout::InOut, input, e);
                }
                TapKind::Affine {
                    gamma,
                    beta,
                    normalized,
                } => {
                    let g_gamma = sum_dim(e.clone() * normalized, 1).reshape([b, d_out]);
                    add_dense(&mut dense, gamma, g_gamma);
                    if let Some(beta) = beta {
                        add_dense(&mut dense, beta, sum_dim(e, 1).reshape([b, d_out]));
                    }
                }
            }
        }
        // A layer applied several times (weight sharing, the steps of a recurrent layer): its
        // per-sample gradient is the sum over its uses, Σ_t a_t e_tᵀ over the concatenated
        // positions.
        let layers = uses
            .into_iter()
            .map(|used| LayerFactors {
                weight: used.weight,
                bias: used.bias,
                layout: used.layout,
                a: joined(used.a),
                e: joined(used.e),
            })
            .collect();
        Ok(Recording::new(batch, layers)
            .with_dense(dense)
            .with_refused(refused)
            .with_unsplit(unsplit)
            .with_curved(curved)
            .with_activations(activations))
    }
}

impl Uses {
    /// Records one application of the layer of `weight`: a new entry, or one more use of a
    /// layer already seen.
    fn add(
        uses: &mut Vec<Uses>,
        weight: ParamId,
        bias: Option<ParamId>,
        layout: Layout,
        a: Tensor<3>,
        e: Tensor<3>,
    ) {
        match uses.iter_mut().find(|u| u.weight == weight) {
            Some(used) => {
                used.a.push(a);
                used.e.push(e);
            }
            None => uses.push(Uses {
                weight,
                bias,
                layout,
                a: vec![a],
                e: vec![e],
            }),
        }
    }
}

/// One application's tensor as is, several concatenated along the positions.
fn joined(mut parts: Vec<Tensor<3>>) -> Tensor<3> {
    if parts.len() == 1 {
        parts.remove(0)
    } else {
        Tensor::cat(parts, 1)
    }
}

/// The applications of one instrumented Linear-like layer during a recording.
struct Uses {
    weight: ParamId,
    bias: Option<ParamId>,
    layout: Layout,
    /// Inputs `[B, T_k, d_in]`, one per application.
    a: Vec<Tensor<3>>,
    /// True per-sample output gradients `[B, T_k, d_out]`.
    e: Vec<Tensor<3>>,
}

/// Adds a layer's per-sample gradients `[B, numel]` to those already recorded for `param`
/// (a layer applied twice).
fn add_dense(dense: &mut Vec<DenseGradients>, param: ParamId, g: Tensor<2>) {
    match dense.iter_mut().find(|d| d.param == param) {
        Some(existing) => existing.g = existing.g.clone() + g,
        None => dense.push(DenseGradients { param, g }),
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        ACTIVE.with(|active| active.borrow_mut().take());
    }
}
