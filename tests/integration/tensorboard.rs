//! TensorBoard event files, read back by a reader of the test suite's own: the TFRecord
//! framing and both masked CRC-32Cs of every record checked, the `Event` messages decoded, and
//! every value compared with what was written — for a hand-made output, for a training run's
//! a Cockpit's sink, and for `cockpit export` of the Python Cockpit's log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor, TensorData};
use burn_cockpit::log::read_log;
use burn_cockpit::persample::{Linear, Recorder};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::tensorboard::{Event, HistogramProto, Image, Payload, TensorBoardWriter, What};
use burn_cockpit::{
    Cockpit, Configuration, Histogram1d, Histogram2d, OptimizerInfo, Output, Schedule, StepInfo,
    Value,
};
use prost::Message;

/// TensorFlow's mask of a CRC-32C.
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Every event of a file, each record's framing and CRCs checked.
fn read_events(path: &Path) -> Vec<Event> {
    let bytes = std::fs::read(path).unwrap();
    let mut events = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        assert!(
            at + 12 <= bytes.len(),
            "a record's header is cut at byte {at}"
        );
        let length_bytes = &bytes[at..at + 8];
        let length = u64::from_le_bytes(length_bytes.try_into().unwrap()) as usize;
        let length_crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        assert_eq!(
            length_crc,
            mask(crc32c::crc32c(length_bytes)),
            "length CRC at {at}"
        );
        let data = &bytes[at + 12..at + 12 + length];
        let data_crc = u32::from_le_bytes(
            bytes[at + 12 + length..at + 16 + length]
                .try_into()
                .unwrap(),
        );
        assert_eq!(data_crc, mask(crc32c::crc32c(data)), "data CRC at {at}");
        events.push(Event::decode(data).unwrap());
        at += 16 + length;
    }
    events
}

/// The event file in `dir` (exactly one).
fn event_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("tfevents"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// What the file holds: scalars and histograms by `(tag, step)`.
#[derive(Default)]
pub(crate) struct Read {
    pub(crate) scalars: BTreeMap<(String, i64), f32>,
    pub(crate) histograms: BTreeMap<(String, i64), HistogramProto>,
    images: BTreeMap<(String, i64), Image>,
}

pub(crate) fn read_dir(dir: &Path) -> Read {
    let events = read_events(&event_file(dir));
    assert_eq!(
        events[0].what,
        Some(What::FileVersion("brain.Event:2".into())),
        "the first event names the file's version"
    );
    let mut read = Read::default();
    for event in &events[1..] {
        let Some(What::Summary(summary)) = &event.what else {
            panic!("an event without a summary: {event:?}");
        };
        for value in &summary.value {
            let key = (value.tag.clone(), event.step);
            match &value.payload {
                Some(Payload::SimpleValue(v)) => {
                    assert!(
                        read.scalars.insert(key, *v).is_none(),
                        "{} twice",
                        value.tag
                    );
                }
                Some(Payload::Histo(h)) => {
                    assert!(read.histograms.insert(key, h.clone()).is_none());
                }
                Some(Payload::Image(image)) => {
                    assert!(read.images.insert(key, image.clone()).is_none());
                }
                other => panic!("unexpected payload {other:?}"),
            }
        }
    }
    read
}

/// Every value of `output` is in `read` under its tags: numbers as float32, lists per
/// parameter (named by `names` or by index) and reduced, histograms with Cockpit's edges and
/// counts. Returns how many values were checked.
fn assert_holds(read: &Read, output: &Output, names: &[String]) -> usize {
    let mut checked = 0;
    let same = |got: f32, want: f64, what: &str| {
        let want = want as f32;
        assert!(
            got == want || (got.is_nan() && want.is_nan()),
            "{what}: {got} in the file, {want} in the output"
        );
    };
    for (step, name, value) in output.iter() {
        let step = step as i64;
        let tag = format!("cockpit/{name}");
        match value {
            Value::Int(v) => same(read.scalars[&(tag, step)], *v as f64, name),
            Value::Float(v) => same(read.scalars[&(tag.clone(), step)], *v, &tag),
            Value::List(values) => {
                for (i, v) in values.iter().enumerate() {
                    let layer = names.get(i).cloned().unwrap_or_else(|| i.to_string());
                    let key = (format!("{tag}/{layer}"), step);
                    let got = read.scalars.get(&key).copied();
                    same(got.unwrap_or_else(|| panic!("{key:?} missing")), *v, &key.0);
                }
                let kind = QuantityKind::of_key(output, name);
                if let Some(reduction) = kind.and_then(QuantityKind::reduction) {
                    same(read.scalars[&(tag, step)], reduction.apply(values), name);
                }
            }
            // A histogram without a bin is left out.
            Value::Hist1d(h) if h.edges.len() < 2 => {
                assert!(!read.histograms.contains_key(&(tag, step)));
                continue;
            }
            Value::Hist1d(h) => assert_histogram(&read.histograms[&(tag, step)], h),
            Value::Hist2d(h) => {
                let marginal = marginal(h);
                assert_histogram(
                    &read.histograms[&(format!("{tag}/gradients"), step)],
                    &marginal,
                );
            }
            _ => continue,
        }
        checked += 1;
    }
    checked
}

fn marginal(h: &Histogram2d) -> Histogram1d {
    let (x, y) = h.bins;
    Histogram1d {
        hist: (0..x)
            .map(|i| h.hist[i * y..(i + 1) * y].iter().sum::<i64>() as f64)
            .collect(),
        edges: h.x_edges.clone(),
    }
}

fn assert_histogram(got: &HistogramProto, want: &Histogram1d) {
    assert_eq!(
        got.bucket_limit, want.edges,
        "the limits are Cockpit's edges"
    );
    assert_eq!(got.bucket[0], 0.0, "nothing below the first edge");
    assert_eq!(&got.bucket[1..], &want.hist[..], "the counts are Cockpit's");
    assert_eq!(got.num, want.hist.iter().sum::<f64>());
}

#[test]
fn every_kind_of_value_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut output = Output::new();
    output.insert(0, "Loss", Value::Float(2.5));
    output.insert(0, "epoch_count", Value::Int(1));
    output.insert(0, "GradNorm", Value::List(vec![3.0, 4.0]));
    output.insert(1, "HessTrace[ggn]", Value::List(vec![1.5, -0.5]));
    output.set_kind("HessTrace[ggn]", "HessTrace");
    output.insert(1, "Alpha", Value::Float(f64::NAN));
    output.insert(
        1,
        "GradHist1d",
        Value::Hist1d(Histogram1d {
            hist: vec![1.0, 0.0, 5.0],
            edges: vec![-1.0, -0.25, 0.5, 1.0],
        }),
    );
    output.insert(
        2,
        "GradHist2d",
        Value::Hist2d(Histogram2d {
            hist: vec![1, 2, 0, 3, 4, 0],
            bins: (3, 2),
            x_edges: vec![-1.0, 0.0, 1.0, 2.0],
            y_edges: vec![0.0, 1.0, 2.0],
            individual: Vec::new(),
        }),
    );
    // A histogram without a bin is left out, not a crash.
    output.insert(
        2,
        "Empty",
        Value::Hist1d(Histogram1d {
            hist: Vec::new(),
            edges: Vec::new(),
        }),
    );
    let names = vec!["fc.weight".to_string(), "fc.bias".to_string()];
    let mut writer = TensorBoardWriter::create(dir.path()).unwrap();
    writer.write_output(&output, &names).unwrap();
    writer
        .write_png(
            "cockpit/dashboard",
            2,
            b"\x89PNG not really".to_vec(),
            (640, 320),
        )
        .unwrap();
    let read = read_dir(dir.path());
    let image = &read.images[&("cockpit/dashboard".into(), 2)];
    assert_eq!((image.width, image.height, image.colorspace), (640, 320, 3));
    assert_eq!(image.encoded_image_string, b"\x89PNG not really");
    assert_eq!(assert_holds(&read, &output, &names), 7);
    // The network-wide values by each spec's reduction: GradNorm √(3² + 4²), HessTrace a sum.
    assert_eq!(read.scalars[&("cockpit/GradNorm".into(), 0)], 5.0);
    assert_eq!(read.scalars[&("cockpit/HessTrace[ggn]".into(), 1)], 1.0);
    assert_eq!(
        read.histograms[&("cockpit/GradHist2d/gradients".into(), 2)].bucket,
        vec![0.0, 3.0, 3.0, 4.0]
    );
    let histogram = &read.histograms[&("cockpit/GradHist1d".into(), 1)];
    assert_eq!((histogram.min, histogram.max), (-1.0, 1.0));
}

/// Two writers in one directory (two Cockpits of one run) write two files, neither refused.
#[test]
fn two_writers_share_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let first = TensorBoardWriter::create(dir.path()).unwrap();
    let second = TensorBoardWriter::create(dir.path()).unwrap();
    assert_ne!(first.path(), second.path());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// A directory that cannot be created is a typed error, not a panic.
#[test]
fn an_unwritable_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = TensorBoardWriter::create(file.join("below")).unwrap_err();
    assert!(err.to_string().contains("cannot create"), "{err}");
}

#[derive(Module, Debug)]
struct Net {
    fc: Linear,
}

/// A training run with `economy` and the curvature-free rest of Cockpit's quantities writes
/// each tracked step as it goes: after every step the file holds exactly what was tracked so
/// far, with the parameters' names.
#[test]
fn a_training_run_writes_every_tracked_value() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex().autodiff();
    let mut model = Net {
        fc: LinearConfig::new(4, 3).init(&device).into(),
    };
    let mut kinds = Configuration::Economy.kinds();
    kinds.extend([QuantityKind::GradHist2d, QuantityKind::MeanGSNR]);
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step())
        .unwrap()
        .with_sink(TensorBoardWriter::create(dir.path()).unwrap());
    let mut optimizer = SgdConfig::new().init();
    let x: Vec<f32> = (0..32).map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0).collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [8, 4]), &device);
    let y: Vec<f32> = (0..24).map(|i| f32::from(u8::from(i % 4 == 0))).collect();
    let y = Tensor::<2>::from_data(TensorData::new(y, [8, 3]), &device);
    for step in 0..4 {
        let recorder = Recorder::start();
        let losses = (log_softmax(model.fc.forward(x.clone()), 1) * y.clone())
            .sum_dim(1)
            .neg()
            .reshape([8]);
        let loss = losses.clone().mean();
        let grads = loss.backward();
        let factors = recorder.finish(&grads).unwrap();
        let grads = GradientsParams::from_grads(grads, &model);
        let info = StepInfo::new(loss.detach())
            .with_individual_losses(losses.detach())
            .with_optimizer(OptimizerInfo::sgd(0.1))
            .with_per_sample(factors);
        cockpit.track(step, &model, &grads, info).unwrap();
        model = optimizer.step(0.1, model, grads);
        // Flushed: what was tracked is in the file now.
        let read = read_dir(dir.path());
        assert_holds(
            &read,
            cockpit.output(),
            &["fc.weight".into(), "fc.bias".into()],
        );
    }
    let read = read_dir(dir.path());
    let checked = assert_holds(
        &read,
        cockpit.output(),
        &["fc.weight".into(), "fc.bias".into()],
    );
    assert!(checked >= 4 * 10, "{checked} values checked");
    assert!(
        read.scalars
            .contains_key(&("cockpit/GradNorm/fc.weight".into(), 3))
    );
}

/// The Python Cockpit's own log (what `cockpit export` converts): every value of the log is
/// in the event file.
#[test]
fn a_python_cockpit_log_converts() {
    let log =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cockpit_write_example.json");
    let dir = tempfile::tempdir().unwrap();
    let output = read_log(&log).unwrap();
    TensorBoardWriter::create(dir.path())
        .unwrap()
        .write_output(&output, &[])
        .unwrap();
    let checked = assert_holds(&read_dir(dir.path()), &output, &[]);
    assert!(checked >= 20, "{checked} values checked");
}
