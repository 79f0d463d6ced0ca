//! The per-sample engine: fast path against the exact fallback and against a brute-force
//! per-sample loop, the two-step rule with every quantity, and edge cases.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::sync::Arc;

use crate::architectures::{self, ConvAutoencoder, GuideCnn, TextClassifier, Translator};
use crate::common::{Backend, PER_SAMPLE, float, histogram_counts};
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Tensor, TensorData};
use burn_cockpit::curvature::{
    Activation, FiniteDifferenceHvp, MlpCurvature, MlpLayer, OutputLoss,
};
use burn_cockpit::histogram::HistogramEngine;
use burn_cockpit::persample::{
    ExactPerSample, Linear, MergedPerSample, PerSample, PerSampleSource, Recorder,
};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, OptimizerInfo, QuantityError, Schedule, StepInfo};

#[derive(Module, Debug)]
struct Mlp {
    l1: Linear,
    l2: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            l1: LinearConfig::new(5, 4).init(device).into(),
            l2: LinearConfig::new(4, 3).init(device).into(),
        }
    }
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l2.forward(self.l1.forward(x).tanh())
    }
}

/// A conv layer and a plain burn Linear (not covered by the fast path) around an
/// instrumented one.
#[derive(Module, Debug)]
struct Mixed {
    conv: Conv2d,
    fc: Linear,
    head: burn::nn::Linear,
}

impl Mixed {
    fn new(device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([1, 2], [3, 3]).init(device),
            fc: LinearConfig::new(18, 6).init(device).into(),
            head: LinearConfig::new(6, 3).init(device),
        }
    }
    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = relu(self.conv.forward(x));
        let b = h.dims()[0];
        self.head
            .forward(self.fc.forward(h.reshape([b, 18])).tanh())
    }
}

fn data(device: &Device, batch: usize, features: usize, seed: usize) -> (Vec<f32>, Tensor<2>) {
    let x: Vec<f32> = (0..batch * features)
        .map(|i| (((i * 37 + seed * 11) % 23) as f32 / 23.0 - 0.5) * 2.0)
        .collect();
    let mut y = vec![0f32; batch * 3];
    for n in 0..batch {
        y[n * 3 + (n + seed) % 3] = 1.0;
    }
    (x, Tensor::from_data(TensorData::new(y, [batch, 3]), device))
}

/// Exact curvature of [`Mlp`] on a batch: Linear → tanh → Linear, cross-entropy; products by
/// finite differences.
fn mlp_curvature(model: &Mlp, x: Tensor<2>, onehot: Tensor<2>) -> MlpCurvature {
    let z1 = model.l1.forward(x.clone()).detach();
    let z2 = model.l2.forward(z1.clone().tanh()).detach();
    let layer = |l: &Linear, input: Tensor<2>, z: Tensor<2>, activation| MlpLayer {
        weight_id: l.weight.id,
        bias_id: l.bias.as_ref().map(|b| b.id),
        weight: l.weight.val().detach(),
        input,
        pre_activation: z,
        activation,
    };
    let layers = vec![
        layer(&model.l1, x.clone().detach(), z1.clone(), Activation::Tanh),
        layer(&model.l2, z1.tanh(), z2, Activation::Identity),
    ];
    let (xs, ys) = (x, onehot.clone());
    let hvp = FiniteDifferenceHvp::new(model, move |m: &Mlp| {
        Ok(GradientsParams::from_grads(
            ce(m.forward(xs.clone()), ys.clone()).mean().backward(),
            m,
        ))
    });
    MlpCurvature::new(layers, OutputLoss::CrossEntropy(onehot), 7).with_hvp(hvp)
}

fn ce(logits: Tensor<2>, onehot: Tensor<2>) -> Tensor<1> {
    let b = logits.dims()[0];
    (log_softmax(logits, 1) * onehot)
        .sum_dim(1)
        .neg()
        .reshape([b])
}

/// Histogram `key` at `step` of two Cockpits, which must count the same number of elements:
/// both counts, how many elements sit in another bin (half the absolute differences), and the
/// total.
fn compare_histograms(
    a: &Cockpit,
    b: &Cockpit,
    step: usize,
    key: &str,
) -> (Vec<f64>, Vec<f64>, f64, f64) {
    let (a, b) = (
        histogram_counts(a, step, key),
        histogram_counts(b, step, key),
    );
    let total = a.iter().sum::<f64>();
    assert_eq!(total, b.iter().sum::<f64>(), "{key} at {step}: totals");
    let moved = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum::<f64>() / 2.0;
    (a, b, moved, total)
}

/// The fast-path and exact-fallback Cockpits agree on every per-sample quantity over `steps`
/// steps (Alpha on all but the last), to `rel`.
fn assert_fast_equals_exact(fast: &Cockpit, exact: &Cockpit, steps: usize, rel: f64) {
    for step in 0..steps {
        for key in [
            "NormTest",
            "InnerTest",
            "OrthoTest",
            "MeanGSNR",
            "CABS",
            "EarlyStopping",
        ] {
            let (a, b) = (float(fast, step, key), float(exact, step, key));
            assert!(
                common::close(a, b, rel, 1e-6),
                "{key} at {step}: fast {a}, exact {b}"
            );
        }
        for key in ["GradHist1d", "GradHist2d"] {
            // Float32 sums in another order can push an element across a bin edge (the edge at
            // zero above all, for elements that are ±tiny); wgpu's reductions are not even
            // deterministic (0–4 of 1632 moved over repeated runs of the channel model). A wrong
            // formula moves hundreds.
            let (_, _, moved, total) = compare_histograms(fast, exact, step, key);
            assert!(
                moved <= (0.01 * total).max(2.0),
                "{key} at {step}: {moved} of {total} moved"
            );
        }
    }
    for step in 0..steps - 1 {
        let (a, b) = (float(fast, step, "Alpha"), float(exact, step, "Alpha"));
        assert!(
            common::close(a, b, 1e-3, 1e-5),
            "Alpha at {step}: fast {a}, exact {b}"
        );
    }
    assert!(
        fast.output().get(steps - 1, "Alpha").is_none(),
        "the last step has no Alpha"
    );
}

/// Three SGD steps (lr 0.1) of `model` on batches of `batch`, in the backend's float type
/// (float64 on flex; wgpu on lavapipe computes float64 as NaN, so float32 there), tracking the
/// nine per-sample
/// quantities twice: from the instrumented layers' records, which must cover every parameter,
/// and from single-sample backward passes. The two are compared with
/// [`assert_fast_equals_exact`]; the fast Cockpit is returned. `logits(model, step, samples)`
/// runs the model on those samples of step `step`'s batch (labels from [`data`]).
pub(crate) fn fast_path_against_single_sample_passes<M, F>(
    backend: &Backend,
    model: M,
    batch: usize,
    logits: F,
) -> Cockpit
where
    M: Module + Clone + Send + Sync + 'static,
    F: Fn(&M, usize, std::ops::Range<usize>) -> Tensor<2> + Clone + Send + Sync + 'static,
{
    let device = &backend.device.clone().autodiff();
    let mut model = model.map(&mut common::ToDType(backend.dtype));
    let mut optim = SgdConfig::new().init();
    let schedule = Schedule::every_step();
    let mut fast = Cockpit::from_kinds(PER_SAMPLE, &schedule)
        .unwrap()
        .with_histogram_engine(HistogramEngine::Host);
    let mut exact = Cockpit::from_kinds(PER_SAMPLE, &schedule).unwrap();
    // The same records, histograms counted on the device.
    let mut on_device = Cockpit::from_kinds(
        [QuantityKind::GradHist1d, QuantityKind::GradHist2d],
        &schedule,
    )
    .unwrap()
    .with_histogram_engine(HistogramEngine::Device);
    for step in 0..3 {
        let (_, y) = data(device, batch, 1, step);
        let y = y.cast(backend.dtype);
        let recorder = Recorder::start();
        let per_sample = ce(logits(&model, step, 0..batch), y.clone());
        let loss = per_sample.clone().mean();
        let grads = loss.backward();
        let factors = recorder.finish(&grads).unwrap();
        let grads = GradientsParams::from_grads(grads, &model);
        let coverage = factors.coverage(&burn_cockpit::persample::Snapshot::of_params(&model));
        assert!(coverage.is_complete(), "{coverage}");
        let (frozen, f) = (model.clone(), logits.clone());
        let single = ExactPerSample::new(batch, move |n| {
            let loss = ce(f(&frozen, step, n..n + 1), y.clone().slice(n..n + 1)).mean();
            Ok(GradientsParams::from_grads(loss.backward(), &frozen))
        });
        let info = StepInfo::new(loss.detach())
            .with_individual_losses(per_sample.detach())
            .with_optimizer(OptimizerInfo::sgd(0.1));
        on_device
            .track(
                step,
                &model,
                &grads,
                info.clone().with_per_sample(factors.clone()),
            )
            .unwrap();
        fast.track(step, &model, &grads, info.clone().with_per_sample(factors))
            .unwrap();
        exact
            .track(step, &model, &grads, info.with_per_sample(single))
            .unwrap();
        model = optim.step(0.1, model, grads);
    }
    // wgpu's float32 reductions are not deterministic in order (lavapipe): EarlyStopping,
    // a ratio of variance sums, moved by up to 1.2e-4 between identical runs.
    let rel = if backend.dtype == burn::tensor::DType::F64 {
        1e-4
    } else {
        5e-4
    };
    assert_fast_equals_exact(&fast, &exact, 3, rel);
    assert_host_equals_device(&fast, &on_device, 3, backend);
    fast
}

/// The host and device histogram engines count the same records alike: identically in
/// float64 (flex); in float32 (wgpu) the device bins rank-one products rounded to float32
/// (a product within 2⁻²⁴ of an edge may cross it, bounded exactly in the unit tests of
/// `histogram::device`), and lavapipe's reductions are not deterministic in order, so a few
/// elements may move there.
fn assert_host_equals_device(host: &Cockpit, device: &Cockpit, steps: usize, backend: &Backend) {
    for step in 0..steps {
        for key in ["GradHist1d", "GradHist2d"] {
            let (a, b, moved, total) = compare_histograms(host, device, step, key);
            if backend.dtype == burn::tensor::DType::F64 {
                assert_eq!(a, b, "{key} at {step} on {}: host and device", backend.name);
            } else {
                assert!(
                    moved <= (1e-3 * total).max(2.0),
                    "{key} at {step} on {}: {moved} of {total} moved",
                    backend.name
                );
            }
        }
    }
}

/// [`fast_path_against_single_sample_passes`] for a model on float inputs of `shape` (batch
/// first), drawn by [`data`] for each step.
pub(crate) fn on_float_inputs<M, const D: usize>(
    backend: &Backend,
    model: M,
    shape: [usize; D],
    forward: fn(&M, Tensor<D>) -> Tensor<2>,
) -> Cockpit
where
    M: Module + Clone + Send + Sync + 'static,
{
    let device = backend.device.clone().autodiff();
    let (batch, dtype) = (shape[0], backend.dtype);
    let features = shape[1..].iter().product();
    fast_path_against_single_sample_passes(
        backend,
        model,
        batch,
        move |model: &M, step, samples| {
            let (x, _) = data(&device, batch, features, step);
            forward(model, rows(&x, samples, shape, &device, dtype))
        },
    )
}

/// Samples `samples` of a batch of shape `shape` held on the host, as a tensor of `dtype`.
fn rows<const D: usize>(
    values: &[f32],
    samples: std::ops::Range<usize>,
    shape: [usize; D],
    device: &Device,
    dtype: burn::tensor::DType,
) -> Tensor<D> {
    let features: usize = shape[1..].iter().product();
    let mut shape = shape;
    shape[0] = samples.len();
    Tensor::<D>::from_data(
        TensorData::new(
            values[samples.start * features..samples.end * features].to_vec(),
            shape,
        ),
        device,
    )
    .cast(dtype)
}

/// The fast path (recorded factors) and the exact fallback (single-sample passes) give the same
/// values for all nine quantities over three SGD steps.
fn fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 6;
    let fast = on_float_inputs(backend, Mlp::new(&device), [batch, 5], Mlp::forward);
    let counts = histogram_counts(&fast, 0, "GradHist1d").iter().sum::<f64>();
    assert_eq!(
        counts,
        (batch * (5 * 4 + 4 + 4 * 3 + 3)) as f64,
        "B·D counts"
    );
}

/// `steps` plain SGD steps of rate `lr` on the test MLP (batches of 8), each tracked by every
/// Cockpit in `cockpits` from one recorded pass.
fn sgd_steps_with_alpha(device: &Device, lr: f64, steps: usize, cockpits: &mut [Cockpit]) {
    sgd_steps(device, steps, cockpits, |_, _| lr);
}

/// `steps` plain SGD steps on the test MLP (batches of 8), each tracked by every Cockpit in
/// `cockpits` from one recorded pass; `lr(step, cockpits)` gives the step's rate (and may tell
/// the Cockpits about it, or not).
fn sgd_steps(
    device: &Device,
    steps: usize,
    cockpits: &mut [Cockpit],
    mut lr: impl FnMut(usize, &mut [Cockpit]) -> f64,
) {
    let batch = 8;
    let mut model = Mlp::new(device);
    let mut optim = SgdConfig::new().init();
    for step in 0..steps {
        let (x, y) = data(device, batch, 5, step);
        let inputs = Tensor::<2>::from_data(TensorData::new(x, [batch, 5]), device);
        let recorder = Recorder::start();
        let per_sample = ce(model.forward(inputs), y);
        let loss = per_sample.clone().mean();
        let grads = loss.backward();
        let factors = recorder.finish(&grads).unwrap();
        let grads = GradientsParams::from_grads(grads, &model);
        let lr = lr(step, cockpits);
        for cockpit in cockpits.iter_mut() {
            let info = StepInfo::new(loss.clone().detach())
                .with_individual_losses(per_sample.clone().detach())
                .with_per_sample(factors.clone());
            cockpit.track(step, &model, &grads, info).unwrap();
        }
        model = optim.step(lr, model, grads);
    }
}

/// Alpha's SGD path (`d = −lr·∇L`, projections from the shared per-sample passes) equals its
/// general path (`d = θ_{s+1} − θ_s`, its own projections) on plain SGD steps, and warns when
/// the announced learning rate is not the one the parameters moved by.
fn alpha_sgd_path_equals_general_path(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let lr = 0.1;
    let schedule = Schedule::every_step();
    let infos = [
        OptimizerInfo::sgd(lr),
        OptimizerInfo::Other {
            name: "Adam".into(),
            lr: Some(lr),
        },
        OptimizerInfo::sgd(lr / 2.0),
    ];
    let mut cockpits: Vec<Cockpit> = infos
        .iter()
        .map(|info| {
            Cockpit::from_kinds([QuantityKind::Alpha], &schedule)
                .unwrap()
                .with_optimizer(info.clone())
        })
        .collect();
    let steps = 4;
    sgd_steps_with_alpha(&device, lr, steps, &mut cockpits);
    for step in 0..steps - 1 {
        let (sgd, general) = (
            float(&cockpits[0], step, "Alpha"),
            float(&cockpits[1], step, "Alpha"),
        );
        assert!(
            (sgd - general).abs() <= 1e-4 * (1.0 + general.abs()),
            "step {step}: SGD path {sgd}, general path {general}"
        );
    }
    assert!(
        cockpits[0].warnings().is_empty(),
        "{:?}",
        cockpits[0].warnings()
    );
    assert!(
        cockpits[1].warnings().is_empty(),
        "{:?}",
        cockpits[1].warnings()
    );
    let mismatch = cockpits[2].warnings();
    assert_eq!(
        mismatch.len(),
        1,
        "checked on the first pair of steps: {mismatch:?}"
    );
    assert!(
        mismatch.iter().all(|w| w.contains("plain SGD step")),
        "{mismatch:?}"
    );
    // The mismatch is read at step 1, after step 1's start point was taken on the announced
    // rate: the α of steps 0 and 1 assumed the wrong step and are refused, not stored.
    for step in 0..2 {
        assert!(
            cockpits[2].output().get(step, "Alpha").is_none(),
            "step {step}: an α on the contradicted step was kept"
        );
    }
    // From step 2 on Alpha follows the update actually taken: the general path's value.
    let (fallen_back, general) = (
        float(&cockpits[2], 2, "Alpha"),
        float(&cockpits[1], 2, "Alpha"),
    );
    assert!(
        (fallen_back - general).abs() <= 1e-4 * (1.0 + general.abs()),
        "after the mismatch: {fallen_back}, general path {general}"
    );
}

/// A float32 SGD step too small for the parameters' precision: storing `θ − lr·g` rounds
/// each parameter by more than a percent of the step, which is not a contradiction of the
/// announced rule (no warning), while announcing half the rate still is.
#[test]
fn alpha_does_not_mistake_float32_rounding_for_another_optimizer() {
    let device = Device::flex().autodiff();
    let lr = 6e-6;
    let mut cockpits: Vec<Cockpit> = [OptimizerInfo::sgd(lr), OptimizerInfo::sgd(lr / 2.0)]
        .into_iter()
        .map(|info| {
            Cockpit::from_kinds([QuantityKind::Alpha], &Schedule::every_step())
                .unwrap()
                .with_optimizer(info)
                .with_console(false)
        })
        .collect();
    sgd_steps_with_alpha(&device, lr, 3, &mut cockpits);
    assert!(
        cockpits[0].warnings().is_empty(),
        "{:?}",
        cockpits[0].warnings()
    );
    let mismatch = cockpits[1].warnings();
    assert!(
        mismatch.len() == 1
            && mismatch[0].contains("plain SGD step")
            && mismatch[0].contains("set_learning_rate"),
        "{mismatch:?}"
    );
}

/// A learning-rate schedule the Cockpit is not told about is named at the first pair of steps
/// it shows in (a warm-up: at once; a decay at step 20 after the rule was confirmed: within
/// the check's cadence of 16 tracked steps), once, with the fix; CABS and EarlyStopping are
/// refused from then on, and resume once `set_learning_rate` makes the announced step true
/// again. A Cockpit told every rate says nothing and refuses nothing.
#[test]
fn an_unannounced_learning_rate_schedule_is_named_and_refuses_cabs() {
    let device = Device::flex().autodiff();
    let kinds = [
        QuantityKind::Alpha,
        QuantityKind::CABS,
        QuantityKind::EarlyStopping,
    ];
    let cockpit = || {
        Cockpit::from_kinds(kinds, &Schedule::every_step())
            .unwrap()
            .with_optimizer(OptimizerInfo::sgd(0.1))
            .with_console(false)
    };
    // The rate taken: a warm-up over 20 steps, then a decay to half at step 20. Cockpit 0 is
    // told every rate; 1 only from step 12 on; 2 only before step 20.
    let actual = |step: usize| {
        if step < 20 {
            0.1 * ((step + 1) as f64 / 20.0).min(1.0)
        } else {
            0.05
        }
    };
    let mut cockpits = vec![cockpit(), cockpit(), cockpit()];
    let steps = 44;
    sgd_steps(&device, steps, &mut cockpits, |step, cockpits| {
        let lr = actual(step);
        cockpits[0].set_learning_rate(lr);
        if step >= 12 {
            cockpits[1].set_learning_rate(lr);
        }
        if step < 20 {
            cockpits[2].set_learning_rate(lr);
        }
        lr
    });
    let has = |cockpit: &Cockpit, step: usize, key: &str| cockpit.output().get(step, key).is_some();
    let said = |cockpit: &Cockpit| cockpit.warnings().to_vec();
    // Told every rate: everything computed, nothing said.
    assert!(said(&cockpits[0]).is_empty(), "{:?}", said(&cockpits[0]));
    for step in 0..steps - 1 {
        assert!(has(&cockpits[0], step, "CABS") && has(&cockpits[0], step, "Alpha"));
    }
    // The warm-up: contradicted by the first pair (read at step 1), named with its fix.
    let warned = said(&cockpits[1]);
    assert!(
        warned[0].starts_with("step 0:")
            && warned[0].contains("plain SGD step")
            && warned[0].contains("set_learning_rate"),
        "{warned:?}"
    );
    assert!(
        has(&cockpits[1], 0, "CABS"),
        "computed before the read that contradicts it"
    );
    for step in 1..12 {
        assert!(!has(&cockpits[1], step, "CABS"), "step {step}: CABS kept");
        assert!(!has(&cockpits[1], step, "EarlyStopping"), "step {step}");
    }
    // Told from step 12: the next checked pair confirms the rule; CABS resumes.
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(warned[1].contains("again"), "{warned:?}");
    assert!((14..steps).all(|step| has(&cockpits[1], step, "CABS")));
    // The decay at step 20, never told: named once within 16 tracked steps of it.
    let warned = said(&cockpits[2]);
    assert_eq!(warned.len(), 1, "{warned:?}");
    let at: usize = warned[0]
        .strip_prefix("step ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!((20..=36).contains(&at), "{warned:?}");
    assert!((0..20).all(|step| has(&cockpits[2], step, "CABS")));
    assert!((at + 2..steps).all(|step| !has(&cockpits[2], step, "CABS")));
}

/// A batch split into parts (micro-batches, or shards on several devices), each recorded in its
/// own forward and backward pass and merged with `MergedPerSample`, gives every per-sample
/// quantity of the whole batch: 7 samples as 3 + 4 and as 2 + 2 + 3, over three SGD steps.
fn split_batches_merge_into_the_whole_batch(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 7;
    for sizes in [vec![3, 4], vec![2, 2, 3]] {
        let mut model = Mlp::new(&device);
        let mut optim = SgdConfig::new().init();
        let schedule = Schedule::every_step();
        let mut whole = Cockpit::from_kinds(PER_SAMPLE, &schedule).unwrap();
        let mut merged = Cockpit::from_kinds(PER_SAMPLE, &schedule).unwrap();
        for step in 0..3 {
            let (x, y) = data(&device, batch, 5, step);
            let inputs = |from: usize, to: usize| {
                Tensor::<2>::from_data(
                    TensorData::new(x[from * 5..to * 5].to_vec(), [to - from, 5]),
                    &device,
                )
            };
            let recorder = Recorder::start();
            let per_sample = ce(model.forward(inputs(0, batch)), y.clone());
            let loss = per_sample.clone().mean();
            let grads = loss.backward();
            let factors = recorder.finish(&grads).unwrap();
            let grads = GradientsParams::from_grads(grads, &model);
            let info = StepInfo::new(loss.detach())
                .with_individual_losses(per_sample.detach())
                .with_optimizer(OptimizerInfo::sgd(0.1));
            whole
                .track(step, &model, &grads, info.clone().with_per_sample(factors))
                .unwrap();
            let mut parts: Vec<Arc<dyn PerSampleSource>> = Vec::new();
            let mut start = 0;
            for size in &sizes {
                let end = start + size;
                let recorder = Recorder::start();
                let part_losses = ce(
                    model.forward(inputs(start, end)),
                    y.clone().slice(start..end),
                );
                let part_grads = part_losses.mean().backward();
                parts.push(Arc::new(recorder.finish(&part_grads).unwrap()));
                start = end;
            }
            let parts = MergedPerSample::new(parts).unwrap();
            assert_eq!(parts.batch_size(), batch);
            merged
                .track(step, &model, &grads, info.with_per_sample(parts))
                .unwrap();
            model = optim.step(0.1, model, grads);
        }
        assert_fast_equals_exact(&merged, &whole, 3, 1e-4);
    }
}

/// A small text model from the new drop-ins: token Embedding (vocabulary 11, width 6),
/// LayerNorm, a Linear on every position, RmsNorm, mean over the sequence, Linear head.
#[derive(Module, Debug)]
struct TextNet {
    embedding: burn_cockpit::persample::Embedding,
    layer_norm: burn_cockpit::persample::LayerNorm,
    mix: Linear,
    rms_norm: burn_cockpit::persample::RmsNorm,
    head: Linear,
}

impl TextNet {
    fn new(device: &Device) -> Self {
        use burn::nn::{EmbeddingConfig, LayerNormConfig, RmsNormConfig};
        let mut layer_norm =
            burn_cockpit::persample::LayerNorm::new(&LayerNormConfig::new(6), device);
        // Non-trivial γ and β, so that their per-sample gradients differ from the defaults'.
        layer_norm.gamma = burn::module::Param::from_tensor(Tensor::<1>::from_data(
            TensorData::new(vec![1.0f32, 0.5, -1.5, 2.0, 0.8, 1.2], [6]),
            device,
        ));
        Self {
            embedding: EmbeddingConfig::new(11, 6).init(device).into(),
            layer_norm,
            mix: LinearConfig::new(6, 5).init(device).into(),
            rms_norm: burn_cockpit::persample::RmsNorm::new(&RmsNormConfig::new(5), device),
            head: LinearConfig::new(5, 3).init(device).into(),
        }
    }

    fn forward(&self, tokens: Tensor<2, burn::tensor::Int>) -> Tensor<2> {
        let h = self.layer_norm.forward(self.embedding.forward(tokens));
        let h = self.rms_norm.forward(self.mix.forward(h).tanh());
        self.head.forward(h.mean_dim(1).squeeze_dim::<2>(1))
    }
}

/// Embedding, LayerNorm and RmsNorm on the fast path (sequences of 4 tokens, a token repeated
/// within a sample) equal single-sample backward passes for all nine quantities over three
/// steps, with every parameter covered.
fn text_model_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, length) = (6, 4);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        TextNet::new(&device),
        batch,
        move |model: &TextNet, step, samples| {
            let tokens: Vec<i64> = (0..batch * length)
                .map(|i| ((i * 7 + step * 3 + (i / length) % 2) % 11) as i64)
                .collect();
            let tokens = &tokens[samples.start * length..samples.end * length];
            model.forward(Tensor::<2, burn::tensor::Int>::from_data(
                TensorData::new(tokens.to_vec(), [samples.len(), length]),
                &dev,
            ))
        },
    );
}

/// Rows longer than `persample::reduce::LONG_ROW` (4 096) in every factored formula, so that
/// on a CubeCL device each goes through the kernels that spread a row over many cubes: a
/// Linear on 70 positions of 150 features (the Gram route of `‖g_n‖²`, rows of 70² values;
/// projections over 70·150), a Linear 150 → 70 on the same positions (`g_n` formed in chunks,
/// rows of 10 500; projections over 70·70), a one-position head of 4 100 outputs (`‖e_n‖²` and
/// `⟨a_n V, e_n⟩` over 4 100) and a readout from those 4 100.
#[derive(Module, Debug)]
struct LongRows {
    wide: Linear,
    narrow: Linear,
    head: Linear,
    readout: Linear,
}

impl LongRows {
    const POSITIONS: usize = 70;
    const FEATURES: usize = 150;

    fn new(device: &Device) -> Self {
        Self {
            wide: LinearConfig::new(Self::FEATURES, Self::FEATURES)
                .init(device)
                .into(),
            narrow: LinearConfig::new(Self::FEATURES, 70).init(device).into(),
            head: LinearConfig::new(70, 4100).init(device).into(),
            readout: LinearConfig::new(4100, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<3>) -> Tensor<2> {
        let h = self.narrow.forward(self.wide.forward(x).tanh()).tanh();
        let pooled = h.mean_dim(1).squeeze_dim::<2>(1);
        self.readout.forward(self.head.forward(pooled).tanh())
    }
}

/// The long rows' norms and projections through the kernels (where they run) equal
/// single-sample backward passes for all nine quantities over three steps.
fn long_rows_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 4;
    let (t, f) = (LongRows::POSITIONS, LongRows::FEATURES);
    let dev = device.clone();
    let dtype = backend.dtype;
    fast_path_against_single_sample_passes(
        backend,
        LongRows::new(&device),
        batch,
        move |model: &LongRows, step, samples| {
            let x: Vec<f32> = (samples.start * t * f..samples.end * t * f)
                .map(|i| (((i * 37 + step * 11) % 29) as f32 / 29.0 - 0.5) * 2.0)
                .collect();
            let x = Tensor::<3>::from_data(TensorData::new(x, [samples.len(), t, f]), &dev);
            model.forward(x.cast(dtype))
        },
    );
}

/// The factored formulas on their own (norms and projections only, so no layer forms its
/// per-sample gradients for histograms): each parameter's `‖g_n‖²` and `⟨g_n, ∇L⟩` from the
/// recording of [`LongRows`] (every row of their reductions longer than 4 096 values) equal
/// those of single-sample passes.
fn long_rows_norms_and_projections_equal_single_sample_passes(backend: &Backend) {
    use burn_cockpit::persample::{Direction, Request, Statistic};
    let device = backend.device.clone().autodiff();
    let model = LongRows::new(&device).map(&mut common::ToDType(backend.dtype));
    let (batch, t, f) = (4, LongRows::POSITIONS, LongRows::FEATURES);
    let x: Vec<f32> = (0..batch * t * f)
        .map(|i| (((i * 37) % 29) as f32 / 29.0 - 0.5) * 2.0)
        .collect();
    let x = Tensor::<3>::from_data(TensorData::new(x, [batch, t, f]), &device).cast(backend.dtype);
    let (_, y) = data(&device, batch, 1, 0);
    let y = y.cast(backend.dtype);
    let recorder = Recorder::start();
    let loss = ce(model.forward(x.clone()), y.clone()).mean();
    let grads = loss.backward();
    let factors = recorder.finish(&grads).unwrap();
    let grads = GradientsParams::from_grads(grads, &model);
    let params = burn_cockpit::persample::Snapshot::of_params(&model);
    let mean = burn_cockpit::persample::Snapshot::of_grads(&model, &grads).unwrap();
    let frozen = model.clone();
    let single = ExactPerSample::new(batch, move |n| {
        let loss = ce(
            frozen.forward(x.clone().slice(n..n + 1)),
            y.clone().slice(n..n + 1),
        )
        .mean();
        Ok(GradientsParams::from_grads(loss.backward(), &frozen))
    });
    let request = || {
        Request::new()
            .with(Statistic::SqNorm)
            .project_on(Direction::Gradient, &mean)
    };
    let fast = factors.reduce(&params, request()).unwrap();
    let exact = single.reduce(&params, request()).unwrap();
    let host = |t: &Tensor<1>| -> Vec<f64> {
        t.clone()
            .cast(burn::tensor::DType::F64)
            .into_data()
            .try_to_vec::<f64>()
            .unwrap()
    };
    let rel = if backend.dtype == burn::tensor::DType::F64 {
        1e-9
    } else {
        1e-4
    };
    for statistic in [Statistic::SqNorm, Statistic::Dot(Direction::Gradient)] {
        let (ours, oracle) = (fast.get(statistic).unwrap(), exact.get(statistic).unwrap());
        for ((ours, oracle), entry) in ours.iter().zip(oracle).zip(params.entries()) {
            common::assert_max_close(
                &format!("{statistic:?} of {}", entry.name),
                &host(ours),
                &host(oracle),
                rel,
            );
        }
    }
}

/// Channels-first drop-ins on inputs `[B, 4, 5]`: Conv1d (kernel 3, `Same` padding), Conv1d
/// (dilation 2, explicit padding 2), GroupNorm (2 groups of 2 channels), PRelu per channel,
/// InstanceNorm, a Linear, PRelu with one α, a Linear head.
#[derive(Module, Debug)]
struct ChannelNet {
    conv_same: burn_cockpit::persample::Conv1d,
    conv_dilated: burn_cockpit::persample::Conv1d,
    group_norm: burn_cockpit::persample::GroupNorm,
    prelu: burn_cockpit::persample::PRelu,
    instance_norm: burn_cockpit::persample::InstanceNorm,
    fc: Linear,
    prelu_one: burn_cockpit::persample::PRelu,
    head: Linear,
}

impl ChannelNet {
    fn new(device: &Device) -> Self {
        use burn::nn::{GroupNormConfig, InstanceNormConfig, PReluConfig};
        let mut group_norm: burn_cockpit::persample::GroupNorm =
            GroupNormConfig::new(2, 4).init(device).into();
        group_norm.gamma = Some(burn::module::Param::from_tensor(Tensor::<1>::from_data(
            TensorData::new(vec![1.0f32, -0.5, 2.0, 0.7], [4]),
            device,
        )));
        use burn::nn::PaddingConfig1d;
        use burn::nn::conv::Conv1dConfig;
        Self {
            conv_same: Conv1dConfig::new(4, 4, 3)
                .with_padding(PaddingConfig1d::Same)
                .init(device)
                .into(),
            conv_dilated: Conv1dConfig::new(4, 4, 3)
                .with_dilation(2)
                .with_padding(PaddingConfig1d::Explicit(2, 2))
                .init(device)
                .into(),
            group_norm,
            prelu: PReluConfig::new()
                .with_num_parameters(4)
                .init(device)
                .into(),
            instance_norm: InstanceNormConfig::new(4).init(device).into(),
            fc: LinearConfig::new(20, 6).init(device).into(),
            prelu_one: PReluConfig::new().init(device).into(),
            head: LinearConfig::new(6, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<3>) -> Tensor<2> {
        let b = x.dims()[0];
        let x = self.conv_dilated.forward(self.conv_same.forward(x).tanh());
        let h = self
            .instance_norm
            .forward(self.prelu.forward(self.group_norm.forward(x)));
        let h = self.prelu_one.forward(self.fc.forward(h.reshape([b, 20])));
        self.head.forward(h)
    }
}

/// Conv1d, GroupNorm, InstanceNorm and PRelu (per channel and with one α) on the fast path equal
/// single-sample backward passes for all nine quantities over three steps.
fn channel_model_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 6;
    on_float_inputs(
        backend,
        ChannelNet::new(&device),
        [batch, 4, 5],
        ChannelNet::forward,
    );
}

/// Convolution settings beyond the plain ones, all on the fast path: a grouped Conv2d with
/// stride, dilation and asymmetric explicit padding; a grouped Conv2d with an even kernel and
/// `Same` padding (which burn pads asymmetrically); a depthwise Conv1d with stride 2 and `Same`
/// padding (asymmetric again); a Linear head.
#[derive(Module, Debug)]
struct ConvSettingsNet {
    grouped: burn_cockpit::persample::Conv2d,
    same_even: burn_cockpit::persample::Conv2d,
    depthwise: burn_cockpit::persample::Conv1d,
    head: Linear,
}

impl ConvSettingsNet {
    fn new(device: &Device) -> Self {
        use burn::nn::conv::Conv1dConfig;
        use burn::nn::{PaddingConfig1d, PaddingConfig2d};
        Self {
            grouped: Conv2dConfig::new([4, 6], [3, 2])
                .with_stride([2, 1])
                .with_dilation([1, 2])
                .with_groups(2)
                .with_padding(PaddingConfig2d::Explicit(1, 0, 2, 1))
                .init(device)
                .into(),
            same_even: Conv2dConfig::new([6, 4], [2, 2])
                .with_groups(2)
                .with_padding(PaddingConfig2d::Same)
                .init(device)
                .into(),
            depthwise: Conv1dConfig::new(4, 4, 3)
                .with_stride(2)
                .with_groups(4)
                .with_padding(PaddingConfig1d::Same)
                .init(device)
                .into(),
            head: LinearConfig::new(32, 3).init(device).into(),
        }
    }

    /// `[B, 4, 6, 5] → [B, 6, 4, 4] → [B, 4, 4, 4] → [B, 4, 16] → [B, 4, 8] → [B, 3]`.
    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = self
            .same_even
            .forward(self.grouped.forward(x).tanh())
            .tanh();
        let h = self.depthwise.forward(h.reshape([b, 4, 16])).tanh();
        self.head.forward(h.reshape([b, 32]))
    }
}

/// Grouped, dilated, strided convolutions with asymmetric and `Same` padding on the fast path
/// equal single-sample backward passes for all nine quantities over three steps.
fn conv_settings_fast_path_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 5;
    on_float_inputs(
        backend,
        ConvSettingsNet::new(&device),
        [batch, 4, 6, 5],
        ConvSettingsNet::forward,
    );
}

/// The burn book guide's model (two Conv2d, adaptive average pooling, two Linear; dropout 0,
/// since single-sample passes would draw other masks) on 12×12 images: on the fast path it
/// equals single-sample backward passes for all nine quantities over three steps.
fn guide_cnn_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 4;
    on_float_inputs(
        backend,
        GuideCnn::new(&device, 3, 16, 0.0),
        [batch, 12, 12],
        GuideCnn::forward,
    );
}

/// A Conv2d and a Conv1d with settings drawn from a seed (kernel, stride, dilation, groups,
/// `Valid`/`Same`/`Explicit` padding, asymmetric too), a Linear head.
#[derive(Module, Debug)]
struct RandomConvNet {
    conv2d: burn_cockpit::persample::Conv2d,
    conv1d: burn_cockpit::persample::Conv1d,
    head: Linear,
    /// `[c, l]` of the Conv2d output, reshaped for the Conv1d.
    flat: [usize; 2],
    features: usize,
}

impl RandomConvNet {
    /// The settings of `seed`, and a description.
    fn new(device: &Device, seed: u64) -> (Self, String) {
        use burn::nn::conv::Conv1dConfig;
        use burn::nn::{PaddingConfig1d, PaddingConfig2d};
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
        let mut draw = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n) as usize
        };
        let groups2 = [1, 2][draw(2)];
        let kernel = [1 + draw(3), 1 + draw(3)];
        let padding2 = match draw(3) {
            0 => PaddingConfig2d::Valid,
            1 => PaddingConfig2d::Same,
            _ => PaddingConfig2d::Explicit(draw(3), draw(3), draw(3), draw(3)),
        };
        let conv2d = Conv2dConfig::new([4, 4], kernel)
            .with_stride([1 + draw(2), 1 + draw(2)])
            .with_dilation([1 + draw(2), 1 + draw(2)])
            .with_groups(groups2)
            .with_padding(padding2.clone())
            .init(device);
        let [c, h, w] = {
            let out = conv2d.forward(Tensor::zeros([1, 4, 7, 6], device));
            let [_, c, h, w] = out.dims();
            [c, h, w]
        };
        let groups1 = [1, 2, 4][draw(3)];
        let padding1 = match draw(3) {
            0 => PaddingConfig1d::Valid,
            1 => PaddingConfig1d::Same,
            _ => PaddingConfig1d::Explicit(draw(3), draw(3)),
        };
        let conv1d = Conv1dConfig::new(c, 4, 1 + draw(4))
            .with_stride(1 + draw(3))
            .with_dilation(1 + draw(2))
            .with_groups(groups1)
            .with_padding(padding1.clone())
            .init(device);
        let features = conv1d
            .forward(Tensor::zeros([1, c, h * w], device))
            .dims()
            .iter()
            .product::<usize>();
        let description = format!(
            "seed {seed}: Conv2d kernel {kernel:?} stride {:?} dilation {:?} groups {groups2} \
             {padding2:?}; Conv1d kernel {} stride {} dilation {} groups {groups1} {padding1:?}",
            conv2d.stride, conv2d.dilation, conv1d.kernel_size, conv1d.stride, conv1d.dilation
        );
        let net = Self {
            conv2d: conv2d.into(),
            conv1d: conv1d.into(),
            head: LinearConfig::new(features, 3).init(device).into(),
            flat: [c, h * w],
            features,
        };
        (net, description)
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = self
            .conv2d
            .forward(x)
            .tanh()
            .reshape([b, self.flat[0], self.flat[1]]);
        let h = self.conv1d.forward(h).tanh();
        self.head.forward(h.reshape([b, self.features]))
    }
}

/// Eight random convolution settings (groups, dilation, stride, asymmetric and `Same`
/// padding): each on the fast path equals single-sample backward passes for all nine
/// quantities over three steps.
fn random_conv_settings_equal_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 4;
    for seed in 0..8 {
        let (model, description) = RandomConvNet::new(&device, seed);
        eprintln!("{description}");
        on_float_inputs(backend, model, [batch, 4, 7, 6], RandomConvNet::forward);
    }
}

/// burn's text-classification architecture (Embeddings, TransformerEncoder with attention,
/// feed-forward blocks and LayerNorms, Linear head) on the fast path, with padded sequences of
/// 5 tokens, equals single-sample backward passes for all nine quantities over three steps.
fn transformer_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, length, vocabulary) = (5, 5, 13);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        TextClassifier::new(&device, vocabulary, length, 3, 8, 2, 2, 0.0),
        batch,
        move |model: &TextClassifier, step, samples| {
            // Sample n keeps n % 3 trailing pads; tokens 1..13 otherwise.
            let tokens: Vec<i64> = (0..batch * length)
                .map(|i| {
                    let (n, t) = (i / length, i % length);
                    if t + n % 3 >= length && t > 0 {
                        architectures::PAD
                    } else {
                        1 + ((i * 5 + step * 7) % (vocabulary - 1)) as i64
                    }
                })
                .collect();
            let tokens = &tokens[samples.start * length..samples.end * length];
            model.forward(Tensor::<2, burn::tensor::Int>::from_data(
                TensorData::new(tokens.to_vec(), [samples.len(), length]),
                &dev,
            ))
        },
    );
}

/// The benchmark's convolutional autoencoder (strided Conv2d down, ConvTranspose2d up, a
/// classifier head) on 28×28 images: the fast path equals single-sample passes for all nine
/// quantities over three steps.
fn autoencoder_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    on_float_inputs(
        backend,
        ConvAutoencoder::new(&device, 3),
        [3, 28, 28],
        ConvAutoencoder::forward,
    );
}

/// The benchmark's encoder–decoder transformer (source padding mask, causal target mask,
/// cross-attention) on pairs of 4-token sequences: the fast path equals single-sample passes
/// for all nine quantities over three steps.
fn translator_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, length, vocabulary) = (4, 4, 11);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        Translator::new(&device, vocabulary, length, 3, 8, 1, 2, 0.0),
        batch,
        move |model: &Translator, step, samples| {
            // Source n keeps n % 2 trailing pads; the target has none.
            let tokens = |salt: usize, pads: bool| -> Tensor<2, burn::tensor::Int> {
                let all: Vec<i64> = (0..batch * length)
                    .map(|i| {
                        let (n, t) = (i / length, i % length);
                        if pads && t + n % 2 >= length && t > 0 {
                            architectures::PAD
                        } else {
                            1 + ((i * 5 + step * 7 + salt) % (vocabulary - 1)) as i64
                        }
                    })
                    .collect();
                let part = all[samples.start * length..samples.end * length].to_vec();
                Tensor::from_data(TensorData::new(part, [samples.len(), length]), &dev)
            };
            model.forward(tokens(0, true), tokens(3, false))
        },
    );
}

/// A recurrent sequence model from the drop-ins: token Embedding, Lstm (reversed, clipped
/// cell), Gru (`reset_after` off), SwiGlu with bias on every position, mean over time, Linear
/// head.
#[derive(Module, Debug)]
struct RecurrentNet {
    embedding: burn_cockpit::persample::Embedding,
    lstm: burn_cockpit::persample::Lstm,
    gru: burn_cockpit::persample::Gru,
    swiglu: burn_cockpit::persample::SwiGlu,
    head: Linear,
}

impl RecurrentNet {
    fn new(device: &Device) -> Self {
        use burn::nn::{EmbeddingConfig, GruConfig, LstmConfig, SwiGluConfig};
        Self {
            embedding: EmbeddingConfig::new(9, 4).init(device).into(),
            lstm: burn_cockpit::persample::Lstm::new(
                &LstmConfig::new(4, 5, true)
                    .with_reverse(true)
                    .with_clip(Some(2.0)),
                device,
            ),
            gru: burn_cockpit::persample::Gru::new(
                &GruConfig::new(5, 4, true).with_reset_after(false),
                device,
            ),
            swiglu: burn_cockpit::persample::SwiGlu::new(
                &SwiGluConfig::new(4, 6).with_bias(true),
                device,
            ),
            head: LinearConfig::new(6, 3).init(device).into(),
        }
    }

    fn forward(&self, tokens: Tensor<2, burn::tensor::Int>) -> Tensor<2> {
        let (h, _) = self.lstm.forward(self.embedding.forward(tokens), None);
        let h = self.swiglu.forward(self.gru.forward(h, None));
        self.head.forward(h.mean_dim(1).squeeze_dim::<2>(1))
    }
}

/// Lstm, Gru and SwiGlu on the fast path — every gate's Linears tapped at every time step and
/// joined per weight — equal single-sample backward passes for all nine quantities over three
/// steps, on sequences of 4 tokens.
fn recurrent_model_fast_path_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let (batch, length) = (5, 4);
    let dev = device.clone();
    fast_path_against_single_sample_passes(
        backend,
        RecurrentNet::new(&device),
        batch,
        move |model: &RecurrentNet, step, samples| {
            let tokens: Vec<i64> = (0..batch * length)
                .map(|i| ((i * 4 + step * 5 + i / length) % 9) as i64)
                .collect();
            let tokens = &tokens[samples.start * length..samples.end * length];
            model.forward(Tensor::<2, burn::tensor::Int>::from_data(
                TensorData::new(tokens.to_vec(), [samples.len(), length]),
                &dev,
            ))
        },
    );
}

/// Conv2d → BatchNorm → ReLU → Linear, the BatchNorm in training mode or on its running
/// statistics (non-trivial ones).
#[derive(Module, Debug)]
struct NormNet {
    conv: burn_cockpit::persample::Conv2d,
    bn: burn_cockpit::persample::BatchNorm,
    head: Linear,
}

impl NormNet {
    fn new(device: &Device, training: bool) -> Self {
        let mut bn = burn::nn::BatchNormConfig::new(3).init(device);
        bn.training = bn.training.with_value(training);
        bn.running_mean
            .update(Tensor::from_floats([0.3, -0.2, 0.5], device));
        bn.running_var
            .update(Tensor::from_floats([0.5, 2.0, 1.5], device));
        bn.gamma = burn::module::Param::from_tensor(Tensor::from_floats([1.2, -0.7, 0.9], device));
        Self {
            conv: Conv2dConfig::new([2, 3], [3, 3])
                .with_padding(burn::nn::PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
                .into(),
            bn: bn.into(),
            head: LinearConfig::new(75, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = relu(self.bn.forward(self.conv.forward(x)));
        self.head.forward(h.reshape([b, 75]))
    }
}

/// BatchNorm on its running statistics is a per-channel affine map: on the fast path it equals
/// single-sample backward passes for all nine quantities over three steps.
fn batch_norm_with_running_statistics_equals_exact_fallback(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 5;
    on_float_inputs(
        backend,
        NormNet::new(&device, false),
        [batch, 2, 5, 5],
        NormNet::forward,
    );
}

/// Training-mode BatchNorm couples the samples: the fast path and `PerSample::auto` refuse
/// with a typed error naming the layer (no fallback to single-sample passes, which would
/// normalise each sample by itself), the coverage report says why for every parameter, and
/// the Cockpit still computes the quantities that need no per-sample gradients.
fn training_mode_batch_norm_is_refused_by_name(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 4;
    let model = NormNet::new(&device, true);
    let (x, y) = data(&device, batch, 50, 0);
    let x = Tensor::<4>::from_data(TensorData::new(x, [batch, 2, 5, 5]), &device);
    let recorder = Recorder::start();
    let loss = ce(model.forward(x.clone()), y.clone()).mean();
    let grads = loss.backward();
    let factors = recorder.finish(&grads).unwrap();
    let grads = GradientsParams::from_grads(grads, &model);
    let params = burn_cockpit::persample::Snapshot::of_params(&model);
    let coverage = factors.coverage(&params);
    assert!(!coverage.is_complete());
    assert_eq!(coverage.uncovered.len(), params.len(), "{coverage}");
    assert!(
        coverage.to_string().contains("BatchNorm in training mode"),
        "{coverage}"
    );
    let (frozen, xs, ys) = (model.clone(), x.clone(), y.clone());
    let exact = ExactPerSample::new(batch, move |n| {
        let loss = ce(
            frozen.forward(xs.clone().slice(n..n + 1)),
            ys.clone().slice(n..n + 1),
        );
        Ok(GradientsParams::from_grads(loss.mean().backward(), &frozen))
    });
    let auto = PerSample::auto(Some(factors), exact);
    let refused = auto.reduce(&params, burn_cockpit::persample::Request::new());
    match refused {
        Err(burn_cockpit::persample::PerSampleError::SamplesCoupled { layer, .. }) => {
            assert!(layer.starts_with("bn."), "{layer}")
        }
        other => panic!("expected SamplesCoupled, got {other:?}"),
    }
    let mut kinds = PER_SAMPLE.to_vec();
    kinds.push(QuantityKind::GradNorm);
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step()).unwrap();
    let info = StepInfo::new(loss.detach())
        .with_optimizer(OptimizerInfo::sgd(0.1))
        .with_per_sample(auto);
    let result = cockpit
        .track(0, &model, &grads, info)
        .and_then(burn_cockpit::StepReport::into_result);
    let Err(burn_cockpit::CockpitError::QuantitiesFailed { failures, .. }) = result else {
        panic!("expected failures, got {result:?}");
    };
    assert!(
        failures
            .iter()
            .any(|(_, err)| err.to_string().contains("`bn.")),
        "{failures:?}"
    );
    assert!(cockpit.output().get(0, "GradNorm").is_some());
}

/// One step of the nine per-sample quantities on `model` from its per-sample losses, on the
/// fast path (which must record).
fn track_one_step<M: Module>(
    model: &M,
    losses: impl Fn(&M) -> Tensor<1>,
) -> (Cockpit, Result<(), burn_cockpit::CockpitError>) {
    let mut cockpit = Cockpit::from_kinds(PER_SAMPLE, &Schedule::every_step()).unwrap();
    let recorder = Recorder::start();
    let per_sample = losses(model);
    let loss = per_sample.clone().mean();
    let grads = loss.backward();
    let factors = recorder.finish(&grads).unwrap();
    let grads = GradientsParams::from_grads(grads, model);
    let info = StepInfo::new(loss.detach())
        .with_individual_losses(per_sample.detach())
        .with_optimizer(OptimizerInfo::sgd(0.1))
        .with_per_sample(factors);
    let result = cockpit
        .track(0, model, &grads, info)
        .and_then(burn_cockpit::StepReport::into_result);
    (cockpit, result)
}

/// The new layers' edge cases: batch size 1 (the 1/(B−1) quantities NaN with a warning, the
/// others computed) and a NaN parameter (NaN values and warnings, never a panic), on the
/// transformer and the recurrent model.
fn edge_cases_on_sequence_models(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let tokens = |batch: usize| {
        Tensor::<2, burn::tensor::Int>::from_data(
            TensorData::new(
                (0..batch * 5)
                    .map(|i| 1 + (i % 7) as i64)
                    .collect::<Vec<_>>(),
                [batch, 5],
            ),
            &device,
        )
    };
    let labels = |batch: usize| data(&device, batch, 1, 0).1;
    let transformer = TextClassifier::new(&device, 9, 5, 3, 8, 2, 2, 0.0);
    let recurrent = RecurrentNet::new(&device);
    let text_losses = |m: &TextClassifier| ce(m.forward(tokens(1)), labels(1));
    let recurrent_losses = |m: &RecurrentNet| ce(m.forward(tokens(1)), labels(1));
    for (name, (cockpit, result)) in [
        ("transformer", track_one_step(&transformer, text_losses)),
        ("recurrent", track_one_step(&recurrent, recurrent_losses)),
    ] {
        result.unwrap_or_else(|err| panic!("{name}: {err}"));
        for key in ["NormTest", "InnerTest", "OrthoTest"] {
            assert!(float(&cockpit, 0, key).is_nan(), "{name} {key}");
        }
        assert!(float(&cockpit, 0, "MeanGSNR").is_finite(), "{name}");
        assert!(!cockpit.warnings().is_empty(), "{name}");
    }
    let mut poisoned = transformer.clone();
    let bias = poisoned.output.bias.take().unwrap();
    poisoned.output.bias = Some(burn::module::Param::from_tensor(
        bias.val()
            .detach()
            .mul_scalar(f64::NAN)
            .detach()
            .require_grad(),
    ));
    let (cockpit, _) = track_one_step(&poisoned, |m: &TextClassifier| {
        ce(m.forward(tokens(3)), labels(3))
    });
    assert!(float(&cockpit, 0, "NormTest").is_nan());
    assert!(!cockpit.warnings().is_empty());
}

/// Instrumented Conv2d (stride 2, padding 1) and Linear: all on the fast path.
#[derive(Module, Debug)]
struct ConvNet {
    conv: burn_cockpit::persample::Conv2d,
    fc: Linear,
}

impl ConvNet {
    fn new(device: &Device) -> Self {
        let conv = Conv2dConfig::new([2, 3], [3, 3])
            .with_stride([2, 2])
            .with_padding(burn::nn::PaddingConfig2d::Explicit(1, 1, 1, 1))
            .init(device);
        Self {
            conv: conv.into(),
            fc: LinearConfig::new(27, 3).init(device).into(),
        }
    }
    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = relu(self.conv.forward(x));
        let b = h.dims()[0];
        self.fc.forward(h.reshape([b, 27]))
    }
}

/// The Conv2d fast path (unfolded inputs and output gradients) equals single-sample backward
/// passes for every per-sample quantity, over three SGD steps.
fn conv_fast_path_equals_single_sample_passes(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 5;
    on_float_inputs(
        backend,
        ConvNet::new(&device),
        [batch, 2, 5, 5],
        ConvNet::forward,
    );
}

/// A model with Conv2d and a plain Linear: `PerSample::auto` falls back to single-sample
/// passes, and the values equal those computed on the host from per-sample gradients taken one
/// sample at a time in this test.
fn mixed_model_matches_a_brute_force_per_sample_loop(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 5;
    let model = Mixed::new(&device);
    let (x, y) = data(&device, batch, 25, 3);
    let input = |rows: std::ops::Range<usize>| {
        let n = rows.len();
        Tensor::<4>::from_data(
            TensorData::new(x[rows.start * 25..rows.end * 25].to_vec(), [n, 1, 5, 5]),
            &device,
        )
    };
    let recorder = Recorder::start();
    let per_sample = ce(model.forward(input(0..batch)), y.clone());
    let loss = per_sample.clone().mean();
    let grads = loss.backward();
    let factors = recorder.finish(&grads).unwrap();
    // The coverage report names the plain burn layers' parameters as the ones that fall back.
    let coverage = factors.coverage(&burn_cockpit::persample::Snapshot::of_params(&model));
    assert!(!coverage.is_complete());
    let mut covered = coverage.covered.clone();
    covered.sort();
    assert_eq!(covered, ["fc.bias", "fc.weight"]);
    let mut uncovered: Vec<&str> = coverage.uncovered.iter().map(|(n, _)| n.as_str()).collect();
    uncovered.sort();
    assert_eq!(
        uncovered,
        ["conv.bias", "conv.weight", "head.bias", "head.weight"]
    );
    let report = coverage.to_string();
    assert!(
        report.starts_with("fast path: 2 of 6 parameters"),
        "{report}"
    );
    assert!(
        report.contains("not covered  head.weight: shape"),
        "{report}"
    );
    let grads = GradientsParams::from_grads(grads, &model);
    let (frozen, x2, y2, dev) = (model.clone(), x.clone(), y.clone(), device.clone());
    let exact = ExactPerSample::new(batch, move |n| {
        let xn = Tensor::<4>::from_data(
            TensorData::new(x2[n * 25..(n + 1) * 25].to_vec(), [1, 1, 5, 5]),
            &dev,
        );
        let loss = ce(frozen.forward(xn), y2.clone().slice(n..n + 1)).mean();
        Ok(GradientsParams::from_grads(loss.backward(), &frozen))
    });
    let kinds = [
        QuantityKind::NormTest,
        QuantityKind::InnerTest,
        QuantityKind::OrthoTest,
        QuantityKind::MeanGSNR,
        QuantityKind::GradHist1d,
    ];
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step()).unwrap();
    let info = StepInfo::new(loss.detach()).with_per_sample(PerSample::auto(Some(factors), exact));
    cockpit.track(0, &model, &grads, info).unwrap();

    // Brute force: each sample's gradient from its own backward pass, flattened on the host.
    let flat = |gp: &GradientsParams| -> Vec<f64> {
        let mut v = Vec::new();
        for entry in burn_cockpit::persample::Snapshot::of_grads(&model, gp)
            .unwrap()
            .entries()
        {
            v.extend(burn_cockpit::persample::readback::read_values(entry.value.clone()).unwrap());
        }
        v
    };
    let per: Vec<Vec<f64>> = (0..batch)
        .map(|n| {
            let loss = ce(model.forward(input(n..n + 1)), y.clone().slice(n..n + 1)).mean();
            flat(&GradientsParams::from_grads(loss.backward(), &model))
        })
        .collect();
    let d = per[0].len();
    let b = batch as f64;
    let g: Vec<f64> = (0..d)
        .map(|j| per.iter().map(|p| p[j]).sum::<f64>() / b)
        .collect();
    let dot = |a: &[f64], c: &[f64]| a.iter().zip(c).map(|(x, y)| x * y).sum::<f64>();
    let g2 = dot(&g, &g);
    let sq: f64 = per.iter().map(|p| dot(p, p)).sum();
    let pi2: f64 = per.iter().map(|p| dot(p, &g).powi(2)).sum();
    let norm = ((sq - b * g2) / ((b - 1.0) * b * g2)).sqrt();
    let inner = ((pi2 - b * g2 * g2) / ((b - 1.0) * b * g2 * g2)).sqrt();
    let ortho = ((sq - pi2 / g2) / ((b - 1.0) * b * g2)).sqrt();
    let gsnr: f64 = (0..d)
        .map(|j| {
            let s = per.iter().map(|p| p[j] * p[j]).sum::<f64>() / b;
            g[j] * g[j] / (s - g[j] * g[j] + 1e-5)
        })
        .sum::<f64>()
        / d as f64;
    for (key, expected) in [
        ("NormTest", norm),
        ("InnerTest", inner),
        ("OrthoTest", ortho),
        ("MeanGSNR", gsnr),
    ] {
        let ours = float(&cockpit, 0, key);
        assert!(
            common::close(ours, expected, 1e-4, 1e-6),
            "{key}: ours {ours}, brute force {expected}"
        );
    }
    let mut hist = vec![0.0; 100];
    for v in per.iter().flatten() {
        let idx = (((v.clamp(-2.0, 2.0) + 2.0) * 100.0 / 4.0).floor() as usize).min(99);
        hist[idx] += 1.0;
    }
    let ours = histogram_counts(&cockpit, 0, "GradHist1d");
    let moved: f64 = ours
        .iter()
        .zip(&hist)
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / 2.0;
    assert!(moved <= 2.0, "GradHist1d: {moved} moved");
}

/// Cockpit's `test_quantity_integration` with every quantity built so far, `linear(1, 2)` over
/// 5 steps: single-step quantities at {2, 3, 4}; Alpha and UpdateSize at {2, 3}; Distance at
/// {2, 3, 4}.
fn two_step_rule_with_every_quantity(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let batch = 4;
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let mut cockpit =
        Cockpit::from_kinds(QuantityKind::ALL, &Schedule::linear(1, 2).unwrap()).unwrap();
    for step in 0..5 {
        let (x, y) = data(&device, batch, 5, step);
        let inputs = Tensor::<2>::from_data(TensorData::new(x, [batch, 5]), &device);
        let curvature = cockpit
            .needs_curvature(step)
            .then(|| mlp_curvature(&model, inputs.clone(), y.clone()));
        let recorder = cockpit.needs_per_sample(step).then(Recorder::start);
        let per_sample = ce(model.forward(inputs), y);
        let loss = per_sample.clone().mean();
        let grads = loss.backward();
        let factors = recorder.map(|r| r.finish(&grads).unwrap());
        let grads = GradientsParams::from_grads(grads, &model);
        let mut info = StepInfo::new(loss.detach())
            .with_individual_losses(per_sample.detach())
            .with_optimizer(OptimizerInfo::sgd(0.1));
        if let Some(factors) = factors {
            info = info.with_per_sample(factors);
        }
        if let Some(curvature) = curvature {
            info = info.with_curvature(curvature);
        }
        cockpit.track(step, &model, &grads, info).unwrap();
        model = optim.step(0.1, model, grads);
    }
    assert!(
        !cockpit.needs_per_sample(0) && !cockpit.needs_per_sample(1) && cockpit.needs_per_sample(2)
    );
    assert!(!cockpit.needs_curvature(1) && cockpit.needs_curvature(2));
    let steps = |name: &str| -> Vec<usize> {
        cockpit
            .output()
            .series(name)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    };
    for kind in QuantityKind::ALL.into_iter() {
        let expected = match kind {
            QuantityKind::Alpha | QuantityKind::UpdateSize => vec![2, 3],
            _ => vec![2, 3, 4],
        };
        assert_eq!(steps(kind.name()), expected, "{kind}");
    }
}

/// Batch size 1, zero gradients, identical samples and NaN losses give NaN or −1 values and
/// typed errors, never a panic.
fn edge_cases(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Mlp::new(&device);
    let run = |x: Vec<f32>,
               y: Tensor<2>,
               batch: usize,
               scale: f32|
     -> (Cockpit, Result<(), burn_cockpit::CockpitError>) {
        let mut cockpit = Cockpit::from_kinds(PER_SAMPLE, &Schedule::every_step()).unwrap();
        let mut model = model.clone();
        let mut optim = SgdConfig::new().init();
        let mut last = Ok(());
        for step in 0..2 {
            let recorder = Recorder::start();
            let inputs = Tensor::<2>::from_data(TensorData::new(x.clone(), [batch, 5]), &device);
            let per_sample = ce(model.forward(inputs), y.clone()).mul_scalar(scale);
            let loss = per_sample.clone().mean();
            let grads = loss.backward();
            let factors = recorder.finish(&grads).unwrap();
            let grads = GradientsParams::from_grads(grads, &model);
            let info = StepInfo::new(loss.detach())
                .with_individual_losses(per_sample.detach())
                .with_optimizer(OptimizerInfo::sgd(0.1))
                .with_per_sample(factors);
            last = cockpit
                .track(step, &model, &grads, info)
                .and_then(burn_cockpit::StepReport::into_result);
            model = optim.step(0.1, model, grads);
        }
        (cockpit, last)
    };
    // Batch size 1: the 1/(B−1) quantities are NaN (with a warning), the others computed.
    let (x, y) = data(&device, 1, 5, 0);
    let (cockpit, result) = run(x, y, 1, 1.0);
    result.unwrap();
    for key in ["NormTest", "InnerTest", "OrthoTest", "EarlyStopping"] {
        assert!(float(&cockpit, 0, key).is_nan(), "{key}");
    }
    assert!(float(&cockpit, 0, "MeanGSNR").is_finite());
    assert!(cockpit.warnings().iter().any(|w| w.contains("NormTest")));
    // Zero gradient (loss scaled by 0): no panic; Alpha sees no step and is −1.
    let (x, y) = data(&device, 4, 5, 0);
    let (cockpit, result) = run(x, y, 4, 0.0);
    result.unwrap();
    assert_eq!(float(&cockpit, 0, "Alpha"), -1.0);
    assert!(float(&cockpit, 0, "NormTest").is_nan());
    // Identical samples: zero variances; Alpha uses the 1e-10 rule and stays finite.
    let (x, _) = data(&device, 1, 5, 0);
    let same: Vec<f32> = x.iter().cycle().take(4 * 5).copied().collect();
    let y = Tensor::<2>::from_data(TensorData::new([1f32, 0.0, 0.0].repeat(4), [4, 3]), &device);
    let (cockpit, result) = run(same, y, 4, 1.0);
    result.unwrap();
    assert!(float(&cockpit, 0, "Alpha").is_finite());
    // NaN per-sample losses: values become NaN, warnings, no panic.
    let (mut x, y) = data(&device, 4, 5, 0);
    x[3] = f32::NAN;
    let (cockpit, _) = run(x, y, 4, 1.0);
    assert!(float(&cockpit, 0, "NormTest").is_nan());
    assert!(!cockpit.warnings().is_empty());
}

/// Instrumented layers compute exactly what burn's layers compute, with and without an active
/// recorder (outputs and parameter gradients), so a model trains identically.
fn instrumented_layers_train_identically(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let plain = LinearConfig::new(5, 3).init(&device);
    let ours: Linear = plain.clone().into();
    let conv_plain = Conv2dConfig::new([1, 2], [3, 3]).init(&device);
    let conv_ours: burn_cockpit::persample::Conv2d = conv_plain.clone().into();
    let (x, _) = data(&device, 4, 25, 1);
    let read = |t: Tensor<2>| t.into_data().convert::<f64>().try_to_vec::<f64>().unwrap();
    for record in [false, true] {
        let recorder = record.then(Recorder::start);
        let input = || Tensor::<4>::from_data(TensorData::new(x.clone(), [4, 1, 5, 5]), &device);
        let flat = |t: Tensor<4>| t.reshape([4, 18]);
        let a = plain.forward(flat(conv_plain.forward(input())).slice([0..4, 0..5]));
        let b = ours.forward(flat(conv_ours.forward(input())).slice([0..4, 0..5]));
        assert_eq!(
            read(a.clone()),
            read(b.clone()),
            "outputs (recording: {record})"
        );
        let (ga, gb) = (a.sum().backward(), b.sum().backward());
        let grad = |g: Option<Tensor<2>>| read(g.unwrap());
        assert_eq!(
            grad(plain.weight.val().grad(&ga)),
            grad(ours.weight.val().grad(&gb))
        );
        let conv_grad = |g: Option<Tensor<4>>| read(g.unwrap().reshape([2, 9]));
        assert_eq!(
            conv_grad(conv_plain.weight.val().grad(&ga)),
            conv_grad(conv_ours.weight.val().grad(&gb))
        );
        if let Some(recorder) = recorder {
            let factors = recorder.finish(&gb).unwrap();
            let params = burn_cockpit::persample::Snapshot::from_entries(
                burn_cockpit::persample::Snapshot::of_params(&conv_ours)
                    .entries()
                    .iter()
                    .chain(burn_cockpit::persample::Snapshot::of_params(&ours).entries())
                    .cloned()
                    .collect(),
            );
            let coverage = factors.coverage(&params);
            assert!(
                coverage.is_complete() && coverage.covered.len() == 4,
                "the conv and the linear layer tapped: {coverage}"
            );
        }
    }
}

#[test]
fn a_missing_per_sample_source_is_a_typed_error() {
    let device = Device::flex().autodiff();
    let model = Mlp::new(&device);
    let (x, y) = data(&device, 3, 5, 0);
    let per_sample = ce(
        model.forward(Tensor::from_data(TensorData::new(x, [3, 5]), &device)),
        y,
    );
    let loss = per_sample.clone().mean();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let mut cockpit = Cockpit::from_kinds(
        [
            QuantityKind::Loss,
            QuantityKind::NormTest,
            QuantityKind::CABS,
        ],
        &Schedule::every_step(),
    )
    .unwrap();
    let info = StepInfo::new(loss.detach()).with_optimizer(OptimizerInfo::sgd_momentum(0.1, 0.9));
    let err = cockpit
        .track(0, &model, &grads, info)
        .and_then(burn_cockpit::StepReport::into_result)
        .unwrap_err();
    let burn_cockpit::CockpitError::QuantitiesFailed { failures, .. } = err else {
        panic!()
    };
    assert!(
        failures
            .iter()
            .any(|(q, e)| q == "NormTest" && matches!(e, QuantityError::MissingInfo(_)))
    );
    assert!(
        failures
            .iter()
            .any(|(q, e)| q == "CABS" && matches!(e, QuantityError::Unsupported(_)))
    );
    assert!(
        cockpit.output().get(0, "Loss").is_some(),
        "the others are stored"
    );
}

on_every_backend!(
    instrumented_layers_train_identically,
    fast_path_equals_exact_fallback,
    alpha_sgd_path_equals_general_path,
    split_batches_merge_into_the_whole_batch,
    text_model_fast_path_equals_exact_fallback,
    long_rows_fast_path_equals_exact_fallback,
    long_rows_norms_and_projections_equal_single_sample_passes,
    channel_model_fast_path_equals_exact_fallback,
    conv_fast_path_equals_single_sample_passes,
    conv_settings_fast_path_equals_single_sample_passes,
    random_conv_settings_equal_single_sample_passes,
    transformer_fast_path_equals_exact_fallback,
    guide_cnn_fast_path_equals_exact_fallback,
    autoencoder_fast_path_equals_exact_fallback,
    translator_fast_path_equals_exact_fallback,
    recurrent_model_fast_path_equals_exact_fallback,
    batch_norm_with_running_statistics_equals_exact_fallback,
    training_mode_batch_norm_is_refused_by_name,
    edge_cases_on_sequence_models,
    mixed_model_matches_a_brute_force_per_sample_loop,
    two_step_rule_with_every_quantity,
    edge_cases,
);
