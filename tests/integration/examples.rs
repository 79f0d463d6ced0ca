//! Which examples: ids from the batch to the per-example record and every output — the step's
//! value, the table beside the log, the stream, TensorBoard, the dashboard's examples view and
//! `cockpit examples` — against single-sample passes computed here, with one read per step.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use crate::common::{self, Backend, ToDType};
use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::curvature::OutputLoss;
use burn_cockpit::persample::{Linear, loss};
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, Schedule, Value};

#[derive(Module, Debug)]
struct Net {
    l1: Linear,
    l2: Linear,
}

impl Net {
    fn new(device: &Device, backend: &Backend) -> Self {
        Self {
            l1: Linear::new(&LinearConfig::new(4, 6), device),
            l2: Linear::new(&LinearConfig::new(6, 3), device),
        }
        .map(&mut ToDType(backend.dtype))
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l2.forward(relu(self.l1.forward(x)))
    }
}

/// The data set: example `i` has features from its index and label `i mod 3`.
const EXAMPLES: u64 = 9;
const B: usize = 6;
const STEPS: usize = 6;

fn features(id: u64) -> [f32; 4] {
    let t = id as f32 * 0.7;
    [
        t.sin(),
        (1.9 * t).cos(),
        0.3 * t - 1.0,
        ((id % 4) as f32 - 1.5) * 0.5,
    ]
}

/// The batch of step `s`: ids `(6s + k) mod 9`.
fn batch(device: &Device, backend: &Backend, s: usize) -> (Vec<u64>, Tensor<2>, Tensor<1, Int>) {
    let ids: Vec<u64> = (0..B).map(|k| ((s * B + k) as u64) % EXAMPLES).collect();
    let x: Vec<f32> = ids.iter().flat_map(|&i| features(i)).collect();
    let y: Vec<i64> = ids.iter().map(|&i| (i % 3) as i64).collect();
    (
        ids,
        Tensor::<2>::from_data(TensorData::new(x, [B, 4]), device).cast(backend.dtype),
        Tensor::from_data(TensorData::new(y, [B]), device),
    )
}

/// Each example's loss, squared gradient norm and margin from its own forward and backward
/// pass (no per-sample machinery).
fn single_sample(net: &Net, x: &Tensor<2>, y: &Tensor<1, Int>) -> Vec<(f64, f64, f64)> {
    (0..B)
        .map(|n| {
            let (xn, yn) = (x.clone().narrow(0, n, 1), y.clone().narrow(0, n, 1));
            let logits = net.forward(xn);
            let l = loss::cross_entropy(logits.clone(), yn.clone()).sum();
            let grads = GradientsParams::from_grads(l.clone().backward(), net);
            let mut sq = 0.0;
            for id in [net.l1.weight.id, net.l2.weight.id] {
                let g = grads.get::<2>(id).unwrap();
                sq += g.square().sum().into_scalar::<f64>();
            }
            for bias in [&net.l1.bias, &net.l2.bias] {
                let g = grads.get::<1>(bias.as_ref().unwrap().id).unwrap();
                sq += g.square().sum().into_scalar::<f64>();
            }
            let f: Vec<f64> = logits
                .cast(burn::tensor::DType::F64)
                .into_data()
                .try_to_vec::<f64>()
                .unwrap();
            let label = yn.into_data().convert::<i64>().try_to_vec::<i64>().unwrap()[0] as usize;
            let other = (0..3)
                .filter(|&c| c != label)
                .map(|c| f[c])
                .fold(f64::NEG_INFINITY, f64::max);
            (l.into_scalar::<f64>(), sq, f[label] - other)
        })
        .collect()
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 2e-4 * a.abs().max(b.abs()).max(1e-3),
        "{what}: {a} vs {b}"
    );
}

fn ids_reach_every_output(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.json");
    let mut cockpit = Cockpit::from_kinds(
        [QuantityKind::Loss, QuantityKind::Examples],
        &Schedule::every_step(),
    )
    .unwrap()
    .with_stream(dir.path().join("run.jsonl"))
    .unwrap()
    .with_sink(burn_cockpit::tensorboard::TensorBoardWriter::create(dir.path().join("tb")).unwrap())
    .with_console(false);
    let mut net = Net::new(&device, backend);
    let mut optimizer = SgdConfig::new().init();
    // Per id, in visit order: (loss, squared norm, margin) from single-sample passes.
    let mut visits: BTreeMap<u64, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for s in 0..STEPS {
        let (ids, x, y) = batch(&device, backend, s);
        let truth = single_sample(&net, &x, &y);
        let forward = {
            let x = x.clone();
            move |m: &Net| m.forward(x.clone())
        };
        let stepped = cockpit
            .step_with_ids(&net, forward, OutputLoss::classes(y, 3), ids.clone())
            .unwrap();
        assert!(stepped.report.failures.is_empty(), "{:?}", stepped.report);
        assert_eq!(cockpit.reads().reads, 1, "one read per tracked step");
        // The step's value: shares of Σ‖g_n‖² and the concentration, by hand.
        let total: f64 = truth.iter().map(|t| t.1).sum();
        let mut order: Vec<usize> = (0..B).collect();
        order.sort_by(|&a, &b| truth[b].1.total_cmp(&truth[a].1));
        let Some(Value::Examples(shares)) = cockpit.output().get(s, "Examples") else {
            panic!("no Examples at step {s}")
        };
        assert!(shares.ids_known);
        assert_eq!(shares.batch, B);
        let mut running = 0.0;
        let half = 1 + order
            .iter()
            .position(|&n| {
                running += truth[n].1;
                running >= total / 2.0
            })
            .unwrap();
        assert_eq!(shares.half, half, "step {s}");
        for (k, top) in shares.top.iter().enumerate() {
            let n = ids.iter().position(|&i| i == top.id).unwrap();
            close(top.share, truth[n].1 / total, "share");
            close(top.loss, truth[n].0, "loss");
            if k > 0 {
                assert!(top.share <= shares.top[k - 1].share, "largest first");
            }
        }
        for (n, id) in ids.iter().enumerate() {
            visits.entry(*id).or_default().push(truth[n]);
        }
        net = optimizer.step(0.5, net, stepped.grads);
    }

    // The record against the single-sample passes.
    let record = cockpit.examples().unwrap();
    assert_eq!(record.len(), EXAMPLES as usize);
    for (id, seen) in &visits {
        let stats = record.get(*id).unwrap();
        let n = seen.len() as f64;
        assert_eq!(stats.seen, seen.len() as u64, "id {id}");
        close(
            stats.loss_mean,
            seen.iter().map(|v| v.0).sum::<f64>() / n,
            "loss mean",
        );
        close(stats.loss_last, seen.last().unwrap().0, "last loss");
        close(
            stats.grad_norm_mean,
            seen.iter().map(|v| v.1.sqrt()).sum::<f64>() / n,
            "gradient norm mean",
        );
        close(
            stats.margin_mean,
            seen.iter().map(|v| v.2).sum::<f64>() / n,
            "margin mean",
        );
        // A margin within float32 rounding of 0 could be read either way: such an example's
        // learned flags are not compared.
        if seen.iter().any(|v| v.2.abs() <= 1e-4) {
            continue;
        }
        let learned: Vec<bool> = seen.iter().map(|v| v.2 > 0.0).collect();
        let forgetting = learned.windows(2).filter(|w| w[0] && !w[1]).count() as u64;
        assert_eq!(stats.forgetting, forgetting, "id {id}");
        assert_eq!(stats.learned_now, *learned.last().unwrap(), "id {id}");
        assert_eq!(
            stats.learned_visit,
            learned.iter().position(|l| *l).map(|k| k as u64 + 1)
        );
    }

    // The table beside the log, read back; `cockpit examples` ranks it by mean loss.
    cockpit.write(&log).unwrap();
    let table = burn_cockpit::examples::table_path(&log);
    let rows = burn_cockpit::examples::read_table(&table).unwrap();
    assert_eq!(rows.len(), EXAMPLES as usize);
    let (found, ranked) = cockpit_cli::examples::ranked(
        &burn_cockpit::log::Reader::default(),
        &log,
        std::f64::consts::LN_2,
    )
    .unwrap();
    assert_eq!(found, table);
    let worst = visits
        .iter()
        .map(|(id, seen)| {
            (
                *id,
                seen.iter().map(|v| v.0).sum::<f64>() / seen.len() as f64,
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(ranked[0].stats.id, worst.0, "the highest mean loss first");
    let json = cockpit_cli::examples::to_json(&ranked);
    assert_eq!(json.as_array().unwrap().len(), EXAMPLES as usize);

    // The stream holds the same values; TensorBoard the concentration; the dashboard's
    // secondary screen draws the examples view.
    let streamed = burn_cockpit::log::read_stream(dir.path().join("run.jsonl")).unwrap();
    assert_eq!(
        streamed.series("Examples"),
        cockpit.output().series("Examples")
    );
    let logged = burn_cockpit::log::read_log(&log).unwrap();
    assert_eq!(
        logged.series("Examples"),
        cockpit.output().series("Examples")
    );
    let events = std::fs::read_dir(dir.path().join("tb"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .next()
        .unwrap();
    let has = |tag: &str| events.windows(tag.len()).any(|w| w == tag.as_bytes());
    assert!(has("Examples/half_fraction") && has("Examples/top_share"));
    let options = burn_cockpit::plot::PlotOptions {
        width: 1200,
        height: 600,
        screen: burn_cockpit::plot::Screen::Secondary,
        ..Default::default()
    };
    let (_, rendered) = burn_cockpit::plot::render_svg(cockpit.output(), &options).unwrap();
    assert!(rendered.panel("examples_gauge").unwrap().drawn);
}

/// Without ids the shares come by batch position and the record stays empty, with a warning;
/// ids that do not match the batch are refused before anything is tracked.
fn without_ids_or_with_wrong_ids(backend: &Backend) {
    let device = backend.device.clone().autodiff();
    let mut cockpit = Cockpit::from_kinds([QuantityKind::Examples], &Schedule::every_step())
        .unwrap()
        .with_console(false);
    let net = Net::new(&device, backend);
    let (_, x, y) = batch(&device, backend, 0);
    let forward = {
        let x = x.clone();
        move |m: &Net| m.forward(x.clone())
    };
    cockpit
        .step(&net, forward.clone(), OutputLoss::classes(y.clone(), 3))
        .unwrap();
    let Some(Value::Examples(shares)) = cockpit.output().get(0, "Examples") else {
        panic!("no value")
    };
    assert!(!shares.ids_known);
    assert!(shares.top.iter().all(|t| (t.id as usize) < B));
    assert!(cockpit.examples().unwrap().is_empty());
    assert!(
        cockpit
            .warnings()
            .iter()
            .any(|w| w.contains("no sample ids")),
        "{:?}",
        cockpit.warnings()
    );
    let err = cockpit
        .step_with_ids(&net, forward, OutputLoss::classes(y, 3), vec![1, 2, 3])
        .unwrap_err();
    assert!(err.to_string().contains("sample ids"), "{err}");
}

on_every_backend!(ids_reach_every_output, without_ids_or_with_wrong_ids);

/// The flipped-label benchmark (`examples/mislabeled.rs`) in small: 800 examples, a fifth of
/// the labels flipped, 15 epochs on flex. The record's ranking finds the flipped examples far
/// better than chance and than forgetting events, with one read per tracked step.
#[test]
fn the_record_finds_flipped_labels() {
    use crate::noisy_labels::{Setup, data, run};
    let setup = Setup {
        examples: 800,
        epochs: 15,
        hidden: 128,
        noise: 0.2,
        ..Setup::default()
    };
    let data = data(&setup);
    let (mut cockpit, outcome) = run(&setup, &data, &Device::flex().autodiff(), |_| {}).unwrap();
    assert_eq!(outcome.flipped, 160);
    assert_eq!(cockpit.examples().unwrap().len(), 800);
    eprintln!("{outcome:?}");
    assert!(outcome.ranking.auroc >= 0.9, "{outcome:?}");
    assert!(outcome.ranking.precision >= 0.7, "{outcome:?}");
    assert!(
        outcome.ranking.auroc > outcome.forgetting.auroc,
        "{outcome:?}"
    );
    assert_eq!(outcome.reads_per_step.0, 1.0);
    // The data map: most flipped examples in the hard-to-learn region, few clean ones; the
    // map draws every example.
    let rows: Vec<_> = cockpit
        .examples()
        .unwrap()
        .rows()
        .into_iter()
        .cloned()
        .collect();
    let (png, drawn) =
        burn_cockpit::plot::render_map_png(&rows, &burn_cockpit::plot::MapOptions::default())
            .unwrap();
    assert_eq!((drawn.drawn, drawn.without_confidence), (800, 0));
    assert_eq!(drawn.regions.iter().sum::<usize>(), 800);
    assert!(png.starts_with(b"\x89PNG"));
    if let Ok(dir) = std::env::var("COCKPIT_TEST_OUT") {
        std::fs::write(std::path::Path::new(&dir).join("flipped_map.png"), png).unwrap();
    }
    // The secondary screen of the written run draws the map beside the examples view.
    let dir = tempfile::tempdir().unwrap();
    cockpit.write(dir.path().join("run.json")).unwrap();
    let data =
        burn_cockpit::plot::DashboardData::from_output(cockpit.output()).with_examples_table(&rows);
    assert_eq!(data.examples_map.as_ref().unwrap().points.len(), 800);
    let secondary = dir.path().join("secondary.png");
    let options = burn_cockpit::plot::PlotOptions {
        screen: burn_cockpit::plot::Screen::Secondary,
        ..Default::default()
    };
    let rendered =
        burn_cockpit::plot::plot_file(dir.path().join("run.json"), &secondary, &options).unwrap();
    assert!(rendered.panel("examples_gauge").is_some());
    if let Ok(out) = std::env::var("COCKPIT_TEST_OUT") {
        std::fs::copy(&secondary, std::path::Path::new(&out).join("secondary.png")).unwrap();
    }
    let (flipped_hard, clean_hard) = outcome.hard_to_learn;
    assert!(
        flipped_hard >= 0.8 && flipped_hard >= 3.0 * clean_hard,
        "{outcome:?}"
    );
}
