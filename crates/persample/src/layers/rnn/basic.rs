//! Rnn.

use burn::module::Module;
use burn::nn::activation::Activation;
use burn::nn::{RnnConfig, RnnState};
use burn::tensor::Tensor;

use super::{GateController, unroll};
use crate::layers::mirror::mirrors_burn;

/// `burn::nn::Rnn` with per-sample statistics: `h_t = act(W x_t + U h_{t−1} + b)` through one
/// [`GateController`]; same config, names, record and forward pass (batch-first or not,
/// reversed, clipped, any hidden activation).
///
/// # Cost
///
/// Without an active recorder: two thread-local checks per time step. With one: the gate's
/// inputs and output gradients over the sequence, `B·T·(d_input + 2·d_hidden)`.
#[derive(Module, Debug)]
pub struct Rnn {
    /// The gate: `input_transform` `[d_input, d_hidden]`, `hidden_transform`
    /// `[d_hidden, d_hidden]`.
    pub gate: GateController,
    /// Hidden size.
    pub d_hidden: usize,
    /// Inputs `[B, T, d]` (`true`) or `[T, B, d]`.
    pub batch_first: bool,
    /// Runs the sequence backwards.
    pub reverse: bool,
    /// Clips the hidden state to `[−clip, clip]`.
    pub clip: Option<f64>,
    /// Hidden activation (tanh by default).
    pub hidden_activation: Activation,
}

mirrors_burn!(
    Rnn,
    burn::nn::Rnn,
    RnnConfig {
        gate: layer,
        d_hidden: value,
        batch_first: value,
        reverse: value,
        clip: value,
        hidden_activation: value,
    }
);

impl Rnn {
    /// The hidden states of every step `[B, T, d_hidden]` (`[T, B, d_hidden]` unless
    /// batch-first) and the final state, as burn's `Rnn::forward`.
    pub fn forward(
        &self,
        input: Tensor<3>,
        state: Option<RnnState<2>>,
    ) -> (Tensor<3>, RnnState<2>) {
        let input = if self.batch_first {
            input
        } else {
            input.swap_dims(0, 1)
        };
        let (output, hidden) = self.run(input, state.map(|s| s.hidden), self.reverse);
        let output = if self.batch_first {
            output
        } else {
            output.swap_dims(0, 1)
        };
        (output, RnnState::new(hidden))
    }

    /// The recurrence over batch-first `input` `[B, T, d_input]`, from the last step to the
    /// first when `reverse`: the hidden states `[B, T, d_hidden]` in the input's order and the
    /// final hidden state. [`BiRnn`](crate::BiRnn) runs its reverse direction through it.
    pub(crate) fn run(
        &self,
        input: Tensor<3>,
        state: Option<Tensor<2>>,
        reverse: bool,
    ) -> (Tensor<3>, Tensor<2>) {
        let [batch, _, _] = input.dims();
        let initial = state.unwrap_or_else(|| {
            Tensor::zeros([batch, self.d_hidden], (&input.device(), input.dtype()))
        });
        unroll(
            &input,
            initial,
            reverse,
            |x, hidden| {
                let next = self
                    .hidden_activation
                    .forward(self.gate.gate_product(x, hidden));
                match self.clip {
                    Some(clip) => next.clamp(-clip, clip),
                    None => next,
                }
            },
            Tensor::clone,
        )
    }
}
