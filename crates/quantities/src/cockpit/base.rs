//! The [`Cockpit`]: runs each quantity on its schedule and collects the output.

use std::path::Path;

use burn::module::{Module, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Device;

use super::previous::PreviousGradients;
use super::report::StepReport;
use super::update_check::UpdateCheck;
use crate::log::JsonLinesWriter;
use crate::persample::reduce::{Depth, depth_of};
use crate::persample::{Direction, Elements, PerSampleNeeds, PerSampleStats, Request, Statistic};
use crate::quantity::base_missing_per_sample as missing_per_sample;
use crate::quantity::{Enqueued, Quantity, StepContext};
use crate::readback::{PendingRead, ReadCount, Readable};
use crate::sink::{Origin, Record, Sink};
use crate::{
    CockpitError, OptimizerInfo, Output, QuantityError, Schedule, Snapshot, StepInfo, Value,
};
use cockpit_persample::PerSampleError;

/// Cockpit's once-per-epoch `log(...)` entry: losses, accuracies and the learning rate that
/// feed the dashboard's hyperparameter and performance rows. Unset fields are not written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpochLog {
    /// Number of epochs completed.
    pub epoch_count: usize,
    /// Training loss.
    pub train_loss: Option<f64>,
    /// Validation loss.
    pub valid_loss: Option<f64>,
    /// Test loss.
    pub test_loss: Option<f64>,
    /// Training accuracy in [0, 1].
    pub train_accuracy: Option<f64>,
    /// Validation accuracy in [0, 1].
    pub valid_accuracy: Option<f64>,
    /// Test accuracy in [0, 1].
    pub test_accuracy: Option<f64>,
    /// Learning rate.
    pub learning_rate: Option<f64>,
}

/// The warnings [`Cockpit::warnings`] keeps (the oldest half goes when they are reached).
pub const MAX_WARNINGS: usize = 10_000;

#[derive(Debug)]
pub(super) struct ParamSet {
    pub(super) first_step: usize,
    pub(super) ids: Vec<ParamId>,
    pub(super) names: Vec<String>,
    /// The parameters' shapes, in the order of `names`.
    pub(super) shapes: Vec<Vec<usize>>,
}

/// Watches a training run: call [`Cockpit::track`] once per step, after `backward` and before
/// the optimizer step.
///
/// ```no_run
/// # use burn::{module::Module, optim::GradientsParams, tensor::Tensor};
/// # use cockpit_quantities::{Cockpit, Configuration, QuantityKind, Schedule, StepInfo, OptimizerInfo};
/// # fn demo<M: Module>(model: &M, grads: &GradientsParams, loss: Tensor<1>) -> Result<(), Box<dyn std::error::Error>> {
/// let mut cockpit = Cockpit::from_kinds(
///     [QuantityKind::Loss, QuantityKind::GradNorm, QuantityKind::Distance, QuantityKind::UpdateSize],
///     &Schedule::every_step(),
/// )?;
/// for step in 0..10 {
///     // forward, loss, backward, grads = GradientsParams::from_grads(...)
///     cockpit.track(step, model, grads, StepInfo::new(loss.clone()).with_optimizer(OptimizerInfo::sgd(0.1)))?;
///     // optimizer step
/// }
/// cockpit.write("cockpit_log.json")?;
/// # Ok(()) }
/// ```
pub struct Cockpit {
    pub(super) quantities: Vec<Box<dyn Quantity>>,
    pub(super) output: Output,
    pub(super) param_set: Option<ParamSet>,
    pub(super) last_step: Option<usize>,
    /// Where each call's values go besides `output` ([`Cockpit::with_sink`]).
    sinks: Vec<Box<dyn Sink>>,
    warnings: Vec<String>,
    /// The per-sample and curvature sources' notes already turned into warnings (each is
    /// given once).
    notes_seen: Vec<String>,
    latest: Output,
    /// The reads of the latest `track` call.
    reads: ReadCount,
    /// The reductions of the latest `track` or `step` call.
    pub(super) depth: Depth,
    /// The mean gradients of the last tracked step (one per device), kept while a quantity
    /// asks for [`Statistic::Dot`]`(`[`Direction::PreviousGradient`]`)` at the next one.
    pub(super) previous_grads: PreviousGradients,
    /// The optimizer of steps whose info names none.
    pub(super) optimizer: Option<OptimizerInfo>,
    /// Whether warnings and failures are printed to stderr (each distinct message once).
    console: bool,
    /// The messages already printed to stderr, without their step.
    printed: std::collections::HashSet<String>,
    /// How [`Cockpit::step`] builds a step's sources.
    pub(super) step_options: super::StepOptions,
    /// The piecewise-linear verdicts of the sources [`Cockpit::step`] builds (the model is
    /// checked once, at its first tracked step).
    pub(super) linearity: crate::curvature::LinearityVerdicts,
    /// Whether the parameters move by the plain SGD step the optimizer info announces.
    pub(super) update_check: UpdateCheck,
    /// When a tracked step's numbers are read back ([`Cockpit::with_read_timing`]).
    read_timing: ReadTiming,
    /// A tracked step whose numbers are still on their way (a deferred read).
    pending: Option<(Pending, PendingRead)>,
    /// The run's record ([`Cockpit::with_record`]): every call's values go there, and
    /// `output` then keeps no history.
    pub(super) record: Option<crate::record::RunRecord>,
}

/// When a tracked step's numbers (every quantity's, in its one batched read) come back to the
/// host ([`Cockpit::with_read_timing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadTiming {
    /// Deferred on a graphics card (CUDA, wgpu on a physical GPU), at once elsewhere (CPU
    /// backends, and software rasterizers such as lavapipe, where the device is the host's
    /// own cores and nothing overlaps).
    #[default]
    Auto,
    /// At the end of [`Cockpit::track`]: the host waits for the device to run the step's
    /// quantities, and the step's values are in [`Cockpit::output`] when `track` returns.
    Now,
    /// Started at the end of [`Cockpit::track`] and taken at the next call (or at
    /// [`Cockpit::flush`]): the host goes on launching the next step's forward and backward
    /// pass while the device copies, so the tracked step does not wait on the device. The
    /// values are filed under their own step all the same, one call later (the report of that
    /// call carries the earlier step's as [`StepReport::earlier`]).
    Deferred,
}

/// A quantity's value and the step it is stored under, `None` where there is nothing to
/// store, or why it failed.
type Finished = Result<Option<(usize, Value)>, QuantityError>;

/// What a tracked step leaves for its read to complete: the values computed at once and the
/// quantities whose numbers are on their way.
#[derive(Debug)]
struct Pending {
    step: usize,
    /// The values computed at once (or the failures), by the quantity's index.
    results: Vec<(usize, Finished)>,
    indices: Vec<usize>,
    counts: Vec<usize>,
    checked: usize,
    computed: Output,
    /// The loss, where a quantity read it already.
    loss: Option<f64>,
    curvature_notes: Vec<String>,
    /// The step's mean gradient (device handles), kept for the next step's projections
    /// where a quantity asks for them.
    grads: Snapshot,
}

impl std::fmt::Debug for Cockpit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cockpit")
            .field("quantities", &self.quantity_names())
            .field("last_step", &self.last_step)
            .finish_non_exhaustive()
    }
}

/// A deferred step's values are filed when the Cockpit is dropped (into its sinks: the
/// stream, TensorBoard); a sink's error then is a warning.
impl Drop for Cockpit {
    fn drop(&mut self) {
        if self.pending.is_some() {
            self.settle();
        }
    }
}

impl Cockpit {
    /// A Cockpit running the given quantities.
    ///
    /// # Errors
    ///
    /// [`CockpitError::DuplicateQuantity`] if two quantities write to the same key,
    /// [`CockpitError::InvalidSettings`] if a quantity's settings cannot work.
    pub fn new(quantities: Vec<Box<dyn Quantity>>) -> Result<Self, CockpitError> {
        let mut cockpit = Self {
            quantities: Vec::new(),
            output: Output::new(),
            param_set: None,
            last_step: None,
            sinks: Vec::new(),
            warnings: Vec::new(),
            notes_seen: Vec::new(),
            latest: Output::new(),
            previous_grads: PreviousGradients::default(),
            reads: ReadCount::default(),
            depth: Depth::default(),
            optimizer: None,
            console: true,
            printed: std::collections::HashSet::new(),
            step_options: super::StepOptions::default(),
            linearity: crate::curvature::LinearityVerdicts::default(),
            update_check: UpdateCheck::default(),
            read_timing: ReadTiming::default(),
            pending: None,
            record: None,
        };
        for quantity in quantities {
            cockpit.add(quantity)?;
        }
        Ok(cockpit)
    }

    /// A Cockpit with the given quantities by kind, all on `schedule`.
    ///
    /// # Errors
    ///
    /// [`CockpitError::DuplicateQuantity`] if a kind is given twice.
    pub fn from_kinds(
        kinds: impl IntoIterator<Item = crate::QuantityKind>,
        schedule: &Schedule,
    ) -> Result<Self, CockpitError> {
        Self::new(
            kinds
                .into_iter()
                .map(|kind| kind.build(schedule.clone()))
                .collect(),
        )
    }

    /// Counts every histogram quantity's elements with `engine` (host or device; by default
    /// each quantity's own setting, [`HistogramEngine::Auto`] unless configured).
    ///
    /// [`HistogramEngine::Auto`]: crate::histogram::HistogramEngine::Auto
    pub fn with_histogram_engine(mut self, engine: crate::histogram::HistogramEngine) -> Self {
        self.set_histogram_engine(engine);
        self
    }

    /// [`Cockpit::with_histogram_engine`] on a Cockpit in use (from the next tracked step).
    pub fn set_histogram_engine(&mut self, engine: crate::histogram::HistogramEngine) {
        for quantity in &mut self.quantities {
            if let Some(bins) = quantity.bins_elements() {
                bins.use_histogram_engine(engine);
            }
        }
    }

    /// Also streams every tracked step as one JSON line to `path` (created or truncated now):
    /// the sink [`JsonLinesWriter`].
    ///
    /// # Errors
    ///
    /// [`CockpitError::Log`] if the file cannot be created.
    pub fn with_stream(self, path: impl AsRef<Path>) -> Result<Self, CockpitError> {
        Ok(self.with_sink(JsonLinesWriter::create(path)?))
    }

    /// Also feeds `sink` each tracked step's values and each epoch entry, as they come
    /// ([`Sink`]): TensorBoard (`cockpit_tensorboard::TensorBoardWriter`), a stream, a
    /// user's own. Keep a handle with `Arc<Mutex<S>>`, itself a sink.
    pub fn with_sink(mut self, sink: impl Sink + 'static) -> Self {
        self.add_sink(sink);
        self
    }

    /// [`Cockpit::with_sink`] on a Cockpit in use (from the next call on).
    pub fn add_sink(&mut self, sink: impl Sink + 'static) {
        self.sinks.push(Box::new(sink));
    }

    /// Feeds every sink `values` (nothing for an empty record); every sink is fed even if one
    /// fails, and the first error is returned.
    fn feed(&mut self, origin: Origin, step: usize, values: &Output) -> Result<(), CockpitError> {
        if values.is_empty() {
            return Ok(());
        }
        let parameter_names = self.param_set.as_ref().map_or(&[][..], |p| &p.names[..]);
        let record = Record {
            origin,
            step,
            values,
            parameter_names,
            run: &self.output,
            examples: self.quantities.iter().find_map(|q| q.example_record()),
        };
        let mut first: Option<CockpitError> = None;
        for sink in &mut self.sinks {
            if let Err(err) = sink.write(&record) {
                first.get_or_insert(err.into());
            }
        }
        if let Some(run) = &mut self.record
            && let Err(err) = run.write_values(values, parameter_names)
        {
            first.get_or_insert(err.into());
        }
        first.map_or(Ok(()), Err)
    }

    /// Adds a quantity.
    ///
    /// # Errors
    ///
    /// [`CockpitError::DuplicateQuantity`] if its key is taken, [`CockpitError::InvalidSettings`]
    /// if its settings cannot work ([`Quantity::check`]).
    pub fn add(&mut self, quantity: Box<dyn Quantity>) -> Result<(), CockpitError> {
        quantity.check()?;
        if self.quantities.iter().any(|q| q.name() == quantity.name()) {
            return Err(CockpitError::DuplicateQuantity(quantity.name().to_string()));
        }
        self.quantities.push(quantity);
        Ok(())
    }

    /// The optimizer that takes the steps, for steps whose [`StepInfo`] names none (build it
    /// from burn's config: [`OptimizerInfo::from_sgd`], [`OptimizerInfo::from_adam`], …).
    pub fn with_optimizer(mut self, optimizer: OptimizerInfo) -> Self {
        self.optimizer = Some(optimizer);
        self
    }

    /// The learning rate of the next steps (a scheduler's value), for the optimizer given to
    /// [`Cockpit::with_optimizer`].
    pub fn set_learning_rate(&mut self, lr: f64) {
        if let Some(optimizer) = &mut self.optimizer {
            *optimizer = optimizer.with_lr(lr);
        }
    }

    /// Whether warnings and failed quantities are printed to stderr, each distinct message
    /// once per run (on by default; they are always in [`Cockpit::warnings`], `log::warn!`
    /// and the failed step's [`StepReport`]). Turn it off under a terminal UI.
    pub fn with_console(mut self, print: bool) -> Self {
        self.console = print;
        self
    }

    /// The step number [`Cockpit::step`] uses next: one above the last tracked step, 0 at
    /// first (steps continue across epochs).
    pub fn next_step(&self) -> usize {
        self.last_step.map_or(0, |last| last + 1)
    }

    /// The output keys of the quantities, in the order they run.
    pub fn quantity_names(&self) -> Vec<&str> {
        self.quantities.iter().map(|q| q.name()).collect()
    }

    /// Whether any quantity has work at `step` (so a loop may skip building the step info).
    pub fn is_tracking(&self, step: usize) -> bool {
        self.quantities.iter().any(|q| q.should_compute(step))
    }

    /// Tracks one step: call it after `backward` and before the optimizer step, with the
    /// model θ_t, the gradients of the mean mini-batch loss and the step's info.
    ///
    /// Every quantity whose schedule asks for this step runs; one that fails does not stop the
    /// others and does not make `track` fail: the failures are in the returned
    /// [`StepReport`] (and printed to stderr once per quantity and reason, see
    /// [`Cockpit::with_console`]). A `?` on `track` stops training only for errors of the
    /// call itself. Without an optimizer in `info`, the one of [`Cockpit::with_optimizer`]
    /// is used.
    ///
    /// A NaN or infinite loss (or parameter) is not an error: the values become NaN and a
    /// warning is recorded ([`Cockpit::warnings`]), as Cockpit does.
    ///
    /// # Errors
    ///
    /// - [`CockpitError::StepNotIncreasing`] if `step` is not above the last tracked step;
    /// - [`CockpitError::EmptyModel`] if no parameter requires a gradient;
    /// - [`CockpitError::ParametersChanged`] if the trainable parameters differ from those at
    ///   the first tracked step;
    /// - [`CockpitError::MissingGradient`] if a parameter has no gradient;
    /// - [`CockpitError::BatchMismatch`] if the per-sample losses, the per-sample gradients
    ///   and the batch size disagree (or are empty); nothing is computed for the step;
    /// - [`CockpitError::QuantitiesFailed`] if the gradients could not be read at all;
    /// - [`CockpitError::Sink`] if a [`Sink`] cannot write the values (every other sink is still
    ///   fed, and the values are kept).
    ///
    /// In every case the values tracked so far stay in [`Cockpit::output`].
    ///
    /// # Cost
    ///
    /// The device→host reads of the call are counted ([`Cockpit::reads`]), and its
    /// reductions' serial depth measured ([`Cockpit::depth`]).
    pub fn track<M: Module>(
        &mut self,
        step: usize,
        model: &M,
        grads: &GradientsParams,
        mut info: StepInfo,
    ) -> Result<StepReport, CockpitError> {
        if info.optimizer.is_none() {
            info.optimizer = self.optimizer.clone();
        }
        let before = crate::readback::reads_on_this_thread();
        self.latest = Output::new();
        // A deferred read of the step before lands first, under its own step: the quantities'
        // state and the update check then stand as they would have without the deferral.
        let ((earlier, result), depth) = depth_of(|| {
            let earlier = self.complete_pending();
            (earlier, self.track_step(step, model, grads, info))
        });
        self.reads = crate::readback::reads_on_this_thread() - before;
        self.depth = depth;
        let earlier = earlier?;
        let mut report = result?;
        for line in report.failure_lines() {
            self.print(format!("step {step}: {line}"));
        }
        report.earlier = earlier.map(Box::new);
        Ok(report)
    }

    /// Takes the numbers of a step whose read was deferred ([`ReadTiming::Deferred`]) and
    /// files its values (into [`Cockpit::output`], [`Cockpit::latest`] and every sink).
    /// [`Cockpit::track`] does this itself at the next step; call it after the last one
    /// ([`Cockpit::write`] and [`Cockpit::take_output`] do, and so does dropping the Cockpit).
    ///
    /// Returns the report of the step it completed, `None` where no read was pending.
    ///
    /// # Errors
    ///
    /// [`CockpitError::Sink`] if a sink cannot write the values (they are kept).
    pub fn flush(&mut self) -> Result<Option<StepReport>, CockpitError> {
        self.complete_pending()
    }

    /// When this Cockpit reads a tracked step's numbers ([`ReadTiming`]; default
    /// [`ReadTiming::Auto`]: deferred on a graphics card, at once elsewhere).
    ///
    /// # Cost
    ///
    /// Deferred: one read per tracked step as before, and no wait for the device inside the
    /// step where the copy has landed by the next call; the step's tensors stay on the device
    /// until then (the few numbers of the batched read).
    pub fn with_read_timing(mut self, timing: ReadTiming) -> Self {
        self.read_timing = timing;
        self
    }

    /// The step's read timing ([`Cockpit::with_read_timing`]).
    pub fn read_timing(&self) -> ReadTiming {
        self.read_timing
    }

    /// Whether a tracked step's read on `device` is deferred.
    fn defers(&self, device: &Device) -> bool {
        match self.read_timing {
            ReadTiming::Now => false,
            ReadTiming::Deferred => true,
            ReadTiming::Auto => crate::device::is_a_card(device),
        }
    }

    /// The report of a deferred step, its read completed (the host waits here only if the
    /// copy has not landed) and its failures printed as `track` prints a step's; `None` where
    /// no read was pending.
    fn complete_pending(&mut self) -> Result<Option<StepReport>, CockpitError> {
        let Some((pending, read)) = self.pending.take() else {
            return Ok(None);
        };
        let hosts = read.finish();
        let report = self.complete(pending, hosts)?;
        for line in report.failure_lines() {
            self.print(format!("step {}: {line}", report.step));
        }
        Ok(Some(report))
    }

    /// The device→host reads the latest [`Cockpit::track`] call made and the values they
    /// brought back (each read is a synchronisation on a GPU backend). Counted on the calling
    /// thread by the read ledger ([`readback`](crate::readback)); zero for an untracked step.
    pub fn reads(&self) -> ReadCount {
        self.reads
    }

    /// The axis reductions the latest [`Cockpit::track`] or [`Cockpit::step`] call issued on a
    /// CubeCL device and the most values one unit of them walks: the work of the call that
    /// does not spread over a GPU ([`depth_of`](crate::persample::reduce::depth_of); at most
    /// [`STAGE`](crate::persample::reduce::STAGE) values where the reductions are staged, the
    /// default on every CubeCL device). Zero on CPU backends and for an untracked step.
    pub fn depth(&self) -> Depth {
        self.depth
    }

    fn track_step<M: Module>(
        &mut self,
        step: usize,
        model: &M,
        grads: &GradientsParams,
        info: StepInfo,
    ) -> Result<StepReport, CockpitError> {
        if let Some(previous) = self.last_step
            && step <= previous
        {
            return Err(CockpitError::StepNotIncreasing { previous, step });
        }
        if self.is_tracking(step) {
            info.check_batch()
                .map_err(|reason| CockpitError::BatchMismatch { step, reason })?;
        }
        let params = Snapshot::of_params(model);
        self.check_param_set(step, &params)?;
        self.update_check.end(step, &params);
        self.last_step = Some(step);
        if !self.is_tracking(step) {
            return Ok(StepReport::untracked(step));
        }
        let grads = Snapshot::of_grads(model, grads).map_err(|err| match err {
            PerSampleError::MissingGradient { name } => CockpitError::MissingGradient { name },
            other => CockpitError::QuantitiesFailed {
                step,
                failures: vec![("gradients".to_string(), other.into())],
            },
        })?;
        let mut per_sample = self.reduce_per_sample(step, &params, &grads, &info);
        if let Ok(Some(stats)) = &mut per_sample {
            self.warn_notes(step, std::mem::take(&mut stats.notes));
        }
        self.previous_grads.drop_before(step);
        let ctx = StepContext {
            step,
            params: &params,
            grads: &grads,
            info: &info,
            loss: std::cell::OnceCell::new(),
            grad_sq_norms: std::cell::OnceCell::new(),
            grad_sq_norm: std::cell::OnceCell::new(),
            sample_sq_norms: std::cell::OnceCell::new(),
            sample_grad_dots: std::cell::OnceCell::new(),
            per_sample: match &per_sample {
                Ok(stats) => Ok(stats.as_ref()),
                Err(err) => Err(err),
            },
            sgd_contradicted: self.update_check.contradicted_at(),
        };
        self.update_check
            .start(step, info.optimizer(), &params, &grads, || {
                ctx.grad_sq_norm()
            });
        let mut computed = Output::new();
        if self.output.parameter_names().is_empty() {
            // The names go with the first step's values: into the log, the stream and every
            // reader after them.
            computed.set_parameter_names(params.names());
        }
        // First halves: values now, or device numbers for the step's one batched read.
        let mut results = Vec::new();
        let mut reads = Vec::new();
        for (index, quantity) in self.quantities.iter_mut().enumerate() {
            if !quantity.should_compute(step) {
                continue;
            }
            match quantity.enqueue(&ctx) {
                Ok(Enqueued::Done(value)) => results.push((index, Ok(value))),
                Ok(Enqueued::Read(tensor)) => reads.push((index, tensor)),
                Err(err) => results.push((index, Err(err))),
            }
        }
        // The step's one read: the loss, the update check's numbers and every enqueued
        // quantity's numbers.
        let counts: Vec<usize> = reads.iter().map(|(_, parts)| parts.len()).collect();
        let (indices, tensors): (Vec<usize>, Vec<Vec<_>>) = reads.into_iter().unzip();
        let batch: Vec<Readable> = std::iter::once(Readable::from(info.loss().clone()))
            .chain(self.update_check.readables())
            .chain(tensors.into_iter().flatten())
            .collect();
        let checked = self.update_check.reading();
        let pending = Pending {
            step,
            results,
            indices,
            counts,
            checked,
            computed,
            loss: ctx.loss.get().copied(),
            // How the curvature diagonals were obtained, where one is an estimate.
            curvature_notes: info.curvature().map(|c| c.notes()).unwrap_or_default(),
            grads,
        };
        if self.defers(&params.device()) {
            self.pending = Some((pending, crate::readback::start_read(batch)));
            return Ok(StepReport::deferred(step));
        }
        let hosts = crate::readback::read_together(batch);
        self.complete(pending, hosts)
    }

    /// The second half of a tracked step: its numbers back from the device (now, or from a
    /// deferred read), each quantity's value finished, filed and fed to the sinks.
    fn complete(
        &mut self,
        pending: Pending,
        hosts: Result<Vec<Vec<f64>>, PerSampleError>,
    ) -> Result<StepReport, CockpitError> {
        let Pending {
            step,
            mut results,
            indices,
            counts,
            checked,
            mut computed,
            loss,
            curvature_notes,
            grads,
        } = pending;
        let mut failures = Vec::new();
        let mut warnings = Vec::new();
        let mut verdict = Vec::new();
        match hosts {
            Ok(hosts) => {
                let mut hosts = hosts.into_iter();
                let read = hosts.next().and_then(|l| l.first().copied());
                let loss = loss.or(read).unwrap_or(f64::NAN);
                if !loss.is_finite() {
                    warnings.push(format!("step {step}: the loss is {loss}"));
                }
                let numbers: Vec<f64> = hosts.by_ref().take(checked).flatten().collect();
                verdict = self.update_check.verdict(Some(&numbers));
                for (index, count) in indices.into_iter().zip(counts) {
                    let host: Vec<f64> = hosts.by_ref().take(count).flatten().collect();
                    results.push((index, self.quantities[index].finish(&host)));
                }
            }
            Err(err) => {
                warnings.push(format!(
                    "step {step}: could not read the step's numbers ({}); the loss is NaN",
                    cockpit_persample::ErrorChain(&err)
                ));
                let err = QuantityError::from(err);
                results.extend(indices.into_iter().map(|index| (index, Err(err.clone()))));
                self.update_check.verdict(None);
            }
        }
        results.sort_by_key(|(index, _)| *index);
        warnings.extend(verdict);
        for (index, result) in results {
            let quantity = &mut self.quantities[index];
            warnings.extend(quantity.take_warnings());
            // A value that took the announced plain SGD step, at or after a step where the
            // parameters were found to move otherwise, is refused.
            let contradicted = self.update_check.contradicted_at();
            let result = match (result, contradicted) {
                (Ok(Some((at, _))), Some(from))
                    if quantity.spec().needs.announced_sgd
                        && at >= from
                        && self.update_check.offered_at(at) =>
                {
                    Err(QuantityError::Unsupported(format!(
                        "{} of step {at} assumed the announced plain SGD step, which the \
                         parameters did not take (see the warning of step {from})",
                        quantity.name()
                    )))
                }
                (result, _) => result,
            };
            match result {
                Ok(Some((at, value))) => {
                    if !value.is_finite() {
                        warnings.push(format!(
                            "step {step}: {} (stored under step {at}) is not finite",
                            quantity.name()
                        ));
                    }
                    // A keyed variant's kind goes with its values, into every reader.
                    computed.set_kind(quantity.name(), quantity.spec().name);
                    computed.insert(at, quantity.name(), value);
                }
                Ok(None) => {}
                Err(err) => failures.push((quantity.name().to_string(), err)),
            }
        }
        for warning in warnings {
            self.warn(warning);
        }
        self.warn_notes(step, curvature_notes);
        // Whether the next step projects on this gradient is known once the quantities have
        // finished this step (Alpha's end point follows its start).
        if self
            .per_sample_needs(step + 1)
            .contains(Statistic::Dot(Direction::PreviousGradient))
        {
            self.previous_grads.keep(step, grads);
        }
        self.keep(&computed);
        self.latest.merge(computed.clone());
        self.feed(Origin::Tracked, step, &computed)?;
        Ok(StepReport::tracked(step, failures))
    }

    /// Whether a quantity needs per-sample gradients at `step`: start a
    /// [`Recorder`](crate::persample::Recorder) before that step's forward pass (or prepare an
    /// [`ExactPerSample`](crate::persample::ExactPerSample)) and hand the result to
    /// [`StepInfo::with_per_sample`].
    pub fn needs_per_sample(&self, step: usize) -> bool {
        self.quantities
            .iter()
            .any(|q| q.should_compute(step) && q.uses_per_sample(step))
    }

    /// Whether a quantity needs the curvature source at `step` (hand one to
    /// [`StepInfo::with_curvature`]).
    pub fn needs_curvature(&self, step: usize) -> bool {
        self.quantities
            .iter()
            .any(|q| q.should_compute(step) && q.uses_curvature(step))
    }

    /// The union of the per-sample statistics the quantities computed at `step` ask for.
    pub fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        self.quantities
            .iter()
            .filter(|q| q.should_compute(step))
            .fold(PerSampleNeeds::NONE, |acc, q| {
                acc.union(q.per_sample_needs(step))
            })
    }

    /// Keeps `grads`, a data-parallel worker's mean gradient of `step` on its own device, for
    /// its projections at `step + 1` ([`Cockpit::previous_gradient`]), beside the Cockpit's
    /// own: one cache for every path. Whether a quantity projects on it is known only once
    /// `step` is tracked, so a worker keeps it always; it is dropped when the Cockpit tracks
    /// a later step.
    pub fn keep_gradient(&mut self, step: usize, grads: Snapshot) {
        self.previous_grads.keep(step, grads);
    }

    /// The mean gradient of the step before `step` on `device`, where one is kept (by the
    /// Cockpit's own tracking, or a worker's [`Cockpit::keep_gradient`]): what
    /// [`Cockpit::per_sample_request`] takes as `previous`. A copy of the handles, not of the
    /// values.
    pub fn previous_gradient(&self, step: usize, device: &Device) -> Option<Snapshot> {
        self.previous_grads.before(step, device).cloned()
    }

    /// The request for `step`'s per-sample statistics other than gradient elements, as
    /// [`Cockpit::track`] makes it: projections on the step's mean gradient `grads`, then on
    /// the `previous` step's when a quantity asks for it (pass the previous step's mean
    /// gradient when `step − 1` was tracked). A data-parallel worker reduces its shard with it
    /// before the statistics are joined
    /// ([`all_reduce_stats`](crate::persample::all_reduce_stats)).
    pub fn per_sample_request<'a>(
        &self,
        step: usize,
        grads: &'a Snapshot,
        previous: Option<&'a Snapshot>,
    ) -> Request<'a> {
        let needs = self.per_sample_needs(step).statistics;
        let (gradient, previous_gradient) = (
            Statistic::Dot(Direction::Gradient),
            Statistic::Dot(Direction::PreviousGradient),
        );
        // Every statistic as asked; the projections with their directions.
        let mut request =
            Request::new().with_all(needs.without(gradient).without(previous_gradient));
        if needs.contains(gradient) {
            request = request.project_on(Direction::Gradient, grads);
        }
        if let Some(previous) = previous.filter(|_| needs.contains(previous_gradient)) {
            request = request.project_on(Direction::PreviousGradient, previous);
        }
        request
    }

    /// Computes, in one pass over the per-sample gradients, the union of the statistics the
    /// step's quantities ask for, feeding gradient elements to the quantities that bin them.
    fn reduce_per_sample(
        &mut self,
        step: usize,
        params: &Snapshot,
        grads: &Snapshot,
        info: &StepInfo,
    ) -> Result<Option<PerSampleStats>, QuantityError> {
        let needs = self.per_sample_needs(step);
        if !needs.any() {
            return Ok(None);
        }
        let source = info.per_sample().ok_or_else(missing_per_sample)?.clone();
        let previous = self.previous_grads.before(step, &params.device());
        let mut request = self.per_sample_request(step, grads, previous);
        let entries = params.entries();
        let device = params.device();
        if needs.elements
            && self
                .quantities
                .iter_mut()
                .filter(|q| q.should_compute(step) && q.per_sample_needs(step).elements)
                .all(|q| {
                    q.bins_elements()
                        .is_some_and(|b| b.counts_elements_on(&device))
                })
        {
            // Every element is counted on the device: pieces as large as it binds, not sample
            // chunks sized for host buffers.
            request.chunk_elements = crate::histogram::device::PIECE_VALUES;
        }
        let quantities = &mut self.quantities;
        let mut sink = |index: usize, elements: Elements| -> Result<(), PerSampleError> {
            for quantity in quantities.iter_mut() {
                if !quantity.should_compute(step) || !quantity.per_sample_needs(step).elements {
                    continue;
                }
                if let Some(bins) = quantity.bins_elements() {
                    bins.accept_chunk(step, index, &entries[index], elements.clone())?;
                }
            }
            Ok(())
        };
        if needs.elements {
            request.elements = Some(&mut sink);
        }
        Ok(Some(source.reduce(params, request)?))
    }

    /// Cockpit's `log(...)`: stores the epoch's losses, accuracies and learning rate under
    /// `step` (once per epoch).
    ///
    /// # Errors
    ///
    /// [`CockpitError::Sink`] if a [`Sink`] cannot write the entry (every other sink is still
    /// fed, and the entry is kept).
    pub fn log(&mut self, step: usize, entry: &EpochLog) -> Result<(), CockpitError> {
        // A deferred step's values go first: the sinks see the calls in their order.
        self.flush()?;
        let mut values = Output::new();
        values.insert(step, "epoch_count", Value::Int(entry.epoch_count as i64));
        let optional = [
            ("train_loss", entry.train_loss),
            ("valid_loss", entry.valid_loss),
            ("test_loss", entry.test_loss),
            ("train_accuracy", entry.train_accuracy),
            ("valid_accuracy", entry.valid_accuracy),
            ("test_accuracy", entry.test_accuracy),
            ("learning_rate", entry.learning_rate),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                values.insert(step, key, Value::Float(value));
            }
        }
        self.keep(&values);
        self.feed(Origin::Epoch, step, &values)
    }

    /// Everything tracked so far: `output[step][name]`. With a record
    /// ([`Cockpit::with_record`]) nothing is kept here but the parameters' names: the history
    /// is in the record, read with [`RecordReader`](crate::record::RecordReader).
    ///
    /// With a deferred read ([`ReadTiming`]) the last tracked step's values arrive at the next
    /// [`Cockpit::track`] or [`Cockpit::flush`].
    pub fn output(&self) -> &Output {
        &self.output
    }

    /// The values the latest [`Cockpit::track`] call computed, under the steps they are stored
    /// at (a two-step quantity's value computed at step t belongs to t − 1). Empty when that
    /// step had no work. Metric adapters report these as the step's values.
    pub fn latest(&self) -> &Output {
        &self.latest
    }

    /// Takes the output (a deferred step's values first filed: [`Cockpit::flush`]), leaving
    /// an empty one.
    pub fn take_output(&mut self) -> Output {
        self.settle();
        std::mem::take(&mut self.output)
    }

    /// Completes a deferred read where one is pending; a sink's error becomes a warning (for
    /// the callers that cannot return it: taking the output, dropping the Cockpit).
    fn settle(&mut self) {
        if let Err(err) = self.flush() {
            self.warn(format!(
                "while filing the last step: {}",
                cockpit_persample::ErrorChain(&err)
            ));
        }
    }

    /// Writes the output in Cockpit's log format to `path` (exactly that path) and, where an
    /// [`Examples`](crate::quantity::Examples) quantity has recorded examples, its
    /// per-example table beside it ([`examples::table_path`](crate::examples::table_path):
    /// `run.json` → `run.examples.csv`). Both files are replaced atomically.
    ///
    /// A deferred step's values are filed first ([`Cockpit::flush`]).
    ///
    /// # Errors
    ///
    /// [`CockpitError::Log`] if a file cannot be written; the output and the record stay in
    /// memory. [`CockpitError::Sink`] as [`Cockpit::flush`].
    pub fn write(&mut self, path: impl AsRef<Path>) -> Result<(), CockpitError> {
        self.flush()?;
        if self.record.is_some() {
            return self.write_from_record(path.as_ref());
        }
        crate::sink::LogFile::new(path.as_ref()).write_run(&self.output, self.examples())?;
        Ok(())
    }

    /// The per-example record of the [`Examples`](crate::quantity::Examples) quantity, if the
    /// Cockpit runs one.
    pub fn examples(&self) -> Option<&crate::examples::ExampleRecord> {
        self.quantities.iter().find_map(|q| q.example_record())
    }

    /// Whether a quantity due at `step` keeps a per-example record (then
    /// [`Cockpit::step`] hands it the margins of a cross-entropy loss).
    pub(super) fn records_examples(&self, step: usize) -> bool {
        self.quantities
            .iter()
            .any(|q| q.should_compute(step) && q.example_record().is_some())
    }

    /// Warnings recorded so far, oldest first: non-finite losses and values, quantities'
    /// notices (a histogram range that swallows every value), and the per-sample sources'
    /// notes (each once: the exact fallback's cost, `PerSample::auto` falling back with its
    /// coverage report).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The dotted names of the tracked parameters, once a step has been tracked.
    pub fn parameter_names(&self) -> Option<&[String]> {
        self.param_set.as_ref().map(|p| p.names.as_slice())
    }

    fn warn(&mut self, message: String) {
        log::warn!("cockpit: {message}");
        self.print(message.clone());
        if self.warnings.len() >= MAX_WARNINGS {
            // A warning repeated every step of a long run must not grow memory: the oldest go.
            self.warnings.drain(..MAX_WARNINGS / 2);
        }
        self.warnings.push(message);
    }

    /// Prints `message` to stderr unless printing is off or the same message (without its
    /// `step N: ` prefix) was printed before. A closed stderr is ignored.
    pub(super) fn print(&mut self, message: String) {
        if !self.console {
            return;
        }
        let key = match message.split_once(": ") {
            Some((prefix, rest)) if prefix.starts_with("step ") => rest.to_string(),
            _ => message.clone(),
        };
        if self.printed.insert(key) {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr().lock(), "cockpit: {message}");
        }
    }

    /// The sources' notes as warnings of `step`, each distinct note once per run.
    fn warn_notes(&mut self, step: usize, notes: Vec<String>) {
        for note in notes {
            if !self.notes_seen.contains(&note) {
                self.warn(format!("step {step}: {note}"));
                self.notes_seen.push(note);
            }
        }
    }

    fn check_param_set(&mut self, step: usize, params: &Snapshot) -> Result<(), CockpitError> {
        if params.is_empty() {
            return Err(CockpitError::EmptyModel);
        }
        let Some(reference) = &self.param_set else {
            self.param_set = Some(ParamSet {
                first_step: step,
                ids: params.ids(),
                names: params.names(),
                shapes: params.entries().iter().map(|e| e.shape.clone()).collect(),
            });
            return Ok(());
        };
        if reference.ids == params.ids() {
            return Ok(());
        }
        let added: Vec<String> = params
            .entries()
            .iter()
            .filter(|e| !reference.ids.contains(&e.id))
            .map(|e| e.name.clone())
            .collect();
        let removed: Vec<String> = reference
            .ids
            .iter()
            .zip(&reference.names)
            .filter(|(id, _)| params.get(**id).is_none())
            .map(|(_, name)| name.clone())
            .collect();
        Err(CockpitError::ParametersChanged {
            first_step: reference.first_step,
            added: added.join(", "),
            removed: removed.join(", "),
        })
    }
}
