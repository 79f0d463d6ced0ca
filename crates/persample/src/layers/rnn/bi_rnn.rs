//! BiRnn.

use burn::module::Module;
use burn::nn::{BiRnnConfig, RnnState};
use burn::tensor::Tensor;

use super::{Rnn, direction_state, join_directions};
use crate::layers::mirror::mirrors_burn;

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

mirrors_burn!(
    BiRnn,
    burn::nn::BiRnn,
    BiRnnConfig {
        forward: layer,
        reverse: layer,
        d_hidden: value,
        batch_first: value,
    }
);

impl BiRnn {
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
