//! An instrumented drop-in for `burn::nn::conv::Conv1d`.

use burn::module::{Module, Param};
use burn::nn::PaddingConfig1d;
use burn::tensor::Tensor;
use burn::tensor::ops::PadMode;

use super::conv::{Unfolding, same_padding, tap_conv, unfold_rows_2d};
use super::mirror::mirrors_burn;
use crate::recorder::is_recording;

/// `burn::nn::conv::Conv1d` with per-sample statistics: identical parameters, names, record and
/// forward pass; while a [`Recorder`](crate::Recorder) is active it taps the unfolded input
/// `U` `[B, C_in·k, L']` and the output gradient `E` `[B, C_out, L']`, so the per-sample weight
/// gradient is `G_n = E_n U_nᵀ` (as [`Conv2d`](super::Conv2d), on a height of one).
///
/// Build it from a burn layer: `persample::Conv1d::from(Conv1dConfig::new(2, 4, 3).init(&device))`.
/// The fast path covers every setting burn allows: stride, dilation, groups, and `Valid`,
/// `Same` or `Explicit` padding, symmetric or not.
///
/// # Cost
///
/// As [`Conv2d`](super::Conv2d): the padded input is kept through the passes and unfolded
/// after them (`B·C_in·k·L'` elements); with `g` groups the output gradients `g` times.
#[derive(Module, Debug)]
pub struct Conv1d {
    /// `[channels_out, channels_in / groups, kernel_size]`.
    pub weight: Param<Tensor<3>>,
    /// `[channels_out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Stride of the convolution.
    pub stride: usize,
    /// Size of the kernel.
    pub kernel_size: usize,
    /// Spacing between kernel elements.
    pub dilation: usize,
    /// Connections between input and output channels.
    pub groups: usize,
    /// The padding configuration.
    #[module(skip)]
    pub padding: PaddingConfig1d,
}

mirrors_burn!(
    Conv1d,
    burn::nn::conv::Conv1d,
    burn::nn::conv::Conv1dConfig {
        weight: value,
        bias: value,
        stride: value,
        kernel_size: value,
        dilation: value,
        groups: value,
        padding: value,
    }
);

impl Conv1d {
    /// The padding burn applies at each end of an input of `length` positions.
    fn padding_pair(&self, length: usize) -> (usize, usize) {
        match self.padding {
            PaddingConfig1d::Valid => (0, 0),
            PaddingConfig1d::Explicit(left, right) => (left, right),
            PaddingConfig1d::Same => same_padding(self.kernel_size, self.stride, length),
        }
    }

    /// The forward pass, `[B, C_in, L] → [B, C_out, L']`.
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        let output = self.as_burn().forward(input.clone());
        if !is_recording() {
            return output;
        }
        let [_, _, length] = output.dims();
        let (left, right) = self.padding_pair(input.dims()[2]);
        let input = input.detach();
        let input = if left + right > 0 {
            input.pad([(left, right)], PadMode::Constant(0.0))
        } else {
            input
        };
        let unfolding = Unfolding {
            kernel: [1, self.kernel_size],
            stride: [1, self.stride],
            dilation: [1, self.dilation],
        };
        let padded = input.dims()[2];
        if unfolding.positions([1, padded]) != Some(length) {
            // Not the layout this tap assumes: record nothing (the step falls back).
            return output;
        }
        let input = input.without_autodiff().unsqueeze_dim::<4>(2);
        tap_conv(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            self.groups,
            move || unfold_rows_2d(input, &unfolding),
            output,
        )
    }
}
