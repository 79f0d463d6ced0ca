//! Curvature without double backward, against independent references: dense Hessians of tiny
//! nets from unit-vector products, a quadratic with a known spectrum, the fixtures' exact
//! eigenvalues, and the Monte-Carlo diagonal in expectation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use crate::common::load;
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::GradientsParams;
use burn::tensor::{DType, Device, Tensor, TensorData};
use burn_cockpit::Value;
use burn_cockpit::curvature::{
    CurvatureSource, DiagonalKind, FiniteDifferenceHvp, lanczos, power_iteration,
};
use burn_cockpit::persample::readback::read_values;
use burn_cockpit::persample::{ParamEntry, Snapshot};
use burn_cockpit::quantity::QuantityKind;
use cockpit_cli::replay::{FixtureNet, LossKind, ReplayOptions, per_sample_loss, replay};

/// The fixture's net at its initial parameters, with the batch of `step`, in float64 on flex.
fn fixture_problem(
    name: &str,
    step: usize,
) -> (
    FixtureNet,
    Tensor<2>,
    Tensor<2>,
    LossKind,
    serde_json::Value,
) {
    let fixture = load(name);
    let device = Device::flex().autodiff();
    let model = FixtureNet::new(&fixture, &fixture.params, &device, DType::F64);
    let s = &fixture.steps[step];
    let [b, d] = [s.inputs.shape[0], s.inputs.shape[1]];
    let classes = fixture.linear_layers().last().unwrap().1;
    let f64_tensor = |data: Vec<f64>, shape: [usize; 2]| {
        Tensor::<2>::from_data(TensorData::new(data, shape), (&device, DType::F64))
    };
    let x = f64_tensor(s.inputs.data.clone(), [b, d]);
    let y = match fixture.loss {
        LossKind::Mse => f64_tensor(s.targets.data.clone(), [b, classes]),
        LossKind::CrossEntropy => {
            let mut onehot = vec![0.0; b * classes];
            for (n, c) in s.targets.data.iter().enumerate() {
                onehot[n * classes + *c as usize] = 1.0;
            }
            f64_tensor(onehot, [b, classes])
        }
    };
    // Only step 0 has the initial parameters; its exact Hessian is recorded in the extras.
    assert_eq!(step, 0);
    let extras = s.extras.get("hessian_exact").cloned().unwrap();
    (model, x, y, fixture.loss, extras)
}

fn fd_source(
    model: &FixtureNet,
    x: Tensor<2>,
    y: Tensor<2>,
    loss: LossKind,
) -> FiniteDifferenceHvp<FixtureNet> {
    FiniteDifferenceHvp::new(model, move |m: &FixtureNet| {
        let l = per_sample_loss(loss, m.forward(x.clone()), y.clone()).mean();
        Ok(GradientsParams::from_grads(l.backward(), m))
    })
}

/// A snapshot with the same layout as `params` from a flat host vector.
fn from_host(params: &Snapshot, values: &[f64]) -> Snapshot {
    let mut offset = 0;
    Snapshot::from_entries(
        params
            .entries()
            .iter()
            .map(|e| {
                let n = e.numel();
                let value = Tensor::<1>::from_data(
                    TensorData::new(values[offset..offset + n].to_vec(), [n]),
                    (&e.value.device(), e.value.dtype()),
                );
                offset += n;
                ParamEntry { value, ..e.clone() }
            })
            .collect(),
    )
}

fn flat(snapshot: &Snapshot) -> Vec<f64> {
    snapshot
        .entries()
        .iter()
        .flat_map(|e| read_values(e.value.clone()).unwrap())
        .collect()
}

/// The dense Hessian, column by column from unit-vector products (finite differences, f64).
fn dense_hessian(source: &dyn CurvatureSource, params: &Snapshot) -> Vec<Vec<f64>> {
    let d = params.numel();
    (0..d)
        .map(|j| {
            let mut unit = vec![0.0; d];
            unit[j] = 1.0;
            flat(&source.hvp(params, &from_host(params, &unit)).unwrap())
        })
        .collect()
}

#[allow(clippy::needless_range_loop)] // rotations of rows and columns p, q read best by index
/// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations (written here, independent of
/// the library's Lanczos).
fn symmetric_eigenvalues(mut a: Vec<Vec<f64>>) -> Vec<f64> {
    let n = a.len();
    for _ in 0..200 {
        let off: f64 = (0..n)
            .map(|i| {
                (0..n)
                    .filter(|&j| j != i)
                    .map(|j| a[i][j] * a[i][j])
                    .sum::<f64>()
            })
            .sum();
        if off < 1e-26 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[p][q] == 0.0 {
                    continue;
                }
                let phi = 0.5 * (2.0 * a[p][q]).atan2(a[q][q] - a[p][p]);
                let (s, c) = phi.sin_cos();
                for k in 0..n {
                    let (kp, kq) = (a[k][p], a[k][q]);
                    a[k][p] = c * kp - s * kq;
                    a[k][q] = s * kp + c * kq;
                }
                for k in 0..n {
                    let (pk, qk) = (a[p][k], a[q][k]);
                    a[p][k] = c * pk - s * qk;
                    a[q][k] = s * pk + c * qk;
                }
            }
        }
    }
    (0..n).map(|i| a[i][i]).collect()
}

/// The eigenvalue of largest magnitude.
fn dominant(eigenvalues: Vec<f64>) -> f64 {
    eigenvalues
        .into_iter()
        .max_by(|a, b| a.abs().total_cmp(&b.abs()))
        .unwrap()
}

/// The exact `diag_h` and `diag_ggn_exact` equal the diagonal of the dense Hessian built from
/// unit-vector products, and the fixtures' recorded exact sums; the dense Hessian's dominant
/// eigenvalue equals the recorded one.
#[test]
fn exact_diagonals_equal_the_dense_hessian() {
    for name in common::FIXTURES {
        let (model, x, y, loss, extras) = fixture_problem(name, 0);
        let params = Snapshot::of_params(&model);
        let fd = fd_source(&model, x.clone(), y.clone(), loss);
        let exact = model.curvature(x, loss, y, 1).unwrap();
        let dense = dense_hessian(&fd, &params);
        let diag_h: Vec<f64> = exact
            .diagonal(&params, DiagonalKind::Hessian)
            .unwrap()
            .into_iter()
            .flat_map(|t| read_values(t).unwrap())
            .collect();
        for (j, h) in diag_h.iter().enumerate() {
            assert!(
                (h - dense[j][j]).abs() <= 1e-7 * dense[j][j].abs().max(1.0),
                "{name}: H[{j},{j}] {h} vs dense {}",
                dense[j][j]
            );
        }
        // Per-parameter sums against the fixture's independent references.
        for (kind, key) in [
            (DiagonalKind::Hessian, "diag_sum_per_param"),
            (DiagonalKind::GgnExact, "ggn_diag_sum_per_param"),
        ] {
            let sums: Vec<f64> = exact
                .diagonal(&params, kind)
                .unwrap()
                .into_iter()
                .map(|t| read_values(t.sum()).unwrap()[0])
                .collect();
            let reference = common::flatten(&extras[key]);
            for (a, b) in sums.iter().zip(&reference) {
                assert!(
                    common::close(*a, *b, 1e-9, 1e-12),
                    "{name} {key}: {a} vs {b}"
                );
            }
        }
        let dominant = dominant(symmetric_eigenvalues(dense));
        let recorded = extras["dominant_eigenvalue"].as_f64().unwrap();
        assert!(
            common::close(dominant, recorded, 1e-6, 1e-9),
            "{name}: dominant {dominant} vs {recorded}"
        );
    }
}

/// Power iteration and Lanczos on `L(w, b) = mean((Xw + b − y)²)`, whose Hessian
/// `(2/N)[XᵀX, Xᵀ1; 1ᵀX, N]` is known in closed form.
#[test]
fn eigenvalues_of_a_quadratic_with_a_known_spectrum() {
    let device = Device::flex().autodiff();
    let model = LinearConfig::new(3, 1).init(&device);
    let n = 16;
    let xs: Vec<f32> = (0..n * 3)
        .map(|i| ((i * 37 % 17) as f32 - 8.0) / 4.0)
        .collect();
    let ys: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let x = Tensor::<2>::from_data(TensorData::new(xs.clone(), [n, 3]), &device);
    let y = Tensor::<2>::from_data(TensorData::new(ys, [n, 1]), &device);
    let source = FiniteDifferenceHvp::new(&model, move |m: &burn::nn::Linear| {
        let l = (m.forward(x.clone()) - y.clone()).square().mean();
        Ok(GradientsParams::from_grads(l.backward(), m))
    });
    // Closed form, parameters in visiting order (weight [3, 1], bias [1]).
    let mut h = vec![vec![0.0f64; 4]; 4];
    for row in 0..n {
        let feature = [
            xs[row * 3] as f64,
            xs[row * 3 + 1] as f64,
            xs[row * 3 + 2] as f64,
            1.0,
        ];
        for i in 0..4 {
            for j in 0..4 {
                h[i][j] += 2.0 / n as f64 * feature[i] * feature[j];
            }
        }
    }
    let top = symmetric_eigenvalues(h)
        .into_iter()
        .fold(f64::MIN, f64::max);
    let params = Snapshot::of_params(&model);
    let start = from_host(&params, &[0.3, 0.9, 0.5, 0.7]);
    let power = power_iteration(&source, &params, &start, 1e-6, 1e-9, 500).unwrap();
    let krylov = lanczos(&source, &params, &start, 1e-6, 4).unwrap();
    assert!(power.converged && krylov.converged);
    assert!(
        common::close(power.value, top, 1e-3, 1e-6),
        "power {} vs {top}",
        power.value
    );
    assert!(
        common::close(krylov.value, top, 1e-3, 1e-6),
        "lanczos {} vs {top}",
        krylov.value
    );
    assert!(
        krylov.products <= 4 && krylov.products < power.products,
        "{} vs {}",
        krylov.products,
        power.products
    );
    // A budget too small: the last estimate, flagged as not converged, no hang.
    let short = power_iteration(&source, &params, &start, 1e-12, 0.0, 2).unwrap();
    assert!(!short.converged && short.value.is_finite() && short.products == 2);
}

/// From burn-cockpit's own start vectors (not the recorded ones), Cockpit's power iteration
/// lands near the exact dominant eigenvalue (its loose stop leaves up to ~6 % below it), and
/// the default (warm-started Lanczos on exact products, relative residual 1e-2) lands on it to
/// ~1e-4.
#[test]
fn hess_max_ev_from_fresh_starts_is_near_the_exact_dominant_eigenvalue() {
    use burn_cockpit::quantity::{EigenMethod, HessMaxEV};
    for name in common::FIXTURES {
        let fixture = load(name);
        let exact = fixture.steps[0].extras["hessian_exact"]["dominant_eigenvalue"]
            .as_f64()
            .unwrap();
        let options = ReplayOptions {
            quantities: vec![QuantityKind::HessMaxEV],
            recorded_start_vectors: false,
            ..ReplayOptions::cpu_f64()
        };
        let default = replay(&fixture, &options).unwrap();
        let ours = default
            .output
            .get(0, "HessMaxEV")
            .and_then(Value::as_f64)
            .unwrap();
        assert!(
            common::close(ours, exact, 5e-4, 1e-9),
            "{name}: default {ours} vs exact {exact}"
        );
        // Cockpit's power iteration from a fresh start, through a config.
        let power = HessMaxEV::new(burn_cockpit::Schedule::every_step())
            .with_method(EigenMethod::cockpit_power());
        let mut cockpit = burn_cockpit::Cockpit::new(vec![Box::new(power)]).unwrap();
        let (model, x, y, loss, _) = fixture_problem(name, 0);
        let params = Snapshot::of_params(&model);
        let curvature = model.curvature(x.clone(), loss, y.clone(), 1).unwrap();
        let l = per_sample_loss(loss, model.forward(x), y).mean();
        let grads = GradientsParams::from_grads(l.backward(), &model);
        assert_eq!(
            params.len(),
            Snapshot::of_grads(&model, &grads).unwrap().len()
        );
        let info = burn_cockpit::StepInfo::new(l.detach()).with_curvature(curvature);
        cockpit.track(0, &model, &grads, info).unwrap();
        let power = cockpit
            .output()
            .get(0, "HessMaxEV")
            .and_then(Value::as_f64)
            .unwrap();
        assert!(
            (power - exact).abs() <= 0.07 * exact.abs(),
            "{name}: power {power} vs exact {exact}"
        );
    }
}

/// The exact products of `MlpCurvature` (R-operator, no finite differences) give the dense
/// Hessian that float64 central differences of autodiff gradients give, column by column, on
/// every fixture (ReLU, tanh, sigmoid; MSE and cross-entropy), and its dominant eigenvalue is
/// the one the fixture recorded from PyTorch.
#[test]
fn exact_products_equal_the_dense_hessian() {
    for name in common::FIXTURES {
        let (model, x, y, loss, extras) = fixture_problem(name, 0);
        let params = Snapshot::of_params(&model);
        let fd = fd_source(&model, x.clone(), y.clone(), loss);
        let exact = model.curvature(x, loss, y, 1).unwrap();
        let reference = dense_hessian(&fd, &params);
        let ours = dense_hessian(&exact, &params);
        let scale = reference
            .iter()
            .flatten()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        for (j, (a, b)) in ours.iter().zip(&reference).enumerate() {
            for (i, (u, v)) in a.iter().zip(b).enumerate() {
                assert!(
                    (u - v).abs() <= 1e-7 * scale,
                    "{name}: H[{i},{j}] exact {u} vs finite differences {v}"
                );
            }
        }
        let dominant = dominant(symmetric_eigenvalues(ours));
        let recorded = extras["dominant_eigenvalue"].as_f64().unwrap();
        assert!(
            common::close(dominant, recorded, 1e-9, 1e-12),
            "{name}: dominant {dominant} vs {recorded}"
        );
    }
}

/// In float32, HessMaxEV's default (warm-started Lanczos on exact products) converges at every
/// step of every fixture, to the float64 run's value, where central differences of float32
/// gradients left power iteration unconverged on most steps.
#[test]
fn hess_max_ev_converges_in_float32() {
    for name in common::FIXTURES {
        let fixture = load(name);
        let run = |dtype| {
            let options = ReplayOptions {
                quantities: vec![QuantityKind::HessMaxEV],
                recorded_start_vectors: false,
                dtype,
                ..ReplayOptions::cpu_f64()
            };
            replay(&fixture, &options).unwrap()
        };
        let (single, double) = (run(DType::F32), run(DType::F64));
        assert!(
            !single
                .warnings
                .iter()
                .any(|w| w.contains("did not converge")),
            "{name}: {:?}",
            single.warnings
        );
        for step in &fixture.steps {
            let value = |r: &cockpit_cli::replay::ReplayRun| {
                r.output
                    .get(step.step, "HessMaxEV")
                    .and_then(Value::as_f64)
                    .unwrap()
            };
            let (a, b) = (value(&single), value(&double));
            assert!(
                common::close(a, b, 1e-3, 1e-6),
                "{name} step {}: float32 {a} vs float64 {b}",
                step.step
            );
        }
    }
}

/// The Monte-Carlo GGN diagonal is unbiased: its mean over many draws equals the exact GGN
/// diagonal within a few standard errors, parameter by parameter.
#[test]
fn monte_carlo_ggn_is_unbiased() {
    for name in ["mlp_mse", "mlp_ce"] {
        let (model, x, y, loss, _) = fixture_problem(name, 0);
        let params = Snapshot::of_params(&model);
        let exact: Vec<f64> = model
            .curvature(x.clone(), loss, y.clone(), 0)
            .unwrap()
            .diagonal(&params, DiagonalKind::GgnExact)
            .unwrap()
            .into_iter()
            .map(|t| read_values(t.sum()).unwrap()[0])
            .collect();
        let draws = 400;
        let samples: Vec<Vec<f64>> = (0..draws)
            .map(|seed| {
                let mc = model
                    .curvature(x.clone(), loss, y.clone(), 1000 + seed)
                    .unwrap();
                mc.diagonal(&params, DiagonalKind::GgnMc)
                    .unwrap()
                    .into_iter()
                    .map(|t| read_values(t.sum()).unwrap()[0])
                    .collect()
            })
            .collect();
        for (p, truth) in exact.iter().enumerate() {
            let values: Vec<f64> = samples.iter().map(|s| s[p]).collect();
            let mean = values.iter().sum::<f64>() / draws as f64;
            let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>()
                / (draws as f64 - 1.0))
                .sqrt();
            let z = (mean - truth) / (sd / (draws as f64).sqrt()).max(1e-300);
            assert!(
                z.abs() < 5.0,
                "{name} parameter {p}: mean {mean}, exact {truth}, z {z}"
            );
        }
    }
}

#[test]
fn curvature_quantities_without_a_source_are_typed_errors() {
    let device = Device::flex().autodiff();
    let model = LinearConfig::new(2, 1).init(&device);
    let x = Tensor::<2>::from_data(TensorData::new(vec![1f32, 2.0, 3.0, 4.0], [2, 2]), &device);
    let loss = model.forward(x).square().mean();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let mut cockpit = burn_cockpit::Cockpit::from_kinds(
        [
            QuantityKind::Loss,
            QuantityKind::HessMaxEV,
            QuantityKind::HessTrace,
        ],
        &burn_cockpit::Schedule::every_step(),
    )
    .unwrap();
    let err = cockpit
        .track(
            0,
            &model,
            &grads,
            burn_cockpit::StepInfo::new(loss.detach()),
        )
        .and_then(burn_cockpit::StepReport::into_result)
        .unwrap_err();
    assert!(
        err.to_string().contains("HessMaxEV") && err.to_string().contains("curvature"),
        "{err}"
    );
    assert!(cockpit.output().get(0, "Loss").is_some());
    // Any model: products by finite differences, but no exact diagonal.
    let fd = FiniteDifferenceHvp::new(&model, |_m: &burn::nn::Linear| {
        Err(burn_cockpit::QuantityError::Unsupported("no data".into()))
    });
    assert!(
        fd.diagonal(&Snapshot::of_params(&model), DiagonalKind::Hessian)
            .is_err()
    );
    let _ = Module::num_params(&model);
}

/// Hutchinson's estimate of `diag_h` is unbiased: with many probes it lands within a few
/// standard errors (`Σ_{j≠i} H_ij² / m` per entry, from the dense Hessian) of the exact
/// diagonal.
#[test]
fn hutchinson_is_unbiased_within_its_documented_variance() {
    let (model, x, y, loss, _) = fixture_problem("mlp_ce", 0);
    let params = Snapshot::of_params(&model);
    let fd = fd_source(&model, x.clone(), y.clone(), loss);
    let dense = dense_hessian(&fd, &params);
    let probes = 300;
    let estimate: Vec<f64> =
        burn_cockpit::curvature::Hutchinson::new(fd_source(&model, x, y, loss), probes, 3)
            .diagonal(&params, DiagonalKind::Hessian)
            .unwrap()
            .into_iter()
            .flat_map(|t| read_values(t).unwrap())
            .collect();
    for (i, e) in estimate.iter().enumerate() {
        let variance: f64 = (0..dense.len())
            .filter(|&j| j != i)
            .map(|j| dense[i][j].powi(2))
            .sum::<f64>()
            / probes as f64;
        let z = (e - dense[i][i]) / variance.sqrt().max(1e-12);
        assert!(z.abs() < 5.0, "entry {i}: {e} vs {}, z {z}", dense[i][i]);
    }
}

/// HessMaxEV that does not converge within its budget stores the last estimate and warns, as
/// Cockpit does; it does not hang.
#[test]
fn hess_max_ev_without_convergence_warns_and_keeps_the_last_estimate() {
    use burn_cockpit::quantity::{EigenMethod, HessMaxEV};
    let device = Device::flex().autodiff();
    let model = LinearConfig::new(3, 2).init(&device);
    let x = Tensor::<2>::from_data(
        TensorData::new(
            (0..12).map(|i| i as f32 / 7.0 - 0.8).collect::<Vec<_>>(),
            [4, 3],
        ),
        &device,
    );
    let loss = model.forward(x.clone()).square().mean();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let source = FiniteDifferenceHvp::new(&model, move |m: &burn::nn::Linear| {
        Ok(GradientsParams::from_grads(
            m.forward(x.clone()).square().mean().backward(),
            m,
        ))
    });
    let strict =
        HessMaxEV::new(burn_cockpit::Schedule::every_step()).with_method(EigenMethod::Power {
            rtol: 0.0,
            atol: 0.0,
            max_products: 3,
        });
    let mut cockpit = burn_cockpit::Cockpit::new(vec![Box::new(strict)]).unwrap();
    let info = burn_cockpit::StepInfo::new(loss.detach()).with_curvature(source);
    cockpit.track(0, &model, &grads, info).unwrap();
    assert!(
        cockpit
            .output()
            .get(0, "HessMaxEV")
            .and_then(Value::as_f64)
            .unwrap()
            .is_finite()
    );
    assert!(
        cockpit
            .warnings()
            .iter()
            .any(|w| w.contains("did not converge within 3")),
        "{:?}",
        cockpit.warnings()
    );
}
