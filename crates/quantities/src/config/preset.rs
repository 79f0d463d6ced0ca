//! Cockpit's preset configurations: `economy`, `business`, `full`.

use std::str::FromStr;

use crate::quantity::{Quantity, QuantityKind};
use crate::{CockpitError, Schedule};

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
                name: crate::error::excerpt(other),
                expected: "economy, business, full".into(),
            }),
        }
    }
}

/// Deserialises from the label (`"economy"`, `"business"`, `"full"`).
impl<'de> serde::Deserialize<'de> for Configuration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::config::parse_text(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn labels_round_trip() {
        for c in [
            Configuration::Economy,
            Configuration::Business,
            Configuration::Full,
        ] {
            assert_eq!(c.label().parse::<Configuration>().unwrap(), c);
        }
        assert!("cheap".parse::<Configuration>().is_err());
    }
}
