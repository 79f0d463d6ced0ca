//! The rest of burn-nn on the fast path (issue 25): small models built as burn users build
//! them, each equal to single-sample backward passes for all nine per-sample quantities over
//! three steps, with complete coverage (`fast_path_against_single_sample_passes`).

use crate::common;
use crate::common::Backend;
use crate::per_sample::fast_path_against_single_sample_passes;
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::persample::{BiGru, BiLstm, BiRnn, Embedding, Linear, Rnn};

/// Tokens `[samples, length]` of step `step` (a fixed pattern over 9 tokens).
fn tokens(
    device: &Device,
    batch: usize,
    length: usize,
    step: usize,
    samples: std::ops::Range<usize>,
) -> Tensor<2, Int> {
    let all: Vec<i64> = (0..batch * length)
        .map(|i| ((i * 4 + step * 5 + i / length) % 9) as i64)
        .collect();
    let picked = &all[samples.start * length..samples.end * length];
    Tensor::from_data(
        TensorData::new(picked.to_vec(), [samples.len(), length]),
        device,
    )
}

/// A bidirectional tagger: token Embedding, BiLstm (batch-first), BiGru (sequence-first,
/// `reset_after` off), BiRnn (ReLU, clipped), Rnn (reversed), mean over time, Linear head.
#[derive(Module, Debug)]
struct Tagger {
    embedding: Embedding,
    bilstm: BiLstm,
    bigru: BiGru,
    birnn: BiRnn,
    rnn: Rnn,
    head: Linear,
}

impl Tagger {
    fn new(device: &Device) -> Self {
        use burn::nn::activation::ActivationConfig;
        use burn::nn::{BiGruConfig, BiLstmConfig, BiRnnConfig, EmbeddingConfig, RnnConfig};
        Self {
            embedding: EmbeddingConfig::new(9, 4).init(device).into(),
            bilstm: BiLstm::new(&BiLstmConfig::new(4, 3, true).with_clip(Some(2.0)), device),
            bigru: BiGru::new(
                &BiGruConfig::new(6, 3, true)
                    .with_batch_first(false)
                    .with_reset_after(false),
                device,
            ),
            birnn: BiRnn::new(
                &BiRnnConfig::new(6, 2, true)
                    .with_clip(Some(1.5))
                    .with_hidden_activation(ActivationConfig::Relu),
                device,
            ),
            rnn: Rnn::new(&RnnConfig::new(4, 3, false).with_reverse(true), device),
            head: LinearConfig::new(3, 3).init(device).into(),
        }
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let (h, _) = self.bilstm.forward(self.embedding.forward(tokens), None);
        let (h, _) = self.bigru.forward(h.swap_dims(0, 1), None);
        let (h, _) = self.birnn.forward(h.swap_dims(0, 1), None);
        let (h, _) = self.rnn.forward(h, None);
        self.head.forward(h.mean_dim(1).squeeze_dim::<2>(1))
    }
}

/// Rnn and the bidirectional BiLstm, BiGru and BiRnn on the fast path.
fn bidirectional_tagger_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, length) = (5, 4);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        Tagger::new(&device),
        batch,
        move |model: &Tagger, step, samples| {
            model.forward(tokens(&dev, batch, length, step, samples))
        },
    );
}

on_every_backend!(bidirectional_tagger_equals_single_sample_passes);
