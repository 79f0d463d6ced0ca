//! An instrumented drop-in for `burn::nn::conv::Conv3d`.

use burn::module::{Module, Param};
use burn::nn::PaddingConfig3d;
use burn::nn::conv::Conv3dConfig;
use burn::tensor::Tensor;
use burn::tensor::ops::PadMode;

use super::conv::{Unfolding, same_padding, tap_conv, unfold_rows_3d};
use super::mirror::mirrors_burn;
use crate::recorder::is_recording;

/// `burn::nn::conv::Conv3d` with per-sample statistics: identical parameters, names and
/// forward pass; while a [`Recorder`](crate::Recorder) is active it taps the padded input and
/// the output gradient `E` `[B, C_out, P]`, so the per-sample weight gradient is
/// `G_n = E_n U_nᵀ` with `U_n` `[C_in·k_d·k_h·k_w, P]` the input's unfolding (burn has none in
/// 3-d: windows are cut along each dimension after the backward pass, exact).
///
/// Every setting burn allows: stride, dilation, groups, `Valid`, `Same` and `Explicit`
/// padding.
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: the padded input
/// through the forward and backward passes, its unfolding after them (`B·C_in·K·P`
/// elements), with `g` groups the output gradients `g` times.
#[derive(Module, Debug)]
pub struct Conv3d {
    /// `[channels_out, channels_in / groups, k_d, k_h, k_w]`.
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
    /// The padding configuration.
    #[module(skip)]
    pub padding: PaddingConfig3d,
}

mirrors_burn!(
    Conv3d,
    burn::nn::conv::Conv3d,
    Conv3dConfig {
        weight: value,
        bias: value,
        stride: value,
        kernel_size: value,
        dilation: value,
        groups: value,
        padding: value,
    }
);

impl Conv3d {
    /// The padding burn applies on both sides of each dimension of an input of `size`.
    fn padding(&self, size: [usize; 3]) -> [usize; 3] {
        match self.padding {
            PaddingConfig3d::Valid => [0; 3],
            PaddingConfig3d::Explicit(d, h, w) => [d, h, w],
            // burn refuses asymmetric `Same` padding before this is reached.
            PaddingConfig3d::Same => std::array::from_fn(|i| {
                same_padding(self.kernel_size[i], self.stride[i], size[i]).0
            }),
        }
    }

    /// The forward pass, `[B, C_in, D, H, W] → [B, C_out, D', H', W']`.
    pub fn forward(&self, input: Tensor<5>) -> Tensor<5> {
        let output = self.as_burn().forward(input.clone());
        if !is_recording() {
            return output;
        }
        let [_, _, d, h, w] = output.dims();
        let [_, _, depth, height, width] = input.dims();
        let pads = self.padding([depth, height, width]);
        let input = input.detach();
        let input = if pads.iter().any(|&p| p > 0) {
            input.pad(pads.map(|p| (p, p)), PadMode::Constant(0.0))
        } else {
            input
        };
        let unfolding = Unfolding {
            kernel: self.kernel_size,
            stride: self.stride,
            dilation: self.dilation,
        };
        let [_, _, pd, ph, pw] = input.dims();
        if unfolding.positions([pd, ph, pw]) != Some(d * h * w) {
            // Not the layout this tap assumes: record nothing (the step falls back).
            return output;
        }
        let input = input.without_autodiff();
        tap_conv(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            self.groups,
            move || unfold_rows_3d(input, &unfolding),
            output,
        )
    }
}
