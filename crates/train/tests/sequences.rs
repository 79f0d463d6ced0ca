//! A tagger (per-token classes `[B, T, V]`, padded targets) in burn's `Learner` through
//! `train_output_with_loss`: the same per-sequence record as `Cockpit::step_with_ids` on the
//! same steps, each sequence's worst token included, and that token checked against a loop
//! over the tokens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::{EmbeddingConfig, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use cockpit_quantities::curvature::OutputLoss;
use cockpit_quantities::persample::{Embedding, Linear};
use cockpit_quantities::{Cockpit, OptimizerInfo, QuantityKind, Schedule};
use cockpit_train::CockpitLearner;

const LR: f64 = 0.5;
const TAGS: usize = 4;
const WORDS: usize = 6;
const LENGTH: usize = 5;
const PAD: i64 = TAGS as i64;
const BATCH: usize = 4;
const SEQUENCES: usize = 12;

#[derive(Module, Debug)]
struct Tagger {
    words: Embedding,
    hidden: Linear,
    out: Linear,
}

impl Tagger {
    fn new(device: &Device) -> Self {
        Self {
            words: EmbeddingConfig::new(WORDS, 6).init(device).into(),
            hidden: LinearConfig::new(6, 8).init(device).into(),
            out: LinearConfig::new(8, TAGS).init(device).into(),
        }
    }

    /// Tag logits `[B, T, TAGS]`.
    fn forward(&self, words: Tensor<2, Int>) -> Tensor<3> {
        self.out
            .forward(relu(self.hidden.forward(self.words.forward(words))))
    }
}

#[derive(Debug, Clone)]
struct Batch {
    words: Tensor<2, Int>,
    /// Tags, `PAD` past a sequence's end.
    tags: Tensor<2, Int>,
    ids: Vec<u64>,
}

impl Batch {
    fn loss(&self) -> OutputLoss {
        OutputLoss::tokens_with_padding(self.tags.clone(), TAGS, PAD)
    }
}

/// burn's output item: the tokens as rows (what burn's metrics would read).
fn item(logits: Tensor<3>, batch: &Batch, loss: Tensor<1>) -> ClassificationOutput {
    let [b, t, v] = logits.dims();
    ClassificationOutput {
        loss,
        output: logits.reshape([b * t, v]),
        targets: batch.tags.clone().reshape([b * t]),
    }
}

impl TrainStep for Tagger {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        let logits = self.forward(batch.words.clone());
        let loss = batch.loss();
        let item = item(
            logits.clone(),
            &batch,
            loss.per_sample(logits.clone()).mean(),
        );
        cockpit_train::train_output_with_loss(self, &loss, logits, batch.ids.clone(), item)
    }
}

impl InferenceStep for Tagger {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        let logits = self.forward(batch.words.clone());
        let loss = batch.loss().per_sample(logits.clone()).mean();
        item(logits, &batch, loss)
    }
}

#[derive(Debug, Clone)]
struct Sentence {
    words: [i64; LENGTH],
    tags: [i64; LENGTH],
    id: u64,
}

#[derive(Clone)]
struct SentenceBatcher;

impl Batcher<Sentence, Batch> for SentenceBatcher {
    fn batch(&self, items: Vec<Sentence>, device: &Device) -> Batch {
        let n = items.len();
        let words: Vec<i64> = items.iter().flat_map(|s| s.words).collect();
        let tags: Vec<i64> = items.iter().flat_map(|s| s.tags).collect();
        Batch {
            words: Tensor::from_data(TensorData::new(words, [n, LENGTH]), device),
            tags: Tensor::from_data(TensorData::new(tags, [n, LENGTH]), device),
            ids: items.iter().map(|s| s.id).collect(),
        }
    }
}

/// Sentences of 3 to 5 words; a word's tag is mostly its own number mod 4, with one odd
/// tag in every third sentence; shorter sentences end in padding.
fn sentences() -> Vec<Sentence> {
    (0..SEQUENCES)
        .map(|i| {
            let length = 3 + i % 3;
            let mut words = [0; LENGTH];
            let mut tags = [PAD; LENGTH];
            for t in 0..LENGTH {
                words[t] = ((i * 5 + t) % WORDS) as i64; // distinct within a sentence
                if t < length {
                    tags[t] = words[t] % TAGS as i64;
                }
            }
            if i % 3 == 0 {
                tags[1] = (tags[1] + 1) % TAGS as i64;
            }
            Sentence {
                words,
                tags,
                id: 100 + i as u64,
            }
        })
        .collect()
}

fn loader(device: &Device) -> Arc<dyn DataLoader<Batch>> {
    DataLoaderBuilder::new(SentenceBatcher)
        .batch_size(BATCH)
        .set_device(device.clone())
        .build(InMemDataset::new(sentences()))
}

fn kinds() -> Vec<QuantityKind> {
    vec![
        QuantityKind::Loss,
        QuantityKind::GradNorm,
        QuantityKind::Examples,
    ]
}

/// Each token's cross-entropy of a sequence, from its logits (a loop over the tokens).
fn token_losses(logits: &[f32], tags: &[i64]) -> Vec<Option<f64>> {
    tags.iter()
        .enumerate()
        .map(|(t, &tag)| {
            (tag != PAD).then(|| {
                let row: Vec<f64> = logits[t * TAGS..(t + 1) * TAGS]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let log_sum = row.iter().map(|v| (v - max).exp()).sum::<f64>().ln() + max;
                log_sum - row[tag as usize]
            })
        })
        .collect()
}

#[test]
fn a_tagger_in_the_learner_records_each_sequence_and_its_worst_token() {
    let device = Device::flex().autodiff();
    let model = Tagger::new(&device);

    // The reference: `Cockpit::step_with_ids` over the same batches in the same order.
    let mut reference = Cockpit::from_kinds(kinds(), &Schedule::every_step())
        .unwrap()
        .with_optimizer(OptimizerInfo::sgd(LR))
        .with_console(false);
    let mut optimizer = SgdConfig::new().init();
    let mut stepped_model = model.clone();
    let mut last_logits = Vec::new();
    for batch in loader(&device).iter() {
        let batch = batch.unwrap();
        let words = batch.words.clone();
        let logits: Vec<f32> = stepped_model
            .forward(words.clone())
            .into_data()
            .try_to_vec()
            .unwrap();
        last_logits.push((batch.clone(), logits));
        let stepped = reference
            .step_with_ids(
                &stepped_model,
                move |m: &Tagger| m.forward(words.clone()),
                batch.loss(),
                batch.ids.clone(),
            )
            .unwrap();
        assert!(stepped.report.is_complete(), "{:?}", stepped.report);
        stepped_model = optimizer.step(LR, stepped_model, stepped.grads);
    }

    // The Learner, one epoch.
    let dir = std::env::temp_dir().join(format!("cockpit-train-tagger-{}", std::process::id()));
    let cockpit =
        CockpitLearner::from_kinds(kinds(), Schedule::every_step(), OptimizerInfo::sgd(LR))
            .unwrap()
            .with_artifact_dir(&dir)
            .unwrap();
    let learner = Learner::new(
        cockpit.instrument(model).unwrap(),
        SgdConfig::new().init(),
        LR,
    );
    let training = cockpit
        .register(SupervisedTraining::new(
            &dir,
            loader(&device),
            loader(&device),
        ))
        .with_application_logger(None)
        .num_epochs(1);
    training.launch(learner);
    assert!(cockpit.warnings().is_empty(), "{:?}", cockpit.warnings());

    let (want, have) = (reference.examples().unwrap(), cockpit.examples().unwrap());
    assert_eq!(want.len(), SEQUENCES, "every sequence recorded");
    assert_eq!(have.len(), SEQUENCES);
    for (a, b) in want.rows().into_iter().zip(have.rows()) {
        assert_eq!((a.id, a.seen), (b.id, b.seen));
        assert_eq!(a.worst_position, b.worst_position, "sequence {}", a.id);
        for (x, y) in [
            (a.loss_mean, b.loss_mean),
            (a.margin_mean, b.margin_mean),
            (a.worst_position_loss, b.worst_position_loss),
        ] {
            assert!((x - y).abs() <= 1e-6 * x.abs().max(1.0), "{a:?} vs {b:?}");
        }
    }

    // Each sequence's worst token against a loop over its tokens' losses (one visit each:
    // the record's last visit is the batch's forward before its step).
    let mut checked = 0;
    for (batch, logits) in &last_logits {
        let tags: Vec<i64> = batch
            .tags
            .clone()
            .into_data()
            .convert::<i64>()
            .try_to_vec()
            .unwrap();
        for (n, id) in batch.ids.iter().enumerate() {
            let losses = token_losses(
                &logits[n * LENGTH * TAGS..(n + 1) * LENGTH * TAGS],
                &tags[n * LENGTH..(n + 1) * LENGTH],
            );
            let (position, worst) = losses
                .iter()
                .enumerate()
                .filter_map(|(t, l)| l.map(|l| (t, l)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            let counted: Vec<f64> = losses.iter().flatten().copied().collect();
            let mean = counted.iter().sum::<f64>() / counted.len() as f64;
            let row = have.get(*id).unwrap();
            assert_eq!(row.worst_position, Some(position as u64), "{row:?}");
            assert!(
                (row.worst_position_loss - worst).abs() < 1e-4,
                "{row:?} vs {worst}"
            );
            assert!((row.loss_last - mean).abs() < 1e-4, "{row:?} vs {mean}");
            checked += 1;
        }
    }
    assert_eq!(checked, SEQUENCES);
    let _ = std::fs::remove_dir_all(&dir);
}
