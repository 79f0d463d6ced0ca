//! BatchNorm.

use burn::module::{Module, Param, RunningState};
use burn::tensor::Tensor;

use crate::recorder::{in_single_sample_pass, is_recording, refuse};

use super::record_channels;
use crate::layers::mirror::mirrors_burn;

/// `burn::nn::BatchNorm` with per-sample statistics where they are defined: identical
/// parameters, running statistics, names, record and forward pass. `as_burn()` shares the
/// running statistics with the layer it returns (burn's forward pass updates them).
///
/// # Which per-sample gradients
///
/// - **Running statistics** (the `training` flag off, or a device without autodiff): the layer
///   is a fixed affine map per channel, `y = x̂ ⊙ γ + β` with `x̂ = (x − μ_run)/√(σ²_run + ε)`,
///   so every sample's loss depends on its own input only. Every per-sample gradient is
///   exact; the layer taps `γ` and `β` like [`GroupNorm`](crate::GroupNorm) (BackPACK's definition).
/// - **Batch statistics** (training mode): the batch mean and variance couple the samples,
///   and `∂ℓ_n/∂θ` of the layers below is not what a per-sample pass of the batch computes
///   (measured: 82 % apart on a Linear → BatchNorm → readout net, while both sum to the batch
///   gradient). Single-sample passes would normalise each sample by its own statistics: a
///   different model. So per-sample statistics are refused for the whole model, with
///   [`PerSampleError::SamplesCoupled`](crate::PerSampleError::SamplesCoupled) naming this
///   layer, on the fast path and in [`PerSample::auto`](crate::PerSample::auto) alike (as
///   Opacus does). Gradient quantities, curvature and everything else still run. Put the
///   layer in eval mode (its `training` flag) or use [`GroupNorm`](crate::GroupNorm)/[`LayerNorm`](crate::LayerNorm) to get them.
///
/// # Cost
///
/// As [`GroupNorm`](crate::GroupNorm) with running statistics; nothing in training mode.
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

mirrors_burn!(
    BatchNorm,
    burn::nn::BatchNorm,
    burn::nn::BatchNormConfig {
        gamma: value,
        beta: value,
        training: value,
        running_mean: value,
        running_var: value,
        momentum: value,
        epsilon: value,
    }
);

/// Why training-mode BatchNorm refuses per-sample statistics.
const BATCH_STATISTICS: &str = "BatchNorm in training mode: its batch statistics couple \
    the samples, so no layer below it has per-sample gradients (single-sample passes would \
    normalise each sample by itself, another model). Use its running statistics (training \
    flag off), or GroupNorm / LayerNorm";

impl BatchNorm {
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
