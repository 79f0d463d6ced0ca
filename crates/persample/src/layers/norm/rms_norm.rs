//! RmsNorm.

use burn::module::{Module, Param};
use burn::nn::RmsNormConfig;
use burn::tensor::{Device, Tensor};

use super::record;

/// `burn::nn::RmsNorm` with per-sample statistics: identical parameter (`gamma` `[d_model]`),
/// name, record and forward pass; while a [`Recorder`](crate::Recorder) is active it taps
/// `x̂ = x / rms(x)` and the output gradients: `g_{n,γ} = Σ_t e_{n,t} ⊙ x̂_{n,t}`.
///
/// # Cost
///
/// As [`LayerNorm`](crate::LayerNorm).
#[derive(Module, Debug)]
pub struct RmsNorm {
    /// `[d_model]`.
    pub gamma: Param<Tensor<1>>,
    /// Added to the mean square.
    pub epsilon: f64,
}

impl From<burn::nn::RmsNorm> for RmsNorm {
    fn from(layer: burn::nn::RmsNorm) -> Self {
        Self {
            gamma: layer.gamma,
            epsilon: layer.epsilon,
        }
    }
}

impl RmsNorm {
    /// The layer `config` describes, initialised like burn's (`γ = 1`).
    pub fn new(config: &RmsNormConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters and ε.
    pub fn as_burn(&self) -> burn::nn::RmsNorm {
        burn::nn::RmsNorm {
            gamma: self.gamma.clone(),
            epsilon: self.epsilon,
        }
    }

    /// The forward pass, normalising over the last dimension (as burn: the mean square in
    /// `f32`).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let normalized = |x: Tensor<D>| {
            let dtype = x.dtype();
            let rms = (x
                .clone()
                .cast(burn::tensor::DType::F32)
                .square()
                .mean_dim(D - 1)
                + self.epsilon)
                .sqrt();
            x / rms.cast(dtype)
        };
        let output = normalized(input.clone()) * self.gamma.val().unsqueeze();
        record(&self.gamma, None, || normalized(input.detach()), output)
    }
}
