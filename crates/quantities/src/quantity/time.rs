//! Time.

use std::time::{SystemTime, UNIX_EPOCH};

use super::base::{Enqueued, Quantity, QuantityType, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// Wall-clock time when the step was tracked, in seconds since the Unix epoch (Cockpit's
/// `Time`, `time.time()`).
///
/// # Cost
///
/// None.
#[derive(Debug, Clone)]
pub struct Time {
    schedule: Schedule,
}

impl Time {
    /// Time on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self { schedule }
    }
}

impl QuantityType for Time {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "Time",
        shape: ValueShape::Scalar,
        needs: Needs::NOTHING,
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for Time {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        self.value_now(ctx).map(Enqueued::Done)
    }
}

impl Time {
    /// The value at the context's step, computed at once (no read is enqueued).
    fn value_now(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        Ok(Some((ctx.step, Value::Float(now))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::two_samples;

    #[test]
    fn wall_clock_seconds_do_not_go_back() {
        let step = two_samples(&[ParamId::new()]);
        let mut q = Time::new(Schedule::every_step());
        let read = |q: &mut Time| match q.compute(&step.ctx()).unwrap() {
            Some((0, Value::Float(t))) => t,
            other => panic!("{other:?}"),
        };
        let (first, second) = (read(&mut q), read(&mut q));
        assert!(
            first.is_finite() && first > 0.0 && second >= first,
            "{first} {second}"
        );
    }
}
