//! The rest of burn-nn on the fast path (issue 25): small models built as burn users build
//! them, each equal to single-sample backward passes for all nine per-sample quantities over
//! three steps, with complete coverage (`fast_path_against_single_sample_passes`).

use crate::common;
use crate::common::Backend;
use crate::per_sample::{fast_path_against_single_sample_passes, on_float_inputs};
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::nn::conv::{
    Conv2dConfig, Conv3dConfig, ConvTranspose1dConfig, ConvTranspose2dConfig, ConvTranspose3dConfig,
};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::persample::{
    BiGru, BiLstm, BiRnn, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
    CrossAttention, DeformConv2d, Embedding, Linear, Rnn, TransformerDecoder,
    TransformerDecoderInput, TransformerEncoder, TransformerEncoderInput,
};

/// Tokens `[samples, length]` of step `step` (a fixed pattern over 9 tokens).
fn tokens(
    device: &Device,
    batch: usize,
    length: usize,
    step: usize,
    samples: std::ops::Range<usize>,
) -> Tensor<2, Int> {
    let all: Vec<i64> = (0..batch * length)
        .map(|i| ((i * 4 + step * 5 + i / length) % 9) as i64)
        .collect();
    let picked = &all[samples.start * length..samples.end * length];
    Tensor::from_data(
        TensorData::new(picked.to_vec(), [samples.len(), length]),
        device,
    )
}

/// A bidirectional tagger: token Embedding, BiLstm (batch-first), BiGru (sequence-first,
/// `reset_after` off), BiRnn (ReLU, clipped), Rnn (reversed), mean over time, Linear head.
#[derive(Module, Debug)]
struct Tagger {
    embedding: Embedding,
    bilstm: BiLstm,
    bigru: BiGru,
    birnn: BiRnn,
    rnn: Rnn,
    head: Linear,
}

impl Tagger {
    fn new(device: &Device) -> Self {
        use burn::nn::activation::ActivationConfig;
        use burn::nn::{BiGruConfig, BiLstmConfig, BiRnnConfig, EmbeddingConfig, RnnConfig};
        Self {
            embedding: EmbeddingConfig::new(9, 4).init(device).into(),
            bilstm: BiLstm::new(&BiLstmConfig::new(4, 3, true).with_clip(Some(2.0)), device),
            bigru: BiGru::new(
                &BiGruConfig::new(6, 3, true)
                    .with_batch_first(false)
                    .with_reset_after(false),
                device,
            ),
            birnn: BiRnn::new(
                &BiRnnConfig::new(6, 2, true)
                    .with_clip(Some(1.5))
                    .with_hidden_activation(ActivationConfig::Relu),
                device,
            ),
            rnn: Rnn::new(&RnnConfig::new(4, 3, false).with_reverse(true), device),
            head: LinearConfig::new(3, 3).init(device).into(),
        }
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let (h, _) = self.bilstm.forward(self.embedding.forward(tokens), None);
        let (h, _) = self.bigru.forward(h.swap_dims(0, 1), None);
        let (h, _) = self.birnn.forward(h.swap_dims(0, 1), None);
        let (h, _) = self.rnn.forward(h, None);
        self.head.forward(h.mean_dim(1).squeeze_dim::<2>(1))
    }
}

/// Rnn and the bidirectional BiLstm, BiGru and BiRnn on the fast path.
fn bidirectional_tagger_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, length) = (5, 4);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        Tagger::new(&device),
        batch,
        move |model: &Tagger, step, samples| {
            model.forward(tokens(&dev, batch, length, step, samples))
        },
    );
}

/// A 3-d convolution classifier: Conv3d (`Same` padding), Conv3d (stride, dilation, explicit
/// padding), Conv3d with two groups, ConvTranspose3d back up, Linear head. Inputs
/// `[B, 2, 4, 5, 5]`.
#[derive(Module, Debug)]
struct VolumeNet {
    conv0: Conv3d,
    conv1: Conv3d,
    conv2: Conv3d,
    up: ConvTranspose3d,
    head: Linear,
}

impl VolumeNet {
    fn new(device: &Device) -> Self {
        Self {
            // [2, 4, 5, 5] → [2, 4, 5, 5]
            conv0: Conv3d::new(
                &Conv3dConfig::new([2, 2], [3, 3, 3]).with_padding(burn::nn::PaddingConfig3d::Same),
                device,
            ),
            // [2, 4, 5, 5] → [4, 3, 3, 3]
            conv1: Conv3d::new(
                &Conv3dConfig::new([2, 4], [2, 3, 3])
                    .with_stride([1, 2, 1])
                    .with_dilation([1, 1, 2])
                    .with_padding(burn::nn::PaddingConfig3d::Explicit(0, 1, 1)),
                device,
            ),
            // → [6, 3, 2, 2]
            conv2: Conv3d::new(&Conv3dConfig::new([4, 6], [1, 2, 2]).with_groups(2), device),
            // → [2, 3, 3, 5]: stride, padding, output padding, dilation, groups
            up: ConvTranspose3d::new(
                &ConvTranspose3dConfig::new([6, 2], [1, 2, 2])
                    .with_stride([1, 2, 2])
                    .with_padding([0, 1, 0])
                    .with_padding_out([0, 1, 0])
                    .with_dilation([1, 1, 2])
                    .with_groups(2),
                device,
            ),
            head: LinearConfig::new(90, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<5>) -> Tensor<2> {
        let h = relu(self.conv0.forward(x));
        let h = relu(self.conv1.forward(h));
        let h = relu(self.conv2.forward(h));
        let h = self.up.forward(h);
        let b = h.dims()[0];
        self.head.forward(h.reshape([b, 90]))
    }
}

/// Conv3d and ConvTranspose3d on the fast path.
fn volume_model_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    on_float_inputs(
        backend,
        VolumeNet::new(&device),
        [5, 2, 4, 5, 5],
        VolumeNet::forward,
    );
}

/// A transposed-convolution autoencoder: Conv2d down, ConvTranspose2d up twice (stride,
/// padding, output padding, groups; dilation), ConvTranspose1d over the flattened rows
/// (output padding beyond the padding), Linear head on the reconstruction. Inputs
/// `[B, 2, 6, 6]`.
#[derive(Module, Debug)]
struct Autoencoder {
    down: Conv2d,
    up1: ConvTranspose2d,
    up2: ConvTranspose2d,
    line: ConvTranspose1d,
    head: Linear,
}

impl Autoencoder {
    fn new(device: &Device) -> Self {
        Self {
            // [2, 6, 6] → [4, 3, 3]
            down: Conv2dConfig::new([2, 4], [3, 3])
                .with_stride([2, 2])
                .with_padding(burn::nn::PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
                .into(),
            // → [4, 6, 4]
            up1: ConvTranspose2d::new(
                &ConvTranspose2dConfig::new([4, 4], [3, 2])
                    .with_stride([2, 1])
                    .with_padding([1, 0])
                    .with_padding_out([1, 0])
                    .with_groups(2),
                device,
            ),
            // → [2, 8, 6]
            up2: ConvTranspose2d::new(
                &ConvTranspose2dConfig::new([4, 2], [2, 2]).with_dilation([2, 2]),
                device,
            ),
            // [2, 48] → [1, 98]
            line: ConvTranspose1d::new(
                &ConvTranspose1dConfig::new([2, 1], 3)
                    .with_stride(2)
                    .with_padding_out(1),
                device,
            ),
            head: LinearConfig::new(98, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = relu(self.down.forward(x));
        let h = relu(self.up1.forward(h));
        let h = self.up2.forward(h);
        let b = h.dims()[0];
        let h = self.line.forward(h.reshape([b, 2, 48]));
        self.head.forward(h.reshape([b, 98]))
    }
}

/// ConvTranspose1d and ConvTranspose2d on the fast path.
fn autoencoder_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    on_float_inputs(
        backend,
        Autoencoder::new(&device),
        [5, 2, 6, 6],
        Autoencoder::forward,
    );
}

/// An encoder–decoder translation toy: source and target token Embeddings, a post-norm
/// TransformerEncoder with a source padding mask, a pre-norm TransformerDecoder with a causal
/// target mask and the memory's padding mask, a CrossAttention block (grouped key/value
/// heads, a context of another width) from the decoded target to the source embeddings,
/// Linear head on the mean over the target.
#[derive(Module, Debug)]
struct Translator {
    source: Embedding,
    target: Embedding,
    encoder: TransformerEncoder,
    decoder: TransformerDecoder,
    context: Embedding,
    cross: CrossAttention,
    head: Linear,
}

impl Translator {
    fn new(device: &Device) -> Self {
        use burn::nn::EmbeddingConfig;
        use burn::nn::attention::CrossAttentionConfig;
        use burn::nn::transformer::{TransformerDecoderConfig, TransformerEncoderConfig};
        Self {
            source: EmbeddingConfig::new(9, 8).init(device).into(),
            target: EmbeddingConfig::new(9, 8).init(device).into(),
            encoder: TransformerEncoder::new(
                &TransformerEncoderConfig::new(8, 12, 2, 1).with_dropout(0.0),
                device,
            ),
            decoder: TransformerDecoder::new(
                &TransformerDecoderConfig::new(8, 12, 2, 2)
                    .with_dropout(0.0)
                    .with_norm_first(true),
                device,
            ),
            context: EmbeddingConfig::new(9, 6).init(device).into(),
            cross: CrossAttention::new(
                &CrossAttentionConfig::new(8, 6, 4, 2, 3).with_dropout(0.0),
                device,
            ),
            head: LinearConfig::new(8, 3).init(device).into(),
        }
    }

    /// Source tokens `[B, S]` (token 0 is padding) and target tokens `[B, T]`.
    fn forward(&self, source: Tensor<2, Int>, target: Tensor<2, Int>) -> Tensor<2> {
        let [batch, length] = target.dims();
        let pad = source.clone().equal_elem(0);
        let memory = self.encoder.forward(
            TransformerEncoderInput::new(self.source.forward(source.clone())).mask_pad(pad.clone()),
        );
        let causal =
            burn::nn::attention::generate_autoregressive_mask(batch, length, &memory.device());
        let decoded = self.decoder.forward(
            TransformerDecoderInput::new(self.target.forward(target), memory)
                .target_mask_attn(causal)
                .memory_mask_pad(pad.clone()),
        );
        let attended = self
            .cross
            .forward(decoded.clone(), self.context.forward(source), Some(pad));
        let h = decoded + attended;
        self.head.forward(h.mean_dim(1).squeeze_dim::<2>(1))
    }
}

/// TransformerDecoder (its layers, masks) and CrossAttention on the fast path.
fn encoder_decoder_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, source_length, target_length) = (5, 5, 4);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        Translator::new(&device),
        batch,
        move |model: &Translator, step, samples| {
            // Source tokens 1..=8; samples 1 and 3 end in one and two padding tokens (0).
            let source: Vec<i64> = (0..batch * source_length)
                .map(|i| {
                    let (n, t) = (i / source_length, i % source_length);
                    let padded = match n % 4 {
                        1 => t + 1 >= source_length,
                        3 => t + 2 >= source_length,
                        _ => false,
                    };
                    if padded {
                        0
                    } else {
                        (1 + (i * 3 + step) % 8) as i64
                    }
                })
                .collect();
            let picked = &source[samples.start * source_length..samples.end * source_length];
            let source = Tensor::<2, Int>::from_data(
                TensorData::new(picked.to_vec(), [samples.len(), source_length]),
                &dev,
            );
            model.forward(source, tokens(&dev, batch, target_length, step, samples))
        },
    );
}

/// A deformable convolution whose offsets and mask come from two Conv2d of the input (as in
/// deformable ConvNets), with two weight groups and two offset groups, Linear head. Inputs
/// `[B, 4, 5, 5]`.
#[derive(Module, Debug)]
struct DeformNet {
    offsets: Conv2d,
    mask: Conv2d,
    deform: DeformConv2d,
    head: Linear,
}

impl DeformNet {
    fn new(device: &Device) -> Self {
        use burn::nn::PaddingConfig2d;
        use burn::nn::conv::DeformConv2dConfig;
        let same = |channels: [usize; 2]| -> Conv2d {
            Conv2dConfig::new(channels, [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
                .into()
        };
        Self {
            // 2 offset groups · 9 taps · (dy, dx)
            offsets: same([4, 36]),
            mask: same([4, 18]),
            deform: DeformNet::deform(device, DeformConv2dConfig::new([4, 6], [3, 3])),
            head: LinearConfig::new(150, 3).init(device).into(),
        }
    }

    fn deform(device: &Device, config: burn::nn::conv::DeformConv2dConfig) -> DeformConv2d {
        DeformConv2d::new(
            &config
                .with_padding(burn::nn::PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_weight_groups(2)
                .with_offset_groups(2),
            device,
        )
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let offsets = self.offsets.forward(x.clone());
        let mask = burn::tensor::activation::sigmoid(self.mask.forward(x.clone()));
        let h = relu(self.deform.forward(x, offsets, Some(mask)));
        let b = h.dims()[0];
        self.head.forward(h.reshape([b, 150]))
    }
}

/// DeformConv2d on the fast path: its deformed unfolding by an identity kernel.
fn deformable_model_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    on_float_inputs(
        backend,
        DeformNet::new(&device),
        [5, 4, 5, 5],
        DeformNet::forward,
    );
}

/// Random transposed-convolution settings: a ConvTranspose2d and a ConvTranspose1d with
/// kernel, stride, dilation, padding, output padding and groups drawn per seed.
#[derive(Module, Debug)]
struct RandomTransposedNet {
    up2d: ConvTranspose2d,
    up1d: ConvTranspose1d,
    head: Linear,
    /// `[c, l]` of the ConvTranspose2d output, reshaped for the ConvTranspose1d.
    flat: [usize; 2],
    features: usize,
}

impl RandomTransposedNet {
    /// The settings of `seed` for inputs `[B, 4, 3, 4]`, and a description.
    fn new(device: &Device, seed: u64) -> (Self, String) {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(3);
        let mut draw = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        };
        // Padding at most half the uncropped extent, output padding below stride or dilation.
        fn settings(draw: &mut impl FnMut(usize) -> usize, input: usize) -> [usize; 5] {
            let (kernel, stride, dilation) = (1 + draw(3), 1 + draw(3), 1 + draw(2));
            let extent = (input - 1) * stride + dilation * (kernel - 1);
            let padding = draw((extent / 2).min(2) + 1);
            let padding_out = draw(stride.max(dilation));
            [kernel, stride, dilation, padding, padding_out]
        }
        let (h, w) = (settings(&mut draw, 3), settings(&mut draw, 4));
        let groups2 = [1, 2, 4][draw(3)];
        let up2d = ConvTranspose2dConfig::new([4, 4], [h[0], w[0]])
            .with_stride([h[1], w[1]])
            .with_dilation([h[2], w[2]])
            .with_padding([h[3], w[3]])
            .with_padding_out([h[4], w[4]])
            .with_groups(groups2)
            .init(device);
        let [c, oh, ow] = {
            let [_, c, oh, ow] = up2d.forward(Tensor::zeros([1, 4, 3, 4], device)).dims();
            [c, oh, ow]
        };
        let l = settings(&mut draw, oh * ow);
        let groups1 = [1, 2][draw(2)];
        let up1d = ConvTranspose1dConfig::new([c, 2], l[0])
            .with_stride(l[1])
            .with_dilation(l[2])
            .with_padding(l[3])
            .with_padding_out(l[4])
            .with_groups(groups1)
            .init(device);
        let features = up1d
            .forward(Tensor::zeros([1, c, oh * ow], device))
            .dims()
            .iter()
            .product::<usize>();
        let description = format!(
            "seed {seed}: ConvTranspose2d [kernel, stride, dilation, padding, output padding] \
             {h:?} × {w:?} groups {groups2}; ConvTranspose1d {l:?} groups {groups1}"
        );
        let net = Self {
            up2d: up2d.into(),
            up1d: up1d.into(),
            head: LinearConfig::new(features, 3).init(device).into(),
            flat: [c, oh * ow],
            features,
        };
        (net, description)
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = self
            .up2d
            .forward(x)
            .tanh()
            .reshape([b, self.flat[0], self.flat[1]]);
        let h = self.up1d.forward(h).tanh();
        self.head.forward(h.reshape([b, self.features]))
    }
}

/// Eight random transposed-convolution settings, each on the fast path equal to
/// single-sample backward passes.
fn random_transposed_settings_equal_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    for seed in 0..8 {
        let (model, description) = RandomTransposedNet::new(&device, seed);
        eprintln!("{description}");
        on_float_inputs(backend, model, [4, 4, 3, 4], RandomTransposedNet::forward);
    }
}

on_every_backend!(
    random_transposed_settings_equal_single_sample_passes,
    deformable_model_equals_single_sample_passes,
    encoder_decoder_equals_single_sample_passes,
    bidirectional_tagger_equals_single_sample_passes,
    volume_model_equals_single_sample_passes,
    autoencoder_equals_single_sample_passes,
);
