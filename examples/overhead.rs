//! Overhead benchmark: the cost of a tracked step against a plain training step, measured in
//! the same process on the same data (run it in release):
//!
//! ```text
//! cargo run --release --example overhead [-- --model mlp|cnn|3c3d --engine fast|exact
//!     --histograms auto|host|device --curvature recorded|hutchinson --steps 30 --repeats 3
//!     --interval 1 --batch 128 --only economy,NormTest]
//! ```
//!
//! `mlp` is the setup of `PERFORMANCE_ANCHOR` (the real Cockpit's numbers on a 2-core machine):
//! an MLP 784-256-128-10 with ReLU, cross-entropy, batch 128, SGD lr 0.01, random inputs. `cnn`
//! is a small CNN on 28×28 inputs (two 3×3 stride-2 convolutions, 8 and 16 channels, and a
//! Linear head). `3c3d` is the Cockpit paper's run-time problem, DeepOBS cifar10_3c3d (conv
//! 3→64 k5 valid, max-pool 3 stride 2; conv 64→96 k3 valid, max-pool; conv 96→128 k3 same,
//! max-pool; fc 1152→512→256→10; ReLU) on `[128, 3, 32, 32]` random inputs (the pools pad one
//! on each side where TensorFlow's "same" pads one on the right and bottom: the same shapes
//! and cost). `--histograms` picks where GradHist1d and GradHist2d count (default `auto`:
//! the host on CPU backends, the device elsewhere). `--curvature` picks how the CNNs'
//! curvature diagonals (HessTrace, TIC) are computed: `recorded` (default) exactly through
//! recorded backward passes, one per class (`separate`), or one pass over the batch widened to
//! every class (`widened`; `recorded` widens where `GgnPasses::Auto` does: on a graphics
//! card), `hutchinson` estimated with 10 probes on
//! finite-difference products (the MLP's are exact either way). `--engine exact` gives the per-sample quantities single-sample backward
//! passes instead of the instrumented layers' fast path. `--interval N` tracks every N-th step;
//! `--only a,b` keeps the named configurations. Prints one line per configuration as
//! `overhead <name> <ratio>` plus absolute milliseconds per step, and `peak_memory <name>
//! <ratio>`: the run's peak host heap above what was allocated before it (model, optimizer,
//! activations, the Cockpit's state) against a plain run's; on CubeCL backends (wgpu, cuda)
//! `kernels_per_step plain <n>` and `kernels_per_step <name> <n>`: kernels launched per step
//! (the launch ledger, `persample::launches`; burn's fused chains count once), `serial_depth
//! <name> <n>`: the most values one unit of a reduction the tracked steps issued walks
//! (`persample::reduce::depth_of`: work that does not spread over a GPU), and with
//! `--kernel-names` `kernels_added <name> <n> <kernel>`: what each configuration adds to a
//! plain step, by CubeCL's kernel name. Each run
//! starts with one step outside the timing and the counts (a GPU compiles its kernels then).

use std::time::Instant;

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2dConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Distribution, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};

use burn_cockpit::curvature::{
    Activation, CurvatureSource, DiagonalKind, FiniteDifferenceHvp, GgnPasses, Hutchinson,
    MlpCurvature, MlpLayer, OutputLoss, RecordedCurvature,
};
use burn_cockpit::histogram::HistogramEngine;
use burn_cockpit::persample::Snapshot;
use burn_cockpit::persample::launches::LaunchLedger;
use burn_cockpit::persample::reduce::{Depth, depth_of};
use burn_cockpit::persample::{Conv2d, ExactPerSample, Linear, Recorder, Sigmoid};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{
    Cockpit, Configuration, OptimizerInfo, QuantityError, ReadTiming, Schedule, StepInfo, backend,
};

#[path = "common/architectures.rs"]
mod architectures;
#[path = "common/bench.rs"]
mod bench;

/// The host heap, now and at its peak (with the flex and ndarray backends every tensor lives
/// there; wgpu's device memory is not counted).
#[global_allocator]
static HEAP: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;
use bench::{Measured, median, print_rows};
use clap::{Parser, ValueEnum};

const LR: f64 = 0.01;

/// The overhead benchmark's options (`--help` lists them; unknown options and values are
/// refused).
#[derive(Debug, Parser)]
struct Args {
    /// The model.
    #[arg(long, value_enum, default_value_t = Model::Mlp)]
    model: Model,
    /// Per-sample statistics from the drop-ins' fast path, or from single-sample passes.
    #[arg(long, value_enum, default_value_t = Engine::Fast)]
    engine: Engine,
    /// Where GradHist1d and GradHist2d count.
    #[arg(long, value_enum, default_value_t = Histograms::Auto)]
    histograms: Histograms,
    /// How the CNNs' curvature diagonals are computed (the MLP's are exact either way).
    #[arg(long, value_enum, default_value_t = Curvature::Recorded)]
    curvature: Curvature,
    /// Timed steps per run.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Runs per configuration (the median is printed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
    /// Track every N-th step.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    interval: u64,
    /// The batch size.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
    /// Keep only these configurations, comma-separated (a quantity's name, `economy`,
    /// `economy+Examples`, `business`, `full`, …; an unknown name is refused).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print which kernels each configuration adds to a plain step (CubeCL backends).
    #[arg(long)]
    kernel_names: bool,
    /// When a tracked step's numbers are read: at once (`now`), at the next step
    /// (`deferred`), or `auto` (deferred on a graphics card).
    #[arg(long, value_enum, default_value_t = Timing::Auto)]
    read_timing: Timing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Timing {
    Auto,
    Now,
    Deferred,
}

impl From<Timing> for ReadTiming {
    fn from(timing: Timing) -> Self {
        match timing {
            Timing::Auto => ReadTiming::Auto,
            Timing::Now => ReadTiming::Now,
            Timing::Deferred => ReadTiming::Deferred,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Model {
    Mlp,
    Cnn,
    #[value(name = "3c3d")]
    ThreeC3D,
    /// 784-64-10 with a sigmoid drop-in: `diag_h` exact through the activation's 64 units.
    SigmoidMlp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Engine {
    Fast,
    Exact,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Histograms {
    Auto,
    Host,
    Device,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Curvature {
    /// Recorded passes, widened where `GgnPasses::Auto` widens (on a graphics card).
    Recorded,
    /// Recorded passes, the exact GGN's `C` passes always separate.
    Separate,
    /// Recorded passes, the exact GGN's `C` passes always one widened pass.
    Widened,
    Hutchinson,
}

/// A benchmark model on `[B, FEATURES]` inputs with 10 classes.
trait Net: Module + Sync + 'static {
    /// Input features per sample (reshaped by the model as it needs).
    const FEATURES: usize = 784;
    fn new(device: &Device) -> Self;
    fn forward(&self, x: Tensor<2>) -> Tensor<2>;
    /// Exact curvature diagonals, where the net is a plain MLP.
    fn exact_curvature(&self, _x: Tensor<2>, _onehot: Tensor<2>) -> Option<MlpCurvature> {
        None
    }
}

/// Hessian-vector products counted (`hvp_products`).
static PRODUCTS: AtomicUsize = AtomicUsize::new(0);

/// Counts the products a source computes.
#[derive(Debug)]
struct Counted<S>(S);

impl<S: CurvatureSource> CurvatureSource for Counted<S> {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        PRODUCTS.fetch_add(1, Ordering::Relaxed);
        self.0.hvp(params, v)
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        self.0.diagonal(params, kind)
    }

    fn notes(&self) -> Vec<String> {
        self.0.notes()
    }
}

/// The step's curvature (`--curvature recorded|hutchinson`, default `recorded`): exact
/// diagonals and products where the net is a plain MLP (`MlpCurvature`); else, with
/// `recorded`, exact diagonals through recorded backward passes of the drop-ins
/// (`RecordedCurvature`; the nets here are piecewise linear: ReLU and max pooling), with
/// `hutchinson` Hutchinson's estimate with 10 probes on finite-difference products.
fn curvature<M: Net>(
    model: &M,
    x: Tensor<2>,
    y: Tensor<2>,
    how: Curvature,
) -> Box<dyn CurvatureSource> {
    if let Some(exact) = model.exact_curvature(x.clone(), y.clone()) {
        return Box::new(Counted(exact));
    }
    if how != Curvature::Hutchinson {
        let passes = match how {
            Curvature::Separate => GgnPasses::Separate,
            Curvature::Widened => GgnPasses::Widened,
            _ => GgnPasses::Auto,
        };
        let wide = x.clone();
        let source = RecordedCurvature::new(
            model,
            move |m: &M| m.forward(x.clone()),
            OutputLoss::CrossEntropy(y),
            1,
        )
        .with_widened_output(move |m: &M, copies| m.forward(wide.clone().repeat_dim(0, copies)))
        .with_ggn_passes(passes)
        .piecewise_linear();
        return Box::new(Counted(source));
    }
    let hvp = FiniteDifferenceHvp::new(model, move |m: &M| {
        let loss = per_sample_loss(m, x.clone(), y.clone()).mean();
        Ok(GradientsParams::from_grads(loss.backward(), m))
    });
    Box::new(Counted(Hutchinson::new(hvp, 10, 1)))
}

#[derive(Module, Debug)]
struct Mlp {
    layers: Vec<Linear>,
}

impl Net for Mlp {
    fn new(device: &Device) -> Self {
        let widths = [784, 256, 128, 10];
        Self {
            layers: widths
                .windows(2)
                .map(|w| LinearConfig::new(w[0], w[1]).init(device).into())
                .collect(),
        }
    }

    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = relu(x);
            }
        }
        x
    }

    fn exact_curvature(&self, x: Tensor<2>, onehot: Tensor<2>) -> Option<MlpCurvature> {
        let last = self.layers.len() - 1;
        let mut input = x.detach();
        let mut layers = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            let z = burn::tensor::module::linear(
                input.clone(),
                layer.weight.val().detach(),
                layer.bias.as_ref().map(|b| b.val().detach()),
            );
            let activation = if i < last {
                Activation::Relu
            } else {
                Activation::Identity
            };
            layers.push(MlpLayer {
                weight_id: layer.weight.id,
                bias_id: layer.bias.as_ref().map(|b| b.id),
                weight: layer.weight.val().detach(),
                input: input.clone(),
                pre_activation: z.clone(),
                activation,
            });
            input = if i < last { relu(z) } else { z };
        }
        Some(MlpCurvature::new(
            layers,
            OutputLoss::CrossEntropy(onehot.detach()),
            1,
        ))
    }
}

#[derive(Module, Debug)]
struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    head: Linear,
}

impl Net for Cnn {
    fn new(device: &Device) -> Self {
        let conv = |c_in, c_out| {
            Conv2dConfig::new([c_in, c_out], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
                .into()
        };
        Self {
            conv1: conv(1, 8),
            conv2: conv(8, 16),
            head: LinearConfig::new(16 * 7 * 7, 10).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = relu(self.conv1.forward(x.reshape([b, 1, 28, 28])));
        let h = relu(self.conv2.forward(h));
        self.head.forward(h.reshape([b, 16 * 7 * 7]))
    }
}

/// A one-hidden-layer MLP with a sigmoid drop-in, through `RecordedCurvature` (declared
/// piecewise linear between the drop-ins: the sigmoid's `σ''` terms are computed exactly).
#[derive(Module, Debug)]
struct SigmoidMlp {
    hidden: Linear,
    activation: Sigmoid,
    head: Linear,
}

impl Net for SigmoidMlp {
    fn new(device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(784, 64).init(device).into(),
            activation: Sigmoid,
            head: LinearConfig::new(64, 10).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let h = self.activation.forward(self.hidden.forward(x));
        self.head.forward(h)
    }
}

/// DeepOBS cifar10_3c3d, the Cockpit paper's run-time benchmark problem.
#[derive(Module, Debug)]
struct ThreeC3D {
    net: architectures::Cifar3c3d,
}

impl Net for ThreeC3D {
    const FEATURES: usize = 3 * 32 * 32;

    fn new(device: &Device) -> Self {
        Self {
            net: architectures::Cifar3c3d::new(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        self.net.forward(x.reshape([b, 3, 32, 32]))
    }
}

fn per_sample_loss<M: Net>(model: &M, x: Tensor<2>, y: Tensor<2>) -> Tensor<1> {
    let b = x.dims()[0];
    (log_softmax(model.forward(x), 1) * y)
        .sum_dim(1)
        .neg()
        .reshape([b])
}

/// What one benchmark run measured.
struct Run {
    /// Seconds per step.
    seconds: f64,
    /// Hessian-vector products per tracked step that used any.
    products: Vec<usize>,
    /// The run's peak host heap above what was allocated before it (model, optimizer,
    /// activations, the Cockpit's state), in bytes.
    peak_bytes: usize,
    /// Device→host reads and values read per tracked step (the read ledger).
    reads: Vec<burn_cockpit::persample::readback::ReadCount>,
    /// The reductions of each tracked step (the recorder's and the Cockpit's).
    depths: Vec<Depth>,
    /// Kernels launched per step (the launch ledger; CubeCL backends only), the final
    /// synchronising forward pass spread over the steps alike in every run.
    kernels: Option<f64>,
    /// Kernels launched per step by kernel name (CubeCL backends only).
    by_kernel: std::collections::HashMap<&'static str, f64>,
}

/// Launches so far by kernel name (empty without a ledger).
fn launched_by_kernel(
    ledger: Option<&LaunchLedger>,
) -> std::collections::HashMap<&'static str, u64> {
    ledger
        .map(LaunchLedger::by_kernel)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// Runs `steps` training steps, tracking with `cockpit` if given.
fn run<M: Net>(
    device: &Device,
    steps: usize,
    mut cockpit: Option<Cockpit>,
    exact: bool,
    how: Curvature,
    data: &[(Tensor<2>, Tensor<2>)],
) -> Run {
    HEAP.reset_peak_usage();
    let before = HEAP.current_usage();
    let mut products = Vec::new();
    let mut reads = Vec::new();
    let mut depths = Vec::new();
    let mut model = M::new(device);
    let mut optim = SgdConfig::new().init();
    let ledger = LaunchLedger::start();
    // One warm-up step (the first tracked step compiles its kernels on a GPU) outside the
    // timing and the counts.
    let warm_up = 1;
    let (mut launched, mut start) = (None, Instant::now());
    let mut named = std::collections::HashMap::new();
    for step in 0..warm_up + steps {
        if step == warm_up {
            let _ = per_sample_loss(&model, data[0].0.clone(), data[0].1.clone())
                .sum()
                .into_scalar::<f32>();
            launched = ledger.as_ref().map(LaunchLedger::launches);
            named = launched_by_kernel(ledger.as_ref());
            start = Instant::now();
        }
        let (x, y) = &data[step % data.len()];
        let curvature = cockpit
            .as_ref()
            .is_some_and(|c| c.needs_curvature(step))
            .then(|| curvature(&model, x.clone(), y.clone(), how));
        let tracking = cockpit.as_ref().is_some_and(|c| c.needs_per_sample(step));
        let recorder = (tracking && !exact).then(Recorder::start);
        let per_sample = per_sample_loss(&model, x.clone(), y.clone());
        let loss = per_sample.clone().mean();
        let grads = loss.backward();
        let (factors, finishing) = depth_of(|| recorder.map(|r| r.finish(&grads)));
        let grads = GradientsParams::from_grads(grads, &model);
        if let Some(cockpit) = cockpit.as_mut() {
            // Dataset indices of the batch's examples (what the Examples record is keyed by).
            let b = x.dims()[0];
            let first = (step % data.len()) * b;
            let mut info = StepInfo::new(loss.detach())
                .with_individual_losses(per_sample.detach())
                .with_sample_ids((first as u64..(first + b) as u64).collect::<Vec<_>>())
                .with_optimizer(OptimizerInfo::sgd(LR));
            if let Some(curvature) = curvature {
                info = info.with_curvature(curvature);
            }
            match factors {
                Some(Ok(factors)) => info = info.with_per_sample(factors),
                Some(Err(err)) => eprintln!("recording failed: {err}"),
                None if tracking => {
                    let (frozen, x, y) = (model.clone(), x.clone(), y.clone());
                    info = info.with_per_sample(ExactPerSample::new(x.dims()[0], move |n| {
                        let loss = per_sample_loss(
                            &frozen,
                            x.clone().slice(n..n + 1),
                            y.clone().slice(n..n + 1),
                        )
                        .mean();
                        Ok(GradientsParams::from_grads(loss.backward(), &frozen))
                    }));
                }
                None => {}
            }
            let before = PRODUCTS.load(Ordering::Relaxed);
            let tracked = cockpit.is_tracking(step);
            if let Err(err) = cockpit.track(step, &model, &grads, info) {
                eprintln!("tracking failed: {err}");
            }
            if tracked && step >= warm_up {
                reads.push(cockpit.reads());
                depths.push(finishing + cockpit.depth());
            }
            let used = PRODUCTS.load(Ordering::Relaxed) - before;
            if used > 0 && step >= warm_up {
                products.push(used);
            }
        }
        model = optim.step(LR, model, grads);
    }
    if let Some(cockpit) = cockpit.as_mut()
        && let Err(err) = cockpit.flush()
    {
        eprintln!("tracking failed: {err}");
    }
    if let Some(cockpit) = &cockpit {
        let unconverged = cockpit
            .warnings()
            .iter()
            .filter(|w| w.contains("did not converge"))
            .count();
        if unconverged > 0 {
            eprintln!(
                "note: HessMaxEV did not converge within its budget at {unconverged} of {steps} steps"
            );
        }
    }
    // Wait for the device: read the loss of one more forward pass.
    let _ = per_sample_loss(&model, data[0].0.clone(), data[0].1.clone())
        .sum()
        .into_scalar::<f32>();
    let seconds = start.elapsed().as_secs_f64() / steps as f64;
    let kernels = ledger
        .as_ref()
        .map(LaunchLedger::launches)
        .zip(launched)
        .map(|(after, before)| (after - before) as f64 / steps as f64);
    let by_kernel = launched_by_kernel(ledger.as_ref())
        .into_iter()
        .map(|(name, after)| {
            let before = named.get(name).copied().unwrap_or(0);
            (name, (after - before) as f64 / steps as f64)
        })
        .filter(|(_, per_step)| *per_step > 0.0)
        .collect();
    Run {
        seconds,
        products,
        peak_bytes: HEAP.peak_usage().saturating_sub(before),
        reads,
        depths,
        kernels,
        by_kernel,
    }
}

fn bench<M: Net>(
    device: &Device,
    name: &str,
    args: &Args,
) -> Result<(), Box<dyn std::error::Error>> {
    let (steps, repeats) = (args.steps as usize, args.repeats as usize);
    let (interval, batch) = (args.interval as usize, args.batch as usize);
    let exact = args.engine == Engine::Exact;
    let engine = if exact { "exact" } else { "fast" };
    let how = args.curvature;
    let histograms = match args.histograms {
        Histograms::Host => HistogramEngine::Host,
        Histograms::Device => HistogramEngine::Device,
        Histograms::Auto => HistogramEngine::Auto,
    };
    let data: Vec<(Tensor<2>, Tensor<2>)> = (0..8)
        .map(|_| {
            let x =
                Tensor::<2>::random([batch, M::FEATURES], Distribution::Normal(0.0, 1.0), device);
            let labels = Tensor::<2>::random([batch, 10], Distribution::Uniform(0.0, 1.0), device);
            let y = labels.clone().equal(labels.max_dim(1)).float();
            (x, y)
        })
        .collect();
    let schedule = Schedule::linear(interval, 0)?;
    let mut configs: Vec<(String, Vec<QuantityKind>)> = QuantityKind::ALL
        .into_iter()
        .filter(|k| *k != QuantityKind::Parameters)
        .map(|k| (k.name().to_string(), vec![k]))
        .collect();
    configs.push((
        "parameter_level".into(),
        vec![
            QuantityKind::Loss,
            QuantityKind::GradNorm,
            QuantityKind::Distance,
            QuantityKind::UpdateSize,
            QuantityKind::Time,
        ],
    ));
    configs.push(("economy".into(), Configuration::Economy.kinds()));
    configs.push((
        "economy_without_GradHist1d".into(),
        Configuration::Economy
            .kinds()
            .into_iter()
            .filter(|k| *k != QuantityKind::GradHist1d)
            .collect(),
    ));
    configs.push((
        "economy+Examples".into(),
        Configuration::Economy
            .kinds()
            .into_iter()
            .chain([QuantityKind::Examples])
            .collect(),
    ));
    configs.push(("business".into(), Configuration::Business.kinds()));
    configs.push(("full".into(), Configuration::Full.kinds()));
    if let Some(unknown) = args
        .only
        .iter()
        .find(|o| !configs.iter().any(|(name, _)| name == *o))
    {
        let known: Vec<&str> = configs.iter().map(|(name, _)| name.as_str()).collect();
        return Err(format!("--only: no configuration `{unknown}`; one of {known:?}").into());
    }
    if !args.only.is_empty() {
        configs.retain(|(name, _)| args.only.contains(name));
    }
    let _ = run::<M>(device, 3, None, exact, how, &data); // warm-up
    println!(
        "model {name}, batch {batch}, engine {engine}, histograms {histograms:?}, {steps} steps x {repeats} repeats, median, tracking every {interval} step(s)"
    );
    let (mut plain_times, mut plain_peaks, mut plain_kernels) = (Vec::new(), Vec::new(), None);
    let mut kernels: Vec<Option<f64>> = vec![None; configs.len()];
    let names_wanted = args.kernel_names;
    let mut plain_names = std::collections::HashMap::new();
    let mut names = vec![std::collections::HashMap::new(); configs.len()];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut peaks: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut reads: Vec<Vec<burn_cockpit::persample::readback::ReadCount>> =
        vec![Vec::new(); configs.len()];
    let mut depths: Vec<Vec<Depth>> = vec![Vec::new(); configs.len()];
    let mut products: Vec<f64> = Vec::new();
    for _ in 0..repeats {
        // Interleave plain and tracked runs so drifts in machine load hit both alike.
        let plain = run::<M>(device, steps, None, exact, how, &data);
        plain_times.push(plain.seconds);
        plain_peaks.push(plain.peak_bytes as f64);
        plain_kernels = plain.kernels;
        plain_names = plain.by_kernel;
        for (i, (name, kinds)) in configs.iter().enumerate() {
            let cockpit = Cockpit::from_kinds(kinds.iter().copied(), &schedule)?
                .with_histogram_engine(histograms)
                .with_read_timing(args.read_timing.into());
            let tracked = run::<M>(device, steps, Some(cockpit), exact, how, &data);
            results[i].push(tracked.seconds);
            peaks[i].push(tracked.peak_bytes as f64);
            reads[i].extend(tracked.reads.iter().copied());
            depths[i].extend(tracked.depths.iter().copied());
            kernels[i] = tracked.kernels;
            names[i] = tracked.by_kernel;
            if name == "HessMaxEV" {
                products.extend(tracked.products.into_iter().map(|p| p as f64));
            }
        }
    }
    let plain = median(plain_times);
    let plain_peak = median(plain_peaks);
    println!(
        "plain step: {:.3} ms, peak heap {:.1} MB",
        plain * 1e3,
        plain_peak / 1e6
    );
    if let Some(plain) = plain_kernels {
        // What a GPU pays besides reads: the kernels launched (fused chains count once).
        println!("kernels_per_step plain {plain:.1}");
    }
    if !products.is_empty() {
        println!(
            "hvp_products HessMaxEV {} (median over {} tracked steps, max {})",
            median(products.clone()),
            products.len(),
            products.iter().copied().fold(0.0, f64::max)
        );
    }
    for ((((((name, _), times), peaks), reads), kernels), depths) in configs
        .iter()
        .zip(results)
        .zip(peaks)
        .zip(reads)
        .zip(kernels)
        .zip(depths)
    {
        let measured = Measured {
            times,
            peaks,
            reads,
            kernels,
            depths,
        };
        print_rows(name, measured, plain, plain_peak);
    }
    if names_wanted {
        // Which kernels each configuration adds to a plain step (last repeat), most first.
        for ((name, _), named) in configs.iter().zip(&names) {
            let mut added: Vec<(&str, f64)> = named
                .iter()
                .map(|(k, n)| (*k, n - plain_names.get(k).copied().unwrap_or(0.0)))
                .filter(|(_, n)| n.abs() > 1e-9)
                .collect();
            added.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
            for (kernel, n) in added {
                println!("kernels_added {name} {n:.1} {kernel}");
            }
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let (backend_name, device) = backend::device()?;
    println!("backend {backend_name}");
    let device = device.autodiff();
    match args.model {
        Model::Cnn => bench::<Cnn>(
            &device,
            "cnn (conv 1→8→16, 3×3 stride 2, Linear 784→10)",
            &args,
        ),
        Model::ThreeC3D => bench::<ThreeC3D>(&device, "cifar10_3c3d (DeepOBS)", &args),
        Model::Mlp => bench::<Mlp>(&device, "mlp 784-256-128-10", &args),
        Model::SigmoidMlp => bench::<SigmoidMlp>(&device, "mlp 784-64-10, sigmoid drop-in", &args),
    }
}
