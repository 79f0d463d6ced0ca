//! The long run of `examples/long_run.rs` and of the resume tests: the benchmark MLP
//! (32-64-10, ReLU, cross-entropy, batch 16, plain SGD lr 0.05) on generated data, `economy`
//! every step, written to a run record as it goes, with the model checkpointed every
//! `checkpoint_every` steps (burn's burnpack record, replaced atomically) and the Cockpit's
//! state saved in the record at the same steps. The batch of step `s` is drawn from a stream
//! seeded with `s` alone, so a resumed run sees the batches an uninterrupted one sees.
#![allow(dead_code)] // The example and the tests use different parts.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::SgdConfig;
use burn::store::ModuleRecord;
use burn::tensor::{Device, Int, Tensor, TensorData, activation::relu};
use burn_cockpit::persample::Linear;
use burn_cockpit::prelude::*;
use burn_cockpit::record::RunRecord;

#[path = "splitmix.rs"]
mod splitmix;
use splitmix::{Deterministic, Rng};

/// Inputs, hidden units, classes and batch size of the benchmark MLP.
pub const INPUTS: usize = 32;
pub const HIDDEN: usize = 64;
pub const CLASSES: usize = 10;
pub const BATCH: usize = 16;
const LR: f64 = 0.05;

/// The benchmark MLP.
#[derive(Module, Debug)]
pub struct Mlp {
    hidden: Linear,
    out: Linear,
}

impl Mlp {
    /// The same initial weights on every run.
    pub fn new(device: &Device) -> Self {
        let model = Self {
            hidden: Linear::new(&LinearConfig::new(INPUTS, HIDDEN), device),
            out: Linear::new(&LinearConfig::new(HIDDEN, CLASSES), device),
        };
        model.map(&mut Deterministic::new(7))
    }

    /// The logits.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(relu(self.hidden.forward(x)))
    }
}

/// The batch of step `step`: normal inputs, labels from a fixed rule (the sign pattern of the
/// first inputs) with one label in eight flipped.
pub fn batch(step: usize, device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
    let mut rng = Rng(0x5eed_0000 ^ step as u64);
    let mut x = Vec::with_capacity(BATCH * INPUTS);
    let mut y = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        let row: Vec<f32> = (0..INPUTS).map(|_| rng.normal() as f32).collect();
        let mut label = (0..3).fold(0, |acc, k| 2 * acc + usize::from(row[k] > 0.0)) % CLASSES;
        if rng.below(8) == 0 {
            label = rng.below(CLASSES);
        }
        x.extend(row);
        y.push(label as i64);
    }
    (
        Tensor::from_data(TensorData::new(x, [BATCH, INPUTS]), device),
        Tensor::from_data(TensorData::new(y, [BATCH]), device),
    )
}

/// The resident set size in MB (Linux; `NaN` elsewhere).
pub fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Where a run keeps its model checkpoints: beside the record, `<record>.ckpt/<step>.bpk`.
pub fn checkpoint_dir(record: &Path) -> PathBuf {
    let mut name = record.as_os_str().to_owned();
    name.push(".ckpt");
    PathBuf::from(name)
}

/// The newest model checkpoints, newest first, `(step, path)`.
fn checkpoints(dir: &Path) -> Vec<(usize, PathBuf)> {
    let mut found: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let step = path
                .file_name()?
                .to_str()?
                .strip_suffix(".bpk")?
                .parse()
                .ok()?;
            Some((step, path))
        })
        .collect();
    found.sort_by_key(|(step, _)| std::cmp::Reverse(*step));
    found
}

/// How a run is asked for.
#[derive(Debug, Clone)]
pub struct LongRun {
    /// Steps in all (a resumed run ends at the same step).
    pub steps: usize,
    /// The run record.
    pub record: PathBuf,
    /// Continue the record from its newest checkpoint.
    pub resume: bool,
    /// Model checkpoint and Cockpit state every this many steps.
    pub checkpoint_every: usize,
}

/// What a run did.
#[derive(Debug, Clone, Copy)]
pub struct Ran {
    /// The step it started at (0, or a checkpoint's).
    pub from: usize,
    /// The time the record took (encoding, writing, committing, states).
    pub record_time: std::time::Duration,
}

/// Runs (or resumes) the long run; `each(step)` is called after every step.
pub fn run(
    options: &LongRun,
    device: &Device,
    mut each: impl FnMut(usize),
) -> Result<Ran, Box<dyn std::error::Error>> {
    let device = device.clone().autodiff();
    let dir = checkpoint_dir(&options.record);
    let sgd = SgdConfig::new();
    let mut optimizer = sgd.init();
    let new_cockpit = || {
        Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step()).map(|c| {
            c.with_optimizer(OptimizerInfo::from_sgd(&sgd, LR))
                .with_console(false)
        })
    };
    let mut model = Mlp::new(&device);
    let mut from = 0;
    let mut cockpit = None;
    if options.resume {
        // The newest model checkpoint whose Cockpit state is in the record (a kill between
        // the two saves leaves the model's newer: the one before it is taken).
        for (step, path) in checkpoints(&dir) {
            let record = RunRecord::open(&options.record)?;
            let loaded = Mlp::new(&device).load_record(ModuleRecord::load(&path)?);
            match new_cockpit()?.resume(record, step, &loaded) {
                Ok(resumed) => {
                    model = loaded;
                    from = step;
                    cockpit = Some(resumed);
                    break;
                }
                Err(burn_cockpit::CockpitError::Record(
                    burn_cockpit::record::RecordError::NoState { .. },
                )) => continue,
                Err(other) => return Err(other.into()),
            }
        }
    }
    let mut cockpit = match cockpit {
        Some(resumed) => resumed,
        None => {
            let _ = std::fs::remove_dir_all(&dir);
            new_cockpit()?.with_record(RunRecord::create(&options.record)?)
        }
    };
    std::fs::create_dir_all(&dir)?;
    for step in from..options.steps {
        let (x, y) = batch(step, &device);
        let forward = move |model: &Mlp| model.forward(x.clone());
        let stepped = cockpit.step(&model, forward, OutputLoss::classes(y, CLASSES))?;
        model = optimizer.step(LR, model, stepped.grads);
        let next = step + 1;
        if next % options.checkpoint_every == 0 {
            let path = dir.join(format!("{next}.bpk"));
            let partial = dir.join(format!("{next}.bpk.partial"));
            model.clone().into_record().save(&partial)?;
            std::fs::rename(&partial, &path)?;
            cockpit.checkpoint()?;
            // Two model checkpoints are enough: the record keeps the states of the newest.
            for (_, old) in checkpoints(&dir).into_iter().skip(2) {
                let _ = std::fs::remove_file(old);
            }
        }
        each(step);
    }
    cockpit.flush()?;
    let record_time = cockpit.record().map(|r| r.time_spent()).unwrap_or_default();
    Ok(Ran { from, record_time })
}
