//! PositionWiseFeedForward.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::activation::Activation;
use burn::nn::transformer::PositionWiseFeedForwardConfig;
use burn::tensor::Tensor;

use super::super::{Elementwise, Linear, elementwise};
use crate::layers::mirror::mirrors_burn;
use crate::recorder::mark_curved;

/// `burn::nn::transformer::PositionWiseFeedForward` with per-sample statistics: two per-sample
/// [`Linear`]s around the activation.
///
/// # Cost
///
/// As two [`Linear`]s on every position.
#[derive(Module, Debug)]
pub struct PositionWiseFeedForward {
    /// `[d_model, d_ff]`.
    pub linear_inner: Linear,
    /// `[d_ff, d_model]`.
    pub linear_outer: Linear,
    /// Dropout after the activation.
    pub dropout: Dropout,
    /// The activation (GELU by default); not part of the record, as in burn.
    #[module(skip)]
    pub activation: Activation,
}

mirrors_burn!(
    PositionWiseFeedForward,
    burn::nn::transformer::PositionWiseFeedForward,
    PositionWiseFeedForwardConfig {
        linear_inner: layer,
        linear_outer: layer,
        dropout: value,
        activation: value,
    }
);

impl PositionWiseFeedForward {
    /// `linear_outer(dropout(activation(linear_inner(x))))` on `[..., d_model]`. An activation
    /// [`Elementwise`] knows (GELU by default) is recorded as the activation drop-ins record
    /// it; another curved one marks the block curved.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let inner = self.linear_inner.forward(input);
        let x = match Elementwise::of_burn(&self.activation) {
            Some(function) => elementwise(function, inner),
            None => {
                if !matches!(self.activation, Activation::Identity(_)) {
                    mark_curved("smooth activation");
                }
                self.activation.forward(inner)
            }
        };
        self.linear_outer.forward(self.dropout.forward(x))
    }
}
