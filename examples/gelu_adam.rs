//! The most common first model, tracked: an MLP with GELU activations (20 → 64 → 64 → 3) on
//! three Gaussian blobs, trained by Adam at lr 1e-3 with batches of 32, `business` at every
//! step. Every layer is a drop-in (`persample::Linear`, `persample::Gelu`), each built as burn
//! builds its own. At the end: the log, the dashboard, and what `cockpit diagnose` says — a
//! healthy run, so nothing is flagged.
//!
//! ```text
//! cargo run --release --example gelu_adam                 # 300 steps
//! cargo run --release --example gelu_adam -- --steps 100
//! ```
//!
//! Under Adam, α reads differently from SGD: the step is Adam's, not the gradient's, and a
//! well-tuned Adam run sits at a median α below 0 (short, cautious steps), where an SGD run
//! sits slightly above it. CABS and EarlyStopping are refused (plain SGD only).
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::AdamConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::persample::{Gelu, Linear};
use burn_cockpit::prelude::*;

/// The classes (blobs).
pub const CLASSES: usize = 3;
/// Input features.
const FEATURES: usize = 20;
/// Examples per batch.
const BATCH: usize = 32;

/// A GELU MLP, every layer a drop-in.
#[derive(Module, Debug)]
pub struct Mlp {
    fc1: Linear,
    act1: Gelu,
    fc2: Linear,
    act2: Gelu,
    fc3: Linear,
}

impl Mlp {
    /// The network, initialised as burn initialises its layers.
    pub fn new(device: &Device) -> Self {
        Self {
            fc1: Linear::new(&LinearConfig::new(FEATURES, 64), device),
            act1: Gelu::new(),
            fc2: Linear::new(&LinearConfig::new(64, 64), device),
            act2: Gelu::new(),
            fc3: Linear::new(&LinearConfig::new(64, CLASSES), device),
        }
    }

    /// Logits `[B, 3]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let x = self.act1.forward(self.fc1.forward(x));
        let x = self.act2.forward(self.fc2.forward(x));
        self.fc3.forward(x)
    }
}

#[path = "common/splitmix.rs"]
mod splitmix;

/// Three Gaussian blobs: one centre per class, unit noise around it; the same batches on
/// every run (a fixed SplitMix64 stream).
pub struct Blobs {
    rng: splitmix::Rng,
    centres: Vec<Vec<f64>>,
}

impl Blobs {
    /// The blobs and their stream.
    pub fn new(seed: u64) -> Self {
        let mut rng = splitmix::Rng(seed);
        let centres = (0..CLASSES)
            .map(|_| (0..FEATURES).map(|_| rng.normal()).collect())
            .collect();
        Self { rng, centres }
    }

    /// A batch: inputs `[32, 20]` and labels `[32]`.
    pub fn batch(&mut self, device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
        let mut x = Vec::with_capacity(BATCH * FEATURES);
        let mut y = Vec::with_capacity(BATCH);
        for _ in 0..BATCH {
            let class = self.rng.below(CLASSES);
            for f in 0..FEATURES {
                x.push((self.centres[class][f] + self.rng.normal()) as f32);
            }
            y.push(class as i64);
        }
        (
            Tensor::from_data(TensorData::new(x, [BATCH, FEATURES]), device),
            Tensor::from_data(TensorData::new(y, [BATCH]), device),
        )
    }
}

/// Trains the model for `steps` steps on `device` with `business` at every step and returns
/// the Cockpit, calling `progress` after each step; with `seed`, the initial weights are drawn
/// from it (else burn draws them).
///
/// # Errors
///
/// What the Cockpit reports.
pub fn train(
    steps: usize,
    seed: Option<u64>,
    device: &Device,
    mut progress: impl FnMut(usize),
) -> Result<Cockpit, Box<dyn std::error::Error>> {
    let device = device.clone().autodiff();
    let mut model = Mlp::new(&device);
    if let Some(seed) = seed {
        // The same initial weights on every run (tests run beside others that draw from
        // burn's generator).
        model = model.map(&mut splitmix::Deterministic::new(seed));
    }
    let (adam, lr) = (AdamConfig::new(), 1e-3);
    let mut optimizer = adam.init();
    let mut cockpit =
        Cockpit::from_configuration(Configuration::Business, &Schedule::every_step())?
            .with_optimizer(OptimizerInfo::from_adam(&adam, lr));
    let mut blobs = Blobs::new(7);
    for step in 0..steps {
        let (x, y) = blobs.batch(&device);
        let forward = move |m: &Mlp| m.forward(x.clone());
        let stepped = cockpit.step(&model, forward, OutputLoss::classes(y, CLASSES))?;
        model = optimizer.step(lr, model, stepped.grads);
        if step % 50 == 49 || step + 1 == steps {
            let log = EpochLog {
                epoch_count: step / 50 + 1,
                learning_rate: Some(lr),
                ..EpochLog::default()
            };
            cockpit.log(step, &log)?;
        }
        progress(step);
    }
    Ok(cockpit)
}

/// The options.
#[derive(Debug, clap::Parser)]
struct Args {
    /// Optimizer steps.
    #[arg(long, default_value_t = 300)]
    steps: usize,
}

#[allow(dead_code)] // The tests train through `train` and never call `main`.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Args as clap::Parser>::parse();
    let (_, device) = burn_cockpit::backend::device()?;
    let bar = indicatif::ProgressBar::new(args.steps as u64);
    let mut cockpit = train(args.steps, None, &device, |_| bar.inc(1))?;
    bar.finish_and_clear();
    std::fs::create_dir_all("cockpit-logs")?;
    cockpit.write("cockpit-logs/gelu_adam.json")?;
    let drawn = burn_cockpit::plot::save(
        cockpit.output(),
        "cockpit-logs/gelu_adam.png",
        &PlotOptions::default(),
    )?;
    println!("wrote cockpit-logs/gelu_adam.json and cockpit-logs/gelu_adam.png");
    // Adam: the advice never asks for CABS or EarlyStopping (plain SGD only).
    if let Some(advice) = drawn.blank_advice_for(false) {
        println!("{advice}");
    }
    let diagnosis = burn_cockpit::diagnose::Diagnoser::new()
        .with_classes(CLASSES)
        .run(cockpit.output());
    print!("{}", diagnosis.report());
    Ok(())
}
