//! SwiGlu.

use burn::module::Module;
use burn::nn::SwiGluConfig;
use burn::tensor::Tensor;
use burn::tensor::activation::silu;

use super::super::Linear;
use crate::layers::mirror::mirrors_burn;
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

mirrors_burn!(
    SwiGlu,
    burn::nn::SwiGlu,
    SwiGluConfig {
        linear_inner: layer,
        linear_outer: layer,
    }
);

impl SwiGlu {
    /// `silu(linear_inner(x)) ⊙ linear_outer(x)` on `[..., d_input]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        mark_curved("smooth activation");
        silu(self.linear_inner.forward(input.clone())) * self.linear_outer.forward(input)
    }
}
