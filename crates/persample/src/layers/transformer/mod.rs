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

mod encoder;
mod mha;
mod pwff;

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
