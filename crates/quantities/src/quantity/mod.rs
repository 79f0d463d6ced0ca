//! Cockpit's quantities, one per file, named as Cockpit names them.

mod alpha;
mod base;
mod bin_adaptation;
mod cabs;
mod distance;
mod early_stopping;
mod grad_hist1d;
mod grad_hist2d;
mod grad_norm;
mod gradient_tests;
mod hess_max_ev;
mod hess_trace;
mod kind;
mod loss;
mod mean_gsnr;
mod parameters;
mod scratch;
mod spec;
#[cfg(test)]
pub(crate) mod testing;
mod tic_diag;
mod time;
mod update_size;

pub use alpha::Alpha;
pub(crate) use base::missing_per_sample as base_missing_per_sample;
pub use base::{Enqueued, MAX_BINS, MAX_BINS_2D, Quantity, StepContext};
pub use bin_adaptation::BinAdaptation;
pub use cabs::CABS;
pub use distance::Distance;
pub use early_stopping::{EarlyStopping, EarlyStoppingSettings};
pub use grad_hist1d::{GradHist1d, GradHist1dSettings};
pub use grad_hist2d::{GradHist2d, GradHist2dSettings};
pub use grad_norm::GradNorm;
pub use gradient_tests::{InnerTest, NormTest, OrthoTest};
pub use hess_max_ev::{EigenMethod, HessMaxEV, HessMaxEVSettings};
pub use hess_trace::{HessTrace, HessTraceSettings};
pub use loss::Loss;
pub use mean_gsnr::{MeanGSNR, MeanGSNRSettings};
pub use parameters::{ParamView, Parameters};
pub use spec::{Needs, NoSettings, QuantitySpec, QuantityType, Reduction, ValueShape};
pub use tic_diag::{TICDiag, TICTrace, TicSettings};
pub use time::Time;
pub use update_size::UpdateSize;

// The one list of quantities: `QuantityKind::Name => Type`, alphabetical. A new quantity is
// its own file (the type, its `Quantity` and `QuantityType` impls) and, in this file, its
// `mod` and `pub use` lines and one line in this list.
kind::kinds! {
    Alpha => Alpha,
    CABS => CABS,
    Distance => Distance,
    EarlyStopping => EarlyStopping,
    GradHist1d => GradHist1d,
    GradHist2d => GradHist2d,
    GradNorm => GradNorm,
    HessMaxEV => HessMaxEV,
    HessTrace => HessTrace,
    InnerTest => InnerTest,
    Loss => Loss,
    MeanGSNR => MeanGSNR,
    NormTest => NormTest,
    OrthoTest => OrthoTest,
    Parameters => Parameters,
    TICDiag => TICDiag,
    TICTrace => TICTrace,
    Time => Time,
    UpdateSize => UpdateSize,
}
