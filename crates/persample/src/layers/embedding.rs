//! An instrumented drop-in for `burn::nn::Embedding`.

use burn::module::{Module, Param};
use burn::tensor::module::embedding;
use burn::tensor::{IndexingUpdateOp, Int, Tensor};

use super::mirror::mirrors_burn;
use crate::factors::Layout;
use crate::recorder::{is_recording, tap};

/// `burn::nn::Embedding` with per-sample statistics: identical parameter (`weight`
/// `[n_embedding, d_model]`), name, record and forward pass. A lookup is a Linear map of the
/// one-hot index, so while a [`Recorder`](crate::Recorder) is active it taps the one-hot
/// indices and the output gradients: the per-sample gradient `Σ_t onehot(i_{n,t}) e_{n,t}ᵀ`
/// scatters `e_{n,t}` into the rows sample `n` looked up.
///
/// Build it from a burn layer: `persample::Embedding::from(EmbeddingConfig::new(100, 16).init(&device))`.
///
/// # Cost
///
/// Without an active recorder: one thread-local check per forward. With one: the one-hot
/// indices are kept (`B·T·n_embedding` elements; large vocabularies make this large) and the
/// per-sample gradients are materialised per sample chunk when statistics are reduced.
#[derive(Module, Debug)]
pub struct Embedding {
    /// `[n_embedding, d_model]`, as in `burn::nn::Embedding`.
    pub weight: Param<Tensor<2>>,
}

mirrors_burn!(
    Embedding,
    burn::nn::Embedding,
    burn::nn::EmbeddingConfig { weight: value }
);

impl Embedding {
    /// The lookup `[B, T]` indices → `[B, T, d_model]`.
    pub fn forward(&self, indices: Tensor<2, Int>) -> Tensor<3> {
        let output = embedding(self.weight.val(), indices.clone());
        if !is_recording() {
            return output;
        }
        let [batch, positions] = indices.dims();
        let [n_embedding, _] = self.weight.dims();
        // The one-hot rows scattered straight into the output's float type: burn's `one_hot`
        // reads the indices back to the host (a device wait inside the forward pass) and
        // builds an integer one-hot first (as many values again).
        let rows = batch * positions;
        let options = (&output.device(), output.dtype());
        let one_hot = Tensor::<2>::zeros([rows, n_embedding], options)
            .scatter(
                1,
                indices.reshape([rows, 1]),
                Tensor::ones([rows, 1], options),
                IndexingUpdateOp::Assign,
            )
            .reshape([batch, positions, n_embedding]);
        tap(self.weight.id, None, Layout::InOut, &one_hot, output)
    }
}
