//! The adapter's shared state and everything done to it: the Cockpit, step counting (per
//! worker under DDP), turning a training step into the Cockpit's [`StepInfo`], and the epoch
//! entry at burn's epoch ends.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use cockpit_diagnose::Monitor;
use cockpit_quantities::histogram::HistogramEngine;
use cockpit_quantities::persample::ErrorChain;
use cockpit_quantities::record::{DEFAULT_OVERVIEW_STEPS, RecordReader, RunRecord};
use cockpit_quantities::sink::Sink;
use cockpit_quantities::{Cockpit, EpochLog, OptimizerInfo, QuantityKind, Snapshot, StepInfo};

use super::LOG_FILE;
use super::group::Ddp;
use super::union::Part;
use crate::board::{Board, BoardSink};
use crate::step::Pending;

/// The warning when the model's step does not hand its loss over.
pub(crate) const NO_TRAIN_OUTPUT: &str = "the model's TrainStep::step does not build its output \
    with cockpit_train::train_output (or train_output_per_sample), so the Cockpit sees no loss; \
    nothing is tracked";

/// Everything the adapter keeps between training steps, behind the
/// [`CockpitLearner`](crate::CockpitLearner)'s lock.
#[derive(Debug)]
pub(crate) struct State {
    cockpit: Cockpit,
    optimizer: OptimizerInfo,
    /// Training iterations started (`TrainStep::step` calls), across epochs.
    iteration: usize,
    /// Optimizer steps taken: the next Cockpit step.
    step: usize,
    pending: Vec<Pending>,
    /// Where the metrics read each iteration's values.
    board: Arc<Board>,
    reported: BTreeSet<String>,
    problems: Vec<String>,
    dir: Option<PathBuf>,
    epochs: usize,
    /// `cockpit diagnose`'s checks at epoch ends, when asked for.
    monitor: Option<Monitor>,
    /// The data-parallel group, under burn's DDP strategy.
    ddp: Option<Ddp>,
    /// The Cockpit's warnings already printed and shown.
    forwarded: usize,
    /// The training losses tracked since the last epoch end: their sum and count.
    epoch_losses: (f64, usize),
    /// A resume asked for ([`CockpitLearner::resume`](crate::CockpitLearner::resume)), done at
    /// the first optimizer step (where the model is known): the record, the step and the
    /// epochs done.
    resume: Option<(RunRecord, usize, usize)>,
}

impl State {
    /// Locks the shared state. A panic while holding the lock leaves consistent data (every
    /// update is a single assignment), so a poisoned lock is still usable.
    pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
        state.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn new(cockpit: Cockpit, optimizer: OptimizerInfo) -> Self {
        let board = Arc::new(Board::default());
        Self {
            // The adapter prints the Cockpit's warnings itself, with its own; the board is
            // fed as one of its sinks. The step's values are read at once: the board files
            // each call's values under that iteration's metrics, and burn-train reads every
            // iteration's loss anyway (a wait the deferred read could not remove).
            cockpit: cockpit
                .with_console(false)
                .with_read_timing(cockpit_quantities::ReadTiming::Now)
                .with_sink(BoardSink(board.clone())),
            optimizer,
            iteration: 0,
            step: 0,
            pending: Vec::new(),
            board,
            reported: BTreeSet::new(),
            problems: Vec::new(),
            dir: None,
            epochs: 0,
            monitor: None,
            ddp: None,
            forwarded: 0,
            epoch_losses: (0.0, 0),
            resume: None,
        }
    }

    /// Records a warning once: `log::warn!`, stderr, burn's dashboard (the notes metric)
    /// and [`CockpitLearner::warnings`](crate::CockpitLearner::warnings).
    pub(crate) fn problem(&mut self, message: String) {
        if self.reported.insert(message.clone()) {
            log::warn!("cockpit-train: {message}");
            self.show(&message);
            self.problems.push(message);
        }
    }

    /// Prints `message` to stderr and shows it in burn's dashboard, once per text (without
    /// its `step N: ` prefix).
    fn show(&mut self, message: &str) {
        let key = match message.split_once(": ") {
            Some((prefix, rest)) if prefix.starts_with("step ") => rest,
            _ => message,
        };
        if self.reported.insert(format!("\u{0}{key}")) {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr().lock(), "cockpit: {message}");
            self.board.note(message.to_string());
        }
    }

    /// Prints and shows the Cockpit's warnings not shown yet.
    fn forward_warnings(&mut self) {
        let new: Vec<String> = self.cockpit.warnings()[self.forwarded..].to_vec();
        self.forwarded += new.len();
        for warning in new {
            self.show(&warning);
        }
    }

    pub(crate) fn track<M: Module>(&mut self, model: &M, grads: &GradientsParams, lr: f64) {
        if let Some((record, step, epochs)) = self.resume.take() {
            match self.cockpit.resume_from(record, step, model) {
                Ok(()) => {
                    self.step = step;
                    self.epochs = epochs;
                }
                Err(err) => self.problem(format!(
                    "cannot resume the Cockpit at epoch {epochs}: {}",
                    ErrorChain(&err)
                )),
            }
        }
        let step = self.step;
        self.step += 1;
        let iteration = self.iteration;
        let pending = std::mem::take(&mut self.pending);
        if !self.cockpit.is_tracking(step) {
            return;
        }
        let parts = pending.len();
        let device = Snapshot::of_params(model).device();
        let Some(info) = self.step_info(step, pending, lr, device) else {
            return;
        };
        // burn sums the mean gradients of the micro-batches (accumulated, or one per device);
        // the Cockpit sees their union, whose mean gradient is that sum over their number.
        let mean;
        let grads = if parts > 1 {
            mean = scaled(model, grads, 1.0 / parts as f64);
            &mean
        } else {
            grads
        };
        self.run(step, iteration, model, grads, info);
    }

    /// Tracks `step` on the Cockpit and publishes its values for the metrics of `iteration`;
    /// failures become warnings.
    pub(crate) fn run<M: Module>(
        &mut self,
        step: usize,
        iteration: usize,
        model: &M,
        grads: &GradientsParams,
        info: StepInfo,
    ) {
        // The board (one of the Cockpit's sinks) files this call's values under `iteration`.
        self.board.begin(iteration);
        match self.cockpit.track(step, model, grads, info) {
            Ok(report) => {
                for (_, loss) in QuantityKind::Loss.series(self.cockpit.latest()) {
                    if let Some(loss) = loss.as_f64() {
                        self.epoch_losses.0 += loss;
                        self.epoch_losses.1 += 1;
                    }
                }
                let uncovered = report
                    .failures
                    .iter()
                    .any(|(_, err)| err.to_string().contains("does not cover the model"));
                for line in report.failure_lines() {
                    self.problem(line);
                }
                if uncovered {
                    self.problem(
                        "in a Learner: build the model from the drop-ins, or let the per-sample \
                         quantities fall back to single-sample passes with \
                         cockpit.instrument(model)?.with_exact_fallback(|model, batch| \
                         per-sample losses [B]) (B extra passes per tracked step)"
                            .into(),
                    );
                }
            }
            Err(err) => self.problem(format!("step {step} not tracked: {}", ErrorChain(&err))),
        }
        self.forward_warnings();
    }

    /// The info of an optimizer step: the union of the micro-batches it applies (one, `k`
    /// accumulated, or one per device), joined in [`Part::join`]. With `k > 1` the optimizer
    /// applied the sum of `k` mean gradients: the Cockpit sees one step on their union, whose
    /// mean gradient is that sum over `k` when the micro-batches have one size, taken by plain
    /// SGD with learning rate `k·lr`.
    fn step_info(
        &mut self,
        step: usize,
        pending: Vec<Pending>,
        lr: f64,
        device: Device,
    ) -> Option<StepInfo> {
        if pending.iter().any(|p| !p.capture.seen) {
            self.problem(NO_TRAIN_OUTPUT.into());
            return None;
        }
        let k = pending.len();
        if k == 0 {
            self.problem(format!(
                "step {step}: optimizer step without a training step; not tracked"
            ));
            return None;
        }
        let optimizer = if k > 1 {
            self.optimizer.on_union(lr, k)
        } else {
            self.optimizer.with_lr(lr)
        };
        let mut problems = Vec::new();
        let parts = pending
            .into_iter()
            .map(|p| Part::of(p, &mut problems))
            .collect();
        let union = Part::join(parts, &device, &mut problems);
        let Some(loss) = union.mean_loss() else {
            self.problem(NO_TRAIN_OUTPUT.into());
            return None;
        };
        if union.losses.is_none() && self.cockpit.needs_per_sample(step) {
            problems.push(
                "the model's TrainStep::step hands over only the mean loss (train_output); \
                 Alpha, CABS, EarlyStopping, MeanGSNR and TIC need each example's loss: build \
                 the output with cockpit_train::train_output_per_sample(self, losses, item)"
                    .into(),
            );
        }
        let info = union.into_info(
            StepInfo::new(loss).with_optimizer(optimizer),
            &device,
            &mut problems,
        );
        for problem in problems {
            self.problem(problem);
        }
        Some(info)
    }
}

impl State {
    /// The step the calling thread runs next (its worker's under DDP).
    pub(crate) fn next_step(&mut self) -> usize {
        let step = self.step;
        self.ddp.as_mut().and_then(Ddp::next_step).unwrap_or(step)
    }

    /// Keeps what a training step left until the optimizer step consumes it.
    pub(crate) fn push(&mut self, pending: Pending) {
        let Some(ddp) = &mut self.ddp else {
            self.iteration += 1;
            self.pending.push(pending);
            return;
        };
        match ddp.push(pending) {
            Ok(0) => self.iteration += 1,
            Ok(_) => {}
            Err(world) => self.problem(format!(
                "more worker threads than the {world} devices of the data-parallel group; \
                 their steps are not tracked"
            )),
        }
    }

    /// The Cockpit, to read (its output, warnings, what the next step needs).
    pub(crate) fn cockpit(&self) -> &Cockpit {
        &self.cockpit
    }

    /// Writes the Cockpit's log to `path` (a deferred step's values filed first).
    pub(crate) fn write_log(
        &mut self,
        path: &std::path::Path,
    ) -> Result<(), cockpit_quantities::CockpitError> {
        self.cockpit.write(path)
    }

    /// Files a deferred step's values ([`Cockpit::flush`]); a sink's error is a problem.
    pub(crate) fn flush(&mut self) {
        if let Err(err) = self.cockpit.flush() {
            self.problem(format!("{}", ErrorChain(&err)));
        }
    }

    /// Feeds `sink` every later step's values (the stream, TensorBoard).
    pub(crate) fn add_sink(&mut self, sink: impl Sink + 'static) {
        self.cockpit.add_sink(sink);
    }

    /// Counts the histograms' elements with `engine` from the next tracked step.
    pub(crate) fn set_histogram_engine(&mut self, engine: HistogramEngine) {
        self.cockpit.set_histogram_engine(engine);
    }

    /// Writes the log (and the epoch-end files) into `dir` from now on: the JSON log and the
    /// per-example table are one of the Cockpit's sinks, rewritten at every epoch entry.
    pub(crate) fn set_artifact_dir(&mut self, dir: PathBuf) {
        if self.dir.as_ref() != Some(&dir) {
            self.cockpit
                .add_sink(cockpit_quantities::sink::LogFile::new(dir.join(LOG_FILE)));
        }
        self.dir = Some(dir);
    }

    /// Where the log is written, if anywhere.
    pub(crate) fn artifact_dir(&self) -> Option<&PathBuf> {
        self.dir.as_ref()
    }

    /// Runs `cockpit diagnose`'s checks at every epoch end from now on.
    pub(crate) fn diagnose_at_epoch_ends(&mut self) {
        self.monitor = Some(Monitor::new());
    }

    /// The latest epoch end's diagnosis, when asked for.
    pub(crate) fn last_diagnosis(&self) -> Option<&cockpit_diagnose::Diagnosis> {
        self.monitor.as_ref().and_then(Monitor::last)
    }

    /// Watches a data-parallel group from now on.
    pub(crate) fn join_group(&mut self, ddp: Ddp) {
        self.ddp = Some(ddp);
    }

    /// Whether a data-parallel group is watched (its workers track through `ddp`).
    pub(crate) fn is_data_parallel(&self) -> bool {
        self.ddp.is_some()
    }

    /// The data-parallel group, for its workers' bookkeeping.
    pub(super) fn group(&mut self) -> Option<&mut Ddp> {
        self.ddp.as_mut()
    }

    /// Where the metrics read each iteration's values.
    pub(crate) fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// The adapter's own warnings so far (each once).
    pub(crate) fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Optimizer steps taken.
    pub(crate) fn steps(&self) -> usize {
        self.step
    }

    /// Under DDP, rank 0's worker began `step`: the next optimizer step is the one after.
    pub(super) fn begin_group_step(&mut self, step: usize) {
        self.step = step + 1;
    }

    /// Training iterations started, across epochs.
    pub(super) fn iteration(&self) -> usize {
        self.iteration
    }

    /// The optimizer of a step that applied `k` times the union's mean gradient at `lr`.
    pub(super) fn union_optimizer(&self, lr: f64, k: usize) -> OptimizerInfo {
        self.optimizer.on_union(lr, k)
    }

    /// Keeps a data-parallel worker's mean gradient of `step` for its projections at the
    /// next step ([`Cockpit::keep_gradient`]).
    pub(super) fn keep_gradient(&mut self, step: usize, grads: Snapshot) {
        self.cockpit.keep_gradient(step, grads);
    }
}

impl State {
    /// An epoch ended: log Cockpit's epoch entry (epoch count, mean training loss, learning
    /// rate), rewrite the log file, run the diagnosis if asked for.
    pub(crate) fn end_epoch(&mut self, learning_rate: Option<f64>) {
        let state = self;
        state.epochs += 1;
        let step = state.step.saturating_sub(1);
        let (sum, count) = std::mem::take(&mut state.epoch_losses);
        let train_loss = (count > 0).then(|| sum / count as f64);
        let entry = EpochLog {
            epoch_count: state.epochs,
            train_loss,
            learning_rate,
            ..EpochLog::default()
        };
        // The sinks take the entry: the stream, TensorBoard, and the log with the
        // per-example table (rewritten here, at every epoch end).
        if let Err(err) = state.cockpit.log(step, &entry) {
            state.problem(format!(
                "cannot write the epoch entry: {}",
                ErrorChain(&err)
            ));
        }
        // With a record: the Cockpit's state for a resume from this epoch's checkpoint.
        if state.cockpit.record().is_some() {
            let next = state.step;
            let epoch = state.epochs;
            let saved =
                state
                    .cockpit
                    .checkpoint_at(next)
                    .and_then(|_| match state.cockpit.record_mut() {
                        Some(record) => Ok(record.mark_epoch(epoch, next)?),
                        None => Ok(()),
                    });
            if let Err(err) = saved {
                state.problem(format!(
                    "cannot save the Cockpit's state at epoch {epoch}: {}",
                    ErrorChain(&err)
                ));
            }
        }
        if let Some(mut monitor) = state.monitor.take() {
            let names = state
                .cockpit
                .parameter_names()
                .map(<[String]>::to_vec)
                .unwrap_or_default();
            // With a record, the run is read back from it (an overview bounded in size).
            let from_record = state.cockpit.record().map(|record| {
                RecordReader::open(record.path())
                    .and_then(|mut r| r.read_overview(DEFAULT_OVERVIEW_STEPS))
            });
            let findings = match &from_record {
                Some(Ok(output)) => monitor.check(output, &names),
                Some(Err(_)) | None => monitor.check(state.cockpit.output(), &names),
            };
            for finding in findings {
                state.problem(format!(
                    "diagnose [{}] from step {}: {} ({})",
                    finding.code, finding.first_step, finding.message, finding.evidence
                ));
            }
            state.monitor = Some(monitor);
        }
    }

    /// Writes the run to `record` as it goes ([`Cockpit::with_record`]).
    pub(crate) fn set_record(&mut self, record: RunRecord) {
        self.cockpit.set_record(record);
    }

    /// Resumes the Cockpit from `record`'s state at `step` (after `epochs` epochs) at the next
    /// optimizer step.
    pub(crate) fn resume_at(&mut self, record: RunRecord, step: usize, epochs: usize) {
        self.resume = Some((record, step, epochs));
    }
}

/// `factor·grads`, parameter by parameter (the model gives the parameters and their ranks).
pub(crate) fn scaled<M: Module>(
    model: &M,
    grads: &GradientsParams,
    factor: f64,
) -> GradientsParams {
    struct Scale<'a> {
        grads: &'a GradientsParams,
        scaled: GradientsParams,
        factor: f64,
    }
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.get::<D>(param.id) {
                self.scaled.register(param.id, grad.mul_scalar(self.factor));
            }
        }
    }
    let mut visitor = Scale {
        grads,
        scaled: GradientsParams::new(),
        factor,
    };
    model.visit(&mut visitor);
    visitor.scaled
}
