//! # cockpit-cli
//!
//! The library behind the `cockpit` command:
//!
//! - [`replay`]: re-run a training run recorded from the real (PyTorch) Cockpit in burn, in
//!   float64 on the CPU, and produce burn-cockpit's log for it.
//! - [`diagnose`]: what a Cockpit log shows, in words (the `cockpit-diagnose` crate).
//! - [`serve`]: the dashboard live in the browser, redrawn as a log grows.
//! - [`examples`]: a run's per-example table, most suspicious examples first.
//! - [`console`]: the command's one writer to standard output and error (a closed stream is
//!   no panic).

pub mod console;
pub use cockpit_diagnose as diagnose;
pub mod examples;
pub mod follow;
pub mod replay;
pub mod serve;
