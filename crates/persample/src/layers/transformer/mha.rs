//! MultiHeadAttention.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::activation::Gelu;
use burn::nn::attention::{MhaOutput, MultiHeadAttentionConfig};
use burn::tensor::activation::{quiet_softmax, softmax};
use burn::tensor::{Bool, Tensor};

use super::super::Linear;
use crate::layers::mirror::mirrors_burn;
use crate::recorder::mark_curved;

/// `burn::nn::attention::MultiHeadAttention` with per-sample statistics: its four projections
/// (`query`, `key`, `value`, `output`) are per-sample [`Linear`]s over the sequence.
///
/// # Cost
///
/// Without an active recorder: four thread-local checks per forward. With one: each
/// projection keeps its input (`B·T·d_model`) and adds a zero leaf to its output.
#[derive(Module, Debug)]
pub struct MultiHeadAttention {
    /// Query projection `[d_model, d_model]`.
    pub query: Linear,
    /// Key projection.
    pub key: Linear,
    /// Value projection.
    pub value: Linear,
    /// Output projection.
    pub output: Linear,
    /// Dropout on the attention weights.
    pub dropout: Dropout,
    /// Kept for burn's record layout (burn's block holds one, unused in its forward pass).
    pub activation: Gelu,
    /// Model width.
    pub d_model: usize,
    /// Number of heads.
    pub n_heads: usize,
    /// Width of a head, `d_model / n_heads`.
    pub d_k: usize,
    /// Score given to masked positions.
    pub min_float: f64,
    /// Whether the softmax is burn's `quiet_softmax`.
    pub quiet_softmax: bool,
}

/// The input of [`MultiHeadAttention::forward`], as burn's `MhaInput` (whose fields burn keeps
/// private).
#[derive(Debug, Clone)]
pub struct MhaInput {
    query: Tensor<3>,
    key: Tensor<3>,
    value: Tensor<3>,
    mask_pad: Option<Tensor<2, Bool>>,
    mask_attn: Option<Tensor<3, Bool>>,
}

impl MhaInput {
    /// Self-attention: `x` `[B, T, d_model]` as query, key and value.
    pub fn self_attn(x: Tensor<3>) -> Self {
        Self::new(x.clone(), x.clone(), x)
    }

    /// Query `[B, T₁, d_model]`, key and value `[B, T₂, d_model]`.
    pub fn new(query: Tensor<3>, key: Tensor<3>, value: Tensor<3>) -> Self {
        Self {
            query,
            key,
            value,
            mask_pad: None,
            mask_attn: None,
        }
    }

    /// Padding mask `[B, T₂]` (`true`: padded key).
    pub fn mask_pad(mut self, mask: Tensor<2, Bool>) -> Self {
        self.mask_pad = Some(mask);
        self
    }

    /// Attention mask `[B, T₁, T₂]` (`true`: masked).
    pub fn mask_attn(mut self, mask: Tensor<3, Bool>) -> Self {
        self.mask_attn = Some(mask);
        self
    }
}

mirrors_burn!(
    MultiHeadAttention,
    burn::nn::attention::MultiHeadAttention,
    MultiHeadAttentionConfig {
        query: layer,
        key: layer,
        value: layer,
        output: layer,
        dropout: value,
        activation: value,
        d_model: value,
        n_heads: value,
        d_k: value,
        min_float: value,
        quiet_softmax: value,
    }
);

impl MultiHeadAttention {
    /// Scaled dot-product attention over `n_heads` heads, as burn computes it: the context
    /// `[B, T₁, d_model]` and the attention weights `[B, n_heads, T₁, T₂]`.
    pub fn forward(&self, input: MhaInput) -> MhaOutput {
        mark_curved("attention softmax");
        let [batch, length, d_model] = input.query.dims();
        let heads = |x: Tensor<3>, linear: &Linear| {
            let [b, t, _] = x.dims();
            linear
                .forward(x)
                .reshape([b, t, self.n_heads, self.d_k])
                .swap_dims(1, 2)
        };
        let query = heads(input.query, &self.query);
        let key = heads(input.key, &self.key);
        let value = heads(input.value, &self.value);
        let mut scores = query
            .matmul(key.transpose())
            .mul_scalar((self.d_k as f64).sqrt().recip());
        if let Some(mask) = input.mask_pad {
            let [b, t] = mask.dims();
            scores = scores.mask_fill(mask.reshape([b, 1, 1, t]), self.min_float);
        }
        if let Some(mask) = input.mask_attn {
            let [b, t1, t2] = mask.dims();
            scores = scores.mask_fill(mask.reshape([b, 1, t1, t2]), self.min_float);
        }
        let weights = if self.quiet_softmax {
            quiet_softmax(scores, 3)
        } else {
            softmax(scores, 3)
        };
        let weights = self.dropout.forward(weights);
        let context = weights
            .clone()
            .matmul(value)
            .swap_dims(1, 2)
            .reshape([batch, length, d_model]);
        MhaOutput {
            weights,
            context: self.output.forward(context),
        }
    }
}
