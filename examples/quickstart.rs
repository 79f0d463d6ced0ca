//! Quickstart: train a small classifier on the iris data set (shipped inside the
//! `linfa-datasets` crate, no download) with a hand-written burn loop, and let a Cockpit watch
//! every step: Cockpit's `economy` configuration plus MeanGSNR, CABS, EarlyStopping and Time,
//! and GradHist2d and the curvature quantities (HessMaxEV, HessTrace, TICDiag, TICTrace) every
//! 25th step, so
//! every instrument of the dashboard has data. At each epoch end `cockpit diagnose`'s checks
//! run on what was tracked so far and warn about anything new.
//! The model is built from `persample::Linear` (a drop-in for `burn::nn::Linear`) so the
//! per-sample quantities come from the ordinary backward pass.
//!
//! ```text
//! cargo run --example quickstart                      # flex, burn's default CPU backend
//! cargo run --example quickstart --features wgpu      # GPU through wgpu
//! ```
//!
//! Writes `cockpit-logs/quickstart.json` (Cockpit's log format, readable by the Python
//! `CockpitPlotter`), `cockpit-logs/quickstart.jsonl` (one line per tracked step), the
//! dashboard `cockpit-logs/quickstart.png` and a TensorBoard event file in
//! `cockpit-logs/tensorboard/quickstart-<time>/` (`tensorboard --logdir cockpit-logs/tensorboard`).

use std::sync::{Arc, Mutex};

use burn::optim::SgdConfig;
use burn::tensor::{Device, Tensor, TensorData};
use burn_cockpit::backend;
use burn_cockpit::diagnose::Monitor;
use burn_cockpit::prelude::*;
use burn_cockpit::tensorboard::TensorBoardWriter;
use indicatif::{ProgressBar, ProgressStyle};

#[path = "common/iris.rs"]
mod iris;
use iris::{Classifier, load_iris};

const EPOCHS: usize = 40;
const BATCH: usize = 16;
const LR: f64 = 0.05;
/// The curvature quantities' interval: each costs tens of Hessian-vector products.
const CURVATURE_EVERY: usize = 25;

fn batch_tensors(x: &[[f64; 4]], y: &[usize], device: &Device) -> (Tensor<2>, Tensor<2>) {
    let inputs: Vec<f32> = x.iter().flatten().map(|v| *v as f32).collect();
    let mut one_hot = vec![0f32; y.len() * 3];
    for (i, &c) in y.iter().enumerate() {
        one_hot[i * 3 + c] = 1.0;
    }
    (
        Tensor::from_data(TensorData::new(inputs, [x.len(), 4]), device),
        Tensor::from_data(TensorData::new(one_hot, [y.len(), 3]), device),
    )
}

fn accuracy(model: &Classifier, x: &[[f64; 4]], y: &[usize], device: &Device) -> f64 {
    let (inputs, _) = batch_tensors(x, y, device);
    let predicted: Vec<i64> = model
        .forward(inputs)
        .argmax(1)
        .into_data()
        .convert::<i64>()
        .try_to_vec()
        .unwrap_or_default();
    let correct = predicted
        .iter()
        .zip(y)
        .filter(|(p, t)| **p as usize == **t)
        .count();
    correct as f64 / y.len() as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    let data = load_iris();
    let mut model = Classifier::new(&device);
    let sgd = SgdConfig::new();
    let mut optimizer = sgd.init();

    std::fs::create_dir_all("cockpit-logs")?;
    let mut kinds = Configuration::Economy.kinds();
    kinds.extend([
        QuantityKind::MeanGSNR,
        QuantityKind::CABS,
        QuantityKind::EarlyStopping,
        QuantityKind::Time,
        QuantityKind::GradParamRatio,
    ]);
    // One TensorBoard run per invocation: `tensorboard --logdir cockpit-logs/tensorboard`.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // TensorBoard is one of the Cockpit's sinks; the handle kept here adds the dashboard image.
    let tensorboard =
        TensorBoardWriter::create(format!("cockpit-logs/tensorboard/quickstart-{run}"))?;
    let tensorboard_file = tensorboard.path().to_path_buf();
    let tensorboard = Arc::new(Mutex::new(tensorboard));
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step())?
        .with_optimizer(OptimizerInfo::from_sgd(&sgd, LR))
        .with_step_options(StepOptions::new().with_piecewise_linear(true))
        .with_stream("cockpit-logs/quickstart.jsonl")?
        .with_sink(tensorboard.clone());
    let sparse = Schedule::linear(CURVATURE_EVERY, 0)?;
    for kind in [
        QuantityKind::GradHist2d,
        QuantityKind::HessMaxEV,
        QuantityKind::HessTrace,
        QuantityKind::TICDiag,
        QuantityKind::TICTrace,
    ] {
        cockpit.add(kind.build(sparse.clone()))?;
    }
    let mut monitor = Monitor::new();

    let steps_per_epoch = data.train.1.len().div_ceil(BATCH);
    let progress = ProgressBar::new((EPOCHS * steps_per_epoch) as u64);
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} steps {msg}")?
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("training on {backend_name}"));

    let mut step = 0;
    for epoch in 0..EPOCHS {
        let mut epoch_loss = 0.0;
        for (x, y) in data.train.0.chunks(BATCH).zip(data.train.1.chunks(BATCH)) {
            let (inputs, targets) = batch_tensors(x, y, &device);
            // One call: the per-sample recording of the instrumented layers, the backward
            // pass, exact curvature diagonals through recorded passes when they are due (one
            // per class; the net is piecewise linear, so diag_h is the GGN's) and
            // Hessian-vector products by differences of gradients on this step's batch.
            let stepped = cockpit.step(
                &model,
                move |m: &Classifier| m.forward(inputs.clone()),
                OutputLoss::CrossEntropy(targets),
            )?;
            model = optimizer.step(LR, model, stepped.grads);
            let loss = stepped.loss;
            epoch_loss += loss.into_scalar::<f64>();
            step += 1;
            progress.inc(1);
        }
        let train_loss = epoch_loss / steps_per_epoch as f64;
        let test_accuracy = accuracy(&model, &data.test.0, &data.test.1, &device);
        progress.set_message(format!(
            "epoch {epoch:>2} loss {train_loss:.3} test acc {test_accuracy:.2}"
        ));
        cockpit.log(
            step - 1,
            &EpochLog {
                epoch_count: epoch + 1,
                train_loss: Some(train_loss),
                train_accuracy: Some(accuracy(&model, &data.train.0, &data.train.1, &device)),
                valid_accuracy: Some(test_accuracy),
                learning_rate: Some(LR),
                ..EpochLog::default()
            },
        )?;
        let names = cockpit.parameter_names().unwrap_or_default().to_vec();
        for finding in monitor.check(cockpit.output(), &names) {
            progress.println(format!(
                "epoch {epoch}: cockpit diagnose [{}]: {}",
                finding.code, finding.message
            ));
        }
    }
    progress.finish();
    cockpit.write("cockpit-logs/quickstart.json")?;
    let options = burn_cockpit::plot::PlotOptions {
        title: format!("Cockpit for SGD ({backend_name})"),
        ..Default::default()
    };
    burn_cockpit::plot::save(cockpit.output(), "cockpit-logs/quickstart.png", &options)?;
    // The same dashboard in TensorBoard's Images tab.
    let (png, _) = burn_cockpit::plot::render_png(cockpit.output(), &options)?;
    tensorboard
        .lock()
        .map_err(|_| "the TensorBoard writer panicked")?
        .write_png(
            "cockpit/dashboard",
            step - 1,
            png,
            (options.width, options.height),
        )?;

    let out = cockpit.output();
    let global = |name: &str, step: usize| -> f64 {
        out.get(step, name)
            .and_then(|v| v.as_list())
            .map_or(f64::NAN, |l| l.iter().map(|x| x * x).sum::<f64>().sqrt())
    };
    let last = step - 1;
    println!("\nCockpit summary ({} steps on {backend_name}):", step);
    println!(
        "  loss          {:.4} → {:.4}",
        out.get(0, "Loss")
            .and_then(|v| v.as_f64())
            .unwrap_or(f64::NAN),
        out.get(last, "Loss")
            .and_then(|v| v.as_f64())
            .unwrap_or(f64::NAN)
    );
    println!(
        "  ‖∇L‖          {:.4} → {:.4}",
        global("GradNorm", 0),
        global("GradNorm", last)
    );
    println!(
        "  ‖θ_t − θ_0‖   {:.4} at the last step",
        global("Distance", last)
    );
    println!(
        "  update size   {:.5} → {:.5}",
        global("UpdateSize", 0),
        global("UpdateSize", last - 1)
    );
    let scalar = |name: &str, step: usize| {
        out.get(step, name)
            .and_then(|v| v.as_f64())
            .unwrap_or(f64::NAN)
    };
    let alphas: Vec<f64> = out
        .series("Alpha")
        .iter()
        .filter_map(|(_, v)| v.as_f64())
        .collect();
    println!(
        "  α             mean {:.3} over {} steps (−1 no progress, 0 minimum, 1 overshoot)",
        alphas.iter().sum::<f64>() / alphas.len().max(1) as f64,
        alphas.len()
    );
    println!(
        "  tests         norm {:.3}, inner {:.3}, ortho {:.3} at the last step",
        scalar("NormTest", last),
        scalar("InnerTest", last),
        scalar("OrthoTest", last)
    );
    println!(
        "  MeanGSNR      {:.4} → {:.4}; CABS batch size {:.1}; EarlyStopping {:.3}",
        scalar("MeanGSNR", 0),
        scalar("MeanGSNR", last),
        scalar("CABS", last),
        scalar("EarlyStopping", last)
    );
    println!(
        "  test accuracy {:.2}",
        accuracy(&model, &data.test.0, &data.test.1, &device)
    );
    for warning in cockpit.warnings() {
        println!("  warning: {warning}");
    }
    println!(
        "wrote cockpit-logs/quickstart.json, cockpit-logs/quickstart.jsonl, the dashboard cockpit-logs/quickstart.png and the TensorBoard events {}",
        tensorboard_file.display()
    );
    Ok(())
}
