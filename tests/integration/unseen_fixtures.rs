//! `cockpit replay` on fixtures it has never seen: random widths, depths, activations, losses,
//! batch sizes, learning rates and momenta. The expected values come from an independent
//! host-side float64 implementation of the MLP (forward, hand-written backward, PyTorch SGD)
//! in this file; nothing of burn-cockpit is used to produce them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use crate::common::{Backend, assert_matches_fixture};
use burn_cockpit::quantity::QuantityKind;
use cockpit_cli::replay::{Fixture, ReplayOptions, replay};
use serde_json::{Value as Json, json};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() * n as f64) as usize % n
    }
}

#[derive(Clone, Copy)]
enum Act {
    Relu,
    Sigmoid,
    Tanh,
}

impl Act {
    fn apply(self, z: f64) -> f64 {
        match self {
            Act::Relu => z.max(0.0),
            Act::Sigmoid => 1.0 / (1.0 + (-z).exp()),
            Act::Tanh => z.tanh(),
        }
    }
    fn derivative(self, z: f64) -> f64 {
        match self {
            Act::Relu => f64::from(u8::from(z > 0.0)),
            Act::Sigmoid => {
                let s = 1.0 / (1.0 + (-z).exp());
                s * (1.0 - s)
            }
            Act::Tanh => 1.0 - z.tanh().powi(2),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Act::Relu => "relu",
            Act::Sigmoid => "sigmoid",
            Act::Tanh => "tanh",
        }
    }
}

/// A layer: PyTorch-layout weight `[out][in]`, bias, and the activation after it.
struct Layer {
    w: Vec<Vec<f64>>,
    b: Vec<f64>,
    act: Option<Act>,
}

/// Loss and per-parameter gradients of the mean loss, by hand.
fn loss_and_grads(
    layers: &[Layer],
    x: &[Vec<f64>],
    y: &[Vec<f64>],
    ce: bool,
) -> (f64, Vec<Vec<f64>>) {
    let batch = x.len();
    // Forward, keeping pre-activations and inputs of every layer.
    let mut inputs = vec![x.to_vec()];
    let mut pre = Vec::new();
    for layer in layers {
        let a = inputs.last().unwrap();
        let z: Vec<Vec<f64>> = a
            .iter()
            .map(|row| {
                layer
                    .w
                    .iter()
                    .zip(&layer.b)
                    .map(|(w, b)| w.iter().zip(row).map(|(w, a)| w * a).sum::<f64>() + b)
                    .collect()
            })
            .collect();
        let out = z
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| layer.act.map_or(*v, |f| f.apply(*v)))
                    .collect()
            })
            .collect();
        pre.push(z);
        inputs.push(out);
    }
    let f = inputs.last().unwrap();
    let classes = f[0].len();
    let mut loss = 0.0;
    let mut delta: Vec<Vec<f64>> = Vec::new();
    for n in 0..batch {
        if ce {
            let m = f[n].iter().cloned().fold(f64::MIN, f64::max);
            let lse = m + f[n].iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            let target = y[n][0] as usize;
            loss += (lse - f[n][target]) / batch as f64;
            delta.push(
                (0..classes)
                    .map(|c| {
                        ((f[n][c] - lse).exp() - f64::from(u8::from(c == target))) / batch as f64
                    })
                    .collect(),
            );
        } else {
            loss += f[n]
                .iter()
                .zip(&y[n])
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
                / (classes * batch) as f64;
            delta.push(
                f[n].iter()
                    .zip(&y[n])
                    .map(|(a, b)| 2.0 * (a - b) / (classes * batch) as f64)
                    .collect(),
            );
        }
    }
    let mut grads = vec![Vec::new(); 2 * layers.len()];
    for l in (0..layers.len()).rev() {
        if let Some(act) = layers[l].act {
            for n in 0..batch {
                for (d, z) in delta[n].iter_mut().zip(&pre[l][n]) {
                    *d *= act.derivative(*z);
                }
            }
        }
        let a = &inputs[l];
        let (d_out, d_in) = (layers[l].w.len(), layers[l].w[0].len());
        let mut gw = vec![0.0; d_out * d_in];
        let mut gb = vec![0.0; d_out];
        for n in 0..batch {
            for o in 0..d_out {
                gb[o] += delta[n][o];
                for i in 0..d_in {
                    gw[o * d_in + i] += delta[n][o] * a[n][i];
                }
            }
        }
        grads[2 * l] = gw;
        grads[2 * l + 1] = gb;
        delta = (0..batch)
            .map(|n| {
                (0..d_in)
                    .map(|i| (0..d_out).map(|o| layers[l].w[o][i] * delta[n][o]).sum())
                    .collect()
            })
            .collect();
    }
    (loss, grads)
}

fn flat(layers: &[Layer]) -> Vec<Vec<f64>> {
    layers
        .iter()
        .flat_map(|l| [l.w.iter().flatten().copied().collect(), l.b.clone()])
        .collect()
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

fn diff_norms(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(a, b)| norm(&a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>()))
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn unbiased_var(v: &[f64]) -> f64 {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)
}

/// The single-step per-sample quantities from per-sample gradients `per[n]` (flattened), by
/// their definitions (COCKPIT_SPEC §2).
fn per_sample_quantities(
    per: &[Vec<f64>],
    theta: &[f64],
    loss: f64,
    lr: f64,
    plain_sgd: bool,
) -> Vec<(&'static str, Json)> {
    let b = per.len() as f64;
    let d = per[0].len();
    let g: Vec<f64> = (0..d)
        .map(|j| per.iter().map(|p| p[j]).sum::<f64>() / b)
        .collect();
    let g2 = dot(&g, &g);
    // Σ_n ‖g_n − g‖² and the projections π_n = g_nᵀg.
    let spread: f64 = per
        .iter()
        .map(|p| p.iter().zip(&g).map(|(a, m)| (a - m).powi(2)).sum::<f64>())
        .sum();
    let pi: Vec<f64> = per.iter().map(|p| dot(p, &g)).collect();
    let ortho: f64 = per
        .iter()
        .zip(&pi)
        .map(|(p, pi)| {
            p.iter()
                .zip(&g)
                .map(|(a, m)| (a - pi / g2 * m).powi(2))
                .sum::<f64>()
        })
        .sum();
    let sum_sq: Vec<f64> = (0..d)
        .map(|j| per.iter().map(|p| p[j] * p[j]).sum())
        .collect();
    let mut out = vec![
        ("NormTest", json!((spread / ((b - 1.0) * b * g2)).sqrt())),
        (
            "InnerTest",
            json!(
                (pi.iter().map(|p| (p - g2).powi(2)).sum::<f64>() / ((b - 1.0) * b * g2 * g2))
                    .sqrt()
            ),
        ),
        ("OrthoTest", json!((ortho / ((b - 1.0) * b * g2)).sqrt())),
        (
            "MeanGSNR",
            json!(
                (0..d)
                    .map(|j| g[j] * g[j] / (sum_sq[j] / b - g[j] * g[j] + 1e-5))
                    .sum::<f64>()
                    / d as f64
            ),
        ),
    ];
    if plain_sgd {
        let biased_trace: f64 = (0..d).map(|j| sum_sq[j] / b - g[j] * g[j]).sum();
        out.push(("CABS", json!(lr * biased_trace / loss)));
        let es: f64 = (0..d)
            .map(|j| g[j] * g[j] / ((sum_sq[j] - b * g[j] * g[j]) / (b - 1.0) + 1e-5))
            .sum::<f64>()
            / d as f64;
        out.push(("EarlyStopping", json!(1.0 - b * es)));
    }
    let mut hist1 = vec![0.0; 100];
    let mut hist2 = vec![vec![0i64; 50]; 40];
    for p in per {
        for (v, t) in p.iter().zip(theta) {
            hist1[(((v.clamp(-2.0, 2.0) + 2.0) * 100.0 / 4.0).floor() as usize).min(99)] += 1.0;
            let ix = ((v.clamp(-0.975, 0.975) + 1.0) / 0.05).floor() as usize;
            let iy = ((t.clamp(-1.96, 1.96) + 2.0) / 0.08).floor() as usize;
            hist2[ix.min(39)][iy.min(49)] += 1;
        }
    }
    let edges = |lo: f64, hi: f64, n: usize| {
        (0..=n)
            .map(|i| lo + (hi - lo) * i as f64 / n as f64)
            .collect::<Vec<_>>()
    };
    out.push((
        "GradHist1d",
        json!({"hist": hist1, "edges": edges(-2.0, 2.0, 100)}),
    ));
    out.push((
        "GradHist2d",
        json!({"hist": hist2, "edges": [edges(-1.0, 1.0, 40), edges(-2.0, 2.0, 50)]}),
    ));
    out
}

/// α by its definition: a quadratic through the two losses and the two projected slopes,
/// weighted by the inverse variances (zero variances → 1e-10), solved here by Cramer's rule.
fn reference_alpha(
    d: &[f64],
    start: &(f64, Vec<f64>, Vec<Vec<f64>>),
    end: &(f64, Vec<f64>, Vec<Vec<f64>>),
) -> Option<f64> {
    let t = dot(d, d).sqrt();
    if t == 0.0 {
        return Some(-1.0);
    }
    let slopes = |per: &Vec<Vec<f64>>| per.iter().map(|p| dot(p, d) / t).collect::<Vec<f64>>();
    let (ys, ye) = (slopes(&start.2), slopes(&end.2));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let obs = [start.0, end.0, mean(&ys), mean(&ye)];
    let var = [
        unbiased_var(&start.1),
        unbiased_var(&end.1),
        unbiased_var(&ys),
        unbiased_var(&ye),
    ];
    let w: Vec<f64> = var
        .iter()
        .map(|v| 1.0 / if *v == 0.0 { 1e-10 } else { *v })
        .collect();
    let phi = [
        [1.0, 0.0, 0.0],
        [1.0, t, t * t],
        [0.0, 1.0, 0.0],
        [0.0, 1.0, 2.0 * t],
    ];
    let a: Vec<Vec<f64>> = (0..3)
        .map(|i| {
            (0..3)
                .map(|j| (0..4).map(|k| phi[k][i] * w[k] * phi[k][j]).sum())
                .collect()
        })
        .collect();
    let r: Vec<f64> = (0..3)
        .map(|i| (0..4).map(|k| phi[k][i] * w[k] * obs[k]).sum())
        .collect();
    let det3 = |m: &[Vec<f64>]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let det = det3(&a);
    let solve = |col: usize| {
        let mut m = a.clone();
        for row in 0..3 {
            m[row][col] = r[row];
        }
        det3(&m) / det
    };
    let (mu1, mu2) = (solve(1), solve(2));
    if mu2 < 0.0 {
        return Some(-1.0);
    }
    Some(2.0 * t / (-mu1 / mu2) - 1.0)
}

/// A random fixture with the real fixtures' layout, and its expected quantities.
fn generate(seed: u64) -> Json {
    let mut rng = Rng(seed);
    let depth = 1 + rng.below(3);
    let widths: Vec<usize> = (0..=depth).map(|_| 2 + rng.below(6)).collect();
    let ce = rng.next() < 0.5;
    let batch = 2 + rng.below(9);
    let (lr, momentum) = (
        rng.uniform(0.01, 0.5),
        if rng.next() < 0.5 {
            0.0
        } else {
            rng.uniform(0.1, 0.95)
        },
    );
    let acts = [Act::Relu, Act::Sigmoid, Act::Tanh];
    let mut layers: Vec<Layer> = (0..depth)
        .map(|l| {
            let (d_in, d_out) = (widths[l], widths[l + 1]);
            let k = 1.0 / (d_in as f64).sqrt();
            Layer {
                w: (0..d_out)
                    .map(|_| (0..d_in).map(|_| rng.uniform(-k, k)).collect())
                    .collect(),
                b: (0..d_out).map(|_| rng.uniform(-k, k)).collect(),
                act: (l + 1 < depth).then(|| acts[rng.below(3)]),
            }
        })
        .collect();
    let mut model_layers = Vec::new();
    let mut params = Vec::new();
    for (l, layer) in layers.iter().enumerate() {
        model_layers
            .push(json!({"kind": "linear", "in": widths[l], "out": widths[l + 1], "bias": true}));
        if let Some(act) = layer.act {
            model_layers.push(json!({"kind": act.name()}));
        }
        params.push(json!({"name": format!("{l}.weight"), "shape": [widths[l + 1], widths[l]], "data": layer.w.concat()}));
        params
            .push(json!({"name": format!("{l}.bias"), "shape": [widths[l + 1]], "data": layer.b}));
    }
    let classes = widths[depth];
    let num_steps = 5;
    let theta0 = flat(&layers);
    let mut buffers: Option<Vec<Vec<f64>>> = None;
    let mut history = Vec::new();
    let mut samples = Vec::new();
    let mut steps = Vec::new();
    for step in 0..num_steps {
        let x: Vec<Vec<f64>> = (0..batch)
            .map(|_| (0..widths[0]).map(|_| rng.uniform(-2.0, 2.0)).collect())
            .collect();
        let y: Vec<Vec<f64>> = if ce {
            (0..batch)
                .map(|_| vec![rng.below(classes) as f64])
                .collect()
        } else {
            (0..batch)
                .map(|_| (0..classes).map(|_| rng.uniform(-1.0, 1.0)).collect())
                .collect()
        };
        let (loss, grads) = loss_and_grads(&layers, &x, &y, ce);
        let theta = flat(&layers);
        // Per-sample gradients and losses: one sample at a time.
        let (losses, per): (Vec<f64>, Vec<Vec<f64>>) = (0..batch)
            .map(|n| {
                let (l, g) = loss_and_grads(&layers, &x[n..n + 1], &y[n..n + 1], ce);
                (l, g.concat())
            })
            .unzip();
        let stats = per_sample_quantities(&per, &theta.concat(), loss, lr, momentum == 0.0);
        let params_now: Vec<Json> = layers
            .iter()
            .flat_map(|l| [json!(l.w), json!(l.b)])
            .collect();
        history.push(theta.clone());
        samples.push((loss, losses, per));
        steps.push(json!({
            "step": step,
            "inputs": {"shape": [batch, widths[0]], "data": x.concat()},
            "targets": if ce { json!({"shape": [batch], "data": y.concat()}) } else { json!({"shape": [batch, classes], "data": y.concat()}) },
            "quantities": {
                "Loss": loss,
                "GradNorm": grads.iter().map(|g| norm(g)).collect::<Vec<_>>(),
                "Distance": diff_norms(&theta, &theta0),
                "Parameters": params_now,
                "Time": 0.0,
            },
        }));
        for (key, value) in stats {
            steps[step]["quantities"][key] = value;
        }
        // PyTorch SGD.
        let update: Vec<Vec<f64>> = match &mut buffers {
            _ if momentum == 0.0 => grads.clone(),
            None => {
                buffers = Some(grads.clone());
                grads.clone()
            }
            Some(bufs) => {
                for (buf, g) in bufs.iter_mut().zip(&grads) {
                    for (b, g) in buf.iter_mut().zip(g) {
                        *b = momentum * *b + g;
                    }
                }
                bufs.clone()
            }
        };
        for (l, layer) in layers.iter_mut().enumerate() {
            let d_in = layer.w[0].len();
            for (o, row) in layer.w.iter_mut().enumerate() {
                for (i, w) in row.iter_mut().enumerate() {
                    *w -= lr * update[2 * l][o * d_in + i];
                }
            }
            for (o, b) in layer.b.iter_mut().enumerate() {
                *b -= lr * update[2 * l + 1][o];
            }
        }
    }
    for step in 0..num_steps - 1 {
        steps[step]["quantities"]["UpdateSize"] =
            json!(diff_norms(&history[step + 1], &history[step]));
        let d: Vec<f64> = history[step + 1]
            .concat()
            .iter()
            .zip(history[step].concat())
            .map(|(a, b)| a - b)
            .collect();
        if let Some(alpha) = reference_alpha(&d, &samples[step], &samples[step + 1]) {
            steps[step]["quantities"]["Alpha"] = json!(alpha);
        }
    }
    let final_params: Vec<Json> = layers
        .iter()
        .enumerate()
        .flat_map(|(l, layer)| {
            [
                json!({"name": format!("{l}.weight"), "shape": [widths[l + 1], widths[l]], "data": layer.w.concat()}),
                json!({"name": format!("{l}.bias"), "shape": [widths[l + 1]], "data": layer.b}),
            ]
        })
        .collect();
    json!({
        "name": format!("generated-{seed}"),
        "model": {"layers": model_layers},
        "loss": if ce { "cross_entropy" } else { "mse" },
        "optimizer": {"kind": "sgd", "lr": lr, "momentum": momentum, "dampening": 0.0, "weight_decay": 0.0, "nesterov": false},
        "batch_size": batch,
        "params": params,
        "final_params": final_params,
        "steps": steps,
    })
}

fn replay_matches_an_independent_implementation_on_unseen_fixtures(backend: &Backend) {
    for seed in 1..=12u64 {
        let fixture = Fixture::parse(&generate(seed * 7919).to_string())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // The generator records every quantity but the curvature ones.
        let kinds = [
            QuantityKind::Alpha,
            QuantityKind::CABS,
            QuantityKind::EarlyStopping,
            QuantityKind::GradHist1d,
            QuantityKind::GradHist2d,
            QuantityKind::InnerTest,
            QuantityKind::MeanGSNR,
            QuantityKind::NormTest,
            QuantityKind::OrthoTest,
            QuantityKind::Loss,
            QuantityKind::GradNorm,
            QuantityKind::Distance,
            QuantityKind::UpdateSize,
            QuantityKind::Parameters,
            QuantityKind::Time,
        ];
        let options = ReplayOptions {
            device: backend.device.clone(),
            dtype: backend.dtype,
            quantities: kinds.to_vec(),
            ..ReplayOptions::cpu_f64()
        };
        let run = replay(&fixture, &options).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let compared = assert_matches_fixture(&fixture, &run, backend, &kinds);
        let recorded: usize = fixture
            .steps
            .iter()
            .map(|s| {
                kinds
                    .iter()
                    .filter(|k| **k != QuantityKind::Time && s.quantities.contains_key(k.name()))
                    .count()
            })
            .sum();
        assert_eq!(compared, recorded, "seed {seed}");
        // 5 parameter-level values per step (UpdateSize and Alpha one step fewer) and at least
        // the 6 per-sample quantities every run has.
        assert!(compared >= 5 * 11 - 2, "seed {seed}: only {compared}");
        let final_params = fixture.final_params.as_ref().unwrap();
        for (ours, theirs) in run.final_params.iter().zip(final_params) {
            for (a, b) in ours.data.iter().zip(&theirs.data) {
                assert!(
                    common::close(*a, *b, backend.rel, backend.abs),
                    "seed {seed}: final {}: {a} vs {b}",
                    theirs.name
                );
            }
        }
    }
}

on_every_backend!(replay_matches_an_independent_implementation_on_unseen_fixtures);
