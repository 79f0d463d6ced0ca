//! A run as long as real training, in bounded memory, written to a run record as it goes and
//! resumable after a kill:
//!
//! ```text
//! cargo run --release --example long_run -- --steps 100000 --record cockpit-logs/long.db
//!     [--resume] [--json cockpit-logs/long.json] [--checkpoint-every 100]
//! ```
//!
//! The benchmark MLP (32-64-10, batch 16, plain SGD) on generated data, `economy` every step.
//! Prints `rss_mb warm <x>` after 1 000 steps, `rss_mb end <y>` and `record_bytes <z>` at the
//! end, and with `--json` exports the record as a Cockpit JSON log. With `--resume` it goes on
//! from the newest checkpoint beside the record (the model every `--checkpoint-every` steps,
//! the Cockpit's state in the record): a run killed with SIGKILL and resumed ends with the
//! record of one never killed.

use std::path::PathBuf;
use std::time::Instant;

use burn_cockpit::backend;
use burn_cockpit::record::{RecordReader, export_log};
use indicatif::{ProgressBar, ProgressStyle};

#[path = "common/long_run.rs"]
mod long_run;
use long_run::{LongRun, rss_mb, run};

/// The options (`--help`).
#[derive(Debug, clap::Parser)]
struct Args {
    /// Optimizer steps in all (a resumed run ends at the same step).
    #[arg(long, default_value_t = 10_000)]
    steps: usize,
    /// The run record (SQLite).
    #[arg(long, default_value = "cockpit-logs/long_run.db")]
    record: PathBuf,
    /// Continue the record from its newest checkpoint.
    #[arg(long)]
    resume: bool,
    /// Also export the record as a Cockpit JSON log here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Checkpoint the model and the Cockpit every this many steps.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_every: u64,
    /// No progress bar (for scripts).
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Args as clap::Parser>::parse();
    if let Some(dir) = args.record.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let (_, device) = backend::device()?;
    let options = LongRun {
        steps: args.steps,
        record: args.record.clone(),
        resume: args.resume,
        checkpoint_every: args.checkpoint_every as usize,
    };
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.steps as u64).with_style(
            ProgressStyle::with_template("[{bar:40}] {pos}/{len} steps, {per_sec}, eta {eta}")?
                .progress_chars("=> "),
        )
    };
    let started = Instant::now();
    let mut warm_done = false;
    let ran = run(&options, &device, |step| {
        bar.set_position(step as u64 + 1);
        if !warm_done && step + 1 >= 1_000 {
            bar.suspend(|| println!("rss_mb warm {:.1}", rss_mb()));
            warm_done = true;
        }
    })?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let done = args.steps.saturating_sub(ran.from);
    println!("resumed_from {}", ran.from);
    let ms_per_step = 1e3 * seconds / done.max(1) as f64;
    let record_ms = 1e3 * ran.record_time.as_secs_f64() / done.max(1) as f64;
    println!("ms_per_step {ms_per_step:.3}");
    println!(
        "record_ms_per_step {record_ms:.4} ({:.2} % of the step)",
        100.0 * record_ms / ms_per_step
    );
    println!("rss_mb end {:.1}", rss_mb());
    let bytes: u64 = ["", "-wal"]
        .iter()
        .filter_map(|suffix| {
            let mut name = args.record.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(PathBuf::from(name)).ok().map(|m| m.len())
        })
        .sum();
    println!("record_bytes {bytes}");
    if let Some(json) = &args.json {
        let mut reader = RecordReader::open(&args.record)?;
        export_log(&mut reader, json)?;
        println!("exported {}", json.display());
    }
    Ok(())
}
