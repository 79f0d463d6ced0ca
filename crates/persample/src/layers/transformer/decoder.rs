//! TransformerDecoderLayer and TransformerDecoder.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::transformer::{TransformerDecoderAutoregressiveCache, TransformerDecoderConfig};
use burn::tensor::{Bool, Device, Tensor};

use super::super::LayerNorm;
use super::{MhaInput, MultiHeadAttention, PositionWiseFeedForward};

/// The input of [`TransformerDecoder::forward`], as burn's `TransformerDecoderInput` (whose
/// fields burn keeps private): the target and the encoder's memory, each with optional
/// padding and attention masks.
#[derive(Debug, Clone)]
pub struct TransformerDecoderInput {
    target: Tensor<3>,
    target_mask_pad: Option<Tensor<2, Bool>>,
    target_mask_attn: Option<Tensor<3, Bool>>,
    memory: Tensor<3>,
    memory_mask_pad: Option<Tensor<2, Bool>>,
    memory_mask_attn: Option<Tensor<3, Bool>>,
}

impl TransformerDecoderInput {
    /// Target `[B, T, d_model]` and memory `[B, S, d_model]`.
    pub fn new(target: Tensor<3>, memory: Tensor<3>) -> Self {
        Self {
            target,
            target_mask_pad: None,
            target_mask_attn: None,
            memory,
            memory_mask_pad: None,
            memory_mask_attn: None,
        }
    }

    /// Padding mask of the memory `[B, S]` (`true`: padded).
    pub fn memory_mask_pad(mut self, mask: Tensor<2, Bool>) -> Self {
        self.memory_mask_pad = Some(mask);
        self
    }

    /// Attention mask of the memory `[B, T, S]` (`true`: masked).
    pub fn memory_mask_attn(mut self, mask: Tensor<3, Bool>) -> Self {
        self.memory_mask_attn = Some(mask);
        self
    }

    /// Padding mask of the target `[B, T]`.
    pub fn target_mask_pad(mut self, mask: Tensor<2, Bool>) -> Self {
        self.target_mask_pad = Some(mask);
        self
    }

    /// Attention mask of the target `[B, T, T]` (e.g. burn's
    /// `generate_autoregressive_mask`).
    pub fn target_mask_attn(mut self, mask: Tensor<3, Bool>) -> Self {
        self.target_mask_attn = Some(mask);
        self
    }

    /// burn's input with the same tensors and masks.
    pub fn into_burn(self) -> burn::nn::transformer::TransformerDecoderInput {
        let mut input =
            burn::nn::transformer::TransformerDecoderInput::new(self.target, self.memory);
        if let Some(mask) = self.target_mask_pad {
            input = input.target_mask_pad(mask);
        }
        if let Some(mask) = self.target_mask_attn {
            input = input.target_mask_attn(mask);
        }
        if let Some(mask) = self.memory_mask_pad {
            input = input.memory_mask_pad(mask);
        }
        if let Some(mask) = self.memory_mask_attn {
            input = input.memory_mask_attn(mask);
        }
        input
    }
}

/// `burn::nn::transformer::TransformerDecoderLayer` with per-sample statistics: masked
/// self-attention, cross-attention to the memory, the feed-forward block and three
/// LayerNorms, each a drop-in; pre-norm or post-norm, as burn.
#[derive(Module, Debug)]
pub struct TransformerDecoderLayer {
    /// Attention to the memory.
    pub cross_attn: MultiHeadAttention,
    /// Self-attention over the target.
    pub self_attn: MultiHeadAttention,
    /// Feed-forward block.
    pub pwff: PositionWiseFeedForward,
    /// LayerNorm around self-attention (burn's naming).
    pub norm_1: LayerNorm,
    /// LayerNorm around cross-attention.
    pub norm_2: LayerNorm,
    /// LayerNorm around the feed-forward block (before self-attention with `norm_first`).
    pub norm_3: LayerNorm,
    /// Dropout on the residual branches.
    pub dropout: Dropout,
    /// Pre-norm (`true`) or post-norm.
    pub norm_first: bool,
}

impl TransformerDecoderLayer {
    /// One layer of the decoder `config` describes, initialised as burn initialises it.
    pub fn new(config: &TransformerDecoderConfig, device: &Device) -> Self {
        Self::from_burn(
            burn::nn::transformer::TransformerDecoderLayer::new(config, device),
            config.layer_norm_eps,
        )
    }

    /// burn's layer, with the LayerNorms' ε (`TransformerDecoderConfig::layer_norm_eps`, which
    /// burn's LayerNorm does not expose).
    pub fn from_burn(
        layer: burn::nn::transformer::TransformerDecoderLayer,
        layer_norm_eps: f64,
    ) -> Self {
        Self {
            cross_attn: layer.cross_attn.into(),
            self_attn: layer.self_attn.into(),
            pwff: layer.pwff.into(),
            norm_1: LayerNorm::from_burn(layer.norm_1, layer_norm_eps),
            norm_2: LayerNorm::from_burn(layer.norm_2, layer_norm_eps),
            norm_3: LayerNorm::from_burn(layer.norm_3, layer_norm_eps),
            dropout: layer.dropout,
            norm_first: layer.norm_first,
        }
    }

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::transformer::TransformerDecoderLayer {
        burn::nn::transformer::TransformerDecoderLayer {
            cross_attn: self.cross_attn.as_burn(),
            self_attn: self.self_attn.as_burn(),
            pwff: self.pwff.as_burn(),
            norm_1: self.norm_1.as_burn(),
            norm_2: self.norm_2.as_burn(),
            norm_3: self.norm_3.as_burn(),
            dropout: self.dropout.clone(),
            norm_first: self.norm_first,
        }
    }

    /// The layer's forward pass, as burn's: the input with its target replaced by the
    /// layer's output `[B, T, d_model]`.
    pub fn forward(&self, mut input: TransformerDecoderInput) -> TransformerDecoderInput {
        let x = input.target.clone();
        let attended = if self.norm_first {
            self.norm_3.forward(x.clone())
        } else {
            x.clone()
        };
        let mut self_input = MhaInput::self_attn(attended);
        if let Some(mask) = &input.target_mask_pad {
            self_input = self_input.mask_pad(mask.clone());
        }
        if let Some(mask) = &input.target_mask_attn {
            self_input = self_input.mask_attn(mask.clone());
        }
        let mut x = x + self
            .dropout
            .forward(self.self_attn.forward(self_input).context);
        let query = if self.norm_first {
            self.norm_1.forward(x.clone())
        } else {
            x = self.norm_1.forward(x);
            x.clone()
        };
        let mut cross_input = MhaInput::new(query, input.memory.clone(), input.memory.clone());
        if let Some(mask) = &input.memory_mask_pad {
            cross_input = cross_input.mask_pad(mask.clone());
        }
        if let Some(mask) = &input.memory_mask_attn {
            cross_input = cross_input.mask_attn(mask.clone());
        }
        let mut x = x + self
            .dropout
            .forward(self.cross_attn.forward(cross_input).context);
        let fed = if self.norm_first {
            self.norm_2.forward(x.clone())
        } else {
            x = self.norm_2.forward(x);
            x.clone()
        };
        let x = x + self.dropout.forward(self.pwff.forward(fed));
        input.target = if self.norm_first {
            x
        } else {
            self.norm_3.forward(x)
        };
        input
    }
}

/// `burn::nn::transformer::TransformerDecoder` with per-sample statistics: its layers are
/// [`TransformerDecoderLayer`] drop-ins.
///
/// # Cost
///
/// Training: as its layers' drop-ins. Autoregressive inference
/// ([`forward_autoregressive_inference`](Self::forward_autoregressive_inference)) runs burn's
/// decoder with its cache (nothing is recorded at inference): assembling it shares the
/// parameters and allocates only the LayerNorms' initial `γ`, `β` before replacing them.
#[derive(Module, Debug)]
pub struct TransformerDecoder {
    /// The layers.
    pub layers: Vec<TransformerDecoderLayer>,
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

impl TransformerDecoder {
    /// The decoder `config` describes, initialised as burn initialises it.
    pub fn new(config: &TransformerDecoderConfig, device: &Device) -> Self {
        Self::from_burn(config.init(device), config.layer_norm_eps)
    }

    /// burn's decoder, with its LayerNorms' ε (`TransformerDecoderConfig::layer_norm_eps`).
    pub fn from_burn(
        decoder: burn::nn::transformer::TransformerDecoder,
        layer_norm_eps: f64,
    ) -> Self {
        Self {
            layers: decoder
                .layers
                .into_iter()
                .map(|layer| TransformerDecoderLayer::from_burn(layer, layer_norm_eps))
                .collect(),
            d_model: decoder.d_model,
            d_ff: decoder.d_ff,
            n_heads: decoder.n_heads,
            n_layers: decoder.n_layers,
            dropout: decoder.dropout,
            norm_first: decoder.norm_first,
            quiet_softmax: decoder.quiet_softmax,
        }
    }

    /// burn's decoder with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::transformer::TransformerDecoder {
        burn::nn::transformer::TransformerDecoder {
            layers: self
                .layers
                .iter()
                .map(TransformerDecoderLayer::as_burn)
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

    /// Every layer in turn: the decoded target `[B, T, d_model]`.
    pub fn forward(&self, mut input: TransformerDecoderInput) -> Tensor<3> {
        for layer in &self.layers {
            input = layer.forward(input);
        }
        input.target
    }

    /// A new cache for [`forward_autoregressive_inference`](Self::forward_autoregressive_inference).
    pub fn new_autoregressive_cache(&self) -> TransformerDecoderAutoregressiveCache {
        self.as_burn().new_autoregressive_cache()
    }

    /// Autoregressive inference with burn's cache, as burn's
    /// `TransformerDecoder::forward_autoregressive_inference` (burn's decoder runs it with
    /// these parameters).
    pub fn forward_autoregressive_inference(
        &self,
        input: TransformerDecoderInput,
        cache: &mut TransformerDecoderAutoregressiveCache,
    ) -> Tensor<3> {
        self.as_burn()
            .forward_autoregressive_inference(input.into_burn(), cache)
    }
}
