//! HessTrace.

use super::base::{Quantity, StepContext, read_scalars};
use crate::curvature::DiagonalKind;
use crate::{QuantityError, Schedule, Value};

/// The trace of the curvature, per parameter: `[Σ_j diag(p)_j for each p]` (Cockpit's
/// `HessTrace`), with the exact Hessian diagonal by default (`diag_h`) or the exact or
/// Monte-Carlo GGN diagonal.
///
/// # Cost
///
/// The step's curvature diagonal (shared with TICDiag / TICTrace); one host read of `P` numbers.
#[derive(Debug, Clone)]
pub struct HessTrace {
    schedule: Schedule,
    name: String,
    curvature: DiagonalKind,
}

impl HessTrace {
    /// HessTrace with `diag_h` on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            name: "HessTrace".into(),
            curvature: DiagonalKind::Hessian,
        }
    }

    /// Which curvature diagonal to sum.
    pub fn with_curvature(mut self, curvature: DiagonalKind) -> Self {
        self.curvature = curvature;
        self
    }

    /// The output key.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Quantity for HessTrace {
    fn name(&self) -> &str {
        &self.name
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn uses_curvature(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let diagonal = ctx.curvature()?.diagonal(ctx.params, self.curvature)?;
        let traces = read_scalars(diagonal.into_iter().map(|d| d.sum()).collect())?;
        Ok(Some((ctx.step, Value::List(traces))))
    }
}
