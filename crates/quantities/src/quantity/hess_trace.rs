//! HessTrace.

use serde::Deserialize;

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext, check_mc_samples};
use super::spec::{Needs, QuantitySpec, Reduction, ValueShape};
use crate::curvature::DiagonalKind;
use crate::{CockpitError, QuantityError, Schedule, Value};

/// The trace of the curvature, per parameter: `[Σ_j diag(p)_j for each p]` (Cockpit's
/// `HessTrace`), with the exact Hessian diagonal by default (`diag_h`) or the exact or
/// Monte-Carlo GGN diagonal.
///
/// Where the diagonal is an estimate (Hutchinson's, or the GGN plus an estimated residual),
/// the value is a [`Value::Estimate`]: the traces and their standard errors from the probes'
/// spread, written under `HessTrace_stderr` in the log beside the traces.
///
/// # Cost
///
/// The step's curvature diagonal (shared with TICDiag / TICTrace); `P` numbers (`2P` for an
/// estimate) in the step's one read.
#[derive(Debug, Clone)]
pub struct HessTrace {
    schedule: Schedule,
    curvature: DiagonalKind,
    mc_samples: usize,
    awaiting: Awaiting,
    /// Whether the read being awaited holds standard errors after the traces.
    estimated: bool,
}

impl HessTrace {
    /// HessTrace with `diag_h` on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            curvature: DiagonalKind::Hessian,
            mc_samples: 1,
            awaiting: Awaiting::default(),
            estimated: false,
        }
    }

    /// Which curvature diagonal to sum.
    pub fn with_curvature(mut self, curvature: DiagonalKind) -> Self {
        self.curvature = curvature;
        self
    }
}

/// HessTrace's settings (Cockpit's keyword arguments).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HessTraceSettings {
    /// Which diagonal: `"diag_h"` (default), `"diag_ggn_exact"` or `"diag_ggn_mc"`.
    pub curvature: DiagonalKind,
    /// Monte-Carlo samples of `diag_ggn_mc`; only 1 (Cockpit's default) is implemented.
    pub mc_samples: usize,
}

impl Default for HessTraceSettings {
    fn default() -> Self {
        Self {
            curvature: DiagonalKind::Hessian,
            mc_samples: 1,
        }
    }
}

impl QuantityType for HessTrace {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "HessTrace",
        shape: ValueShape::PerParameter(Reduction::Sum),
        needs: Needs {
            curvature: true,
            ..Needs::NOTHING
        },
    };
    type Settings = HessTraceSettings;

    fn with_settings(schedule: Schedule, settings: HessTraceSettings) -> Self {
        Self {
            mc_samples: settings.mc_samples,
            ..Self::new(schedule).with_curvature(settings.curvature)
        }
    }
}

impl Quantity for HessTrace {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_mc_samples(Self::SPEC.name, self.mc_samples)
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn uses_curvature(&self, step: usize) -> bool {
        self.should_compute(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let source = ctx.curvature()?;
        let diagonal = source.diagonal(ctx.params, self.curvature)?;
        let mut traces: Vec<_> = diagonal.into_iter().map(|d| d.sum()).collect();
        // An estimated diagonal brings its standard errors into the same read.
        let errors = source
            .diagonal_errors(ctx.params, self.curvature)
            .filter(|e| e.len() == traces.len());
        self.estimated = errors.is_some();
        traces.extend(errors.unwrap_or_default());
        Ok(self.awaiting.read(ctx.step, 0, traces))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, _) = self.awaiting.take()?;
        if std::mem::take(&mut self.estimated) {
            let (values, stderr) = host.split_at(host.len() / 2);
            return Ok(Some((
                step,
                Value::Estimate(crate::Estimate {
                    values: values.to_vec(),
                    stderr: stderr.to_vec(),
                }),
            )));
        }
        Ok(Some((step, Value::List(host.to_vec()))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{TinyStep, close};

    /// A quadratic with Hessian diag(2, 3 | −1): traces per parameter 5 and −1.
    #[test]
    fn per_parameter_traces() {
        let ids = [ParamId::new(), ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.0, 0.0], &[0.0]],
            &[vec![vec![0.0, 0.0], vec![0.0]]],
            1.0,
        )
        .with_curvature(vec![vec![2.0, 3.0], vec![-1.0]]);
        let mut q = HessTrace::new(Schedule::every_step());
        let Some((0, Value::List(t))) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(close(t[0], 5.0, 1e-12) && close(t[1], -1.0, 1e-12), "{t:?}");
        // Without a curvature source the step info lacks what HessTrace needs.
        let bare = TinyStep::new(
            0,
            &ids,
            &[&[0.0, 0.0], &[0.0]],
            &[vec![vec![0.0, 0.0], vec![0.0]]],
            1.0,
        );
        assert!(matches!(
            q.compute(&bare.ctx()),
            Err(QuantityError::MissingInfo(_))
        ));
    }
}
