//! # burn-cockpit
//!
//! [Cockpit](https://github.com/f-dangel/cockpit) (Schneider, Dangel & Hennig, NeurIPS 2021) —
//! the training-debugging tool for deep networks — for the [burn](https://burn.dev) framework.
//!
//! Attach a [`Cockpit`] to a training loop and call [`Cockpit::step`] once per step (it runs
//! the forward and backward pass and hands back the gradients for the optimizer), or
//! [`Cockpit::track`] after your own `backward` and before the optimizer step; write Cockpit's
//! JSON log with [`Cockpit::write`]. [`prelude`] has what a loop needs. Everything is
//! re-exported from [`cockpit_quantities`].
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
//! | `cuda` | NVIDIA GPUs through CUDA (burn's collective operations, DDP) | `Device::cuda(..)` |
//!
//! [`backend::device`] picks one at run time from the enabled features, or from the
//! `BURN_COCKPIT_DEVICE` environment variable.

/// What a run's log says, in words (the `cockpit-diagnose` crate).
pub use cockpit_diagnose as diagnose;
/// Cockpit's dashboard drawn in Rust (the `cockpit-plot` crate).
pub use cockpit_plot as plot;
pub use cockpit_quantities::{
    Cockpit, CockpitConfig, CockpitError, ConfigFileError, Configuration, EpochLog, Estimate,
    ExampleShare, ExampleShares, Histogram1d, Histogram2d, HostArray, Named, OnBatch,
    OptimizerInfo, Output, QuantityConfig, QuantityError, ReadTiming, Schedule, StepForward,
    StepInfo, StepOptions, StepReport, Stepped, Value, curvature, examples, histogram, log,
    persample, quantity, record, sink,
};
/// Cockpit's values as TensorBoard event files, a sink (the `cockpit-tensorboard` crate).
pub use cockpit_tensorboard as tensorboard;
/// Cockpit quantities as burn-train metrics (the `cockpit-train` crate).
pub use cockpit_train as train;

pub mod backend;

/// What a training loop needs, in one `use burn_cockpit::prelude::*;`: the [`Cockpit`], its
/// presets and schedules, the optimizer and step types, the loss on the network's output
/// ([`OutputLoss`](crate::curvature::OutputLoss)) and the per-sample losses
/// ([`loss`](crate::persample::loss)). The drop-in layers stay in [`persample`] (their names
/// are burn-nn's).
pub mod prelude {
    pub use crate::curvature::OutputLoss;
    pub use crate::persample::loss;
    pub use crate::plot::PlotOptions;
    pub use crate::quantity::QuantityKind;
    pub use crate::{
        Cockpit, Configuration, EpochLog, OnBatch, OptimizerInfo, Schedule, StepInfo, StepOptions,
        StepReport,
    };
}
