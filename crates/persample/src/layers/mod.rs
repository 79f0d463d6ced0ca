//! The drop-ins: burn-nn's layers with burn's configs, parameter names, records and forward
//! passes, which tap their inputs and output gradients while a
//! [`Recorder`](crate::Recorder) is active. One file per layer family; `conv` holds what the
//! convolutions share.

mod activation;
mod conv;
mod conv1d;
mod conv2d;
mod conv3d;
mod conv_transpose;
mod conv_transpose1d;
mod conv_transpose2d;
mod conv_transpose3d;
mod deform_conv2d;
mod embedding;
mod linear;
mod mirror;
mod norm;
mod prelu;
mod rnn;
mod transformer;

pub use activation::{
    Elementwise, Elu, Gelu, LeakyRelu, Relu, SiLU, Sigmoid, Softplus, Softsign, Tanh, elementwise,
};
pub use conv_transpose1d::ConvTranspose1d;
pub use conv_transpose2d::ConvTranspose2d;
pub use conv_transpose3d::ConvTranspose3d;
pub use conv1d::Conv1d;
pub use conv2d::Conv2d;
pub use conv3d::Conv3d;
pub use deform_conv2d::DeformConv2d;
pub use embedding::Embedding;
pub use linear::Linear;
pub use norm::{BatchNorm, GroupNorm, InstanceNorm, LayerNorm, Normalization, RmsNorm};
pub use prelu::PRelu;
pub use rnn::{BiGru, BiLstm, BiRnn, GateController, Gru, Lstm, Rnn, SwiGlu};
pub use transformer::{
    CrossAttention, MhaInput, MultiHeadAttention, PositionWiseFeedForward, TransformerDecoder,
    TransformerDecoderInput, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderInput,
    TransformerEncoderLayer,
};

#[cfg(test)]
mod tests {
    use burn::nn::conv::{Conv1dConfig, Conv2dConfig};
    use burn::nn::{
        EmbeddingConfig, GroupNormConfig, InstanceNormConfig, LayerNormConfig, LinearConfig,
        PReluConfig, RmsNormConfig, SwiGluConfig,
    };
    use burn::tensor::{Device, Distribution, Int, Tensor};

    use super::*;
    use crate::testing::close;

    /// One constructor style: `new(&config, device)`, and `as_burn()` gives burn's layer back,
    /// computing what the drop-in computes.
    #[test]
    fn as_burn_gives_the_layer_back() {
        let device = Device::default();
        let x3 = Tensor::<3>::random([2, 4, 6], Distribution::Normal(0.0, 1.0), &device);
        let x4 = Tensor::<4>::random([2, 4, 5, 6], Distribution::Normal(0.0, 1.0), &device);
        let linear = Linear::new(&LinearConfig::new(6, 3), &device);
        close(
            linear.forward(x3.clone()),
            linear.as_burn().forward(x3.clone()),
            "Linear",
        );
        let tokens = Tensor::<2, Int>::from_data([[1, 2, 0], [3, 3, 1]], &device);
        let embedding = Embedding::new(&EmbeddingConfig::new(4, 5), &device);
        close(
            embedding.forward(tokens.clone()),
            embedding.as_burn().forward(tokens),
            "Embedding",
        );
        let conv1 = Conv1d::new(&Conv1dConfig::new(4, 3, 2), &device);
        close(
            conv1.forward(x3.clone()),
            conv1.as_burn().forward(x3.clone()),
            "Conv1d",
        );
        let conv2 = Conv2d::new(&Conv2dConfig::new([4, 3], [2, 2]), &device);
        close(
            conv2.forward(x4.clone()),
            conv2.as_burn().forward(x4.clone()),
            "Conv2d",
        );
        let prelu = PRelu::new(&PReluConfig::new().with_num_parameters(4), &device);
        close(
            prelu.forward(x4.clone()),
            prelu.as_burn().forward(x4.clone()),
            "PRelu",
        );
        let group = GroupNorm::new(&GroupNormConfig::new(2, 4), &device);
        close(
            group.forward(x4.clone()),
            group.as_burn().forward(x4.clone()),
            "GroupNorm",
        );
        let instance = InstanceNorm::new(&InstanceNormConfig::new(4), &device);
        close(
            instance.forward(x4.clone()),
            instance.as_burn().forward(x4.clone()),
            "InstanceNorm",
        );
        let rms = RmsNorm::new(&RmsNormConfig::new(6).with_epsilon(1e-3), &device);
        close(
            rms.forward(x3.clone()),
            rms.as_burn().forward(x3.clone()),
            "RmsNorm",
        );
        let layer = LayerNorm::new(&LayerNormConfig::new(6).with_epsilon(1e-3), &device);
        close(
            layer.forward(x3.clone()),
            layer.as_burn().forward(x3.clone()),
            "LayerNorm",
        );
        let swiglu = SwiGlu::new(&SwiGluConfig::new(6, 3), &device);
        close(
            swiglu.forward(x3.clone()),
            swiglu.as_burn().forward(x3.clone()),
            "SwiGlu",
        );
        let encoder = TransformerEncoder::new(
            &burn::nn::transformer::TransformerEncoderConfig::new(6, 8, 2, 1).with_dropout(0.0),
            &device,
        );
        close(
            encoder.forward(TransformerEncoderInput::new(x3.clone())),
            encoder
                .as_burn()
                .forward(burn::nn::transformer::TransformerEncoderInput::new(x3)),
            "TransformerEncoder",
        );
    }
}
