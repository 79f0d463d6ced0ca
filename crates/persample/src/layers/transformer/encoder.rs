//! TransformerEncoderLayer and TransformerEncoder.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::transformer::TransformerEncoderConfig;
use burn::tensor::{Bool, Device, Tensor};

use super::super::LayerNorm;
use super::{MhaInput, MultiHeadAttention, PositionWiseFeedForward};

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

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::transformer::TransformerEncoderLayer {
        burn::nn::transformer::TransformerEncoderLayer {
            mha: self.mha.as_burn(),
            pwff: self.pwff.as_burn(),
            norm_1: self.norm_1.as_burn(),
            norm_2: self.norm_2.as_burn(),
            dropout: self.dropout.clone(),
            norm_first: self.norm_first,
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

    /// burn's encoder with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::transformer::TransformerEncoder {
        burn::nn::transformer::TransformerEncoder {
            layers: self
                .layers
                .iter()
                .map(TransformerEncoderLayer::as_burn)
                .collect(),
            d_model: self.d_model,
            d_ff: self.d_ff,
            n_heads: self.n_heads,
            n_layers: self.n_layers,
            dropout: self.dropout,
            norm_first: self.norm_first,
            quiet_softmax: self.quiet_softmax,
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
