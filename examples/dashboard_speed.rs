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

#[path = "common/synthetic_log.rs"]
mod synthetic_log;
use synthetic_log::synthetic;

/// The options (`--help`; unknown options are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// Steps in the synthetic log.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
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
