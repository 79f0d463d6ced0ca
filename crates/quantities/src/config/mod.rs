//! Configuring a [`Cockpit`](crate::Cockpit): Cockpit's presets ([`Configuration`]) and config
//! files ([`CockpitConfig`], TOML or JSON) with per-quantity settings.

mod file;
mod named;
mod preset;
mod text;

pub use file::{CockpitConfig, QuantityConfig};
pub use named::Named;
pub use preset::Configuration;
pub(crate) use text::parse_text;
