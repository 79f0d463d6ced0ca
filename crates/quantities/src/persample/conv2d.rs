//! An instrumented drop-in for `burn::nn::conv::Conv2d`.

use burn::module::{Module, Param};
use burn::nn::PaddingConfig2d;
use burn::tensor::Tensor;
use burn::tensor::module::unfold4d;
use burn::tensor::ops::UnfoldOptions;

use super::recorder::{Layout, is_recording, tap};

/// `burn::nn::conv::Conv2d` with per-sample statistics: identical parameters, names and
/// forward pass; while a [`Recorder`](super::Recorder) is active it taps the unfolded input
/// `U` `[B, C_in·k_h·k_w, P]` and the output gradient `E` `[B, C_out, P]`, so the per-sample
/// weight gradient is `G_n = E_n U_nᵀ` (BackPACK's convolution rule).
///
/// Build it from a burn layer: `persample::Conv2d::from(Conv2dConfig::new([1, 8], [3, 3]).init(&device))`.
/// The fast path covers `groups = 1` with `Valid` or symmetric `Explicit` padding; other
/// settings record nothing, so [`PerSample::auto`](super::PerSample::auto) falls back to exact
/// single-sample passes.
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: the unfolded
/// input (`B·C_in·k_h·k_w·P` elements) is kept, and per-sample gradients are materialised in
/// sample chunks (`B·C_out·C_in·k_h·k_w` per chunk at most) when statistics are reduced.
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

impl From<burn::nn::conv::Conv2d> for Conv2d {
    fn from(layer: burn::nn::conv::Conv2d) -> Self {
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

impl Conv2d {
    fn as_burn(&self) -> burn::nn::conv::Conv2d {
        burn::nn::conv::Conv2d {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            stride: self.stride,
            kernel_size: self.kernel_size,
            dilation: self.dilation,
            groups: self.groups,
            padding: self.padding.clone(),
        }
    }

    /// Symmetric padding `[h, w]` if the fast path covers this layer.
    fn symmetric_padding(&self) -> Option<[usize; 2]> {
        if self.groups != 1 {
            return None;
        }
        match self.padding {
            PaddingConfig2d::Valid => Some([0, 0]),
            PaddingConfig2d::Explicit(top, left, bottom, right)
                if top == bottom && left == right =>
            {
                Some([top, left])
            }
            _ => None,
        }
    }

    /// The forward pass, `[B, C_in, H, W] → [B, C_out, H', W']`.
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        let output = self.as_burn().forward(input.clone());
        let Some(padding) = self.symmetric_padding().filter(|_| is_recording()) else {
            return output;
        };
        let [batch, c_out, h, w] = output.dims();
        let unfolded = unfold4d(
            input.detach(),
            self.kernel_size,
            UnfoldOptions::new(self.stride, padding, self.dilation),
        );
        let [_, k, positions] = unfolded.dims();
        debug_assert_eq!(positions, h * w);
        let tapped = tap(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            Layout::OutIn,
            &unfolded.swap_dims(1, 2).reshape([batch, positions, k]),
            output.reshape([batch, c_out, positions]).swap_dims(1, 2),
        );
        tapped.swap_dims(1, 2).reshape([batch, c_out, h, w])
    }
}
