//! Two architectures no one here designed, written with the structure of burn's own examples
//! and only the layer types swapped for `burn_cockpit::persample` drop-ins:
//!
//! - [`GuideCnn`]: the burn book's guide model (two Conv2d, adaptive average pooling,
//!   dropout, two Linear, ReLU);
//! - [`TextClassifier`]: burn's text-classification example (token and position Embeddings
//!   averaged, a pre-norm TransformerEncoder with quiet softmax under a padding mask, a Linear
//!   on every position, the first position's output as class scores).
//!
//! And two of the layers added later, in the shapes burn users build them:
//!
//! - [`ConvAutoencoder`]: a convolutional autoencoder on 28×28 images (two strided Conv2d
//!   down, two ConvTranspose2d back up) whose reconstruction feeds a small classifier head;
//! - [`Translator`]: an encoder–decoder transformer (TransformerEncoder over the source,
//!   TransformerDecoder over the target with a causal mask and the source's padding mask),
//!   classifying the pair from the decoded target's mean.
//!
//! And the Cockpit paper's run-time problem:
//!
//! - [`Cifar3c3d`]: DeepOBS cifar10_3c3d (conv 3→64 k5 valid, max-pool 3 stride 2; conv
//!   64→96 k3 valid, max-pool; conv 96→128 k3 same, max-pool; Linear 1152→512→256→10; ReLU)
//!   on `[B, 3, 32, 32]` images (the pools pad one on each side where TensorFlow's "same"
//!   pads one on the right and bottom: the same shapes and cost).
//!
//! Used by the `architectures` and `overhead` examples (training and benchmark) and the
//! per-sample tests.

#![allow(dead_code)] // each user takes what it needs

use burn::module::Module;
use burn::nn::conv::{Conv2dConfig, ConvTranspose2dConfig};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::transformer::{TransformerDecoderConfig, TransformerEncoderConfig};
use burn::nn::{Dropout, DropoutConfig, EmbeddingConfig, LinearConfig, PaddingConfig2d, Relu};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor};
use burn_cockpit::persample::{
    Conv2d, ConvTranspose2d, Embedding, Linear, TransformerDecoder, TransformerDecoderInput,
    TransformerEncoder, TransformerEncoderInput,
};

/// The burn book guide's model.
#[derive(Module, Debug)]
pub struct GuideCnn {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: AdaptiveAvgPool2d,
    dropout: Dropout,
    linear1: Linear,
    linear2: Linear,
    activation: Relu,
}

impl GuideCnn {
    /// The guide's model for `num_classes` classes, hidden width `hidden_size` and dropout
    /// probability `dropout` (the guide: 10, 512, 0.5).
    pub fn new(device: &Device, num_classes: usize, hidden_size: usize, dropout: f64) -> Self {
        Self {
            conv1: Conv2dConfig::new([1, 8], [3, 3]).init(device).into(),
            conv2: Conv2dConfig::new([8, 16], [3, 3]).init(device).into(),
            pool: AdaptiveAvgPool2dConfig::new([8, 8]).init(),
            dropout: DropoutConfig::new(dropout).init(),
            linear1: LinearConfig::new(16 * 8 * 8, hidden_size)
                .init(device)
                .into(),
            linear2: LinearConfig::new(hidden_size, num_classes)
                .init(device)
                .into(),
            activation: Relu::new(),
        }
    }

    /// Class scores `[B, num_classes]` of images `[B, H, W]`.
    pub fn forward(&self, images: Tensor<3>) -> Tensor<2> {
        let [batch, height, width] = images.dims();
        let x = images.reshape([batch, 1, height, width]);
        let x = self.dropout.forward(self.conv1.forward(x));
        let x = self.dropout.forward(self.conv2.forward(x));
        let x = self.pool.forward(self.activation.forward(x));
        let x = self.linear1.forward(x.reshape([batch, 16 * 8 * 8]));
        let x = self.activation.forward(self.dropout.forward(x));
        self.linear2.forward(x)
    }

    /// The same model with another dropout probability (0 for comparisons with single-sample
    /// passes, which would draw other dropout masks).
    pub fn with_dropout(mut self, dropout: f64) -> Self {
        self.dropout = DropoutConfig::new(dropout).init();
        self
    }
}

/// DeepOBS cifar10_3c3d, the Cockpit paper's run-time benchmark problem.
#[derive(Module, Debug)]
pub struct Cifar3c3d {
    conv1: Conv2d,
    conv2: Conv2d,
    conv3: Conv2d,
    pool: MaxPool2d,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl Cifar3c3d {
    /// The model with burn's default initialisation.
    pub fn new(device: &Device) -> Self {
        let conv = |c_in, c_out, k, pad| {
            Conv2dConfig::new([c_in, c_out], [k, k])
                .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
                .init(device)
                .into()
        };
        let linear = |i, o| LinearConfig::new(i, o).init(device).into();
        Self {
            conv1: conv(3, 64, 5, 0),
            conv2: conv(64, 96, 3, 0),
            conv3: conv(96, 128, 3, 1),
            pool: MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(),
            fc1: linear(1152, 512),
            fc2: linear(512, 256),
            fc3: linear(256, 10),
        }
    }

    /// Class scores `[B, 10]` of images `[B, 3, 32, 32]`.
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let b = images.dims()[0];
        let h = self.pool.forward(relu(self.conv1.forward(images)));
        let h = self.pool.forward(relu(self.conv2.forward(h)));
        let h = self.pool.forward(relu(self.conv3.forward(h)));
        let h = relu(self.fc1.forward(h.reshape([b, 1152])));
        self.fc3.forward(relu(self.fc2.forward(h)))
    }
}

/// Token 0 pads.
pub const PAD: i64 = 0;

/// burn's text-classification example model.
#[derive(Module, Debug)]
pub struct TextClassifier {
    /// The encoder.
    pub transformer: TransformerEncoder,
    /// Token embedding.
    pub embedding_token: Embedding,
    /// Position embedding.
    pub embedding_pos: Embedding,
    /// The head, on every position.
    pub output: Linear,
    n_classes: usize,
}

impl TextClassifier {
    /// A classifier into `n_classes` for sequences of at most `max_length` tokens from a
    /// vocabulary of `vocabulary`, with `n_layers` pre-norm layers of width `d_model` (feed-forward
    /// `4·d_model`), `n_heads` heads and dropout `dropout`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        device: &Device,
        vocabulary: usize,
        max_length: usize,
        n_classes: usize,
        d_model: usize,
        n_layers: usize,
        n_heads: usize,
        dropout: f64,
    ) -> Self {
        let config = TransformerEncoderConfig::new(d_model, 4 * d_model, n_heads, n_layers)
            .with_norm_first(true)
            .with_quiet_softmax(true)
            .with_dropout(dropout);
        Self {
            transformer: TransformerEncoder::new(&config, device),
            embedding_token: EmbeddingConfig::new(vocabulary, d_model)
                .init(device)
                .into(),
            embedding_pos: EmbeddingConfig::new(max_length, d_model)
                .init(device)
                .into(),
            output: LinearConfig::new(d_model, n_classes).init(device).into(),
            n_classes,
        }
    }

    /// Class scores `[B, n_classes]` of tokens `[B, T]` (token [`PAD`] masked).
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let [batch, length] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..length as i64, &device)
            .reshape([1, length])
            .repeat_dim(0, batch);
        let mask_pad = tokens.clone().equal_elem(PAD);
        let embedding =
            (self.embedding_pos.forward(positions) + self.embedding_token.forward(tokens)) / 2;
        let encoded = self
            .transformer
            .forward(TransformerEncoderInput::new(embedding).mask_pad(mask_pad));
        self.output
            .forward(encoded)
            .slice([0..batch, 0..1])
            .reshape([batch, self.n_classes])
    }
}

/// A convolutional autoencoder on `[B, 28, 28]` images: Conv2d 1→16 and 16→32 (3×3, stride
/// 2, padding 1) down to 7×7, ConvTranspose2d 32→16 and 16→8 (3×3, stride 2, padding 1,
/// output padding 1) back to 28×28, ReLU between; the reconstruction is pooled to 4×4 and
/// classified by a Linear head.
#[derive(Module, Debug)]
pub struct ConvAutoencoder {
    down1: Conv2d,
    down2: Conv2d,
    up1: ConvTranspose2d,
    up2: ConvTranspose2d,
    pool: AdaptiveAvgPool2d,
    head: Linear,
    activation: Relu,
}

impl ConvAutoencoder {
    /// The autoencoder with a head of `num_classes`.
    pub fn new(device: &Device, num_classes: usize) -> Self {
        let down = |channels: [usize; 2]| -> Conv2d {
            Conv2dConfig::new(channels, [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
                .into()
        };
        let up = |channels: [usize; 2]| -> ConvTranspose2d {
            ConvTranspose2d::new(
                &ConvTranspose2dConfig::new(channels, [3, 3])
                    .with_stride([2, 2])
                    .with_padding([1, 1])
                    .with_padding_out([1, 1]),
                device,
            )
        };
        Self {
            down1: down([1, 16]),
            down2: down([16, 32]),
            up1: up([32, 16]),
            up2: up([16, 8]),
            pool: AdaptiveAvgPool2dConfig::new([4, 4]).init(),
            head: LinearConfig::new(8 * 4 * 4, num_classes)
                .init(device)
                .into(),
            activation: Relu::new(),
        }
    }

    /// Class scores `[B, num_classes]` of images `[B, 28, 28]`.
    pub fn forward(&self, images: Tensor<3>) -> Tensor<2> {
        let [batch, height, width] = images.dims();
        let x = images.reshape([batch, 1, height, width]);
        let x = self.activation.forward(self.down1.forward(x));
        let x = self.activation.forward(self.down2.forward(x));
        let x = self.activation.forward(self.up1.forward(x));
        let x = self.activation.forward(self.up2.forward(x));
        let x = self.pool.forward(x);
        self.head.forward(x.reshape([batch, 8 * 4 * 4]))
    }
}

/// An encoder–decoder transformer: source and target token Embeddings plus position
/// Embeddings, a post-norm TransformerEncoder over the source (its padding masked), a
/// TransformerDecoder over the target (causal mask, the source's padding mask on the memory),
/// a Linear head on the decoded target's mean.
#[derive(Module, Debug)]
pub struct Translator {
    /// The encoder.
    pub encoder: TransformerEncoder,
    /// The decoder.
    pub decoder: TransformerDecoder,
    source: Embedding,
    target: Embedding,
    positions: Embedding,
    head: Linear,
}

impl Translator {
    /// A translator for sequences of at most `max_length` tokens from a vocabulary of
    /// `vocabulary`, `n_layers` encoder and decoder layers of width `d_model` (feed-forward
    /// `4·d_model`), `n_heads` heads, dropout `dropout`, a head of `num_classes`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        device: &Device,
        vocabulary: usize,
        max_length: usize,
        num_classes: usize,
        d_model: usize,
        n_layers: usize,
        n_heads: usize,
        dropout: f64,
    ) -> Self {
        Self {
            encoder: TransformerEncoder::new(
                &TransformerEncoderConfig::new(d_model, 4 * d_model, n_heads, n_layers)
                    .with_dropout(dropout),
                device,
            ),
            decoder: TransformerDecoder::new(
                &TransformerDecoderConfig::new(d_model, 4 * d_model, n_heads, n_layers)
                    .with_dropout(dropout),
                device,
            ),
            source: EmbeddingConfig::new(vocabulary, d_model)
                .init(device)
                .into(),
            target: EmbeddingConfig::new(vocabulary, d_model)
                .init(device)
                .into(),
            positions: EmbeddingConfig::new(max_length, d_model)
                .init(device)
                .into(),
            head: LinearConfig::new(d_model, num_classes).init(device).into(),
        }
    }

    /// Class scores `[B, num_classes]` of source tokens `[B, S]` (token [`PAD`] masked) and
    /// target tokens `[B, T]`.
    pub fn forward(&self, source: Tensor<2, Int>, target: Tensor<2, Int>) -> Tensor<2> {
        let [batch, source_length] = source.dims();
        let [_, target_length] = target.dims();
        let device = source.device();
        let positions = |length: usize| {
            Tensor::<1, Int>::arange(0..length as i64, &device)
                .reshape([1, length])
                .repeat_dim(0, batch)
        };
        let pad = source.clone().equal_elem(PAD);
        let memory = self.encoder.forward(
            TransformerEncoderInput::new(
                self.source.forward(source) + self.positions.forward(positions(source_length)),
            )
            .mask_pad(pad.clone()),
        );
        let causal =
            burn::nn::attention::generate_autoregressive_mask(batch, target_length, &device);
        let decoded = self.decoder.forward(
            TransformerDecoderInput::new(
                self.target.forward(target) + self.positions.forward(positions(target_length)),
                memory,
            )
            .target_mask_attn(causal)
            .memory_mask_pad(pad),
        );
        self.head.forward(decoded.mean_dim(1).squeeze_dim::<2>(1))
    }
}
