//! Language model: a small GPT (a decoder-only transformer built from the per-sample drop-ins)
//! learns generated text, watched by a Cockpit through one call per step: `economy` and the
//! per-sequence Examples record every step, the curvature quantities (HessMaxEV, HessTrace,
//! TICDiag, TICTrace) and GradHist2d every `--curvature-every` steps. At the end it draws the
//! dashboard, prints the diagnosis and the sequences the record finds suspicious, each with
//! the position of its worst token.
//!
//! ```text
//! cargo run --release --example language_model [-- --sequences 640 --epochs 8
//!     --curvature-every 20 --corrupt 0.05 --exact-columns 64 --mc-samples 4]
//! cargo run --release --example language_model --features wgpu
//! ```
//!
//! The text: sequences that count in a stride, `3 5 7 9 1 3 …` (a start digit and a stride of
//! 1, 2 or 3, modulo 10), 6 to 13 tokens long and padded to 13; the model sees 12 tokens and
//! predicts the next at each (`OutputLoss::tokens_with_padding`: padding counts for nothing,
//! each sequence's loss is the mean over its own tokens). Only the first two tokens are
//! guesses; the rest follow. A share of the sequences (`--corrupt`) has one token replaced by
//! a wrong digit: a "mislabeled" sequence. The record names each sequence by its index, so
//! the run's end reports how well the ranking of mean losses finds them (AUROC) and whether the
//! worst token of each lies where it was corrupted.
//!
//! The exact GGN diagonal takes one recorded pass per column of the loss Hessian's square
//! root, `T·V` of them: 132 here, 10⁵–10⁶ for a real language model. `--exact-columns 64`
//! (the default here; the library's default is 256) makes this small model take the path a
//! real one takes, the Monte-Carlo estimate from `--mc-samples` sampled columns with its
//! standard error, said in a warning; `--exact-columns 256` gives the exact one.
//!
//! Writes `cockpit-logs/language_model.json`, the per-sequence table
//! `cockpit-logs/language_model.examples.csv` (`cockpit examples cockpit-logs/language_model.json`
//! ranks it) and the dashboard `cockpit-logs/language_model.png`.

use burn::optim::AdamConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::diagnose::diagnose;
use burn_cockpit::examples::{auroc, rank};
use burn_cockpit::prelude::*;
use burn_cockpit::{Value, backend};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

#[path = "common/gpt.rs"]
mod gpt;
use gpt::{Gpt, GptShape};

/// Digits 0–9 and the padding token.
const VOCABULARY: usize = 11;
const PAD: i64 = 10;
/// Tokens the model sees per sequence (a sequence holds one more: the last target).
const LENGTH: usize = 12;
const LR: f64 = 3e-3;

/// A small GPT on generated counting sequences, watched by a Cockpit.
#[derive(Debug, Parser)]
struct Args {
    /// Training sequences.
    #[arg(long, default_value_t = 640, value_parser = clap::value_parser!(u64).range(8..))]
    sequences: u64,
    /// Epochs.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// Sequences per batch.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(2..))]
    batch: u64,
    /// The curvature quantities' and GradHist2d's interval, in steps.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    curvature_every: u64,
    /// The share of sequences with one token replaced by a wrong digit.
    #[arg(long, default_value_t = 0.05)]
    corrupt: f64,
    /// The most columns the exact GGN may take (`T·V` = 132 here); beyond it, Monte-Carlo.
    #[arg(long, default_value_t = 64)]
    exact_columns: usize,
    /// Sampled columns of the Monte-Carlo GGN (at least 2 for a standard error).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    mc_samples: u64,
    /// The random seed of the text.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// One generated sequence: `LENGTH + 1` tokens (padded), and where it was corrupted.
struct Sequence {
    tokens: Vec<i64>,
    /// The index of the replaced token, if any.
    corrupted: Option<usize>,
}

/// SplitMix64: the text's random numbers, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn generate(count: usize, corrupt: f64, seed: u64) -> Vec<Sequence> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let start = rng.below(10) as i64;
            let stride = 1 + rng.below(3) as i64;
            let length = 6 + rng.below(LENGTH as u64 - 4) as usize;
            let mut tokens: Vec<i64> = (0..=LENGTH)
                .map(|t| {
                    if t < length {
                        (start + stride * t as i64) % 10
                    } else {
                        PAD
                    }
                })
                .collect();
            // A corruption after the stride is set, so that it can be told from the text.
            let corrupted = (rng.uniform() < corrupt).then(|| {
                let at = 3 + rng.below(length as u64 - 3) as usize;
                tokens[at] = (tokens[at] + 1 + rng.below(9) as i64) % 10;
                at
            });
            Sequence { tokens, corrupted }
        })
        .collect()
}

/// The batch's inputs `[B, T]` (padding as token 0: the causal mask keeps it from the counted
/// positions) and next-token targets `[B, T]` (padding as `PAD`).
fn batch_tensors(batch: &[&Sequence], device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let inputs: Vec<i64> = batch
        .iter()
        .flat_map(|s| {
            s.tokens[..LENGTH]
                .iter()
                .map(|&t| if t == PAD { 0 } else { t })
        })
        .collect();
    let targets: Vec<i64> = batch
        .iter()
        .flat_map(|s| s.tokens[1..].iter().copied())
        .collect();
    let shape = [batch.len(), LENGTH];
    (
        Tensor::from_data(TensorData::new(inputs, shape), device),
        Tensor::from_data(TensorData::new(targets, shape), device),
    )
}

fn text(tokens: &[i64]) -> String {
    tokens
        .iter()
        .filter(|&&t| t != PAD)
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if !(0.0..=1.0).contains(&args.corrupt) {
        return Err(format!("--corrupt must lie in [0, 1], got {}", args.corrupt).into());
    }
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    let data = generate(args.sequences as usize, args.corrupt, args.seed);
    let batch = args.batch as usize;
    let shape = GptShape {
        vocabulary: VOCABULARY,
        length: LENGTH,
        d: 32,
        hidden: 64,
        heads: 4,
        layers: 2,
    };
    let mut model = Gpt::new(&shape, &device);
    let adam = AdamConfig::new();
    let mut optimizer = adam.init();

    std::fs::create_dir_all("cockpit-logs")?;
    let mut kinds = Configuration::Economy.kinds();
    kinds.push(QuantityKind::Examples);
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step())?
        .with_optimizer(OptimizerInfo::from_adam(&adam, LR))
        .with_step_options(
            StepOptions::new()
                .with_exact_columns(args.exact_columns)
                .with_mc_samples(args.mc_samples as usize),
        );
    let sparse = Schedule::linear(args.curvature_every as usize, 0)?;
    for kind in [
        QuantityKind::GradHist2d,
        QuantityKind::HessMaxEV,
        QuantityKind::HessTrace,
        QuantityKind::TICDiag,
        QuantityKind::TICTrace,
    ] {
        cockpit.add(kind.build(sparse.clone()))?;
    }

    let steps_per_epoch = data.len().div_ceil(batch);
    let progress = ProgressBar::new(args.epochs * steps_per_epoch as u64);
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} steps {msg}")?
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("training on {backend_name}"));
    let mut rng = Rng(args.seed ^ 0x5eed);
    let mut order: Vec<usize> = (0..data.len()).collect();
    for epoch in 0..args.epochs {
        // A fresh order every epoch (Fisher–Yates).
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut epoch_loss = 0.0;
        for chunk in order.chunks(batch) {
            let sequences: Vec<&Sequence> = chunk.iter().map(|&i| &data[i]).collect();
            let (inputs, targets) = batch_tensors(&sequences, &device);
            let loss = OutputLoss::tokens_with_padding(targets, VOCABULARY, PAD);
            // One call: the forward and backward pass with the per-sample recording, the
            // margins and worst tokens for the record (each sequence named by its index) and,
            // every `curvature_every` steps, the curvature through recorded passes.
            let ids: Vec<u64> = chunk.iter().map(|&i| i as u64).collect();
            let stepped = cockpit.step_with_ids(
                &model,
                move |m: &Gpt| m.forward(inputs.clone()),
                loss,
                ids,
            )?;
            epoch_loss += stepped.loss.into_scalar::<f64>();
            model = optimizer.step(LR, model, stepped.grads);
            progress.inc(1);
        }
        let train_loss = epoch_loss / steps_per_epoch as f64;
        progress.set_message(format!("epoch {epoch} loss {train_loss:.3}"));
        // The epoch's numbers for the dashboard's hyperparameter and performance panels.
        cockpit.log(
            (epoch as usize + 1) * steps_per_epoch - 1,
            &EpochLog {
                epoch_count: epoch as usize + 1,
                train_loss: Some(train_loss),
                learning_rate: Some(LR),
                ..EpochLog::default()
            },
        )?;
    }
    progress.finish();

    cockpit.write("cockpit-logs/language_model.json")?;
    let options = burn_cockpit::plot::PlotOptions {
        title: format!("Cockpit for a small GPT with Adam ({backend_name})"),
        ..Default::default()
    };
    burn_cockpit::plot::save(
        cockpit.output(),
        "cockpit-logs/language_model.png",
        &options,
    )?;

    println!("\n{}", diagnose(cockpit.output()).report());
    let out = cockpit.output();
    if let Some((step, value)) = out.series("HessTrace").last() {
        if let Value::Estimate(estimate) = value {
            let trace: f64 = estimate.values.iter().sum();
            let stderr = estimate.stderr.iter().map(|e| e * e).sum::<f64>().sqrt();
            println!("Hessian trace at step {step}: {trace:.4} ± {stderr:.4} (estimated)");
        } else if let Some(values) = value.as_list() {
            println!(
                "Hessian trace at step {step}: {:.4}",
                values.iter().sum::<f64>()
            );
        }
    }

    // The record's ranking of sequences by mean loss, against the corruptions.
    let Some(record) = cockpit.examples() else {
        return Err("the Cockpit kept no Examples record".into());
    };
    let rows: Vec<_> = record.rows().into_iter().cloned().collect();
    let ranked = rank(&rows, std::f64::consts::LN_2);
    let scores: Vec<f64> = ranked.iter().map(|r| r.score).collect();
    let corrupted: Vec<bool> = ranked
        .iter()
        .map(|r| data[r.stats.id as usize].corrupted.is_some())
        .collect();
    let flagged = corrupted.iter().filter(|&&c| c).count();
    println!("\nMost suspicious sequences (mean token loss; the worst token's target position):");
    for r in ranked.iter().take(8) {
        let sequence = &data[r.stats.id as usize];
        let mark = match sequence.corrupted {
            Some(at) => format!("corrupted at token {at}"),
            None => "clean".to_string(),
        };
        println!(
            "  #{:<4} loss {:.3}  worst target {}  [{}]  {mark}",
            r.stats.id,
            r.score,
            r.stats
                .worst_position
                .map_or("-".to_string(), |p| p.to_string()),
            text(&sequence.tokens),
        );
    }
    if flagged > 0 {
        // Target position t predicts token t + 1: a corruption at token `at` is target `at − 1`.
        let located = ranked
            .iter()
            .filter_map(|r| {
                let at = data[r.stats.id as usize].corrupted?;
                Some(r.stats.worst_position == Some(at as u64 - 1))
            })
            .filter(|&hit| hit)
            .count();
        println!(
            "{flagged} corrupted sequences: AUROC of the mean-loss ranking {:.3}; the worst \
             token at the corruption in {located} of them",
            auroc(&scores, &corrupted)
        );
    }
    for warning in cockpit.warnings() {
        println!("warning: {warning}");
    }
    println!(
        "wrote cockpit-logs/language_model.json, its per-sequence table \
         cockpit-logs/language_model.examples.csv and the dashboard cockpit-logs/language_model.png"
    );
    Ok(())
}
