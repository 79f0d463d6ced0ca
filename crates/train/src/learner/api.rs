//! The public API of [`CockpitLearner`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;
use burn::tensor::distributed::{DistributedConfig, ReduceOperation};
use burn::train::{ExecutionStrategy, LearnerModel, SupervisedTraining, TrainStep};
use cockpit_diagnose::Diagnosis;
use cockpit_quantities::curvature::{
    CurvatureSource, HessianDiagonal, LinearityVerdicts, NetworkOutput, OutputLoss,
    RecordedCurvature,
};
use cockpit_quantities::log::JsonLinesWriter;
use cockpit_quantities::{
    Cockpit, CockpitConfig, CockpitError, Configuration, OptimizerInfo, QuantityKind, Schedule,
};
use cockpit_tensorboard::TensorBoardWriter;

use super::epoch::EpochWriter;
use super::group::{Ddp, Transport};
use super::instrumented::{Instrumented, Replay};
use super::state::State;
use super::tracker::Tracker;
use super::{LOG_FILE, STREAM_FILE};
use crate::TrainError;
use crate::metric::{CockpitMetric, CockpitNotesMetric, CockpitTextMetric, MetricForm};

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
/// `TrainStep::optimize`, on the step the optimizer takes:
/// - with gradient accumulation over `k` micro-batches burn applies the sum of their mean
///   gradients, i.e. one SGD step with learning rate `k·lr` on their union; the Cockpit tracks
///   that step: the union's mean gradient (the sum over `k`), the mean of the micro-batches'
///   losses, their per-sample statistics merged
///   ([`MergedPerSample`](cockpit_quantities::persample::MergedPerSample)) and their
///   curvature averaged
///   ([`MergedCurvature`](cockpit_quantities::curvature::MergedCurvature)), with `k·lr` as the
///   declared SGD's learning rate. Micro-batches of different sizes get no per-sample or
///   curvature quantities (a warning says so);
/// - with several devices (`MultiDevice`), burn sums every device's gradient the same way:
///   the Cockpit tracks one step on the union of the devices' batches, with the per-sample
///   statistics moved to the parameters' device (what crosses between devices: per
///   parameter `b_k` numbers per per-sample statistic, `numel` for sums of squares).
///
/// Cloning gives another handle to the same Cockpit.
#[derive(Clone)]
pub struct CockpitLearner {
    tracker: Tracker,
    /// Output key and kind of each quantity: one metric each.
    keys: Vec<(String, QuantityKind)>,
}

impl std::fmt::Debug for CockpitLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CockpitLearner")
            .field("quantities", &self.tracker.kinds())
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
        let keys = kinds.iter().map(|k| (k.name().to_string(), *k)).collect();
        Self::checked(keys, optimizer, || {
            Cockpit::from_kinds(kinds.iter().copied(), &schedule)
        })
    }

    /// A Cockpit as a config file describes it ([`CockpitConfig`]: a preset, schedules,
    /// quantities with Cockpit's keyword arguments and their own keys), for a run that trains
    /// with `optimizer`. Every setting is checked here, before training.
    ///
    /// # Errors
    ///
    /// As [`CockpitLearner::from_kinds`], and [`TrainError::Cockpit`] for settings the
    /// quantities refuse.
    pub fn from_config(
        config: &CockpitConfig,
        optimizer: OptimizerInfo,
    ) -> Result<Self, TrainError> {
        let keys = config.keys();
        Self::checked(keys, optimizer, || config.build())
    }

    /// Refuses what cannot work with `optimizer` before building the Cockpit.
    fn checked(
        keys: Vec<(String, QuantityKind)>,
        optimizer: OptimizerInfo,
        build: impl FnOnce() -> Result<Cockpit, cockpit_quantities::CockpitError>,
    ) -> Result<Self, TrainError> {
        if keys.is_empty() {
            return Err(TrainError::NoQuantities);
        }
        for (key, kind) in &keys {
            if kind.spec().needs.plain_sgd && !optimizer.is_plain_sgd() {
                return Err(TrainError::UnsupportedForOptimizer {
                    quantity: key.clone(),
                    optimizer: optimizer.clone(),
                    reason: "its formula assumes plain SGD (no momentum, dampening or weight \
                             decay), as in Cockpit",
                });
            }
        }
        let cockpit = build()?;
        let kinds = keys.iter().map(|(_, kind)| *kind).collect();
        Ok(Self {
            tracker: Tracker::new(State::new(cockpit, optimizer), kinds),
            keys,
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
        let stream = JsonLinesWriter::create(dir.join(STREAM_FILE)).map_err(CockpitError::from)?;
        {
            let mut state = self.lock();
            state.add_sink(stream);
            state.set_artifact_dir(dir);
        }
        Ok(self)
    }

    /// Writes the run to a run record at `path` as it goes (SQLite, replaced if there is one:
    /// [`RunRecord::create`](cockpit_quantities::record::RunRecord::create)) instead of keeping
    /// it in memory, and saves the Cockpit's state in it at every epoch end, so that a run
    /// resumed with burn-train's `.checkpoint(epoch)` resumes the Cockpit too
    /// ([`CockpitLearner::resume`]). `cockpit plot`, `diagnose` and `serve` read the record
    /// while it grows; [`CockpitLearner::write`] exports it as Cockpit's JSON log.
    ///
    /// # Errors
    ///
    /// [`TrainError::Record`] if the record cannot be created (another run holds it).
    pub fn with_record(self, path: impl AsRef<Path>) -> Result<Self, TrainError> {
        let record = cockpit_quantities::record::RunRecord::create(path)?;
        self.lock().set_record(record);
        Ok(self)
    }

    /// Goes on with the run recorded at `path` from the end of epoch `epoch`, as burn-train's
    /// `SupervisedTraining::checkpoint(epoch)` does with the model and the optimizer: the
    /// Cockpit's state saved at that epoch end is taken back at the first optimizer step
    /// (Distance from the run's initial parameters, steps numbered on, every quantity's state),
    /// and the record's values after it are written again.
    ///
    /// # Errors
    ///
    /// [`TrainError::Record`] if the record cannot be opened, [`TrainError::NoEpochState`] if
    /// it noted no end of `epoch`. A state that does not fit the model is reported as a
    /// warning at the first step ([`CockpitLearner::warnings`]).
    pub fn resume(self, path: impl AsRef<Path>, epoch: usize) -> Result<Self, TrainError> {
        let path = path.as_ref();
        let record = cockpit_quantities::record::RunRecord::open(path)?;
        let step = record
            .epoch_end(epoch)?
            .ok_or_else(|| TrainError::NoEpochState {
                path: path.to_path_buf(),
                epoch,
            })?;
        self.lock().resume_at(record, step, epoch);
        Ok(self)
    }

    /// Also writes every tracked step to a TensorBoard event file in `dir` (created if needed),
    /// flushed at each step, beside burn's own metrics: scalars `cockpit/<Quantity>` and
    /// `cockpit/<Quantity>/<parameter>`, GradHist1d as histograms
    /// ([`TensorBoardWriter`] as one of the Cockpit's sinks).
    ///
    /// # Errors
    ///
    /// [`TrainError::TensorBoard`] if the directory or the file cannot be created (the
    /// Learner's Cockpit is left as it was).
    pub fn with_tensorboard(self, dir: impl AsRef<Path>) -> Result<Self, TrainError> {
        let writer = TensorBoardWriter::create(dir)?;
        self.lock().add_sink(writer);
        Ok(self)
    }

    /// Counts GradHist1d's and GradHist2d's elements with `engine`
    /// ([`Cockpit::with_histogram_engine`]; by default the host on CPU backends and the device
    /// on GPU backends, [`HistogramEngine::Auto`]).
    ///
    /// [`HistogramEngine::Auto`]: cockpit_quantities::histogram::HistogramEngine::Auto
    pub fn with_histogram_engine(
        self,
        engine: cockpit_quantities::histogram::HistogramEngine,
    ) -> Self {
        self.lock().set_histogram_engine(engine);
        self
    }

    /// Runs `cockpit diagnose`'s checks on everything tracked so far at every epoch end and
    /// warns (`log::warn!` and [`CockpitLearner::warnings`]) once for each new finding, with
    /// the model's parameter names. Opt-in: the checks cost one pass over the logged series
    /// per epoch, no tensor work.
    pub fn with_diagnosis(self) -> Self {
        self.lock().diagnose_at_epoch_ends();
        self
    }

    /// The latest epoch-end diagnosis ([`CockpitLearner::with_diagnosis`]); `None` before the
    /// first epoch ends or without diagnosis.
    pub fn diagnosis(&self) -> Option<Diagnosis> {
        let state = self.lock();
        state.last_diagnosis().cloned()
    }

    /// burn's distributed data-parallel strategy on `devices` (one worker per device), with
    /// this Cockpit tracking every quantity on the union of the workers' batches: use it in
    /// place of `ExecutionStrategy::ddp(devices, config)`.
    ///
    /// Every worker reduces its own batch's per-sample statistics on its device; one
    /// all-reduce of those partial statistics (burn's collective operations, as for the
    /// gradients) joins them; the first worker tracks the step with the all-reduced mean
    /// gradient. Histograms and curvature take the other workers' sources in process (burn
    /// 0.22 runs one process per node).
    ///
    /// # Cost
    ///
    /// On top of burn's gradient all-reduce, per tracked step: two all-reduces of `5R` numbers
    /// and, per parameter, `B` numbers per per-sample statistic, `numel` for `Σ_n g_n²`, `R`
    /// for the maximum (`R` workers, `B` samples in all); see
    /// [`all_reduce_stats`](cockpit_quantities::persample::all_reduce_stats).
    ///
    /// # Errors
    ///
    /// [`TrainError::NoDevices`] for an empty device list.
    pub fn ddp(
        &self,
        devices: Vec<Device>,
        config: DistributedConfig,
    ) -> Result<ExecutionStrategy, TrainError> {
        self.data_parallel(&devices, config.all_reduce_op, Transport::BurnCollectives)?;
        Ok(ExecutionStrategy::ddp(devices, config))
    }

    /// Declares the data-parallel group the Cockpit watches, for a strategy that runs one
    /// worker thread per device, each stepping its own copy of the model on its own batches
    /// with the gradients combined by `op` before the optimizer step (burn's DDP; custom
    /// strategies). Workers are ranked in the order of their first training step.
    /// [`CockpitLearner::ddp`] calls it with burn's collectives.
    ///
    /// # Errors
    ///
    /// [`TrainError::NoDevices`] for an empty device list.
    pub fn data_parallel(
        &self,
        devices: &[Device],
        op: ReduceOperation,
        transport: Transport,
    ) -> Result<(), TrainError> {
        let ddp = Ddp::new(devices, op == ReduceOperation::Sum, transport)?;
        self.lock().join_group(ddp);
        Ok(())
    }

    /// The configured quantities.
    pub fn kinds(&self) -> &[QuantityKind] {
        self.tracker.kinds()
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
            .tracker
            .kinds()
            .iter()
            .filter(|k| k.spec().needs.curvature)
            .map(|k| k.name().to_string())
            .collect();
        if !curvature.is_empty() {
            return Err(TrainError::CurvatureNeedsReplay {
                quantities: curvature,
            });
        }
        Ok(Instrumented::new(model, self.tracker.clone(), None))
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
        Instrumented::new(model, self.tracker.clone(), Some(replay))
    }

    /// Like [`CockpitLearner::instrument_with_curvature`], with curvature diagonals (HessTrace,
    /// TIC) through recorded backward passes of the per-sample drop-ins
    /// ([`RecordedCurvature`]): `output(model, item)` runs the forward pass to the network's
    /// output (`[B, C]`, a language model's `[B, T, V]`, any [`NetworkOutput`]; dropout off,
    /// or the same masks as the step), `loss(item)` gives the loss
    /// on it with its targets (cross-entropy with one-hot targets, or MSE; mean over the
    /// batch), and `hessian` says how `diag_h` is obtained ([`HessianDiagonal::PiecewiseLinear`]
    /// for ReLU and pooling between the drop-ins: exact). The Gauss–Newton diagonals are exact
    /// wherever the drop-ins cover the model; where they do not, `diag_h` is Hutchinson's
    /// estimate with 10 probes and a warning says so. Hessian-vector products (HessMaxEV) are
    /// central differences of gradients, as with `instrument_with_curvature`.
    ///
    /// # Cost
    ///
    /// `diag_ggn_exact` (and an exact `diag_h`): `C` recorded forward and backward passes per
    /// tracked step (`C` the output's width); `diag_ggn_mc`: one. Two passes per product.
    pub fn instrument_with_recorded_curvature<M, O>(
        &self,
        model: M,
        output: impl Fn(&M, &M::Input) -> O + Send + Sync + 'static,
        loss: impl Fn(&M::Input) -> OutputLoss + Send + Sync + 'static,
        hessian: HessianDiagonal,
    ) -> Instrumented<M>
    where
        M: TrainStep + Module + Sync + 'static,
        M::Input: Clone + Send + Sync,
        O: NetworkOutput + 'static,
    {
        let output = Arc::new(output);
        // One forward, one piecewise-linear verdict: checked at the first tracked step.
        let verdicts = LinearityVerdicts::default();
        let replay: Replay<M> = Arc::new(move |model: &M, item: &M::Input| {
            let (output, replayed) = (output.clone(), item.clone());
            Box::new(
                RecordedCurvature::new(
                    model,
                    move |m: &M| output(m, &replayed),
                    loss(item),
                    0x5eed,
                )
                .with_hessian(hessian)
                .with_linearity_verdicts(verdicts.clone()),
            ) as Box<dyn CurvatureSource>
        });
        Instrumented::new(model, self.tracker.clone(), Some(replay))
    }

    /// Registers one metric per configured quantity on the training split of `training`:
    /// numbers and layer-wise lists (reduced over layers by
    /// [`QuantityKind::reduction`]) as numeric metrics, histograms as text metrics. The
    /// metrics are made here only, so they cannot be registered on the validation split, where
    /// no gradient exists. They read the values of their iteration and nothing else; the first
    /// numeric one also writes Cockpit's epoch entry when burn ends an epoch.
    pub fn register<M: LearnerModel>(
        &self,
        training: SupervisedTraining<M>,
    ) -> SupervisedTraining<M> {
        let board = self.lock().board().clone();
        let mut training = training;
        for (key, kind) in &self.keys {
            board.add_reader();
            let key = key.clone();
            training = match MetricForm::of(*kind) {
                MetricForm::Numeric => {
                    training.metric_train_numeric(CockpitMetric::new(key, *kind, board.clone()))
                }
                MetricForm::Text => {
                    training.metric_train(CockpitTextMetric::new(key, board.clone()))
                }
            };
        }
        // The notes metric is always there: it reports the epoch ends.
        let epoch = Arc::new(EpochWriter(self.tracker.state().clone()));
        training.metric_train(CockpitNotesMetric::new(board, epoch))
    }

    /// Writes Cockpit's log to the artifact directory and returns its path.
    ///
    /// # Errors
    ///
    /// [`TrainError::NoArtifactDir`] without an artifact directory, [`TrainError::Cockpit`] if
    /// the file cannot be written (the values stay in memory).
    pub fn write(&self) -> Result<PathBuf, TrainError> {
        let mut state = self.lock();
        let dir = state
            .artifact_dir()
            .cloned()
            .ok_or(TrainError::NoArtifactDir)?;
        let path = dir.join(LOG_FILE);
        state.write_log(&path)?;
        Ok(path)
    }

    /// Everything tracked so far (`output[step][name]`), as the custom-loop Cockpit has it.
    pub fn output(&self) -> cockpit_quantities::Output {
        let mut state = self.lock();
        state.flush();
        state.cockpit().output().clone()
    }

    /// The per-example record so far (a copy), where the configuration runs
    /// [`Examples`](cockpit_quantities::quantity::Examples) and the steps hand in ids
    /// ([`train_output_with_ids`](crate::train_output_with_ids)).
    pub fn examples(&self) -> Option<cockpit_quantities::examples::ExampleRecord> {
        self.lock().cockpit().examples().cloned()
    }

    /// Warnings so far: the Cockpit's own (non-finite values) and the adapter's (quantities
    /// that failed, refused per-sample or curvature work), each adapter warning once.
    pub fn warnings(&self) -> Vec<String> {
        let state = self.lock();
        let mut all = state.cockpit().warnings().to_vec();
        all.extend(state.problems().iter().cloned());
        all
    }

    /// Optimizer steps tracked so far.
    pub fn steps(&self) -> usize {
        self.lock().steps()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.tracker.lock()
    }
}
