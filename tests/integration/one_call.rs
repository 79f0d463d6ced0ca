//! `Cockpit::step`, the one call per training step: the same numbers as the hand-written
//! loop, step numbers that continue across epochs, quantities that fail alone, the exact
//! fallback on plain burn-nn layers, and optimizers read from burn's configs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::{self, Backend, PER_SAMPLE, ToDType};
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{AdamConfig, GradientsParams, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::curvature::{GgnPasses, OutputLoss};
use burn_cockpit::persample::{Linear, Recorder};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, OnBatch, OptimizerInfo, Schedule, StepInfo, StepOptions, Value};

/// Built from the drop-ins.
#[derive(Module, Debug)]
struct DropIn {
    l1: Linear,
    l2: Linear,
}

/// The same network from burn-nn's own `Linear`, which the per-sample fast path cannot see.
#[derive(Module, Debug)]
struct Plain {
    l1: burn::nn::Linear,
    l2: burn::nn::Linear,
}

impl DropIn {
    fn new(device: &Device, backend: &Backend) -> Self {
        Self {
            l1: Linear::new(&LinearConfig::new(4, 5), device),
            l2: Linear::new(&LinearConfig::new(5, 3), device),
        }
        .map(&mut ToDType(backend.dtype))
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l2.forward(relu(self.l1.forward(x)))
    }

    fn plain(&self) -> Plain {
        Plain {
            l1: self.l1.as_burn(),
            l2: self.l2.as_burn(),
        }
    }
}

impl Plain {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l2.forward(relu(self.l1.forward(x)))
    }
}

const B: usize = 6;

fn batch(device: &Device, backend: &Backend, step: usize) -> (Tensor<2>, Tensor<1, Int>) {
    let x: Vec<f32> = (0..B * 4)
        .map(|i| ((i * 7 + step * 5) % 13) as f32 / 6.5 - 1.0)
        .collect();
    let y: Vec<i64> = (0..B).map(|n| ((n + step) % 3) as i64).collect();
    (
        Tensor::<2>::from_data(TensorData::new(x, [B, 4]), device).cast(backend.dtype),
        Tensor::from_data(TensorData::new(y, [B]), device),
    )
}

fn kinds() -> Vec<QuantityKind> {
    let mut kinds = PER_SAMPLE.to_vec();
    kinds.extend([
        QuantityKind::Loss,
        QuantityKind::GradNorm,
        QuantityKind::Distance,
        QuantityKind::UpdateSize,
    ]);
    kinds
}

const LR: f64 = 0.1;
const STEPS: usize = 4;

fn scalar_keys() -> [&'static str; 8] {
    [
        "Loss",
        "Alpha",
        "CABS",
        "EarlyStopping",
        "MeanGSNR",
        "NormTest",
        "InnerTest",
        "OrthoTest",
    ]
}

fn numbers(value: &Value) -> Vec<f64> {
    match value {
        Value::Float(v) => vec![*v],
        Value::List(v) => v.clone(),
        Value::Hist1d(h) => h.hist.clone(),
        Value::Hist2d(h) => h.hist.iter().map(|c| *c as f64).collect(),
        other => panic!("unexpected {other:?}"),
    }
}

fn one_call_equals_the_hand_written_loop(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let start = DropIn::new(&device, backend);
    // Two "epochs" of two steps each: the one call numbers them 0..4 itself.
    let mut one = Cockpit::from_kinds(kinds(), &Schedule::every_step())
        .unwrap()
        .with_optimizer(OptimizerInfo::from_sgd(&SgdConfig::new(), LR));
    let (mut model, mut optimizer) = (start.clone(), SgdConfig::new().init());
    for _epoch in 0..2 {
        for batch_index in 0..2 {
            let step = one.next_step();
            assert_eq!(step, _epoch * 2 + batch_index);
            let (x, y) = batch(&device, backend, step);
            let stepped = one
                .step(
                    &model,
                    move |m: &DropIn| m.forward(x.clone()),
                    OutputLoss::classes(y, 3),
                )
                .unwrap();
            assert!(
                stepped.report.tracked && stepped.report.is_complete(),
                "{:?}",
                stepped.report
            );
            assert_eq!(stepped.report.step, step);
            model = optimizer.step(LR, model, stepped.grads);
        }
    }
    let mut hand = Cockpit::from_kinds(kinds(), &Schedule::every_step()).unwrap();
    let (mut model, mut optimizer) = (start, SgdConfig::new().init());
    for step in 0..STEPS {
        let (x, y) = batch(&device, backend, step);
        let recorder = Recorder::start();
        let losses = burn_cockpit::persample::loss::cross_entropy(model.forward(x), y);
        let loss = losses.clone().mean();
        let grads = loss.backward();
        let recording = recorder.finish(&grads).unwrap();
        let grads = GradientsParams::from_grads(grads, &model);
        let info = StepInfo::new(loss.detach())
            .with_individual_losses(losses.detach())
            .with_optimizer(OptimizerInfo::sgd(LR))
            .with_per_sample(recording);
        hand.track(step, &model, &grads, info)
            .unwrap()
            .into_result()
            .unwrap();
        model = optimizer.step(LR, model, grads);
    }
    let mut compared = 0;
    for (step, key, value) in hand.output().iter() {
        let ours = one
            .output()
            .get(step, key)
            .unwrap_or_else(|| panic!("{key} at {step} missing from the one-call run"));
        if key == "time" {
            continue;
        }
        for (a, b) in numbers(ours).iter().zip(numbers(value)) {
            assert!(
                common::close(*a, b, backend.rel, backend.abs) || (a.is_nan() && b.is_nan()),
                "{key} at {step}: {a} vs {b}"
            );
            compared += 1;
        }
    }
    assert!(compared > 50, "compared only {compared} numbers");
}

fn plain_layers_fail_alone_or_fall_back_when_allowed(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let dropin = DropIn::new(&device, backend);
    let run = |cockpit: &mut Cockpit, plain: bool| {
        let (mut dropin, mut plain_model) = (dropin.clone(), dropin.plain());
        let mut optimizer = SgdConfig::new().init();
        let mut optimizer_plain = SgdConfig::new().init();
        let mut reports = Vec::new();
        for step in 0..3 {
            let (x, y) = batch(&device, backend, step);
            let loss = OutputLoss::classes(y, 3);
            if plain {
                let stepped = cockpit
                    .step(&plain_model, move |m: &Plain| m.forward(x.clone()), loss)
                    .unwrap();
                reports.push(stepped.report);
                plain_model = optimizer_plain.step(LR, plain_model, stepped.grads);
            } else {
                let stepped = cockpit
                    .step(&dropin, move |m: &DropIn| m.forward(x.clone()), loss)
                    .unwrap();
                reports.push(stepped.report);
                dropin = optimizer.step(LR, dropin, stepped.grads);
            }
        }
        reports
    };
    let cockpit = || {
        Cockpit::from_kinds(kinds(), &Schedule::every_step())
            .unwrap()
            .with_optimizer(OptimizerInfo::sgd(LR))
            .with_console(false)
    };
    // Without the fallback: every per-sample quantity fails with the coverage report, the
    // others are computed, and `step` is `Ok`.
    let mut refused = cockpit();
    let reports = run(&mut refused, true);
    let failed: Vec<&str> = reports[1]
        .failures
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    for kind in PER_SAMPLE {
        if kind != QuantityKind::Alpha {
            assert!(failed.contains(&kind.spec().name), "{failed:?}");
        }
    }
    assert!(
        reports[1].failures[0].1.to_string().contains("0 of 4"),
        "{}",
        reports[1].failures[0].1
    );
    assert!(refused.output().get(1, "GradNorm").is_some());
    assert!(refused.output().get(1, "Loss").is_some());
    // With it: the single-sample passes give the drop-ins' numbers.
    let mut fallback = cockpit().with_step_options(StepOptions::new().with_exact_fallback(true));
    let reports = run(&mut fallback, true);
    assert!(reports.iter().all(|r| r.is_complete()), "{reports:?}");
    let mut fast = cockpit();
    run(&mut fast, false);
    for step in 0..2 {
        for key in scalar_keys() {
            let (a, b) = (
                common::float(&fallback, step, key),
                common::float(&fast, step, key),
            );
            assert!(
                common::close(a, b, backend.rel, backend.abs),
                "{key} at {step}: exact fallback {a} vs fast path {b}"
            );
        }
    }
}

/// `OnBatch` (the forward on an input the Cockpit holds) gives the step what a closure gives
/// it, and its widened exact GGN (one recorded pass over the batch repeated per class, forced
/// here with `GgnPasses::Widened`) gives HessTrace (declared piecewise linear: the GGN's
/// diagonal) what the separate passes give.
fn on_batch_widens_the_exact_ggn(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let start = DropIn::new(&device, backend);
    let run = |widened: bool| {
        let options = StepOptions::new()
            .with_piecewise_linear(true)
            .with_ggn_passes(GgnPasses::Widened);
        let mut cockpit = Cockpit::from_kinds(
            [QuantityKind::Loss, QuantityKind::HessTrace],
            &Schedule::every_step(),
        )
        .unwrap()
        .with_step_options(options);
        let (mut model, mut optimizer) = (start.clone(), SgdConfig::new().init());
        for step in 0..2 {
            let (x, y) = batch(&device, backend, step);
            let loss = OutputLoss::classes(y, 3);
            let stepped = if widened {
                cockpit.step(&model, OnBatch::new(x, |m: &DropIn, x| m.forward(x)), loss)
            } else {
                cockpit.step(&model, move |m: &DropIn| m.forward(x.clone()), loss)
            }
            .unwrap();
            assert!(stepped.report.is_complete(), "{:?}", stepped.report);
            model = optimizer.step(LR, model, stepped.grads);
        }
        (0..2)
            .flat_map(|step| numbers(cockpit.output().get(step, "HessTrace").unwrap()))
            .collect::<Vec<f64>>()
    };
    let (separate, widened) = (run(false), run(true));
    assert_eq!(separate.len(), 8);
    assert!(separate.iter().any(|v| *v != 0.0));
    for (a, b) in separate.iter().zip(&widened) {
        assert!(
            common::close(*a, *b, backend.rel, backend.abs),
            "{a} vs {b}"
        );
    }
}

on_every_backend!(
    on_batch_widens_the_exact_ggn,
    one_call_equals_the_hand_written_loop,
    plain_layers_fail_alone_or_fall_back_when_allowed,
);

/// Adam from burn's config: Alpha takes the update actually applied (Cockpit's general path)
/// and equals the parabola fit on it computed by hand; CABS is refused alone.
#[test]
fn adam_is_read_from_burns_config() {
    let backend = common::flex();
    let device = backend.device.clone().autodiff();
    let config = AdamConfig::new();
    let lr = 0.01;
    let mut cockpit = Cockpit::from_kinds(
        [QuantityKind::Alpha, QuantityKind::CABS, QuantityKind::Loss],
        &Schedule::every_step(),
    )
    .unwrap()
    .with_optimizer(OptimizerInfo::from_adam(&config, lr))
    .with_console(false);
    let mut model = DropIn::new(&device, &backend);
    let mut optimizer = config.init();
    for step in 0..3 {
        let (x, y) = batch(&device, &backend, step);
        let stepped = cockpit
            .step(
                &model,
                move |m: &DropIn| m.forward(x.clone()),
                OutputLoss::classes(y, 3),
            )
            .unwrap();
        let failed: Vec<&str> = stepped
            .report
            .failures
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(failed, ["CABS"], "{:?}", stepped.report);
        assert!(stepped.report.failures[0].1.to_string().contains("SGD"));
        model = optimizer.step(lr, model, stepped.grads);
    }
    for step in 0..2 {
        assert!(common::float(&cockpit, step, "Alpha").is_finite());
    }
}

/// README.md shows `examples/minimal.rs` and `examples/learner_minimal.rs` verbatim (the
/// examples are compiled with the tests).
#[test]
fn the_readme_shows_the_minimal_examples_verbatim() {
    let readme = include_str!("../../README.md");
    for (marker, example, file) in [
        (
            "<!-- minimal-example -->",
            include_str!("../../examples/minimal.rs"),
            "examples/minimal.rs",
        ),
        (
            "<!-- learner-example -->",
            include_str!("../../examples/learner_minimal.rs"),
            "examples/learner_minimal.rs",
        ),
    ] {
        assert_shown_verbatim(readme, marker, example, file);
    }
}

/// A new user's first questions — what to add to `Cargo.toml`, what to type, what `step`
/// hands back, why a panel of the dashboard is blank, which examples — are answered in the
/// README's first 150 lines, before the reference.
#[test]
fn the_readme_answers_the_first_questions_first() {
    let readme = include_str!("../../README.md");
    let head: String = readme.lines().take(150).collect::<Vec<_>>().join("\n");
    for answer in [
        "<!-- dependency-block -->",
        "<!-- minimal-example -->",
        "**What `step` returns**",
        "**Why a panel is blank.**",
        "**Which examples, in three lines**",
    ] {
        assert!(
            head.contains(answer),
            "not in README.md's first 150 lines: {answer}"
        );
    }
}

fn assert_shown_verbatim(readme: &str, marker: &str, example: &str, file: &str) {
    let block = readme
        .split(marker)
        .nth(1)
        .unwrap_or_else(|| panic!("README.md has the marker {marker}"));
    let code = block
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a rust block follows the marker");
    assert_eq!(
        code.trim_end(),
        example.trim_end(),
        "README.md's block after {marker} differs from {file}"
    );
}
