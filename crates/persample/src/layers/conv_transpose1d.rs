//! An instrumented drop-in for `burn::nn::conv::ConvTranspose1d`.

use super::conv_transpose::transposed_convolution;

transposed_convolution! {
    /// `burn::nn::conv::ConvTranspose1d` with per-sample statistics: identical parameters,
    /// names and forward pass; while a [`Recorder`](crate::Recorder) is active it taps the
    /// input `X` `[B, C_in, P]` and unfolds the output gradient after the backward pass into
    /// `U(E)` `[B, C_out·K, P]` (one window of the uncropped output per input position), so
    /// the per-sample weight gradient is `G_n = X_n U(E_n)ᵀ` (`[C_in, C_out/g·K]`, a tap kind
    /// of its own: the output gradient, not the input, is unfolded).
    ConvTranspose1d, ConvTranspose1dConfig, 3, 1, usize
}
