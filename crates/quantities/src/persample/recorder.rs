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

use super::factors::{LayerFactors, LinearFactors};
use crate::QuantityError;

/// How a layer stores its weight relative to the per-sample gradient `Σ_t a_t e_tᵀ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[d_in, d_out]` (burn's `Linear`).
    InOut,
    /// `[d_out, d_in]` (convolutions: `[C_out, C_in·k_h·k_w]`).
    OutIn,
}

/// One tap: a linear map applied to `x` `[B, T, d_in]` at `T` positions.
#[derive(Debug)]
struct Tap {
    weight: ParamId,
    bias: Option<ParamId>,
    layout: Layout,
    input: Tensor<3>,
    leaf: Tensor<3>,
}

thread_local! {
    static ACTIVE: RefCell<Option<Vec<Tap>>> = const { RefCell::new(None) };
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
    ACTIVE.with(|active| {
        let mut active = active.borrow_mut();
        let Some(taps) = active.as_mut() else {
            return output;
        };
        let leaf = output.zeros_like().detach().require_grad();
        taps.push(Tap {
            weight,
            bias,
            layout,
            input: input.clone().detach().without_autodiff(),
            leaf: leaf.clone(),
        });
        output + leaf
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
        ACTIVE.with(|active| *active.borrow_mut() = Some(Vec::new()));
        Self {
            _not_send: std::marker::PhantomData,
        }
    }

    /// Stops recording and reads the output gradients from `grads` (the gradients of the mean
    /// mini-batch loss, before they are turned into `GradientsParams`).
    ///
    /// # Errors
    ///
    /// [`QuantityError::Unsupported`] if no instrumented layer ran, or the batch sizes of the
    /// taps disagree; [`QuantityError::Shape`] if a tap's gradient is missing.
    pub fn finish(self, grads: &Gradients) -> Result<LinearFactors, QuantityError> {
        let taps = ACTIVE
            .with(|active| active.borrow_mut().take())
            .unwrap_or_default();
        if taps.is_empty() {
            return Err(QuantityError::Unsupported(
                "no instrumented layer ran while recording; build the model from \
                 `persample::Linear` or use `ExactPerSample`"
                    .into(),
            ));
        }
        let batch = taps[0].input.dims()[0];
        let mut layers: Vec<LayerFactors> = Vec::new();
        for tap in taps {
            let [b, t, d_out] = tap.leaf.dims();
            if b != batch {
                return Err(QuantityError::Unsupported(format!(
                    "instrumented layers saw batch sizes {batch} and {b}"
                )));
            }
            let Some(delta) = tap.leaf.grad(grads) else {
                return Err(QuantityError::Shape(
                    "an instrumented layer's output did not reach the loss".into(),
                ));
            };
            // ∂L/∂z carries the 1/B of the mean loss; the true per-sample gradients are B·δ.
            let e = delta.mul_scalar(batch as f64).reshape([b, t, d_out]);
            match layers.iter_mut().find(|l| l.weight == tap.weight) {
                // A layer applied twice (weight sharing): its per-sample gradient is the sum of
                // both uses, Σ_t a_t e_tᵀ over the concatenated positions.
                Some(layer) => {
                    layer.a = Tensor::cat(vec![layer.a.clone(), tap.input], 1);
                    layer.e = Tensor::cat(vec![layer.e.clone(), e], 1);
                }
                None => layers.push(LayerFactors {
                    weight: tap.weight,
                    bias: tap.bias,
                    layout: tap.layout,
                    a: tap.input,
                    e,
                }),
            }
        }
        Ok(LinearFactors::new(batch, layers))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        ACTIVE.with(|active| active.borrow_mut().take());
    }
}
