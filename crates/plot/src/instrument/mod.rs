//! One file per Cockpit instrument, named as Cockpit names it.

pub mod alpha_gauge;
pub mod base;
pub mod cabs_gauge;
pub mod distance_gauge;
pub mod early_stopping_gauge;
pub mod examples_gauge;
pub mod grad_norm_gauge;
pub mod gradient_tests_gauge;
pub mod histogram_1d_gauge;
pub mod histogram_2d_gauge;
pub mod hyperparameter_gauge;
pub mod max_ev_gauge;
pub mod mean_gsnr_gauge;
pub mod performance_gauge;
pub mod quantity_gauge;
pub mod tic_gauge;
pub mod trace_gauge;
