//! An instrumented drop-in for `burn::nn::conv::ConvTranspose3d`.

use burn::module::{Module, Param};
use burn::nn::conv::ConvTranspose3dConfig;
use burn::tensor::{Device, Tensor};

use super::conv::{Unfolding, record_transposed};
use crate::recorder::is_recording;

/// `burn::nn::conv::ConvTranspose3d` with per-sample statistics: identical parameters, names
/// and forward pass; while a [`Recorder`](crate::Recorder) is active it taps the input `X`
/// `[B, C_in, P]` and unfolds the output gradient after the backward pass into `U(E)`
/// `[B, C_out·K, P]` (one window of the uncropped output per input position), so the
/// per-sample weight gradient is `G_n = X_n U(E_n)ᵀ` (`[C_in, C_out/g·K]`, a new tap kind:
/// the output gradient, not the input, is unfolded).
///
/// Every setting burn allows: stride, padding, output padding, dilation, groups.
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: the input (`g`
/// masked copies with `g` groups) through the forward and backward passes, the unfolded
/// output gradient after them (`B·C_out·K·P` elements).
#[derive(Module, Debug)]
pub struct ConvTranspose3d {
    /// `[channels_in, channels_out / groups, k_d, k_h, k_w]`.
    pub weight: Param<Tensor<5>>,
    /// `[channels_out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Stride of the convolution.
    pub stride: [usize; 3],
    /// Size of the kernel.
    pub kernel_size: [usize; 3],
    /// Spacing between kernel elements.
    pub dilation: [usize; 3],
    /// Connections between input and output channels.
    pub groups: usize,
    /// Padding removed from each side of the output.
    pub padding: [usize; 3],
    /// Size added to one side of the output.
    pub padding_out: [usize; 3],
    /// `[channels_in, channels_out]`.
    pub channels: [usize; 2],
}

impl From<burn::nn::conv::ConvTranspose3d> for ConvTranspose3d {
    fn from(layer: burn::nn::conv::ConvTranspose3d) -> Self {
        Self {
            weight: layer.weight,
            bias: layer.bias,
            stride: layer.stride,
            kernel_size: layer.kernel_size,
            dilation: layer.dilation,
            groups: layer.groups,
            padding: layer.padding,
            padding_out: layer.padding_out,
            channels: layer.channels,
        }
    }
}

impl ConvTranspose3d {
    /// The layer `config` describes, initialised as burn initialises it.
    pub fn new(config: &ConvTranspose3dConfig, device: &Device) -> Self {
        config.init(device).into()
    }

    /// burn's layer with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::conv::ConvTranspose3d {
        burn::nn::conv::ConvTranspose3d {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            stride: self.stride,
            kernel_size: self.kernel_size,
            dilation: self.dilation,
            groups: self.groups,
            padding: self.padding,
            padding_out: self.padding_out,
            channels: self.channels,
        }
    }

    /// The forward pass, `[B, C_in, D, H, W] → [B, C_out, D', H', W']`.
    pub fn forward(&self, input: Tensor<5>) -> Tensor<5> {
        let output = self.as_burn().forward(input.clone());
        if !is_recording() {
            return output;
        }
        record_transposed(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            self.groups,
            input,
            output,
            self.padding,
            Unfolding {
                kernel: self.kernel_size,
                stride: self.stride,
                dilation: self.dilation,
            },
        )
    }
}
