//! InstanceNorm.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::group_norm;

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

impl From<burn::nn::InstanceNorm> for InstanceNorm {
    fn from(layer: burn::nn::InstanceNorm) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            num_channels: layer.num_channels,
            epsilon: layer.epsilon,
            affine: layer.affine,
        }
    }
}

impl InstanceNorm {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &burn::nn::InstanceNormConfig, device: &burn::tensor::Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::InstanceNorm {
        burn::nn::InstanceNorm {
            gamma: self.gamma.clone(),
            beta: self.beta.clone(),
            num_channels: self.num_channels,
            epsilon: self.epsilon,
            affine: self.affine,
        }
    }

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
