//! Normalization, burn's enum of the normalisation layers.

use burn::module::Module;
use burn::nn::Identity;
use burn::nn::norm::NormalizationConfig;
use burn::tensor::{Device, Tensor};

use super::{BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RmsNorm};
use crate::PerSampleError;

/// `burn::nn::Normalization` with per-sample statistics: the same choice of layer, each
/// variant a drop-in (same names and record as burn's enum).
#[derive(Module, Debug)]
pub enum Normalization {
    /// No normalisation.
    Identity(Identity),
    /// [`BatchNorm`].
    Batch(BatchNorm),
    /// [`GroupNorm`].
    Group(GroupNorm),
    /// [`InstanceNorm`].
    Instance(InstanceNorm),
    /// [`LayerNorm`].
    Layer(LayerNorm),
    /// [`RmsNorm`].
    Rms(RmsNorm),
}

impl Normalization {
    /// The layer `config` describes, initialised as burn initialises it.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Unsupported`] for a kind of normalisation added to burn after this
    /// crate (burn's config is `non_exhaustive`).
    pub fn new(config: &NormalizationConfig, device: &Device) -> Result<Self, PerSampleError> {
        Ok(match config {
            NormalizationConfig::Identity => Self::Identity(Identity::new()),
            NormalizationConfig::Batch(c) => Self::Batch(BatchNorm::new(c, device)),
            NormalizationConfig::Group(c) => Self::Group(GroupNorm::new(c, device)),
            NormalizationConfig::Instance(c) => Self::Instance(InstanceNorm::new(c, device)),
            NormalizationConfig::Layer(c) => Self::Layer(LayerNorm::new(c, device)),
            NormalizationConfig::Rms(c) => Self::Rms(RmsNorm::new(c, device)),
            other => {
                return Err(PerSampleError::Unsupported(format!(
                    "no drop-in for the normalisation {other:?}"
                )));
            }
        })
    }

    /// The chosen layer's forward pass (the first dimension is the batch).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        match self {
            Self::Identity(layer) => layer.forward(input),
            Self::Batch(layer) => layer.forward(input),
            Self::Group(layer) => layer.forward(input),
            Self::Instance(layer) => layer.forward(input),
            Self::Layer(layer) => layer.forward(input),
            Self::Rms(layer) => layer.forward(input),
        }
    }
}
