//! PositionWiseFeedForward.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::activation::Activation;
use burn::nn::transformer::PositionWiseFeedForwardConfig;
use burn::tensor::{Device, Tensor};

use super::super::{Elementwise, Linear, elementwise};
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

impl From<burn::nn::transformer::PositionWiseFeedForward> for PositionWiseFeedForward {
    fn from(layer: burn::nn::transformer::PositionWiseFeedForward) -> Self {
        Self {
            linear_inner: layer.linear_inner.into(),
            linear_outer: layer.linear_outer.into(),
            dropout: layer.dropout,
            activation: layer.activation,
        }
    }
}

impl PositionWiseFeedForward {
    /// The block `config` describes, initialised as burn initialises it.
    pub fn new(config: &PositionWiseFeedForwardConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's block with these parameters.
    pub fn as_burn(&self) -> burn::nn::transformer::PositionWiseFeedForward {
        burn::nn::transformer::PositionWiseFeedForward {
            linear_inner: self.linear_inner.as_burn(),
            linear_outer: self.linear_outer.as_burn(),
            dropout: self.dropout.clone(),
            activation: self.activation.clone(),
        }
    }

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
