//! An instrumented drop-in for `burn::nn::Linear`.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::module::linear;

use super::mirror::mirrors_burn;
use crate::factors::Layout;
use crate::recorder::{is_recording, tap};

/// `burn::nn::Linear` with per-sample statistics: identical parameters (`weight` `[d_input,
/// d_output]`, optional `bias`), names and forward pass; while a
/// [`Recorder`](crate::Recorder) is active it also taps its input and output for the fast
/// per-sample path (BackPACK's `extend`).
///
/// Build it from a burn layer: `persample::Linear::from(LinearConfig::new(4, 8).init(&device))`.
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: the input is kept
/// (`B·d_input` elements) and a zero leaf is added to the output.
#[derive(Module, Debug)]
pub struct Linear {
    /// `[d_input, d_output]`, as in `burn::nn::Linear`.
    pub weight: Param<Tensor<2>>,
    /// `[d_output]`.
    pub bias: Option<Param<Tensor<1>>>,
}

mirrors_burn!(
    Linear,
    burn::nn::Linear,
    burn::nn::LinearConfig {
        weight: value,
        bias: value,
    }
);

impl Linear {
    /// The forward pass, `[..., d_input] → [..., d_output]`; the first dimension is the batch.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let weight = self.weight.val();
        let output = linear(input.clone(), weight, self.bias.as_ref().map(Param::val));
        if D < 2 || !is_recording() {
            return output;
        }
        let out_shape = output.shape();
        let dims = input.dims();
        let (batch, d_in) = (dims[0], dims[D - 1]);
        let d_out = out_shape[D - 1];
        let positions = dims[1..D - 1].iter().product::<usize>();
        let input3 = input.reshape([batch, positions, d_in]);
        let tapped = tap(
            self.weight.id,
            self.bias.as_ref().map(|b| b.id),
            Layout::InOut,
            &input3,
            output.reshape([batch, positions, d_out]),
        );
        tapped.reshape(out_shape)
    }
}
