//! Bin adaptation for the gradient histograms (Cockpit's `GradAbsMax` / `ParamAbsMax`).

use burn::tensor::Tensor;

use super::base::StepContext;
use crate::snapshot::read_values;
use crate::{QuantityError, Schedule};

/// What a histogram axis adapts its range to, on its own schedule.
///
/// After the histogram of a scheduled step is taken, the range becomes
/// `±(1 + padding)·max(min_size/2, m)`, with `m` the largest absolute per-sample gradient
/// element (`GradAbsMax`) or parameter value (`ParamAbsMax`) of that step; the new range is used
/// from the next histogram on.
#[derive(Debug, Clone)]
pub enum BinAdaptation {
    /// Adapt to `max |g_{n,j}|` over every per-sample gradient element.
    GradAbsMax {
        /// When to adapt.
        schedule: Schedule,
        /// Relative padding.
        padding: f64,
        /// Smallest range width.
        min_size: f64,
    },
    /// Adapt to `max |θ_j|` over every parameter.
    ParamAbsMax {
        /// When to adapt.
        schedule: Schedule,
        /// Relative padding.
        padding: f64,
        /// Smallest range width.
        min_size: f64,
    },
}

impl BinAdaptation {
    /// `GradAbsMax(linear(1), padding, min_size=1e-6)`.
    pub fn grad_abs_max(padding: f64) -> Self {
        Self::GradAbsMax {
            schedule: Schedule::every_step(),
            padding,
            min_size: 1e-6,
        }
    }

    /// `ParamAbsMax(linear(1), padding, min_size=1e-6)`.
    pub fn param_abs_max(padding: f64) -> Self {
        Self::ParamAbsMax {
            schedule: Schedule::every_step(),
            padding,
            min_size: 1e-6,
        }
    }

    fn schedule(&self) -> &Schedule {
        match self {
            Self::GradAbsMax { schedule, .. } | Self::ParamAbsMax { schedule, .. } => schedule,
        }
    }

    /// Whether this adaptation needs the per-sample gradients' absolute maxima at `step`.
    pub(crate) fn needs_grad_abs_max(&self, step: usize) -> bool {
        matches!(self, Self::GradAbsMax { .. }) && self.schedule().is_active(step)
    }

    /// The new range after `step`, or `None` if this step does not adapt.
    pub(crate) fn adapt(&self, ctx: &StepContext<'_>) -> Result<Option<(f64, f64)>, QuantityError> {
        if !self.schedule().is_active(ctx.step) {
            return Ok(None);
        }
        let (maxima, padding, min_size): (Vec<Tensor<1>>, f64, f64) = match self {
            Self::GradAbsMax {
                padding, min_size, ..
            } => {
                let stats = ctx.per_sample_stats()?;
                (
                    stats.abs_max.clone().unwrap_or_default(),
                    *padding,
                    *min_size,
                )
            }
            Self::ParamAbsMax {
                padding, min_size, ..
            } => (
                ctx.params
                    .entries()
                    .iter()
                    .map(|e| e.value.clone().abs().max())
                    .collect(),
                *padding,
                *min_size,
            ),
        };
        if maxima.is_empty() {
            return Ok(None);
        }
        let m = read_values(Tensor::cat(maxima, 0))?
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max);
        let half = (1.0 + padding) * (min_size / 2.0).max(m);
        Ok(Some((-half, half)))
    }
}

/// `torch.linspace(lo, hi, n)`: the first half from `lo`, the second half from `hi`.
pub(crate) fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if n < 2 {
        return vec![lo; n];
    }
    let step = (hi - lo) / (n - 1) as f64;
    let half = n / 2;
    (0..n)
        .map(|i| {
            if i < half {
                lo + step * i as f64
            } else {
                hi - step * (n - 1 - i) as f64
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_is_symmetric_and_exact_at_the_ends() {
        let edges = linspace(-2.0, 2.0, 21);
        assert_eq!(edges.len(), 21);
        assert_eq!((edges[0], edges[20]), (-2.0, 2.0));
        assert_eq!(edges[1], -1.8);
        assert!((edges[10]).abs() < 1e-15);
    }
}
