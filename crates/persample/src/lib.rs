//! # cockpit-persample
//!
//! Per-sample gradient statistics for burn models: the role BackPACK plays for Cockpit, and
//! what DP-SGD's per-sample clipping needs (`examples/dp_sgd.rs`). Useful without Cockpit.
//!
//! burn has no backward hooks and no gradients of intermediate tensors, and its autodiff is
//! first-order only. Two engines produce per-sample statistics anyway:
//!
//! - **fast path** ([`Recording`]): build the model from the drop-ins for burn's layers,
//!   with burn's configs, parameter names and records — [`Linear`], [`Embedding`], the
//!   convolutions [`Conv1d`], [`Conv2d`], [`Conv3d`], [`ConvTranspose1d`], [`ConvTranspose2d`],
//!   [`ConvTranspose3d`], [`DeformConv2d`], the norms [`LayerNorm`], [`RmsNorm`],
//!   [`GroupNorm`], [`InstanceNorm`], [`BatchNorm`], [`Normalization`], [`PRelu`], the
//!   recurrent layers [`Rnn`], [`Lstm`], [`Gru`], [`BiRnn`], [`BiLstm`], [`BiGru`] (through
//!   [`GateController`]), [`SwiGlu`], and the attention and transformer blocks
//!   [`MultiHeadAttention`], [`CrossAttention`], [`PositionWiseFeedForward`],
//!   [`TransformerEncoderLayer`], [`TransformerEncoder`], [`TransformerDecoderLayer`],
//!   [`TransformerDecoder`] — and wrap the forward and backward pass of a tracked step in a
//!   [`Recorder`]. Each layer then taps its input and adds a zero-valued leaf to its output;
//!   the leaf's gradient, from the ordinary backward pass, is `∂L/∂output`. Per-sample norms,
//!   dot products and sums of squares follow in closed form, layer by layer. The activation
//!   drop-ins ([`Sigmoid`], [`Tanh`], [`Gelu`], [`SiLU`], [`Softplus`], [`Elu`],
//!   [`Softsign`], [`Relu`], [`LeakyRelu`], and [`elementwise`]) have no parameters; under
//!   [`Recorder::start_with_activations`] a curved one records what curvature sources need
//!   for an exact Hessian diagonal.
//! - **exact fallback** ([`ExactPerSample`]): single-sample backward passes, for any model.
//!
//! [`MergedPerSample`] joins the parts of one batch (micro-batches of gradient accumulation,
//! shards on several devices) by merging their statistics exactly.
//!
//! [`PerSample::auto`] picks the fast path when it covers every parameter. Quantities see only
//! the [`PerSampleSource`] trait; the engines know nothing of histograms or tests.
//!
//! # Memory
//!
//! Statistics are reduced parameter by parameter. Per-sample gradients are materialised only
//! for the gradient-element histograms (and Linear layers applied to sequences), one parameter
//! and one chunk of samples at a time (`Request::chunk_elements`, 4 Mi elements by default):
//! the peak is the recorded inputs and output gradients (`B·(d_in + d_out)` per layer) plus
//! one chunk.

mod base;
mod distributed;
mod error;
mod exact;
mod factors;
pub mod launches;
mod layers;
pub mod loss;
mod merged;
pub mod readback;
mod recorder;
pub mod reduce;
mod snapshot;
mod statistic;
#[cfg(test)]
mod testing;

pub use base::{Elements, PerSampleSource, Request};
pub use distributed::{
    BurnCollective, Collective, GroupStats, LocalCollective, ReducedPerSample, all_reduce_stats,
};
pub use error::{ErrorChain, PerSampleError, SharedError};
pub use exact::{ExactPerSample, PerSample};
pub use factors::{Coverage, RecordedActivation, Recording};
pub use layers::{
    BatchNorm, BiGru, BiLstm, BiRnn, Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
    ConvTranspose3d, CrossAttention, DeformConv2d, Embedding, GateController, GroupNorm, Gru,
    InstanceNorm, LayerNorm, Linear, Lstm, MhaInput, MultiHeadAttention, Normalization, PRelu,
    PositionWiseFeedForward, RmsNorm, Rnn, SwiGlu, TransformerDecoder, TransformerDecoderInput,
    TransformerDecoderLayer, TransformerEncoder, TransformerEncoderInput, TransformerEncoderLayer,
};
pub use layers::{
    Elementwise, Elu, Gelu, LeakyRelu, Relu, SiLU, Sigmoid, Softplus, Softsign, Tanh, elementwise,
};
pub use merged::MergedPerSample;
pub use recorder::Recorder;
pub use snapshot::{ParamEntry, Snapshot};
pub use statistic::{Combine, Direction, PerSampleNeeds, PerSampleStats, Statistic, Statistics};
