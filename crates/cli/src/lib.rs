//! # cockpit-cli
//!
//! The library behind the `cockpit` command:
//!
//! - [`replay`]: re-run a training run recorded from the real (PyTorch) Cockpit in burn, in
//!   float64 on the CPU, and produce burn-cockpit's log for it.
//! - [`diagnose`]: flag the training pathologies a Cockpit log shows, with their evidence.

pub mod diagnose;
pub mod replay;
