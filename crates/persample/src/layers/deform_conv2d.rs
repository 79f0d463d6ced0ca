//! An instrumented drop-in for `burn::nn::conv::DeformConv2d`.

use burn::module::{Module, Param};
use burn::nn::PaddingConfig2d;
use burn::nn::conv::DeformConv2dConfig;
use burn::tensor::module::deform_conv2d;
use burn::tensor::ops::DeformConvOptions;
use burn::tensor::{Tensor, TensorData};

use super::conv::{padding_2d, tap_conv};
use super::mirror::mirrors_burn;
use crate::recorder::{is_recording, mark_curved};

/// `burn::nn::conv::DeformConv2d` with per-sample statistics: identical parameters, names and
/// forward pass. The deformable convolution samples its input bilinearly at offset
/// positions, `y[o, p] = Σ_{c, k} W[o, c, k] · m_k(p) · x_c(p + p_k + Δp_k(p))`, so the
/// per-sample weight gradient is `G_n = E_n U_nᵀ` with `U_n` `[C_in·K, P]` the *deformed*
/// unfolding of the input (the sampled, masked values). After the backward pass it is computed
/// exactly by burn's own `deform_conv2d` with the same offsets and mask and an identity
/// kernel (output channel `(c, k)` picks input channel `c` at kernel tap `k`). Offsets and
/// mask are inputs: the layer that produced them gets its per-sample gradients from its own
/// tap (the gradient that reaches it through them is in the backward pass).
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: input, offsets
/// and mask through the forward and backward passes; after them one deformable convolution
/// with a `[C_in·K, C_in, k_h, k_w]` identity kernel and its output (`B·C_in·K·P`).
#[derive(Module, Debug)]
pub struct DeformConv2d {
    /// `[channels_out, channels_in / weight_groups, k_h, k_w]`.
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
    pub weight_groups: usize,
    /// Groups of input channels sharing one set of offsets.
    pub offset_groups: usize,
    /// The padding configuration (symmetric, as burn requires here).
    #[module(skip)]
    pub padding: PaddingConfig2d,
}

mirrors_burn!(
    DeformConv2d,
    burn::nn::conv::DeformConv2d,
    DeformConv2dConfig {
        weight: value,
        bias: value,
        stride: value,
        kernel_size: value,
        dilation: value,
        weight_groups: value,
        offset_groups: value,
        padding: value,
    }
);

impl DeformConv2d {
    /// The forward pass: input `[B, C_in, H, W]`, offsets `[B, 2·offset_groups·K, H', W']`,
    /// optional mask `[B, offset_groups·K, H', W']`; output `[B, C_out, H', W']`.
    pub fn forward(
        &self,
        input: Tensor<4>,
        offset: Tensor<4>,
        mask: Option<Tensor<4>>,
    ) -> Tensor<4> {
        let output = self
            .as_burn()
            .forward(input.clone(), offset.clone(), mask.clone());
        if !is_recording() {
            return output;
        }
        // Bilinear sampling multiplies the two offset coordinates: curved in whatever
        // produced them.
        mark_curved("deformable sampling");
        let [batch, _, h, w] = output.dims();
        let [_, c_in, height, width] = input.dims();
        let detached = |t: Tensor<4>| t.detach().without_autodiff();
        let (input, offset, mask) = (detached(input), detached(offset), mask.map(detached));
        let kernel = self.kernel_size;
        let options = DeformConvOptions::new(
            self.stride,
            // burn refuses asymmetric padding for this layer: `before` is both sides.
            padding_2d(&self.padding, kernel, self.stride, [height, width])
                .map(|(before, _)| before),
            self.dilation,
            1,
            self.offset_groups,
        );
        let unfold = move || {
            let taps = kernel[0] * kernel[1];
            // Output channel (c, k) = c·K + k reads input channel c at kernel tap k: the
            // identity on the flattened `[C_in·K]` (channel-major, as the weight's rows).
            let width = c_in * taps;
            let mut identity = vec![0.0f32; width * width];
            for i in 0..width {
                identity[i * width + i] = 1.0;
            }
            let identity = Tensor::<4>::from_data(
                TensorData::new(identity, [c_in * taps, c_in, kernel[0], kernel[1]]),
                (&input.device(), input.dtype()),
            );
            deform_conv2d(input, offset, identity, mask, None, options)
                .reshape([batch, c_in * taps, h * w])
                .swap_dims(1, 2)
        };
        tap_conv(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            self.weight_groups,
            unfold,
            output,
        )
    }
}
