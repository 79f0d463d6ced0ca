//! The burn-train adapter against the hand-written loop: same seed, data and optimizer, the

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! same values step for step — in the Cockpit output and in burn's metric log.

use std::sync::{Arc, Mutex};

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::distributed::ReduceOperation;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn::train::logger::{FileMetricLogger, InMemoryMetricLogger, MetricLogger};
use burn::train::metric::store::{EpochSummary, MetricsUpdate, Split};
use burn::train::metric::{MetricDefinition, NumericEntry};
use burn::train::{
    ClassificationOutput, ExecutionStrategy, InferenceStep, Learner, LearnerModel,
    MultiDeviceOptim, SupervisedTraining, TrainOutput, TrainStep, TrainingStrategy,
};
use cockpit_quantities::curvature::{FiniteDifferenceHvp, Hutchinson, OutputLoss};
use cockpit_quantities::persample::{Linear, Recorder};
use cockpit_quantities::{
    Cockpit, Configuration, OptimizerInfo, Output, QuantityKind, Schedule, StepInfo, Value,
};
use cockpit_train::{CockpitLearner, Instrumented, TrainError, Transport};

const LR: f64 = 0.1;
const BATCH: usize = 8;
const SAMPLES: usize = 40;
const EPOCHS: usize = 2;

#[derive(Module, Debug)]
struct Net {
    hidden: Linear,
    out: Linear,
}

impl Net {
    fn new(device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(3, 6).init(device).into(),
            out: LinearConfig::new(6, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(relu(self.hidden.forward(x)))
    }

    /// Per-sample cross-entropy `[B]` and the logits.
    fn losses(&self, batch: &Batch) -> (Tensor<1>, Tensor<2>) {
        let logits = self.forward(batch.x.clone());
        let [b, _] = logits.dims();
        let losses = log_softmax(logits.clone(), 1)
            .gather(1, batch.y.clone().reshape([b, 1]))
            .reshape([b])
            .neg();
        (losses, logits)
    }
}

#[derive(Debug, Clone)]
struct Batch {
    x: Tensor<2>,
    y: Tensor<1, Int>,
    /// The items' indices in the data set.
    ids: Vec<u64>,
}

impl TrainStep for Net {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        let (losses, logits) = self.losses(&batch);
        let (ids, margins) = (batch.ids.clone(), margins(&logits, &batch));
        let (losses, item) = classification((losses, logits), batch);
        cockpit_train::train_output_with_margins(self, losses, ids, margins, item)
    }
}

impl InferenceStep for Net {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        classification(self.losses(&batch), batch).1
    }
}

/// The step's output from its per-sample losses and logits, with the losses kept.
fn classification(
    (losses, logits): (Tensor<1>, Tensor<2>),
    batch: Batch,
) -> (Tensor<1>, ClassificationOutput) {
    let item = ClassificationOutput {
        loss: losses.clone().mean(),
        output: logits,
        targets: batch.y,
    };
    (losses, item)
}

/// Each example's margin from its `logits` (the labelled entry minus the largest other).
fn margins(logits: &Tensor<2>, batch: &Batch) -> Tensor<1> {
    OutputLoss::classes(batch.y.clone(), 3)
        .margins(logits.clone().detach())
        .unwrap()
}

/// A training step through `train_output_per_sample`, as the README says.
fn train_step<M: Module>(
    model: &M,
    losses_and_logits: (Tensor<1>, Tensor<2>),
    batch: Batch,
) -> TrainOutput<ClassificationOutput> {
    let (losses, item) = classification(losses_and_logits, batch);
    cockpit_train::train_output_per_sample(model, losses, item)
}

#[derive(Debug, Clone)]
struct Item {
    x: [f32; 3],
    y: i64,
    id: u64,
}

#[derive(Clone)]
struct ItemBatcher;

impl Batcher<Item, Batch> for ItemBatcher {
    fn batch(&self, items: Vec<Item>, device: &Device) -> Batch {
        let n = items.len();
        let x: Vec<f32> = items.iter().flat_map(|i| i.x).collect();
        let y: Vec<i64> = items.iter().map(|i| i.y).collect();
        Batch {
            x: Tensor::from_data(TensorData::new(x, [n, 3]), device),
            y: Tensor::from_data(TensorData::new(y, [n]), device),
            ids: items.iter().map(|i| i.id).collect(),
        }
    }
}

/// A deterministic three-class problem.
fn items() -> Vec<Item> {
    (0..SAMPLES)
        .map(|i| {
            let t = i as f32 * 0.37;
            Item {
                x: [t.sin(), (1.3 * t).cos(), ((i % 5) as f32 - 2.0) * 0.4],
                y: (i % 3) as i64,
                id: i as u64,
            }
        })
        .collect()
}

fn loader(device: &Device) -> Arc<dyn DataLoader<Batch>> {
    DataLoaderBuilder::new(ItemBatcher)
        .batch_size(BATCH)
        .set_device(device.clone())
        .build(InMemDataset::new(items()))
}

/// burn's in-memory logger, shared so the test can read it after training.
#[derive(Clone, Default)]
struct SharedLogger(Arc<Mutex<InMemoryMetricLogger>>);

impl MetricLogger for SharedLogger {
    fn log(&mut self, update: MetricsUpdate, epoch: usize, split: &Split) {
        self.0.lock().unwrap().log(update, epoch, split);
    }
    fn read_numeric(
        &mut self,
        name: &str,
        epoch: usize,
        split: &Split,
    ) -> Result<Vec<NumericEntry>, String> {
        self.0.lock().unwrap().read_numeric(name, epoch, split)
    }
    fn log_metric_definition(&mut self, definition: MetricDefinition) {
        self.0.lock().unwrap().log_metric_definition(definition);
    }
    fn log_epoch_summary(&mut self, summary: EpochSummary) {
        self.0.lock().unwrap().log_epoch_summary(summary);
    }
}

/// Trains an instrumented model for `epochs` on the test data (a scratch artifact directory,
/// burn's in-memory logger unless `configure` adds others), returning the trained model.
fn launch<M>(
    model: Instrumented<M>,
    cockpit: &CockpitLearner,
    dir: &std::path::Path,
    epochs: usize,
    configure: impl FnOnce(SupervisedTraining<Instrumented<M>>) -> SupervisedTraining<Instrumented<M>>,
) -> Instrumented<M>
where
    M: Module + 'static,
    Instrumented<M>: LearnerModel + TrainStep<Input = Batch> + InferenceStep<Input = Batch>,
{
    launch_on(
        &Device::flex().autodiff(),
        model,
        cockpit,
        dir,
        epochs,
        configure,
    )
}

/// [`launch`] with the data on `device`.
fn launch_on<M>(
    device: &Device,
    model: Instrumented<M>,
    cockpit: &CockpitLearner,
    dir: &std::path::Path,
    epochs: usize,
    configure: impl FnOnce(SupervisedTraining<Instrumented<M>>) -> SupervisedTraining<Instrumented<M>>,
) -> Instrumented<M>
where
    M: Module + 'static,
    Instrumented<M>: LearnerModel + TrainStep<Input = Batch> + InferenceStep<Input = Batch>,
{
    let learner = Learner::new(model, SgdConfig::new().init(), LR);
    let training = cockpit
        .register(SupervisedTraining::new(dir, loader(device), loader(device)))
        .with_application_logger(None)
        .num_epochs(epochs);
    configure(training).launch(learner).model
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("cockpit-train-{name}-{}", std::process::id()))
}

/// The hand-written loop: the Cockpit's output and, per step, what that step's `track`
/// computed.
fn custom_loop(model: Net, kinds: &[QuantityKind], device: &Device) -> (Output, Vec<Output>) {
    custom_loop_with(model, kinds, device, None)
}

/// The hand-written loop, with the curvature source `instrument_with_curvature(_, probes)`
/// documents when `probes` is given.
fn custom_loop_with(
    model: Net,
    kinds: &[QuantityKind],
    device: &Device,
    probes: Option<usize>,
) -> (Output, Vec<Output>) {
    let mut cockpit = Cockpit::from_kinds(kinds.iter().copied(), &Schedule::every_step()).unwrap();
    let mut optimizer = SgdConfig::new().init();
    let mut model = model;
    let mut latest = Vec::new();
    let mut step = 0;
    for _ in 0..EPOCHS {
        for batch in loader(device).iter() {
            let batch = batch.unwrap();
            let recorder = cockpit.needs_per_sample(step).then(Recorder::start);
            let (losses, _) = model.losses(&batch);
            let loss = losses.clone().mean();
            let grads = loss.backward();
            let factors = recorder.map(|r| r.finish(&grads)).transpose().unwrap();
            let grads = GradientsParams::from_grads(grads, &model);
            let mut info = StepInfo::new(loss.detach())
                .with_individual_losses(losses.detach())
                .with_optimizer(OptimizerInfo::sgd(LR));
            if let Some(factors) = factors {
                info = info
                    .with_batch_size(batch.x.dims()[0])
                    .with_per_sample(factors);
            }
            if let Some(probes) = probes {
                let replay = batch.clone();
                let hvp = FiniteDifferenceHvp::new(&model, move |m: &Net| {
                    let (l, _) = m.losses(&replay);
                    Ok(GradientsParams::from_grads(l.mean().backward(), m))
                });
                info = info.with_curvature(Hutchinson::new(hvp, probes, 0x5eed));
            }
            cockpit.track(step, &model, &grads, info).unwrap();
            latest.push(cockpit.latest().clone());
            model = optimizer.step(LR, model, grads);
            step += 1;
        }
    }
    (cockpit.output().clone(), latest)
}

fn assert_close(a: &Value, b: &Value, what: &str) {
    let (x, y) = (numbers(a), numbers(b));
    assert_eq!(x.len(), y.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in x.iter().zip(&y) {
        let tol = 1e-12 * x.abs().max(y.abs()).max(1.0);
        assert!(
            (x - y).abs() <= tol || (x.is_nan() && y.is_nan()),
            "{what}: {x} vs {y}"
        );
    }
}

fn numbers(v: &Value) -> Vec<f64> {
    match v {
        Value::Int(i) => vec![*i as f64],
        Value::Float(f) => vec![*f],
        Value::List(l) => l.clone(),
        Value::Estimate(e) => e.values.iter().chain(&e.stderr).copied().collect(),
        Value::Hist1d(h) => h.hist.iter().chain(&h.edges).copied().collect(),
        // The shares in order; which id holds each is checked through the per-example record
        // (two near-equal shares may trade places between float32 computations).
        Value::Examples(e) => [
            e.batch as f64,
            e.half as f64,
            f64::from(u8::from(e.ids_known)),
        ]
        .into_iter()
        .chain(e.top.iter().map(|t| t.share))
        .collect(),
        other => panic!("unexpected value {other:?}"),
    }
}

#[test]
fn learner_matches_the_custom_loop_step_for_step() {
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    let mut kinds = Configuration::Economy.kinds();
    kinds.extend([
        QuantityKind::MeanGSNR,
        QuantityKind::CABS,
        QuantityKind::EarlyStopping,
    ]);

    let (expected, latest) = custom_loop(model.clone(), &kinds, &device);

    let dir = scratch("equality");
    let cockpit = CockpitLearner::from_kinds(
        kinds.clone(),
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap()
    .with_artifact_dir(&dir)
    .unwrap();
    let logger = SharedLogger::default();
    launch(
        cockpit.instrument(model).unwrap(),
        &cockpit,
        &dir,
        EPOCHS,
        |t| {
            t.with_metric_logger(logger.clone())
                .with_metric_logger(FileMetricLogger::new(&dir))
        },
    );
    assert!(cockpit.warnings().is_empty(), "{:?}", cockpit.warnings());

    // The Cockpit output: every step, every quantity, the same values.
    let steps_per_epoch = SAMPLES / BATCH;
    assert_eq!(cockpit.steps(), EPOCHS * steps_per_epoch);
    let got = cockpit.output();
    let mut compared = 0;
    for (step, name, value) in expected.iter() {
        let other = got
            .get(step, name)
            .unwrap_or_else(|| panic!("Learner run lacks {name} at step {step}"));
        assert_close(value, other, &format!("{name} at step {step}"));
        compared += 1;
    }
    let tracked: usize = got
        .iter()
        .filter(|(_, n, _)| !n.contains("epoch") && *n != "train_loss" && *n != "learning_rate")
        .count();
    assert_eq!(
        compared, tracked,
        "the Learner run has values the custom loop has not"
    );
    assert!(compared > 10 * EPOCHS * steps_per_epoch, "{compared}");

    // burn's metric log: per epoch, one entry per iteration that computed a value, equal to
    // the custom loop's value of that iteration (lists by their norm over layers).
    let mut logger = logger;
    for kind in &kinds {
        if cockpit_train::metric::MetricForm::of(*kind)
            != cockpit_train::metric::MetricForm::Numeric
        {
            continue;
        }
        for epoch in 1..=EPOCHS {
            let logged: Vec<f64> = logger
                .read_numeric(&format!("Cockpit {}", kind.name()), epoch, &Split::Train)
                .unwrap()
                .into_iter()
                .filter_map(|e| match e {
                    NumericEntry::Value(v) => Some(v),
                    NumericEntry::Aggregated {
                        aggregated_value, ..
                    } => Some(aggregated_value),
                    NumericEntry::Final(_) => None,
                })
                .collect();
            let wanted: Vec<f64> = latest[(epoch - 1) * steps_per_epoch..epoch * steps_per_epoch]
                .iter()
                .filter_map(|out| {
                    out.iter()
                        .find(|(_, n, _)| *n == kind.name())
                        .and_then(|(_, _, v)| kind.network_value(v))
                })
                .collect();
            assert!(!wanted.is_empty(), "{} epoch {epoch}", kind.name());
            assert_eq!(logged.len(), wanted.len(), "{} epoch {epoch}", kind.name());
            // burn's own metric file: one line per logged value.
            let file = dir
                .join("train")
                .join(format!("epoch-{epoch}"))
                .join(format!("Cockpit_{}.log", kind.name()));
            let lines = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let per_step: Vec<f64> = lines
                .lines()
                .filter(|l| !l.ends_with(",final")) // the epoch value
                .map(|l| l.split(',').next().unwrap().parse().unwrap())
                .collect();
            assert_eq!(per_step, logged, "{}", file.display());
            for (a, b) in logged.iter().zip(&wanted) {
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                    "{}: {a} vs {b}",
                    kind.name()
                );
            }
        }
    }

    // Cockpit's log and stream in the artifact directory.
    let path = cockpit.write().unwrap();
    let read = cockpit_quantities::log::read_log(&path).unwrap();
    assert_eq!(read.get(3, "Loss"), got.get(3, "Loss"));
    assert!(
        read.get(steps_per_epoch - 1, "epoch_count").is_some(),
        "epoch entry"
    );
    assert!(dir.join(cockpit_train::STREAM_FILE).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_configurations_fail_before_training() {
    let err = CockpitLearner::from_kinds(
        [QuantityKind::GradNorm, QuantityKind::CABS],
        Schedule::every_step(),
        OptimizerInfo::sgd_momentum(0.1, 0.9),
    )
    .unwrap_err();
    assert!(
        matches!(&err, TrainError::UnsupportedForOptimizer { quantity, .. } if quantity == "CABS"),
        "{err}"
    );
    assert!(err.to_string().contains("plain SGD"), "{err}");

    let cockpit = CockpitLearner::from_kinds(
        [QuantityKind::HessMaxEV],
        Schedule::every_step(),
        OptimizerInfo::sgd(0.1),
    )
    .unwrap();
    let err = cockpit
        .instrument(Net::new(&Device::flex().autodiff()))
        .unwrap_err();
    assert!(
        matches!(err, TrainError::CurvatureNeedsReplay { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("instrument_with_curvature"),
        "{err}"
    );

    let err = CockpitLearner::from_kinds([], Schedule::every_step(), OptimizerInfo::sgd(0.1))
        .unwrap_err();
    assert!(matches!(err, TrainError::NoQuantities));

    let cockpit = CockpitLearner::from_kinds(
        [QuantityKind::GradNorm],
        Schedule::every_step(),
        OptimizerInfo::sgd(0.1),
    )
    .unwrap();
    assert!(matches!(cockpit.write(), Err(TrainError::NoArtifactDir)));
}

/// With gradient accumulation burn applies `LR·Σ_j ḡ_j`, the sum of the micro-batches' mean
/// gradients: one plain SGD step on their union with learning rate `k·LR`. The Cockpit tracks
/// exactly that step: every quantity of `economy` plus MeanGSNR, CABS, EarlyStopping and
/// HessMaxEV equals a hand-written loop that takes one step on the concatenated batch (steps
/// after 2, 4 and 5 batches per epoch; the last one is a single batch).
#[test]
fn gradient_accumulation_tracks_the_accumulated_batch() {
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    const ACCUMULATE: usize = 2;
    let kinds = union_kinds();
    let mut reference =
        Cockpit::from_kinds(kinds.iter().copied(), &Schedule::every_step()).unwrap();
    let mut net = model.clone();
    let mut step = 0;
    for _ in 0..EPOCHS {
        let batches: Vec<Batch> = loader(&device).iter().map(|b| b.unwrap()).collect();
        for group in batches.chunks(ACCUMULATE) {
            let group: Vec<&Batch> = group.iter().collect();
            let lr = LR * group.len() as f64;
            net = union_step(&mut reference, step, net, &union(&group), lr);
            step += 1;
        }
    }

    let cockpit = CockpitLearner::from_kinds(
        kinds.clone(),
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap();
    let dir = scratch("accumulate");
    launch(
        cockpit.instrument_with_curvature(model, 1),
        &cockpit,
        &dir,
        EPOCHS,
        |t| {
            t.with_metric_logger(SharedLogger::default())
                .grads_accumulation(ACCUMULATE)
        },
    );
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(cockpit.steps(), step);
    assert_tracks_the_union(&reference, &cockpit);
}

/// The quantities tracked on a group of batches (accumulated, or one per device) equal those
/// of one step on their union: floats to 1e-4 (HessMaxEV, by finite differences, 1e-2),
/// histogram counts with at most two elements moved (float32 rounding), ≥ 70 values.
fn assert_tracks_the_union(reference: &Cockpit, cockpit: &CockpitLearner) {
    let (expected, got) = (reference.output(), cockpit.output());
    let mut compared = 0;
    for (at, name, value) in expected.iter() {
        let other = got
            .get(at, name)
            .unwrap_or_else(|| panic!("{name} at {at} missing: {:?}", cockpit.warnings()));
        let (x, y) = (numbers(value), numbers(other));
        assert_eq!(x.len(), y.len(), "{name} at {at}");
        if name == "GradHist1d" {
            let moved: f64 = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).sum::<f64>() / 2.0;
            assert!(moved <= 2.0, "{name} at {at}: {moved} counts moved");
            continue;
        }
        let tol = if name == "HessMaxEV" { 1e-2 } else { 1e-4 };
        for (a, b) in x.iter().zip(&y) {
            assert!(
                (a - b).abs() <= tol * a.abs().max(1e-2) || (a.is_nan() && b.is_nan()),
                "{name} at {at}: tracked {b}, one step on the union {a}: {other:?} vs {value:?}"
            );
        }
        compared += 1;
    }
    // 6 steps × 14 quantities, less what a step does not store (Alpha, UpdateSize at the last).
    assert!(compared >= 76, "{compared} values compared");
    // The per-example record: the union's ids joined in the same order, every example seen
    // as often with the same numbers.
    let (want, have) = (reference.examples().unwrap(), cockpit.examples().unwrap());
    assert_eq!(want.len(), SAMPLES, "every example recorded");
    assert_eq!(have.len(), want.len());
    for (a, b) in want.rows().into_iter().zip(have.rows()) {
        assert_eq!((a.id, a.seen, a.forgetting), (b.id, b.seen, b.forgetting));
        assert_eq!(
            (a.learned_visit, a.learned_now),
            (b.learned_visit, b.learned_now)
        );
        for (x, y) in [
            (a.loss_mean, b.loss_mean),
            (a.grad_norm_mean, b.grad_norm_mean),
            (a.margin_mean, b.margin_mean),
            (a.share_mean, b.share_mean),
        ] {
            assert!(
                (x - y).abs() <= 1e-4 * x.abs().max(1e-2),
                "example {}: {x} vs {y}",
                a.id
            );
        }
    }
    let warnings = cockpit.warnings();
    assert!(
        !warnings.iter().any(|w| w.contains("refused")),
        "{warnings:?}"
    );
}

/// One step of the hand-written loop on `batch` with plain SGD at `lr`, tracking everything
/// `cockpit` asks for (per-sample factors, finite-difference curvature).
fn union_step(cockpit: &mut Cockpit, step: usize, net: Net, batch: &Batch, lr: f64) -> Net {
    let recorder = Recorder::start();
    let (losses, logits) = net.losses(batch);
    let loss = losses.clone().mean();
    let grads = loss.backward();
    let factors = recorder.finish(&grads).unwrap();
    let grads = GradientsParams::from_grads(grads, &net);
    let replay = batch.clone();
    let hvp = FiniteDifferenceHvp::new(&net, move |m: &Net| {
        let (l, _) = m.losses(&replay);
        Ok(GradientsParams::from_grads(l.mean().backward(), m))
    });
    let info = StepInfo::new(loss.detach())
        .with_individual_losses(losses.detach())
        .with_optimizer(OptimizerInfo::sgd(lr))
        .with_batch_size(batch.x.dims()[0])
        .with_per_sample(factors)
        .with_curvature(hvp)
        .with_sample_ids(batch.ids.clone())
        .with_margins(margins(&logits, batch));
    cockpit.track(step, &net, &grads, info).unwrap();
    SgdConfig::new().init().step(lr, net, grads)
}

fn union(batches: &[&Batch]) -> Batch {
    Batch {
        x: Tensor::cat(batches.iter().map(|b| b.x.clone()).collect(), 0),
        y: Tensor::cat(batches.iter().map(|b| b.y.clone()).collect(), 0),
        ids: batches.iter().flat_map(|b| b.ids.iter().copied()).collect(),
    }
}

/// The kinds the accumulation and multi-device tests track.
fn union_kinds() -> Vec<QuantityKind> {
    let mut kinds = Configuration::Economy.kinds();
    kinds.extend([
        QuantityKind::MeanGSNR,
        QuantityKind::CABS,
        QuantityKind::EarlyStopping,
        QuantityKind::HessMaxEV,
        QuantityKind::Examples,
    ]);
    kinds
}

/// burn's `MultiDevice` strategy (main-device and sharded optimizer) on two CPU devices (flex twice: burn
/// runs one worker per device) splits the data in halves, steps each device on its half's next
/// batch and sums their gradients: one SGD step on the union of the two batches with learning
/// rate `2·LR`. The Cockpit tracks exactly that step.
#[test]
fn multi_device_tracks_the_union_of_the_devices_batches() {
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    let kinds = union_kinds();
    let halves = shards(&device, 2);
    let step = EPOCHS * halves[0].len();
    let reference = union_reference(&model, &halves, 2.0 * LR);

    for optim in [
        MultiDeviceOptim::OptimMainDevice,
        MultiDeviceOptim::OptimSharded,
    ] {
        let cockpit = CockpitLearner::from_kinds(
            kinds.clone(),
            Schedule::every_step(),
            OptimizerInfo::sgd(LR),
        )
        .unwrap();
        let dir = scratch(&format!("multi-device-{optim:?}"));
        launch(
            cockpit.instrument_with_curvature(model.clone(), 1),
            &cockpit,
            &dir,
            EPOCHS,
            |t| {
                t.with_metric_logger(SharedLogger::default())
                    .with_training_strategy(TrainingStrategy::Default(ExecutionStrategy::multi(
                        vec![device.clone(), device.clone()],
                        optim,
                    )))
            },
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(cockpit.steps(), step, "{optim:?}");
        assert_tracks_the_union(&reference, &cockpit);
    }
}

/// burn's split over `n` devices: contiguous ranges of the items (for two, [0, 20) and
/// [20, 40)), each batched alike.
fn shards(device: &Device, n: usize) -> Vec<Vec<Batch>> {
    let batches: Vec<Batch> = loader(device).iter().map(|b| b.unwrap()).collect();
    let all = union(&batches.iter().collect::<Vec<_>>());
    let size = SAMPLES / n;
    let part = |from: usize, to: usize| Batch {
        x: all.x.clone().slice(from..to),
        y: all.y.clone().slice(from..to),
        ids: all.ids[from..to].to_vec(),
    };
    (0..n)
        .map(|r| {
            (0..size)
                .step_by(BATCH)
                .map(|start| part(r * size + start, r * size + (start + BATCH).min(size)))
                .collect()
        })
        .collect()
}

/// The hand-written loop's run of one SGD step with learning rate `lr` on the union of the
/// shards' `i`-th batches, for every `i`, `EPOCHS` times.
fn union_reference(model: &Net, shards: &[Vec<Batch>], lr: f64) -> Cockpit {
    let mut reference = Cockpit::from_kinds(union_kinds(), &Schedule::every_step()).unwrap();
    let mut net = model.clone();
    let mut step = 0;
    for _ in 0..EPOCHS {
        for i in 0..shards[0].len() {
            let group: Vec<&Batch> = shards.iter().map(|shard| &shard[i]).collect();
            net = union_step(&mut reference, step, net, &union(&group), lr);
            step += 1;
        }
    }
    reference
}

/// burn's DDP strategy as its workers run it — one thread per device, each stepping its own
/// copy of the model on its own half of the data, the gradients all-reduced (mean or sum)
/// before each optimizer step — with the Cockpit told of the group
/// ([`CockpitLearner::data_parallel`], in-process all-reduce: burn's own collectives need
/// CUDA). The Cockpit tracks one SGD step on the union of the two batches, with learning rate
/// `LR` (mean) or `2·LR` (sum), exactly as the hand-written loop on the union does.
#[test]
fn ddp_workers_track_the_union_of_their_batches() {
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    let kinds = union_kinds();
    let shards = shards(&device, 2);
    let steps_per_epoch = shards[0].len();
    for op in [ReduceOperation::Mean, ReduceOperation::Sum] {
        let lr = if op == ReduceOperation::Sum {
            2.0 * LR
        } else {
            LR
        };
        let reference = union_reference(&model, &shards, lr);
        let cockpit = CockpitLearner::from_kinds(
            kinds.clone(),
            Schedule::every_step(),
            OptimizerInfo::sgd(LR),
        )
        .unwrap();
        cockpit
            .data_parallel(&[device.clone(), device.clone()], op, Transport::InProcess)
            .unwrap();
        let instrumented = cockpit.instrument_with_curvature(model.clone(), 1);
        let exchange = GradientExchange::new(2, op);
        std::thread::scope(|s| {
            for (rank, shard) in shards.iter().enumerate() {
                let (mut model, exchange) = (instrumented.clone(), &exchange);
                s.spawn(move || {
                    let mut optim = SgdConfig::new().init();
                    for _ in 0..EPOCHS {
                        for batch in shard {
                            let out = TrainStep::step(&model, batch.clone());
                            let grads = exchange.all_reduce(rank, &model, out.grads);
                            model = model.optimize(&mut optim, LR.into(), grads);
                        }
                    }
                });
            }
        });
        assert_eq!(cockpit.steps(), EPOCHS * steps_per_epoch, "{op:?}");
        assert_tracks_the_union(&reference, &cockpit);
    }
}

/// burn's own DDP strategy, on every CUDA device present (up to two): burn 0.22's collective
/// operations exist only on CUDA. Built with `--features cuda`; without a CUDA device it
/// prints that it is skipped and passes.
#[cfg(feature = "cuda")]
#[test]
fn burn_ddp_tracks_the_union_on_cuda() {
    use burn::tensor::distributed::DistributedConfig;
    let devices: Vec<Device> = (0..2)
        .map_while(|index| {
            std::panic::catch_unwind(|| {
                let device = Device::cuda(index);
                Tensor::<1>::from_data(TensorData::new(vec![1.0_f32], [1]), &device).into_data();
                device.autodiff()
            })
            .ok()
        })
        .collect();
    let Some(main) = devices.first().cloned() else {
        eprintln!("SKIPPED burn_ddp_tracks_the_union_on_cuda: no CUDA device");
        return;
    };
    let model = Net::new(&main);
    let shards = shards(&main, devices.len());
    let reference = union_reference(&model, &shards, LR);
    let cockpit = CockpitLearner::from_kinds(
        union_kinds(),
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap();
    let strategy = cockpit
        .ddp(
            devices.clone(),
            DistributedConfig {
                all_reduce_op: ReduceOperation::Mean,
            },
        )
        .unwrap();
    let dir = scratch("ddp-cuda");
    launch_on(
        &main,
        cockpit.instrument_with_curvature(model, 1),
        &cockpit,
        &dir,
        EPOCHS,
        |t| {
            t.with_metric_logger(SharedLogger::default())
                .with_training_strategy(TrainingStrategy::Default(strategy))
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cockpit.steps(), EPOCHS * shards[0].len());
    assert_tracks_the_union(&reference, &cockpit);
}

/// The gradient all-reduce of burn's DDP backward pass, between test threads.
struct GradientExchange {
    slots: Mutex<Vec<Option<GradientsParams>>>,
    barrier: std::sync::Barrier,
    op: ReduceOperation,
}

impl GradientExchange {
    fn new(workers: usize, op: ReduceOperation) -> Self {
        Self {
            slots: Mutex::new((0..workers).map(|_| None).collect()),
            barrier: std::sync::Barrier::new(workers),
            op,
        }
    }

    /// Every worker's gradients combined by the operation (each worker gets the same).
    fn all_reduce<M: Module>(
        &self,
        rank: usize,
        model: &M,
        grads: GradientsParams,
    ) -> GradientsParams {
        self.slots.lock().unwrap()[rank] = Some(grads);
        self.barrier.wait();
        struct Combine<'a> {
            parts: &'a [Option<GradientsParams>],
            scale: f64,
            out: GradientsParams,
        }
        impl burn::module::ModuleVisitor for Combine<'_> {
            fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
                let sum = self
                    .parts
                    .iter()
                    .flatten()
                    .filter_map(|g| g.get::<D>(param.id))
                    .reduce(|a, b| a + b);
                if let Some(sum) = sum {
                    self.out.register(param.id, sum.mul_scalar(self.scale));
                }
            }
        }
        let combined = {
            let slots = self.slots.lock().unwrap();
            let scale = match self.op {
                ReduceOperation::Mean => 1.0 / slots.len() as f64,
                ReduceOperation::Sum => 1.0,
            };
            let mut combine = Combine {
                parts: &slots,
                scale,
                out: GradientsParams::new(),
            };
            model.visit(&mut combine);
            combine.out
        };
        // Nobody overwrites a slot before everyone has read them all.
        self.barrier.wait();
        combined
    }
}

#[test]
fn curvature_quantities_replay_the_batch() {
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    let kinds = [QuantityKind::HessMaxEV, QuantityKind::HessTrace];
    let (expected, _) = custom_loop_with(model.clone(), &kinds, &device, Some(3));

    let cockpit =
        CockpitLearner::from_kinds(kinds, Schedule::every_step(), OptimizerInfo::sgd(LR)).unwrap();
    let dir = scratch("curvature");
    let model = cockpit.instrument_with_curvature(model, 3);
    launch(model, &cockpit, &dir, EPOCHS, |t| {
        t.with_metric_logger(SharedLogger::default())
    });
    let _ = std::fs::remove_dir_all(&dir);
    let got = cockpit.output();
    let mut compared = 0;
    for (step, name, value) in expected.iter() {
        assert_close(
            value,
            got.get(step, name).unwrap(),
            &format!("{name} at {step}"),
        );
        compared += 1;
    }
    assert_eq!(compared, 2 * EPOCHS * SAMPLES / BATCH);
}

/// A model whose step still uses `TrainOutput::new`.
#[derive(Module, Debug)]
struct Plain {
    net: Net,
}

impl TrainStep for Plain {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        let (losses, logits) = self.net.losses(&batch);
        let loss = losses.mean();
        let item = ClassificationOutput {
            loss: loss.clone(),
            output: logits,
            targets: batch.y,
        };
        TrainOutput::new(self, loss.backward(), item)
    }
}

impl InferenceStep for Plain {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        InferenceStep::step(&self.net, batch)
    }
}

#[test]
fn a_step_without_train_output_is_reported_and_training_goes_on() {
    let device = Device::flex().autodiff();
    let cockpit = CockpitLearner::from_kinds(
        [QuantityKind::GradNorm],
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap();
    let model = Plain {
        net: Net::new(&device),
    };
    let dir = scratch("plain");
    let trained = launch(cockpit.instrument(model).unwrap(), &cockpit, &dir, 1, |t| {
        t.with_metric_logger(SharedLogger::default())
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cockpit.steps(), SAMPLES / BATCH, "training ran every step");
    assert!(
        cockpit.output().series("GradNorm").is_empty(),
        "nothing tracked"
    );
    let warnings = cockpit.warnings();
    assert_eq!(warnings.len(), 1, "reported once: {warnings:?}");
    assert!(
        warnings[0].contains("cockpit_train::train_output"),
        "{warnings:?}"
    );
    let _: Plain = trained.into_inner();
}

#[test]
fn epoch_end_diagnosis_names_dead_layers() {
    let device = Device::flex().autodiff();
    // Every hidden unit dead from the start: a bias far below any pre-activation.
    let mut model = Net::new(&device);
    model.hidden.bias = Some(burn::module::Param::from_tensor(
        Tensor::<1>::zeros([6], &device).add_scalar(-100.0),
    ));
    let cockpit = CockpitLearner::new(
        Configuration::Economy,
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap()
    .with_diagnosis();
    let dir = scratch("diagnosis");
    launch(
        cockpit.instrument(model).unwrap(),
        &cockpit,
        &dir,
        EPOCHS,
        |t| t,
    );
    let _ = std::fs::remove_dir_all(&dir);
    let diagnosis = cockpit.diagnosis().expect("a diagnosis at the epoch end");
    let frozen = diagnosis
        .all()
        .find(|f| f.code == cockpit_diagnose::Code::FrozenLayer)
        .expect("the dead layer is flagged");
    // Dead ReLUs pass no gradient: the hidden layer and the output weight stop; only the
    // output bias learns.
    let mut names = frozen.parameters.clone();
    names.sort();
    assert_eq!(names, ["hidden.bias", "hidden.weight", "out.weight"]);
    let warnings = cockpit.warnings();
    assert_eq!(
        warnings
            .iter()
            .filter(|w| w.contains("diagnose [frozen-layer]"))
            .count(),
        1,
        "warned once: {warnings:?}"
    );
}

/// A Learner Cockpit from a config file's contents: settings and keys reach the log, the
/// metrics are registered under the configured keys, bad settings fail before training.
#[test]
fn learner_from_a_config() {
    let config = cockpit_quantities::CockpitConfig::from_toml(
        r#"
[[quantity]]
class = "GradNorm"

[[quantity]]
class = "GradNorm"
key = "GradNorm[keyed]"

[[quantity]]
class = "GradHist1d"
key = "GradHist1d[bins=10]"
kwargs = { bins = 10, range = [-0.5, 0.5], engine = "device" }
"#,
    )
    .unwrap();
    let cockpit = CockpitLearner::from_config(&config, OptimizerInfo::sgd(LR)).unwrap();
    let device = Device::flex().autodiff();
    let dir = scratch("config");
    launch(
        cockpit.instrument(Net::new(&device)).unwrap(),
        &cockpit,
        &dir,
        1,
        |t| t,
    );
    // A list-valued quantity under its own key: burn's metric shows its network-wide value
    // (the norm over layers) at every tracked step, as under its class name.
    let output = cockpit.output();
    let epoch_dir = dir.join("train").join("epoch-1");
    let metric_file = std::fs::read_dir(&epoch_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("keyed"))
        .unwrap_or_else(|| {
            panic!(
                "no metric file for the keyed GradNorm in {}",
                epoch_dir.display()
            )
        });
    let logged: Vec<f64> = std::fs::read_to_string(&metric_file)
        .unwrap()
        .lines()
        .filter(|l| !l.ends_with(",final"))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let wanted: Vec<f64> = output
        .series("GradNorm[keyed]")
        .into_iter()
        .map(|(_, v)| {
            v.as_list()
                .unwrap()
                .iter()
                .map(|x| x * x)
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    assert_eq!(logged.len(), SAMPLES / BATCH, "{}", metric_file.display());
    for (a, b) in logged.iter().zip(&wanted) {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} vs {b}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(cockpit.warnings().is_empty(), "{:?}", cockpit.warnings());
    let hists = output.series("GradHist1d[bins=10]");
    assert_eq!(hists.len(), SAMPLES / BATCH, "one histogram per step");
    for (_, value) in hists {
        let Value::Hist1d(h) = value else {
            panic!("not a histogram: {value:?}")
        };
        assert_eq!(h.hist.len(), 10);
        assert_eq!((h.edges[0], h.edges[10]), (-0.5, 0.5));
    }
    assert_eq!(output.series("GradNorm").len(), SAMPLES / BATCH);

    let momentum = cockpit_quantities::CockpitConfig::from_toml(
        "[[quantity]]\nclass = \"CABS\"\nkey = \"my CABS\"",
    )
    .unwrap();
    let err =
        CockpitLearner::from_config(&momentum, OptimizerInfo::sgd_momentum(LR, 0.9)).unwrap_err();
    assert!(
        matches!(&err, TrainError::UnsupportedForOptimizer { quantity, .. } if quantity == "my CABS"),
        "{err}"
    );
    let zero_bins = cockpit_quantities::CockpitConfig::from_toml(
        "[[quantity]]\nclass = \"GradHist1d\"\nkwargs = { bins = 0 }",
    )
    .unwrap();
    assert!(matches!(
        CockpitLearner::from_config(&zero_bins, OptimizerInfo::sgd(LR)),
        Err(TrainError::Cockpit(
            cockpit_quantities::CockpitError::InvalidSettings { .. }
        ))
    ));
}

/// `instrument_with_recorded_curvature` on the drop-in ReLU net, declared piecewise linear:
/// HessTrace and TICTrace at every step equal those of the hand-written loop with
/// `MlpCurvature`, whose exact diagonals come from propagating per-sample Hessian blocks
/// through the chain (an independent computation), to 1e-4 (float32); no warning calls them
/// estimates.
#[test]
fn recorded_curvature_in_the_learner_equals_the_exact_mlp_diagonal() {
    use cockpit_quantities::curvature::{
        Activation, HessianDiagonal, MlpCurvature, MlpLayer, OutputLoss,
    };
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    let kinds = [QuantityKind::HessTrace, QuantityKind::TICTrace];
    let onehot = |y: &Tensor<1, Int>| y.clone().one_hot::<2>(3).float();

    let mut reference =
        Cockpit::from_kinds(kinds.iter().copied(), &Schedule::every_step()).unwrap();
    let mut net = model.clone();
    let mut optimizer = SgdConfig::new().init();
    let mut step = 0;
    for _ in 0..EPOCHS {
        for batch in loader(&device).iter() {
            let batch = batch.unwrap();
            let recorder = Recorder::start();
            let (losses, _) = net.losses(&batch);
            let loss = losses.clone().mean();
            let grads = loss.backward();
            let factors = recorder.finish(&grads).unwrap();
            let grads = GradientsParams::from_grads(grads, &net);
            let layer = |l: &Linear, input: Tensor<2>, activation| {
                let z = burn::tensor::module::linear(
                    input.clone(),
                    l.weight.val().detach(),
                    l.bias.as_ref().map(|b| b.val().detach()),
                );
                MlpLayer {
                    weight_id: l.weight.id,
                    bias_id: l.bias.as_ref().map(|b| b.id),
                    weight: l.weight.val().detach(),
                    input,
                    pre_activation: z,
                    activation,
                }
            };
            let hidden = layer(&net.hidden, batch.x.clone().detach(), Activation::Relu);
            let out = layer(
                &net.out,
                relu(hidden.pre_activation.clone()),
                Activation::Identity,
            );
            let exact = MlpCurvature::new(
                vec![hidden, out],
                OutputLoss::CrossEntropy(onehot(&batch.y)),
                1,
            );
            let info = StepInfo::new(loss.detach())
                .with_individual_losses(losses.detach())
                .with_optimizer(OptimizerInfo::sgd(LR))
                .with_per_sample(factors)
                .with_curvature(exact);
            reference.track(step, &net, &grads, info).unwrap();
            net = optimizer.step(LR, net, grads);
            step += 1;
        }
    }

    let cockpit = CockpitLearner::from_kinds(
        kinds.to_vec(),
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap();
    let dir = scratch("recorded-curvature");
    launch(
        cockpit.instrument_with_recorded_curvature(
            model,
            |m: &Net, batch: &Batch| m.forward(batch.x.clone()),
            move |batch: &Batch| OutputLoss::CrossEntropy(onehot(&batch.y)),
            HessianDiagonal::PiecewiseLinear,
        ),
        &cockpit,
        &dir,
        EPOCHS,
        |t| t.with_metric_logger(SharedLogger::default()),
    );
    let _ = std::fs::remove_dir_all(&dir);

    let (expected, got) = (reference.output(), cockpit.output());
    let mut compared = 0;
    for (at, name, value) in expected.iter() {
        let other = got
            .get(at, name)
            .unwrap_or_else(|| panic!("{name} at {at} missing: {:?}", cockpit.warnings()));
        for (a, b) in numbers(value).iter().zip(&numbers(other)) {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(1e-3),
                "{name} at {at}: learner {b}, MlpCurvature {a}"
            );
        }
        compared += 1;
    }
    assert_eq!(compared, 2 * step, "every step, both quantities");
    let warnings = cockpit.warnings();
    assert!(
        !warnings.iter().any(|w| w.contains("estimate")),
        "{warnings:?}"
    );
}

/// `Net` from burn-nn's own `Linear`: the per-sample fast path cannot see it.
#[derive(Module, Debug)]
struct BurnNet {
    hidden: burn::nn::Linear,
    out: burn::nn::Linear,
}

impl BurnNet {
    fn of(net: &Net) -> Self {
        Self {
            hidden: net.hidden.as_burn(),
            out: net.out.as_burn(),
        }
    }

    fn losses(&self, batch: &Batch) -> (Tensor<1>, Tensor<2>) {
        let logits = self.out.forward(relu(self.hidden.forward(batch.x.clone())));
        let losses =
            cockpit_quantities::persample::loss::cross_entropy(logits.clone(), batch.y.clone());
        (losses, logits)
    }
}

impl TrainStep for BurnNet {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        train_step(self, self.losses(&batch), batch)
    }
}

impl InferenceStep for BurnNet {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        classification(self.losses(&batch), batch).1
    }
}

/// Plain burn-nn layers in a `Learner`: without the fallback the per-sample quantities fail,
/// said once (not silently); with `with_exact_fallback` they are computed by single-sample
/// passes and equal the drop-in model's values, step for step.
#[test]
fn plain_layers_fall_back_to_single_sample_passes_when_allowed() {
    let device = Device::flex().autodiff();
    let kinds = [
        QuantityKind::GradNorm,
        QuantityKind::NormTest,
        QuantityKind::InnerTest,
        QuantityKind::OrthoTest,
        QuantityKind::MeanGSNR,
        QuantityKind::Alpha,
    ];
    let net = Net::new(&device);
    let new = || {
        CockpitLearner::from_kinds(
            kinds.to_vec(),
            Schedule::every_step(),
            OptimizerInfo::sgd(LR),
        )
        .unwrap()
    };

    let refused = new();
    let dir = scratch("plain-refused");
    launch(
        refused.instrument(BurnNet::of(&net)).unwrap(),
        &refused,
        &dir,
        1,
        |t| t,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(refused.output().series("NormTest").is_empty());
    assert!(
        !refused.output().series("GradNorm").is_empty(),
        "{:?}",
        refused.warnings()
    );
    let warnings = refused.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("not computed") && w.contains("0 of 4")),
        "{warnings:?}"
    );

    let fallback = new();
    let dir = scratch("plain-fallback");
    let model = fallback
        .instrument(BurnNet::of(&net))
        .unwrap()
        .with_exact_fallback(|m: &BurnNet, batch: &Batch| m.losses(batch).0);
    launch(model, &fallback, &dir, 1, |t| t);
    let _ = std::fs::remove_dir_all(&dir);
    let warnings = fallback.warnings();
    assert!(
        warnings.iter().any(|w| w.contains("extra backward passes")),
        "the cost is said: {warnings:?}"
    );

    let fast = new();
    let dir = scratch("plain-fast");
    launch(fast.instrument(net).unwrap(), &fast, &dir, 1, |t| t);
    let _ = std::fs::remove_dir_all(&dir);
    let mut compared = 0;
    for (step, key, value) in fast.output().iter() {
        let (Some(a), Some(b)) = (
            value.as_f64(),
            fallback.output().get(step, key).and_then(Value::as_f64),
        ) else {
            continue;
        };
        assert!(
            (a - b).abs() <= 1e-4 * a.abs().max(1e-3),
            "{key} at {step}: fast {a} vs fallback {b}"
        );
        compared += 1;
    }
    assert!(compared >= 20, "compared {compared}");
}

/// A Learner whose configuration holds only a histogram (a text metric, no numeric one) still
/// writes Cockpit's log at every epoch end (the epoch end was reported by the first numeric
/// metric only).
#[test]
fn a_histogram_only_configuration_writes_the_log_at_epoch_end() {
    let device = Device::flex().autodiff();
    let dir = scratch("histogram-only");
    let cockpit = CockpitLearner::from_kinds(
        vec![QuantityKind::GradHist1d],
        Schedule::every_step(),
        OptimizerInfo::sgd(LR),
    )
    .unwrap()
    .with_artifact_dir(&dir)
    .unwrap();
    launch(
        cockpit.instrument(Net::new(&device)).unwrap(),
        &cockpit,
        &dir,
        1,
        |t| t,
    );
    let log = cockpit_quantities::log::read_log(dir.join("cockpit.json")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!log.series("GradHist1d").is_empty());
    assert!(
        !log.series("epoch_count").is_empty(),
        "the epoch entry was written"
    );
}

/// A Learner run with a record, stopped after its first epoch and resumed with burn-train's
/// `.checkpoint(1)` and `CockpitLearner::resume`, has the record of one never stopped; the
/// epoch's training loss comes from the tracked steps, not from a history in memory.
#[test]
fn a_learner_resumed_from_its_checkpoint_has_the_record_of_an_uninterrupted_run() {
    let device = Device::flex().autodiff();
    let model = Net::new(&device);
    let kinds = Configuration::Economy.kinds();
    let build = || {
        CockpitLearner::from_kinds(
            kinds.clone(),
            Schedule::every_step(),
            OptimizerInfo::sgd(LR),
        )
        .unwrap()
    };
    let read = |path: &std::path::Path| {
        cockpit_quantities::record::RecordReader::open(path)
            .unwrap()
            .read_all()
            .unwrap()
    };
    // Uninterrupted: two epochs.
    let dir = scratch("record-whole");
    std::fs::create_dir_all(&dir).unwrap();
    let whole = dir.join("run.db");
    let cockpit = build().with_record(&whole).unwrap();
    launch(
        cockpit.instrument(model.clone()).unwrap(),
        &cockpit,
        &dir,
        2,
        |t| t,
    );
    assert!(cockpit.warnings().is_empty(), "{:?}", cockpit.warnings());
    assert!(
        cockpit.output().is_empty(),
        "no history in memory with a record"
    );
    drop(cockpit);
    // Stopped after epoch 1, with burn's checkpoints, then resumed from them.
    let dir = scratch("record-cut");
    std::fs::create_dir_all(&dir).unwrap();
    let cut = dir.join("run.db");
    let cockpit = build().with_record(&cut).unwrap();
    launch(
        cockpit.instrument(model.clone()).unwrap(),
        &cockpit,
        &dir,
        1,
        |t| t.with_default_checkpointers(),
    );
    drop(cockpit);
    let cockpit = build().resume(&cut, 1).unwrap();
    launch(cockpit.instrument(model).unwrap(), &cockpit, &dir, 2, |t| {
        t.with_default_checkpointers().checkpoint(1)
    });
    assert!(cockpit.warnings().is_empty(), "{:?}", cockpit.warnings());
    drop(cockpit);
    let (a, b) = (read(&whole), read(&cut));
    assert_eq!(a.steps().count(), 2 * SAMPLES / BATCH);
    assert!(a.get(SAMPLES / BATCH - 1, "train_loss").is_some());
    assert_eq!(a, b);
    // A record without that epoch's end is refused by name.
    let err = build().resume(&cut, 7).unwrap_err();
    assert!(
        matches!(err, TrainError::NoEpochState { epoch: 7, .. }),
        "{err}"
    );
}
