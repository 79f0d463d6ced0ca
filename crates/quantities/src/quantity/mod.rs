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
mod inner_test;
mod loss;
mod mean_gsnr;
mod norm_test;
mod ortho_test;
mod parameters;
mod time;
mod update_size;

pub use alpha::Alpha;
pub(crate) use base::missing_per_sample as base_missing_per_sample;
pub use base::{Quantity, StepContext};
pub use bin_adaptation::BinAdaptation;
pub use cabs::CABS;
pub use distance::Distance;
pub use early_stopping::EarlyStopping;
pub use grad_hist1d::GradHist1d;
pub use grad_hist2d::GradHist2d;
pub use grad_norm::GradNorm;
pub use inner_test::InnerTest;
pub use loss::Loss;
pub use mean_gsnr::MeanGSNR;
pub use norm_test::NormTest;
pub use ortho_test::OrthoTest;
pub use parameters::{ParamView, Parameters};
pub use time::Time;
pub use update_size::UpdateSize;
