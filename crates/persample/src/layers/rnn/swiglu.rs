//! SwiGlu.

use burn::module::Module;
use burn::nn::SwiGluConfig;
use burn::tensor::activation::silu;
use burn::tensor::{Device, Tensor};

use super::super::Linear;
use crate::recorder::mark_curved;

/// `burn::nn::SwiGlu` with per-sample statistics: `silu(linear_inner(x)) ⊙ linear_outer(x)`,
/// both per-sample [`Linear`]s.
#[derive(Module, Debug)]
pub struct SwiGlu {
    /// `[d_input, d_output]`, under the SiLU.
    pub linear_inner: Linear,
    /// `[d_input, d_output]`, the gate.
    pub linear_outer: Linear,
}

impl From<burn::nn::SwiGlu> for SwiGlu {
    fn from(layer: burn::nn::SwiGlu) -> Self {
        Self {
            linear_inner: layer.linear_inner.into(),
            linear_outer: layer.linear_outer.into(),
        }
    }
}

impl SwiGlu {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &SwiGluConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters.
    pub fn as_burn(&self) -> burn::nn::SwiGlu {
        burn::nn::SwiGlu {
            linear_inner: self.linear_inner.as_burn(),
            linear_outer: self.linear_outer.as_burn(),
        }
    }

    /// `silu(linear_inner(x)) ⊙ linear_outer(x)` on `[..., d_input]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        mark_curved("smooth activation");
        silu(self.linear_inner.forward(input.clone())) * self.linear_outer.forward(input)
    }
}
