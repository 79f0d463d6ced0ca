//! Cockpit's quantities by name, and its three configurations.

use std::fmt;
use std::str::FromStr;

use crate::quantity::{
    Alpha, CABS, Distance, EarlyStopping, GradHist1d, GradHist2d, GradNorm, HessMaxEV, HessTrace,
    InnerTest, Loss, MeanGSNR, NormTest, OrthoTest, Parameters, Quantity, TICDiag, TICTrace, Time,
    UpdateSize,
};
use crate::{CockpitError, Schedule, Value};

/// How a per-parameter list becomes one network-wide number ([`QuantityKind::reduction`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// `√Σ_p v_p²`: the norm over the whole network of per-parameter norms.
    RootSumOfSquares,
    /// `Σ_p v_p`: the whole network's value of per-parameter sums (a trace).
    Sum,
}

impl Reduction {
    /// Reduces `values`.
    pub fn apply(self, values: &[f64]) -> f64 {
        match self {
            Self::RootSumOfSquares => values.iter().map(|v| v * v).sum::<f64>().sqrt(),
            Self::Sum => values.iter().sum(),
        }
    }
}

/// One of Cockpit's 19 quantities, by its class name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // each variant is Cockpit's class of the same name
pub enum QuantityKind {
    Alpha,
    CABS,
    Distance,
    EarlyStopping,
    GradHist1d,
    GradHist2d,
    GradNorm,
    HessMaxEV,
    HessTrace,
    InnerTest,
    Loss,
    MeanGSNR,
    NormTest,
    OrthoTest,
    Parameters,
    TICDiag,
    TICTrace,
    Time,
    UpdateSize,
}

impl QuantityKind {
    /// All 19 quantities, in alphabetical order.
    pub const ALL: [QuantityKind; 19] = [
        Self::Alpha,
        Self::CABS,
        Self::Distance,
        Self::EarlyStopping,
        Self::GradHist1d,
        Self::GradHist2d,
        Self::GradNorm,
        Self::HessMaxEV,
        Self::HessTrace,
        Self::InnerTest,
        Self::Loss,
        Self::MeanGSNR,
        Self::NormTest,
        Self::OrthoTest,
        Self::Parameters,
        Self::TICDiag,
        Self::TICTrace,
        Self::Time,
        Self::UpdateSize,
    ];

    /// Cockpit's class name, which is also the output key.
    pub fn name(self) -> &'static str {
        match self {
            Self::Alpha => "Alpha",
            Self::CABS => "CABS",
            Self::Distance => "Distance",
            Self::EarlyStopping => "EarlyStopping",
            Self::GradHist1d => "GradHist1d",
            Self::GradHist2d => "GradHist2d",
            Self::GradNorm => "GradNorm",
            Self::HessMaxEV => "HessMaxEV",
            Self::HessTrace => "HessTrace",
            Self::InnerTest => "InnerTest",
            Self::Loss => "Loss",
            Self::MeanGSNR => "MeanGSNR",
            Self::NormTest => "NormTest",
            Self::OrthoTest => "OrthoTest",
            Self::Parameters => "Parameters",
            Self::TICDiag => "TICDiag",
            Self::TICTrace => "TICTrace",
            Self::Time => "Time",
            Self::UpdateSize => "UpdateSize",
        }
    }

    /// How Cockpit's instruments turn this quantity's per-parameter list into one network-wide
    /// number: the root-sum-of-squares for the norms (GradNorm, Distance, UpdateSize, as
    /// `grad_norm_gauge` and `distance_gauge` draw them) and the sum for HessTrace (the trace of
    /// the whole Hessian, as `trace_gauge` draws it); `None` for quantities that are not
    /// per-parameter lists. Metrics, the dashboard and `diagnose` all reduce through this.
    pub fn reduction(self) -> Option<Reduction> {
        match self {
            Self::GradNorm | Self::Distance | Self::UpdateSize => Some(Reduction::RootSumOfSquares),
            Self::HessTrace => Some(Reduction::Sum),
            _ => None,
        }
    }

    /// The network-wide number a value of this quantity shows as: scalars as they are,
    /// per-parameter lists by [`QuantityKind::reduction`]; `None` for histograms and arrays.
    pub fn network_value(self, value: &Value) -> Option<f64> {
        match value {
            Value::List(values) => Some(
                self.reduction()
                    .unwrap_or(Reduction::RootSumOfSquares)
                    .apply(values),
            ),
            other => other.as_f64(),
        }
    }

    /// Builds the quantity with Cockpit's default settings on `schedule`.
    pub fn build(self, schedule: Schedule) -> Box<dyn Quantity> {
        match self {
            Self::Alpha => Box::new(Alpha::new(schedule)),
            Self::CABS => Box::new(CABS::new(schedule)),
            Self::Distance => Box::new(Distance::new(schedule)),
            Self::EarlyStopping => Box::new(EarlyStopping::new(schedule)),
            Self::GradHist1d => Box::new(GradHist1d::new(schedule)),
            Self::GradHist2d => Box::new(GradHist2d::new(schedule)),
            Self::HessMaxEV => Box::new(HessMaxEV::new(schedule)),
            Self::HessTrace => Box::new(HessTrace::new(schedule)),
            Self::InnerTest => Box::new(InnerTest::new(schedule)),
            Self::MeanGSNR => Box::new(MeanGSNR::new(schedule)),
            Self::NormTest => Box::new(NormTest::new(schedule)),
            Self::OrthoTest => Box::new(OrthoTest::new(schedule)),
            Self::TICDiag => Box::new(TICDiag::new(schedule)),
            Self::TICTrace => Box::new(TICTrace::new(schedule)),
            Self::GradNorm => Box::new(GradNorm::new(schedule)),
            Self::Loss => Box::new(Loss::new(schedule)),
            Self::Parameters => Box::new(Parameters::new(schedule)),
            Self::Time => Box::new(Time::new(schedule)),
            Self::UpdateSize => Box::new(UpdateSize::new(schedule)),
        }
    }
}

impl fmt::Display for QuantityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QuantityKind {
    type Err = CockpitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| CockpitError::Unknown {
                what: "quantity",
                name: s.to_string(),
                expected: Self::ALL.map(QuantityKind::name).join(", "),
            })
    }
}

/// Cockpit's preset configurations (`cockpit.utils.configuration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Configuration {
    /// Alpha, Distance, GradHist1d, GradNorm, InnerTest, Loss, NormTest, OrthoTest, UpdateSize.
    Economy,
    /// Economy plus TICDiag and HessTrace.
    Business,
    /// Business plus HessMaxEV and GradHist2d.
    Full,
}

impl Configuration {
    /// The quantities of the configuration, as Cockpit lists them.
    pub fn kinds(self) -> Vec<QuantityKind> {
        use QuantityKind::*;
        let mut kinds = vec![
            Alpha, Distance, GradHist1d, GradNorm, InnerTest, Loss, NormTest, OrthoTest, UpdateSize,
        ];
        if matches!(self, Self::Business | Self::Full) {
            kinds.extend([TICDiag, HessTrace]);
        }
        if self == Self::Full {
            kinds.extend([HessMaxEV, GradHist2d]);
        }
        kinds
    }

    /// Builds every quantity of the configuration on the same schedule, with default settings.
    pub fn build(self, schedule: &Schedule) -> Vec<Box<dyn Quantity>> {
        self.kinds()
            .into_iter()
            .map(|kind| kind.build(schedule.clone()))
            .collect()
    }

    /// The configuration's label: `economy`, `business` or `full`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Economy => "economy",
            Self::Business => "business",
            Self::Full => "full",
        }
    }
}

impl FromStr for Configuration {
    type Err = CockpitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "economy" => Ok(Self::Economy),
            "business" => Ok(Self::Business),
            "full" => Ok(Self::Full),
            other => Err(CockpitError::Unknown {
                what: "configuration",
                name: other.to_string(),
                expected: "economy, business, full".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_reduce_as_cockpit_instruments_draw_them() {
        let list = Value::List(vec![3.0, -4.0]);
        assert_eq!(QuantityKind::GradNorm.network_value(&list), Some(5.0));
        assert_eq!(QuantityKind::Distance.network_value(&list), Some(5.0));
        // A trace over the network is the sum of the per-parameter traces, signs kept.
        assert_eq!(QuantityKind::HessTrace.network_value(&list), Some(-1.0));
        assert_eq!(
            QuantityKind::Alpha.network_value(&Value::Float(0.5)),
            Some(0.5)
        );
        assert_eq!(QuantityKind::Alpha.reduction(), None);
    }

    /// Cockpit's `test_utils`: preset membership.
    #[test]
    fn preset_membership_matches_cockpit() {
        let names = |c: Configuration| {
            let mut v: Vec<_> = c.kinds().into_iter().map(QuantityKind::name).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(
            names(Configuration::Economy),
            vec![
                "Alpha",
                "Distance",
                "GradHist1d",
                "GradNorm",
                "InnerTest",
                "Loss",
                "NormTest",
                "OrthoTest",
                "UpdateSize"
            ]
        );
        assert_eq!(names(Configuration::Business).len(), 11);
        assert!(names(Configuration::Business).contains(&"TICDiag"));
        assert!(names(Configuration::Business).contains(&"HessTrace"));
        assert_eq!(names(Configuration::Full).len(), 13);
        assert!(names(Configuration::Full).contains(&"HessMaxEV"));
        assert!(names(Configuration::Full).contains(&"GradHist2d"));
        for absent in [
            "Time",
            "Parameters",
            "CABS",
            "EarlyStopping",
            "MeanGSNR",
            "TICTrace",
        ] {
            assert!(!names(Configuration::Full).contains(&absent));
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for kind in QuantityKind::ALL {
            assert_eq!(kind.name().parse::<QuantityKind>().unwrap(), kind);
        }
        let err = "GradNrm".parse::<QuantityKind>().unwrap_err().to_string();
        assert!(err.contains("GradNrm") && err.contains("GradNorm"), "{err}");
        assert!("cheap".parse::<Configuration>().is_err());
    }

    #[test]
    fn every_quantity_builds_under_its_cockpit_name() {
        for kind in QuantityKind::ALL {
            let quantity = kind.build(Schedule::every_step());
            assert_eq!(quantity.name(), kind.name());
        }
    }
}
