//! The Cockpit API in a hand-written loop: schedules, two-step bookkeeping, bad input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use crate::common::Backend;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Tensor, TensorData};
use std::sync::{Arc, Mutex};

use burn_cockpit::log::{LogError, read_log, read_stream};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::sink::{Origin, Record, Sink, SinkError};
use burn_cockpit::{
    Cockpit, CockpitError, EpochLog, OptimizerInfo, QuantityError, Schedule, StepInfo, Value,
};

#[derive(Module, Debug)]
struct Net {
    layers: Vec<Linear>,
}

impl Net {
    fn new(widths: &[usize], device: &Device) -> Self {
        Self {
            layers: widths
                .windows(2)
                .map(|w| LinearConfig::new(w[0], w[1]).init(device))
                .collect(),
        }
    }

    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for layer in &self.layers {
            x = layer.forward(x).tanh();
        }
        x
    }
}

fn batch(device: &Device, step: usize, poison: bool) -> (Tensor<2>, Tensor<2>) {
    let mut x: Vec<f32> = (0..12)
        .map(|i| ((i * 7 + step * 3) % 11) as f32 / 11.0 - 0.5)
        .collect();
    if poison {
        x[0] = f32::NAN;
    }
    let y: Vec<f32> = (0..8).map(|i| ((i + step) % 3) as f32 / 3.0).collect();
    (
        Tensor::from_data(TensorData::new(x, [4, 3]), device),
        Tensor::from_data(TensorData::new(y, [4, 2]), device),
    )
}

/// One forward/backward: returns the gradients and the info for `track`.
fn step_of(model: &Net, device: &Device, step: usize, poison: bool) -> (GradientsParams, StepInfo) {
    let (x, y) = batch(device, step, poison);
    let per_sample = (model.forward(x) - y).square().mean_dim(1).reshape([4]);
    let loss = per_sample.clone().mean();
    let grads = GradientsParams::from_grads(loss.backward(), model);
    let info = StepInfo::new(loss.detach())
        .with_individual_losses(per_sample.detach())
        .with_optimizer(OptimizerInfo::sgd(0.1));
    (grads, info)
}

/// The parameter-level quantities (no per-sample gradients needed).
const PARAMETER_LEVEL: [QuantityKind; 6] = [
    QuantityKind::Loss,
    QuantityKind::GradNorm,
    QuantityKind::Parameters,
    QuantityKind::Time,
    QuantityKind::Distance,
    QuantityKind::UpdateSize,
];

fn implemented_on(schedule: &Schedule) -> Cockpit {
    Cockpit::from_kinds(PARAMETER_LEVEL, schedule).unwrap()
}

/// Cockpit's `test_quantity_integration`: every quantity on `linear(1, 2)` over 5 steps.
/// Single-step quantities at {2, 3, 4}; UpdateSize at {2, 3} (its value for step 4 would need
/// step 5); Distance at {2, 3, 4} (θ_0 is cached at step 0 even though 0 is not scheduled).
fn two_step_integration_rule(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut model = Net::new(&[3, 5, 2], &device);
    let mut optim = SgdConfig::new().init();
    let mut cockpit = implemented_on(&Schedule::linear(1, 2).unwrap());
    for step in 0..5 {
        let (grads, info) = step_of(&model, &device, step, false);
        cockpit.track(step, &model, &grads, info).unwrap();
        model = optim.step(0.1, model, grads);
    }
    let steps = |name: &str| -> Vec<usize> {
        cockpit
            .output()
            .series(name)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    };
    for single in ["Loss", "GradNorm", "Parameters", "Time"] {
        assert_eq!(steps(single), vec![2, 3, 4], "{single}");
    }
    assert_eq!(steps("UpdateSize"), vec![2, 3]);
    assert_eq!(steps("Distance"), vec![2, 3, 4]);
}

/// UpdateSize / GradNorm = lr under plain SGD, parameter by parameter (an independent check of
/// the two-step alignment: θ_{t+1} − θ_t = −lr·∇L(θ_t)).
fn update_size_is_lr_times_grad_norm_under_sgd(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut model = Net::new(&[3, 4, 2], &device);
    let mut optim = SgdConfig::new().init();
    let mut cockpit = implemented_on(&Schedule::every_step());
    for step in 0..4 {
        let (grads, info) = step_of(&model, &device, step, false);
        cockpit.track(step, &model, &grads, info).unwrap();
        model = optim.step(0.1, model, grads);
    }
    for step in 0..3 {
        let update = cockpit
            .output()
            .get(step, "UpdateSize")
            .and_then(Value::as_list)
            .unwrap();
        let grad = cockpit
            .output()
            .get(step, "GradNorm")
            .and_then(Value::as_list)
            .unwrap();
        for (u, g) in update.iter().zip(grad) {
            assert!(
                (u - 0.1 * g).abs() <= 1e-5 * g.max(1e-3),
                "step {step}: {u} vs 0.1·{g}"
            );
        }
    }
    // Distance after one step is the first update.
    let d1 = cockpit
        .output()
        .get(1, "Distance")
        .and_then(Value::as_list)
        .unwrap();
    let u0 = cockpit
        .output()
        .get(0, "UpdateSize")
        .and_then(Value::as_list)
        .unwrap();
    for (d, u) in d1.iter().zip(u0) {
        assert!((d - u).abs() <= 1e-6, "{d} vs {u}");
    }
}

fn nan_loss_gives_nan_values_and_a_warning(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Net::new(&[3, 4, 2], &device);
    let mut cockpit = implemented_on(&Schedule::every_step());
    let (grads, info) = step_of(&model, &device, 0, true);
    cockpit
        .track(0, &model, &grads, info)
        .expect("NaN is a warning, not an error");
    let loss = cockpit
        .output()
        .get(0, "Loss")
        .and_then(Value::as_f64)
        .unwrap();
    assert!(loss.is_nan());
    assert!(
        cockpit
            .output()
            .get(0, "GradNorm")
            .and_then(Value::as_list)
            .unwrap()
            .iter()
            .any(|g| g.is_nan())
    );
    assert!(
        cockpit.warnings().iter().any(|w| w.contains("loss is NaN")),
        "{:?}",
        cockpit.warnings()
    );
}

fn bad_steps_and_changed_models_are_typed_errors(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Net::new(&[3, 4, 2], &device);
    let mut cockpit = implemented_on(&Schedule::every_step());
    let (grads, info) = step_of(&model, &device, 0, false);
    cockpit.track(0, &model, &grads, info.clone()).unwrap();
    cockpit.track(3, &model, &grads, info.clone()).unwrap();
    let err = cockpit.track(3, &model, &grads, info.clone()).unwrap_err();
    assert!(
        matches!(
            err,
            CockpitError::StepNotIncreasing {
                previous: 3,
                step: 3
            }
        ),
        "{err}"
    );

    let other = Net::new(&[3, 4, 4, 2], &device);
    let (other_grads, other_info) = step_of(&other, &device, 0, false);
    let err = cockpit
        .track(4, &other, &other_grads, other_info)
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, CockpitError::ParametersChanged { .. }),
        "{message}"
    );
    assert!(message.contains("layers.2.weight"), "{message}");
    // What was tracked is kept.
    assert!(cockpit.output().get(3, "Loss").is_some());

    let empty = Net { layers: vec![] };
    let mut fresh = implemented_on(&Schedule::every_step());
    let err = fresh.track(0, &empty, &grads, info).unwrap_err();
    assert!(matches!(err, CockpitError::EmptyModel), "{err}");
}

fn missing_step_zero_fails_distance_only(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let model = Net::new(&[3, 4, 2], &device);
    let mut cockpit = implemented_on(&Schedule::every_step());
    let (grads, info) = step_of(&model, &device, 1, false);
    let report = cockpit.track(1, &model, &grads, info).unwrap();
    assert!(
        report.tracked && !report.is_complete(),
        "a failed quantity is reported, not an error"
    );
    let err = report.into_result().unwrap_err();
    let CockpitError::QuantitiesFailed { step: 1, failures } = &err else {
        panic!("{err}")
    };
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].0, "Distance");
    assert!(matches!(failures[0].1, QuantityError::MissingReference(_)));
    assert!(
        cockpit.output().get(1, "GradNorm").is_some(),
        "the other quantities are stored"
    );
}

fn a_parameter_without_gradient_is_named(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let used = Net::new(&[3, 2], &device);
    let model = Net {
        layers: vec![
            used.layers[0].clone(),
            LinearConfig::new(2, 2).init(&device),
        ],
    };
    let (x, y) = batch(&device, 0, false);
    let loss = (model.layers[0].forward(x) - y).square().mean();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let mut cockpit = implemented_on(&Schedule::every_step());
    let err = cockpit
        .track(0, &model, &grads, StepInfo::new(loss.detach()))
        .unwrap_err();
    assert!(
        matches!(&err, CockpitError::MissingGradient { name } if name == "layers.1.weight"),
        "{err}"
    );
}

fn the_stream_holds_every_tracked_step(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut model = Net::new(&[3, 4, 2], &device);
    let mut optim = SgdConfig::new().init();
    let dir = std::env::temp_dir().join(format!(
        "cockpit-stream-{}-{}",
        backend.name,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cockpit = implemented_on(&Schedule::every_step())
        .with_stream(dir.join("run.jsonl"))
        .unwrap();
    for step in 0..3 {
        let (grads, info) = step_of(&model, &device, step, false);
        cockpit.track(step, &model, &grads, info).unwrap();
        model = optim.step(0.1, model, grads);
    }
    cockpit
        .log(
            2,
            &EpochLog {
                epoch_count: 1,
                train_loss: Some(0.5),
                learning_rate: Some(0.1),
                ..Default::default()
            },
        )
        .unwrap();
    let streamed = read_stream(dir.join("run.jsonl")).unwrap();
    assert_eq!(&streamed, cockpit.output());
    // A line cut short by a crash is ignored.
    let mut text = std::fs::read_to_string(dir.join("run.jsonl")).unwrap();
    text.push_str("{\"output\": {\"3\": {\"Lo");
    std::fs::write(dir.join("cut.jsonl"), text).unwrap();
    assert_eq!(
        &read_stream(dir.join("cut.jsonl")).unwrap(),
        cockpit.output()
    );

    cockpit.write(dir.join("run.json")).unwrap();
    assert_eq!(&read_log(dir.join("run.json")).unwrap(), cockpit.output());
    assert_eq!(cockpit.output().get(2, "epoch_count"), Some(&Value::Int(1)));

    let err = cockpit
        .write(dir.join("no-such-dir").join("run.json"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            CockpitError::Log(LogError::Io {
                action: "write",
                ..
            })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    assert!(
        cockpit.output().get(2, "Loss").is_some(),
        "a failed write loses nothing"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A sink that refuses every record (a full disk).
struct Refusing;

impl Sink for Refusing {
    fn write(&mut self, _record: &Record<'_>) -> Result<(), SinkError> {
        Err(SinkError::Log(LogError::Io {
            action: "write",
            path: "full-disk".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        }))
    }
}

/// What a user's own sink received: each record's origin, step and keys.
#[derive(Default)]
struct Collecting(Vec<(Origin, usize, Vec<String>)>);

impl Sink for Collecting {
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError> {
        let keys = record.values.keys().into_iter().map(String::from).collect();
        self.0.push((record.origin, record.step, keys));
        Ok(())
    }
}

/// Sinks are fed every tracked step and every epoch entry; one that fails is an error of the
/// call, the others still get the values, and the Cockpit keeps them.
fn sinks_are_fed_and_one_failure_loses_nothing(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut model = Net::new(&[3, 4, 2], &device);
    let mut optim = SgdConfig::new().init();
    let seen = Arc::new(Mutex::new(Collecting::default()));
    let mut cockpit = implemented_on(&Schedule::every_step())
        .with_sink(Refusing)
        .with_sink(seen.clone());
    for step in 0..2 {
        let (grads, info) = step_of(&model, &device, step, false);
        let err = cockpit.track(step, &model, &grads, info).unwrap_err();
        assert!(
            matches!(
                &err,
                CockpitError::Sink(SinkError::Log(LogError::Io { .. }))
            ),
            "{err}"
        );
        assert!(
            std::error::Error::source(&err).is_some(),
            "the io error is kept: {err}"
        );
        model = optim.step(0.1, model, grads);
    }
    let entry = EpochLog {
        epoch_count: 1,
        ..Default::default()
    };
    assert!(cockpit.log(1, &entry).is_err());
    let seen = seen.lock().unwrap();
    let origins: Vec<(Origin, usize)> = seen.0.iter().map(|(o, s, _)| (*o, *s)).collect();
    assert_eq!(
        origins,
        [
            (Origin::Tracked, 0),
            (Origin::Tracked, 1),
            (Origin::Epoch, 1)
        ]
    );
    assert!(
        seen.0[1].2.contains(&"GradNorm".to_string()),
        "{:?}",
        seen.0[1]
    );
    assert!(seen.0[2].2.contains(&"epoch_count".to_string()));
    // Nothing was lost by the refusing sink.
    assert!(cockpit.output().get(1, "GradNorm").is_some());
    assert!(cockpit.output().get(0, "Distance").is_some());
    assert_eq!(cockpit.output().get(1, "epoch_count"), Some(&Value::Int(1)));
}

on_every_backend!(
    sinks_are_fed_and_one_failure_loses_nothing,
    two_step_integration_rule,
    update_size_is_lr_times_grad_norm_under_sgd,
    nan_loss_gives_nan_values_and_a_warning,
    bad_steps_and_changed_models_are_typed_errors,
    missing_step_zero_fails_distance_only,
    a_parameter_without_gradient_is_named,
    the_stream_holds_every_tracked_step,
);

#[test]
fn configurations_build_and_unknown_names_are_named() {
    for configuration in [
        burn_cockpit::Configuration::Economy,
        burn_cockpit::Configuration::Business,
        burn_cockpit::Configuration::Full,
    ] {
        let cockpit = Cockpit::from_configuration(configuration, &Schedule::every_step()).unwrap();
        assert_eq!(cockpit.quantity_names().len(), configuration.kinds().len());
    }
    let err = "HessMaxEw".parse::<QuantityKind>().unwrap_err().to_string();
    assert!(
        err.contains("HessMaxEw") && err.contains("HessMaxEV"),
        "{err}"
    );
    let duplicate = Cockpit::from_kinds(
        [QuantityKind::Loss, QuantityKind::Loss],
        &Schedule::every_step(),
    );
    assert!(matches!(duplicate, Err(CockpitError::DuplicateQuantity(_))));
}

#[test]
fn the_python_written_log_reads_and_rewrites_identically() {
    let path = common::fixture_path("cockpit_write_example");
    let output = read_log(&path).unwrap();
    assert_eq!(output.steps().collect::<Vec<_>>(), vec![0, 1, 2]);
    let Some(Value::Hist1d(h)) = output.get(0, "GradHist1d") else {
        panic!("GradHist1d")
    };
    assert_eq!((h.hist.len(), h.edges.len()), (100, 101));
    let Some(Value::Hist2d(h)) = output.get(0, "GradHist2d") else {
        panic!("GradHist2d")
    };
    assert_eq!(h.bins, (40, 50));
    assert_eq!(h.hist.len(), 2000);
    assert_eq!(
        output.get(2, "learning_rate").and_then(Value::as_f64),
        Some(0.1)
    );
    assert_eq!(output.get(2, "epoch_count"), Some(&Value::Int(0)));
    let reread = burn_cockpit::log::parse_log(&burn_cockpit::log::to_log_string(&output)).unwrap();
    assert_eq!(reread, output);
}

#[test]
fn malformed_logs_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("cockpit-badlogs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("trunc.json"), "{\"0\": {\"Loss\": 1.0").unwrap();
    std::fs::write(dir.join("steps.json"), "{\"zero\": {\"Loss\": 1.0}}").unwrap();
    assert!(matches!(
        read_log(dir.join("trunc.json")),
        Err(LogError::Parse { .. })
    ));
    let err = read_log(dir.join("steps.json")).unwrap_err();
    assert!(
        matches!(err, LogError::Format { .. }) && err.to_string().contains("zero"),
        "{err}"
    );
    assert!(matches!(
        read_log(dir.join("absent.json")),
        Err(LogError::Io { action: "read", .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}
