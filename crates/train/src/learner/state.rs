//! The adapter's shared state: the Cockpit, step counting, and turning a training step into
//! the Cockpit's [`StepInfo`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use cockpit_diagnose::Monitor;
use cockpit_quantities::curvature::CurvatureSource;
use cockpit_quantities::{Cockpit, CockpitError, OptimizerInfo, StepInfo, Value};

use crate::board::Board;
use crate::step::Captured;

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
        }
    }

    /// Records a warning once.
    pub(crate) fn problem(&mut self, message: String) {
        if self.reported.insert(message.clone()) {
            log::warn!("cockpit-train: {message}");
            self.problems.push(message);
        }
    }

    pub(crate) fn track<M: Module>(
        &mut self,
        model: &M,
        grads: &GradientsParams,
        lr: f64,
        devices: usize,
    ) {
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
        self.board.publish(iteration, values);
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
