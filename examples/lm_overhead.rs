//! Overhead at GPT scale: a decoder-only language model from the per-sample drop-ins (token
//! and position embeddings, causal pre-norm transformer layers, a vocabulary head) on random
//! tokens, a plain training step against `Cockpit::step` with `economy`, `business` and
//! `full`, measured in the same process (run it in release):
//!
//! ```text
//! cargo run --release --example lm_overhead [-- --d 256 --layers 4 --heads 8
//!     --vocabulary 8192 --length 128 --batch 8 --steps 3 --interval 1
//!     --only economy,business,full --mc-samples 4 --optimizer adam --histograms auto]
//! ```
//!
//! `--only` also takes a preset less some quantities (`economy-GradHist1d`) or quantities
//! joined by `+` (`Loss+NormTest`), which is how BENCHMARKS.md breaks the peak memory down.
//! The plain step is what a burn user writes: forward, burn's `CrossEntropyLoss` on the
//! flattened `[B·T, V]` logits, backward, Adam (or `--optimizer sgd`). The tracked steps hand `Cockpit::step` the
//! same forward with `OutputLoss::tokens` (each sequence's loss the mean over its tokens);
//! `business` and `full` take their curvature (HessTrace, TICDiag, TICTrace; HessMaxEV in
//! `full`) through the Monte-Carlo GGN (`T·V` columns are far beyond the exact budget) plus the
//! estimated residual of the attention and normalisation layers. Prints per configuration
//! `overhead <name> <ratio>` (time per step against the plain step's) with milliseconds,
//! `peak_memory <name> <ratio>` (the run's peak host heap above what was allocated before it,
//! against the plain run's: every tensor of the flex and ndarray backends lives there; wgpu's
//! device memory is not counted), `reads_per_step` and `values_read_per_step` (the
//! Cockpit's device→host reads), and on CubeCL backends `kernels_per_step` (the launch
//! ledger). Each run starts with one step outside the timing and the counts.

use std::time::Instant;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, SgdConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::backend;
use burn_cockpit::histogram::HistogramEngine;
use burn_cockpit::persample::launches::LaunchLedger;
use burn_cockpit::prelude::*;
use clap::{Parser, ValueEnum};

#[path = "common/bench.rs"]
mod bench;
use bench::{Measured, median, print_rows};
#[path = "common/gpt.rs"]
mod gpt;
use gpt::{Gpt, GptShape};

/// The host heap, now and at its peak.
#[global_allocator]
static HEAP: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

const LR: f64 = 1e-3;

/// The GPT-scale overhead benchmark's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Opt {
    Adam,
    Sgd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Histograms {
    Auto,
    Host,
    Device,
}

#[derive(Debug, Clone, Parser)]
struct Args {
    /// The optimizer (Adam keeps the previous step's per-sample factors for Alpha, SGD does
    /// not: its step is known from the gradient).
    #[arg(long, value_enum, default_value_t = Opt::Adam)]
    optimizer: Opt,
    /// Where GradHist1d counts (`auto`: on the host on CPU backends and CPU-emulated
    /// adapters such as lavapipe, on the device on a graphics card).
    #[arg(long, value_enum, default_value_t = Histograms::Auto)]
    histograms: Histograms,
    /// The model width.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(8..))]
    d: u64,
    /// Transformer layers.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    layers: u64,
    /// Attention heads (dividing `d`).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    heads: u64,
    /// The vocabulary.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(2..))]
    vocabulary: u64,
    /// Tokens per sequence.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..))]
    length: u64,
    /// Sequences per batch.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(2..))]
    batch: u64,
    /// Timed steps per run.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Runs per configuration (the median is printed).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
    /// Track every N-th step.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    interval: u64,
    /// Sampled columns of the Monte-Carlo GGN.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    mc_samples: u64,
    /// Keep only these configurations, comma-separated: a preset (economy, business, full), a
    /// preset less some quantities (`economy-GradHist1d`), or quantities joined by `+`.
    #[arg(long, value_delimiter = ',', default_value = "economy,business,full")]
    only: Vec<String>,
}

/// Random token batches `(inputs, next tokens)`, the same in every run.
fn batches(args: &Args, device: &Device) -> Vec<(Tensor<2, Int>, Tensor<2, Int>)> {
    let (b, t, v) = (args.batch as usize, args.length as usize, args.vocabulary);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % v) as i64
    };
    (0..4)
        .map(|_| {
            let text: Vec<i64> = (0..b * (t + 1)).map(|_| next()).collect();
            let rows = |offset: usize| -> Vec<i64> {
                (0..b)
                    .flat_map(|n| text[n * (t + 1) + offset..n * (t + 1) + offset + t].to_vec())
                    .collect()
            };
            (
                Tensor::from_data(TensorData::new(rows(0), [b, t]), device),
                Tensor::from_data(TensorData::new(rows(1), [b, t]), device),
            )
        })
        .collect()
}

/// The quantities `name` asks for: a preset (`economy`, `business`, `full`), a preset less
/// some quantities (`economy-GradHist1d-Alpha`), or quantities joined by `+`
/// (`Loss+GradNorm`).
fn kinds_of(name: &str) -> Result<Vec<QuantityKind>, Box<dyn std::error::Error>> {
    let mut parts = name.split('-');
    let first = parts.next().unwrap_or_default();
    let mut kinds = match first.parse::<Configuration>() {
        Ok(preset) => preset.kinds(),
        Err(_) => first
            .split('+')
            .map(str::parse::<QuantityKind>)
            .collect::<Result<_, _>>()?,
    };
    for less in parts {
        let less: QuantityKind = less.parse()?;
        kinds.retain(|kind| *kind != less);
    }
    Ok(kinds)
}

/// The GPT the options describe (feed-forward width `4·d`).
fn shape(args: &Args) -> GptShape {
    GptShape {
        vocabulary: args.vocabulary as usize,
        length: args.length as usize,
        d: args.d as usize,
        hidden: 4 * args.d as usize,
        heads: args.heads as usize,
        layers: args.layers as usize,
    }
}

struct Run {
    seconds: f64,
    peak_bytes: usize,
    reads: Vec<burn_cockpit::persample::readback::ReadCount>,
    depths: Vec<burn_cockpit::persample::reduce::Depth>,
    kernels: Option<f64>,
}

fn run(
    args: &Args,
    device: &Device,
    data: &[(Tensor<2, Int>, Tensor<2, Int>)],
    kinds: Option<&[QuantityKind]>,
) -> Result<Run, Box<dyn std::error::Error>> {
    HEAP.reset_peak_usage();
    let before = HEAP.current_usage();
    let mut model = Gpt::new(&shape(args), device);
    let (adam, sgd) = (AdamConfig::new(), SgdConfig::new());
    let (announced, mut optimizer): (OptimizerInfo, Box<dyn FnMut(Gpt, GradientsParams) -> Gpt>) =
        match args.optimizer {
            Opt::Adam => {
                let mut adam_state = adam.init();
                (
                    OptimizerInfo::from_adam(&adam, LR),
                    Box::new(move |m, g| adam_state.step(LR, m, g)),
                )
            }
            Opt::Sgd => {
                let mut sgd_state = sgd.init();
                (
                    OptimizerInfo::from_sgd(&sgd, LR),
                    Box::new(move |m, g| sgd_state.step(LR, m, g)),
                )
            }
        };
    let mut cockpit = match kinds {
        Some(kinds) => Some(
            Cockpit::from_kinds(
                kinds.iter().copied(),
                &Schedule::linear(args.interval as usize, 0)?,
            )?
            .with_optimizer(announced)
            .with_step_options(StepOptions::new().with_mc_samples(args.mc_samples as usize))
            .with_histogram_engine(match args.histograms {
                Histograms::Auto => HistogramEngine::Auto,
                Histograms::Host => HistogramEngine::Host,
                Histograms::Device => HistogramEngine::Device,
            })
            .with_console(false),
        ),
        None => None,
    };
    let (b, t, v) = (
        args.batch as usize,
        args.length as usize,
        args.vocabulary as usize,
    );
    let cross_entropy = CrossEntropyLossConfig::new().init(device);
    let ledger = LaunchLedger::start();
    let (mut launched, mut start) = (None, Instant::now());
    let mut reads = Vec::new();
    let mut depths = Vec::new();
    let warm_up = 1;
    let steps = args.steps as usize;
    for step in 0..warm_up + steps {
        if step == warm_up {
            launched = ledger.as_ref().map(LaunchLedger::launches);
            start = Instant::now();
        }
        let (inputs, targets) = data[step % data.len()].clone();
        let grads = match cockpit.as_mut() {
            None => {
                let logits = model.forward(inputs);
                let loss =
                    cross_entropy.forward(logits.reshape([b * t, v]), targets.reshape([b * t]));
                GradientsParams::from_grads(loss.backward(), &model)
            }
            Some(cockpit) => {
                let tracked = cockpit.is_tracking(step);
                let stepped = cockpit.step(
                    &model,
                    move |m: &Gpt| m.forward(inputs.clone()),
                    OutputLoss::tokens(targets, v),
                )?;
                if !stepped.report.is_complete() {
                    eprintln!("step {step}: {:?}", stepped.report.failure_lines());
                }
                if tracked && step >= warm_up {
                    reads.push(cockpit.reads());
                    depths.push(cockpit.depth());
                }
                stepped.grads
            }
        };
        model = optimizer(model, grads);
    }
    // Wait for the device: read one parameter's sum.
    let _ = model.head.weight.val().sum().into_scalar::<f32>();
    let seconds = start.elapsed().as_secs_f64() / steps as f64;
    let kernels = ledger
        .as_ref()
        .map(LaunchLedger::launches)
        .zip(launched)
        .map(|(after, before)| (after - before) as f64 / steps as f64);
    if let Some(cockpit) = &cockpit {
        for warning in cockpit.warnings().iter().take(4) {
            eprintln!("  {warning}");
        }
    }
    Ok(Run {
        seconds,
        peak_bytes: HEAP.peak_usage().saturating_sub(before),
        reads,
        depths,
        kernels,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if args.d % args.heads != 0 {
        return Err(format!("--heads {} must divide --d {}", args.heads, args.d).into());
    }
    let mut configurations = Vec::new();
    for name in &args.only {
        configurations.push((name.clone(), kinds_of(name)?));
    }
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    let data = batches(&args, &device);
    let probe = Gpt::new(&shape(&args), &device);
    println!(
        "GPT on {backend_name}: d {}, {} layers, {} heads, V {}, T {}, B {}, {:.1} M parameters; \
         {} timed steps, tracking every {} step(s)",
        args.d,
        args.layers,
        args.heads,
        args.vocabulary,
        args.length,
        args.batch,
        probe.num_params() as f64 / 1e6,
        args.steps,
        args.interval
    );
    drop(probe);
    let mut plain = (Vec::new(), Vec::new(), None);
    let mut tracked: Vec<Measured> = configurations
        .iter()
        .map(|_| Measured {
            times: Vec::new(),
            peaks: Vec::new(),
            reads: Vec::new(),
            kernels: None,
            depths: Vec::new(),
        })
        .collect();
    for _ in 0..args.repeats {
        let base = run(&args, &device, &data, None)?;
        plain.0.push(base.seconds);
        plain.1.push(base.peak_bytes as f64);
        plain.2 = base.kernels;
        for (i, (name, configuration)) in configurations.iter().enumerate() {
            eprintln!("running {name} …");
            let r = run(&args, &device, &data, Some(configuration))?;
            tracked[i].times.push(r.seconds);
            tracked[i].peaks.push(r.peak_bytes as f64);
            tracked[i].reads.extend(r.reads);
            tracked[i].kernels = r.kernels;
            tracked[i].depths.extend(r.depths);
        }
    }
    let (plain_time, plain_peak) = (median(plain.0), median(plain.1));
    println!(
        "plain step: {:.1} ms, peak heap {:.1} MB",
        plain_time * 1e3,
        plain_peak / 1e6
    );
    if let Some(kernels) = plain.2 {
        println!("kernels_per_step plain {kernels:.0}");
    }
    for ((name, _), measured) in configurations.iter().zip(tracked) {
        print_rows(name, measured, plain_time, plain_peak);
    }
    Ok(())
}
