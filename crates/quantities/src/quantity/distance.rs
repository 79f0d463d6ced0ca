//! Distance.

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, Reduction, ValueShape};
use super::{Carried, CarriedError};
use crate::{QuantityError, Schedule, Snapshot, Value};

/// Layer-wise L2 distance from the initial parameters, `‖θ_t^p − θ_0^p‖₂` (Cockpit's
/// `Distance`).
///
/// A two-step quantity whose start point is always step 0: θ_0 is cached at step 0 whatever the
/// schedule, so step 0 must be tracked.
///
/// # Cost
///
/// Keeps one extra reference to θ_0 (no copy while the parameters are replaced rather than
/// mutated, which is what burn's optimizers do; at most `D` elements); one reduction per
/// parameter; `P` numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct Distance {
    schedule: Schedule,
    init: Option<Snapshot>,
    awaiting: Awaiting,
}

impl Distance {
    /// Distance on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            init: None,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for Distance {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "Distance",
        shape: ValueShape::PerParameter(Reduction::RootSumOfSquares),
        needs: Needs::NOTHING,
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for Distance {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn carry(&self) -> Result<Carried, QuantityError> {
        match &self.init {
            Some(init) => Carried::new().with_snapshot("init", init),
            None => Ok(Carried::new()),
        }
    }

    fn restore(&mut self, carried: &Carried, params: &Snapshot) -> Result<(), CarriedError> {
        self.init = match carried.has("init") {
            true => Some(carried.snapshot(self.name(), "init", params)?),
            false => None,
        };
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        step == 0 || self.schedule.is_active(step)
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        self.awaiting.finish_list(host)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        if ctx.step == 0 {
            self.init = Some(ctx.params.clone());
        }
        if !self.schedule.is_active(ctx.step) {
            return Ok(Enqueued::Done(None));
        }
        let Some(init) = &self.init else {
            return Err(QuantityError::MissingReference(
                "Distance measures from the parameters of step 0, which was not tracked".into(),
            ));
        };
        let distances = ctx.params.sq_distances(init)?.sqrt();
        Ok(self.awaiting.read(ctx.step, 0, vec![distances]))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{TinyStep, close};

    /// Measured from step 0's parameters, per parameter: ‖(3, 4)‖ = 5 at step 2.
    #[test]
    fn distance_from_the_first_step() {
        let ids = [ParamId::new()];
        let at =
            |step, theta: &[f64]| TinyStep::new(step, &ids, &[theta], &[vec![vec![0.0, 0.0]]], 1.0);
        let mut q = Distance::new(Schedule::steps([2]));
        assert!(q.should_compute(0) && !q.should_compute(1));
        assert_eq!(q.compute(&at(0, &[1.0, 1.0]).ctx()).unwrap(), None);
        let Some((2, Value::List(d))) = q.compute(&at(2, &[4.0, 5.0]).ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(d[0], 5.0, 1e-12), "{d:?}");
        // Without step 0 there is nothing to measure from.
        let mut late = Distance::new(Schedule::steps([2]));
        assert!(late.compute(&at(2, &[4.0, 5.0]).ctx()).is_err());
    }
}
