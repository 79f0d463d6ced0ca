//! The drop-ins: burn-nn's layers with burn's configs, parameter names, records and forward
//! passes, which tap their inputs and output gradients while a
//! [`Recorder`](crate::Recorder) is active. One file per layer family; `conv` holds what the
//! convolutions share.

mod conv;
mod conv1d;
mod conv2d;
mod conv3d;
mod conv_transpose1d;
mod conv_transpose2d;
mod conv_transpose3d;
mod deform_conv2d;
mod embedding;
mod linear;
mod norm;
mod prelu;
mod rnn;
mod transformer;

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
