//! Which examples: a classification run whose training labels are flipped at random (5 % and
//! 20 % by default), tracked by Cockpit's Examples quantity with the dataset indices as sample
//! ids, and how well the per-example record finds the flipped examples after the run — the
//! record's ranking (the mean loss over visits) and minus the mean margin against the loss at
//! the end alone and forgetting events.
//! Run it in release:
//!
//! ```text
//! cargo run --release --example mislabeled [-- --noise 0.05,0.2 --examples 4000 --epochs 40
//!     --out cockpit-logs/mislabeled]
//! ```
//!
//! Prints, per noise level, `auroc <noise> <score> <value>` and `precision <noise> <score>
//! <value>` (precision among the top-k, k the number flipped), how many flipped and clean
//! examples the network fits at the end, and the reads per tracked step; writes each run's
//! log, per-example table (`cockpit examples` ranks it) and dashboard under `--out`.

#[path = "common/noisy_labels.rs"]
mod noisy_labels;

use std::path::PathBuf;

use burn::tensor::Device;
use clap::Parser;
use indicatif::ProgressBar;
use noisy_labels::{Detection, Setup};

/// A flipped-label benchmark of the Examples record.
#[derive(Debug, Parser)]
struct Args {
    /// The shares of training labels to flip, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.05,0.2")]
    noise: Vec<f64>,
    /// Training examples (Gaussian classes in 32 dimensions, 10 classes).
    #[arg(long, default_value_t = 4000)]
    examples: usize,
    /// Epochs.
    #[arg(long, default_value_t = 40)]
    epochs: usize,
    /// Train with Adam (learning rate 1e-3) instead of plain SGD (0.1): the network then
    /// memorises most flipped labels before the end, and the loss at the end says little.
    #[arg(long)]
    adam: bool,
    /// The seed of the data, flips and shuffles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where each run's log, table and dashboard go.
    #[arg(long, default_value = "cockpit-logs/mislabeled")]
    out: PathBuf,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let device = Device::flex().autodiff();
    for &noise in &args.noise {
        if !(0.0..1.0).contains(&noise) {
            return Err(format!("--noise {noise}: a share in [0, 1)").into());
        }
        let setup = Setup {
            examples: args.examples,
            epochs: args.epochs,
            noise,
            seed: args.seed,
            adam: args.adam,
            lr: if args.adam { 1e-3 } else { 0.1 },
            ..Setup::default()
        };
        let data = noisy_labels::data(&setup);
        let bar =
            ProgressBar::new(setup.epochs as u64).with_message(format!("noise {noise}: epochs"));
        let start = std::time::Instant::now();
        let (mut cockpit, outcome) = noisy_labels::run(&setup, &data, &device, |_| bar.inc(1))?;
        bar.finish_and_clear();
        let seconds = start.elapsed().as_secs_f64();
        let optimizer = if args.adam { "adam" } else { "sgd" };
        let name = format!("noise{:02}_{optimizer}", (100.0 * noise).round());
        let log = args.out.join(format!("{name}.json"));
        cockpit.write(&log)?;
        let options = burn_cockpit::plot::PlotOptions {
            screen: burn_cockpit::plot::Screen::Secondary,
            title: format!("Examples, {:.0} % labels flipped", 100.0 * noise),
            ..Default::default()
        };
        burn_cockpit::plot::save(
            cockpit.output(),
            args.out.join(format!("{name}.png")),
            &options,
        )?;
        println!(
            "run noise={noise} optimizer={optimizer} examples={} flipped={} epochs={} steps={} seconds={seconds:.1}",
            setup.examples,
            outcome.flipped,
            setup.epochs,
            cockpit.output().steps().count()
        );
        println!(
            "fit noise={noise} flipped_memorised={:.3} clean_fit={:.3}",
            outcome.memorised, outcome.clean_fit
        );
        let rows: Vec<_> = cockpit
            .examples()
            .map(|r| r.rows().into_iter().cloned().collect())
            .unwrap_or_default();
        let map = args.out.join(format!("{name}.map.png"));
        burn_cockpit::plot::save_map(&map, &rows, &burn_cockpit::plot::MapOptions::default())?;
        println!(
            "map noise={noise} hard_to_learn flipped={:.3} clean={:.3} ({})",
            outcome.hard_to_learn.0,
            outcome.hard_to_learn.1,
            map.display()
        );
        let scores: [(&str, Detection); 4] = [
            ("ranking(mean_loss)", outcome.ranking),
            ("minus_mean_margin", outcome.margin),
            ("last_loss", outcome.last_loss),
            ("forgetting_events", outcome.forgetting),
        ];
        for (score, detection) in scores {
            println!("auroc {noise} {score} {:.4}", detection.auroc);
            println!("precision {noise} {score} {:.4}", detection.precision);
        }
        println!(
            "reads_per_step {noise} {:.2} values_per_step {:.1}",
            outcome.reads_per_step.0, outcome.reads_per_step.1
        );
        println!(
            "wrote {} and its table (cockpit examples {})",
            log.display(),
            log.display()
        );
    }
    Ok(())
}
