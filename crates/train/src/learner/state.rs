//! The adapter's shared state: the Cockpit, step counting, and turning a training step into
//! the Cockpit's [`StepInfo`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use cockpit_diagnose::Monitor;
use cockpit_quantities::curvature::{CurvatureSource, MergedCurvature};
use cockpit_quantities::persample::{MergedPerSample, PerSampleSource};
use cockpit_quantities::{Cockpit, CockpitError, OptimizerInfo, Snapshot, StepInfo, Value};

use crate::board::Board;
use crate::step::Captured;

/// The warning when the model's step does not hand its loss over.
pub(crate) const NO_TRAIN_OUTPUT: &str = "the model's TrainStep::step does not build its output \
    with cockpit_train::train_output (or train_output_per_sample), so the Cockpit sees no loss; \
    nothing is tracked";

/// What one step's `TrainStep::step` left, until the optimizer step consumes it.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) capture: Captured,
    pub(crate) curvature: Option<Box<dyn CurvatureSource>>,
}

/// Everything the adapter keeps between training steps, behind the
/// [`CockpitLearner`](crate::CockpitLearner)'s lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) cockpit: Cockpit,
    pub(crate) optimizer: OptimizerInfo,
    /// Training iterations started (`TrainStep::step` calls), across epochs.
    pub(crate) iteration: usize,
    /// Optimizer steps taken: the next Cockpit step.
    pub(crate) step: usize,
    pub(crate) pending: Vec<Pending>,
    /// Where the metrics read each iteration's values.
    pub(crate) board: Arc<Board>,
    reported: BTreeSet<String>,
    pub(crate) problems: Vec<String>,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) epochs: usize,
    /// `cockpit diagnose`'s checks at epoch ends, when asked for.
    pub(crate) monitor: Option<Monitor>,
    /// The data-parallel group, under burn's DDP strategy.
    pub(crate) ddp: Option<super::ddp::Ddp>,
}

impl State {
    /// Locks the shared state. A panic while holding the lock leaves consistent data (every
    /// update is a single assignment), so a poisoned lock is still usable.
    pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
        state.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn new(cockpit: Cockpit, optimizer: OptimizerInfo) -> Self {
        Self {
            cockpit,
            optimizer,
            iteration: 0,
            step: 0,
            pending: Vec::new(),
            board: Arc::new(Board::default()),
            reported: BTreeSet::new(),
            problems: Vec::new(),
            dir: None,
            epochs: 0,
            monitor: None,
            ddp: None,
        }
    }

    /// Records a warning once.
    pub(crate) fn problem(&mut self, message: String) {
        if self.reported.insert(message.clone()) {
            log::warn!("cockpit-train: {message}");
            self.problems.push(message);
        }
    }

    pub(crate) fn track<M: Module>(&mut self, model: &M, grads: &GradientsParams, lr: f64) {
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
        self.board.publish(iteration, values);
    }

    fn step_info(
        &mut self,
        step: usize,
        pending: Vec<Pending>,
        lr: f64,
        device: Device,
    ) -> Option<StepInfo> {
        let optimizer = with_lr(&self.optimizer, lr);
        let mut losses = Vec::new();
        for p in &pending {
            if !p.capture.seen {
                self.problem(NO_TRAIN_OUTPUT.into());
                return None;
            }
            if let Some(loss) = &p.capture.loss {
                losses.push(loss.clone());
            }
        }
        if pending.is_empty() {
            self.problem(format!(
                "step {step}: optimizer step without a training step; not tracked"
            ));
            return None;
        }
        let loss = Tensor::cat(losses, 0).mean();
        if pending.len() > 1 {
            return Some(self.accumulated_info(step, pending, loss, lr, device));
        }
        let mut info = StepInfo::new(loss).with_optimizer(optimizer);
        let Some(Pending { capture, curvature }) = pending.into_iter().last() else {
            return Some(info);
        };
        if let Some(losses) = capture.losses {
            info = info.with_individual_losses(losses);
        }
        match capture.factors {
            Some(Ok(factors)) => {
                info = info.with_batch_size(PerSampleSource::batch_size(&factors));
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

    /// The info of an optimizer step that applies the sum of `k` micro-batches' mean gradients
    /// (accumulated, or one per device): the Cockpit sees one step on their union, whose mean
    /// gradient is that sum over `k` when the micro-batches have one size, taken by plain SGD
    /// with learning rate `k·lr`. Per-sample statistics are merged from the micro-batches'
    /// ([`MergedPerSample`], on the parameters' `device`), curvature likewise
    /// ([`MergedCurvature`]); micro-batches of different sizes get neither (a warning says
    /// so).
    fn accumulated_info(
        &mut self,
        step: usize,
        pending: Vec<Pending>,
        loss: Tensor<1>,
        lr: f64,
        device: Device,
    ) -> StepInfo {
        let k = pending.len();
        let optimizer = on_union(&self.optimizer, lr, k);
        let mut info = StepInfo::new(loss).with_optimizer(optimizer);
        let sizes: Vec<Option<usize>> = pending
            .iter()
            .map(|p| match (&p.capture.factors, &p.capture.losses) {
                (Some(Ok(factors)), _) => Some(PerSampleSource::batch_size(factors)),
                (_, Some(losses)) => Some(losses.dims()[0]),
                _ => None,
            })
            .collect();
        let known: Option<Vec<usize>> = sizes.iter().copied().collect();
        if let Some(sizes) = &known
            && sizes.iter().any(|b| *b != sizes[0])
        {
            self.problem(format!(
                "step {step}: gradient accumulation over micro-batches of different sizes \
                 {sizes:?}: per-sample and curvature quantities are refused on this step (the \
                 summed gradient is not the accumulated batch's mean gradient times k)"
            ));
            return info;
        }
        let mut losses = Vec::new();
        let mut factors: Vec<Arc<dyn PerSampleSource>> = Vec::new();
        let mut curvature: Vec<(usize, Box<dyn CurvatureSource>)> = Vec::new();
        let (mut missing_factors, mut missing_curvature) = (false, false);
        for (p, size) in pending.into_iter().zip(sizes) {
            if let Some(l) = p.capture.losses {
                losses.push(l);
            }
            match p.capture.factors {
                Some(Ok(f)) => factors.push(Arc::new(f)),
                Some(Err(err)) => {
                    self.problem(format!("per-sample gradients unavailable: {err}"));
                    missing_factors = true;
                }
                None => missing_factors = true,
            }
            match p.curvature {
                Some(c) => curvature.push((size.unwrap_or(1), c)),
                None => missing_curvature = true,
            }
        }
        if losses.len() == k {
            info = info.with_individual_losses(Tensor::cat(losses, 0));
        }
        if !missing_factors {
            match MergedPerSample::new(factors) {
                Ok(merged) => {
                    let merged = merged.on_device(device);
                    info = info
                        .with_batch_size(merged.batch_size())
                        .with_per_sample(merged);
                }
                Err(err) => self.problem(format!("per-sample gradients unavailable: {err}")),
            }
        }
        if !missing_curvature {
            match MergedCurvature::new(curvature) {
                Ok(merged) => info = info.with_curvature(merged),
                Err(err) => self.problem(format!("curvature unavailable: {err}")),
            }
        }
        info
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

/// The step burn takes with `lr` on the sum of `k` mean gradients, seen on the union of their
/// batches (mean gradient: the sum over `k`): for plain SGD, learning rate `k·lr`.
pub(crate) fn on_union(optimizer: &OptimizerInfo, lr: f64, k: usize) -> OptimizerInfo {
    match with_lr(optimizer, lr) {
        OptimizerInfo::Sgd {
            lr,
            momentum,
            dampening,
            weight_decay,
            nesterov,
        } => OptimizerInfo::Sgd {
            lr: lr * k as f64,
            momentum,
            dampening,
            weight_decay,
            nesterov,
        },
        other => other,
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
