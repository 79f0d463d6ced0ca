//! `cockpit replay` against the runs recorded from the real Cockpit: every quantity burn-cockpit
//! implements equals the fixture at every recorded step, within the fixture README's
//! tolerances, and has no value where Cockpit has none.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use burn_cockpit::{QuantityKind, Value};
use cockpit_cli::replay::{ReplayOptions, replay};
use common::{Backend, FIXTURES, assert_matches_fixture, close, load};

fn replay_on(
    backend: &Backend,
    name: &str,
) -> (cockpit_cli::replay::Fixture, cockpit_cli::replay::ReplayRun) {
    let fixture = load(name);
    let options = ReplayOptions {
        device: backend.device.clone(),
        dtype: backend.dtype,
        ..ReplayOptions::cpu_f64()
    };
    let run = replay(&fixture, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
    (fixture, run)
}

fn every_quantity_matches_every_fixture(backend: &Backend) {
    for name in FIXTURES {
        let (fixture, run) = replay_on(backend, name);
        let implemented: Vec<QuantityKind> = QuantityKind::implemented().collect();
        let compared = assert_matches_fixture(&fixture, &run, backend, &implemented);
        // 6 quantities at 8 steps, less Time (not compared) and UpdateSize's last step.
        assert!(compared >= 5 * 8 - 1, "{name}: only {compared} comparisons");
    }
}

fn parameter_layout_and_final_parameters_follow_pytorch(backend: &Backend) {
    for name in FIXTURES {
        let (fixture, run) = replay_on(backend, name);
        let Some(Value::Arrays(first)) = run.output.get(0, "Parameters") else {
            panic!("{name}: no Parameters at step 0");
        };
        for (ours, theirs) in first.iter().zip(&fixture.params) {
            assert_eq!(ours.shape, theirs.shape, "{name}: {}", theirs.name);
        }
        let final_params = fixture
            .final_params
            .as_ref()
            .expect("fixtures record final_params");
        for (ours, theirs) in run.final_params.iter().zip(final_params) {
            assert_eq!(ours.shape, theirs.shape);
            for (a, b) in ours.data.iter().zip(&theirs.data) {
                assert!(
                    close(*a, *b, backend.rel, backend.abs),
                    "{name}: final {} {a} vs {b}",
                    theirs.name
                );
            }
        }
    }
}

fn the_log_is_cockpit_format_and_reads_back(backend: &Backend) {
    let (_, run) = replay_on(backend, "mlp_ce");
    let dir = std::env::temp_dir().join(format!(
        "cockpit-replay-log-{}-{}",
        backend.name,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log.json");
    burn_cockpit::log::write_log(&path, &run.output).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Step keys are strings; per-parameter lists are plain lists; values are Cockpit's names.
    assert_eq!(json["3"]["GradNorm"].as_array().map(Vec::len), Some(4));
    assert!(json["6"]["UpdateSize"].is_array() && json["7"].get("UpdateSize").is_none());
    assert_eq!(burn_cockpit::log::read_log(&path).unwrap(), run.output);
    std::fs::remove_dir_all(&dir).ok();
}

on_every_backend!(
    every_quantity_matches_every_fixture,
    parameter_layout_and_final_parameters_follow_pytorch,
    the_log_is_cockpit_format_and_reads_back,
);
