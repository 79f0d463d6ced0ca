//! [`CockpitConfig`]: a Cockpit described in a TOML or JSON file.

use std::path::Path;

use serde::Deserialize;

use super::named::under_key;
use super::{Configuration, Named};
use crate::error::ConfigFileError;
use crate::quantity::{Quantity, QuantityKind};
use crate::{CockpitError, Schedule};

/// A Cockpit as a config file describes it: an optional preset, a default schedule, and
/// quantities with Cockpit's keyword arguments. Every setting is checked when the Cockpit is
/// built, before training.
///
/// ```toml
/// configuration = "economy"          # optional preset, default settings
/// schedule = "linear(16)"            # default schedule (every step if absent)
///
/// [[quantity]]                       # replaces the preset's GradHist1d
/// class = "GradHist1d"
/// kwargs = { bins = 20, range = [-1, 1], adapt = "GradAbsMax(linear(1), padding=0.1)" }
///
/// [[quantity]]                       # a second HessTrace under its own key
/// class = "HessTrace"
/// key = "HessTrace[ggn]"
/// schedule = "logarithmic(0, 3, 20)"
/// kwargs = { curvature = "diag_ggn_exact" }
/// ```
///
/// The same as JSON: `{"configuration": "economy", "quantity": [{"class": "GradHist1d",
/// "kwargs": {"bins": 20}}]}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CockpitConfig {
    /// One of Cockpit's presets, each quantity with its default settings.
    #[serde(default)]
    pub configuration: Option<Configuration>,
    /// The schedule of the preset and of every quantity that names none.
    #[serde(default)]
    pub schedule: Schedule,
    /// Quantities with settings; one whose key is a preset quantity's replaces it.
    #[serde(default, rename = "quantity", alias = "quantities")]
    pub quantities: Vec<QuantityConfig>,
}

/// One quantity of a [`CockpitConfig`]: the form of Cockpit's `{class, kwargs}` (as recorded
/// in the fixtures' `variants`), plus a schedule and an output key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantityConfig {
    /// Cockpit's class name.
    pub class: QuantityKind,
    /// Cockpit's keyword arguments (see each quantity's `…Settings`); absent for the defaults.
    #[serde(default)]
    pub kwargs: serde_json::Value,
    /// Its own schedule, instead of the config's.
    #[serde(default)]
    pub schedule: Option<Schedule>,
    /// The output key, instead of the class name.
    #[serde(default)]
    pub key: Option<String>,
}

impl QuantityConfig {
    /// `class` with Cockpit's keyword arguments `kwargs`.
    pub fn new(class: QuantityKind, kwargs: serde_json::Value) -> Self {
        Self {
            class,
            kwargs,
            schedule: None,
            key: None,
        }
    }

    /// Stores the values under `key`.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The output key: `key`, else the class name.
    pub fn output_key(&self) -> &str {
        self.key.as_deref().unwrap_or(self.class.name())
    }

    /// Builds the quantity, on its own schedule or `default_schedule`.
    ///
    /// # Errors
    ///
    /// [`CockpitError::InvalidSettings`] for settings that do not deserialise or cannot work.
    pub fn build(&self, default_schedule: &Schedule) -> Result<Box<dyn Quantity>, CockpitError> {
        let schedule = self
            .schedule
            .clone()
            .unwrap_or_else(|| default_schedule.clone());
        let quantity = self
            .class
            .configure(schedule, self.kwargs.clone())
            .map_err(|err| under_key(err, self.output_key()))?;
        Ok(match &self.key {
            Some(key) if key != self.class.name() => Box::new(Named::new(key.clone(), quantity)),
            _ => quantity,
        })
    }
}

impl CockpitConfig {
    /// The largest config file read (1 MiB); anything longer is refused unread.
    pub const MAX_FILE_BYTES: u64 = 1 << 20;

    /// Reads a config from `path`: TOML for `.toml`, JSON for `.json`.
    ///
    /// # Errors
    ///
    /// [`CockpitError::ConfigFile`] if the file cannot be read, is longer than
    /// [`CockpitConfig::MAX_FILE_BYTES`], has another extension, or does not parse (unknown
    /// fields included).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, CockpitError> {
        let path = path.as_ref();
        let refuse = |source: ConfigFileError| CockpitError::ConfigFile {
            path: path.to_path_buf(),
            source,
        };
        let text = crate::log::read_bounded(path, Self::MAX_FILE_BYTES)
            .map_err(|err| refuse(err.into()))?;
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Self::from_toml(&text),
            Some("json") => Self::from_json(&text),
            _ => Err(refuse(ConfigFileError::Extension)),
        }
        .map_err(|err| match err {
            CockpitError::ConfigFile { source, .. } => refuse(source),
            other => other,
        })
    }

    /// Parses a TOML config.
    ///
    /// # Errors
    ///
    /// [`CockpitError::ConfigFile`] (with an empty path) if it does not parse.
    pub fn from_toml(text: &str) -> Result<Self, CockpitError> {
        toml::from_str(text).map_err(|err| CockpitError::ConfigFile {
            path: Default::default(),
            source: ConfigFileError::Toml(err),
        })
    }

    /// Parses a JSON config.
    ///
    /// # Errors
    ///
    /// [`CockpitError::ConfigFile`] (with an empty path) if it does not parse.
    pub fn from_json(text: &str) -> Result<Self, CockpitError> {
        let refuse = |err: serde_json::Error| CockpitError::ConfigFile {
            path: Default::default(),
            source: ConfigFileError::Json(err),
        };
        // serde_json keeps the last of a repeated key; a setting said twice is refused (TOML's
        // parser refuses it already).
        serde_json::from_str::<NoDuplicateKeys>(text).map_err(refuse)?;
        serde_json::from_str(text).map_err(refuse)
    }

    /// The preset's quantities that no configured quantity replaces (same output key).
    fn preset_kinds(&self) -> Vec<QuantityKind> {
        self.configuration
            .map(Configuration::kinds)
            .unwrap_or_default()
            .into_iter()
            .filter(|kind| {
                self.quantities
                    .iter()
                    .all(|q| q.output_key() != kind.name())
            })
            .collect()
    }

    /// The output key and class of every quantity the config builds, in the order
    /// [`CockpitConfig::quantities`] builds them.
    pub fn keys(&self) -> Vec<(String, QuantityKind)> {
        self.preset_kinds()
            .into_iter()
            .map(|kind| (kind.name().to_string(), kind))
            .chain(
                self.quantities
                    .iter()
                    .map(|q| (q.output_key().to_string(), q.class)),
            )
            .collect()
    }

    /// Every quantity of the config, checked: the preset's (minus those a configured quantity
    /// replaces), then the configured ones.
    ///
    /// # Errors
    ///
    /// [`CockpitError::InvalidSettings`] for the first quantity whose settings are refused.
    pub fn quantities(&self) -> Result<Vec<Box<dyn Quantity>>, CockpitError> {
        let mut built: Vec<Box<dyn Quantity>> = self
            .preset_kinds()
            .into_iter()
            .map(|kind| kind.build(self.schedule.clone()))
            .collect();
        for quantity in &self.quantities {
            built.push(quantity.build(&self.schedule)?);
        }
        Ok(built)
    }
}

/// A JSON document walked for objects that name a key twice.
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoDuplicateKeysVisitor)
    }
}

struct NoDuplicateKeysVisitor;

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeysVisitor {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{}` is given twice (the last would silently win)",
                    crate::error::excerpt(&key)
                )));
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(NoDuplicateKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(NoDuplicateKeys)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cockpit;
    use cockpit_persample::ErrorChain;

    #[test]
    fn a_key_given_twice_is_refused() {
        let twice =
            r#"{"quantity": [{"class": "GradHist1d", "kwargs": {"bins": 10, "bins": 20}}]}"#;
        // What the error says with its causes (as the command line prints it).
        let said = |err: CockpitError| ErrorChain(&err).to_string();
        let err = said(CockpitConfig::from_json(twice).unwrap_err());
        assert!(err.contains("`bins` is given twice"), "{err}");
        let top = r#"{"schedule": "linear(1)", "schedule": "linear(2)"}"#;
        assert!(said(CockpitConfig::from_json(top).unwrap_err()).contains("`schedule`"));
        let toml = "[[quantity]]\nclass = \"GradHist1d\"\nkwargs = { bins = 10, bins = 20 }";
        assert!(
            CockpitConfig::from_toml(toml).is_err(),
            "TOML refuses it too"
        );
        let once = r#"{"quantity": [{"class": "GradHist1d", "kwargs": {"bins": 10}}]}"#;
        assert!(CockpitConfig::from_json(once).is_ok());
    }

    const TOML: &str = r#"
configuration = "economy"
schedule = "linear(4)"

[[quantity]]
class = "GradHist1d"
kwargs = { bins = 20, range = [-1, 1], adapt = "GradAbsMax(linear(1), padding=0.1)" }

[[quantity]]
class = "HessTrace"
key = "HessTrace[ggn]"
schedule = "linear(2, 1)"
kwargs = { curvature = "diag_ggn_exact" }
"#;

    #[test]
    fn toml_and_json_give_the_same_cockpit() {
        let from_toml = CockpitConfig::from_toml(TOML).unwrap().build().unwrap();
        let json = r#"{"configuration": "economy", "schedule": "linear(4)", "quantity": [
            {"class": "GradHist1d", "kwargs": {"bins": 20, "range": [-1, 1],
             "adapt": "GradAbsMax(linear(1), padding=0.1)"}},
            {"class": "HessTrace", "key": "HessTrace[ggn]", "schedule": "linear(2, 1)",
             "kwargs": {"curvature": "diag_ggn_exact"}}]}"#;
        let from_json = CockpitConfig::from_json(json).unwrap().build().unwrap();
        let names = from_toml.quantity_names();
        let config = CockpitConfig::from_toml(TOML).unwrap();
        let keys: Vec<String> = config.keys().into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, names, "keys() lists what quantities() builds");
        assert_eq!(names, from_json.quantity_names());
        // Economy's nine, GradHist1d replaced (once), plus the keyed HessTrace.
        assert_eq!(names.len(), 10);
        assert_eq!(names.iter().filter(|n| **n == "GradHist1d").count(), 1);
        assert!(names.contains(&"HessTrace[ggn]"));
        assert!(from_toml.needs_curvature(1) && !from_toml.needs_curvature(2));
        assert!(from_toml.is_tracking(4) && !from_toml.is_tracking(2 * 4 + 2));
    }

    #[test]
    fn bad_configs_are_typed_errors_before_training() {
        for (text, what) in [
            ("configuration = \"cheap\"", "configuration"),
            ("schedule = \"linear(0)\"", "schedule"),
            ("colour = \"blue\"", "unknown field"),
            ("[[quantity]]\nclass = \"GradNrm\"", "GradNrm"),
        ] {
            let err = CockpitConfig::from_toml(text).unwrap_err();
            assert!(
                matches!(err, CockpitError::ConfigFile { .. }),
                "{what}: {err}"
            );
            let said = ErrorChain(&err).to_string();
            assert!(said.contains(what), "{what}: {said}");
        }
        for kwargs in [
            "{ bins = 0 }",
            "{ range = [1, -1] }",
            "{ bins = 10, colour = 1 }",
        ] {
            let text = format!("[[quantity]]\nclass = \"GradHist1d\"\nkwargs = {kwargs}");
            let err = CockpitConfig::from_toml(&text)
                .unwrap()
                .build()
                .unwrap_err();
            assert!(
                matches!(&err, CockpitError::InvalidSettings { quantity, .. } if quantity == "GradHist1d"),
                "{kwargs}: {err}"
            );
        }
        let twice = "[[quantity]]\nclass = \"Loss\"\n[[quantity]]\nclass = \"Loss\"";
        assert!(matches!(
            CockpitConfig::from_toml(twice).unwrap().build(),
            Err(CockpitError::DuplicateQuantity(_))
        ));
    }

    #[test]
    fn settings_that_would_abort_or_mislead_are_refused_before_training() {
        for (quantity, kwargs) in [
            ("GradHist1d", "{ bins = 1000000000000 }"),
            ("GradHist1d", "{ bins = 4000000000 }"),
            ("GradHist1d", "{ range = [-1e308, 1e308] }"),
            ("GradHist2d", "{ bins = [100000, 100000] }"),
            ("GradHist2d", "{ bins = [2000000, 1] }"),
        ] {
            let text = format!("[[quantity]]\nclass = \"{quantity}\"\nkwargs = {kwargs}");
            let err = CockpitConfig::from_toml(&text)
                .unwrap()
                .build()
                .unwrap_err();
            assert!(
                matches!(&err, CockpitError::InvalidSettings { quantity: q, .. } if q == quantity),
                "{kwargs}: {err}"
            );
        }
        for key in ["", "  ", "Loss", "GradNorm", "train_loss", "epoch_count"] {
            let text = format!("[[quantity]]\nclass = \"HessTrace\"\nkey = \"{key}\"");
            let err = CockpitConfig::from_toml(&text)
                .unwrap()
                .build()
                .unwrap_err();
            assert!(
                matches!(&err, CockpitError::InvalidSettings { .. }),
                "key `{key}`: {err}"
            );
        }
        // The class's own name and bracketed variants stay fine.
        for key in ["HessTrace", "HessTrace[ggn]"] {
            let text = format!("[[quantity]]\nclass = \"HessTrace\"\nkey = \"{key}\"");
            assert!(
                CockpitConfig::from_toml(&text).unwrap().build().is_ok(),
                "{key}"
            );
        }
        let at_bound = format!(
            "[[quantity]]\nclass = \"GradHist1d\"\nkwargs = {{ bins = {} }}",
            crate::quantity::MAX_BINS
        );
        assert!(CockpitConfig::from_toml(&at_bound).unwrap().build().is_ok());
    }

    #[test]
    fn files_are_read_by_extension() {
        let dir = std::env::temp_dir().join(format!("cockpit-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let toml_path = dir.join("cockpit.toml");
        std::fs::write(&toml_path, TOML).unwrap();
        assert_eq!(
            CockpitConfig::from_file(&toml_path)
                .unwrap()
                .quantities
                .len(),
            2
        );
        // Cockpit::from_config_file builds what the file describes.
        let cockpit = Cockpit::from_config_file(&toml_path).unwrap();
        assert!(cockpit.quantity_names().contains(&"HessTrace[ggn]"));
        assert_eq!(cockpit.quantity_names().len(), 10);
        assert!(Cockpit::from_config_file(dir.join("missing.toml")).is_err());
        let yaml = dir.join("cockpit.yaml");
        std::fs::write(&yaml, TOML).unwrap();
        let missing = dir.join("missing.toml");
        for path in [yaml, missing] {
            let err = CockpitConfig::from_file(&path).unwrap_err();
            assert!(
                matches!(&err, CockpitError::ConfigFile { path: p, .. } if *p == path),
                "{err}"
            );
        }
        let broken = dir.join("broken.json");
        std::fs::write(&broken, "{\"configuration\": ").unwrap();
        assert!(matches!(
            CockpitConfig::from_file(&broken),
            Err(CockpitError::ConfigFile { .. })
        ));
        std::fs::remove_dir_all(&dir).ok();
    }
}
