//! Instrumented drop-ins for burn-nn's attention and transformer blocks, rebuilt from the
//! per-sample [`Linear`](super::Linear) and [`LayerNorm`](super::LayerNorm):
//! `MultiHeadAttention`, `CrossAttention`, `PositionWiseFeedForward`, the encoder
//! (`TransformerEncoderLayer`, `TransformerEncoder`) and the decoder
//! (`TransformerDecoderLayer`, `TransformerDecoder`). One file per block.
//!
//! burn has no hooks and its composite modules hold concrete `burn::nn::Linear` fields, so the
//! instrumented block is the block itself, written again with the drop-ins: same config, field
//! names (hence dotted parameter names and record layout) and forward pass. Attention mixes
//! positions within a sample, never samples, so every parameter's per-sample gradient is
//! exactly what its Linear or LayerNorm records.

mod cross_attention;
mod decoder;
mod encoder;
mod mha;
mod pwff;

pub use cross_attention::CrossAttention;
pub use decoder::{TransformerDecoder, TransformerDecoderInput, TransformerDecoderLayer};
pub use encoder::{TransformerEncoder, TransformerEncoderInput, TransformerEncoderLayer};
pub use mha::{MhaInput, MultiHeadAttention};
pub use pwff::PositionWiseFeedForward;

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::attention::MultiHeadAttentionConfig;
    use burn::nn::transformer::TransformerEncoderInput as BurnInput;
    use burn::nn::transformer::{PositionWiseFeedForwardConfig, TransformerEncoderConfig};
    use burn::tensor::{Bool, Device, Distribution, Tensor, TensorData};

    use super::*;
    use crate::Snapshot;
    use crate::testing::{close, saved, values};

    fn config(norm_first: bool) -> TransformerEncoderConfig {
        TransformerEncoderConfig::new(8, 12, 2, 2)
            .with_dropout(0.0)
            .with_norm_first(norm_first)
            .with_layer_norm_eps(1e-3)
    }

    /// A padding mask over 3 sequences of 5 positions: the last position of the second and
    /// third is padding.
    fn padding_mask(device: &Device) -> Tensor<2, Bool> {
        Tensor::from_data(
            TensorData::new(
                (0..15).map(|i| i % 5 == 4 && i >= 5).collect::<Vec<_>>(),
                [3, 5],
            ),
            device,
        )
    }

    /// The drop-in encoder computes what burn's does — post-norm and pre-norm, with a padding
    /// mask, outside a recording and inside one — and its attention weights are burn's.
    #[test]
    fn forward_passes_equal_burns() {
        let device = Device::default().autodiff();
        let x = Tensor::<3>::random([3, 5, 8], Distribution::Normal(0.0, 1.0), &device);
        let pad = padding_mask(&device);
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

    /// The attention scale `1/√d_k` is exact in the backward pass as in the forward: at
    /// `d_k = 3` in float64 the query weight's gradient equals a central difference of the
    /// forward pass along it to 1e-9 (burn's `div_scalar` backward takes the reciprocal in
    /// float32, 3e-8 off here).
    #[test]
    fn attention_scale_is_exact_in_the_backward_pass() {
        use burn::module::Param;
        use burn::tensor::DType;

        // flex: float64 (lavapipe computes float64 as NaN).
        let device = Device::flex().autodiff();
        let f64s = |t: Tensor<2>| t.cast(DType::F64).detach().require_grad();
        let mut mha = MultiHeadAttention::from(
            MultiHeadAttentionConfig::new(3, 1)
                .with_dropout(0.0)
                .init(&device),
        );
        assert_eq!(mha.d_k, 3);
        for linear in [
            &mut mha.query,
            &mut mha.key,
            &mut mha.value,
            &mut mha.output,
        ] {
            linear.weight = Param::from_tensor(f64s(linear.weight.val()));
            linear.bias = None;
        }
        let x = Tensor::<3>::random([2, 4, 3], Distribution::Normal(0.0, 1.0), &device)
            .cast(DType::F64);
        let loss = |m: &MultiHeadAttention| {
            let context = m.forward(MhaInput::self_attn(x.clone())).context;
            (context.clone() * context.sin()).sum()
        };
        let grads = loss(&mha).backward();
        let g = mha.query.weight.val().grad(&grads).expect("a gradient");
        let read = |t: Tensor<1>| {
            t.into_data()
                .convert::<f64>()
                .try_into_vec::<f64>()
                .unwrap_or_default()[0]
        };
        let norm = read(g.clone().square().sum()).sqrt();
        // The loss along the unit direction of the gradient: its slope at 0 is ‖g‖.
        let along = |h: f64| {
            let mut moved = mha.clone();
            let step = g.clone().mul_scalar(h / norm);
            moved.query.weight = Param::from_tensor((mha.query.weight.val() + step).detach());
            read(loss(&moved))
        };
        // Richardson's extrapolation of central differences: error O(h⁴) and rounding.
        let central = |h: f64| (along(h) - along(-h)) / (2.0 * h);
        let h = 1e-3;
        let slope = (4.0 * central(h / 2.0) - central(h)) / 3.0;
        let relative = (slope - norm).abs() / norm;
        assert!(
            relative < 1e-9,
            "central difference {slope}, gradient norm {norm}: {relative:e} apart"
        );
    }

    /// The decoder computes what burn's does — post-norm and pre-norm, with a causal target
    /// mask and a memory padding mask, outside a recording and inside one; its autoregressive
    /// inference with burn's cache is burn's; `as_burn` gives burn's decoder back.
    #[test]
    fn decoder_and_cross_attention_equal_burns() {
        use crate::{CrossAttention, TransformerDecoder, TransformerDecoderInput};
        use burn::nn::attention::{
            CrossAttentionCache, CrossAttentionConfig, generate_autoregressive_mask,
        };
        use burn::nn::transformer::{
            TransformerDecoderConfig, TransformerDecoderInput as BurnDecoderInput,
        };
        let device = Device::default().autodiff();
        let target = Tensor::<3>::random([3, 4, 8], Distribution::Normal(0.0, 1.0), &device);
        let memory = Tensor::<3>::random([3, 5, 8], Distribution::Normal(0.0, 1.0), &device);
        let causal = generate_autoregressive_mask(3, 4, &device);
        let pad = padding_mask(&device);
        for norm_first in [false, true] {
            let config = TransformerDecoderConfig::new(8, 12, 2, 2)
                .with_dropout(0.0)
                .with_norm_first(norm_first)
                .with_layer_norm_eps(1e-3);
            let burn_decoder = config.init(&device);
            let ours = TransformerDecoder::from_burn(burn_decoder.clone(), 1e-3);
            let what = format!("decoder (norm_first {norm_first})");
            for recording in [false, true] {
                let recorder = recording.then(crate::Recorder::start);
                close(
                    ours.forward(
                        TransformerDecoderInput::new(target.clone(), memory.clone())
                            .target_mask_attn(causal.clone())
                            .memory_mask_pad(pad.clone()),
                    ),
                    burn_decoder.forward(
                        BurnDecoderInput::new(target.clone(), memory.clone())
                            .target_mask_attn(causal.clone())
                            .memory_mask_pad(pad.clone()),
                    ),
                    &format!("{what}, recording {recording}"),
                );
                drop(recorder);
            }
            close(
                ours.as_burn()
                    .forward(BurnDecoderInput::new(target.clone(), memory.clone())),
                burn_decoder.forward(BurnDecoderInput::new(target.clone(), memory.clone())),
                &format!("{what} as_burn"),
            );
            // Autoregressive inference, one position at a time, with each one's cache.
            let (mut ours_cache, mut burn_cache) = (
                ours.new_autoregressive_cache(),
                burn_decoder.new_autoregressive_cache(),
            );
            for t in 1..=4 {
                let prefix = target.clone().slice([0..3, 0..t]);
                let mask = generate_autoregressive_mask(3, t, &device);
                close(
                    ours.forward_autoregressive_inference(
                        TransformerDecoderInput::new(prefix.clone(), memory.clone())
                            .target_mask_attn(mask.clone()),
                        &mut ours_cache,
                    ),
                    burn_decoder.forward_autoregressive_inference(
                        BurnDecoderInput::new(prefix, memory.clone()).target_mask_attn(mask),
                        &mut burn_cache,
                    ),
                    &format!("{what} autoregressive at {t}"),
                );
            }
        }
        let config = CrossAttentionConfig::new(8, 6, 4, 2, 3).with_dropout(0.0);
        let burn_cross = config.init(&device);
        let ours = CrossAttention::from_burn(burn_cross.clone(), &config);
        let context = Tensor::<3>::random([3, 5, 6], Distribution::Normal(0.0, 1.0), &device);
        for recording in [false, true] {
            let recorder = recording.then(crate::Recorder::start);
            close(
                ours.forward(target.clone(), context.clone(), Some(pad.clone())),
                burn_cross.forward(target.clone(), context.clone(), Some(pad.clone())),
                &format!("cross attention, recording {recording}"),
            );
            drop(recorder);
        }
        close(
            ours.forward_cache(
                target.clone(),
                context.clone(),
                None,
                &mut CrossAttentionCache::new(),
            ),
            burn_cross.forward(target.clone(), context.clone(), None),
            "cross attention with a cache",
        );
        close(
            ours.as_burn()
                .forward(target.clone(), context.clone(), None),
            burn_cross.forward(target, context, None),
            "cross attention as_burn",
        );
    }

    /// Records of burn's decoder and cross-attention load into the drop-ins with the same
    /// dotted names and values.
    #[test]
    fn decoder_records_load_into_the_drop_ins() {
        use crate::{CrossAttention, TransformerDecoder};
        use burn::nn::attention::CrossAttentionConfig;
        use burn::nn::transformer::TransformerDecoderConfig;
        let device = Device::default();
        let named = |snapshot: Snapshot| -> (Vec<String>, Vec<Vec<f32>>) {
            let values = snapshot
                .entries()
                .iter()
                .map(|e| values(e.value.clone()))
                .collect();
            (snapshot.names(), values)
        };
        let config = TransformerDecoderConfig::new(8, 12, 2, 2);
        let original = config.init(&device);
        let expected = named(Snapshot::of_params(&original));
        let ours = TransformerDecoder::new(&config, &device).load_record(saved(original));
        assert_eq!(named(Snapshot::of_params(&ours)), expected);
        let back = config.init(&device).load_record(saved(ours));
        assert_eq!(named(Snapshot::of_params(&back)), expected);
        let config = CrossAttentionConfig::new(8, 6, 4, 2, 3);
        let original = config.init(&device);
        let expected = named(Snapshot::of_params(&original));
        let ours = CrossAttention::new(&config, &device).load_record(saved(original));
        assert_eq!(named(Snapshot::of_params(&ours)), expected);
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
