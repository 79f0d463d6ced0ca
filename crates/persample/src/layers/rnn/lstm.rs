//! Lstm.

use burn::module::Module;
use burn::nn::activation::Activation;
use burn::nn::{LstmConfig, LstmState};
use burn::tensor::{Device, Tensor};

use super::{GateController, unroll};

/// `burn::nn::Lstm` with per-sample statistics: the four gates are [`GateController`]s;
/// same config, names, record and forward pass (batch-first or not, reversed, clipped, coupled
/// input and forget gates).
///
/// # Cost
///
/// Without an active recorder: eight thread-local checks per time step. With one: every gate's
/// inputs and output gradients over the sequence, `B·T·(d_input + 2·d_hidden)` per gate.
#[derive(Module, Debug)]
pub struct Lstm {
    /// Input gate.
    pub input_gate: GateController,
    /// Forget gate (none when the input and forget gates are coupled).
    pub forget_gate: Option<GateController>,
    /// Output gate.
    pub output_gate: GateController,
    /// Cell gate.
    pub cell_gate: GateController,
    /// Hidden size.
    pub d_hidden: usize,
    /// Inputs `[B, T, d]` (`true`) or `[T, B, d]`.
    pub batch_first: bool,
    /// Runs the sequence backwards.
    pub reverse: bool,
    /// Clips the cell state to `[−clip, clip]`.
    pub clip: Option<f64>,
    /// Forget gate `1 − input gate`.
    pub input_forget: bool,
    /// Gate activation (sigmoid by default).
    pub gate_activation: Activation,
    /// Cell activation (tanh).
    pub cell_activation: Activation,
    /// Hidden activation (tanh).
    pub hidden_activation: Activation,
}

impl From<burn::nn::Lstm> for Lstm {
    fn from(lstm: burn::nn::Lstm) -> Self {
        Self {
            input_gate: lstm.input_gate.into(),
            forget_gate: lstm.forget_gate.map(Into::into),
            output_gate: lstm.output_gate.into(),
            cell_gate: lstm.cell_gate.into(),
            d_hidden: lstm.d_hidden,
            batch_first: lstm.batch_first,
            reverse: lstm.reverse,
            clip: lstm.clip,
            input_forget: lstm.input_forget,
            gate_activation: lstm.gate_activation,
            cell_activation: lstm.cell_activation,
            hidden_activation: lstm.hidden_activation,
        }
    }
}

impl Lstm {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &LstmConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::Lstm {
        burn::nn::Lstm {
            input_gate: self.input_gate.as_burn(),
            forget_gate: self.forget_gate.as_ref().map(GateController::as_burn),
            output_gate: self.output_gate.as_burn(),
            cell_gate: self.cell_gate.as_burn(),
            d_hidden: self.d_hidden,
            batch_first: self.batch_first,
            reverse: self.reverse,
            clip: self.clip,
            input_forget: self.input_forget,
            gate_activation: self.gate_activation.clone(),
            cell_activation: self.cell_activation.clone(),
            hidden_activation: self.hidden_activation.clone(),
        }
    }

    /// The hidden states of every step `[B, T, d_hidden]` (`[T, B, d_hidden]` unless
    /// batch-first) and the final state, as burn's `Lstm::forward`.
    pub fn forward(
        &self,
        input: Tensor<3>,
        state: Option<LstmState<2>>,
    ) -> (Tensor<3>, LstmState<2>) {
        let input = if self.batch_first {
            input
        } else {
            input.swap_dims(0, 1)
        };
        let (output, state) = self.run(input, state, self.reverse);
        let output = if self.batch_first {
            output
        } else {
            output.swap_dims(0, 1)
        };
        (output, state)
    }

    /// The recurrence over batch-first `input` `[B, T, d_input]`, from the last step to the
    /// first when `reverse`: the hidden states `[B, T, d_hidden]` in the input's order and the
    /// final state. [`BiLstm`](crate::BiLstm) runs its reverse direction through it.
    pub(crate) fn run(
        &self,
        input: Tensor<3>,
        state: Option<LstmState<2>>,
        reverse: bool,
    ) -> (Tensor<3>, LstmState<2>) {
        let [batch, _, _] = input.dims();
        let zeros = || Tensor::zeros([batch, self.d_hidden], (&input.device(), input.dtype()));
        let initial = state.unwrap_or_else(|| LstmState::new(zeros(), zeros()));
        unroll(
            &input,
            initial,
            reverse,
            |x, state| {
                let (cell, hidden) = state.unpack();
                let gate = |g: &GateController| g.gate_product(x.clone(), hidden.clone());
                let input_values = self.gate_activation.forward(gate(&self.input_gate));
                let forget_values = match (&self.forget_gate, self.input_forget) {
                    (Some(forget), false) => self.gate_activation.forward(gate(forget)),
                    _ => input_values.clone().neg().add_scalar(1.0),
                };
                let output_values = self.gate_activation.forward(gate(&self.output_gate));
                let candidate = self.cell_activation.forward(gate(&self.cell_gate));
                let cell = forget_values * cell + input_values * candidate;
                let cell = match self.clip {
                    Some(clip) => cell.clamp(-clip, clip),
                    None => cell,
                };
                let hidden = output_values * self.hidden_activation.forward(cell.clone());
                LstmState::new(cell, hidden)
            },
            |state| state.hidden.clone(),
        )
    }
}
