//! The workspace's integration tests, one module per subject, built as one test binary.
//!
//! Every test binary links burn, wgpu and cubecl (about 200 MB in a debug build), so the
//! subjects share one binary rather than one each; run a subject alone with its module's name
//! as the filter, e.g. `cargo test --test integration per_sample::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The examples' shared modules (`examples/common/*.rs`) each include the SplitMix stream they
// draw from, as the examples build them; here several are one binary.
#![allow(clippy::duplicate_mod)]

#[macro_use]
mod common;

/// The example architectures (guide CNN, text transformer, autoencoder, encoder–decoder,
/// cifar10_3c3d), shared by the per-sample tests.
#[path = "../../examples/common/architectures.rs"]
mod architectures;

/// The flipped-label run of `examples/mislabeled.rs`, shared by the examples tests.
#[path = "../../examples/common/noisy_labels.rs"]
#[allow(dead_code)]
mod noisy_labels;

mod backend_reductions;
mod cifar3c3d;
mod cockpit_api;
mod curvature;
mod dashboard;
mod examples;
mod first_model;
mod fuzz;
mod healthy_runs;
mod imports;
mod keyed_variants;
mod kill_writes;
mod launch_ledger;
mod one_call;
mod pathologies;
mod per_sample;
mod per_sample_models;
mod position_losses;
mod read_ledger;
mod recorded_curvature;
mod replay_fixtures;
mod robustness;
mod run_record;
mod serial_depth;
mod tensorboard;
mod unseen_fixtures;
