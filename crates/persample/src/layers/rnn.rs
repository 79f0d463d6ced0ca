//! Instrumented drop-ins for burn-nn's recurrent layers and gated units: `GateController`,
//! `Lstm`, `Gru` and `SwiGlu`, rebuilt from the per-sample [`Linear`].
//!
//! A recurrent layer applies each gate's two Linears once per time step. Every application
//! taps the Linear again, and the recorder joins the taps of one weight over the steps:
//! `g_n = Σ_t a_{n,t} e_{n,t}ᵀ`, the per-sample gradient of the unrolled recurrence (the
//! output gradients `e_{n,t}` already carry what later steps backpropagate).

use burn::module::Module;
use burn::nn::activation::Activation;
use burn::nn::{GruConfig, LstmConfig, LstmState, SwiGluConfig};
use burn::tensor::activation::silu;
use burn::tensor::{Device, Tensor};

use super::Linear;
use crate::recorder::mark_curved;

/// `burn::nn::GateController` with per-sample statistics: `input_transform(x) +
/// hidden_transform(h)`, both per-sample [`Linear`]s.
#[derive(Module, Debug)]
pub struct GateController {
    /// `[d_input, d_output]`.
    pub input_transform: Linear,
    /// `[d_output, d_output]`.
    pub hidden_transform: Linear,
}

impl From<burn::nn::GateController> for GateController {
    fn from(gate: burn::nn::GateController) -> Self {
        Self {
            input_transform: gate.input_transform.into(),
            hidden_transform: gate.hidden_transform.into(),
        }
    }
}

impl GateController {
    /// burn's gate with these parameters.
    pub fn as_burn(&self) -> burn::nn::GateController {
        burn::nn::GateController {
            input_transform: self.input_transform.as_burn(),
            hidden_transform: self.hidden_transform.as_burn(),
        }
    }

    /// `input_transform(input) + hidden_transform(hidden)`, `[B, d_output]`.
    pub fn gate_product(&self, input: Tensor<2>, hidden: Tensor<2>) -> Tensor<2> {
        self.input_transform.forward(input) + self.hidden_transform.forward(hidden)
    }
}

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

    /// The hidden states of every step `[B, T, d_hidden]` (`[T, B, d_hidden]` unless
    /// batch-first) and the final state, as burn's `Lstm::forward`.
    pub fn forward(
        &self,
        input: Tensor<3>,
        state: Option<LstmState<2>>,
    ) -> (Tensor<3>, LstmState<2>) {
        mark_curved("recurrent gates");
        let input = if self.batch_first {
            input
        } else {
            input.swap_dims(0, 1)
        };
        let device = input.device();
        let [batch, length, _] = input.dims();
        let (mut cell, mut hidden) = match state {
            Some(state) => state.unpack(),
            None => (
                Tensor::zeros([batch, self.d_hidden], (&device, input.dtype())),
                Tensor::zeros([batch, self.d_hidden], (&device, input.dtype())),
            ),
        };
        let mut steps: Vec<Option<Tensor<2>>> = vec![None; length];
        let order: Vec<usize> = if self.reverse {
            (0..length).rev().collect()
        } else {
            (0..length).collect()
        };
        for t in order {
            let x = input
                .clone()
                .slice([0..batch, t..t + 1])
                .squeeze_dim::<2>(1);
            let gate = |g: &GateController| g.gate_product(x.clone(), hidden.clone());
            let input_values = self.gate_activation.forward(gate(&self.input_gate));
            let forget_values = match (&self.forget_gate, self.input_forget) {
                (Some(forget), false) => self.gate_activation.forward(gate(forget)),
                _ => input_values.clone().neg().add_scalar(1.0),
            };
            let output_values = self.gate_activation.forward(gate(&self.output_gate));
            let candidate = self.cell_activation.forward(gate(&self.cell_gate));
            cell = forget_values * cell + input_values * candidate;
            if let Some(clip) = self.clip {
                cell = cell.clamp(-clip, clip);
            }
            hidden = output_values * self.hidden_activation.forward(cell.clone());
            steps[t] = Some(hidden.clone());
        }
        let output = Tensor::stack::<3>(steps.into_iter().flatten().collect(), 1);
        let output = if self.batch_first {
            output
        } else {
            output.swap_dims(0, 1)
        };
        (output, LstmState::new(cell, hidden))
    }
}

/// `burn::nn::Gru` with per-sample statistics: the update, reset and new gates are
/// [`GateController`]s; same config, names, record and forward pass (`reset_after` or not,
/// clipped).
///
/// # Cost
///
/// As [`Lstm`], with three gates.
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

impl From<burn::nn::Gru> for Gru {
    fn from(gru: burn::nn::Gru) -> Self {
        Self {
            update_gate: gru.update_gate.into(),
            reset_gate: gru.reset_gate.into(),
            new_gate: gru.new_gate.into(),
            d_hidden: gru.d_hidden,
            reset_after: gru.reset_after,
            gate_activation: gru.gate_activation,
            hidden_activation: gru.hidden_activation,
            clip: gru.clip,
        }
    }
}

impl Gru {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &GruConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// The hidden states of every step `[B, T, d_hidden]` from inputs `[B, T, d_input]`, as
    /// burn's `Gru::forward`.
    pub fn forward(&self, input: Tensor<3>, state: Option<Tensor<2>>) -> Tensor<3> {
        mark_curved("recurrent gates");
        let device = input.device();
        let [batch, length, _] = input.dims();
        let mut hidden = state
            .unwrap_or_else(|| Tensor::zeros([batch, self.d_hidden], (&device, input.dtype())));
        let mut steps = Vec::with_capacity(length);
        for t in 0..length {
            let x = input
                .clone()
                .slice([0..batch, t..t + 1])
                .squeeze_dim::<2>(1);
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
            hidden = candidate * keep + update * hidden;
            if let Some(clip) = self.clip {
                hidden = hidden.clamp(-clip, clip);
            }
            steps.push(hidden.clone());
        }
        Tensor::stack(steps, 1)
    }
}

/// `burn::nn::SwiGlu` with per-sample statistics: `silu(linear_inner(x)) ⊙ linear_outer(x)`,
/// both per-sample [`Linear`]s.
#[derive(Module, Debug)]
pub struct SwiGlu {
    /// `[d_input, d_output]`, under the SiLU.
    pub linear_inner: Linear,
    /// `[d_input, d_output]`, the gate.
    pub linear_outer: Linear,
}

impl From<burn::nn::SwiGlu> for SwiGlu {
    fn from(layer: burn::nn::SwiGlu) -> Self {
        Self {
            linear_inner: layer.linear_inner.into(),
            linear_outer: layer.linear_outer.into(),
        }
    }
}

impl SwiGlu {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &SwiGluConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// `silu(linear_inner(x)) ⊙ linear_outer(x)` on `[..., d_input]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        mark_curved("smooth activation");
        silu(self.linear_inner.forward(input.clone())) * self.linear_outer.forward(input)
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Distribution;

    use super::*;
    use crate::testing::{close, params, saved};

    /// The drop-ins compute what burn's layers compute, in every configuration the config
    /// offers, outside a recording and inside one.
    #[test]
    fn forward_passes_equal_burns() {
        let device = Device::default().autodiff();
        let x = Tensor::<3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        for recording in [false, true] {
            let recorder = recording.then(crate::Recorder::start);
            for (batch_first, reverse, input_forget, clip) in [
                (true, false, false, None),
                (false, true, false, Some(0.3)),
                (true, true, true, None),
            ] {
                let config = LstmConfig::new(5, 6, true)
                    .with_batch_first(batch_first)
                    .with_reverse(reverse)
                    .with_input_forget(input_forget)
                    .with_clip(clip);
                let burn_lstm = config.init(&device);
                let ours = Lstm::from(burn_lstm.clone());
                let state = LstmState::new(
                    Tensor::random([4, 6], Distribution::Normal(0.0, 1.0), &device),
                    Tensor::random([4, 6], Distribution::Normal(0.0, 1.0), &device),
                );
                let input = if batch_first {
                    x.clone()
                } else {
                    x.clone().swap_dims(0, 1)
                };
                let state = if batch_first {
                    None
                } else {
                    // [T, B, d] input: the state has the batch of the swapped input.
                    Some(LstmState::new(
                        state.cell.slice(0..3),
                        state.hidden.slice(0..3),
                    ))
                };
                let what = format!("Lstm {batch_first} {reverse} {input_forget} {clip:?}");
                let (a, sa) = ours.forward(input.clone(), state.clone());
                let (b, sb) = burn_lstm.forward(input, state);
                close(a, b, &what);
                close(sa.cell, sb.cell, &what);
                close(sa.hidden, sb.hidden, &what);
            }
            for reset_after in [true, false] {
                let burn_gru = GruConfig::new(5, 6, true)
                    .with_reset_after(reset_after)
                    .with_clip(Some(0.9))
                    .init(&device);
                close(
                    Gru::from(burn_gru.clone()).forward(x.clone(), None),
                    burn_gru.forward(x.clone(), None),
                    &format!("Gru reset_after {reset_after}"),
                );
            }
            let burn_swiglu = SwiGluConfig::new(5, 7).with_bias(true).init(&device);
            close(
                SwiGlu::from(burn_swiglu.clone()).forward(x.clone()),
                burn_swiglu.forward(x.clone()),
                "SwiGlu",
            );
            drop(recorder);
        }
    }

    /// Records saved from burn's layers load into the drop-ins (same dotted names and values)
    /// and back.
    #[test]
    fn burn_records_load_into_the_drop_ins_and_back() {
        let device = Device::default();
        let lstm = LstmConfig::new(3, 4, true).init(&device);
        let expected = params(&lstm);
        let ours = Lstm::new(&LstmConfig::new(3, 4, true), &device).load_record(saved(lstm));
        assert_eq!(params(&ours), expected);
        let back = LstmConfig::new(3, 4, true)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(params(&back), expected);

        let gru = GruConfig::new(3, 4, false).init(&device);
        let expected = params(&gru);
        let ours = Gru::new(&GruConfig::new(3, 4, false), &device).load_record(saved(gru));
        assert_eq!(params(&ours), expected);
        let back = GruConfig::new(3, 4, false)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(params(&back), expected);

        let swiglu = SwiGluConfig::new(3, 2).init(&device);
        let expected = params(&swiglu);
        let ours = SwiGlu::new(&SwiGluConfig::new(3, 2), &device).load_record(saved(swiglu));
        assert_eq!(params(&ours), expected);
    }
}
