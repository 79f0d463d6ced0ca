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
    /// Merge the two gradient bins that meet at 0 before comparing histogram counts.
    pub merge_zero_edge: bool,
}

/// burn's default CPU backend in float64: the fixture README's tolerances.
pub fn flex() -> Backend {
    Backend {
        name: "flex",
        device: Device::flex(),
        dtype: DType::F64,
        rel: 1e-6,
        abs: 1e-9,
        merge_zero_edge: false,
    }
}

/// wgpu computes in float32: the same test bodies with float32 tolerances. Adapted histogram
/// ranges then come from float32 maxima: the many exactly-zero gradient elements of dead ReLU
/// units sit on the central bin edge of a symmetric range, and `(0 − lo)·bins/(hi − lo)` rounds
/// to either side of it depending on the last bit of the range (on mlp_mse, 189 of 344 elements
/// at one step). The two bins meeting at 0 are merged before counts are compared.
#[cfg(feature = "wgpu")]
pub fn wgpu() -> Backend {
    Backend {
        name: "wgpu",
        device: Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        dtype: DType::F32,
        rel: 2e-3,
        abs: 1e-5,
        merge_zero_edge: true,
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
        Value::Estimate(e) => e.values.clone(),
        Value::Arrays(arrays) => arrays.iter().flat_map(|a| a.data.clone()).collect(),
        other => panic!("unexpected value {other:?}"),
    }
}

/// Counts may differ only by elements that sit on a bin edge moving to a neighbouring bin:
/// equal totals and at most `moves` elements moved.
pub const HISTOGRAM_MOVES: f64 = 3.0;

/// Adds the gradient bins `x_bins/2 − 1` and `x_bins/2` (meeting at 0 on a symmetric range)
/// into one, in a row-major `[x_bins, y_bins]` histogram.
fn merge_zero_edge(hist: &[f64], x_bins: usize) -> Vec<f64> {
    let y_bins = hist.len() / x_bins;
    let mut merged = hist.to_vec();
    if x_bins >= 2 && x_bins.is_multiple_of(2) {
        let (left, right) = (x_bins / 2 - 1, x_bins / 2);
        for y in 0..y_bins {
            merged[left * y_bins + y] += merged[right * y_bins + y];
            merged[right * y_bins + y] = 0.0;
        }
    }
    merged
}

fn assert_counts(ours: &[f64], theirs: &[f64], x_bins: usize, backend: &Backend, what: &str) {
    let (ours, theirs) = if backend.merge_zero_edge {
        (
            merge_zero_edge(ours, x_bins),
            merge_zero_edge(theirs, x_bins),
        )
    } else {
        (ours.to_vec(), theirs.to_vec())
    };
    assert_eq!(ours.len(), theirs.len(), "{what}: bins");
    let total: (f64, f64) = (ours.iter().sum(), theirs.iter().sum());
    assert_eq!(total.0, total.1, "{what}: total count");
    let moved: f64 = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / 2.0;
    assert!(
        moved <= HISTOGRAM_MOVES,
        "{what}: {moved} elements in other bins\nours   {ours:?}\ntheirs {theirs:?}"
    );
}

fn assert_edges(ours: &[f64], theirs: &serde_json::Value, backend: &Backend, what: &str) {
    let theirs = flatten(theirs);
    assert_eq!(ours.len(), theirs.len(), "{what}: edges");
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(
            close(*a, *b, backend.rel, backend.abs),
            "{what}: edge {a} vs {b}"
        );
    }
}

fn assert_hist2d(
    ours: &burn_cockpit::Histogram2d,
    theirs: &serde_json::Value,
    backend: &Backend,
    what: &str,
) {
    let hist: Vec<f64> = ours.hist.iter().map(|c| *c as f64).collect();
    assert_counts(&hist, &flatten(&theirs["hist"]), ours.bins.0, backend, what);
    assert_edges(&ours.x_edges, &theirs["edges"][0], backend, what);
    assert_edges(&ours.y_edges, &theirs["edges"][1], backend, what);
}

/// Compares one of our values with the fixture's recorded JSON value.
pub fn assert_value_matches(
    ours: &burn_cockpit::Value,
    theirs: &serde_json::Value,
    backend: &Backend,
    what: &str,
) {
    use burn_cockpit::Value;
    match ours {
        Value::Hist1d(h) => {
            assert_counts(
                &h.hist,
                &flatten(&theirs["hist"]),
                h.hist.len(),
                backend,
                what,
            );
            assert_edges(&h.edges, &theirs["edges"], backend, what);
        }
        Value::Hist2d(h) => {
            assert_hist2d(h, theirs, backend, what);
            if !h.individual.is_empty() {
                assert_eq!(
                    theirs["param_groups"].as_u64(),
                    Some(h.individual.len() as u64),
                    "{what}"
                );
                for (k, single) in h.individual.iter().enumerate() {
                    assert_hist2d(
                        single,
                        &theirs[format!("param_{k}")],
                        backend,
                        &format!("{what} param_{k}"),
                    );
                }
            }
        }
        other => {
            let (ours, theirs) = (numbers(other), flatten(theirs));
            assert_eq!(ours.len(), theirs.len(), "{what}");
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    close(*a, *b, backend.rel, backend.abs),
                    "{what}[{i}]: ours {a}, reference {b}"
                );
            }
        }
    }
}

/// Each of `kinds` in `run` equals the fixture's recorded value at every step (Time only by
/// presence), and has no value where the fixture has none. Returns the number of
/// (quantity, step) pairs compared by value.
pub fn assert_matches_fixture(
    fixture: &Fixture,
    run: &cockpit_cli::replay::ReplayRun,
    backend: &Backend,
    kinds: &[burn_cockpit::quantity::QuantityKind],
) -> usize {
    use burn_cockpit::quantity::QuantityKind;
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
                (None, Some(_)) => panic!(
                    "{name}: {key} is missing at step {} ({:?})",
                    step.step,
                    run.refused.get(key)
                ),
                (Some(_), Some(_)) if kind == QuantityKind::Time => {}
                (Some(ours), Some(theirs)) => {
                    let what = format!("{name} on {}: {key} at step {}", backend.name, step.step);
                    assert_value_matches(ours, theirs, backend, &what);
                    compared += 1;
                }
            }
        }
    }
    compared
}

/// Casts every float parameter of a module to a float type (still tracked by autodiff).
pub struct ToDType(pub burn::tensor::DType);

impl burn::module::ModuleMapper for ToDType {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let require_grad = tensor.is_require_grad();
        // The cast is a graph op: detach after it, then track the new leaf.
        let cast = tensor.cast(self.0).detach();
        let cast = if require_grad {
            cast.require_grad()
        } else {
            cast
        };
        burn::module::Param::from_mapped_value(id, cast, mapper)
    }
}

/// Parameters moved to a device (`.0`) in a float type (`.1`), tracked, ids kept.
pub struct Moved(pub Device, pub DType);

impl burn::module::ModuleMapper for Moved {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let moved = tensor
            .to_device(&self.0)
            .cast(self.1)
            .detach()
            .require_grad();
        burn::module::Param::from_mapped_value(id, moved, mapper)
    }
}

/// `model` with its parameters set to `values` (matched by id; tracked by autodiff).
pub fn with_params<M: burn::module::Module>(
    model: &M,
    values: &burn_cockpit::persample::Snapshot,
) -> M {
    struct Set<'a>(&'a burn_cockpit::persample::Snapshot);
    impl burn::module::ModuleMapper for Set<'_> {
        fn map_float<const D: usize>(
            &mut self,
            param: burn::module::Param<burn::tensor::Tensor<D>>,
        ) -> burn::module::Param<burn::tensor::Tensor<D>> {
            let (id, tensor, mapper) = param.consume();
            let shape = tensor.shape();
            let value = match self.0.get(id) {
                Some(entry) => burn::tensor::Tensor::<1>::from_data(
                    entry.value.to_data(),
                    (&tensor.device(), tensor.dtype()),
                )
                .reshape(shape),
                None => tensor,
            };
            burn::module::Param::from_mapped_value(id, value.detach().require_grad(), mapper)
        }
    }
    model.clone().map(&mut Set(values))
}

/// Every quantity that reads per-sample gradients.
pub const PER_SAMPLE: [burn_cockpit::quantity::QuantityKind; 9] = [
    burn_cockpit::quantity::QuantityKind::Alpha,
    burn_cockpit::quantity::QuantityKind::CABS,
    burn_cockpit::quantity::QuantityKind::EarlyStopping,
    burn_cockpit::quantity::QuantityKind::GradHist1d,
    burn_cockpit::quantity::QuantityKind::GradHist2d,
    burn_cockpit::quantity::QuantityKind::InnerTest,
    burn_cockpit::quantity::QuantityKind::MeanGSNR,
    burn_cockpit::quantity::QuantityKind::NormTest,
    burn_cockpit::quantity::QuantityKind::OrthoTest,
];

/// The number `key` of a Cockpit's output at `step`.
pub fn float(cockpit: &burn_cockpit::Cockpit, step: usize, key: &str) -> f64 {
    cockpit
        .output()
        .get(step, key)
        .and_then(burn_cockpit::Value::as_f64)
        .unwrap_or_else(|| panic!("no {key} at {step}"))
}

/// The counts of histogram `key` (1-d or 2-d) of a Cockpit's output at `step`.
pub fn histogram_counts(cockpit: &burn_cockpit::Cockpit, step: usize, key: &str) -> Vec<f64> {
    match cockpit.output().get(step, key) {
        Some(burn_cockpit::Value::Hist1d(h)) => h.hist.clone(),
        Some(burn_cockpit::Value::Hist2d(h)) => h.hist.iter().map(|c| *c as f64).collect(),
        other => panic!("{key}: {other:?}"),
    }
}

/// `max_i |ours_i − oracle_i| ≤ rel · max_i |oracle_i|` (a zero oracle is refused: it would
/// hold for anything).
pub fn assert_max_close(what: &str, ours: &[f64], oracle: &[f64], rel: f64) {
    assert_eq!(ours.len(), oracle.len(), "{what}: lengths");
    let scale = oracle.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(scale > 0.0, "{what}: the oracle is zero");
    let worst = ours
        .iter()
        .zip(oracle)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        worst <= rel * scale,
        "{what}: max deviation {worst:e} > {rel:e} × {scale:e}\nours   {ours:?}\noracle {oracle:?}"
    );
}
