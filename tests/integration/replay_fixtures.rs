//! `cockpit replay` against the runs recorded from the real Cockpit: every quantity burn-cockpit
//! implements equals the fixture at every recorded step, within the fixture README's
//! tolerances, and has no value where Cockpit has none.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use crate::common::{Backend, FIXTURES, assert_matches_fixture, close, load};
use burn_cockpit::Value;
use burn_cockpit::quantity::QuantityKind;
use cockpit_cli::replay::{ReplayOptions, replay};

/// Every quantity on the backend's device and float type; in float32, without HessMaxEV
/// (see `every_quantity_matches_every_fixture`).
fn options_for(backend: &Backend) -> ReplayOptions {
    let mut options = ReplayOptions {
        device: backend.device.clone(),
        dtype: backend.dtype,
        ..ReplayOptions::cpu_f64()
    };
    if backend.dtype != burn::tensor::DType::F64 {
        options.quantities.retain(|k| *k != QuantityKind::HessMaxEV);
    }
    options
}

fn replay_on(
    backend: &Backend,
    name: &str,
) -> (cockpit_cli::replay::Fixture, cockpit_cli::replay::ReplayRun) {
    let fixture = load(name);
    let mut run = replay(&fixture, &options_for(backend)).unwrap_or_else(|e| panic!("{name}: {e}"));
    // Every comparison with the real Cockpit goes through a run record: written, read back
    // and exported as the JSON log (byte for byte the log of the same values).
    let back = crate::run_record::through_record(&run.output);
    assert_eq!(
        back, run.output,
        "{name}: the record holds the values exactly"
    );
    run.output = back;
    (fixture, run)
}

fn every_quantity_matches_every_fixture(backend: &Backend) {
    for name in FIXTURES {
        let (fixture, run) = replay_on(backend, name);
        // In float32 (wgpu) central differences of gradients cross ReLU kinks inside ±εv
        // (CURVATURE_MATH §5: errors of several hundred percent on some ReLU steps), so the
        // power iteration is compared in float64 only; tests/integration/curvature.rs covers it further.
        // Cockpit's quantities: those the fixture records (burn-cockpit's own, such as
        // GradParamRatio, have nothing to compare with).
        let implemented: Vec<QuantityKind> = QuantityKind::ALL
            .into_iter()
            .filter(|k| backend.dtype == burn::tensor::DType::F64 || *k != QuantityKind::HessMaxEV)
            .filter(|k| {
                fixture
                    .steps
                    .iter()
                    .any(|s| s.quantities.contains_key(k.name()))
            })
            .collect();
        assert!(implemented.len() >= 15, "{implemented:?}");
        let compared = assert_matches_fixture(&fixture, &run, backend, &implemented);
        // Every recorded value of every compared quantity but Time (wall clock, never equal):
        // Alpha and UpdateSize have 7 steps, the rest 8.
        let expected: usize = fixture
            .steps
            .iter()
            .map(|s| {
                implemented
                    .iter()
                    .filter(|k| **k != QuantityKind::Time && s.quantities.contains_key(k.name()))
                    .count()
            })
            .sum();
        assert_eq!(compared, expected, "{name}");
        assert!(
            compared >= 8 * 10 - 2,
            "{name}: only {compared} comparisons"
        );
    }
}

fn variants_match_under_the_fixture_keys(backend: &Backend) {
    for name in FIXTURES {
        let fixture = load(name);
        let options = ReplayOptions {
            variants: true,
            ..options_for(backend)
        };
        let run = replay(&fixture, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut compared = 0;
        for step in &fixture.steps {
            for (key, theirs) in &step.variant_quantities {
                // Monte-Carlo variants are compared in expectation (tests/integration/curvature.rs).
                if key.contains("diag_ggn_mc") {
                    continue;
                }
                // scipy's eigsh ran in float32 (6e-7 from the exact λ_max): a looser check, and
                // in float64 only (float32 finite differences cross ReLU kinks).
                if QuantityKind::of_key(&run.output, key) == Some(QuantityKind::HessMaxEV) {
                    if backend.dtype == burn::tensor::DType::F64 {
                        let ours = run
                            .output
                            .get(step.step, key)
                            .and_then(Value::as_f64)
                            .unwrap();
                        let theirs = theirs.as_f64().unwrap();
                        assert!(
                            close(ours, theirs, 1e-5, 1e-8),
                            "{name}: {key} at {}: {ours} vs {theirs}",
                            step.step
                        );
                        compared += 1;
                    }
                    continue;
                }
                let ours = run
                    .output
                    .get(step.step, key)
                    .unwrap_or_else(|| panic!("{name}: no {key} at step {}", step.step));
                common::assert_value_matches(
                    ours,
                    theirs,
                    backend,
                    &format!("{name}: {key} at step {}", step.step),
                );
                compared += 1;
            }
        }
        // Two histogram variants, HessTrace, TICDiag, TICTrace with diag_ggn_exact, and (in
        // float64) HessMaxEV[use_power=False].
        let per_step = if backend.dtype == burn::tensor::DType::F64 {
            6
        } else {
            5
        };
        assert_eq!(compared, per_step * fixture.steps.len(), "{name}");
    }
}

fn cabs_and_early_stopping_are_refused_with_momentum(backend: &Backend) {
    let (fixture, run) = replay_on(backend, "mlp_ce");
    assert_eq!(fixture.optimizer.momentum, 0.9);
    for key in ["CABS", "EarlyStopping"] {
        assert!(run.output.series(key).is_empty(), "{key}");
        assert!(
            run.refused[key].contains("zero-momentum SGD"),
            "{}",
            run.refused[key]
        );
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
    variants_match_under_the_fixture_keys,
    cabs_and_early_stopping_are_refused_with_momentum,
    parameter_layout_and_final_parameters_follow_pytorch,
    the_log_is_cockpit_format_and_reads_back,
);
