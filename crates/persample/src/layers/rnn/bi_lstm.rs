//! BiLstm.

use burn::module::Module;
use burn::nn::{BiLstmConfig, LstmState};
use burn::tensor::Tensor;

use super::{Lstm, direction_state, join_directions};
use crate::layers::mirror::mirrors_burn;

/// `burn::nn::BiLstm` with per-sample statistics: two [`Lstm`]s, one over the sequence and
/// one backwards, their hidden states concatenated; same config, names (`forward.*`,
/// `reverse.*`), record and forward pass.
///
/// # Cost
///
/// Twice an [`Lstm`]'s.
#[derive(Module, Debug)]
pub struct BiLstm {
    /// The forward direction.
    pub forward: Lstm,
    /// The reverse direction.
    pub reverse: Lstm,
    /// Hidden size of each direction.
    pub d_hidden: usize,
    /// Inputs `[B, T, d]` (`true`) or `[T, B, d]`.
    pub batch_first: bool,
}

mirrors_burn!(
    BiLstm,
    burn::nn::BiLstm,
    BiLstmConfig {
        forward: layer,
        reverse: layer,
        d_hidden: value,
        batch_first: value,
    }
);

impl BiLstm {
    /// Both directions' hidden states `[B, T, 2·d_hidden]` (`[T, B, ·]` unless batch-first)
    /// and final states `[2, B, d_hidden]` (forward first), as burn's `BiLstm::forward`.
    pub fn forward(
        &self,
        input: Tensor<3>,
        state: Option<LstmState<3>>,
    ) -> (Tensor<3>, LstmState<3>) {
        let input = if self.batch_first {
            input
        } else {
            input.swap_dims(0, 1)
        };
        let (forward_state, reverse_state) = match state {
            Some(state) => (
                Some(LstmState::new(
                    direction_state(&state.cell, 0),
                    direction_state(&state.hidden, 0),
                )),
                Some(LstmState::new(
                    direction_state(&state.cell, 1),
                    direction_state(&state.hidden, 1),
                )),
            ),
            None => (None, None),
        };
        let (ahead, ahead_state) = self.forward.forward(input.clone(), forward_state);
        let (back, back_state) = self.reverse.run(input, reverse_state, true);
        let output = join_directions(ahead, back, self.batch_first);
        let state = LstmState::new(
            Tensor::stack(vec![ahead_state.cell, back_state.cell], 0),
            Tensor::stack(vec![ahead_state.hidden, back_state.hidden], 0),
        );
        (output, state)
    }
}
