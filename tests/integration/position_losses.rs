//! Outputs beyond `[B, C]`: a language model's token logits `[B, T, V]` and a segmenter's
//! class maps `[B, C, H, W]` (`OutputLoss::tokens`, `OutputLoss::class_maps`). Per-example
//! losses and margins against per-position loops on the host; the exact GGN diagonal against
//! a dense Jacobian oracle (padding included); the Monte-Carlo GGN's mean and standard errors
//! against the exact one over many seeds; `Cockpit::step` with every quantity of `full`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use burn::module::Module;
use burn::nn::conv::Conv2dConfig;
use burn::nn::transformer::TransformerEncoderConfig;
use burn::nn::{EmbeddingConfig, LinearConfig, PaddingConfig2d};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use burn_cockpit::curvature::{CurvatureSource, DiagonalKind, OutputLoss, RecordedCurvature};
use burn_cockpit::persample::Snapshot;
use burn_cockpit::persample::{
    Conv2d, Embedding, Linear, TransformerEncoder, TransformerEncoderInput,
};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, Configuration, OptimizerInfo, Schedule};

use crate::common::{self, Backend, ToDType};

const PAD: i64 = 4;

fn host<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().convert::<f64>().try_to_vec::<f64>().unwrap()
}

fn ints(values: &[i64], shape: [usize; 2], device: &Device) -> Tensor<2, Int> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

/// `log Σ exp(row) − row[class]` and the labelled logit minus the largest other.
fn ce_and_margin(row: &[f64], class: usize) -> (f64, f64) {
    let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
    let other = row
        .iter()
        .enumerate()
        .filter(|(c, _)| *c != class)
        .map(|(_, v)| *v)
        .fold(f64::NEG_INFINITY, f64::max);
    (lse - row[class], row[class] - other)
}

fn token_losses_match_per_token_loops(backend: &Backend) {
    let device = backend.device.clone();
    let (b, t, v) = (4, 3, 5);
    let values: Vec<f64> = (0..b * t * v)
        .map(|i| ((i * 7 % 11) as f64 - 5.0) / 3.0)
        .collect();
    let logits = Tensor::<3>::from_data(TensorData::new(values.clone(), [b, t, v]), &device)
        .cast(backend.dtype);
    // Sequence 1 has one padded token, sequence 3 is padding alone.
    let targets = [1, 2, 0, 3, PAD, 2, 0, 0, 1, PAD, PAD, PAD];
    let loss = OutputLoss::tokens_with_padding(ints(&targets, [b, t], &device), v, PAD);
    let losses = host(loss.per_sample(logits.clone()));
    let margins = host(loss.margins(logits.clone()).unwrap());
    let (worst_losses, worst_positions) = loss.worst_positions(logits.clone()).unwrap();
    let (worst_losses, worst_positions) = (host(worst_losses), host(worst_positions.float()));
    for n in 0..b {
        let (mut sum, mut margin, mut count) = (0.0, 0.0, 0.0);
        let mut worst = (-1.0, 0.0);
        for position in 0..t {
            let class = targets[n * t + position];
            if class == PAD {
                continue;
            }
            let row = &values[(n * t + position) * v..(n * t + position + 1) * v];
            let (ce, m) = ce_and_margin(row, class as usize);
            if ce > worst.0 {
                worst = (ce, position as f64);
            }
            sum += ce;
            margin += m;
            count += 1.0;
        }
        // The worst counted token (−1: the sequence counts none, its position is any).
        assert!(
            common::close(worst_losses[n], worst.0, backend.rel, backend.abs),
            "{}: worst token of {n}: {} vs {}",
            backend.name,
            worst_losses[n],
            worst.0
        );
        if count > 0.0 {
            assert_eq!(
                worst_positions[n], worst.1,
                "{}: worst position of {n}",
                backend.name
            );
        }
        let (expected, expected_margin) = if count > 0.0 {
            (sum / count, margin / count)
        } else {
            (0.0, 0.0)
        };
        assert!(
            common::close(losses[n], expected, backend.rel, backend.abs),
            "{}: sequence {n}: {} vs {expected}",
            backend.name,
            losses[n]
        );
        assert!(
            common::close(margins[n], expected_margin, backend.rel, backend.abs),
            "{}: margin {n}: {} vs {expected_margin}",
            backend.name,
            margins[n]
        );
    }
    // Without padding, the mean is burn's cross-entropy on the flattened [B·T, V] logits.
    let unpadded = [1i64, 2, 0, 3, 4, 2, 0, 0, 1, 4, 3, 2];
    let targets = ints(&unpadded, [b, t], &device);
    let ours = host(
        OutputLoss::tokens(targets.clone(), v)
            .per_sample(logits.clone())
            .mean(),
    )[0];
    let burn = host(
        burn::nn::loss::CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits.reshape([b * t, v]), targets.reshape([b * t])),
    )[0];
    assert!(
        common::close(ours, burn, backend.rel, backend.abs),
        "{ours} vs {burn}"
    );
}

fn class_map_losses_match_per_pixel_loops(backend: &Backend) {
    let device = backend.device.clone();
    let (b, c, h, w) = (2, 3, 2, 3);
    let values: Vec<f64> = (0..b * c * h * w)
        .map(|i| ((i * 5 % 13) as f64 - 6.0) / 4.0)
        .collect();
    let maps = Tensor::<4>::from_data(TensorData::new(values.clone(), [b, c, h, w]), &device)
        .cast(backend.dtype);
    let targets: Vec<i64> = vec![0, 1, 2, 2, 255, 0, 1, 1, 0, 2, 2, 255];
    let loss = OutputLoss::class_maps_with_ignore(
        Tensor::<3, Int>::from_data(TensorData::new(targets.clone(), [b, h, w]), &device),
        c,
        255,
    );
    assert_eq!(loss.dims(), [b, c * h * w]);
    let losses = host(loss.per_sample(maps.clone()));
    let margins = host(loss.margins(maps).unwrap());
    for n in 0..b {
        let (mut sum, mut margin, mut count) = (0.0, 0.0, 0.0);
        for pixel in 0..h * w {
            let class = targets[n * h * w + pixel];
            if class == 255 {
                continue;
            }
            let row: Vec<f64> = (0..c)
                .map(|k| values[(n * c + k) * h * w + pixel])
                .collect();
            let (ce, m) = ce_and_margin(&row, class as usize);
            sum += ce;
            margin += m;
            count += 1.0;
        }
        assert!(
            common::close(losses[n], sum / count, backend.rel, backend.abs),
            "{}: image {n}: {} vs {}",
            backend.name,
            losses[n],
            sum / count
        );
        assert!(common::close(
            margins[n],
            margin / count,
            backend.rel,
            backend.abs
        ));
    }
}

/// A per-token network from the drop-ins: embedding, a ReLU layer, a vocabulary head.
#[derive(Module, Debug)]
struct Tagger {
    embedding: Embedding,
    hidden: Linear,
    head: Linear,
}

impl Tagger {
    const VOCABULARY: usize = 5;

    fn new(device: &Device, dtype: DType) -> Self {
        Self {
            embedding: EmbeddingConfig::new(Self::VOCABULARY, 4)
                .init(device)
                .into(),
            hidden: LinearConfig::new(4, 6).init(device).into(),
            head: LinearConfig::new(6, Self::VOCABULARY).init(device).into(),
        }
        .map(&mut ToDType(dtype))
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.head
            .forward(relu(self.hidden.forward(self.embedding.forward(tokens))))
    }
}

/// A fully convolutional segmenter from the drop-ins: `[B, 2, H, W]` → `[B, 3, H, W]`.
#[derive(Module, Debug)]
struct Segmenter {
    conv: Conv2d,
    head: Conv2d,
}

impl Segmenter {
    const CLASSES: usize = 3;

    fn new(device: &Device, dtype: DType) -> Self {
        Self {
            conv: Conv2dConfig::new([2, 4], [3, 3])
                .with_padding(PaddingConfig2d::Same)
                .init(device)
                .into(),
            head: Conv2dConfig::new([4, Self::CLASSES], [1, 1])
                .init(device)
                .into(),
        }
        .map(&mut ToDType(dtype))
    }

    fn forward(&self, images: Tensor<4>) -> Tensor<4> {
        self.head.forward(relu(self.conv.forward(images)))
    }
}

fn tagger_batch(device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let tokens = ints(&[0, 3, 1, 2, 2, 4, 1, 0, 3], [3, 3], device);
    let targets = ints(&[3, 1, 2, 2, PAD, 0, 0, 3, 4], [3, 3], device);
    (tokens, targets)
}

fn gradient<M: Module>(model: &M, scalar: Tensor<1>) -> Vec<f64> {
    let grads = GradientsParams::from_grads(scalar.backward(), model);
    host(Snapshot::of_grads(model, &grads).unwrap().flatten())
}

/// The dense GGN diagonal `(1/B) Σ_n diag(J_nᵀ H_n J_n)` from per-sample Jacobians (one plain
/// backward pass per output element) and the loss Hessians built on the host:
/// `H_n = Σ_t w_{n,t} (diag p_{n,t} − p_{n,t} p_{n,t}ᵀ)` on position `t`'s block, where
/// `index(t, c)` is the flattened output's index of position `t`, class `c`.
fn dense_ggn_diagonal(
    f: &[f64],
    jacobian_row: &dyn Fn(usize, usize) -> Vec<f64>,
    [batch, positions, classes]: [usize; 3],
    weights: &[f64],
    index: &dyn Fn(usize, usize) -> usize,
) -> Vec<f64> {
    let width = positions * classes;
    let mut diagonal: Vec<f64> = Vec::new();
    for n in 0..batch {
        let rows: Vec<Vec<f64>> = (0..width).map(|k| jacobian_row(n, k)).collect();
        if diagonal.is_empty() {
            diagonal = vec![0.0; rows[0].len()];
        }
        for t in 0..positions {
            let w = weights[n * positions + t];
            if w == 0.0 {
                continue;
            }
            let logits: Vec<f64> = (0..classes).map(|c| f[n * width + index(t, c)]).collect();
            let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = logits.iter().map(|l| (l - max).exp()).sum();
            let p: Vec<f64> = logits.iter().map(|l| (l - max).exp() / z).collect();
            for a in 0..classes {
                for c in 0..classes {
                    let h = w * (f64::from(u8::from(a == c)) * p[a] - p[a] * p[c]);
                    let (ra, rc) = (&rows[index(t, a)], &rows[index(t, c)]);
                    for (i, d) in diagonal.iter_mut().enumerate() {
                        *d += h * ra[i] * rc[i] / batch as f64;
                    }
                }
            }
        }
    }
    diagonal
}

fn flat(diagonal: Vec<Tensor<1>>) -> Vec<f64> {
    diagonal.into_iter().flat_map(host).collect()
}

#[test]
fn token_ggn_exact_equals_the_dense_oracle_and_padding_adds_nothing() {
    let device = Device::flex().autodiff();
    let model = Tagger::new(&device, DType::F64);
    let (tokens, targets) = tagger_batch(&device);
    let v = Tagger::VOCABULARY;
    let loss = OutputLoss::tokens_with_padding(targets.clone(), v, PAD);
    let params = Snapshot::of_params(&model);
    let replayed = tokens.clone();
    let source = RecordedCurvature::new(
        &model,
        move |m: &Tagger| m.forward(replayed.clone()),
        loss.clone(),
        7,
    );
    let ours = flat(source.diagonal(&params, DiagonalKind::GgnExact).unwrap());
    assert!(
        source
            .diagonal_errors(&params, DiagonalKind::GgnExact)
            .is_none()
    );
    let f = host(model.forward(tokens.clone()).detach().reshape([3 * 3 * v]));
    let weights = {
        let burn_cockpit::curvature::OutputLoss::Positions(positions) = &loss else {
            panic!("tokens are a position loss")
        };
        host(positions.weights_as(DType::F64).reshape([9]))
    };
    // Sequence 1's padded token weighs nothing; the others share their sequence's weight.
    assert_eq!(weights[4], 0.0);
    assert!((weights[3] - 0.5).abs() < 1e-15 && (weights[0] - 1.0 / 3.0).abs() < 1e-15);
    let row = |n: usize, k: usize| {
        let out = model.forward(tokens.clone()).reshape([3, 3 * v]);
        gradient(&model, out.slice([n..n + 1, k..k + 1]).sum())
    };
    let oracle = dense_ggn_diagonal(&f, &row, [3, 3, v], &weights, &|t, c| t * v + c);
    common::assert_max_close("token diag_ggn_exact", &ours, &oracle, 1e-10);

    // The padded token's target and logits change nothing.
    let moved_tokens = ints(&[0, 3, 1, 2, 3, 4, 1, 0, 3], [3, 3], &device);
    let source = RecordedCurvature::new(
        &model,
        move |m: &Tagger| {
            // The padded position's input differs; the model is per token, so only its logits move.
            m.forward(moved_tokens.clone())
        },
        loss,
        7,
    );
    let moved = flat(source.diagonal(&params, DiagonalKind::GgnExact).unwrap());
    common::assert_max_close("padding adds nothing", &moved, &ours, 1e-12);
}

#[test]
fn class_map_ggn_exact_equals_the_dense_oracle() {
    let device = Device::flex().autodiff();
    let model = Segmenter::new(&device, DType::F64);
    let (b, h, w, c) = (2, 3, 3, Segmenter::CLASSES);
    let pixels = h * w;
    let images: Vec<f64> = (0..b * 2 * pixels)
        .map(|i| ((i * 7 % 9) as f64 - 4.0) / 3.0)
        .collect();
    let images =
        Tensor::<4>::from_data(TensorData::new(images, [b, 2, h, w]), &device).cast(DType::F64);
    let labels: Vec<i64> = (0..b * pixels)
        .map(|i| if i == 4 { 255 } else { (i % 3) as i64 })
        .collect();
    let labels = Tensor::<3, Int>::from_data(TensorData::new(labels, [b, h, w]), &device);
    let loss = OutputLoss::class_maps_with_ignore(labels, c, 255);
    let params = Snapshot::of_params(&model);
    let replayed = images.clone();
    let source = RecordedCurvature::new(
        &model,
        move |m: &Segmenter| m.forward(replayed.clone()),
        loss.clone(),
        3,
    );
    let ours = flat(source.diagonal(&params, DiagonalKind::GgnExact).unwrap());
    let width = c * pixels;
    let f = host(model.forward(images.clone()).detach().reshape([b * width]));
    let OutputLoss::Positions(positions) = &loss else {
        panic!("class maps are a position loss")
    };
    let weights = host(positions.weights_as(DType::F64).reshape([b * pixels]));
    let row = |n: usize, k: usize| {
        let out = model.forward(images.clone()).reshape([b, width]);
        gradient(&model, out.slice([n..n + 1, k..k + 1]).sum())
    };
    // Classes on the second axis: pixel t, class k sits at k·P + t.
    let oracle = dense_ggn_diagonal(&f, &row, [b, pixels, c], &weights, &|t, k| k * pixels + t);
    common::assert_max_close("class-map diag_ggn_exact", &ours, &oracle, 1e-10);
}

/// Beyond the exact budget the GGN is sampled: over many seeds the samples' mean converges to
/// the exact diagonal, and each estimate's standard error covers the exact trace about as
/// often as it should (Student's t with k − 1 = 7 degrees of freedom: 91 % within 2 errors).
#[test]
fn monte_carlo_ggn_is_unbiased_and_its_errors_cover_the_exact_value() {
    let device = Device::flex().autodiff();
    let model = Tagger::new(&device, DType::F64);
    let (tokens, targets) = tagger_batch(&device);
    let loss = OutputLoss::tokens_with_padding(targets, Tagger::VOCABULARY, PAD);
    let params = Snapshot::of_params(&model);
    let source = |seed: u64, exact_columns: usize| {
        let replayed = tokens.clone();
        RecordedCurvature::new(
            &model,
            move |m: &Tagger| m.forward(replayed.clone()),
            loss.clone(),
            seed,
        )
        .with_exact_columns(exact_columns)
        .with_mc_samples(8)
    };
    let exact = source(0, usize::MAX)
        .diagonal(&params, DiagonalKind::GgnExact)
        .unwrap();
    let exact_traces: Vec<f64> = exact.iter().map(|d| host(d.clone().sum())[0]).collect();
    let exact = flat(exact);
    let seeds = 60;
    let (mut covered, mut judged) = (0, 0);
    let mut mean = vec![0.0; exact.len()];
    for seed in 0..seeds {
        let estimate = source(1000 + seed, 0);
        let diagonal = estimate.diagonal(&params, DiagonalKind::GgnExact).unwrap();
        let errors = estimate
            .diagonal_errors(&params, DiagonalKind::GgnExact)
            .expect("a sampled GGN carries its errors");
        assert!(
            estimate
                .notes()
                .iter()
                .any(|n| n.contains("Monte-Carlo estimate from 8 sampled columns")),
            "{:?}",
            estimate.notes()
        );
        for ((d, e), exact) in diagonal.iter().zip(&errors).zip(&exact_traces) {
            let (trace, error) = (host(d.clone().sum())[0], host(e.clone())[0]);
            assert!(error > 0.0, "a spread of zero");
            judged += 1;
            if (trace - exact).abs() <= 2.0 * error {
                covered += 1;
            }
        }
        for (m, v) in mean.iter_mut().zip(flat(diagonal)) {
            *m += v / seeds as f64;
        }
    }
    let coverage = f64::from(covered) / f64::from(judged);
    assert!(
        (0.8..=0.99).contains(&coverage),
        "2-error coverage {coverage} over {judged} traces (expected about 0.91)"
    );
    // 480 samples: the mean's relative error on the total is a few percent.
    let (total, exact_total): (f64, f64) = (mean.iter().sum(), exact.iter().sum());
    assert!(
        (total - exact_total).abs() < 0.05 * exact_total,
        "{total} vs {exact_total}"
    );
}

/// A decoder-only language model from the drop-ins: token and position embeddings, a causal
/// pre-norm transformer layer, a vocabulary head: `[B, T]` → `[B, T, V]`.
#[derive(Module, Debug)]
struct TinyGpt {
    tokens: Embedding,
    positions: Embedding,
    blocks: TransformerEncoder,
    head: Linear,
}

impl TinyGpt {
    const VOCABULARY: usize = 7;
    const LENGTH: usize = 5;

    fn new(device: &Device, dtype: DType) -> Self {
        let d = 8;
        Self {
            tokens: EmbeddingConfig::new(Self::VOCABULARY, d)
                .init(device)
                .into(),
            positions: EmbeddingConfig::new(Self::LENGTH, d).init(device).into(),
            blocks: TransformerEncoder::new(
                &TransformerEncoderConfig::new(d, 2 * d, 2, 1)
                    .with_norm_first(true)
                    .with_dropout(0.0),
                device,
            ),
            head: LinearConfig::new(d, Self::VOCABULARY).init(device).into(),
        }
        .map(&mut ToDType(dtype))
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [batch, length] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..length as i64, &device)
            .reshape([1, length])
            .repeat_dim(0, batch);
        let x = self.tokens.forward(tokens) + self.positions.forward(positions);
        let causal = burn::nn::attention::generate_autoregressive_mask(batch, length, &device);
        self.head.forward(
            self.blocks
                .forward(TransformerEncoderInput::new(x).mask_attn(causal)),
        )
    }
}

fn full_with_examples() -> Vec<QuantityKind> {
    let mut kinds = Configuration::Full.kinds();
    kinds.push(QuantityKind::Examples);
    kinds
}

fn step_runs_full_on_a_language_model(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut model = TinyGpt::new(&device, backend.dtype);
    let sgd = SgdConfig::new();
    let mut optimizer = sgd.init();
    let mut cockpit = Cockpit::from_kinds(full_with_examples(), &Schedule::every_step())
        .unwrap()
        .with_optimizer(OptimizerInfo::from_sgd(&sgd, 0.1))
        .with_console(false);
    let (b, t) = (4, TinyGpt::LENGTH);
    for step in 0..2 {
        // Next-token targets; the last sequence ends in padding.
        let text: Vec<i64> = (0..b * (t + 1))
            .map(|i| ((i * 3 + step) % 6) as i64)
            .collect();
        let inputs: Vec<i64> = (0..b)
            .flat_map(|n| text[n * (t + 1)..n * (t + 1) + t].to_vec())
            .collect();
        let mut next: Vec<i64> = (0..b)
            .flat_map(|n| text[n * (t + 1) + 1..(n + 1) * (t + 1)].to_vec())
            .collect();
        next[b * t - 1] = 6;
        next[b * t - 2] = 6;
        let inputs = ints(&inputs, [b, t], &device);
        let next = ints(&next, [b, t], &device);
        let loss = OutputLoss::tokens_with_padding(next, TinyGpt::VOCABULARY, 6);
        let ids: Vec<u64> = (0..b as u64).map(|n| 10 * n + step as u64).collect();
        let stepped = cockpit
            .step_with_ids(
                &model,
                move |m: &TinyGpt| m.forward(inputs.clone()),
                loss,
                ids,
            )
            .unwrap();
        assert!(
            stepped.report.is_complete(),
            "{}: step {step}: {:?}",
            backend.name,
            stepped.report.failure_lines()
        );
        assert_eq!(stepped.losses.dims(), [b]);
        model = optimizer.step(0.1, model, stepped.grads);
    }
    for key in [
        "HessTrace",
        "TICDiag",
        "HessMaxEV",
        "NormTest",
        "GradHist1d",
    ] {
        assert!(
            cockpit.output().get(1, key).is_some(),
            "{}: no {key}",
            backend.name
        );
    }
    assert!(
        cockpit.output().get(0, "Alpha").is_some(),
        "{}: no Alpha",
        backend.name
    );
    // Each sequence is one example of the record, with the position of its worst token
    // (the padded sequence's among its 3 counted tokens).
    let record = cockpit.examples().unwrap();
    assert_eq!(record.len(), 2 * b, "{}", backend.name);
    for n in 0..b as u64 {
        let row = record.get(10 * n + 1).unwrap();
        let position = row.worst_position.expect("a token loss has positions");
        let counted = if n == b as u64 - 1 { t - 2 } else { t };
        assert!((position as usize) < counted, "{}: {row:?}", backend.name);
        assert!(row.worst_position_loss >= row.loss_last, "{row:?}");
    }
    let trace = cockpit.output().get(1, "HessTrace").unwrap();
    assert!(
        matches!(trace, burn_cockpit::Value::Estimate(_)),
        "an LM's diag_h is GGN plus an estimated residual: {trace:?}"
    );
    assert!(
        cockpit.warnings().iter().any(|w| w.contains("residual")),
        "{:?}",
        cockpit.warnings()
    );
}

fn step_runs_full_on_a_segmenter(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut model = Segmenter::new(&device, backend.dtype);
    let sgd = SgdConfig::new();
    let mut optimizer = sgd.init();
    let mut cockpit = Cockpit::from_kinds(full_with_examples(), &Schedule::every_step())
        .unwrap()
        .with_optimizer(OptimizerInfo::from_sgd(&sgd, 0.1))
        .with_console(false);
    let (b, h, w) = (3, 4, 4);
    for step in 0..2 {
        let images: Vec<f64> = (0..b * 2 * h * w)
            .map(|i| (((i + step) * 7 % 9) as f64 - 4.0) / 3.0)
            .collect();
        let images = Tensor::<4>::from_data(TensorData::new(images, [b, 2, h, w]), &device)
            .cast(backend.dtype);
        let labels: Vec<i64> = (0..b * h * w)
            .map(|i| ((i / 3 + step) % 3) as i64)
            .collect();
        let labels = Tensor::<3, Int>::from_data(TensorData::new(labels, [b, h, w]), &device);
        let loss = OutputLoss::class_maps(labels, Segmenter::CLASSES);
        let stepped = cockpit
            .step_with_ids(
                &model,
                move |m: &Segmenter| m.forward(images.clone()),
                loss,
                vec![0, 1, 2],
            )
            .unwrap();
        assert!(
            stepped.report.is_complete(),
            "{}: step {step}: {:?}",
            backend.name,
            stepped.report.failure_lines()
        );
        model = optimizer.step(0.1, model, stepped.grads);
    }
    for key in ["HessTrace", "TICDiag", "HessMaxEV", "GradHist2d"] {
        assert!(cockpit.output().get(1, key).is_some(), "no {key}");
    }
    // 3 classes × 16 pixels = 48 columns: within the exact budget, so no Monte-Carlo note.
    assert!(
        !cockpit.warnings().iter().any(|w| w.contains("Monte-Carlo")),
        "{:?}",
        cockpit.warnings()
    );
}

/// A mismatch between the output and the loss is named at the step, before anything runs.
#[test]
fn an_output_that_does_not_fit_the_loss_is_a_typed_error() {
    let device = Device::flex().autodiff();
    let model = Tagger::new(&device, DType::F32);
    let mut cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())
        .unwrap()
        .with_console(false);
    let (tokens, targets) = tagger_batch(&device);
    // The vocabulary given as 4, the head has 5 outputs per token.
    let err = cockpit
        .step(
            &model,
            move |m: &Tagger| m.forward(tokens.clone()),
            OutputLoss::tokens(targets, 4),
        )
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, burn_cockpit::CockpitError::BatchMismatch { .. })
            && message.contains("[3, 15]")
            && message.contains("[3, 12]"),
        "{message}"
    );
}

on_every_backend!(
    token_losses_match_per_token_loops,
    class_map_losses_match_per_pixel_loops,
    step_runs_full_on_a_language_model,
    step_runs_full_on_a_segmenter,
);
