//! The quickstart's task — iris, a 4-16-3 classifier, SGD — trained by burn-train's `Learner`
//! with Cockpit's `economy` quantities as metrics.
//!
//! ```text
//! cargo run --example learner                        # flex; headless when piped (CI)
//! cargo run --example learner --features tui         # burn's terminal dashboard
//! cargo run --example learner --features wgpu        # GPU through wgpu
//! cargo run --example learner -- --devices 2          # burn's MultiDevice strategy, 2 workers
//! cargo run --example learner --features cuda -- --ddp 2   # burn's DDP strategy, 2 CUDA GPUs
//! ```
//!
//! With `--devices N` burn splits the data over `N` workers (the same backend's device `N`
//! times on a one-device machine) and sums their gradients; the Cockpit tracks each step on
//! the union of the workers' batches, as on one device. `--ddp N` runs burn's distributed
//! data-parallel strategy on CUDA devices `0..N` (burn 0.22's collective operations exist only
//! on CUDA): each worker reduces its own batch's statistics, one all-reduce joins them.
//!
//! Everything lands in `cockpit-logs/learner/`: burn's metric logs
//! (`train/epoch-N/Cockpit_<Quantity>.log`, next to `Loss.log`), Cockpit's log `cockpit.json`
//! (readable by the Python `CockpitPlotter` and by `cockpit plot`), the stream
//! `cockpit.jsonl` and the dashboard `dashboard.png`.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::optim::SgdConfig;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{
    ClassificationOutput, ExecutionStrategy, InferenceStep, Learner, MultiDeviceOptim,
    SupervisedTraining, TrainOutput, TrainStep, TrainingStrategy,
};
use burn_cockpit::train::{CockpitLearner, train_output_per_sample};
use burn_cockpit::{Configuration, OptimizerInfo, Schedule, backend};

/// The options (`--help`; unknown options are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// burn's MultiDevice strategy on this many workers (1: one device).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    devices: u64,
    /// burn's DDP strategy on CUDA devices `0..N` (0: off).
    #[arg(long, default_value_t = 0)]
    ddp: u64,
}
#[path = "common/iris.rs"]
mod iris;
use iris::Classifier;

const EPOCHS: usize = 10;
const BATCH: usize = 16;
const LR: f64 = 0.05;
const DIR: &str = "cockpit-logs/learner";

/// The training and validation step of the shared classifier.
impl Classifier {
    /// Logits and per-sample cross-entropy losses `[B]`.
    fn classify(&self, batch: IrisBatch) -> (ClassificationOutput, Tensor<1>) {
        let logits = self.forward(batch.x);
        let [b, _] = logits.dims();
        let losses = log_softmax(logits.clone(), 1)
            .gather(1, batch.y.clone().reshape([b, 1]))
            .reshape([b])
            .neg();
        let output = ClassificationOutput {
            loss: losses.clone().mean(),
            output: logits,
            targets: batch.y,
        };
        (output, losses)
    }
}

impl TrainStep for Classifier {
    type Input = IrisBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: IrisBatch) -> TrainOutput<ClassificationOutput> {
        let (item, losses) = self.classify(batch);
        // The one line Cockpit needs (instead of `TrainOutput::new(self, item.loss.backward(), item)`).
        train_output_per_sample(self, losses, item)
    }
}

impl InferenceStep for Classifier {
    type Input = IrisBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: IrisBatch) -> ClassificationOutput {
        self.classify(batch).0
    }
}

/// A batch of standardised features and class indices.
#[derive(Debug, Clone)]
pub struct IrisBatch {
    x: Tensor<2>,
    y: Tensor<1, Int>,
}

#[derive(Clone)]
struct IrisBatcher;

impl Batcher<([f64; 4], usize), IrisBatch> for IrisBatcher {
    fn batch(&self, items: Vec<([f64; 4], usize)>, device: &Device) -> IrisBatch {
        let n = items.len();
        let x: Vec<f32> = items
            .iter()
            .flat_map(|(x, _)| x.map(|v| v as f32))
            .collect();
        let y: Vec<i64> = items.iter().map(|(_, y)| *y as i64).collect();
        IrisBatch {
            x: Tensor::from_data(TensorData::new(x, [n, 4]), device),
            y: Tensor::from_data(TensorData::new(y, [n]), device),
        }
    }
}

fn loader((x, y): &(Vec<[f64; 4]>, Vec<usize>), device: &Device) -> Arc<dyn DataLoader<IrisBatch>> {
    let items: Vec<([f64; 4], usize)> = x.iter().copied().zip(y.iter().copied()).collect();
    DataLoaderBuilder::new(IrisBatcher)
        .batch_size(BATCH)
        .set_device(device.clone())
        .build(InMemDataset::new(items))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Args { devices, ddp } = clap::Parser::parse();
    let (devices, ddp) = (devices as usize, ddp as usize);
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    let data = iris::load_iris();
    println!("training on {backend_name}; logs in {DIR}/");

    let sgd = SgdConfig::new();
    let cockpit = CockpitLearner::new(
        Configuration::Economy,
        Schedule::every_step(),
        OptimizerInfo::from_sgd(&sgd, LR),
    )?
    .with_artifact_dir(DIR)?;
    let learner = Learner::new(
        cockpit.instrument(Classifier::new(&device))?,
        sgd.init(),
        LR,
    );
    let mut training = cockpit.register(SupervisedTraining::new(
        DIR,
        loader(&data.train, &device),
        loader(&data.test, &device),
    ));
    if ddp > 0 {
        training = training
            .with_training_strategy(TrainingStrategy::Default(ddp_strategy(&cockpit, ddp)?));
    } else if devices > 1 {
        println!("burn's MultiDevice strategy on {devices} workers");
        training =
            training.with_training_strategy(TrainingStrategy::Default(ExecutionStrategy::multi(
                vec![device.clone(); devices],
                MultiDeviceOptim::OptimMainDevice,
            )));
    }
    let training = training
        .metric_train_numeric(LossMetric::new())
        .metric_valid_numeric(LossMetric::new())
        .metric_valid_numeric(AccuracyMetric::new())
        .num_epochs(EPOCHS)
        .summary();
    let result = training.launch(learner);

    let log = cockpit.write()?;
    let dashboard = format!("{DIR}/dashboard.png");
    let options = burn_cockpit::plot::PlotOptions {
        title: format!("Cockpit for SGD (burn-train Learner, {backend_name})"),
        ..Default::default()
    };
    burn_cockpit::plot::save(&cockpit.output(), &dashboard, &options)?;
    for warning in cockpit.warnings() {
        eprintln!("cockpit warning: {warning}");
    }
    let out = cockpit.output();
    let alphas: Vec<f64> = out
        .series("Alpha")
        .iter()
        .filter_map(|(_, v)| v.as_f64())
        .collect();
    println!(
        "{} steps tracked; mean α {:.3}; Cockpit log {}; dashboard {dashboard}",
        cockpit.steps(),
        alphas.iter().sum::<f64>() / alphas.len().max(1) as f64,
        log.display()
    );
    let _model = result.model.into_inner();
    Ok(())
}

/// burn's DDP strategy on CUDA devices `0..n`, watched by `cockpit`.
#[cfg(feature = "cuda")]
fn ddp_strategy(
    cockpit: &CockpitLearner,
    n: usize,
) -> Result<ExecutionStrategy, Box<dyn std::error::Error>> {
    use burn::tensor::distributed::{DistributedConfig, ReduceOperation};
    println!("burn's DDP strategy on {n} CUDA devices");
    let devices = (0..n).map(|i| Device::cuda(i).autodiff()).collect();
    let config = DistributedConfig {
        all_reduce_op: ReduceOperation::Mean,
    };
    Ok(cockpit.ddp(devices, config)?)
}

/// Without CUDA there are no collective operations for burn's DDP strategy.
#[cfg(not(feature = "cuda"))]
fn ddp_strategy(
    _cockpit: &CockpitLearner,
    _n: usize,
) -> Result<ExecutionStrategy, Box<dyn std::error::Error>> {
    Err(
        "--ddp needs burn's collective operations, which burn 0.22 has only on CUDA: \
         build with `--features cuda` (on CPU, `--devices N` runs burn's MultiDevice strategy)"
            .into(),
    )
}
