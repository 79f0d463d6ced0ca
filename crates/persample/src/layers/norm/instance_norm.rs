//! InstanceNorm.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::group_norm;
use crate::layers::mirror::mirrors_burn;

/// `burn::nn::InstanceNorm` with per-sample statistics (group normalisation with one group per
/// channel; see [`GroupNorm`](crate::GroupNorm)).
#[derive(Module, Debug)]
pub struct InstanceNorm {
    /// `[num_channels]`, when affine.
    pub gamma: Option<Param<Tensor<1>>>,
    /// `[num_channels]`, when affine.
    pub beta: Option<Param<Tensor<1>>>,
    /// Channels expected in the input (axis 1).
    pub num_channels: usize,
    /// Added to the variance.
    pub epsilon: f64,
    /// Whether `gamma` and `beta` are learned.
    pub affine: bool,
}

mirrors_burn!(
    InstanceNorm,
    burn::nn::InstanceNorm,
    burn::nn::InstanceNormConfig {
        gamma: value,
        beta: value,
        num_channels: value,
        epsilon: value,
        affine: value,
    }
);

impl InstanceNorm {
    /// The forward pass over `[B, num_channels, ...]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        group_norm(
            input,
            self.gamma.as_ref(),
            self.beta.as_ref(),
            self.num_channels,
            self.epsilon,
        )
    }
}
