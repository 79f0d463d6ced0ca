//! [`CockpitLearner`]: the Cockpit shared by an instrumented model and its metrics.

use cockpit_diagnose::{Diagnosis, Monitor};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use burn::train::{LearnerModel, SupervisedTraining, TrainStep};
use cockpit_quantities::curvature::CurvatureSource;
use cockpit_quantities::{
    Cockpit, CockpitError, Configuration, EpochLog, OptimizerInfo, QuantityKind, Schedule,
    StepInfo, Value,
};

use crate::TrainError;
use crate::metric::{CockpitMetric, CockpitTextMetric, MetricForm};
use crate::model::{Instrumented, Replay};
use crate::step::Captured;

/// File names the adapter writes in its artifact directory.
pub const LOG_FILE: &str = "cockpit.json";
/// The JSON-lines stream, one line per tracked step, flushed as training runs.
pub const STREAM_FILE: &str = "cockpit.jsonl";

/// Quantities that need Hessian-vector products on the step's batch.
const CURVATURE: [QuantityKind; 4] = [
    QuantityKind::HessMaxEV,
    QuantityKind::HessTrace,
    QuantityKind::TICDiag,
    QuantityKind::TICTrace,
];

/// What one step's `TrainStep::step` left, until the optimizer step consumes it.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) capture: Captured,
    pub(crate) curvature: Option<Box<dyn CurvatureSource>>,
}

/// The values the Cockpit computed during one training iteration, until every metric read them.
#[derive(Debug)]
struct Record {
    /// Cockpit name → (step the value is stored under, value).
    values: BTreeMap<String, (usize, Value)>,
    readers_left: usize,
}

#[derive(Debug)]
pub(crate) struct State {
    cockpit: Cockpit,
    optimizer: OptimizerInfo,
    /// Training iterations started (`TrainStep::step` calls), across epochs.
    iteration: usize,
    /// Optimizer steps taken: the next Cockpit step.
    step: usize,
    pending: Vec<Pending>,
    records: BTreeMap<usize, Record>,
    readers: usize,
    reported: BTreeSet<String>,
    problems: Vec<String>,
    dir: Option<PathBuf>,
    epochs: usize,
    epoch_duty_taken: bool,
    learning_rate: Option<f64>,
    /// `cockpit diagnose`'s checks at epoch ends, when asked for.
    monitor: Option<Monitor>,
}

/// A Cockpit for a burn-train run: it instruments the model
/// ([`CockpitLearner::instrument`]), registers one metric per quantity on the training split
/// ([`CockpitLearner::register`]) and writes Cockpit's log next to burn's metric logs.
///
/// ```ignore
/// let cockpit = CockpitLearner::new(Configuration::Economy, Schedule::every_step(), OptimizerInfo::sgd(0.05))?
///     .with_artifact_dir(ARTIFACT_DIR)?;
/// let learner = Learner::new(cockpit.instrument(model)?, SgdConfig::new().init(), 0.05);
/// let result = cockpit.register(SupervisedTraining::new(ARTIFACT_DIR, train, valid)).launch(learner);
/// cockpit.write()?; // ARTIFACT_DIR/cockpit.json (the stream cockpit.jsonl is written as it runs)
/// ```
///
/// Steps are optimizer steps counted from 0 across epochs (burn's metric metadata restarts
/// its iteration count each epoch; the adapter keeps its own). Quantities are computed in
/// `TrainStep::optimize`, on the gradient the optimizer applies:
/// - with gradient accumulation, that is the accumulated gradient; the loss is the mean of the
///   accumulated steps' losses, and per-sample and curvature quantities are refused (a
///   warning says so) because their batch is not one batch;
/// - with several devices, the gradients of all devices summed (as burn's optimizer does);
///   per-sample and curvature quantities are refused likewise.
///
/// Cloning gives another handle to the same Cockpit.
#[derive(Clone)]
pub struct CockpitLearner {
    state: Arc<Mutex<State>>,
    kinds: Vec<QuantityKind>,
}

impl std::fmt::Debug for CockpitLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CockpitLearner")
            .field("quantities", &self.kinds)
            .field("steps", &self.steps())
            .finish_non_exhaustive()
    }
}

impl CockpitLearner {
    /// A Cockpit running one of Cockpit's configurations on `schedule`, for a run that trains
    /// with `optimizer` (burn's optimizers are type-erased in the `Learner`, so it is declared
    /// here; [`OptimizerInfo::sgd`] for `SgdConfig::new()`).
    ///
    /// # Errors
    ///
    /// [`TrainError::UnsupportedForOptimizer`] when CABS or EarlyStopping is asked for with an
    /// optimizer other than plain SGD.
    pub fn new(
        configuration: Configuration,
        schedule: Schedule,
        optimizer: OptimizerInfo,
    ) -> Result<Self, TrainError> {
        Self::from_kinds(configuration.kinds(), schedule, optimizer)
    }

    /// A Cockpit running the given quantities on `schedule` (see [`CockpitLearner::new`]).
    ///
    /// # Errors
    ///
    /// [`TrainError::NoQuantities`], [`TrainError::UnsupportedForOptimizer`], or the Cockpit's
    /// error for a kind given twice.
    pub fn from_kinds(
        kinds: impl IntoIterator<Item = QuantityKind>,
        schedule: Schedule,
        optimizer: OptimizerInfo,
    ) -> Result<Self, TrainError> {
        let kinds: Vec<QuantityKind> = kinds.into_iter().collect();
        if kinds.is_empty() {
            return Err(TrainError::NoQuantities);
        }
        for kind in &kinds {
            if matches!(kind, QuantityKind::CABS | QuantityKind::EarlyStopping)
                && !optimizer.is_plain_sgd()
            {
                return Err(TrainError::UnsupportedForOptimizer {
                    quantity: kind.name().to_string(),
                    optimizer: format!("{optimizer:?}"),
                    reason: "its formula assumes plain SGD (no momentum, dampening or weight \
                             decay), as in Cockpit",
                });
            }
        }
        let cockpit = Cockpit::from_kinds(kinds.iter().copied(), &schedule)?;
        Ok(Self {
            state: Arc::new(Mutex::new(State {
                cockpit,
                optimizer,
                iteration: 0,
                step: 0,
                pending: Vec::new(),
                records: BTreeMap::new(),
                readers: 0,
                reported: BTreeSet::new(),
                problems: Vec::new(),
                dir: None,
                epochs: 0,
                epoch_duty_taken: false,
                learning_rate: None,
                monitor: None,
            })),
            kinds,
        })
    }

    /// Writes Cockpit's log to `dir/cockpit.json` (at every epoch end and on
    /// [`CockpitLearner::write`]) and streams each tracked step to `dir/cockpit.jsonl`. Use
    /// burn's artifact directory to keep everything of a run together.
    ///
    /// # Errors
    ///
    /// [`TrainError::ArtifactDir`] or the stream's error if the directory or file cannot be
    /// created.
    pub fn with_artifact_dir(self, dir: impl AsRef<Path>) -> Result<Self, TrainError> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| TrainError::ArtifactDir {
            path: dir.clone(),
            source,
        })?;
        {
            let mut state = self.lock();
            let cockpit = std::mem::replace(
                &mut state.cockpit,
                Cockpit::new(Vec::new()).map_err(TrainError::from)?,
            );
            state.cockpit = cockpit.with_stream(dir.join(STREAM_FILE))?;
            state.dir = Some(dir);
        }
        Ok(self)
    }

    /// Runs `cockpit diagnose`'s checks on everything tracked so far at every epoch end and
    /// warns (`log::warn!` and [`CockpitLearner::warnings`]) once for each new finding, with
    /// the model's parameter names. Opt-in: the checks cost one pass over the logged series
    /// per epoch, no tensor work.
    pub fn with_diagnosis(self) -> Self {
        self.lock().monitor = Some(Monitor::new());
        self
    }

    /// The latest epoch-end diagnosis ([`CockpitLearner::with_diagnosis`]); `None` before the
    /// first epoch ends or without diagnosis.
    pub fn diagnosis(&self) -> Option<Diagnosis> {
        let state = self.lock();
        state.monitor.as_ref().and_then(|m| m.last().cloned())
    }

    /// The configured quantities.
    pub fn kinds(&self) -> &[QuantityKind] {
        &self.kinds
    }

    /// Wraps `model` so the Cockpit sees every training step (see [`Instrumented`]).
    ///
    /// # Errors
    ///
    /// [`TrainError::CurvatureNeedsReplay`] if curvature quantities are configured: use
    /// [`CockpitLearner::instrument_with_curvature`].
    pub fn instrument<M: TrainStep + Module + 'static>(
        &self,
        model: M,
    ) -> Result<Instrumented<M>, TrainError> {
        let curvature: Vec<String> = self
            .kinds
            .iter()
            .filter(|k| CURVATURE.contains(k))
            .map(|k| k.name().to_string())
            .collect();
        if !curvature.is_empty() {
            return Err(TrainError::CurvatureNeedsReplay {
                quantities: curvature,
            });
        }
        Ok(Instrumented::new(model, self.clone(), None))
    }

    /// Like [`CockpitLearner::instrument`], and lets curvature quantities replay the step's
    /// batch at shifted parameters: Hessian-vector products by central differences of
    /// gradients, the Hessian diagonal (HessTrace, TIC) by Hutchinson's estimate with
    /// `probes` probes.
    ///
    /// # Cost
    ///
    /// Two forward and backward passes per product; HessMaxEV takes up to 100 products,
    /// the diagonal `probes`.
    pub fn instrument_with_curvature<M>(&self, model: M, probes: usize) -> Instrumented<M>
    where
        M: TrainStep + Module + Sync + 'static,
        M::Input: Clone + Sync,
    {
        let replay: Replay<M> = Arc::new(move |model: &M, item: &M::Input| {
            let model = model.clone();
            let item = item.clone();
            let grads_of = move |moved: &M| -> Result<GradientsParams, _> {
                Ok(moved.step(item.clone()).grads)
            };
            let hvp = cockpit_quantities::curvature::FiniteDifferenceHvp::new(&model, grads_of);
            Box::new(cockpit_quantities::curvature::Hutchinson::new(
                hvp, probes, 0x5eed,
            )) as Box<dyn CurvatureSource>
        });
        Instrumented::new(model, self.clone(), Some(replay))
    }

    /// Registers one metric per configured quantity on the training split of `training`:
    /// numbers and layer-wise lists (reduced over layers by `QuantityKind::reduction`) as numeric metrics, histograms
    /// as text metrics. The metrics are made here only, so they cannot be registered on the
    /// validation split, where no gradient exists.
    pub fn register<M: LearnerModel>(
        &self,
        training: SupervisedTraining<M>,
    ) -> SupervisedTraining<M> {
        let mut training = training;
        for kind in &self.kinds {
            self.lock().readers += 1;
            let key = kind.name().to_string();
            training = match MetricForm::of(*kind) {
                MetricForm::Numeric => {
                    training.metric_train_numeric(CockpitMetric::new(key, self.clone()))
                }
                MetricForm::Text => {
                    training.metric_train(CockpitTextMetric::new(key, self.clone()))
                }
            };
        }
        training
    }

    /// Writes Cockpit's log to the artifact directory and returns its path.
    ///
    /// # Errors
    ///
    /// [`TrainError::NoArtifactDir`] without an artifact directory, [`TrainError::Cockpit`] if
    /// the file cannot be written (the values stay in memory).
    pub fn write(&self) -> Result<PathBuf, TrainError> {
        let state = self.lock();
        let dir = state.dir.clone().ok_or(TrainError::NoArtifactDir)?;
        let path = dir.join(LOG_FILE);
        state.cockpit.write(&path)?;
        Ok(path)
    }

    /// Everything tracked so far (`output[step][name]`), as the custom-loop Cockpit has it.
    pub fn output(&self) -> cockpit_quantities::Output {
        self.lock().cockpit.output().clone()
    }

    /// Warnings so far: the Cockpit's own (non-finite values) and the adapter's (quantities
    /// that failed, refused per-sample or curvature work), each adapter warning once.
    pub fn warnings(&self) -> Vec<String> {
        let state = self.lock();
        let mut all = state.cockpit.warnings().to_vec();
        all.extend(state.problems.iter().cloned());
        all
    }

    /// Optimizer steps tracked so far.
    pub fn steps(&self) -> usize {
        self.lock().step
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (every update is a single
        // assignment), so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn wants_per_sample(&self) -> bool {
        let state = self.lock();
        state.cockpit.needs_per_sample(state.step)
    }

    pub(crate) fn wants_curvature(&self) -> bool {
        let state = self.lock();
        state.cockpit.needs_curvature(state.step)
    }

    /// A training step's forward and backward pass ran.
    pub(crate) fn push_step(&self, pending: Pending) {
        let mut state = self.lock();
        state.iteration += 1;
        state.pending.push(pending);
    }

    /// The optimizer is about to apply `grads` to `model`: track the step.
    pub(crate) fn track<M: Module>(
        &self,
        model: &M,
        grads: &GradientsParams,
        lr: f64,
        devices: usize,
    ) {
        let mut state = self.lock();
        state.track(model, grads, lr, devices);
    }

    /// The value a metric reports at its `update`-th call (one call per training iteration).
    pub(crate) fn take_value(&self, update: usize, key: &str) -> Option<(usize, Value)> {
        let mut state = self.lock();
        let record = state.records.get_mut(&update)?;
        let value = record.values.remove(key);
        record.readers_left = record.readers_left.saturating_sub(1);
        if record.readers_left == 0 {
            state.records.remove(&update);
        }
        value
    }

    /// Whether the calling metric is the first numeric one, which logs the epoch entries.
    pub(crate) fn claim_epoch_duty(&self) -> bool {
        let mut state = self.lock();
        !std::mem::replace(&mut state.epoch_duty_taken, true)
    }

    /// The learning rate burn reports with the latest metric update.
    pub(crate) fn note_lr(&self, lr: Option<f64>) {
        if lr.is_some() {
            self.lock().learning_rate = lr;
        }
    }

    /// An epoch ended (called once per epoch by the first registered numeric metric): log
    /// Cockpit's epoch entry (epoch count, mean training loss, learning rate) and rewrite the
    /// log file.
    pub(crate) fn end_epoch(&self) {
        let mut state = self.lock();
        let learning_rate = state.learning_rate;
        state.epochs += 1;
        let step = state.step.saturating_sub(1);
        let since = state.last_epoch_step();
        let losses: Vec<f64> = state
            .cockpit
            .output()
            .series("Loss")
            .into_iter()
            .filter(|(s, _)| since.is_none_or(|since| *s > since))
            .filter_map(|(_, v)| v.as_f64())
            .collect();
        let train_loss =
            (!losses.is_empty()).then(|| losses.iter().sum::<f64>() / losses.len() as f64);
        let entry = EpochLog {
            epoch_count: state.epochs,
            train_loss,
            learning_rate,
            ..EpochLog::default()
        };
        if let Err(err) = state.cockpit.log(step, &entry) {
            state.problem(format!("cannot stream the epoch entry: {err}"));
        }
        if let Some(dir) = state.dir.clone()
            && let Err(err) = state.cockpit.write(dir.join(LOG_FILE))
        {
            state.problem(format!("cannot write the Cockpit log: {err}"));
        }
        if let Some(mut monitor) = state.monitor.take() {
            let names = state
                .cockpit
                .parameter_names()
                .map(<[String]>::to_vec)
                .unwrap_or_default();
            for finding in monitor.check(state.cockpit.output(), &names) {
                state.problem(format!(
                    "diagnose [{}] from step {}: {} ({})",
                    finding.code, finding.first_step, finding.message, finding.evidence
                ));
            }
            state.monitor = Some(monitor);
        }
    }
}

impl State {
    fn last_epoch_step(&self) -> Option<usize> {
        self.cockpit
            .output()
            .steps()
            .filter(|s| self.cockpit.output().get(*s, "epoch_count").is_some())
            .last()
    }

    /// Records a warning once.
    fn problem(&mut self, message: String) {
        if self.reported.insert(message.clone()) {
            log::warn!("cockpit-train: {message}");
            self.problems.push(message);
        }
    }

    fn track<M: Module>(&mut self, model: &M, grads: &GradientsParams, lr: f64, devices: usize) {
        let step = self.step;
        self.step += 1;
        let iteration = self.iteration;
        let pending = std::mem::take(&mut self.pending);
        if !self.cockpit.is_tracking(step) {
            return;
        }
        let Some(info) = self.step_info(step, pending, lr, devices) else {
            return;
        };
        match self.cockpit.track(step, model, grads, info) {
            Ok(()) => {}
            Err(CockpitError::QuantitiesFailed { failures, .. }) => {
                for (name, err) in failures {
                    self.problem(format!("{name} not computed: {err}"));
                }
            }
            Err(err) => self.problem(format!("step {step} not tracked: {err}")),
        }
        let values: BTreeMap<String, (usize, Value)> = self
            .cockpit
            .latest()
            .iter()
            .map(|(at, name, value)| (name.to_string(), (at, value.clone())))
            .collect();
        if !values.is_empty() && self.readers > 0 {
            self.records.insert(
                iteration,
                Record {
                    values,
                    readers_left: self.readers,
                },
            );
        }
    }

    fn step_info(
        &mut self,
        step: usize,
        pending: Vec<Pending>,
        lr: f64,
        devices: usize,
    ) -> Option<StepInfo> {
        let optimizer = with_lr(&self.optimizer, lr);
        let single = pending.len() == 1 && devices == 1;
        let mut losses = Vec::new();
        let mut last = None;
        for p in pending {
            if !p.capture.seen {
                self.problem(
                    "the model's TrainStep::step does not build its output with \
                     cockpit_train::train_output (or train_output_per_sample), so the Cockpit \
                     sees no loss; nothing is tracked"
                        .into(),
                );
                return None;
            }
            if let Some(loss) = &p.capture.loss {
                losses.push(loss.clone());
            }
            last = Some(p);
        }
        let Some(last) = last else {
            self.problem(format!(
                "step {step}: optimizer step without a training step; not tracked"
            ));
            return None;
        };
        let loss = Tensor::cat(losses, 0).mean();
        let mut info = StepInfo::new(loss).with_optimizer(optimizer);
        if !single {
            self.problem(if devices > 1 {
                format!(
                    "training on {devices} devices: per-sample and curvature quantities are \
                     refused (their batch is split across devices); the others use the summed \
                     gradient the optimizer applies"
                )
            } else {
                "gradient accumulation: per-sample and curvature quantities are refused (the \
                 accumulated gradient spans several batches); the others use the accumulated \
                 gradient the optimizer applies"
                    .to_string()
            });
            return Some(info);
        }
        let Pending { capture, curvature } = last;
        if let Some(losses) = capture.losses {
            info = info.with_individual_losses(losses);
        }
        match capture.factors {
            Some(Ok(factors)) => {
                info = info.with_batch_size(
                    cockpit_quantities::persample::PerSampleSource::batch_size(&factors),
                );
                info = info.with_per_sample(factors);
            }
            Some(Err(err)) => self.problem(format!("per-sample gradients unavailable: {err}")),
            None => {}
        }
        if let Some(curvature) = curvature {
            info = info.with_curvature(curvature);
        }
        Some(info)
    }
}

/// The declared optimizer with the learning rate of this step (from burn's scheduler).
fn with_lr(optimizer: &OptimizerInfo, lr: f64) -> OptimizerInfo {
    match optimizer.clone() {
        OptimizerInfo::Sgd {
            momentum,
            dampening,
            weight_decay,
            nesterov,
            ..
        } => OptimizerInfo::Sgd {
            lr,
            momentum,
            dampening,
            weight_decay,
            nesterov,
        },
        OptimizerInfo::Other { name, .. } => OptimizerInfo::Other { name, lr: Some(lr) },
        other => other,
    }
}
