//! [`QuantityKind`]: Cockpit's quantities by name, each answering with the facts its own file
//! states ([`QuantityType`]).
//!
//! The enum itself is generated from the one list in `quantity/mod.rs` (the `kinds!`
//! invocation), which also declares each quantity's module: adding a quantity is its file
//! plus one line there.

use std::fmt;
use std::str::FromStr;

use super::QuantityKind;
use super::base::Quantity;
use super::base::QuantityType;
use super::spec::{QuantitySpec, Reduction, ValueShape};
use crate::{CockpitError, Output, Schedule, Value};

/// Generates, from `file => Kind, …;` lines, each file's `mod` and `pub use file::*`, and
/// [`QuantityKind`]: the variants (each the name of its type), `ALL` in the lines' order, and
/// the dispatch of [`QuantityKind::spec`], [`QuantityKind::build`] and
/// [`QuantityKind::configure`] to each type's [`QuantityType`] implementation.
macro_rules! kinds {
    ($($file:ident => $($kind:ident),+ ;)*) => {
        $(
            mod $file;
            pub use $file::*;
        )*
        $crate::quantity::kind::kinds!(@enum $($($kind => $kind),+),*);
    };
    (@enum $($kind:ident => $ty:ty),* $(,)?) => {
        /// One of Cockpit's quantities, by its class name. Non-exhaustive: a new quantity is
        /// not a breaking change for a `match` downstream.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum QuantityKind {
            $(
                #[doc = concat!("Cockpit's `", stringify!($kind), "` ([`", stringify!($ty), "`]).")]
                $kind,
            )*
        }

        impl QuantityKind {
            /// Every quantity, in the order of the list in `quantity/mod.rs` (by file).
            pub const ALL: [QuantityKind; [$(stringify!($kind)),*].len()] = [$(Self::$kind),*];

            /// The quantity's facts: Cockpit name, value shape, what it needs.
            pub fn spec(self) -> &'static $crate::quantity::QuantitySpec {
                match self {
                    $(Self::$kind => &<$ty as $crate::QuantityType>::SPEC,)*
                }
            }

            /// Builds the quantity with Cockpit's default settings on `schedule`.
            pub fn build(self, schedule: $crate::Schedule) -> Box<dyn $crate::Quantity> {
                match self {
                    $(Self::$kind => Box::new(<$ty as $crate::QuantityType>::with_settings(
                        schedule,
                        Default::default(),
                    )),)*
                }
            }

            /// Builds the quantity on `schedule` with settings deserialised from Cockpit's
            /// keyword arguments (`{"bins": 20, "range": [-1, 1]}`; `null` for the defaults),
            /// checked ([`Quantity::check`](crate::Quantity::check)).
            ///
            /// # Errors
            ///
            /// [`CockpitError::InvalidSettings`](crate::CockpitError::InvalidSettings) for an unknown key, a value of the wrong type
            /// or settings that cannot work.
            pub fn configure(
                self,
                schedule: $crate::Schedule,
                settings: serde_json::Value,
            ) -> Result<Box<dyn $crate::Quantity>, $crate::CockpitError> {
                match self {
                    $(Self::$kind => $crate::quantity::kind::configure::<$ty>(schedule, settings),)*
                }
            }
        }
    };
}
pub(crate) use kinds;

pub(crate) fn configure<T: QuantityType>(
    schedule: Schedule,
    settings: serde_json::Value,
) -> Result<Box<dyn Quantity>, CockpitError> {
    let settings: T::Settings = if settings.is_null() {
        T::Settings::default()
    } else {
        serde_json::from_value(settings).map_err(|err| CockpitError::InvalidSettings {
            quantity: T::SPEC.name.to_string(),
            reason: "the settings do not deserialise".into(),
            source: Some(Box::new(err)),
        })?
    };
    let quantity = T::with_settings(schedule, settings);
    quantity.check()?;
    Ok(Box::new(quantity))
}

impl QuantityKind {
    /// Cockpit's class name, which is also the output key.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// How Cockpit's instruments turn this quantity's per-parameter list into one network-wide
    /// number: the root-sum-of-squares for the norms (GradNorm, Distance, UpdateSize, as
    /// `grad_norm_gauge` and `distance_gauge` draw them) and the sum for HessTrace (the trace of
    /// the whole Hessian, as `trace_gauge` draws it); `None` for quantities that are not
    /// per-parameter lists. Metrics, the dashboard and `diagnose` all reduce through this.
    pub fn reduction(self) -> Option<Reduction> {
        match self.spec().shape {
            ValueShape::PerParameter(reduction) => Some(reduction),
            _ => None,
        }
    }

    /// The network-wide number a value of this quantity shows as: scalars as they are,
    /// per-parameter lists by [`QuantityKind::reduction`]; `None` for histograms and arrays.
    pub fn network_value(self, value: &Value) -> Option<f64> {
        match value {
            Value::List(values) | Value::Estimate(crate::Estimate { values, stderr: _ }) => Some(
                self.reduction()
                    .unwrap_or(Reduction::RootSumOfSquares)
                    .apply(values),
            ),
            other => other.as_f64(),
        }
    }

    /// The kind whose facts are `spec` (what [`Quantity::spec`] returns), `None` for a
    /// quantity that is none of Cockpit's.
    pub fn of_spec(spec: &QuantitySpec) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.spec() == spec)
    }

    /// The kind of the values under `key` in `output`, as the output records it
    /// ([`Output::kind_name`]): `HessTrace` for `HessTrace[ggn]`; `None` for keys of no
    /// quantity (`epoch_count`, a user's own). The key's text is never taken apart.
    pub fn of_key(output: &Output, key: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == output.kind_name(key))
    }

    /// Every key in `output` holding values of this quantity: its own name first where it has
    /// values, then its keyed variants in name order. Only its name and the keys with a
    /// recorded kind can be its keys ([`Output::kind_name`]), so no other key is looked at.
    pub fn keys(self, output: &Output) -> Vec<&str> {
        std::iter::once(self.name())
            .chain(output.kinds().keys().map(String::as_str))
            .filter(|key| Self::of_key(output, key) == Some(self))
            .filter(|key| !output.series(key).is_empty())
            .collect()
    }

    /// This quantity's values in `output`, in step order: the typed way to read a log (the
    /// dashboard, `diagnose`, the metrics and `replay` read through it). The values are those
    /// under its own name, or, where it has none, under its first keyed variant
    /// ([`QuantityKind::keys`]): a run that only tracks `HessTrace[ggn]` is drawn and
    /// diagnosed as HessTrace.
    pub fn series(self, output: &Output) -> Vec<(usize, &Value)> {
        self.keys(output)
            .first()
            .map(|key| output.series(key))
            .unwrap_or_default()
    }

    /// This quantity's network-wide number at each step that has one
    /// ([`QuantityKind::network_value`]).
    pub fn numbers(self, output: &Output) -> Vec<(usize, f64)> {
        self.series(output)
            .into_iter()
            .filter_map(|(step, value)| self.network_value(value).map(|v| (step, v)))
            .collect()
    }

    /// This quantity's per-parameter list at each step that has one (GradNorm, UpdateSize,
    /// a layer-wise HessTrace, …).
    pub fn lists(self, output: &Output) -> Vec<(usize, Vec<f64>)> {
        self.series(output)
            .into_iter()
            .filter_map(|(step, value)| value.as_list().map(|l| (step, l.to_vec())))
            .collect()
    }

    /// The last step's value of this quantity in `output`.
    pub fn last(self, output: &Output) -> Option<(usize, &Value)> {
        self.series(output).into_iter().next_back()
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
                name: crate::error::excerpt(s),
                expected: Self::ALL.map(QuantityKind::name).join(", "),
            })
    }
}

/// Deserialises from Cockpit's class name.
impl<'de> serde::Deserialize<'de> for QuantityKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::config::parse_text(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persample::{Direction, Statistic};

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
        assert_eq!(Reduction::Mean.apply(&[1.0, 3.0]), 2.0);
        assert_eq!(Reduction::Max.apply(&[1.0, f64::NAN, 3.0]), 3.0);
        assert!(Reduction::Max.apply(&[]).is_nan());
    }

    #[test]
    fn declared_statistics_are_what_each_quantity_asks_for() {
        for kind in QuantityKind::ALL {
            let needs = kind.spec().needs;
            assert!(!needs.statistics.any() || needs.per_sample, "{kind:?}");
            let quantity = kind
                .configure(Schedule::every_step(), serde_json::Value::Null)
                .unwrap();
            if needs.statistics.any() {
                assert_eq!(quantity.per_sample_needs(3), needs.statistics, "{kind:?}");
            }
        }
        // What Cockpit's formulas read.
        let stats = |kind: QuantityKind| kind.spec().needs.statistics;
        let gradient = Statistic::Dot(Direction::Gradient);
        assert!(stats(QuantityKind::NormTest).contains(Statistic::SqNorm));
        assert!(stats(QuantityKind::InnerTest).contains(gradient));
        let ortho = stats(QuantityKind::OrthoTest);
        assert!(ortho.contains(Statistic::SqNorm) && ortho.contains(gradient));
        for kind in [
            QuantityKind::CABS,
            QuantityKind::EarlyStopping,
            QuantityKind::MeanGSNR,
            QuantityKind::TICDiag,
        ] {
            assert!(stats(kind).contains(Statistic::SumSq), "{kind:?}");
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        // Each kind once, under its own name (no count is held: a new quantity is one line).
        let mut names: Vec<&str> = QuantityKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), QuantityKind::ALL.len());
        for kind in QuantityKind::ALL {
            assert_eq!(kind.name().parse::<QuantityKind>().unwrap(), kind);
        }
        let err = "GradNrm".parse::<QuantityKind>().unwrap_err().to_string();
        assert!(err.contains("GradNrm") && err.contains("GradNorm"), "{err}");
    }

    #[test]
    fn every_quantity_builds_under_its_cockpit_name() {
        for kind in QuantityKind::ALL {
            let quantity = kind.build(Schedule::every_step());
            assert_eq!(quantity.name(), kind.name());
            assert_eq!(QuantityKind::of_spec(quantity.spec()), Some(kind));
            assert!(quantity.check().is_ok(), "{kind}: defaults must be valid");
        }
    }

    /// The facts a spec states agree with what the built quantity does at a step.
    #[test]
    fn specs_agree_with_the_quantities() {
        for kind in QuantityKind::ALL {
            let q = kind.build(Schedule::every_step());
            let needs = kind.spec().needs;
            assert_eq!(q.uses_per_sample(1), needs.per_sample, "{kind}: per-sample");
            assert_eq!(q.uses_curvature(1), needs.curvature, "{kind}: curvature");
            // A two-step quantity also runs at the step after a scheduled one.
            let sparse = kind.build(Schedule::steps([3]));
            assert_eq!(
                sparse.should_compute(4),
                needs.next_step,
                "{kind}: next step"
            );
        }
    }

    #[test]
    fn settings_are_deserialised_and_checked() {
        let hist =
            |v: serde_json::Value| QuantityKind::GradHist1d.configure(Schedule::every_step(), v);
        assert!(hist(serde_json::json!({"bins": 20, "range": [-1, 1]})).is_ok());
        assert!(hist(serde_json::Value::Null).is_ok());
        for bad in [
            serde_json::json!({"bins": 0}),
            serde_json::json!({"range": [1, 1]}),
            serde_json::json!({"range": [2, -2]}),
            serde_json::json!({"bins": 10, "bin": 3}),
            serde_json::json!({"adapt": "GradAbsMax(linear(0))"}),
        ] {
            let err = hist(bad.clone()).err().expect("refused");
            assert!(
                matches!(err, CockpitError::InvalidSettings { .. }),
                "{bad}: {err}"
            );
        }
        let curvature = |v| QuantityKind::TICDiag.configure(Schedule::every_step(), v);
        assert!(curvature(serde_json::json!({"curvature": "diag_ggn_exact"})).is_ok());
        for bad in [
            serde_json::json!({"curvature": "diag_x"}),
            serde_json::json!({"mc_samples": 4}),
            serde_json::json!({"epsilon": -1.0}),
        ] {
            assert!(curvature(bad.clone()).is_err(), "{bad}");
        }
        assert!(
            QuantityKind::GradNorm
                .configure(Schedule::every_step(), serde_json::json!({"bins": 3}))
                .is_err()
        );
    }
}
