//! The Cockpit built from a description: one of Cockpit's configurations or a config file.
//! The Cockpit reads its configuration, one way: `config` describes quantities and knows no
//! Cockpit.

use super::base::Cockpit;
use crate::config::{CockpitConfig, Configuration};
use crate::{CockpitError, Schedule};

impl Cockpit {
    /// A Cockpit with one of Cockpit's configurations, every quantity on `schedule`.
    ///
    /// # Errors
    ///
    /// None in practice: a configuration names each quantity once (the signature matches
    /// [`Cockpit::new`]).
    pub fn from_configuration(
        configuration: Configuration,
        schedule: &Schedule,
    ) -> Result<Self, CockpitError> {
        Self::new(configuration.build(schedule))
    }

    /// A Cockpit as a TOML or JSON config file describes it ([`CockpitConfig`]).
    ///
    /// # Errors
    ///
    /// [`CockpitError::ConfigFile`] if the file cannot be read or parsed,
    /// [`CockpitError::InvalidSettings`] for settings that cannot work.
    pub fn from_config_file(path: impl AsRef<std::path::Path>) -> Result<Self, CockpitError> {
        CockpitConfig::from_file(path)?.build()
    }
}

impl CockpitConfig {
    /// Builds the Cockpit the config describes.
    ///
    /// # Errors
    ///
    /// [`CockpitError::InvalidSettings`], [`CockpitError::DuplicateQuantity`] for two quantities
    /// under one key.
    pub fn build(&self) -> Result<Cockpit, CockpitError> {
        Cockpit::new(self.quantities()?)
    }
}
