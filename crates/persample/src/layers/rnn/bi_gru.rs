//! BiGru.

use burn::module::Module;
use burn::nn::BiGruConfig;
use burn::tensor::Tensor;

use super::{Gru, direction_state, join_directions};
use crate::layers::mirror::mirrors_burn;

/// `burn::nn::BiGru` with per-sample statistics: two [`Gru`]s, one over the sequence and one
/// backwards, their hidden states concatenated; same config, names (`forward.*`,
/// `reverse.*`), record and forward pass.
///
/// # Cost
///
/// Twice a [`Gru`]'s.
#[derive(Module, Debug)]
pub struct BiGru {
    /// The forward direction.
    pub forward: Gru,
    /// The reverse direction.
    pub reverse: Gru,
    /// Hidden size of each direction.
    pub d_hidden: usize,
    /// Inputs `[B, T, d]` (`true`) or `[T, B, d]`.
    pub batch_first: bool,
}

mirrors_burn!(
    BiGru,
    burn::nn::BiGru,
    BiGruConfig {
        forward: layer,
        reverse: layer,
        d_hidden: value,
        batch_first: value,
    }
);

impl BiGru {
    /// Both directions' hidden states `[B, T, 2·d_hidden]` (`[T, B, ·]` unless batch-first)
    /// and final hidden states `[2, B, d_hidden]` (forward first), as burn's
    /// `BiGru::forward`.
    pub fn forward(&self, input: Tensor<3>, state: Option<Tensor<3>>) -> (Tensor<3>, Tensor<3>) {
        let input = if self.batch_first {
            input
        } else {
            input.swap_dims(0, 1)
        };
        let (forward_state, reverse_state) = match state {
            Some(state) => (
                Some(direction_state(&state, 0)),
                Some(direction_state(&state, 1)),
            ),
            None => (None, None),
        };
        let (ahead, ahead_state) = self.forward.run(input.clone(), forward_state, false);
        let (back, back_state) = self.reverse.run(input, reverse_state, true);
        let output = join_directions(ahead, back, self.batch_first);
        (output, Tensor::stack(vec![ahead_state, back_state], 0))
    }
}
