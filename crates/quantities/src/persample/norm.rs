//! Instrumented drop-ins for `burn::nn::LayerNorm` and `burn::nn::RmsNorm`.

use burn::module::{Module, Param};
use burn::nn::{LayerNormConfig, RmsNormConfig};
use burn::tensor::{Device, Tensor};

use super::recorder::{is_recording, tap_affine};

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
/// [`Recorder`](super::Recorder) is active it taps the normalised input `x̂` and the output
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
/// name, record and forward pass; while a [`Recorder`](super::Recorder) is active it taps
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

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::{EmbeddingConfig, LayerNormConfig, RmsNormConfig};
    use burn::store::ModuleRecord;
    use burn::tensor::Device;

    use super::*;
    use crate::persample::Embedding;

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        let n = t.shape().num_elements();
        t.reshape([n])
            .into_data()
            .try_to_vec::<f32>()
            .unwrap_or_default()
    }

    /// Through the bytes of a saved record.
    fn saved<M: Module>(module: M) -> ModuleRecord {
        let bytes = module
            .into_record()
            .into_bytes()
            .unwrap_or_else(|e| panic!("{e}"));
        ModuleRecord::from_bytes(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

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
}
