//! Instrumented drop-ins for burn-nn's transformer blocks, rebuilt from the per-sample
//! [`Linear`] and [`LayerNorm`]: `MultiHeadAttention`, `PositionWiseFeedForward`,
//! `TransformerEncoderLayer` and `TransformerEncoder`.
//!
//! burn has no hooks and its composite modules hold concrete `burn::nn::Linear` fields, so the
//! instrumented block is the block itself, written again with the drop-ins: same config, field
//! names (hence dotted parameter names and record layout) and forward pass. Attention mixes
//! positions within a sample, never samples, so every parameter's per-sample gradient is
//! exactly what its Linear or LayerNorm records.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::activation::{Activation, Gelu};
use burn::nn::attention::{MhaOutput, MultiHeadAttentionConfig};
use burn::nn::transformer::{PositionWiseFeedForwardConfig, TransformerEncoderConfig};
use burn::tensor::activation::{quiet_softmax, softmax};
use burn::tensor::{Bool, Device, Tensor};

use super::{LayerNorm, Linear};
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

impl From<burn::nn::attention::MultiHeadAttention> for MultiHeadAttention {
    fn from(layer: burn::nn::attention::MultiHeadAttention) -> Self {
        Self {
            query: layer.query.into(),
            key: layer.key.into(),
            value: layer.value.into(),
            output: layer.output.into(),
            dropout: layer.dropout,
            activation: layer.activation,
            d_model: layer.d_model,
            n_heads: layer.n_heads,
            d_k: layer.d_k,
            min_float: layer.min_float,
            quiet_softmax: layer.quiet_softmax,
        }
    }
}

impl MultiHeadAttention {
    /// The block `config` describes, initialised as burn initialises it.
    pub fn new(config: &MultiHeadAttentionConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's block with these parameters.
    pub fn as_burn(&self) -> burn::nn::attention::MultiHeadAttention {
        burn::nn::attention::MultiHeadAttention {
            query: self.query.as_burn(),
            key: self.key.as_burn(),
            value: self.value.as_burn(),
            output: self.output.as_burn(),
            dropout: self.dropout.clone(),
            activation: self.activation.clone(),
            d_model: self.d_model,
            n_heads: self.n_heads,
            d_k: self.d_k,
            min_float: self.min_float,
            quiet_softmax: self.quiet_softmax,
        }
    }

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
            .div_scalar((self.d_k as f32).sqrt());
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

/// `burn::nn::transformer::PositionWiseFeedForward` with per-sample statistics: two per-sample
/// [`Linear`]s around the activation.
///
/// # Cost
///
/// As two [`Linear`]s on every position.
#[derive(Module, Debug)]
pub struct PositionWiseFeedForward {
    /// `[d_model, d_ff]`.
    pub linear_inner: Linear,
    /// `[d_ff, d_model]`.
    pub linear_outer: Linear,
    /// Dropout after the activation.
    pub dropout: Dropout,
    /// The activation (GELU by default); not part of the record, as in burn.
    #[module(skip)]
    pub activation: Activation,
}

impl From<burn::nn::transformer::PositionWiseFeedForward> for PositionWiseFeedForward {
    fn from(layer: burn::nn::transformer::PositionWiseFeedForward) -> Self {
        Self {
            linear_inner: layer.linear_inner.into(),
            linear_outer: layer.linear_outer.into(),
            dropout: layer.dropout,
            activation: layer.activation,
        }
    }
}

impl PositionWiseFeedForward {
    /// The block `config` describes, initialised as burn initialises it.
    pub fn new(config: &PositionWiseFeedForwardConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's block with these parameters.
    pub fn as_burn(&self) -> burn::nn::transformer::PositionWiseFeedForward {
        burn::nn::transformer::PositionWiseFeedForward {
            linear_inner: self.linear_inner.as_burn(),
            linear_outer: self.linear_outer.as_burn(),
            dropout: self.dropout.clone(),
            activation: self.activation.clone(),
        }
    }

    /// `linear_outer(dropout(activation(linear_inner(x))))` on `[..., d_model]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        if !matches!(
            self.activation,
            Activation::Identity(_) | Activation::Relu(_) | Activation::LeakyRelu(_)
        ) {
            mark_curved("smooth activation");
        }
        let x = self.activation.forward(self.linear_inner.forward(input));
        self.linear_outer.forward(self.dropout.forward(x))
    }
}

/// `burn::nn::transformer::TransformerEncoderLayer` with per-sample statistics: attention,
/// feed-forward block and the two LayerNorms, each a drop-in.
#[derive(Module, Debug)]
pub struct TransformerEncoderLayer {
    /// Self-attention.
    pub mha: MultiHeadAttention,
    /// Feed-forward block.
    pub pwff: PositionWiseFeedForward,
    /// LayerNorm after attention (before the feed-forward block with `norm_first`).
    pub norm_1: LayerNorm,
    /// LayerNorm after the feed-forward block (before attention with `norm_first`).
    pub norm_2: LayerNorm,
    /// Dropout on both residual branches.
    pub dropout: Dropout,
    /// Pre-norm (`true`) or post-norm.
    pub norm_first: bool,
}

impl TransformerEncoderLayer {
    /// One layer of the encoder `config` describes, initialised as burn initialises it.
    pub fn new(config: &TransformerEncoderConfig, device: &Device) -> Self {
        Self::from_burn(
            burn::nn::transformer::TransformerEncoderLayer::new(config, device),
            config.layer_norm_eps,
        )
    }

    /// burn's layer, with the LayerNorms' ε (`TransformerEncoderConfig::layer_norm_eps`, which
    /// burn's LayerNorm does not expose).
    pub fn from_burn(
        layer: burn::nn::transformer::TransformerEncoderLayer,
        layer_norm_eps: f64,
    ) -> Self {
        Self {
            mha: layer.mha.into(),
            pwff: layer.pwff.into(),
            norm_1: LayerNorm::from_burn(layer.norm_1, layer_norm_eps),
            norm_2: LayerNorm::from_burn(layer.norm_2, layer_norm_eps),
            dropout: layer.dropout,
            norm_first: layer.norm_first,
        }
    }

    /// The layer's forward pass on `[B, T, d_model]`, as burn's (note burn's naming: with
    /// `norm_first`, `norm_2` precedes attention and `norm_1` the feed-forward block).
    pub fn forward(
        &self,
        input: Tensor<3>,
        mask_pad: Option<Tensor<2, Bool>>,
        mask_attn: Option<Tensor<3, Bool>>,
    ) -> Tensor<3> {
        let x = input;
        let attended = if self.norm_first {
            self.norm_2.forward(x.clone())
        } else {
            x.clone()
        };
        let mut mha_input = MhaInput::self_attn(attended);
        if let Some(mask) = mask_pad {
            mha_input = mha_input.mask_pad(mask);
        }
        if let Some(mask) = mask_attn {
            mha_input = mha_input.mask_attn(mask);
        }
        let context = self.dropout.forward(self.mha.forward(mha_input).context);
        let mut x = x + context;
        let fed = if self.norm_first {
            self.norm_1.forward(x.clone())
        } else {
            x = self.norm_1.forward(x);
            x.clone()
        };
        let x = x + self.dropout.forward(self.pwff.forward(fed));
        if self.norm_first {
            x
        } else {
            self.norm_2.forward(x)
        }
    }
}

/// `burn::nn::transformer::TransformerEncoder` with per-sample statistics: its layers are
/// [`TransformerEncoderLayer`] drop-ins.
#[derive(Module, Debug)]
pub struct TransformerEncoder {
    /// The layers.
    pub layers: Vec<TransformerEncoderLayer>,
    /// Model width.
    pub d_model: usize,
    /// Feed-forward width.
    pub d_ff: usize,
    /// Attention heads.
    pub n_heads: usize,
    /// Number of layers.
    pub n_layers: usize,
    /// Dropout probability.
    pub dropout: f64,
    /// Pre-norm layers.
    pub norm_first: bool,
    /// burn's `quiet_softmax` in attention.
    pub quiet_softmax: bool,
}

/// The input of [`TransformerEncoder::forward`], as burn's `TransformerEncoderInput`.
#[derive(Debug, Clone)]
pub struct TransformerEncoderInput {
    tensor: Tensor<3>,
    mask_pad: Option<Tensor<2, Bool>>,
    mask_attn: Option<Tensor<3, Bool>>,
}

impl TransformerEncoderInput {
    /// Embedded tokens `[B, T, d_model]`.
    pub fn new(tensor: Tensor<3>) -> Self {
        Self {
            tensor,
            mask_pad: None,
            mask_attn: None,
        }
    }

    /// Padding mask `[B, T]`.
    pub fn mask_pad(mut self, mask: Tensor<2, Bool>) -> Self {
        self.mask_pad = Some(mask);
        self
    }

    /// Attention mask `[B, T, T]`.
    pub fn mask_attn(mut self, mask: Tensor<3, Bool>) -> Self {
        self.mask_attn = Some(mask);
        self
    }
}

impl TransformerEncoder {
    /// The encoder `config` describes, initialised as burn initialises it.
    pub fn new(config: &TransformerEncoderConfig, device: &Device) -> Self {
        Self::from_burn(config.init(device), config.layer_norm_eps)
    }

    /// burn's encoder, with its LayerNorms' ε (`TransformerEncoderConfig::layer_norm_eps`).
    pub fn from_burn(
        encoder: burn::nn::transformer::TransformerEncoder,
        layer_norm_eps: f64,
    ) -> Self {
        Self {
            layers: encoder
                .layers
                .into_iter()
                .map(|layer| TransformerEncoderLayer::from_burn(layer, layer_norm_eps))
                .collect(),
            d_model: encoder.d_model,
            d_ff: encoder.d_ff,
            n_heads: encoder.n_heads,
            n_layers: encoder.n_layers,
            dropout: encoder.dropout,
            norm_first: encoder.norm_first,
            quiet_softmax: encoder.quiet_softmax,
        }
    }

    /// Every layer in turn, on `[B, T, d_model]`.
    pub fn forward(&self, input: TransformerEncoderInput) -> Tensor<3> {
        let mut x = input.tensor;
        for layer in &self.layers {
            x = layer.forward(x, input.mask_pad.clone(), input.mask_attn.clone());
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::transformer::TransformerEncoderInput as BurnInput;
    use burn::tensor::{Distribution, TensorData};

    use super::*;
    use crate::Snapshot;
    use crate::testing::{close, saved, values};

    fn config(norm_first: bool) -> TransformerEncoderConfig {
        TransformerEncoderConfig::new(8, 12, 2, 2)
            .with_dropout(0.0)
            .with_norm_first(norm_first)
            .with_layer_norm_eps(1e-3)
    }

    /// The drop-in encoder computes what burn's does — post-norm and pre-norm, with a padding
    /// mask, outside a recording and inside one — and its attention weights are burn's.
    #[test]
    fn forward_passes_equal_burns() {
        let device = Device::default().autodiff();
        let x = Tensor::<3>::random([3, 5, 8], Distribution::Normal(0.0, 1.0), &device);
        let pad = Tensor::<2, Bool>::from_data(
            TensorData::new(
                (0..15).map(|i| i % 5 == 4 && i >= 5).collect::<Vec<_>>(),
                [3, 5],
            ),
            &device,
        );
        for norm_first in [false, true] {
            let burn_encoder = config(norm_first).init(&device);
            let ours = TransformerEncoder::from_burn(burn_encoder.clone(), 1e-3);
            for recording in [false, true] {
                let recorder = recording.then(crate::Recorder::start);
                close(
                    ours.forward(TransformerEncoderInput::new(x.clone()).mask_pad(pad.clone())),
                    burn_encoder.forward(BurnInput::new(x.clone()).mask_pad(pad.clone())),
                    &format!("encoder (norm_first {norm_first}, recording {recording})"),
                );
                drop(recorder);
            }
        }
        let burn_mha = MultiHeadAttentionConfig::new(8, 4)
            .with_dropout(0.0)
            .init(&device);
        let ours = MultiHeadAttention::from(burn_mha.clone());
        let (a, b) = (
            ours.forward(MhaInput::self_attn(x.clone())),
            burn_mha.forward(burn::nn::attention::MhaInput::self_attn(x.clone())),
        );
        close(a.weights, b.weights, "attention weights");
        close(a.context, b.context, "attention context");
        let burn_pwff = PositionWiseFeedForwardConfig::new(8, 6)
            .with_dropout(0.0)
            .init(&device);
        close(
            PositionWiseFeedForward::from(burn_pwff.clone()).forward(x.clone()),
            burn_pwff.forward(x),
            "feed-forward",
        );
    }

    /// A record saved from burn's encoder loads into the drop-in, with the same dotted
    /// parameter names, and the drop-in's record loads back into burn's encoder.
    #[test]
    fn burn_records_load_into_the_drop_ins_and_back() {
        let device = Device::default();
        let original = config(true).init(&device);
        let expected: Vec<Vec<f32>> = Snapshot::of_params(&original)
            .entries()
            .iter()
            .map(|e| values(e.value.clone()))
            .collect();
        let names = Snapshot::of_params(&original).names();
        let ours = TransformerEncoder::new(&config(true), &device).load_record(saved(original));
        let ours_snapshot = Snapshot::of_params(&ours);
        assert_eq!(ours_snapshot.names(), names);
        let got: Vec<Vec<f32>> = ours_snapshot
            .entries()
            .iter()
            .map(|e| values(e.value.clone()))
            .collect();
        assert_eq!(got, expected);
        let back = config(true).init(&device).load_record(saved(ours));
        let back: Vec<Vec<f32>> = Snapshot::of_params(&back)
            .entries()
            .iter()
            .map(|e| values(e.value.clone()))
            .collect();
        assert_eq!(back, expected);
    }
}
