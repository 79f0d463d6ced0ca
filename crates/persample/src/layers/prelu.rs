//! An instrumented drop-in for `burn::nn::PRelu`.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::activation::prelu;

use super::mirror::mirrors_burn;
use super::norm::record_channels;

/// `burn::nn::PRelu` with per-sample statistics: identical parameter (`alpha`, `[1]` or
/// `[channels]` along axis 1), name, record and forward pass. `y = max(0, x) + α·min(0, x)`,
/// so while a [`Recorder`](crate::Recorder) is active it taps `min(0, x)` and the output
/// gradients: `g_{n,α} = Σ e ⊙ min(0, x)` per channel (or over everything for one `α`).
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: `min(0, x)` is
/// kept (the size of the input).
#[derive(Module, Debug)]
pub struct PRelu {
    /// `[1]` or `[channels]`.
    pub alpha: Param<Tensor<1>>,
    /// The initial α, as in burn's layer.
    pub alpha_value: f64,
}

mirrors_burn!(
    PRelu,
    burn::nn::PRelu,
    burn::nn::PReluConfig {
        alpha: value,
        alpha_value: value,
    }
);

impl PRelu {
    /// The forward pass; `α` with several entries runs along axis 1.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let output = prelu(input.clone(), self.alpha.val());
        let per_channel = self.alpha.dims()[0] > 1;
        record_channels(
            &self.alpha,
            None,
            || input.clamp_max(0.0),
            output,
            per_channel,
        )
    }
}
