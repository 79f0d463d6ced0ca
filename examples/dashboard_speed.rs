//! Dashboard speed: writes a synthetic 10,000-step Cockpit log with every instrument's data
//! (scalars and 4-layer lists at every step, a 60-bin GradHist1d at every step, a 20×20
//! GradHist2d every 10th step, a `log()` entry every 100th) and times `cockpit plot`'s work on
//! it — reading the log, drawing, encoding — in a release build:
//!
//! ```text
//! cargo run --release --example dashboard_speed [-- --steps 10000]
//! ```

use std::time::Instant;

use burn_cockpit::log::read_any;
use burn_cockpit::log::write_log;
use burn_cockpit::plot::{PlotOptions, Screen, plot_file, render_rgb};
use burn_cockpit::{Histogram1d, Histogram2d, Output, Value};

/// The options (`--help`; unknown options are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// Steps in the synthetic log.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
}

fn synthetic(steps: usize) -> Output {
    let mut out = Output::new();
    let wave = |t: f64, k: f64| 1.0 + 0.5 * (t * k).sin();
    for step in 0..steps {
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
        if step % 10 == 0 {
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
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps = <Args as clap::Parser>::parse().steps as usize;
    let dir = std::env::temp_dir().join("burn-cockpit-dashboard-speed");
    std::fs::create_dir_all(&dir)?;
    let log = dir.join("log.json");
    write_log(&log, &synthetic(steps))?;
    println!(
        "{steps}-step log: {:.1} MB",
        std::fs::metadata(&log)?.len() as f64 / 1e6
    );

    let start = Instant::now();
    let output = read_any(&log)?;
    let read = start.elapsed().as_secs_f64();
    let start = Instant::now();
    render_rgb(&output, &PlotOptions::default())?;
    let draw = start.elapsed().as_secs_f64();
    println!("read {read:.3} s, draw 2400x1200 in memory {draw:.3} s");
    for (screen, file) in [
        (Screen::Primary, "primary.png"),
        (Screen::Secondary, "secondary.png"),
        (Screen::Primary, "primary.svg"),
    ] {
        let options = PlotOptions {
            screen,
            ..PlotOptions::default()
        };
        let start = Instant::now();
        plot_file(&log, dir.join(file), &options)?;
        println!(
            "plot {file} (read + draw + encode): {:.3} s",
            start.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
