//! A gallery of healthy training runs and what `cockpit diagnose` says about each: nothing.
//!
//! Twelve networks that learn well — a GELU MLP under Adam (the most common first model), the
//! same under SGD at a large learning rate, 10 and 100 classes, a slow tanh run, a network that
//! memorises random labels, a CNN under SGD and Adam, a bigram language model, a regression,
//! a large batch with momentum and a noisy small-batch Adam run — each watched by a Cockpit
//! (`economy` at every step, HessMaxEV every 10th step). Every run's log goes to
//! `cockpit-logs/healthy/<name>.json`, and the diagnosis is printed below it (a test keeps
//! every one clean; `examples/pathologies.rs` is the other half).
//!
//! ```text
//! cargo run --release --example healthy                 # all twelve runs
//! cargo run --release --example healthy -- gelu-adam memorise
//! ```

use burn_cockpit::backend;
use burn_cockpit::diagnose::Diagnoser;
use indicatif::{ProgressBar, ProgressStyle};

#[path = "common/healthy.rs"]
mod healthy;
use healthy::{Healthy, train};

/// Optimizer steps per run.
const STEPS: usize = 200;

/// The options (`--help`; unknown run names are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// The runs to train (default: all), by name: gelu-adam, memorise, … (an unknown name
    /// lists the names).
    runs: Vec<String>,
    /// Optimizer steps per run.
    #[arg(long, default_value_t = STEPS)]
    steps: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Args as clap::Parser>::parse();
    let names: Vec<&str> = Healthy::ALL.iter().map(|h| h.name()).collect();
    if let Some(unknown) = args.runs.iter().find(|w| !names.contains(&w.as_str())) {
        return Err(format!("no run `{unknown}`; choose from: {}", names.join(", ")).into());
    }
    let (backend_name, device) = backend::device()?;
    let dir = std::path::Path::new("cockpit-logs/healthy");
    std::fs::create_dir_all(dir)?;
    let style = ProgressStyle::with_template("{prefix:>20} [{bar:30}] {pos}/{len} steps")?
        .progress_chars("=> ");
    for run in Healthy::ALL
        .into_iter()
        .filter(|h| args.runs.is_empty() || args.runs.iter().any(|w| w == h.name()))
    {
        let bar = ProgressBar::new(args.steps as u64).with_style(style.clone());
        bar.set_prefix(run.name());
        let trained = train(run, args.steps, &device, |_| bar.inc(1))?;
        bar.finish_and_clear();
        let path = dir.join(format!("{}.json", run.name()));
        burn_cockpit::log::write_log(&path, &trained.output)?;
        let mut diagnoser = Diagnoser::new().with_names(&trained.names);
        if let Some(classes) = run.classes() {
            diagnoser = diagnoser.with_classes(classes);
        }
        let diagnosis = diagnoser.run(&trained.output);
        println!(
            "== {} ({backend_name}, {} steps) → {}",
            run.name(),
            args.steps,
            path.display()
        );
        print!("{}", diagnosis.report());
        println!();
    }
    Ok(())
}
