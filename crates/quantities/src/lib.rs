//! # cockpit-quantities
//!
//! The backend-generic core of burn-cockpit: Cockpit's quantities (Schneider, Dangel & Hennig,
//! NeurIPS 2021) for any burn model on any burn backend.
//!
//! burn 0.22 has no backend type parameter: everything works on [`burn::module::Module`],
//! [`burn::optim::GradientsParams`] and the tensors' own devices. One place asks which
//! backend a device is: the histogram engine ([`histogram::HistogramEngine::Auto`] counts on
//! the host for CPU backends, with `cockpit-kernels` on wgpu and cuda cards).
//!
//! - [`Snapshot`]: parameter snapshots through burn's `ModuleVisitor`, keyed by `ParamId`,
//!   with dotted names; tensors stay on the device.
//! - [`Schedule`]: Cockpit's `linear` and `logarithmic` track schedules.
//! - [`quantity`]: the [`Quantity`] trait and one file per quantity (Cockpit's 19, and
//!   GradParamRatio and Examples beyond Cockpit).
//! - [`examples`]: which examples — the per-example record, its table and ranking.
//! - [`persample`]: per-sample gradients, BackPACK's role (the `cockpit-persample` crate,
//!   re-exported): drop-ins for every parametered burn-nn layer and a
//!   [`persample::Recorder`] (fast path), or single-sample passes (exact fallback).
//! - [`curvature`]: Hessian-vector products from differences of gradients, Cockpit's power
//!   iteration and Lanczos, exact curvature diagonals of MLPs, Hutchinson's estimate.
//! - [`Cockpit`]: runs quantities at their steps with Cockpit's two-step bookkeeping.
//! - [`log`]: the Cockpit JSON log (json_tricks encoding) and the JSON-lines stream.
//! - [`record`]: the run record (SQLite) written as the run goes, read while it grows,
//!   exported to the log formats, and resumed from.
//! - [`sink`]: where each tracked step's values go as training runs (the stream, TensorBoard
//!   in `cockpit-tensorboard`, the Learner's board, a user's own); the Cockpit knows none.
//! - [`QuantityKind`]: Cockpit's quantities by name, each with its facts ([`QuantityType`]:
//!   value shape, network-wide reduction, needs, checked settings).
//! - Cockpit's presets ([`Configuration`]) and config files ([`CockpitConfig`]).
//!
//! Data flows one way: model + gradients (+ per-sample and curvature sources) → snapshots →
//! quantities → [`Output`] → log files (or metrics, or a dashboard, which only read the
//! output). The application picks a backend with burn's features (`flex`, `ndarray`, `wgpu`,
//! `cuda`), see the `burn-cockpit` crate.

mod call;
mod cockpit;
mod config;
pub mod curvature;
mod device;
mod error;
pub mod examples;
pub mod histogram;
mod info;
pub mod log;
mod output;
pub mod quantity;
pub mod record;
mod schedule;
pub mod sink;

pub use cockpit::{
    Cockpit, EpochLog, MAX_WARNINGS, OnBatch, ReadTiming, StepForward, StepOptions, StepReport,
    Stepped,
};
pub use cockpit_persample as persample;
pub use cockpit_persample::readback;
#[doc(no_inline)]
pub use cockpit_persample::{ParamEntry, Snapshot};
pub use config::{CockpitConfig, Configuration, Named, QuantityConfig};
pub use error::{CockpitError, ConfigFileError, QuantityError};
pub use info::{OptimizerInfo, StepInfo};
pub use output::{
    Estimate, ExampleShare, ExampleShares, Histogram1d, Histogram2d, HostArray, Output, Value,
};
#[doc(no_inline)]
pub use quantity::{Quantity, QuantityKind, QuantityType, Reduction, StepContext};
pub use schedule::Schedule;
