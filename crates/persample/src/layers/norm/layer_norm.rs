//! LayerNorm.

use burn::module::{Module, Param};
use burn::nn::LayerNormConfig;
use burn::tensor::{Device, Tensor};

use super::record;

/// `burn::nn::LayerNorm` with per-sample statistics: identical parameters (`gamma`, optional
/// `beta`, `[d_model]`), names, record and forward pass; while a
/// [`Recorder`](crate::Recorder) is active it taps the normalised input `x̂` and the output
/// gradients: `g_{n,γ} = Σ_t e_{n,t} ⊙ x̂_{n,t}`, `g_{n,β} = Σ_t e_{n,t}`. LayerNorm normalises
/// each sample on its own, so per-sample gradients are well defined (unlike training-mode
/// BatchNorm).
///
/// burn 0.22 keeps `LayerNorm`'s ε private, so build it from the config
/// ([`LayerNorm::new`]) or from a burn layer and its ε ([`LayerNorm::from_burn`]).
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: `x̂` is computed
/// once more and kept (`B·T·d_model`), and the per-sample gradients of `γ` and `β`
/// (`B·d_model` each) are formed after the backward pass.
#[derive(Module, Debug)]
pub struct LayerNorm {
    /// `[d_model]`.
    pub gamma: Param<Tensor<1>>,
    /// `[d_model]`.
    pub beta: Option<Param<Tensor<1>>>,
    /// Added to the variance.
    pub epsilon: f64,
}

impl LayerNorm {
    /// The layer `config` describes, initialised like burn's (`γ = 1`, `β = 0`).
    pub fn new(config: &LayerNormConfig, device: &Device) -> Self {
        Self::from_burn(config.init(device), config.epsilon)
    }

    /// A burn layer's parameters with its ε (which burn does not expose).
    pub fn from_burn(layer: burn::nn::LayerNorm, epsilon: f64) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            epsilon,
        }
    }

    /// burn's layer with these parameters and ε.
    pub fn as_burn(&self) -> burn::nn::LayerNorm {
        let mut layer = LayerNormConfig::new(self.gamma.dims()[0])
            .with_epsilon(self.epsilon)
            .init(&self.gamma.device());
        layer.gamma = self.gamma.clone();
        layer.beta = self.beta.clone();
        layer
    }

    /// The forward pass, normalising over the last dimension.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let output = burn::tensor::module::layer_norm(
            input.clone(),
            self.gamma.val(),
            self.beta.as_ref().map(Param::val),
            self.epsilon,
        );
        record(
            &self.gamma,
            self.beta.as_ref(),
            || {
                let input = input.detach();
                let mean = input.clone().mean_dim(D - 1);
                let centred = input - mean;
                let variance = centred.clone().square().mean_dim(D - 1);
                centred / (variance + self.epsilon).sqrt()
            },
            output,
        )
    }
}
