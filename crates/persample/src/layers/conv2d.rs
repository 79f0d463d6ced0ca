//! An instrumented drop-in for `burn::nn::conv::Conv2d`.

use burn::module::{Module, Param};
use burn::nn::PaddingConfig2d;
use burn::tensor::Tensor;
use burn::tensor::ops::PadMode;

use super::conv::{Unfolding, padding_2d, tap_conv, unfold_rows_2d};
use super::mirror::mirrors_burn;
use crate::recorder::is_recording;

/// `burn::nn::conv::Conv2d` with per-sample statistics: identical parameters, names and
/// forward pass; while a [`Recorder`](crate::Recorder) is active it taps the unfolded input
/// `U` `[B, C_in·k_h·k_w, P]` and the output gradient `E` `[B, C_out, P]`, so the per-sample
/// weight gradient is `G_n = E_n U_nᵀ` (BackPACK's convolution rule).
///
/// Build it from a burn layer: `persample::Conv2d::from(Conv2dConfig::new([1, 8], [3, 3]).init(&device))`.
/// The fast path covers every setting burn allows: stride, dilation, groups (grouped
/// convolutions are taped as a Linear over `groups × positions`, see the `# Cost`), and
/// `Valid`, `Same` or `Explicit` padding, symmetric or not (the input is padded before
/// unfolding).
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: the padded input
/// is kept through the forward and backward passes and unfolded after them
/// (`B·C_in·k_h·k_w·P` elements, until the statistics are reduced); with `g` groups the output
/// gradients `g` times (`g·B·C_out·P`); per-sample gradients are materialised in sample chunks
/// when statistics need them.
#[derive(Module, Debug)]
pub struct Conv2d {
    /// `[channels_out, channels_in / groups, kernel_size_1, kernel_size_2]`.
    pub weight: Param<Tensor<4>>,
    /// `[channels_out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Stride of the convolution.
    pub stride: [usize; 2],
    /// Size of the kernel.
    pub kernel_size: [usize; 2],
    /// Spacing between kernel elements.
    pub dilation: [usize; 2],
    /// Connections between input and output channels.
    pub groups: usize,
    /// The padding configuration.
    #[module(skip)]
    pub padding: PaddingConfig2d,
}

mirrors_burn!(
    Conv2d,
    burn::nn::conv::Conv2d,
    burn::nn::conv::Conv2dConfig {
        weight: value,
        bias: value,
        stride: value,
        kernel_size: value,
        dilation: value,
        groups: value,
        padding: value,
    }
);

impl Conv2d {
    /// The forward pass, `[B, C_in, H, W] → [B, C_out, H', W']`.
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        let output = self.as_burn().forward(input.clone());
        if !is_recording() {
            return output;
        }
        let [_, _, h, w] = output.dims();
        let [_, _, height, width] = input.dims();
        let pads = padding_2d(
            &self.padding,
            self.kernel_size,
            self.stride,
            [height, width],
        );
        let input = input.detach();
        let input = if pads.iter().any(|&(a, b)| a + b > 0) {
            input.pad(pads, PadMode::Constant(0.0))
        } else {
            input
        };
        let unfolding = Unfolding {
            kernel: self.kernel_size,
            stride: self.stride,
            dilation: self.dilation,
        };
        let [_, _, padded_h, padded_w] = input.dims();
        if unfolding.positions([padded_h, padded_w]) != Some(h * w) {
            // Not the layout this tap assumes: record nothing (the step falls back).
            return output;
        }
        let input = input.without_autodiff();
        tap_conv(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            self.groups,
            move || unfold_rows_2d(input, &unfolding),
            output,
        )
    }
}
