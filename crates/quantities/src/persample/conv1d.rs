//! An instrumented drop-in for `burn::nn::conv::Conv1d`.

use burn::module::{Module, Param};
use burn::nn::PaddingConfig1d;
use burn::tensor::Tensor;
use burn::tensor::module::unfold4d;
use burn::tensor::ops::UnfoldOptions;

use super::recorder::{Layout, is_recording, tap};

/// `burn::nn::conv::Conv1d` with per-sample statistics: identical parameters, names, record and
/// forward pass; while a [`Recorder`](super::Recorder) is active it taps the unfolded input
/// `U` `[B, C_in·k, L']` and the output gradient `E` `[B, C_out, L']`, so the per-sample weight
/// gradient is `G_n = E_n U_nᵀ` (as [`Conv2d`](super::Conv2d), on a height of one).
///
/// Build it from a burn layer: `persample::Conv1d::from(Conv1dConfig::new(2, 4, 3).init(&device))`.
/// The fast path covers `groups = 1` with `Valid`, symmetric `Explicit` and `Same` padding
/// (when it pads both ends alike); other settings record nothing, so
/// [`PerSample::auto`](super::PerSample::auto) falls back to exact single-sample passes.
///
/// # Cost
///
/// As [`Conv2d`](super::Conv2d): the unfolded input (`B·C_in·k·L'` elements) is kept.
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

impl From<burn::nn::conv::Conv1d> for Conv1d {
    fn from(layer: burn::nn::conv::Conv1d) -> Self {
        Self {
            weight: layer.weight,
            bias: layer.bias,
            stride: layer.stride,
            kernel_size: layer.kernel_size,
            dilation: layer.dilation,
            groups: layer.groups,
            padding: layer.padding,
        }
    }
}

impl Conv1d {
    fn as_burn(&self) -> burn::nn::conv::Conv1d {
        burn::nn::conv::Conv1d {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            stride: self.stride,
            kernel_size: self.kernel_size,
            dilation: self.dilation,
            groups: self.groups,
            padding: self.padding.clone(),
        }
    }

    /// The padding at each end, if the fast path covers this layer.
    fn symmetric_padding(&self) -> Option<usize> {
        if self.groups != 1 {
            return None;
        }
        match self.padding {
            PaddingConfig1d::Valid => Some(0),
            PaddingConfig1d::Explicit(left, right) if left == right => Some(left),
            PaddingConfig1d::Same if self.stride == 1 => {
                let total = self.dilation * (self.kernel_size - 1);
                total.is_multiple_of(2).then_some(total / 2)
            }
            _ => None,
        }
    }

    /// The forward pass, `[B, C_in, L] → [B, C_out, L']`.
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        let output = self.as_burn().forward(input.clone());
        let Some(padding) = self.symmetric_padding().filter(|_| is_recording()) else {
            return output;
        };
        let [batch, c_out, length] = output.dims();
        let unfolded = unfold4d(
            input.detach().unsqueeze_dim::<4>(2),
            [1, self.kernel_size],
            UnfoldOptions::new([1, self.stride], [0, padding], [1, self.dilation]),
        );
        let [_, _, positions] = unfolded.dims();
        if positions != length {
            // Not the layout this tap assumes: record nothing (the step falls back).
            return output;
        }
        let tapped = tap(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            Layout::OutIn,
            &unfolded.swap_dims(1, 2),
            output.swap_dims(1, 2),
        );
        debug_assert_eq!(tapped.dims(), [batch, length, c_out]);
        tapped.swap_dims(1, 2)
    }
}
