//! Shared helpers of the integration tests: vendored fixtures, tolerances, backends.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use burn::tensor::{DType, Device};
use cockpit_cli::replay::Fixture;

/// The fixtures recorded from the real Cockpit, vendored in `tests/fixtures/`.
pub const FIXTURES: [&str; 3] = ["mlp_mse", "mlp_ce", "deep_mlp_ce"];

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"))
}

pub fn load(name: &str) -> Fixture {
    Fixture::load(fixture_path(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// A backend the test bodies run on, with the float type and tolerance it supports.
#[derive(Debug, Clone)]
pub struct Backend {
    pub name: &'static str,
    pub device: Device,
    pub dtype: DType,
    /// Relative tolerance; `abs` is the absolute floor near zero.
    pub rel: f64,
    pub abs: f64,
}

/// burn's default CPU backend in float64: the fixture README's tolerances.
pub fn flex() -> Backend {
    Backend {
        name: "flex",
        device: Device::flex(),
        dtype: DType::F64,
        rel: 1e-6,
        abs: 1e-9,
    }
}

/// wgpu computes in float32: the same test bodies with float32 tolerances.
#[cfg(feature = "wgpu")]
pub fn wgpu() -> Backend {
    Backend {
        name: "wgpu",
        device: Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        dtype: DType::F32,
        rel: 2e-3,
        abs: 1e-5,
    }
}

/// Whether `ours` is within tolerance of `reference`.
pub fn close(ours: f64, reference: f64, rel: f64, abs: f64) -> bool {
    (ours - reference).abs() <= abs.max(rel * reference.abs())
}

/// Flattens a JSON number or nested list of numbers.
pub fn flatten(json: &serde_json::Value) -> Vec<f64> {
    match json {
        serde_json::Value::Number(n) => vec![n.as_f64().unwrap_or(f64::NAN)],
        serde_json::Value::Array(items) => items.iter().flat_map(flatten).collect(),
        other => panic!("not numeric: {other}"),
    }
}

/// Runs one test body on every enabled backend.
#[macro_export]
macro_rules! on_every_backend {
    ($($body:ident),* $(,)?) => {
        mod flex_backend {
            $( #[test] fn $body() { super::$body(&super::common::flex()); } )*
        }
        #[cfg(feature = "wgpu")]
        mod wgpu_backend {
            $( #[test] fn $body() { super::$body(&super::common::wgpu()); } )*
        }
    };
}

fn numbers(value: &burn_cockpit::Value) -> Vec<f64> {
    use burn_cockpit::Value;
    match value {
        Value::Float(v) => vec![*v],
        Value::List(v) => v.clone(),
        Value::Arrays(arrays) => arrays.iter().flat_map(|a| a.data.clone()).collect(),
        other => panic!("unexpected value {other:?}"),
    }
}

/// Each of `kinds` in `run` equals the fixture's recorded value at every step (Time only by
/// presence), and has no value where the fixture has none. Returns the number of
/// (quantity, step) pairs compared by value.
pub fn assert_matches_fixture(
    fixture: &Fixture,
    run: &cockpit_cli::replay::ReplayRun,
    backend: &Backend,
    kinds: &[burn_cockpit::QuantityKind],
) -> usize {
    use burn_cockpit::QuantityKind;
    let name = fixture.name.as_deref().unwrap_or("fixture");
    let mut compared = 0;
    for &kind in kinds {
        let key = kind.name();
        for step in &fixture.steps {
            let ours = run.output.get(step.step, key);
            let theirs = step.quantities.get(key);
            match (ours, theirs) {
                (None, None) => {}
                (Some(_), None) => {
                    panic!(
                        "{name}: {key} has a value at step {} where Cockpit has none",
                        step.step
                    )
                }
                (None, Some(_)) => panic!("{name}: {key} is missing at step {}", step.step),
                (Some(_), Some(_)) if kind == QuantityKind::Time => {}
                (Some(ours), Some(theirs)) => {
                    let (ours, theirs) = (numbers(ours), flatten(theirs));
                    assert_eq!(
                        ours.len(),
                        theirs.len(),
                        "{name}: {key} at step {}",
                        step.step
                    );
                    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                        assert!(
                            close(*a, *b, backend.rel, backend.abs),
                            "{name} on {}: {key}[{i}] at step {}: ours {a}, reference {b}",
                            backend.name,
                            step.step
                        );
                    }
                    compared += 1;
                }
            }
        }
    }
    compared
}
