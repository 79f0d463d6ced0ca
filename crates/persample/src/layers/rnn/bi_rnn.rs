//! BiRnn.

use burn::module::Module;
use burn::nn::{BiRnnConfig, RnnState};
use burn::tensor::{Device, Tensor};

use super::{Rnn, direction_state, join_directions};

/// `burn::nn::BiRnn` with per-sample statistics: two [`Rnn`]s, one over the sequence and one
/// backwards, their hidden states concatenated; same config, names (`forward.*`,
/// `reverse.*`), record and forward pass.
///
/// # Cost
///
/// Twice an [`Rnn`]'s.
#[derive(Module, Debug)]
pub struct BiRnn {
    /// The forward direction.
    pub forward: Rnn,
    /// The reverse direction.
    pub reverse: Rnn,
    /// Hidden size of each direction.
    pub d_hidden: usize,
    /// Inputs `[B, T, d]` (`true`) or `[T, B, d]`.
    pub batch_first: bool,
}

impl From<burn::nn::BiRnn> for BiRnn {
    fn from(rnn: burn::nn::BiRnn) -> Self {
        Self {
            forward: rnn.forward.into(),
            reverse: rnn.reverse.into(),
            d_hidden: rnn.d_hidden,
            batch_first: rnn.batch_first,
        }
    }
}

impl BiRnn {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &BiRnnConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::BiRnn {
        burn::nn::BiRnn {
            forward: self.forward.as_burn(),
            reverse: self.reverse.as_burn(),
            d_hidden: self.d_hidden,
            batch_first: self.batch_first,
        }
    }

    /// Both directions' hidden states `[B, T, 2·d_hidden]` (`[T, B, ·]` unless batch-first)
    /// and final hidden states `[2, B, d_hidden]` (forward first), as burn's
    /// `BiRnn::forward`.
    pub fn forward(
        &self,
        input: Tensor<3>,
        state: Option<RnnState<3>>,
    ) -> (Tensor<3>, RnnState<3>) {
        let input = if self.batch_first {
            input
        } else {
            input.swap_dims(0, 1)
        };
        let (forward_state, reverse_state) = match state {
            Some(state) => (
                Some(RnnState::new(direction_state(&state.hidden, 0))),
                Some(direction_state(&state.hidden, 1)),
            ),
            None => (None, None),
        };
        let (ahead, ahead_state) = self.forward.forward(input.clone(), forward_state);
        let (back, back_state) = self.reverse.run(input, reverse_state, true);
        let output = join_directions(ahead, back, self.batch_first);
        let state = RnnState::new(Tensor::stack(vec![ahead_state.hidden, back_state], 0));
        (output, state)
    }
}
