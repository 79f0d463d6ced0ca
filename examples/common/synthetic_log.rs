//! A synthetic Cockpit run with every instrument's data, for the speed examples.

use burn_cockpit::{Histogram1d, Histogram2d, Output, Value};

/// A synthetic run of `steps` steps ([`synthetic_step`] for each).
#[allow(dead_code)] // follow_speed writes the steps one at a time
pub fn synthetic(steps: usize) -> Output {
    let mut out = Output::new();
    for step in 0..steps {
        out.merge(synthetic_step(step, steps));
    }
    out
}

/// Step `step` of a synthetic run of `steps` steps: every instrument's data (11 scalars and 4
/// four-layer lists, a 60-bin GradHist1d, a 20×20 GradHist2d every 10th step, `log()`
/// entries every 100th).
pub fn synthetic_step(step: usize, steps: usize) -> Output {
    let mut out = Output::new();
    let wave = |t: f64, k: f64| 1.0 + 0.5 * (t * k).sin();
    let t = step as f64 / steps as f64;
    for (name, value) in [
        ("Loss", 2.0 * (-3.0 * t).exp() + 0.1 * wave(t, 300.0)),
        ("Alpha", (t * 50.0).sin()),
        ("NormTest", wave(t, 40.0)),
        ("InnerTest", 0.5 * wave(t, 30.0)),
        ("OrthoTest", 0.3 * wave(t, 20.0)),
        ("MeanGSNR", 0.2 * wave(t, 10.0)),
        ("CABS", 32.0 * wave(t, 5.0)),
        ("EarlyStopping", -0.5 * wave(t, 7.0)),
        ("HessMaxEV", 10.0 * wave(t, 3.0)),
        ("TICDiag", 40.0 * wave(t, 2.0)),
        ("TICTrace", 4.0 * wave(t, 9.0)),
    ] {
        out.insert(step, name, Value::Float(value));
    }
    for name in ["Distance", "UpdateSize", "GradNorm", "HessTrace"] {
        out.insert(
            step,
            name,
            Value::List((0..4).map(|l| wave(t, l as f64 + 1.0)).collect()),
        );
    }
    let edges: Vec<f64> = (0..=60).map(|i| -1.0 + i as f64 / 30.0).collect();
    let hist: Vec<f64> = (0..60)
        .map(|i| (1000.0 * (-((i as f64 - 30.0) / 8.0).powi(2)).exp()).round())
        .collect();
    out.insert(
        step,
        "GradHist1d",
        Value::Hist1d(Histogram1d { hist, edges }),
    );
    if step.is_multiple_of(10) {
        let counts: Vec<i64> = (0..400).map(|i| ((i * 7 + step) % 13) as i64).collect();
        let e: Vec<f64> = (0..=20).map(|i| -1.0 + i as f64 / 10.0).collect();
        out.insert(
            step,
            "GradHist2d",
            Value::Hist2d(Histogram2d {
                hist: counts,
                bins: (20, 20),
                x_edges: e.clone(),
                y_edges: e,
                individual: Vec::new(),
            }),
        );
    }
    if step % 100 == 99 {
        out.insert(step, "learning_rate", Value::Float(0.1 * (1.0 - t)));
        out.insert(step, "train_accuracy", Value::Float(t));
    }
    out
}
