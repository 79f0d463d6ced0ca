//! Time.

use std::time::{SystemTime, UNIX_EPOCH};

use super::base::{Quantity, StepContext};
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

impl Quantity for Time {
    fn name(&self) -> &str {
        "Time"
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        Ok(Some((ctx.step, Value::Float(now))))
    }
}
