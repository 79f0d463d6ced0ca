//! Instrumented drop-ins for burn's normalisation layers: `LayerNorm`, `RmsNorm`,
//! `GroupNorm`, `InstanceNorm`, `BatchNorm`, and burn's enum of them, `Normalization`.
//!
//! One file per layer; this file holds what they share (recording `x̂ ⊙ γ (+ β)`, and group
//! normalisation as burn computes it).

use burn::module::Param;
use burn::tensor::Tensor;

use crate::recorder::{is_recording, tap_affine};

mod batch_norm;
mod group_norm;
mod instance_norm;
mod layer_norm;
mod normalization;
mod rms_norm;

pub use batch_norm::BatchNorm;
pub use group_norm::GroupNorm;
pub use instance_norm::InstanceNorm;
pub use layer_norm::LayerNorm;
pub use normalization::Normalization;
pub use rms_norm::RmsNorm;

/// Records `y = x̂ ⊙ γ (+ β)` for a normalised `x̂` computed like the layer does, when a
/// recorder is active (the first dimension is the batch, the last the features).
pub(super) fn record<const D: usize>(
    gamma: &Param<Tensor<1>>,
    beta: Option<&Param<Tensor<1>>>,
    normalized: impl FnOnce() -> Tensor<D>,
    output: Tensor<D>,
) -> Tensor<D> {
    if D < 2 || !is_recording() {
        return output;
    }
    let shape = output.shape();
    let dims = output.dims();
    let (batch, d) = (dims[0], dims[D - 1]);
    let positions = dims[1..D - 1].iter().product::<usize>();
    let tapped = tap_affine(
        gamma.id,
        beta.map(|b| b.id),
        normalized().detach().reshape([batch, positions, d]),
        output.reshape([batch, positions, d]),
    );
    tapped.reshape(shape)
}

/// Records `y = z ⊙ γ (+ β)` where `γ` runs along axis 1 (channels-first layouts: GroupNorm,
/// InstanceNorm, PRelu), or is a single number when `per_channel` is false.
pub(crate) fn record_channels<const D: usize>(
    gamma: &Param<Tensor<1>>,
    beta: Option<&Param<Tensor<1>>>,
    z: impl FnOnce() -> Tensor<D>,
    output: Tensor<D>,
    per_channel: bool,
) -> Tensor<D> {
    if D < 2 || !is_recording() {
        return output;
    }
    let shape = output.shape();
    let dims = output.dims();
    let (batch, channels) = (dims[0], dims[1]);
    let rest = dims[2..].iter().product::<usize>();
    // Features last, as the affine tap expects: [B, positions, C] (or [B, all, 1]).
    let to_rows = |t: Tensor<D>| -> Tensor<3> {
        if per_channel {
            t.reshape([batch, channels, rest]).swap_dims(1, 2)
        } else {
            t.reshape([batch, channels * rest, 1])
        }
    };
    let tapped = tap_affine(
        gamma.id,
        beta.map(|b| b.id),
        to_rows(z().detach()),
        to_rows(output),
    );
    let tapped = if per_channel {
        tapped.swap_dims(1, 2)
    } else {
        tapped
    };
    tapped.reshape(shape)
}

/// Group normalisation of `[B, C, ...]` exactly as burn computes it: `x̂` per sample and group
/// (`C / groups` channels and every position), then `x̂ ⊙ γ + β` per channel when affine.
pub(super) fn group_norm<const D: usize>(
    input: Tensor<D>,
    gamma: Option<&Param<Tensor<1>>>,
    beta: Option<&Param<Tensor<1>>>,
    groups: usize,
    epsilon: f64,
) -> Tensor<D> {
    let shape = input.shape();
    let dims = input.dims();
    let (batch, channels) = (dims[0], dims[1]);
    let normalized = |x: Tensor<D>| -> Tensor<D> {
        let hidden = x.shape().num_elements() / (batch * groups);
        let x = x.reshape([batch, groups, hidden]);
        let centred = x.clone() - x.mean_dim(2);
        let variance = centred.clone().square().mean_dim(2);
        (centred / variance.add_scalar(epsilon).sqrt()).reshape(shape.clone())
    };
    let x_hat = normalized(input.clone());
    let (Some(gamma), Some(beta)) = (gamma, beta) else {
        return x_hat;
    };
    let mut affine = [1; D];
    affine[1] = channels;
    let output = x_hat.clone() * gamma.val().reshape(affine) + beta.val().reshape(affine);
    record_channels(gamma, Some(beta), || x_hat, output, true)
}

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::{EmbeddingConfig, LayerNormConfig, RmsNormConfig};
    use burn::tensor::Device;

    use super::*;
    use crate::Embedding;
    use crate::testing::{close, saved, values};

    /// A record saved from a burn layer loads into the drop-in (same parameter names and
    /// layout), and the drop-in's record loads back into a fresh burn layer.
    #[test]
    fn burn_records_load_into_the_drop_ins_and_back() {
        let device = Device::default();
        let mut layer_norm = LayerNormConfig::new(3).init(&device);
        layer_norm.gamma = Param::from_tensor(Tensor::from_floats([0.5, -1.0, 2.0], &device));
        layer_norm.beta = Some(Param::from_tensor(Tensor::from_floats(
            [1.0, 0.0, -3.0],
            &device,
        )));
        let (gamma, beta) = (
            values(layer_norm.gamma.val()),
            layer_norm.beta.as_ref().map(|b| values(b.val())),
        );
        let ours = LayerNorm::new(&LayerNormConfig::new(3), &device).load_record(saved(layer_norm));
        assert_eq!(values(ours.gamma.val()), gamma);
        assert_eq!(ours.beta.as_ref().map(|b| values(b.val())), beta);
        let back = LayerNormConfig::new(3)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(
            (values(back.gamma.val()), back.beta.map(|b| values(b.val()))),
            (gamma, beta)
        );

        let mut rms = RmsNormConfig::new(3).init(&device);
        rms.gamma = Param::from_tensor(Tensor::from_floats([0.25, 3.0, -2.0], &device));
        let gamma = values(rms.gamma.val());
        let ours = RmsNorm::new(&RmsNormConfig::new(3), &device).load_record(saved(rms));
        assert_eq!(values(ours.gamma.val()), gamma);
        let back = RmsNormConfig::new(3).init(&device).load_record(saved(ours));
        assert_eq!(values(back.gamma.val()), gamma);

        let batch_norm = burn::nn::BatchNormConfig::new(3).init(&device);
        batch_norm
            .running_mean
            .update(Tensor::from_floats([0.5, -1.0, 2.0], &device));
        let (gamma, mean) = (
            values(batch_norm.gamma.val()),
            values(batch_norm.running_mean.value()),
        );
        let ours = BatchNorm::from(burn::nn::BatchNormConfig::new(3).init(&device))
            .load_record(saved(batch_norm));
        assert_eq!(values(ours.gamma.val()), gamma);
        assert_eq!(values(ours.running_mean.value()), mean);
        let back = burn::nn::BatchNormConfig::new(3)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(values(back.running_mean.value()), mean);

        let embedding = EmbeddingConfig::new(5, 2).init(&device);
        let weight = values(embedding.weight.val());
        let ours =
            Embedding::from(EmbeddingConfig::new(5, 2).init(&device)).load_record(saved(embedding));
        assert_eq!(values(ours.weight.val()), weight);
        let back = EmbeddingConfig::new(5, 2)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(values(back.weight.val()), weight);
    }

    /// burn's `Normalization` enum and the drop-in compute the same for every variant, and
    /// burn's record loads into the drop-in with the same names and values.
    #[test]
    fn normalization_enum_equals_burns() {
        use burn::nn::norm::NormalizationConfig;
        use burn::nn::{BatchNormConfig, GroupNormConfig, InstanceNormConfig};
        use burn::tensor::Distribution;
        let device = Device::default().autodiff();
        let x = Tensor::<3>::random([3, 4, 6], Distribution::Normal(0.0, 1.0), &device);
        let configs: Vec<NormalizationConfig> = vec![
            NormalizationConfig::Identity,
            BatchNormConfig::new(4).into(),
            GroupNormConfig::new(2, 4).into(),
            InstanceNormConfig::new(4).with_affine(true).into(),
            LayerNormConfig::new(6).with_epsilon(1e-3).into(),
            RmsNormConfig::new(6).into(),
        ];
        for config in configs {
            let burn_layer = config.init(&device);
            let ours = Normalization::new(&config, &device)
                .unwrap_or_else(|e| panic!("{e}"))
                .load_record(saved(burn_layer.clone()));
            let what = format!("{config:?}");
            assert_eq!(
                crate::testing::params(&ours),
                crate::testing::params(&burn_layer),
                "{what}"
            );
            close(
                ours.forward(x.clone()),
                burn_layer.forward(x.clone()),
                &what,
            );
        }
    }

    /// The drop-ins compute what burn's layers compute (outside a recording and inside one).
    #[test]
    fn forward_passes_equal_burns() {
        use burn::nn::{GroupNormConfig, InstanceNormConfig, PReluConfig};
        let device = Device::default().autodiff();
        let x = Tensor::<3>::from_data(
            burn::tensor::TensorData::new(
                (0..2 * 4 * 3)
                    .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3)
                    .collect::<Vec<_>>(),
                [2, 4, 3],
            ),
            &device,
        );
        for recording in [false, true] {
            let recorder = recording.then(crate::Recorder::start);
            let group = GroupNormConfig::new(2, 4).init(&device);
            close(
                GroupNorm::from(group.clone()).forward(x.clone()),
                group.forward(x.clone()),
                "GroupNorm",
            );
            let instance = InstanceNormConfig::new(4).init(&device);
            close(
                InstanceNorm::from(instance.clone()).forward(x.clone()),
                instance.forward(x.clone()),
                "InstanceNorm",
            );
            let prelu = PReluConfig::new().with_num_parameters(4).init(&device);
            close(
                crate::PRelu::from(prelu.clone()).forward(x.clone()),
                prelu.forward(x.clone()),
                "PRelu",
            );
            let layer = LayerNormConfig::new(3).init(&device);
            close(
                LayerNorm::new(&LayerNormConfig::new(3), &device).forward(x.clone()),
                layer.forward(x.clone()),
                "LayerNorm",
            );
            let rms = RmsNormConfig::new(3).init(&device);
            close(
                RmsNorm::from(rms.clone()).forward(x.clone()),
                rms.forward(x.clone()),
                "RmsNorm",
            );
            for training in [true, false] {
                let mut batch_norm = burn::nn::BatchNormConfig::new(4).init(&device);
                batch_norm.training = batch_norm.training.with_value(training);
                let ours = BatchNorm::from(batch_norm.clone());
                close(
                    ours.forward(x.clone()),
                    batch_norm.forward(x.clone()),
                    &format!("BatchNorm (training {training})"),
                );
            }
            drop(recorder);
        }
    }
}
