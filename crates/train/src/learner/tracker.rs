//! [`Tracker`]: the handle through which an instrumented model reports its steps to the
//! adapter's state (the single-device path, or the data-parallel group's).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use burn::module::Module;
use burn::optim::GradientsParams;
use cockpit_quantities::QuantityKind;

use super::ddp;
use super::state::State;
use crate::step::Pending;

/// The adapter's state, shared by the [`CockpitLearner`](super::CockpitLearner) and every
/// model it instruments.
#[derive(Clone)]
pub(crate) struct Tracker {
    state: Arc<Mutex<State>>,
    /// Signalled when a data-parallel worker hands over its part of a step.
    arrived: Arc<Condvar>,
    kinds: Vec<QuantityKind>,
}

impl Tracker {
    pub(crate) fn new(state: State, kinds: Vec<QuantityKind>) -> Self {
        Self {
            state: Arc::new(Mutex::new(state)),
            arrived: Arc::new(Condvar::new()),
            kinds,
        }
    }

    /// The quantities tracked.
    pub(crate) fn kinds(&self) -> &[QuantityKind] {
        &self.kinds
    }

    /// The shared state (the epoch writer keeps a handle).
    pub(crate) fn state(&self) -> &Arc<Mutex<State>> {
        &self.state
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        State::lock(&self.state)
    }

    pub(crate) fn wants_per_sample(&self) -> bool {
        let mut state = self.lock();
        let step = state.next_step();
        state.cockpit().needs_per_sample(step)
    }

    pub(crate) fn wants_curvature(&self) -> bool {
        let mut state = self.lock();
        let step = state.next_step();
        state.cockpit().needs_curvature(step)
    }

    /// A training step's forward and backward pass ran.
    pub(crate) fn push_step(&self, pending: Pending) {
        self.lock().push(pending);
    }

    /// The optimizer is about to apply `grads` to `model`: track the step.
    pub(crate) fn track<M: Module>(&self, model: &M, grads: &GradientsParams, lr: f64) {
        let mut state = self.lock();
        if state.is_data_parallel() {
            drop(state);
            ddp::track(&self.state, &self.arrived, model, grads, lr);
        } else {
            state.track(model, grads, lr);
        }
    }
}
