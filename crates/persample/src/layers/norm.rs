//! Instrumented drop-ins for burn's normalisation layers: `LayerNorm`, `RmsNorm`,
//! `GroupNorm`, `InstanceNorm`, `BatchNorm`.

use burn::module::{Module, Param, RunningState};
use burn::nn::{LayerNormConfig, RmsNormConfig};
use burn::tensor::{Device, Tensor};

use crate::recorder::{in_single_sample_pass, is_recording, refuse, tap_affine};

/// Records `y = x̂ ⊙ γ (+ β)` for a normalised `x̂` computed like the layer does, when a
/// recorder is active (the first dimension is the batch, the last the features).
fn record<const D: usize>(
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

/// `burn::nn::LayerNorm` with per-sample statistics: identical parameters (`gamma`, optional
/// `beta`, `[d_model]`), names, record and forward pass; while a
/// [`Recorder`](crate::Recorder) is active it taps the normalised input `x̂` and the output
/// gradients: `g_{n,γ} = Σ_t e_{n,t} ⊙ x̂_{n,t}`, `g_{n,β} = Σ_t e_{n,t}`. LayerNorm normalises
/// each sample on its own, so per-sample gradients are well defined (unlike training-mode
/// BatchNorm).
///
/// burn 0.22 keeps `LayerNorm`'s ε private, so build it from the config
/// ([`LayerNorm::new`]) or from a burn layer and its ε ([`LayerNorm::from_burn`]).
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: `x̂` is computed
/// once more and kept (`B·T·d_model`), and the per-sample gradients of `γ` and `β`
/// (`B·d_model` each) are formed after the backward pass.
#[derive(Module, Debug)]
pub struct LayerNorm {
    /// `[d_model]`.
    pub gamma: Param<Tensor<1>>,
    /// `[d_model]`.
    pub beta: Option<Param<Tensor<1>>>,
    /// Added to the variance.
    pub epsilon: f64,
}

impl LayerNorm {
    /// The layer `config` describes, initialised like burn's (`γ = 1`, `β = 0`).
    pub fn new(config: &LayerNormConfig, device: &Device) -> Self {
        Self::from_burn(config.init(device), config.epsilon)
    }

    /// A burn layer's parameters with its ε (which burn does not expose).
    pub fn from_burn(layer: burn::nn::LayerNorm, epsilon: f64) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            epsilon,
        }
    }

    /// The forward pass, normalising over the last dimension.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let output = burn::tensor::module::layer_norm(
            input.clone(),
            self.gamma.val(),
            self.beta.as_ref().map(Param::val),
            self.epsilon,
        );
        record(
            &self.gamma,
            self.beta.as_ref(),
            || {
                let input = input.detach();
                let mean = input.clone().mean_dim(D - 1);
                let centred = input - mean;
                let variance = centred.clone().square().mean_dim(D - 1);
                centred / (variance + self.epsilon).sqrt()
            },
            output,
        )
    }
}

/// `burn::nn::RmsNorm` with per-sample statistics: identical parameter (`gamma` `[d_model]`),
/// name, record and forward pass; while a [`Recorder`](crate::Recorder) is active it taps
/// `x̂ = x / rms(x)` and the output gradients: `g_{n,γ} = Σ_t e_{n,t} ⊙ x̂_{n,t}`.
///
/// # Cost
///
/// As [`LayerNorm`].
#[derive(Module, Debug)]
pub struct RmsNorm {
    /// `[d_model]`.
    pub gamma: Param<Tensor<1>>,
    /// Added to the mean square.
    pub epsilon: f64,
}

impl From<burn::nn::RmsNorm> for RmsNorm {
    fn from(layer: burn::nn::RmsNorm) -> Self {
        Self {
            gamma: layer.gamma,
            epsilon: layer.epsilon,
        }
    }
}

impl RmsNorm {
    /// The layer `config` describes, initialised like burn's (`γ = 1`).
    pub fn new(config: &RmsNormConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// The forward pass, normalising over the last dimension (as burn: the mean square in
    /// `f32`).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let normalized = |x: Tensor<D>| {
            let dtype = x.dtype();
            let rms = (x
                .clone()
                .cast(burn::tensor::DType::F32)
                .square()
                .mean_dim(D - 1)
                + self.epsilon)
                .sqrt();
            x / rms.cast(dtype)
        };
        let output = normalized(input.clone()) * self.gamma.val().unsqueeze();
        record(&self.gamma, None, || normalized(input.detach()), output)
    }
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

/// `burn::nn::BatchNorm` with per-sample statistics where they are defined: identical
/// parameters, running statistics, names, record and forward pass.
///
/// # Which per-sample gradients
///
/// - **Running statistics** (the `training` flag off, or a device without autodiff): the layer
///   is a fixed affine map per channel, `y = x̂ ⊙ γ + β` with `x̂ = (x − μ_run)/√(σ²_run + ε)`,
///   so every sample's loss depends on its own input only. Every per-sample gradient is
///   exact; the layer taps `γ` and `β` like [`GroupNorm`] (BackPACK's definition).
/// - **Batch statistics** (training mode): the batch mean and variance couple the samples,
///   and `∂ℓ_n/∂θ` of the layers below is not what a per-sample pass of the batch computes
///   (measured: 82 % apart on a Linear → BatchNorm → readout net, while both sum to the batch
///   gradient). Single-sample passes would normalise each sample by its own statistics: a
///   different model. So per-sample statistics are refused for the whole model, with
///   [`PerSampleError::SamplesCoupled`](crate::PerSampleError::SamplesCoupled) naming this
///   layer, on the fast path and in [`PerSample::auto`](crate::PerSample::auto) alike (as
///   Opacus does). Gradient quantities, curvature and everything else still run. Put the
///   layer in eval mode (its `training` flag) or use [`GroupNorm`]/[`LayerNorm`] to get them.
///
/// # Cost
///
/// As [`GroupNorm`] with running statistics; nothing in training mode.
#[derive(Module, Debug)]
pub struct BatchNorm {
    /// `[C]`.
    pub gamma: Param<Tensor<1>>,
    /// `[C]`.
    pub beta: Param<Tensor<1>>,
    /// Batch statistics (`true`) or running statistics.
    pub training: Param<burn::module::Flag>,
    /// Running mean `[C]`.
    pub running_mean: burn::module::RunningState<Tensor<1>>,
    /// Running variance `[C]`.
    pub running_var: burn::module::RunningState<Tensor<1>>,
    /// Weight of the new batch statistics in the running ones.
    pub momentum: f64,
    /// Added to the variance.
    pub epsilon: f64,
}

impl From<burn::nn::BatchNorm> for BatchNorm {
    fn from(layer: burn::nn::BatchNorm) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            training: layer.training,
            running_mean: layer.running_mean,
            running_var: layer.running_var,
            momentum: layer.momentum,
            epsilon: layer.epsilon,
        }
    }
}

/// Why training-mode BatchNorm refuses per-sample statistics.
const BATCH_STATISTICS: &str = "BatchNorm in training mode: its batch statistics couple \
    the samples, so no layer below it has per-sample gradients (single-sample passes would \
    normalise each sample by itself, another model). Use its running statistics (training \
    flag off), or GroupNorm / LayerNorm";

impl BatchNorm {
    /// burn's layer with these parameters and the same running statistics (shared: burn's
    /// forward pass updates them).
    pub fn as_burn(&self) -> burn::nn::BatchNorm {
        burn::nn::BatchNorm {
            gamma: self.gamma.clone(),
            beta: self.beta.clone(),
            training: self.training.clone(),
            running_mean: self.running_mean.clone(),
            running_var: self.running_var.clone(),
            momentum: self.momentum,
            epsilon: self.epsilon,
        }
    }

    /// The forward pass on `[B, C, ...]`, as burn's (batch statistics on an autodiff device
    /// with the training flag on, running statistics otherwise).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let batch_statistics = input.device().is_autodiff() && self.training.is_enabled();
        if batch_statistics && in_single_sample_pass() {
            // The exact fallback refuses this model; its pass must not move the running
            // statistics (tracking never changes the model).
            refuse(vec![self.gamma.id, self.beta.id], BATCH_STATISTICS);
            let mut private = self.as_burn();
            private.running_mean = RunningState::new(self.running_mean.value());
            private.running_var = RunningState::new(self.running_var.value());
            return private.forward(input);
        }
        let output = self.as_burn().forward(input.clone());
        if !is_recording() {
            return output;
        }
        if batch_statistics {
            refuse(vec![self.gamma.id, self.beta.id], BATCH_STATISTICS);
            return output;
        }
        let normalized = || {
            let channels = self.gamma.shape().dims::<1>()[0];
            let mut shape = [1; D];
            shape[1] = channels;
            let device = input.device();
            let dtype = input.dtype();
            let running = |state: &burn::module::RunningState<Tensor<1>>| {
                state.value().to_device(&device).cast(dtype).reshape(shape)
            };
            let (mean, var) = (running(&self.running_mean), running(&self.running_var));
            (input.detach() - mean) / (var + self.epsilon).sqrt()
        };
        record_channels(&self.gamma, Some(&self.beta), normalized, output, true)
    }
}

/// Group normalisation of `[B, C, ...]` exactly as burn computes it: `x̂` per sample and group
/// (`C / groups` channels and every position), then `x̂ ⊙ γ + β` per channel when affine.
fn group_norm<const D: usize>(
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

/// `burn::nn::GroupNorm` with per-sample statistics: identical parameters (`gamma`, `beta`
/// `[num_channels]` when affine), names, record and forward pass; while a
/// [`Recorder`](crate::Recorder) is active it taps `x̂` and the output gradients:
/// `g_{n,γ_c} = Σ_{positions} e ⊙ x̂` and `g_{n,β_c} = Σ_{positions} e` per channel. Each sample
/// is normalised on its own, so per-sample gradients are well defined.
///
/// # Cost
///
/// As [`LayerNorm`] (`x̂` kept, `B·C·positions`).
#[derive(Module, Debug)]
pub struct GroupNorm {
    /// `[num_channels]`, when affine.
    pub gamma: Option<Param<Tensor<1>>>,
    /// `[num_channels]`, when affine.
    pub beta: Option<Param<Tensor<1>>>,
    /// Groups the channels are split into.
    pub num_groups: usize,
    /// Channels expected in the input (axis 1).
    pub num_channels: usize,
    /// Added to the variance.
    pub epsilon: f64,
    /// Whether `gamma` and `beta` are learned.
    pub affine: bool,
}

impl From<burn::nn::GroupNorm> for GroupNorm {
    fn from(layer: burn::nn::GroupNorm) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            num_groups: layer.num_groups,
            num_channels: layer.num_channels,
            epsilon: layer.epsilon,
            affine: layer.affine,
        }
    }
}

impl GroupNorm {
    /// The forward pass over `[B, num_channels, ...]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        group_norm(
            input,
            self.gamma.as_ref(),
            self.beta.as_ref(),
            self.num_groups,
            self.epsilon,
        )
    }
}

/// `burn::nn::InstanceNorm` with per-sample statistics (group normalisation with one group per
/// channel; see [`GroupNorm`]).
#[derive(Module, Debug)]
pub struct InstanceNorm {
    /// `[num_channels]`, when affine.
    pub gamma: Option<Param<Tensor<1>>>,
    /// `[num_channels]`, when affine.
    pub beta: Option<Param<Tensor<1>>>,
    /// Channels expected in the input (axis 1).
    pub num_channels: usize,
    /// Added to the variance.
    pub epsilon: f64,
    /// Whether `gamma` and `beta` are learned.
    pub affine: bool,
}

impl From<burn::nn::InstanceNorm> for InstanceNorm {
    fn from(layer: burn::nn::InstanceNorm) -> Self {
        Self {
            gamma: layer.gamma,
            beta: layer.beta,
            num_channels: layer.num_channels,
            epsilon: layer.epsilon,
            affine: layer.affine,
        }
    }
}

impl InstanceNorm {
    /// The forward pass over `[B, num_channels, ...]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        group_norm(
            input,
            self.gamma.as_ref(),
            self.beta.as_ref(),
            self.num_channels,
            self.epsilon,
        )
    }
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
