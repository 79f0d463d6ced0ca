//! A quantity stored under a key of its own (`HessTrace[ggn]`, `GradHist1d[fine]`) is its kind
//! to every reader: the output, the log file and the stream it is read back from, TensorBoard,
//! the dashboard and `diagnose`. The kind travels with the key; no reader takes the key apart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::{self, Backend, ToDType};
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::curvature::OutputLoss;
use burn_cockpit::diagnose::Diagnoser;
use burn_cockpit::persample::Linear;
use burn_cockpit::plot::DashboardData;
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{CockpitConfig, Output, Value};

#[derive(Module, Debug)]
struct Net {
    l1: Linear,
    l2: Linear,
}

impl Net {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l2.forward(relu(self.l1.forward(x)))
    }
}

const B: usize = 5;
const STEPS: usize = 3;

/// Only keyed variants of HessTrace and GradHist1d (no plain one of either), and the loss.
const CONFIG: &str = r#"
[[quantity]]
class = "Loss"

[[quantity]]
class = "HessTrace"
key = "HessTrace[ggn]"
kwargs = { curvature = "diag_ggn_exact" }

[[quantity]]
class = "GradHist1d"
key = "GradHist1d[fine]"
kwargs = { bins = 40 }
"#;

const KEYED: [(&str, QuantityKind); 2] = [
    ("HessTrace[ggn]", QuantityKind::HessTrace),
    ("GradHist1d[fine]", QuantityKind::GradHist1d),
];

fn run(backend: &Backend, dir: &std::path::Path) -> Output {
    let device: Device = backend.device.clone().autodiff();
    let mut model = Net {
        l1: Linear::new(&LinearConfig::new(4, 6), &device),
        l2: Linear::new(&LinearConfig::new(6, 3), &device),
    }
    .map(&mut ToDType(backend.dtype));
    let mut cockpit = CockpitConfig::from_toml(CONFIG)
        .unwrap()
        .build()
        .unwrap()
        .with_stream(dir.join("run.jsonl"))
        .unwrap()
        .with_sink(burn_cockpit::tensorboard::TensorBoardWriter::create(dir.join("tb")).unwrap());
    let mut optimizer = SgdConfig::new().init();
    for step in 0..STEPS {
        let x: Vec<f32> = (0..B * 4)
            .map(|i| ((i * 5 + step * 3) % 11) as f32 / 5.5 - 1.0)
            .collect();
        let y: Vec<i64> = (0..B).map(|n| ((n + step) % 3) as i64).collect();
        let x = Tensor::<2>::from_data(TensorData::new(x, [B, 4]), &device).cast(backend.dtype);
        let y = Tensor::<1, Int>::from_data(TensorData::new(y, [B]), &device);
        let stepped = cockpit
            .step(
                &model,
                move |m: &Net| m.forward(x.clone()),
                OutputLoss::classes(y, 3),
            )
            .unwrap();
        assert!(stepped.report.is_complete(), "{:?}", stepped.report);
        let grads: GradientsParams = stepped.grads;
        model = optimizer.step(0.1, model, grads);
    }
    cockpit.write(dir.join("run.json")).unwrap();
    cockpit.output().clone()
}

fn keyed_variants_reach_every_reader(backend: &Backend) {
    let dir = tempfile::tempdir().unwrap();
    let output = run(backend, dir.path());
    let logged = burn_cockpit::log::read_log(dir.path().join("run.json")).unwrap();
    let streamed = burn_cockpit::log::read_stream(dir.path().join("run.jsonl")).unwrap();
    for (name, read) in [("output", &output), ("log", &logged), ("stream", &streamed)] {
        for (key, kind) in KEYED {
            assert_eq!(QuantityKind::of_key(read, key), Some(kind), "{name}: {key}");
            assert_eq!(kind.keys(read), [key], "{name}: {key}");
            assert_eq!(kind.series(read).len(), STEPS, "{name}: {key}");
        }
        assert_eq!(QuantityKind::of_key(read, "Loss"), Some(QuantityKind::Loss));
    }
    assert_eq!(logged.kinds(), output.kinds());

    // TensorBoard: the network-wide trace is written beside the layers' (the sum, HessTrace's
    // reduction), which the writer only knows from the kind.
    let read = crate::tensorboard::read_dir(&dir.path().join("tb"));
    for (step, value) in output.series("HessTrace[ggn]") {
        let layers = value.as_list().unwrap();
        let total = read.scalars[&("cockpit/HessTrace[ggn]".to_string(), step as i64)];
        assert_eq!(total, layers.iter().sum::<f64>() as f32, "step {step}");
    }
    assert!(
        read.histograms
            .contains_key(&("cockpit/GradHist1d[fine]".to_string(), 0)),
        "the fine histogram is in TensorBoard"
    );

    // The dashboard draws them in their kinds' instruments.
    let data = DashboardData::from_output(&logged);
    assert_eq!(data.trace.values.len(), STEPS, "the trace gauge");
    let (step, hist) = data.hist1d.expect("the 1-d histogram");
    assert_eq!(step, STEPS - 1);
    let Some((_, Value::Hist1d(fine))) = QuantityKind::GradHist1d.last(&logged) else {
        panic!("no fine histogram");
    };
    assert_eq!(
        hist.hist.iter().sum::<f64>(),
        fine.hist.iter().sum::<f64>(),
        "the drawn histogram is the fine one"
    );

    // `diagnose` reads them: neither is reported as missing from the log.
    let diagnosis = Diagnoser::new().run(&logged);
    for (_, kind) in KEYED {
        assert!(
            !diagnosis
                .unread
                .iter()
                .any(|u| u.starts_with(&format!("{} (", kind.name()))),
            "{kind} read by diagnose: {:?}",
            diagnosis.unread
        );
    }
}

on_every_backend!(keyed_variants_reach_every_reader);
