//! Bin adaptation for the gradient histograms (Cockpit's `GradAbsMax` / `ParamAbsMax`).

use std::str::FromStr;

use burn::tensor::Tensor;

use crate::call::{Arg, Call, CallError};
use crate::persample::reduce;
use crate::{CockpitError, QuantityError, Schedule, Snapshot};

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

    /// The absolute maxima `[k]` the new range after `step` comes from, on the device (for the
    /// step's batched read), or `None` if this step does not adapt: the per-sample gradients'
    /// (`grad_abs_max`, asked only by `GradAbsMax`) or the parameters' `params`.
    pub(crate) fn maxima(
        &self,
        step: usize,
        params: &Snapshot,
        grad_abs_max: impl FnOnce() -> Result<Vec<Tensor<1>>, QuantityError>,
    ) -> Result<Option<Tensor<1>>, QuantityError> {
        if !self.schedule().is_active(step) {
            return Ok(None);
        }
        let maxima: Vec<Tensor<1>> = match self {
            Self::GradAbsMax { .. } => grad_abs_max()?,
            Self::ParamAbsMax { .. } => params
                .entries()
                .iter()
                .map(|e| reduce::max_nonnegative(e.value.clone().abs()))
                .collect(),
        };
        Ok((!maxima.is_empty()).then(|| Tensor::cat(maxima, 0)))
    }

    /// The range `(−h, h)` from the maxima [`BinAdaptation::maxima`] gave, read back:
    /// `h = (1 + padding)·max(min_size/2, max_k m_k)`.
    pub(crate) fn range(&self, maxima: &[f64]) -> (f64, f64) {
        let (Self::GradAbsMax {
            padding, min_size, ..
        }
        | Self::ParamAbsMax {
            padding, min_size, ..
        }) = self;
        let m = maxima.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let half = (1.0 + padding) * (min_size / 2.0).max(m);
        (-half, half)
    }
}

/// Parses Cockpit's adaptation calls as its logs and configs write them:
/// `GradAbsMax(linear(1), padding=0.1, min_size=1e-6)` or `ParamAbsMax(…)`; the schedule
/// (first, or `track_schedule=`) defaults to every step, `padding` to 0, `min_size` to 1e-6.
///
/// ```
/// # use cockpit_quantities::histogram::BinAdaptation;
/// let adapt: BinAdaptation = "GradAbsMax(linear(2), padding=0.1)".parse()?;
/// assert!(matches!(adapt, BinAdaptation::GradAbsMax { padding, .. } if padding == 0.1));
/// # Ok::<(), cockpit_quantities::CockpitError>(())
/// ```
impl FromStr for BinAdaptation {
    type Err = CockpitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let bad = |why: String| CockpitError::InvalidSettings {
            quantity: "bin adaptation".into(),
            reason: format!("`{text}`: {why}"),
            source: None,
        };
        let call = Call::parse(text).map_err(|err| match err {
            CallError::NotACall => bad("expected `GradAbsMax(…)` or `ParamAbsMax(…)`".into()),
            other => bad(other.to_string()),
        })?;
        // Cockpit's signature; `schedule` is read as `track_schedule` too.
        let renamed: Vec<Arg<'_>> = call
            .args
            .iter()
            .map(|arg| Arg {
                key: arg
                    .key
                    .map(|k| if k == "schedule" { "track_schedule" } else { k }),
                value: arg.value,
            })
            .collect();
        let call = Call {
            args: renamed,
            ..call
        };
        let signature = ["track_schedule", "padding", "min_size", "verbose"];
        let args = call.bind(&signature).map_err(|err| bad(err.to_string()))?;
        let number = |k: usize, default: f64| {
            let Some(value) = args[k] else {
                return Ok(default);
            };
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    bad(format!(
                        "`{}` must be a non-negative number, got `{value}`",
                        signature[k]
                    ))
                })
        };
        let schedule = match args[0] {
            Some(value) => value.parse()?,
            None => Schedule::every_step(),
        };
        let (padding, min_size) = (number(1, 0.0)?, number(2, 1e-6)?);
        match call.name {
            "GradAbsMax" => Ok(Self::GradAbsMax {
                schedule,
                padding,
                min_size,
            }),
            "ParamAbsMax" => Ok(Self::ParamAbsMax {
                schedule,
                padding,
                min_size,
            }),
            other => Err(bad(format!("unknown adaptation `{other}`"))),
        }
    }
}

/// Deserialises from the text [`BinAdaptation::from_str`] reads.
impl<'de> serde::Deserialize<'de> for BinAdaptation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::config::parse_text(deserializer)
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
    #[test]
    fn parses_cockpits_adaptation_calls() {
        let a: BinAdaptation = "GradAbsMax(linear(1), padding=0.1, min_size=1e-6)"
            .parse()
            .unwrap();
        let BinAdaptation::GradAbsMax {
            schedule,
            padding,
            min_size,
        } = a
        else {
            panic!("wrong kind")
        };
        assert_eq!((padding, min_size), (0.1, 1e-6));
        assert!(schedule.is_active(0) && schedule.is_active(1));
        let p: BinAdaptation = "ParamAbsMax(linear(3, 1), padding=0.2)".parse().unwrap();
        let BinAdaptation::ParamAbsMax {
            schedule,
            padding,
            min_size,
        } = p
        else {
            panic!("wrong kind")
        };
        assert_eq!((padding, min_size), (0.2, 1e-6));
        assert!(schedule.is_active(4) && !schedule.is_active(3));
        for bad in [
            "GradMax(linear(1))",
            "GradAbsMax(linear(0))",
            "GradAbsMax(linear(1), padding=-1)",
            "GradAbsMax(linear(1), pad=0.1)",
            "GradAbsMax linear(1)",
        ] {
            assert!(bad.parse::<BinAdaptation>().is_err(), "{bad}");
        }
    }

    /// The builders mean what Cockpit's calls with a padding and the defaults mean.
    #[test]
    fn builders_equal_the_parsed_calls() {
        for (built, text) in [
            (
                BinAdaptation::grad_abs_max(0.25),
                "GradAbsMax(linear(1), padding=0.25)",
            ),
            (
                BinAdaptation::param_abs_max(0.5),
                "ParamAbsMax(linear(1), padding=0.5, min_size=1e-6)",
            ),
        ] {
            let parsed: BinAdaptation = text.parse().unwrap();
            let fields = |a: &BinAdaptation| match a {
                BinAdaptation::GradAbsMax {
                    padding, min_size, ..
                } => ("grad", *padding, *min_size),
                BinAdaptation::ParamAbsMax {
                    padding, min_size, ..
                } => ("param", *padding, *min_size),
            };
            assert_eq!(fields(&built), fields(&parsed), "{text}");
            assert!((0..5).all(|s| built.schedule().is_active(s)), "{text}");
        }
    }
}
