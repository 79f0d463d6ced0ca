//! RmsNorm.

use burn::module::{Module, Param};
use burn::nn::RmsNormConfig;
use burn::tensor::Tensor;

use super::record;
use crate::layers::mirror::mirrors_burn;

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

mirrors_burn!(
    RmsNorm,
    burn::nn::RmsNorm,
    RmsNormConfig {
        gamma: value,
        epsilon: value,
    }
);

impl RmsNorm {
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
