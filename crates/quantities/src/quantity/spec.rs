//! What is known about a quantity without running a step: its [`QuantitySpec`] (Cockpit name,
//! value shape, network-wide reduction, needs). Each quantity file states these facts once
//! (through [`QuantityType`](super::QuantityType), beside its checked, deserialisable settings);
//! [`QuantityKind`](crate::QuantityKind) hands them to the Cockpit, the burn-train metrics, the dashboard,
//! `diagnose` and `replay`.

use serde::Deserialize;

use crate::persample::PerSampleNeeds;

/// How a per-parameter list becomes one network-wide number ([`ValueShape::PerParameter`]).
/// Non-exhaustive: a new quantity may bring the reduction it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reduction {
    /// `√Σ_p v_p²`: the norm over the whole network of per-parameter norms.
    RootSumOfSquares,
    /// `Σ_p v_p`: the whole network's value of per-parameter sums (a trace).
    Sum,
    /// `max_p v_p`: the largest layer's value (NaN values are skipped).
    Max,
    /// `(1/P) Σ_p v_p`: the layers' average.
    Mean,
}

impl Reduction {
    /// Reduces `values` (`NaN` for an empty list, except `Sum`'s 0).
    pub fn apply(self, values: &[f64]) -> f64 {
        match self {
            Self::RootSumOfSquares => values.iter().map(|v| v * v).sum::<f64>().sqrt(),
            Self::Sum => values.iter().sum(),
            Self::Max => values.iter().copied().fold(f64::NAN, f64::max),
            Self::Mean => values.iter().sum::<f64>() / values.len() as f64,
        }
    }
}

/// The shape of a quantity's value in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueShape {
    /// One number per step.
    Scalar,
    /// One number per parameter, reduced to a network-wide number as Cockpit's instruments draw
    /// it.
    PerParameter(Reduction),
    /// A 1d histogram (`hist`, `edges`).
    Histogram1d,
    /// A 2d histogram (`hist`, `edges`, optionally one per parameter).
    Histogram2d,
    /// One array per parameter.
    Arrays,
    /// Which examples carry the step's gradient ([`ExampleShares`](crate::ExampleShares)).
    Examples,
}

impl ValueShape {
    /// Whether a value of this shape shows as one number (scalars and per-parameter lists).
    pub fn is_numeric(self) -> bool {
        matches!(self, Self::Scalar | Self::PerParameter(_))
    }
}

/// What a quantity needs from a tracked step, known before training starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// Per-sample gradients or losses ([`StepInfo::with_per_sample`](crate::StepInfo::with_per_sample)).
    pub per_sample: bool,
    /// The per-sample statistics it reads at each step it computes, where they do not depend
    /// on the step ([`Quantity::per_sample_needs`](crate::Quantity::per_sample_needs) returns
    /// them; a quantity whose needs change with the step, Alpha or an adapting histogram,
    /// says so there instead).
    pub statistics: PerSampleNeeds,
    /// Hessian-vector products or curvature diagonals
    /// ([`StepInfo::with_curvature`](crate::StepInfo::with_curvature)).
    pub curvature: bool,
    /// Plain SGD (no momentum, dampening, weight decay or Nesterov): the formula assumes it.
    pub plain_sgd: bool,
    /// θ_{t+1} as well as θ_t: the value of step t is stored when step t + 1 is tracked.
    pub next_step: bool,
    /// Takes the announced plain SGD step `−lr·∇L` for the update where the optimizer info
    /// names one (CABS, EarlyStopping, Alpha's cheap path): its value is refused where the
    /// Cockpit's update check finds the parameters moved otherwise.
    pub announced_sgd: bool,
}

impl Needs {
    /// Nothing beyond the parameters, the mean gradient and the loss.
    pub const NOTHING: Self = Self {
        per_sample: false,
        statistics: PerSampleNeeds::NONE,
        curvature: false,
        plain_sgd: false,
        next_step: false,
        announced_sgd: false,
    };

    /// Per-sample gradients, read through `statistics` at every step the quantity computes.
    pub const fn per_sample(statistics: PerSampleNeeds) -> Self {
        Self {
            per_sample: true,
            statistics,
            ..Self::NOTHING
        }
    }
}

/// The facts of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantitySpec {
    /// Cockpit's class name, which is also the default output key.
    pub name: &'static str,
    /// The shape of its value.
    pub shape: ValueShape,
    /// What it needs from a step.
    pub needs: Needs,
}

/// The settings of a quantity that has none (`{}`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}
