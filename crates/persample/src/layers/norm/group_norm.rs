//! GroupNorm.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use super::group_norm;

/// `burn::nn::GroupNorm` with per-sample statistics: identical parameters (`gamma`, `beta`
/// `[num_channels]` when affine), names, record and forward pass; while a
/// [`Recorder`](crate::Recorder) is active it taps `x̂` and the output gradients:
/// `g_{n,γ_c} = Σ_{positions} e ⊙ x̂` and `g_{n,β_c} = Σ_{positions} e` per channel. Each sample
/// is normalised on its own, so per-sample gradients are well defined.
///
/// # Cost
///
/// As [`LayerNorm`](crate::LayerNorm) (`x̂` kept, `B·C·positions`).
#[derive(Module, Debug)]
pub struct GroupNorm {
    /// `[num_channels]`, when affine.
    pub gamma: Option<Param<Tensor<1>>>,
    /// `[num_channels]`, when affine.
    pub beta: Option<Param<Tensor<1>>>,
    /// Groups the channels are split into.
    pub num_groups: usize,
    /// Channels expected in the input (axis 1).
    pub num_channels: usize,
    /// Added to the variance.
    pub epsilon: f64,
    /// Whether `gamma` and `beta` are learned.
    pub affine: bool,
}

impl From<burn::nn::GroupNorm> for GroupNorm {
    fn from(layer: burn::nn::GroupNorm) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            num_groups: layer.num_groups,
            num_channels: layer.num_channels,
            epsilon: layer.epsilon,
            affine: layer.affine,
        }
    }
}

impl GroupNorm {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &burn::nn::GroupNormConfig, device: &burn::tensor::Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::GroupNorm {
        burn::nn::GroupNorm {
            gamma: self.gamma.clone(),
            beta: self.beta.clone(),
            num_groups: self.num_groups,
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
            self.num_groups,
            self.epsilon,
        )
    }
}
