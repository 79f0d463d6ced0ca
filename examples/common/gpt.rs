//! A decoder-only GPT from the drop-ins, shared by the language-model examples: token and
//! position embeddings, causal pre-norm transformer layers, a vocabulary head.

use burn::module::Module;
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::transformer::TransformerEncoderConfig;
use burn::nn::{EmbeddingConfig, LinearConfig};
use burn::tensor::{Device, Int, Tensor};
use burn_cockpit::persample::{Embedding, Linear, TransformerEncoder, TransformerEncoderInput};

/// The shape of a [`Gpt`].
pub struct GptShape {
    /// Tokens in the vocabulary.
    pub vocabulary: usize,
    /// The longest sequence (positions embedded).
    pub length: usize,
    /// The model width.
    pub d: usize,
    /// The feed-forward width.
    pub hidden: usize,
    /// Attention heads (dividing `d`).
    pub heads: usize,
    /// Transformer layers.
    pub layers: usize,
}

/// Token and position embeddings, causal pre-norm transformer layers, a vocabulary head.
#[derive(Module, Debug)]
pub struct Gpt {
    tokens: Embedding,
    positions: Embedding,
    blocks: TransformerEncoder,
    /// The vocabulary head.
    pub head: Linear,
}

impl Gpt {
    /// A freshly initialised GPT of `shape` on `device` (dropout off).
    pub fn new(shape: &GptShape, device: &Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(shape.vocabulary, shape.d)
                .init(device)
                .into(),
            positions: EmbeddingConfig::new(shape.length, shape.d)
                .init(device)
                .into(),
            blocks: TransformerEncoder::new(
                &TransformerEncoderConfig::new(shape.d, shape.hidden, shape.heads, shape.layers)
                    .with_norm_first(true)
                    .with_dropout(0.0),
                device,
            ),
            head: LinearConfig::new(shape.d, shape.vocabulary)
                .init(device)
                .into(),
        }
    }

    /// `[B, T]` tokens → `[B, T, V]` next-token logits.
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [batch, length] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..length as i64, &device)
            .reshape([1, length])
            .repeat_dim(0, batch);
        let x = self.tokens.forward(tokens) + self.positions.forward(positions);
        let causal = generate_autoregressive_mask(batch, length, &device);
        let input = TransformerEncoderInput::new(x).mask_attn(causal);
        self.head.forward(self.blocks.forward(input))
    }
}
