//! # burn-cockpit
//!
//! [Cockpit](https://github.com/f-dangel/cockpit) (Schneider, Dangel & Hennig, NeurIPS 2021) —
//! the training-debugging tool for deep networks — for the [burn](https://burn.dev) framework.
//!
//! Attach a [`Cockpit`] to a training loop and call [`Cockpit::track`] once per step, after
//! `backward` and before the optimizer step; write Cockpit's JSON log with [`Cockpit::write`].
//! Everything is re-exported from [`cockpit_quantities`].
//!
//! With burn-train's `Learner`, [`train::CockpitLearner`] instruments the model and registers
//! one metric per quantity (re-exported from [`cockpit_train`]); [`plot::save`] draws Cockpit's
//! dashboard from the output or a log (re-exported from [`cockpit_plot`]).
//!
//! ## Backends (cargo features)
//!
//! | feature | backend | device |
//! |---|---|---|
//! | `flex` (default) | burn's pure-Rust CPU backend | `Device::flex()` |
//! | `ndarray` | burn's deprecated ndarray CPU backend | `Device::ndarray()` |
//! | `wgpu` | GPU through wgpu (Vulkan, Metal, DX12, GL) | `Device::wgpu(..)` |
//!
//! [`backend::device`] picks one at run time from the enabled features, or from the
//! `BURN_COCKPIT_DEVICE` environment variable.

/// What a run's log says, in words (the `cockpit-diagnose` crate).
pub use cockpit_diagnose as diagnose;
/// Cockpit's dashboard drawn in Rust (the `cockpit-plot` crate).
pub use cockpit_plot as plot;
pub use cockpit_quantities::{
    Cockpit, CockpitConfig, CockpitError, Configuration, EpochLog, Histogram1d, Histogram2d,
    HostArray, Named, OptimizerInfo, Output, QuantityConfig, QuantityError, Schedule, StepInfo,
    Value, curvature, histogram, log, persample, quantity, readback,
};
// Types whose home is a module (`quantity`, `persample`): one page each, there.
#[doc(no_inline)]
pub use cockpit_quantities::{
    ParamEntry, Quantity, QuantityKind, QuantityType, Reduction, Snapshot, StepContext,
};
/// Cockpit quantities as burn-train metrics (the `cockpit-train` crate).
pub use cockpit_train as train;

pub mod backend;
