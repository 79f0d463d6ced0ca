//! Gru.

use burn::module::Module;
use burn::nn::GruConfig;
use burn::nn::activation::Activation;
use burn::tensor::Tensor;

use super::{GateController, unroll};
use crate::layers::mirror::mirrors_burn;

/// `burn::nn::Gru` with per-sample statistics: the update, reset and new gates are
/// [`GateController`]s; same config, names, record and forward pass (`reset_after` or not,
/// clipped).
///
/// # Cost
///
/// As [`Lstm`](crate::Lstm), with three gates.
#[derive(Module, Debug)]
pub struct Gru {
    /// Update gate.
    pub update_gate: GateController,
    /// Reset gate.
    pub reset_gate: GateController,
    /// New (candidate) gate.
    pub new_gate: GateController,
    /// Hidden size.
    pub d_hidden: usize,
    /// Applies the reset gate after the hidden transform (`true`, burn's default) or before.
    pub reset_after: bool,
    /// Gate activation (sigmoid).
    pub gate_activation: Activation,
    /// Candidate activation (tanh).
    pub hidden_activation: Activation,
    /// Clips the hidden state to `[−clip, clip]`.
    pub clip: Option<f64>,
}

mirrors_burn!(
    Gru,
    burn::nn::Gru,
    GruConfig {
        update_gate: layer,
        reset_gate: layer,
        new_gate: layer,
        d_hidden: value,
        reset_after: value,
        gate_activation: value,
        hidden_activation: value,
        clip: value,
    }
);

impl Gru {
    /// The hidden states of every step `[B, T, d_hidden]` from inputs `[B, T, d_input]`, as
    /// burn's `Gru::forward`.
    pub fn forward(&self, input: Tensor<3>, state: Option<Tensor<2>>) -> Tensor<3> {
        self.run(input, state, false).0
    }

    /// The recurrence over `input` `[B, T, d_input]`, from the last step to the first when
    /// `reverse`: the hidden states `[B, T, d_hidden]` in the input's order and the final
    /// hidden state. [`BiGru`](crate::BiGru) runs both directions through it.
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
                let update = self
                    .gate_activation
                    .forward(self.update_gate.gate_product(x.clone(), hidden.clone()));
                let reset = self
                    .gate_activation
                    .forward(self.reset_gate.gate_product(x.clone(), hidden.clone()));
                let new = if self.reset_after {
                    self.new_gate.input_transform.forward(x)
                        + reset * self.new_gate.hidden_transform.forward(hidden.clone())
                } else {
                    self.new_gate.gate_product(x, hidden.clone() * reset)
                };
                let candidate = self.hidden_activation.forward(new);
                let keep = update.clone().neg().add_scalar(1.0);
                let next = candidate * keep + update * hidden;
                match self.clip {
                    Some(clip) => next.clamp(-clip, clip),
                    None => next,
                }
            },
            Tensor::clone,
        )
    }
}
