//! Cockpit's per-sample quantities on two architectures no one here designed: the burn book
//! guide's CNN and burn's text-classification transformer (`common/architectures.rs`), built
//! from the `persample` drop-ins.
//!
//! ```text
//! cargo run --release --example architectures                 # train both, economy every step
//! cargo run --release --example architectures -- --steps 300 --check-every 50
//! cargo run --release --example architectures -- --bench --steps 20 --repeats 3
//!     [--model cnn|transformer|autoencoder|encoder-decoder|both|all --only economy,GradHist1d --no-exact]
//! ```
//!
//! **Training** (default): each model trains `--steps` SGD steps on generated data (images
//! with a class-dependent bright square; token sequences whose class is their most frequent
//! keyword, padded to random lengths) with `economy` tracked at every step on the fast path.
//! Every step must be fully covered by the fast path. Every `--check-every` steps the
//! single-step per-sample quantities of the current parameters are computed twice — from the fast path and
//! from single-sample backward passes — and must agree (dropout off for that comparison, since
//! single-sample passes would draw other masks). Exits with an error otherwise.
//!
//! **Benchmark** (`--bench`, run it in release): `economy` and each per-sample quantity alone
//! at every step, `business` and `full` (curvature diagonals through recorded backward passes,
//! one per class: `RecordedCurvature`), on the fast path, and `economy` through the exact
//! fallback, against plain training
//! steps in the same process (interleaved). The guide CNN at batch 64 on 28×28 images, the
//! transformer with `d_model` 128, 2 layers, 4 heads, sequences of 64 tokens, batch 32. Prints
//! `overhead <model>/<config>/<engine> <ratio>`, `peak_memory …`, `reads_per_step …` and
//! `values_read_per_step …` lines (device→host reads per tracked step, from the read ledger),
//! and on CubeCL backends `kernels_per_step <model>/plain` and `kernels_per_step …` (kernels
//! launched per step, from the launch ledger) and `serial_depth …` (the most values one unit
//! of a reduction the tracked steps issued walks: `persample::reduce::depth_of`).
//! `--model autoencoder` and `--model encoder-decoder` (or `all`) add the convolutional
//! autoencoder (batch 64, transposed convolutions) and the encoder–decoder transformer
//! (`d_model` 128, 2 + 2 layers, 4 heads, sources and targets of 32 tokens, batch 32).
//! `--histograms auto|host|device` picks where GradHist1d counts (default `auto`: the host on
//! CPU backends, the device elsewhere).

use std::time::Instant;

use burn::module::{Module, ModuleMapper, Param};
use burn::nn::DropoutConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{DType, Device, Distribution, Int, Tensor, TensorData};
use burn_cockpit::curvature::{OutputLoss, ProbeBudget, RecordedCurvature};
use burn_cockpit::histogram::HistogramEngine;
use burn_cockpit::persample::Snapshot;
use burn_cockpit::persample::launches::LaunchLedger;
use burn_cockpit::persample::reduce::depth_of;
use burn_cockpit::persample::{ExactPerSample, Recorder};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{
    Cockpit, Configuration, OptimizerInfo, Output, Schedule, StepInfo, Value, backend,
};

#[path = "common/architectures.rs"]
mod architectures;
#[path = "common/bench.rs"]
mod bench;

use architectures::{ConvAutoencoder, GuideCnn, PAD, TextClassifier, Translator};
use bench::median;
use clap::{Parser, ValueEnum};

/// The options (`--help` lists them; unknown options and values are refused).
#[derive(Debug, Parser)]
struct Args {
    /// Benchmark instead of training.
    #[arg(long)]
    bench: bool,
    /// Which models: `both` is the guide CNN and the transformer, `all` every model.
    #[arg(long, value_enum, default_value_t = Models::Both)]
    model: Models,
    /// Steps (default: 300 training, 20 per benchmark run).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    steps: Option<u64>,
    /// Training: compare with single-sample passes every N steps.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    check_every: u64,
    /// Training: the batch size.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
    /// Benchmark: runs per configuration (the median is printed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
    /// Benchmark: keep only these configurations, comma-separated (`economy`, `business`,
    /// `full` or a per-sample quantity's name; an unknown name is refused).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Benchmark: leave out `economy` through the exact fallback.
    #[arg(long)]
    no_exact: bool,
    /// Benchmark: where the histograms count.
    #[arg(long, value_enum, default_value_t = Histograms::Auto)]
    histograms: Histograms,
    /// Where `diag_h` is estimated (the transformer's residual): adaptive probes to this
    /// relative standard error of each trace, within `ProbeBudget::DEFAULT`'s 200 probes after
    /// its pilot of 10; default: 10 fixed probes.
    #[arg(long, value_parser = relative_error)]
    probe_budget: Option<f64>,
}

/// A relative standard error in `(0, 1]`.
fn relative_error(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value > 0.0 && value <= 1.0 => Ok(value),
        _ => Err(format!("`{text}` is not a relative error in (0, 1]")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Models {
    Cnn,
    Transformer,
    Autoencoder,
    EncoderDecoder,
    Both,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Histograms {
    Auto,
    Host,
    Device,
}

/// The command line, parsed once in `main`.
static ARGS: std::sync::OnceLock<Args> = std::sync::OnceLock::new();

fn args() -> &'static Args {
    ARGS.get_or_init(Args::parse)
}

/// The host heap, now and at its peak (flex keeps every tensor there).
#[global_allocator]
static HEAP: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

const LR: f64 = 0.05;

/// The per-sample quantities of `economy` plus the rest of Cockpit's per-sample ones that a
/// single step computes (Alpha needs two steps and is left to the training run).
const COMPARED: [QuantityKind; 8] = [
    QuantityKind::GradHist1d,
    QuantityKind::GradHist2d,
    QuantityKind::NormTest,
    QuantityKind::InnerTest,
    QuantityKind::OrthoTest,
    QuantityKind::MeanGSNR,
    QuantityKind::CABS,
    QuantityKind::EarlyStopping,
];

/// A model, its inputs and how to run it, as the loop below needs them.
trait Task: Sized {
    /// Whether the model is piecewise linear between its drop-ins (ReLU, pooling), so that its
    /// Hessian diagonal is the Gauss–Newton diagonal.
    const PIECEWISE_LINEAR: bool;
    /// Classes of the output.
    const CLASSES: usize;
    type Model: Module + Clone + Send + Sync + 'static;
    type Input: Clone + Send + Sync + 'static;
    fn name(&self) -> &'static str;
    fn model(&self, device: &Device) -> Self::Model;
    /// The model without dropout.
    fn without_dropout(model: Self::Model) -> Self::Model;
    fn batch(&self, device: &Device, seed: u64) -> (Self::Input, Tensor<1, Int>);
    /// The input in another float type (token ids stay as they are).
    fn cast(input: Self::Input, dtype: DType) -> Self::Input;
    fn logits(model: &Self::Model, input: Self::Input) -> Tensor<2>;
    /// Samples `from..to` of a batch.
    fn rows(input: &Self::Input, from: usize, to: usize) -> Self::Input;
    fn size(input: &Self::Input) -> usize;
}

/// A small deterministic generator (xorshift), so the data needs no extra crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The guide CNN on 28×28 images of 10 classes: class `c` lights a 6×6 square at a
/// class-dependent place, under Gaussian noise.
struct Images {
    batch: usize,
    hidden: usize,
    dropout: f64,
}

impl Task for Images {
    const PIECEWISE_LINEAR: bool = true;
    const CLASSES: usize = 10;
    type Model = GuideCnn;
    type Input = Tensor<3>;

    fn name(&self) -> &'static str {
        "guide_cnn"
    }

    fn model(&self, device: &Device) -> GuideCnn {
        GuideCnn::new(device, 10, self.hidden, self.dropout)
    }

    fn without_dropout(model: GuideCnn) -> GuideCnn {
        model.with_dropout(0.0)
    }

    fn batch(&self, device: &Device, seed: u64) -> (Tensor<3>, Tensor<1, Int>) {
        image_batch(self.batch, device, seed)
    }

    fn cast(input: Tensor<3>, dtype: DType) -> Tensor<3> {
        input.cast(dtype)
    }

    fn logits(model: &GuideCnn, input: Tensor<3>) -> Tensor<2> {
        model.forward(input)
    }

    fn rows(input: &Tensor<3>, from: usize, to: usize) -> Tensor<3> {
        input.clone().slice(from..to)
    }

    fn size(input: &Tensor<3>) -> usize {
        input.dims()[0]
    }
}

/// Images `[batch, 28, 28]` of 10 classes: class `c` lights a 6×6 square at a class-dependent
/// place, under Gaussian noise.
fn image_batch(batch: usize, device: &Device, seed: u64) -> (Tensor<3>, Tensor<1, Int>) {
    let mut rng = Rng(seed.wrapping_mul(2654435761).wrapping_add(1));
    let mut pixels = vec![0.0f32; batch * 28 * 28];
    let mut labels = Vec::with_capacity(batch);
    for n in 0..batch {
        let c = rng.below(10);
        labels.push(c as i64);
        let (top, left) = (2 + (c / 5) * 12, 1 + (c % 5) * 5);
        for i in top..top + 6 {
            for j in left..left + 6 {
                pixels[n * 784 + i * 28 + j] = 1.0;
            }
        }
    }
    let clean = Tensor::<3>::from_data(TensorData::new(pixels, [batch, 28, 28]), device);
    let noise = Tensor::random([batch, 28, 28], Distribution::Normal(0.0, 0.3), device);
    let labels = Tensor::from_data(TensorData::new(labels, [batch]), device);
    (clean + noise, labels)
}

/// The convolutional autoencoder (transposed convolutions) on the images of [`Images`].
struct Autoencoder {
    batch: usize,
}

impl Task for Autoencoder {
    const PIECEWISE_LINEAR: bool = true;
    const CLASSES: usize = 10;
    type Model = ConvAutoencoder;
    type Input = Tensor<3>;

    fn name(&self) -> &'static str {
        "conv_autoencoder"
    }

    fn model(&self, device: &Device) -> ConvAutoencoder {
        ConvAutoencoder::new(device, 10)
    }

    fn without_dropout(model: ConvAutoencoder) -> ConvAutoencoder {
        model
    }

    fn batch(&self, device: &Device, seed: u64) -> (Tensor<3>, Tensor<1, Int>) {
        image_batch(self.batch, device, seed)
    }

    fn cast(input: Tensor<3>, dtype: DType) -> Tensor<3> {
        input.cast(dtype)
    }

    fn logits(model: &ConvAutoencoder, input: Tensor<3>) -> Tensor<2> {
        model.forward(input)
    }

    fn rows(input: &Tensor<3>, from: usize, to: usize) -> Tensor<3> {
        input.clone().slice(from..to)
    }

    fn size(input: &Tensor<3>) -> usize {
        input.dims()[0]
    }
}

/// Token sequences of 3 classes (as [`Text`]), padded to random lengths.
fn token_batch(
    batch: usize,
    length: usize,
    vocabulary: usize,
    device: &Device,
    seed: u64,
) -> (Tensor<2, Int>, Tensor<1, Int>) {
    let mut rng = Rng(seed.wrapping_mul(6364136223846793005).wrapping_add(7));
    let mut tokens = vec![PAD; batch * length];
    let mut labels = Vec::with_capacity(batch);
    for n in 0..batch {
        let c = rng.below(3);
        labels.push(c as i64);
        let used = length / 2 + rng.below(length / 2 + 1);
        for t in 0..used {
            let token = if rng.below(4) == 0 {
                1 + c
            } else {
                4 + rng.below(vocabulary - 4)
            };
            tokens[n * length + t] = token as i64;
        }
    }
    (
        Tensor::from_data(TensorData::new(tokens, [batch, length]), device),
        Tensor::from_data(TensorData::new(labels, [batch]), device),
    )
}

/// The encoder–decoder on the sequences of [`Text`] as sources, each one's reversal as its
/// target, classified by the source's keyword.
struct Translation {
    batch: usize,
    length: usize,
    vocabulary: usize,
    d_model: usize,
    layers: usize,
    heads: usize,
    dropout: f64,
}

impl Task for Translation {
    const PIECEWISE_LINEAR: bool = false;
    const CLASSES: usize = 3;
    type Model = Translator;
    type Input = (Tensor<2, Int>, Tensor<2, Int>);

    fn name(&self) -> &'static str {
        "encoder_decoder"
    }

    fn model(&self, device: &Device) -> Translator {
        Translator::new(
            device,
            self.vocabulary,
            self.length,
            3,
            self.d_model,
            self.layers,
            self.heads,
            self.dropout,
        )
    }

    fn without_dropout(mut model: Translator) -> Translator {
        let off = || DropoutConfig::new(0.0).init();
        for layer in &mut model.encoder.layers {
            layer.dropout = off();
            layer.mha.dropout = off();
            layer.pwff.dropout = off();
        }
        for layer in &mut model.decoder.layers {
            layer.dropout = off();
            layer.self_attn.dropout = off();
            layer.cross_attn.dropout = off();
            layer.pwff.dropout = off();
        }
        model
    }

    fn batch(&self, device: &Device, seed: u64) -> (Self::Input, Tensor<1, Int>) {
        let (source, labels) = token_batch(self.batch, self.length, self.vocabulary, device, seed);
        let target = source.clone().flip([1]);
        ((source, target), labels)
    }

    fn cast(input: Self::Input, _dtype: DType) -> Self::Input {
        input
    }

    fn logits(model: &Translator, (source, target): Self::Input) -> Tensor<2> {
        model.forward(source, target)
    }

    fn rows((source, target): &Self::Input, from: usize, to: usize) -> Self::Input {
        (
            source.clone().slice(from..to),
            target.clone().slice(from..to),
        )
    }

    fn size((source, _): &Self::Input) -> usize {
        source.dims()[0]
    }
}

/// The text classifier on token sequences of 3 classes: class `c`'s keyword (token `1 + c`)
/// appears most often among filler tokens; sequences padded to random lengths.
struct Text {
    batch: usize,
    length: usize,
    vocabulary: usize,
    d_model: usize,
    layers: usize,
    heads: usize,
    dropout: f64,
}

impl Task for Text {
    const PIECEWISE_LINEAR: bool = false;
    const CLASSES: usize = 3;
    type Model = TextClassifier;
    type Input = Tensor<2, Int>;

    fn name(&self) -> &'static str {
        "text_transformer"
    }

    fn model(&self, device: &Device) -> TextClassifier {
        TextClassifier::new(
            device,
            self.vocabulary,
            self.length,
            3,
            self.d_model,
            self.layers,
            self.heads,
            self.dropout,
        )
    }

    fn without_dropout(mut model: TextClassifier) -> TextClassifier {
        for layer in &mut model.transformer.layers {
            layer.dropout = DropoutConfig::new(0.0).init();
            layer.mha.dropout = DropoutConfig::new(0.0).init();
            layer.pwff.dropout = DropoutConfig::new(0.0).init();
        }
        model
    }

    fn batch(&self, device: &Device, seed: u64) -> (Tensor<2, Int>, Tensor<1, Int>) {
        token_batch(self.batch, self.length, self.vocabulary, device, seed)
    }

    fn cast(input: Tensor<2, Int>, _dtype: DType) -> Tensor<2, Int> {
        input
    }

    fn logits(model: &TextClassifier, input: Tensor<2, Int>) -> Tensor<2> {
        model.forward(input)
    }

    fn rows(input: &Tensor<2, Int>, from: usize, to: usize) -> Tensor<2, Int> {
        input.clone().slice(from..to)
    }

    fn size(input: &Tensor<2, Int>) -> usize {
        input.dims()[0]
    }
}

/// Per-sample cross-entropy `[B]`.
fn losses(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let [b, _] = logits.dims();
    log_softmax(logits, 1)
        .gather(1, labels.reshape([b, 1]))
        .reshape([b])
        .neg()
}

/// What one tracked or plain step computed.
struct Step<T: Task> {
    model: T::Model,
    loss: f64,
    covered: bool,
}

/// One SGD step of `model`, tracked by `cockpit` (fast path, or single-sample passes with
/// `exact`) when given.
fn step<T: Task>(
    model: T::Model,
    input: T::Input,
    labels: Tensor<1, Int>,
    step: usize,
    cockpit: Option<&mut Cockpit>,
    exact: bool,
) -> Result<Step<T>, Box<dyn std::error::Error>> {
    let tracking = cockpit.as_ref().is_some_and(|c| c.needs_per_sample(step));
    let recorder = (tracking && !exact).then(Recorder::start);
    let per_sample = losses(T::logits(&model, input.clone()), labels.clone());
    let loss = per_sample.clone().mean();
    let grads = loss.backward();
    let factors = recorder.map(|r| r.finish(&grads)).transpose()?;
    let grads = GradientsParams::from_grads(grads, &model);
    let mut covered = true;
    if let Some(cockpit) = cockpit {
        let mut info = StepInfo::new(loss.clone().detach())
            .with_individual_losses(per_sample.detach())
            .with_optimizer(OptimizerInfo::sgd(LR));
        if cockpit.needs_curvature(step) {
            info = info.with_curvature(curvature::<T>(&model, &input, &labels));
        }
        if let Some(factors) = factors {
            covered = factors.coverage(&Snapshot::of_params(&model)).is_complete();
            info = info.with_per_sample(factors);
        } else if tracking {
            info = info.with_per_sample(exact_source::<T>(&model, &input, &labels));
        }
        cockpit.track(step, &model, &grads, info)?;
    }
    let loss = loss.into_scalar::<f64>();
    let model = SgdConfig::new().init().step(LR, model, grads);
    Ok(Step {
        model,
        loss,
        covered,
    })
}

/// Single-sample backward passes of `model` on the batch.
/// The step's curvature diagonals through recorded backward passes of the drop-ins, one per
/// class: exact for the piecewise-linear CNN; for the transformer (attention, LayerNorm, GELU)
/// the exact Gauss–Newton diagonal plus Hutchinson's estimate of the residual (10 probes).
/// Dropout off, so that every pass sees the same network.
fn curvature<T: Task>(
    model: &T::Model,
    input: &T::Input,
    labels: &Tensor<1, Int>,
) -> RecordedCurvature<T::Model> {
    let model = T::without_dropout(model.clone());
    let input = input.clone();
    let onehot = labels.clone().one_hot::<2>(T::CLASSES).float();
    let source = RecordedCurvature::new(
        &model,
        move |m: &T::Model| T::logits(m, input.clone()),
        OutputLoss::CrossEntropy(onehot),
        1,
    );
    let source = match args().probe_budget {
        Some(relative) => source.with_probe_budget(ProbeBudget {
            relative,
            ..ProbeBudget::DEFAULT
        }),
        None => source,
    };
    if T::PIECEWISE_LINEAR {
        source.piecewise_linear()
    } else {
        source
    }
}

fn exact_source<T: Task>(
    model: &T::Model,
    input: &T::Input,
    labels: &Tensor<1, Int>,
) -> ExactPerSample {
    let (model, input, labels) = (model.clone(), input.clone(), labels.clone());
    ExactPerSample::new(T::size(&input), move |n| {
        let loss = losses(
            T::logits(&model, T::rows(&input, n, n + 1)),
            labels.clone().slice(n..n + 1),
        )
        .mean();
        Ok(GradientsParams::from_grads(loss.backward(), &model))
    })
}

/// Casts every float parameter of a module (still tracked by autodiff).
struct ToDType(DType);

impl ModuleMapper for ToDType {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let cast = tensor.cast(self.0).detach().require_grad();
        Param::from_mapped_value(id, cast, mapper)
    }
}

/// The single-step per-sample quantities of `model` on a batch, from the fast path and from
/// single-sample passes, in `dtype` (float64 where the backend has it, so that rounding does
/// not move near-zero gradient elements across the histograms' edge at 0): the largest
/// relative difference of the numbers, and the largest fraction of histogram counts that
/// moved.
fn compare<T: Task>(
    model: &T::Model,
    input: T::Input,
    labels: Tensor<1, Int>,
    dtype: DType,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let model = T::without_dropout(model.clone()).map(&mut ToDType(dtype));
    let input = T::cast(input, dtype);
    let schedule = Schedule::every_step();
    let track = |exact: bool| -> Result<Output, Box<dyn std::error::Error>> {
        let mut cockpit = Cockpit::from_kinds(COMPARED, &schedule)?;
        // The step's SGD update is discarded: only the tracked values are compared.
        step::<T>(
            model.clone(),
            input.clone(),
            labels.clone(),
            0,
            Some(&mut cockpit),
            exact,
        )?;
        Ok(cockpit.output().clone())
    };
    let (fast, exact) = (track(false)?, track(true)?);
    let (mut worst, mut moved) = (0.0_f64, 0.0_f64);
    for (at, name, value) in exact.iter() {
        let other = fast
            .get(at, name)
            .ok_or_else(|| format!("{name} missing on the fast path"))?;
        match (value, other) {
            (Value::Float(a), Value::Float(b)) => {
                worst = worst.max((a - b).abs() / a.abs().max(1e-6));
            }
            (Value::Hist1d(a), Value::Hist1d(b)) => {
                moved = moved.max(moved_fraction(&a.hist, &b.hist))
            }
            (Value::Hist2d(a), Value::Hist2d(b)) => {
                let counts = |h: &[i64]| h.iter().map(|c| *c as f64).collect::<Vec<_>>();
                moved = moved.max(moved_fraction(&counts(&a.hist), &counts(&b.hist)));
            }
            _ => {}
        }
    }
    Ok((worst, moved))
}

/// The fraction of a histogram's counts that sit in another bin in `b` than in `a`.
fn moved_fraction(a: &[f64], b: &[f64]) -> f64 {
    let total: f64 = a.iter().sum();
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / 2.0;
    diff / total.max(1.0)
}

/// Trains `task`'s model, checking coverage at every step and agreement every `check_every`.
fn train<T: Task>(
    task: &T,
    device: &Device,
    dtype: DType,
) -> Result<(), Box<dyn std::error::Error>> {
    let steps = args().steps.unwrap_or(300) as usize;
    let check_every = args().check_every as usize;
    let mut cockpit = Cockpit::from_kinds(Configuration::Economy.kinds(), &Schedule::every_step())?;
    let mut model = task.model(device);
    let progress = indicatif::ProgressBar::new(steps as u64);
    let (mut first, mut last) = (f64::NAN, f64::NAN);
    let (mut uncovered, mut worst, mut moved) = (0, 0.0_f64, 0.0_f64);
    for s in 0..steps {
        let (input, labels) = task.batch(device, s as u64);
        if s % check_every == 0 || s + 1 == steps {
            let (w, m) = compare::<T>(&model, input.clone(), labels.clone(), dtype)?;
            worst = worst.max(w);
            moved = moved.max(m);
        }
        let done = step::<T>(model, input, labels, s, Some(&mut cockpit), false)?;
        model = done.model;
        uncovered += usize::from(!done.covered);
        if s < 10 {
            first = if s == 0 {
                done.loss
            } else {
                first.min(done.loss)
            };
        }
        last = done.loss;
        progress.inc(1);
    }
    progress.finish_and_clear();
    let alphas = cockpit.output().series("Alpha").len();
    println!(
        "{}: {steps} steps, economy at every step; loss {first:.3} → {last:.3}; fast-path \
         coverage incomplete at {uncovered} steps; fast path against single-sample passes \
         (every {check_every} steps, {} quantities, {dtype:?}): worst relative difference \
         {worst:.1e}, histogram counts moved {:.2} %; {alphas} α values",
        task.name(),
        COMPARED.len(),
        moved * 100.0
    );
    let (tolerance, tolerated) = if dtype == DType::F64 {
        (1e-8, 0.0)
    } else {
        (1e-3, 0.01)
    };
    if uncovered > 0 || worst > tolerance || moved > tolerated {
        return Err(format!("{}: the fast path does not match", task.name()).into());
    }
    Ok(())
}

/// What [`timed`] measured: seconds per step, peak heap, the median device→host reads and
/// values read per tracked step (the read ledger), kernels launched per step (the launch
/// ledger, CubeCL backends only) and the most values one unit of a reduction walked
/// (`persample::reduce::depth_of`, CubeCL backends only).
type Timing = (f64, f64, (f64, f64), Option<f64>, u64);

/// Seconds per step, peak heap and reads of `steps` steps.
fn timed<T: Task>(
    task: &T,
    device: &Device,
    steps: usize,
    kinds: Option<&[QuantityKind]>,
    exact: bool,
    data: &[(T::Input, Tensor<1, Int>)],
) -> Result<Timing, Box<dyn std::error::Error>> {
    let mut model = task.model(device);
    let mut cockpit = match kinds {
        Some(kinds) => Some(
            Cockpit::from_kinds(kinds.iter().copied(), &Schedule::every_step())?
                .with_histogram_engine(histogram_engine()),
        ),
        None => None,
    };
    HEAP.reset_peak_usage();
    let before = HEAP.current_usage();
    let ledger = LaunchLedger::start();
    let launched = ledger.as_ref().map(LaunchLedger::launches);
    let start = Instant::now();
    let (mut reads, mut values, mut deepest) = (Vec::new(), Vec::new(), 0);
    for s in 0..steps {
        let (input, labels) = data[s % data.len()].clone();
        let (stepped, depth) =
            depth_of(|| step::<T>(model, input, labels, s, cockpit.as_mut(), exact));
        model = stepped?.model;
        deepest = deepest.max(depth.deepest);
        if let Some(cockpit) = &cockpit {
            reads.push(cockpit.reads().reads as f64);
            values.push(cockpit.reads().values as f64);
        }
    }
    let seconds = start.elapsed().as_secs_f64() / steps as f64;
    let peak = HEAP.peak_usage().saturating_sub(before) as f64;
    // Flush the last step's work (one read of the parameters, alike in every run) before the
    // launches are counted.
    burn_cockpit::persample::readback::read_values(Snapshot::of_params(&model).flatten().sum())?;
    let kernels = ledger
        .as_ref()
        .map(LaunchLedger::launches)
        .zip(launched)
        .map(|(after, before)| (after - before) as f64 / steps as f64);
    Ok((
        seconds,
        peak,
        (median(reads), median(values)),
        kernels,
        deepest,
    ))
}

/// Where the benchmark's histograms count: `--histograms auto|host|device` (default `auto`).
fn histogram_engine() -> HistogramEngine {
    match args().histograms {
        Histograms::Host => HistogramEngine::Host,
        Histograms::Device => HistogramEngine::Device,
        Histograms::Auto => HistogramEngine::Auto,
    }
}

/// Plain against tracked steps, interleaved.
fn bench<T: Task>(task: &T, device: &Device) -> Result<(), Box<dyn std::error::Error>> {
    let steps = args().steps.unwrap_or(20) as usize;
    let repeats = args().repeats as usize;
    let data: Vec<_> = (0..4).map(|s| task.batch(device, s)).collect();
    let mut configs: Vec<(String, Vec<QuantityKind>, bool)> =
        vec![("economy".into(), Configuration::Economy.kinds(), false)];
    for kind in [
        QuantityKind::Alpha,
        QuantityKind::NormTest,
        QuantityKind::InnerTest,
        QuantityKind::OrthoTest,
        QuantityKind::MeanGSNR,
        QuantityKind::GradHist1d,
    ] {
        configs.push((kind.name().into(), vec![kind], false));
    }
    configs.push(("business".into(), Configuration::Business.kinds(), false));
    configs.push(("full".into(), Configuration::Full.kinds(), false));
    if !args().no_exact {
        configs.push(("economy".into(), Configuration::Economy.kinds(), true));
    }
    let only = &args().only;
    if let Some(unknown) = only
        .iter()
        .find(|o| !configs.iter().any(|(name, _, _)| name == *o))
    {
        return Err(format!("--only: no configuration `{unknown}`").into());
    }
    if !only.is_empty() {
        configs.retain(|(name, _, _)| only.contains(name));
    }
    let _ = timed(task, device, 2, None, false, &data)?; // warm-up
    let (mut plain, mut plain_peak, mut plain_kernels) = (Vec::new(), Vec::new(), None);
    let mut times = vec![Vec::new(); configs.len()];
    let mut peaks = vec![Vec::new(); configs.len()];
    let mut reads = vec![(0.0, 0.0); configs.len()];
    let mut kernels = vec![None; configs.len()];
    let mut depths = vec![0; configs.len()];
    for _ in 0..repeats {
        let (t, p, _, k, _) = timed(task, device, steps, None, false, &data)?;
        plain.push(t);
        plain_peak.push(p);
        plain_kernels = k;
        for (i, (_, kinds, exact)) in configs.iter().enumerate() {
            let (t, p, r, k, d) = timed(task, device, steps, Some(kinds), *exact, &data)?;
            times[i].push(t);
            peaks[i].push(p);
            reads[i] = r;
            kernels[i] = k;
            depths[i] = d;
        }
    }
    let (plain, plain_peak) = (median(plain), median(plain_peak));
    println!(
        "{}: plain step {:.2} ms, peak heap {:.1} MB ({steps} steps x {repeats} repeats, median)",
        task.name(),
        plain * 1e3,
        plain_peak / 1e6
    );
    if let Some(k) = plain_kernels {
        println!("kernels_per_step {}/plain {k:.1}", task.name());
    }
    for ((((((name, _, exact), t), p), (r, v)), k), d) in configs
        .iter()
        .zip(times)
        .zip(peaks)
        .zip(reads)
        .zip(kernels)
        .zip(depths)
    {
        let engine = if *exact { "exact" } else { "fast" };
        let (t, p) = (median(t), median(p));
        println!(
            "overhead {}/{name}/{engine} {:.3}   ({:.2} ms/step)",
            task.name(),
            t / plain,
            t * 1e3
        );
        println!(
            "peak_memory {}/{name}/{engine} {:.3}   ({:.1} MB)",
            task.name(),
            p / plain_peak,
            p / 1e6
        );
        // What a GPU would pay: blocking reads (synchronisations) and values read back.
        println!("reads_per_step {}/{name}/{engine} {r}", task.name());
        println!("values_read_per_step {}/{name}/{engine} {v}", task.name());
        if let Some(k) = k {
            println!("kernels_per_step {}/{name}/{engine} {k:.1}", task.name());
            // Work that does not spread over a GPU: the most values one unit of a
            // reduction of the tracked steps walked.
            println!("serial_depth {}/{name}/{engine} {d}", task.name());
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args();
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    // `both`: the guide CNN and the transformer; `all`: every model.
    let wanted = |name: Models| {
        args.model == name
            || args.model == Models::All
            || (args.model == Models::Both && matches!(name, Models::Cnn | Models::Transformer))
    };
    let benchmark = args.bench;
    println!("backend {backend_name}");
    if benchmark {
        let cnn = Images {
            batch: 64,
            hidden: 512,
            dropout: 0.5,
        };
        let text = Text {
            batch: 32,
            length: 64,
            vocabulary: 1000,
            d_model: 128,
            layers: 2,
            heads: 4,
            dropout: 0.1,
        };
        let autoencoder = Autoencoder { batch: 64 };
        let translation = Translation {
            batch: 32,
            length: 32,
            vocabulary: 1000,
            d_model: 128,
            layers: 2,
            heads: 4,
            dropout: 0.1,
        };
        if wanted(Models::Cnn) {
            bench(&cnn, &device)?;
        }
        if wanted(Models::Transformer) {
            bench(&text, &device)?;
        }
        if wanted(Models::Autoencoder) {
            bench(&autoencoder, &device)?;
        }
        if wanted(Models::EncoderDecoder) {
            bench(&translation, &device)?;
        }
        return Ok(());
    }
    let batch = args.batch as usize;
    let cnn = Images {
        batch,
        hidden: 128,
        dropout: 0.5,
    };
    let text = Text {
        batch,
        length: 32,
        vocabulary: 200,
        d_model: 64,
        layers: 2,
        heads: 4,
        dropout: 0.1,
    };
    let autoencoder = Autoencoder { batch };
    let translation = Translation {
        batch,
        length: 16,
        vocabulary: 200,
        d_model: 32,
        layers: 2,
        heads: 4,
        dropout: 0.1,
    };
    // wgpu on lavapipe computes float64 as NaN: compare there in float32.
    let dtype = if backend_name == "wgpu" {
        DType::F32
    } else {
        DType::F64
    };
    if wanted(Models::Cnn) {
        train(&cnn, &device, dtype)?;
    }
    if wanted(Models::Transformer) {
        train(&text, &device, dtype)?;
    }
    if wanted(Models::Autoencoder) {
        train(&autoencoder, &device, dtype)?;
    }
    if wanted(Models::EncoderDecoder) {
        train(&translation, &device, dtype)?;
    }
    Ok(())
}
