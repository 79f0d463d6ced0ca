//! What a GPU would pay per tracked step, counted on the CPU: device→host reads (each a
//! synchronisation) and the values they bring back, through the read ledger
//! (`readback`). Every quantity finishes from one batched read per step when the histograms
//! count on the device; these tests hold that, hold today's counts with the histograms binned
//! on the host so that no change adds reads unnoticed, and keep reads out of every library
//! file but the ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::Backend;
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor, TensorData};
use burn_cockpit::QuantityError;
use burn_cockpit::curvature::{
    CurvatureSource, DiagonalKind, FiniteDifferenceHvp, Hutchinson, lanczos, power_iteration,
};
use burn_cockpit::histogram::HistogramEngine;
use burn_cockpit::persample::Snapshot;
use burn_cockpit::persample::readback::ReadCount;
use burn_cockpit::persample::readback::reads_on_this_thread;
use burn_cockpit::persample::{Linear, Recorder};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, Configuration, OptimizerInfo, Schedule, StepInfo};

/// Calls that read a tensor back to the host (burn 0.22's `Tensor` and `Transaction` API).
const READS: [&str; 8] = [
    "into_data(",
    "to_data(",
    "try_into_data(",
    "try_into_vec",
    "into_scalar(",
    "try_into_scalar(",
    "Transaction",
    "into_vec(",
];

fn library_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            library_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every device read of the libraries goes through `readback` (so the ledger sees it): no
/// other library file calls a reading API outside its tests.
#[test]
fn device_reads_live_in_the_ledger_only() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    library_sources(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates"))
        .unwrap()
        .filter_map(Result::ok)
    {
        library_sources(&krate.path().join("src"), &mut files);
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let ledger = root.join("crates/persample/src/readback.rs");
    let mut offenders = Vec::new();
    for file in files.iter().filter(|f| **f != ledger) {
        // Test helpers and test modules may read as they like.
        if file.file_name().is_some_and(|n| n == "testing.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            if line.starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.split("//").next().unwrap_or_default();
            if READS.iter().any(|call| code.contains(call)) {
                offenders.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "device reads outside the ledger (use readback::read_values / read_into):\n{}",
        offenders.join("\n")
    );
}

thread_local! {
    /// Reads made inside the curvature source on this thread (its own products).
    static CURVATURE_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A curvature source whose own reads (finite-difference products) are counted apart.
#[derive(Debug)]
struct Counted<S>(S);

impl<S: CurvatureSource> Counted<S> {
    fn counting<R>(&self, work: impl FnOnce() -> R) -> R {
        let before = reads_on_this_thread();
        let result = work();
        let spent = (reads_on_this_thread() - before).reads;
        CURVATURE_READS.with(|c| c.set(c.get() + spent));
        result
    }
}

impl<S: CurvatureSource> CurvatureSource for Counted<S> {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        self.counting(|| self.0.hvp(params, v))
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        self.counting(|| self.0.diagonal(params, kind))
    }
}

#[derive(Module, Debug)]
struct Mlp {
    l1: Linear,
    l2: Linear,
    l3: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            l1: LinearConfig::new(12, 16).init(device).into(),
            l2: LinearConfig::new(16, 8).init(device).into(),
            l3: LinearConfig::new(8, 4).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l3
            .forward(self.l2.forward(self.l1.forward(x).tanh()).tanh())
    }
}

/// Step `step`'s batch of `batch` inputs `[batch, 12]` and one-hot targets `[batch, 4]`.
fn batch_at(step: usize, batch: usize, device: &Device) -> (Tensor<2>, Tensor<2>) {
    let x: Vec<f32> = (0..batch * 12)
        .map(|i| (((i + step) * 31 % 17) as f32 - 8.0) / 8.0)
        .collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [batch, 12]), device);
    let onehot: Vec<f32> = (0..batch * 4)
        .map(|i| f32::from(u8::from((i / 4 + step) % 4 == i % 4)))
        .collect();
    let onehot = Tensor::<2>::from_data(TensorData::new(onehot, [batch, 4]), device);
    (x, onehot)
}

/// The reads of each of `steps` tracked steps of the quantities `kinds` at every step on a
/// small MLP (batch `batch`, fast path), less those the curvature source makes for its own
/// Hessian-vector products (the budget allows one per product).
fn reads_per_step(
    backend: &Backend,
    kinds: Vec<QuantityKind>,
    engine: HistogramEngine,
    steps: usize,
    batch: usize,
) -> Vec<ReadCount> {
    let device = backend.device.clone().autodiff();
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step())
        .unwrap()
        .with_histogram_engine(engine);
    let mut counts = Vec::new();
    for step in 0..steps {
        let (x, onehot) = batch_at(step, batch, &device);
        let loss_of = move |m: &Mlp, x: Tensor<2>, onehot: Tensor<2>| {
            (log_softmax(m.forward(x), 1) * onehot)
                .sum_dim(1)
                .neg()
                .reshape([batch])
        };
        let recorder = Recorder::start();
        let losses = loss_of(&model, x.clone(), onehot.clone());
        let loss = losses.clone().mean();
        let raw = loss.backward();
        let factors = recorder.finish(&raw).unwrap();
        let grads = GradientsParams::from_grads(raw, &model);
        let mut info = StepInfo::new(loss.detach())
            .with_individual_losses(losses.detach())
            .with_optimizer(OptimizerInfo::sgd(0.05))
            .with_per_sample(factors);
        if cockpit.needs_curvature(step) {
            let hvp = FiniteDifferenceHvp::new(&model, move |m: &Mlp| {
                let loss = loss_of(m, x.clone(), onehot.clone()).mean();
                Ok(GradientsParams::from_grads(loss.backward(), m))
            });
            info = info.with_curvature(Counted(Hutchinson::new(hvp, 2, 1)));
        }
        CURVATURE_READS.with(|c| c.set(0));
        cockpit.track(step, &model, &grads, info).unwrap();
        let own = CURVATURE_READS.with(std::cell::Cell::get);
        // The step's reads without the curvature source's own (finite-difference products).
        counts.push(ReadCount {
            reads: cockpit.reads().reads - own,
            values: cockpit.reads().values,
            waits: cockpit.reads().waits - own,
        });
        model = optim.step(0.05, model, grads);
    }
    counts
}

/// Every quantity finishes from the step's one batched read when the histograms count on the
/// device: `economy` and `business` take exactly one read per tracked step (the loss, every
/// number of every quantity and GradHist1d's counts) beside the curvature source's own
/// products, and at most `Σ bins + 4P + 3B + 64` values (P = 6 parameter tensors, B = 16),
/// whatever the step. Without GradHist1d the host engine needs no more.
fn one_read_per_step(backend: &Backend) {
    let batch = 16;
    let (p, b, bins) = (6u64, batch as u64, 100u64);
    for configuration in [Configuration::Economy, Configuration::Business] {
        let all = configuration.kinds();
        let without: Vec<QuantityKind> = all
            .iter()
            .copied()
            .filter(|k| *k != QuantityKind::GradHist1d)
            .collect();
        for (kinds, engine, budget) in [
            (all, HistogramEngine::Device, bins + 4 * p + 3 * b + 64),
            (without, HistogramEngine::Host, 4 * p + 3 * b + 64),
        ] {
            let counts = reads_per_step(backend, kinds, engine, 3, batch);
            println!(
                "{configuration:?} ({engine:?} engine) on {}: {counts:?}",
                backend.name
            );
            for (step, count) in counts.iter().enumerate() {
                assert_eq!(count.reads, 1, "{configuration:?} step {step}: {count}");
                assert!(
                    count.values <= budget,
                    "{configuration:?} step {step}: {count} > {budget} values"
                );
            }
        }
    }
}

/// Bin adaptation joins the step's one batched read: GradHist1d adapting to the per-sample
/// gradients (`GradAbsMax`) and GradHist2d adapting its y axis to the parameters
/// (`ParamAbsMax`), both on the device, take one read per tracked step, and the next step's
/// ranges are `±(1 + padding)·max`, the maxima computed here independently (single-sample
/// backward passes; the parameters read back).
fn adaptation_joins_the_batched_read(backend: &Backend) {
    use burn_cockpit::histogram::BinAdaptation;
    use burn_cockpit::quantity::{GradHist1d, GradHist2d};
    let device = backend.device.clone().autodiff();
    let model = Mlp::new(&device);
    let batch = 8;
    let padding = 0.1;
    let adapt = |grad: bool| {
        let (schedule, min_size) = (Schedule::every_step(), 1e-6);
        if grad {
            BinAdaptation::GradAbsMax {
                schedule,
                padding,
                min_size,
            }
        } else {
            BinAdaptation::ParamAbsMax {
                schedule,
                padding,
                min_size,
            }
        }
    };
    let mut cockpit = Cockpit::new(vec![
        Box::new(
            GradHist1d::new(Schedule::every_step())
                .with_engine(HistogramEngine::Device)
                .with_adaptation(adapt(true)),
        ),
        Box::new(
            GradHist2d::new(Schedule::every_step())
                .with_engine(HistogramEngine::Device)
                .with_adaptation(None, Some(adapt(false))),
        ),
    ])
    .unwrap();
    let x: Vec<f32> = (0..batch * 12)
        .map(|i| ((i * 31 % 17) as f32 - 8.0) / 8.0)
        .collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [batch, 12]), &device);
    let onehot: Vec<f32> = (0..batch * 4)
        .map(|i| f32::from(u8::from((i / 4) % 4 == i % 4)))
        .collect();
    let onehot = Tensor::<2>::from_data(TensorData::new(onehot, [batch, 4]), &device);
    let loss_of = |x: Tensor<2>, y: Tensor<2>| {
        let b = x.dims()[0];
        (log_softmax(model.forward(x), 1) * y)
            .sum_dim(1)
            .neg()
            .reshape([b])
    };
    for step in 0..2 {
        let recorder = Recorder::start();
        let losses = loss_of(x.clone(), onehot.clone());
        let loss = losses.clone().mean();
        let raw = loss.backward();
        let factors = recorder.finish(&raw).unwrap();
        let grads = GradientsParams::from_grads(raw, &model);
        let info = StepInfo::new(loss.detach())
            .with_individual_losses(losses.detach())
            .with_per_sample(factors);
        cockpit.track(step, &model, &grads, info).unwrap();
        assert_eq!(cockpit.reads().reads, 1, "step {step}: {}", cockpit.reads());
    }
    // The oracle: the largest per-sample gradient element, one backward pass per sample, and
    // the largest parameter.
    let max_abs = |t: Tensor<1>| -> f64 {
        t.abs()
            .max()
            .cast(burn::tensor::DType::F64)
            .into_data()
            .try_to_vec::<f64>()
            .unwrap()[0]
    };
    let grad_max = (0..batch)
        .map(|n| {
            let own = loss_of(x.clone().slice(n..n + 1), onehot.clone().slice(n..n + 1)).sum();
            let grads = GradientsParams::from_grads(own.backward(), &model);
            max_abs(Snapshot::of_grads(&model, &grads).unwrap().flatten())
        })
        .fold(0.0, f64::max);
    let param_max = max_abs(Snapshot::of_params(&model).flatten());
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * b.abs();
    match cockpit.output().get(1, "GradHist1d") {
        Some(burn_cockpit::Value::Hist1d(h)) => {
            let hi = *h.edges.last().unwrap();
            assert!(close(hi, (1.0 + padding) * grad_max), "{hi} vs {grad_max}");
            assert!(close(h.edges[0], -hi), "{:?}", h.edges);
        }
        other => panic!("{other:?}"),
    }
    match cockpit.output().get(1, "GradHist2d") {
        Some(burn_cockpit::Value::Hist2d(h)) => {
            let hi = *h.y_edges.last().unwrap();
            assert!(
                close(hi, (1.0 + padding) * param_max),
                "{hi} vs {param_max}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// With the host engine, GradHist1d reads the per-sample gradient elements back and bins them
/// on the host (one read per factor and bias chunk: 9 on this MLP). Today's counts are the
/// ceiling no change may raise.
fn host_histograms_stay_within_todays_reads(backend: &Backend) {
    let batch = 16;
    for (configuration, ceiling) in [
        // Measured: 1 batched read + 9 histogram reads; 1510 values, 1552 at step 1 (Alpha's
        // first end point, and the Cockpit's check of the announced SGD step on the first
        // pair: ‖∇L₀‖², ‖Δθ + lr·∇L₀‖² and, for the rounding allowance, ‖θ₁‖², in the same
        // batched read).
        (
            Configuration::Economy,
            ReadCount {
                reads: 10,
                values: 1552,
                waits: 10,
            },
        ),
        // Plus HessTrace and TICDiag in the same batched read.
        (
            Configuration::Business,
            ReadCount {
                reads: 10,
                values: 1580,
                waits: 10,
            },
        ),
    ] {
        let counts = reads_per_step(
            backend,
            configuration.kinds(),
            HistogramEngine::Host,
            3,
            batch,
        );
        println!("{configuration:?} on {}: {counts:?}", backend.name);
        for (step, count) in counts.iter().enumerate() {
            assert!(count.reads > 0, "the ledger sees the reads");
            assert!(
                count.reads <= ceiling.reads && count.values <= ceiling.values,
                "{configuration:?} step {step} on {}: {count} > {ceiling}",
                backend.name
            );
        }
    }
}

/// Lanczos and power iteration read once per Hessian-vector product (their two numbers, the
/// start's norm with the first), and the finite-difference products themselves read nothing:
/// the reads of a run equal its products, on a model with 6 parameter tensors as on one
/// with 2.
fn eigen_solvers_read_once_per_product(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 8;
    let x: Vec<f32> = (0..batch * 12)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 6.0)
        .collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [batch, 12]), &device);
    let mlp = Mlp::new(&device);
    let single: burn::nn::Linear = LinearConfig::new(12, 4).init(&device);
    let sources: Vec<(Snapshot, Box<dyn CurvatureSource>)> = vec![
        (Snapshot::of_params(&mlp), {
            let x = x.clone();
            Box::new(FiniteDifferenceHvp::new(&mlp, move |m: &Mlp| {
                let loss = m.forward(x.clone()).tanh().square().mean();
                Ok(GradientsParams::from_grads(loss.backward(), m))
            }))
        }),
        (Snapshot::of_params(&single), {
            let x = x.clone();
            Box::new(FiniteDifferenceHvp::new(
                &single,
                move |m: &burn::nn::Linear| {
                    let loss = m.forward(x.clone()).tanh().square().mean();
                    Ok(GradientsParams::from_grads(loss.backward(), m))
                },
            ))
        }),
    ];
    for (params, source) in &sources {
        let start = params.clone();
        let before = reads_on_this_thread();
        let estimate = lanczos(source.as_ref(), params, &start, 1e-6, 30).unwrap();
        let reads = (reads_on_this_thread() - before).reads;
        println!(
            "Lanczos on {} tensors: {estimate:?}, {reads} reads",
            params.len()
        );
        assert!(estimate.products >= 2, "{estimate:?}");
        assert_eq!(reads, estimate.products as u64, "{estimate:?}");

        let before = reads_on_this_thread();
        let power = power_iteration(source.as_ref(), params, &start, 1e-4, 1e-9, 30).unwrap();
        let reads = (reads_on_this_thread() - before).reads;
        assert_eq!(reads, power.products as u64, "{power:?}");
    }
}

/// `economy` (two-step quantities, the update check and device histograms included) tracked on
/// the same model and batches with the step's read at once and deferred to the next call:
/// every value lands under its own step and equals the immediate run's, each step's report
/// comes with the next call, the last step arrives with `flush`, a sink sees every step, and
/// no tracked step waits for its own read (on a CPU backend, none waits at all).
fn a_deferred_read_files_every_value_as_an_immediate_one(backend: &Backend) {
    use burn_cockpit::ReadTiming;
    let device = backend.device.clone().autodiff();
    let start = Mlp::new(&device);
    let steps = 4;
    let batch = 8;
    let run = |timing: ReadTiming, stream: &Path| {
        let mut model = start.clone();
        let mut optim = SgdConfig::new().init();
        let mut cockpit =
            Cockpit::from_kinds(Configuration::Economy.kinds(), &Schedule::every_step())
                .unwrap()
                .with_histogram_engine(HistogramEngine::Device)
                .with_read_timing(timing)
                .with_stream(stream)
                .unwrap();
        let mut reports = Vec::new();
        let mut reads = Vec::new();
        for step in 0..steps {
            let (x, onehot) = batch_at(step, batch, &device);
            let recorder = Recorder::start();
            let losses = (log_softmax(model.forward(x), 1) * onehot)
                .sum_dim(1)
                .neg()
                .reshape([batch]);
            let loss = losses.clone().mean();
            let raw = loss.backward();
            let factors = recorder.finish(&raw).unwrap();
            let grads = GradientsParams::from_grads(raw, &model);
            let info = StepInfo::new(loss.detach())
                .with_individual_losses(losses.detach())
                .with_optimizer(OptimizerInfo::sgd(0.05))
                .with_per_sample(factors);
            reports.push(cockpit.track(step, &model, &grads, info).unwrap());
            reads.push(cockpit.reads());
            model = optim.step(0.05, model, grads);
        }
        let last = cockpit.flush().unwrap();
        (cockpit.take_output(), reports, reads, last)
    };
    let dir = tempfile::tempdir().unwrap();
    let (now, now_reports, now_reads, none) = run(ReadTiming::Now, &dir.path().join("now.jsonl"));
    assert!(none.is_none(), "nothing is pending after an immediate read");
    let stream = dir.path().join("deferred.jsonl");
    let (deferred, reports, reads, last) = run(ReadTiming::Deferred, &stream);

    // Every value under its own step, equal to the immediate run's.
    assert!(now.steps().count() >= steps - 1, "{now:?}");
    assert_eq!(
        now.steps().collect::<Vec<_>>(),
        deferred.steps().collect::<Vec<_>>()
    );
    for step in now.steps() {
        let (a, b) = (now.at(step).unwrap(), deferred.at(step).unwrap());
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>(),
            "step {step}"
        );
        for (key, value) in a {
            // Debug text: equal bits, NaN included.
            let other = b.get(key).map(|v| format!("{v:?}"));
            assert_eq!(Some(format!("{value:?}")), other, "step {step}: {key}");
        }
    }
    // Each step's report comes with the next call; the last with `flush`.
    for (step, report) in reports.iter().enumerate() {
        assert!(report.deferred && !report.is_complete(), "step {step}");
        let earlier = report.earlier.as_ref().map(|e| e.step);
        assert_eq!(earlier, step.checked_sub(1), "step {step}");
    }
    let last = last.expect("the last step's read was pending");
    assert_eq!(last.step, steps - 1);
    for (step, report) in now_reports.iter().enumerate() {
        assert!(report.is_complete() && !report.deferred, "step {step}");
        let earlier = reports.get(step + 1).and_then(|r| r.earlier.as_deref());
        let earlier = earlier.unwrap_or(&last);
        assert_eq!(earlier.failures, report.failures, "step {step}");
    }
    // One read per step either way; the immediate read waits each step.
    for (step, (now, deferred)) in now_reads.iter().zip(&reads).enumerate() {
        assert_eq!((now.reads, now.waits), (1, 1), "step {step}: {now}");
        assert_eq!(deferred.reads, 1, "step {step}: {deferred}");
        assert_eq!(now.values, deferred.values, "step {step}");
        println!(
            "step {step} on {}: now {now}; deferred {deferred}",
            backend.name
        );
        if backend.name == "flex" {
            assert_eq!(deferred.waits, 0, "step {step}: {deferred}");
        }
    }
    // The sink saw every step, the last one at `flush`.
    let streamed = burn_cockpit::log::read_stream(&stream).unwrap();
    assert_eq!(
        streamed.steps().collect::<Vec<_>>(),
        now.steps().collect::<Vec<_>>()
    );

    // Dropping a Cockpit with a read pending files it into its sinks.
    let dropped = dir.path().join("dropped.jsonl");
    {
        let mut cockpit = Cockpit::from_kinds([QuantityKind::GradNorm], &Schedule::every_step())
            .unwrap()
            .with_read_timing(ReadTiming::Deferred)
            .with_stream(&dropped)
            .unwrap();
        let model = start.clone();
        let x = Tensor::<2>::ones([batch, 12], &device);
        let loss = model.forward(x).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let report = cockpit
            .track(0, &model, &grads, StepInfo::new(loss.detach()))
            .unwrap();
        assert!(report.deferred);
        assert!(
            cockpit.output().at(0).is_none(),
            "not filed before the read"
        );
    }
    let streamed = burn_cockpit::log::read_stream(&dropped).unwrap();
    assert!(streamed.get(0, "GradNorm").is_some(), "{streamed:?}");
}

on_every_backend!(
    a_deferred_read_files_every_value_as_an_immediate_one,
    adaptation_joins_the_batched_read,
    one_read_per_step,
    host_histograms_stay_within_todays_reads,
    eigen_solvers_read_once_per_product
);

/// `auto` counts on the host of a software rasterizer: Mesa's lavapipe names itself
/// `llvmpipe (…)`, and it is no card.
#[cfg(feature = "wgpu")]
#[test]
fn auto_counts_on_the_host_of_a_software_rasterizer() {
    let device = common::wgpu().device;
    let name = device
        .as_dispatch()
        .identity()
        .map(|identity| identity.name)
        .unwrap_or_default();
    let software = [
        "llvmpipe",
        "lavapipe",
        "SwiftShader",
        "Microsoft Basic Render",
    ]
    .iter()
    .any(|s| name.contains(s));
    println!("wgpu adapter: {name}");
    if software {
        assert!(!HistogramEngine::Auto.counts_on(&device), "{name}");
    }
    assert!(HistogramEngine::Device.counts_on(&device));
    assert!(!HistogramEngine::Auto.counts_on(&burn::tensor::Device::flex()));
}
