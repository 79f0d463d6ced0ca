//! Nothing a user feeds the Cockpit is silently wrong: per-sample losses of the wrong length,
//! the exact fallback on a model whose samples are coupled, tracking that would change the
//! model, a lookup broadcast over the batch, a model with no drop-in, a fallback that only a
//! logger would have told about.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use crate::common::Backend;
use burn::module::Module;
use burn::nn::conv::Conv2dConfig;
use burn::nn::{EmbeddingConfig, LinearConfig};
use burn::optim::GradientsParams;
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::persample::{
    BatchNorm, Conv2d, Embedding, ExactPerSample, Linear, PerSample, PerSampleError,
    PerSampleSource, Recorder, Request,
};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, CockpitError, OptimizerInfo, Schedule, StepInfo};

const PER_SAMPLE: [QuantityKind; 5] = [
    QuantityKind::NormTest,
    QuantityKind::InnerTest,
    QuantityKind::OrthoTest,
    QuantityKind::MeanGSNR,
    QuantityKind::GradHist1d,
];

fn ce(logits: Tensor<2>, targets: &[usize]) -> Tensor<1> {
    let [b, c] = logits.dims();
    let device = logits.device();
    let onehot: Vec<f32> = (0..b * c)
        .map(|i| f32::from(u8::from(targets[i / c] == i % c)))
        .collect();
    let onehot = Tensor::<2>::from_data(TensorData::new(onehot, [b, c]), &device);
    (log_softmax(logits, 1) * onehot)
        .sum_dim(1)
        .neg()
        .reshape([b])
}

fn inputs(device: &Device, shape: [usize; 4]) -> Tensor<4> {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) / 4.0).collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Conv → BatchNorm → Conv → BatchNorm → Linear: two BatchNorms, in training mode or not.
#[derive(Module, Debug)]
struct TwoNorms {
    conv1: Conv2d,
    bn1: BatchNorm,
    conv2: Conv2d,
    bn2: BatchNorm,
    head: Linear,
}

impl TwoNorms {
    fn new(device: &Device, training: bool) -> Self {
        let bn = |channels: usize| {
            let mut bn = burn::nn::BatchNormConfig::new(channels).init(device);
            bn.training = bn.training.with_value(training);
            BatchNorm::from(bn)
        };
        Self {
            conv1: Conv2dConfig::new([2, 3], [3, 3]).init(device).into(),
            bn1: bn(3),
            conv2: Conv2dConfig::new([3, 2], [3, 3]).init(device).into(),
            bn2: bn(2),
            head: LinearConfig::new(2, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = relu(self.bn1.forward(self.conv1.forward(x)));
        let h = relu(self.bn2.forward(self.conv2.forward(h)));
        self.head.forward(h.reshape([b, 2]))
    }

    /// Every number of the model's state: parameters and running statistics.
    fn state(&self) -> Vec<f64> {
        let mut values = Vec::new();
        for bn in [&self.bn1, &self.bn2] {
            for state in [&bn.running_mean, &bn.running_var] {
                values.extend(
                    state
                        .value()
                        .into_data()
                        .convert::<f64>()
                        .try_to_vec::<f64>()
                        .unwrap(),
                );
            }
        }
        for entry in burn_cockpit::persample::Snapshot::of_params(self).entries() {
            values.extend(
                entry
                    .value
                    .clone()
                    .into_data()
                    .convert::<f64>()
                    .try_to_vec::<f64>()
                    .unwrap(),
            );
        }
        values
    }
}

const TARGETS: [usize; 4] = [0, 2, 1, 2];

/// One step of `model` on a batch of 4: the mean loss, the gradients and the exact fallback.
fn step(model: &TwoNorms, device: &Device) -> (Tensor<1>, GradientsParams, ExactPerSample) {
    let x = inputs(device, [4, 2, 5, 5]);
    let loss = ce(model.forward(x.clone()), &TARGETS).mean();
    let grads = GradientsParams::from_grads(loss.backward(), model);
    let (frozen, xs) = (model.clone(), x);
    let exact = ExactPerSample::new(4, move |n| {
        let loss = ce(
            frozen.forward(xs.clone().slice(n..n + 1)),
            &TARGETS[n..n + 1],
        );
        Ok(GradientsParams::from_grads(loss.mean().backward(), &frozen))
    });
    (loss, grads, exact)
}

/// The exact fallback forced on a model with BatchNorms in training mode refuses like the
/// fast path, naming both layers once with the reason once, and its single-sample passes
/// leave the running statistics where they were; on running statistics it computes and
/// `track` leaves the model's state identical, whatever the engine.
fn exact_fallback_refuses_coupled_samples_and_never_changes_the_model(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = TwoNorms::new(&device, true);
    let (loss, grads, exact) = step(&model, &device);
    let before = model.state();
    let params = burn_cockpit::persample::Snapshot::of_params(&model);
    let refused = exact.reduce(&params, Request::new()).unwrap_err();
    let PerSampleError::SamplesCoupled { layer, .. } = &refused else {
        panic!("expected SamplesCoupled, got {refused:?}");
    };
    assert_eq!(layer, "bn1.gamma, bn2.gamma", "{refused}");
    assert_eq!(
        model.state(),
        before,
        "a refused pass moved the running statistics"
    );

    let mut kinds = PER_SAMPLE.to_vec();
    kinds.push(QuantityKind::GradNorm);
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step()).unwrap();
    let info = StepInfo::new(loss.detach())
        .with_optimizer(OptimizerInfo::sgd(0.1))
        .with_per_sample(exact);
    let err = cockpit
        .track(0, &model, &grads, info)
        .and_then(burn_cockpit::StepReport::into_result)
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, CockpitError::QuantitiesFailed { .. }),
        "{err}"
    );
    assert_eq!(
        message.matches("batch statistics couple").count(),
        1,
        "the reason once for every quantity and layer: {message}"
    );
    assert!(message.contains("NormTest, InnerTest"), "{message}");
    assert!(cockpit.output().get(0, "GradNorm").is_some());
    assert_eq!(model.state(), before, "tracking changed the model");

    // Running statistics: every engine computes, and tracking leaves the state as it was.
    let model = TwoNorms::new(&device, false);
    for engine in ["fast", "exact", "auto"] {
        let (loss, grads, exact) = step(&model, &device);
        let recorder = Recorder::start();
        let x = inputs(&device, [4, 2, 5, 5]);
        let raw = loss_and_grads(&model, x);
        let factors = recorder.finish(&raw).unwrap();
        let before = model.state();
        let mut cockpit = Cockpit::from_kinds(PER_SAMPLE, &Schedule::every_step()).unwrap();
        let info = StepInfo::new(loss.detach()).with_optimizer(OptimizerInfo::sgd(0.1));
        let info = match engine {
            "fast" => info.with_per_sample(factors),
            "exact" => info.with_per_sample(exact),
            _ => info.with_per_sample(PerSample::auto(Some(factors), exact)),
        };
        cockpit.track(0, &model, &grads, info).unwrap();
        assert_eq!(
            model.state(),
            before,
            "{engine}: tracking changed the model"
        );
    }
}

fn loss_and_grads(model: &TwoNorms, x: Tensor<4>) -> burn::tensor::Gradients {
    ce(model.forward(x), &TARGETS).mean().backward()
}

/// Tokens plus a position embedding looked up once (`[1, T]`) and broadcast over the batch,
/// the way most people write it.
#[derive(Module, Debug)]
struct Broadcast {
    tokens: Embedding,
    positions: Embedding,
    head: Linear,
}

impl Broadcast {
    fn new(device: &Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(7, 4).init(device).into(),
            positions: EmbeddingConfig::new(3, 4).init(device).into(),
            head: LinearConfig::new(4, 3).init(device).into(),
        }
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let [b, t] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..t as i64, &device).reshape([1, t]);
        let h = self.tokens.forward(tokens) + self.positions.forward(positions);
        self.head.forward(h.mean_dim(1).reshape([b, 4]))
    }
}

/// One recorded step of `model` on the batch of four: the per-sample and mean losses, the
/// fast path's factors and the gradients.
fn recorded_step(
    model: &Broadcast,
    targets: &[usize],
) -> (
    Tensor<1>,
    Tensor<1>,
    burn_cockpit::persample::Recording,
    GradientsParams,
) {
    let device = model.head.weight.device();
    let recorder = Recorder::start();
    let losses = ce(model.forward(token_batch(&device, 0..4)), targets);
    let loss = losses.clone().mean();
    let raw = loss.backward();
    let factors = recorder.finish(&raw).unwrap();
    let grads = GradientsParams::from_grads(raw, model);
    (losses, loss, factors, grads)
}

fn token_batch(device: &Device, rows: std::ops::Range<usize>) -> Tensor<2, Int> {
    let values: Vec<i64> = rows
        .clone()
        .flat_map(|n| (0..3).map(move |t| ((n * 3 + t * 5) % 7) as i64))
        .collect();
    Tensor::from_data(TensorData::new(values, [rows.len(), 3]), device)
}

/// A lookup broadcast over the batch is named in the coverage report with the fix, the fast
/// path refuses it with that report, `PerSample::auto` falls back — and says so through
/// `Cockpit::warnings`, once, with the report — and the result equals the exact fallback's.
fn broadcast_lookup_is_named_and_falls_back(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Broadcast::new(&device);
    let targets = [0, 1, 2, 1];
    let (losses, loss, factors, grads) = recorded_step(&model, &targets);
    let params = burn_cockpit::persample::Snapshot::of_params(&model);
    let coverage = factors.coverage(&params);
    let report = coverage.to_string();
    assert!(report.contains("fast path: 3 of 4"), "{report}");
    assert!(
        report.contains("positions.weight") && report.contains("batch of 1"),
        "{report}"
    );
    let fast_only = factors.reduce(&params, Request::new()).unwrap_err();
    assert!(
        fast_only.to_string().contains("positions.weight"),
        "{fast_only}"
    );

    let frozen = model.clone();
    let exact = move || {
        let frozen = frozen.clone();
        ExactPerSample::new(4, move |n| {
            let loss = ce(
                frozen.forward(token_batch(&frozen.head.weight.device(), n..n + 1)),
                &targets[n..n + 1],
            );
            Ok(GradientsParams::from_grads(loss.mean().backward(), &frozen))
        })
    };
    let track = |fast: Option<&burn_cockpit::persample::Recording>| {
        let mut cockpit = Cockpit::from_kinds(PER_SAMPLE, &Schedule::every_step()).unwrap();
        for step in 0..2 {
            let info = StepInfo::new(loss.clone().detach())
                .with_individual_losses(losses.clone().detach())
                .with_optimizer(OptimizerInfo::sgd(0.1))
                .with_per_sample(PerSample::auto(fast.cloned(), exact()));
            cockpit.track(step, &model, &grads, info).unwrap();
        }
        cockpit
    };
    let auto = track(Some(&factors));
    let notices: Vec<&String> = auto
        .warnings()
        .iter()
        .filter(|w| w.contains("falling back"))
        .collect();
    assert_eq!(notices.len(), 1, "once: {:?}", auto.warnings());
    assert!(notices[0].contains("positions.weight"), "{}", notices[0]);
    let reference = track(None);
    for kind in PER_SAMPLE {
        assert_eq!(
            auto.output().get(0, kind.name()),
            reference.output().get(0, kind.name()),
            "{kind:?}"
        );
    }
}

/// A model without any drop-in records nothing: the factors' coverage report says 0 of N
/// with each parameter's reason, and the Cockpit's error carries that report.
fn no_drop_in_gives_a_coverage_report(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = LinearConfig::new(3, 2).init(&device);
    let x = Tensor::<2>::from_data(
        TensorData::new(vec![0.5f32, -1.0, 2.0, 1.5, 0.0, -0.5], [2, 3]),
        &device,
    );
    let recorder = Recorder::start();
    let loss = ce(model.forward(x), &[0, 1]).mean();
    let raw = loss.backward();
    let factors = recorder.finish(&raw).unwrap();
    let grads = GradientsParams::from_grads(raw, &model);
    let params = burn_cockpit::persample::Snapshot::of_params(&model);
    assert!(
        factors
            .coverage(&params)
            .to_string()
            .contains("fast path: 0 of 2")
    );
    let mut cockpit = Cockpit::from_kinds(PER_SAMPLE, &Schedule::every_step()).unwrap();
    let info = StepInfo::new(loss.detach())
        .with_batch_size(2)
        .with_per_sample(factors);
    let err = cockpit
        .track(0, &model, &grads, info)
        .and_then(burn_cockpit::StepReport::into_result)
        .unwrap_err();
    assert!(err.to_string().contains("fast path: 0 of 2"), "{err}");
}

/// Per-sample losses must have the batch's length: 3, 9 or 0 losses for a batch of 4 are a
/// typed error for the step, nothing is stored for it, and a correct step after it works.
fn per_sample_losses_must_match_the_batch(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Broadcast::new(&device);
    let targets = [0, 1, 2, 1];
    let (losses, loss, factors, grads) = recorded_step(&model, &targets);
    let mut cockpit = Cockpit::from_kinds(
        [QuantityKind::GradNorm, QuantityKind::Loss],
        &Schedule::every_step(),
    )
    .unwrap();
    let info = |losses: Tensor<1>| {
        StepInfo::new(loss.clone().detach())
            .with_individual_losses(losses)
            .with_optimizer(OptimizerInfo::sgd(0.1))
    };
    let values = losses
        .clone()
        .detach()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap();
    for (step, length) in [(0usize, 3usize), (1, 9), (2, 0)] {
        let wrong: Vec<f32> = values.iter().copied().cycle().take(length).collect();
        let wrong = Tensor::<1>::from_data(TensorData::new(wrong, [length]), &device);
        let err = cockpit
            .track(step, &model, &grads, info(wrong).with_batch_size(4))
            .unwrap_err();
        assert!(
            matches!(err, CockpitError::BatchMismatch { .. }),
            "{length}: {err}"
        );
        assert!(cockpit.output().get(step, "Loss").is_none());
    }
    // The per-sample source's batch disagrees with the losses too.
    let three = Tensor::<1>::from_data(TensorData::new(values[..3].to_vec(), [3]), &device);
    let err = cockpit
        .track(3, &model, &grads, info(three).with_per_sample(factors))
        .unwrap_err();
    assert!(matches!(err, CockpitError::BatchMismatch { .. }), "{err}");
    cockpit
        .track(4, &model, &grads, info(losses.detach()).with_batch_size(4))
        .unwrap();
    assert!(cockpit.output().get(4, "Loss").is_some());
}

/// Settings at the documented bounds still run a step (nothing aborts), and a histogram
/// range that swallows every value is said once in `Cockpit::warnings`.
fn settings_at_their_bounds_run_and_a_swallowing_range_warns(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Broadcast::new(&device);
    let config = format!(
        r#"
[[quantity]]
class = "GradHist1d"
kwargs = {{ bins = {} }}

[[quantity]]
class = "GradHist2d"
kwargs = {{ bins = [1024, 1024] }}

[[quantity]]
class = "GradHist1d"
key = "GradHist1d[wide]"
kwargs = {{ bins = 10, range = [-1e300, 1e300] }}
"#,
        burn_cockpit::quantity::MAX_BINS
    );
    let mut cockpit = burn_cockpit::CockpitConfig::from_toml(&config)
        .unwrap()
        .build()
        .unwrap();
    for step in 0..2 {
        let (losses, loss, factors, grads) = recorded_step(&model, &[0, 1, 2, 1]);
        let frozen = model.clone();
        let exact = ExactPerSample::new(4, move |n| {
            let device = frozen.head.weight.device();
            let loss = ce(
                frozen.forward(token_batch(&device, n..n + 1)),
                &[0, 1, 2, 1][n..n + 1],
            );
            Ok(GradientsParams::from_grads(loss.mean().backward(), &frozen))
        });
        let info = StepInfo::new(loss.detach())
            .with_individual_losses(losses.detach())
            .with_per_sample(PerSample::auto(Some(factors), exact));
        cockpit.track(step, &model, &grads, info).unwrap();
    }
    let wide: Vec<&String> = cockpit
        .warnings()
        .iter()
        .filter(|w| w.contains("GradHist1d") && w.contains("one bin"))
        .collect();
    assert_eq!(wide.len(), 1, "{:?}", cockpit.warnings());
    let Some(burn_cockpit::Value::Hist1d(full)) = cockpit.output().get(1, "GradHist1d") else {
        panic!("no histogram");
    };
    assert_eq!(full.hist.len(), burn_cockpit::quantity::MAX_BINS);
}

on_every_backend!(
    settings_at_their_bounds_run_and_a_swallowing_range_warns,
    exact_fallback_refuses_coupled_samples_and_never_changes_the_model,
    broadcast_lookup_is_named_and_falls_back,
    no_drop_in_gives_a_coverage_report,
    per_sample_losses_must_match_the_batch,
);
