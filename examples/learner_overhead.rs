//! The Learner row of the overhead benchmark: one epoch of burn-train's `Learner` on the MLP
//! of `PERFORMANCE_ANCHOR` (784-256-128-10, ReLU, cross-entropy, batch 128, SGD lr 0.01,
//! random inputs), plain against the same run with Cockpit's `economy` metrics, measured in
//! one process (run it in release):
//!
//! ```text
//! cargo run --release --example learner_overhead [-- --steps 30 --repeats 3] 2>&1 >/dev/null
//! ```
//!
//! Results go to stderr (burn's headless renderer prints a line per iteration on stdout).
//! Each run is a whole `launch`: data loading, the training split, a one-batch validation
//! split and burn's metric processing are in both the plain and the tracked time.

use std::sync::Arc;
use std::time::Instant;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::SgdConfig;
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn::train::metric::LossMetric;
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use burn_cockpit::persample::Linear;
use burn_cockpit::train::{CockpitLearner, train_output_per_sample};
use burn_cockpit::{Configuration, OptimizerInfo, Schedule, backend};

#[path = "common/bench.rs"]
mod bench;
use bench::median;

/// The options (`--help`; unknown options are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// Steps per epoch (one epoch per run).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Runs per configuration (the median is printed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
}

const BATCH: usize = 128;
const LR: f64 = 0.01;

#[derive(Module, Debug)]
struct Mlp {
    l1: Linear,
    l2: Linear,
    l3: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            l1: LinearConfig::new(784, 256).init(device).into(),
            l2: LinearConfig::new(256, 128).init(device).into(),
            l3: LinearConfig::new(128, 10).init(device).into(),
        }
    }

    fn forward(&self, batch: Batch) -> (ClassificationOutput, Tensor<1>) {
        let x = relu(self.l2.forward(relu(self.l1.forward(batch.x))));
        let logits = self.l3.forward(x);
        let [b, _] = logits.dims();
        let losses = log_softmax(logits.clone(), 1)
            .gather(1, batch.y.clone().reshape([b, 1]))
            .reshape([b])
            .neg();
        let item = ClassificationOutput {
            loss: losses.clone().mean(),
            output: logits,
            targets: batch.y,
        };
        (item, losses)
    }
}

impl TrainStep for Mlp {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        let (item, losses) = self.forward(batch);
        train_output_per_sample(self, losses, item)
    }
}

impl InferenceStep for Mlp {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        self.forward(batch).0
    }
}

#[derive(Debug, Clone)]
struct Batch {
    x: Tensor<2>,
    y: Tensor<1, Int>,
}

#[derive(Clone)]
struct RandomBatcher;

impl Batcher<(Vec<f32>, i64), Batch> for RandomBatcher {
    fn batch(&self, items: Vec<(Vec<f32>, i64)>, device: &Device) -> Batch {
        let n = items.len();
        let x: Vec<f32> = items.iter().flat_map(|(x, _)| x.iter().copied()).collect();
        let y: Vec<i64> = items.iter().map(|(_, y)| *y).collect();
        Batch {
            x: Tensor::from_data(TensorData::new(x, [n, 784]), device),
            y: Tensor::from_data(TensorData::new(y, [n]), device),
        }
    }
}

fn items(n: usize, seed: u64) -> Vec<(Vec<f32>, i64)> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    (0..n)
        .map(|_| {
            // Box–Muller: standard normal inputs, uniform labels.
            let x = (0..784)
                .map(|_| {
                    let (u, v) = (next().max(1e-12), next());
                    ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
                })
                .collect();
            (x, (next() * 10.0) as i64 % 10)
        })
        .collect()
}

fn loader(items: &[(Vec<f32>, i64)], device: &Device) -> Arc<dyn DataLoader<Batch>> {
    DataLoaderBuilder::new(RandomBatcher)
        .batch_size(BATCH)
        .set_device(device.clone())
        .build(InMemDataset::new(items.to_vec()))
}

/// The settings both runs share.
fn training<M>(t: SupervisedTraining<M>) -> SupervisedTraining<M>
where
    M: burn::train::LearnerModel + TrainStep<Output = ClassificationOutput>,
{
    t.metric_train_numeric(LossMetric::new())
        .with_application_logger(None)
        .num_epochs(1)
}

/// Seconds for one `launch` of one epoch; `cockpit` = None trains the plain model.
fn run(
    device: &Device,
    train: &[(Vec<f32>, i64)],
    valid: &[(Vec<f32>, i64)],
    cockpit: Option<CockpitLearner>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join("burn-cockpit-learner-overhead");
    let model = Mlp::new(device);
    let start = Instant::now();
    match cockpit {
        None => {
            let learner = Learner::new(model, SgdConfig::new().init(), LR);
            let _ = training(SupervisedTraining::new(
                &dir,
                loader(train, device),
                loader(valid, device),
            ))
            .launch(learner);
        }
        Some(cockpit) => {
            let learner = Learner::new(cockpit.instrument(model)?, SgdConfig::new().init(), LR);
            let _ = training(cockpit.register(SupervisedTraining::new(
                &dir,
                loader(train, device),
                loader(valid, device),
            )))
            .launch(learner);
            if !cockpit.warnings().is_empty() {
                eprintln!("warnings: {:?}", cockpit.warnings());
            }
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    let args: Args = clap::Parser::parse();
    let (steps, repeats) = (args.steps as usize, args.repeats as usize);
    let train = items(steps * BATCH, 1);
    let valid = items(BATCH, 2);
    let economy = |interval: usize| -> Result<CockpitLearner, Box<dyn std::error::Error>> {
        Ok(CockpitLearner::new(
            Configuration::Economy,
            Schedule::linear(interval, 0)?,
            OptimizerInfo::sgd(LR),
        )?)
    };
    run(&device, &train[..3 * BATCH], &valid, None)?; // warm-up
    let (mut plain, mut every, mut sixteenth) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        plain.push(run(&device, &train, &valid, None)?);
        every.push(run(&device, &train, &valid, Some(economy(1)?))?);
        sixteenth.push(run(&device, &train, &valid, Some(economy(16)?))?);
    }
    let plain = median(plain);
    eprintln!(
        "backend {backend_name}; Learner, mlp 784-256-128-10, batch {BATCH}, {steps} steps x {repeats} repeats, median"
    );
    eprintln!(
        "plain Learner epoch: {:.3} ms/step",
        plain * 1e3 / steps as f64
    );
    for (name, times) in [
        ("economy every step", every),
        ("economy every 16th step", sixteenth),
    ] {
        let t = median(times);
        eprintln!(
            "overhead learner {name} {:.3}   ({:.3} ms/step)",
            t / plain,
            t * 1e3 / steps as f64
        );
    }
    Ok(())
}
