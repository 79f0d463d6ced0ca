//! The smallest complete use of burn-cockpit with burn-train's `Learner`: the minimal
//! example's task and CNN, trained by the `Learner` with Cockpit's `economy` quantities as
//! metrics. README.md shows this file verbatim (a test keeps the two equal).
use std::sync::Arc;

use burn::data::dataloader::{DataLoader, DataLoaderBuilder, batcher::Batcher};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::{LinearConfig, conv::Conv2dConfig};
use burn::optim::SgdConfig;
use burn::tensor::{Device, Int, Tensor, TensorData, activation::relu};
use burn::train::{ClassificationOutput, InferenceStep, Learner, SupervisedTraining};
use burn::train::{TrainOutput, TrainStep, metric::LossMetric};
use burn_cockpit::persample::{Conv2d, Linear, loss::cross_entropy};
use burn_cockpit::prelude::*;
use burn_cockpit::train::{CockpitLearner, train_output_per_sample};

const LR: f64 = 0.1;
const DIR: &str = "cockpit-logs/learner-minimal";

#[derive(Module, Debug)]
struct Cnn {
    conv: Conv2d,
    fc: Linear,
}

#[derive(Debug, Clone)]
struct Batch {
    images: Tensor<4>,
    labels: Tensor<1, Int>,
}

impl Cnn {
    /// The batch's logits, targets and mean loss, and each example's loss `[B]`.
    fn classify(&self, batch: Batch) -> (ClassificationOutput, Tensor<1>) {
        let logits = self
            .fc
            .forward(relu(self.conv.forward(batch.images)).flatten(1, 3));
        let losses = cross_entropy(logits.clone(), batch.labels.clone());
        let loss = losses.clone().mean();
        (
            ClassificationOutput::new(loss, logits, batch.labels),
            losses,
        )
    }
}

impl TrainStep for Cnn {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        let (output, losses) = self.classify(batch);
        // The one line Cockpit needs, instead of `TrainOutput::new(self, loss.backward(), output)`.
        train_output_per_sample(self, losses, output)
    }
}

impl InferenceStep for Cnn {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        self.classify(batch).0
    }
}

/// A toy task: is the image's top-left corner brighter than average? (8×8 images.)
#[derive(Clone)]
struct Corners;

impl Batcher<Vec<f32>, Batch> for Corners {
    fn batch(&self, items: Vec<Vec<f32>>, device: &Device) -> Batch {
        let n = items.len();
        let corner = |image: &[f32]| (0..16).map(|i| image[(i / 4) * 8 + i % 4]).sum::<f32>();
        let labels: Vec<i64> = items.iter().map(|x| i64::from(corner(x) > 0.0)).collect();
        Batch {
            images: Tensor::from_data(TensorData::new(items.concat(), [n, 1, 8, 8]), device),
            labels: Tensor::from_data(TensorData::new(labels, [n]), device),
        }
    }
}

fn loader(seed: u64, device: &Device) -> Arc<dyn DataLoader<Batch>> {
    let pixel = |i: u64| ((seed + i).wrapping_mul(2654435761) % 1000) as f32 / 500.0 - 1.0;
    let images = (0..256)
        .map(|n| (0..64).map(|p| pixel(n * 64 + p)).collect())
        .collect();
    DataLoaderBuilder::new(Corners)
        .batch_size(16)
        .set_device(device.clone())
        .build(InMemDataset::new(images))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_, device) = burn_cockpit::backend::device()?; // flex; --features wgpu for a GPU
    let device = device.autodiff();
    let model = Cnn {
        conv: Conv2d::new(&Conv2dConfig::new([1, 4], [3, 3]), &device),
        fc: Linear::new(&LinearConfig::new(4 * 6 * 6, 2), &device),
    };
    let sgd = SgdConfig::new();
    let optimizer = OptimizerInfo::from_sgd(&sgd, LR);
    let cockpit = CockpitLearner::new(Configuration::Economy, Schedule::every_step(), optimizer)?
        .with_artifact_dir(DIR)?;
    let learner = Learner::new(cockpit.instrument(model)?, sgd.init(), LR);
    let training = SupervisedTraining::new(DIR, loader(0, &device), loader(7, &device));
    let result = cockpit
        .register(training)
        .metric_train_numeric(LossMetric::new())
        .num_epochs(4)
        .launch(learner);
    let log = cockpit.write()?; // Cockpit's log, for `cockpit plot` and `cockpit diagnose`
    println!("{} steps tracked; log {}", cockpit.steps(), log.display());
    let _model: Cnn = result.model.into_inner();
    Ok(())
}
