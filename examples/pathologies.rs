//! A gallery of sick training runs and what `cockpit diagnose` says about each.
//!
//! One small teacher–student problem trained eight ways — healthy, learning rate far too
//! large and far too small, a layer killed by dead ReLUs, a deep sigmoid stack, inputs left on
//! a 0–255 scale, batches of two, a too-large initialisation — each watched by a Cockpit
//! (`economy` at every step, HessMaxEV every 8th step). Every run's log goes to
//! `cockpit-logs/pathologies/<name>.json`, and the diagnosis is printed below it.
//!
//! ```text
//! cargo run --release --example pathologies            # all eight runs
//! cargo run --release --example pathologies -- lr-too-large healthy
//! ```

use burn_cockpit::backend;
use burn_cockpit::diagnose::Diagnoser;
use indicatif::{ProgressBar, ProgressStyle};

#[path = "common/gallery.rs"]
mod gallery;
use gallery::{Pathology, train};

/// Optimizer steps per run.
const STEPS: usize = 160;

/// The options (`--help`; unknown options and run names are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// The runs to train (default: all), by name: healthy, lr-too-large, … (an unknown name
    /// lists the names).
    runs: Vec<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let wanted = <Args as clap::Parser>::parse().runs;
    let names: Vec<&str> = Pathology::ALL.iter().map(|p| p.name()).collect();
    if let Some(unknown) = wanted.iter().find(|w| !names.contains(&w.as_str())) {
        return Err(format!("no run `{unknown}`; choose from: {}", names.join(", ")).into());
    }
    let (backend_name, device) = backend::device()?;
    let runs: Vec<Pathology> = Pathology::ALL
        .into_iter()
        .filter(|p| wanted.is_empty() || wanted.iter().any(|w| w == p.name()))
        .collect();
    if runs.is_empty() {
        let names: Vec<&str> = Pathology::ALL.iter().map(|p| p.name()).collect();
        return Err(format!("no such run; choose from: {}", names.join(", ")).into());
    }
    let dir = std::path::Path::new("cockpit-logs/pathologies");
    std::fs::create_dir_all(dir)?;
    let style = ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} steps")?
        .progress_chars("=> ");
    for pathology in runs {
        let bar = ProgressBar::new(STEPS as u64).with_style(style.clone());
        bar.set_prefix(pathology.name());
        let run = train(pathology, STEPS, &device, |_| bar.inc(1))?;
        bar.finish_and_clear();
        let path = dir.join(format!("{}.json", pathology.name()));
        burn_cockpit::log::write_log(&path, &run.output)?;
        let diagnosis = Diagnoser::new().with_names(&run.names).run(&run.output);
        println!(
            "== {} ({backend_name}, {STEPS} steps) → {}",
            pathology.name(),
            path.display()
        );
        print!("{}", diagnosis.report());
        println!();
    }
    Ok(())
}
