//! Cockpit's quantities, one per file, named as Cockpit names them.

mod base;
mod carried;
mod kind;
mod spec;
#[cfg(test)]
pub(crate) mod testing;

pub use crate::histogram::axis::{MAX_BINS, MAX_BINS_2D};
pub(crate) use base::missing_per_sample as base_missing_per_sample;
pub use base::{Enqueued, Quantity, QuantityType, StepContext};
pub use carried::{Carried, CarriedError, HostParam};
pub(crate) use carried::{
    put_len as carried_put_len, put_text as carried_put_text, text as carried_text,
};
pub use spec::{Needs, NoSettings, QuantitySpec, Reduction, ValueShape};

// The one list of quantities: `file => Kind, …;`, by file. Each line declares the file's
// module, re-exports what it makes public (the quantity's type, named as its kind, and its
// settings) and adds its kinds to `QuantityKind`. A new quantity is its own file and one line
// here.
kind::kinds! {
    alpha => Alpha;
    cabs => CABS;
    distance => Distance;
    early_stopping => EarlyStopping;
    examples => Examples;
    grad_hist1d => GradHist1d;
    grad_hist2d => GradHist2d;
    grad_norm => GradNorm;
    grad_param_ratio => GradParamRatio;
    gradient_tests => InnerTest, NormTest, OrthoTest;
    hess_max_ev => HessMaxEV;
    hess_trace => HessTrace;
    loss => Loss;
    mean_gsnr => MeanGSNR;
    parameters => Parameters;
    tic_diag => TICDiag, TICTrace;
    time => Time;
    update_size => UpdateSize;
}
