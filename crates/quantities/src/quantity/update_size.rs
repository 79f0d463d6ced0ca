//! UpdateSize.

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, Reduction, ValueShape};
use super::{Carried, CarriedError};
use crate::{QuantityError, Schedule, Snapshot, Value};

/// Layer-wise size of the optimizer's update, `‖θ_{t+1}^p − θ_t^p‖₂` (Cockpit's `UpdateSize`).
///
/// A two-step quantity: θ_t is cached at a scheduled step t, the difference is taken at step
/// t+1 (after backward, before that step's update) and stored under t. The cache is dropped at
/// t+1, so the last scheduled step of a run has no value.
///
/// # Cost
///
/// Keeps one extra reference to θ_t for one step (at most `D` elements); one reduction per
/// parameter; `P` numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct UpdateSize {
    schedule: Schedule,
    start: Option<(usize, Snapshot)>,
    awaiting: Awaiting,
}

impl UpdateSize {
    /// UpdateSize on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            start: None,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for UpdateSize {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "UpdateSize",
        shape: ValueShape::PerParameter(Reduction::RootSumOfSquares),
        needs: Needs {
            next_step: true,
            ..Needs::NOTHING
        },
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for UpdateSize {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn carry(&self) -> Result<Carried, QuantityError> {
        match &self.start {
            Some((step, params)) => Carried::new()
                .with_numbers("start_step", vec![*step as f64])
                .with_snapshot("start", params),
            None => Ok(Carried::new()),
        }
    }

    fn restore(&mut self, carried: &Carried, params: &Snapshot) -> Result<(), CarriedError> {
        self.start = match carried.has("start") {
            true => Some((
                carried.number(self.name(), "start_step")? as usize,
                carried.snapshot(self.name(), "start", params)?,
            )),
            false => None,
        };
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step) || self.schedule.was_active_before(step)
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let (start, _) = self.awaiting.take()?;
        Ok(Some((start, Value::List(host.to_vec()))))
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let mut result = Enqueued::Done(None);
        if self.schedule.was_active_before(ctx.step)
            && let Some((start, before)) = self.start.take()
            && start + 1 == ctx.step
        {
            let sizes = ctx.params.sq_distances(&before)?.sqrt();
            result = self.awaiting.read(start, 0, vec![sizes]);
        }
        // Cockpit frees a start cache once `step + 1` can no longer end it.
        self.start = None;
        if self.schedule.is_active(ctx.step) {
            self.start = Some((ctx.step, ctx.params.clone()));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{TinyStep, close};

    /// ‖θ_{t+1} − θ_t‖ per parameter, stored under step t.
    #[test]
    fn update_stored_under_its_start() {
        let ids = [ParamId::new()];
        let at =
            |step, theta: &[f64]| TinyStep::new(step, &ids, &[theta], &[vec![vec![0.0, 0.0]]], 1.0);
        let mut q = UpdateSize::new(Schedule::steps([3]));
        assert!(q.should_compute(3) && q.should_compute(4) && !q.should_compute(5));
        assert_eq!(q.compute(&at(3, &[1.0, 1.0]).ctx()).unwrap(), None);
        let Some((3, Value::List(u))) = q.compute(&at(4, &[1.6, 0.2]).ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(u[0], 1.0, 1e-12), "{u:?}");
    }
}
