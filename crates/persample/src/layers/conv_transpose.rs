//! What the transposed-convolution drop-ins share: one definition, instantiated for 1, 2 and 3
//! spatial dimensions (burn's three layers differ only in the rank of their tensors and
//! settings).

/// A setting given per spatial dimension: burn's 1-d layer holds a `usize`, the others an
/// array.
pub(crate) trait PerDimension<const N: usize>: Copy {
    /// The setting of each of the `N` dimensions.
    fn per_dimension(self) -> [usize; N];
}

impl PerDimension<1> for usize {
    fn per_dimension(self) -> [usize; 1] {
        [self]
    }
}

impl<const N: usize> PerDimension<N> for [usize; N] {
    fn per_dimension(self) -> [usize; N] {
        self
    }
}

/// Defines the drop-in `$name` for `burn::nn::conv::$name` (config `$config`), on tensors of
/// rank `$rank` (`$dims` spatial dimensions) with settings of type `$setting`.
macro_rules! transposed_convolution {
    ($(#[$doc:meta])* $name:ident, $config:ident, $rank:literal, $dims:literal, $setting:ty) => {
        $(#[$doc])*
        ///
        /// Every setting burn allows: stride, padding, output padding, dilation, groups.
        ///
        /// # Cost
        ///
        /// Without an active recorder: one thread-local check per forward. With one: the input
        /// (`g` masked copies with `g` groups) through the forward and backward passes, the
        /// unfolded output gradient after them (`B·C_out·K·P` elements).
        #[derive(burn::module::Module, Debug)]
        pub struct $name {
            /// `[channels_in, channels_out / groups, kernel…]`.
            pub weight: burn::module::Param<burn::tensor::Tensor<$rank>>,
            /// `[channels_out]`.
            pub bias: Option<burn::module::Param<burn::tensor::Tensor<1>>>,
            /// Stride of the convolution.
            pub stride: $setting,
            /// Size of the kernel.
            pub kernel_size: $setting,
            /// Spacing between kernel elements.
            pub dilation: $setting,
            /// Connections between input and output channels.
            pub groups: usize,
            /// Padding removed from each side of the output.
            pub padding: $setting,
            /// Size added to one side of the output.
            pub padding_out: $setting,
            /// `[channels_in, channels_out]`.
            pub channels: [usize; 2],
        }

        impl From<burn::nn::conv::$name> for $name {
            fn from(layer: burn::nn::conv::$name) -> Self {
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

        impl $name {
            /// The layer `config` describes, initialised as burn initialises it.
            pub fn new(
                config: &burn::nn::conv::$config,
                device: &burn::tensor::Device,
            ) -> Self {
                config.init(device).into()
            }

            /// burn's layer with these parameters and settings.
            pub fn as_burn(&self) -> burn::nn::conv::$name {
                burn::nn::conv::$name {
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

            /// The forward pass, `[B, C_in, spatial…] → [B, C_out, spatial…]`, as burn's.
            pub fn forward(&self, input: burn::tensor::Tensor<$rank>) -> burn::tensor::Tensor<$rank> {
                use $crate::layers::conv_transpose::PerDimension;
                let output = self.as_burn().forward(input.clone());
                if !$crate::recorder::is_recording() {
                    return output;
                }
                $crate::layers::conv::record_transposed::<$rank, $dims>(
                    self.weight.id,
                    self.bias.as_ref().map(|b| b.id),
                    self.groups,
                    input,
                    output,
                    self.padding.per_dimension(),
                    $crate::layers::conv::Unfolding {
                        kernel: self.kernel_size.per_dimension(),
                        stride: self.stride.per_dimension(),
                        dilation: self.dilation.per_dimension(),
                    },
                )
            }
        }
    };
}

pub(crate) use transposed_convolution;
