//! `cockpit`: the burn-cockpit command line.
//!
//! ```text
//! cockpit replay FIXTURE.json --out LOG.json [--stream LOG.jsonl]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use cockpit_cli::replay::{Fixture, ReplayOptions, replay};

const USAGE: &str = "\
usage: cockpit diagnose LOG.json|LOG.jsonl
       cockpit replay FIXTURE.json --out LOG.json [--stream LOG.jsonl] [--variants] [--fresh-start]

Replays a training run recorded from the real (PyTorch) Cockpit in burn, in float64 on the
CPU, tracking every quantity burn-cockpit implements at every step, and writes a
Cockpit-format log. --variants also tracks the fixture's non-default settings that
burn-cockpit computes, under the fixture's keys. HessMaxEV starts from the fixture's recorded
start vectors (for parity) unless --fresh-start asks for burn-cockpit's own seeded draws.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) if message == FLAGGED => ExitCode::from(1),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("replay") => replay_command(&args[1..]),
        Some("diagnose") => diagnose_command(&args[1..]),
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    }
}

fn replay_command(args: &[String]) -> Result<(), String> {
    let mut fixture = None;
    let mut out = None;
    let mut stream = None;
    let mut variants = false;
    let mut fresh_start = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--out" | "-o" => out = Some(PathBuf::from(value(&mut iter, arg)?)),
            "--stream" => stream = Some(PathBuf::from(value(&mut iter, arg)?)),
            "--variants" => variants = true,
            "--fresh-start" => fresh_start = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with('-') => {
                return Err(format!("unknown option `{flag}`\n\n{USAGE}"));
            }
            path if fixture.is_none() => fixture = Some(PathBuf::from(path)),
            extra => return Err(format!("unexpected argument `{extra}`\n\n{USAGE}")),
        }
    }
    let fixture_path = fixture.ok_or_else(|| format!("missing FIXTURE.json\n\n{USAGE}"))?;
    let out = out.ok_or_else(|| format!("missing --out LOG.json\n\n{USAGE}"))?;
    let fixture = Fixture::load(&fixture_path).map_err(|e| e.to_string())?;
    let options = ReplayOptions {
        stream,
        variants,
        recorded_start_vectors: !fresh_start,
        ..ReplayOptions::cpu_f64()
    };
    let run = replay(&fixture, &options).map_err(|e| e.to_string())?;
    cockpit_quantities::log::write_log(&out, &run.output).map_err(|e| e.to_string())?;
    for warning in &run.warnings {
        eprintln!("warning: {warning}");
    }
    for (quantity, reason) in &run.refused {
        eprintln!("note: {quantity} refused: {reason}");
    }
    if variants && !run.skipped_variants.is_empty() {
        eprintln!(
            "note: variants not computed yet: {}",
            run.skipped_variants.join(", ")
        );
    }
    let quantities: Vec<&str> = options.quantities.iter().map(|k| k.name()).collect();
    println!(
        "replayed {} steps of `{}` ({} loss, SGD lr {}) tracking {}; wrote {}",
        fixture.steps.len(),
        fixture.name.as_deref().unwrap_or("fixture"),
        match fixture.loss {
            cockpit_cli::replay::LossKind::Mse => "MSE",
            cockpit_cli::replay::LossKind::CrossEntropy => "cross-entropy",
        },
        fixture.optimizer.lr,
        quantities.join(", "),
        out.display()
    );
    Ok(())
}

/// The error text that means "diagnose flagged something" (exit status 1).
const FLAGGED: &str = "flagged";

fn diagnose_command(args: &[String]) -> Result<(), String> {
    let [path] = args else {
        return Err(format!("diagnose takes one log file\n\n{USAGE}"));
    };
    let output = if path.ends_with(".jsonl") {
        cockpit_quantities::log::read_stream(path)
    } else {
        cockpit_quantities::log::read_log(path)
    }
    .map_err(|e| e.to_string())?;
    if output.is_empty() {
        return Err(format!("`{path}` holds no tracked step"));
    }
    let findings = cockpit_cli::diagnose::diagnose(&output);
    print!("{}", cockpit_cli::diagnose::report(&findings));
    if findings.is_empty() {
        Ok(())
    } else {
        Err(FLAGGED.into())
    }
}

fn value<'a>(iter: &mut impl Iterator<Item = &'a String>, flag: &str) -> Result<&'a str, String> {
    iter.next()
        .map(String::as_str)
        .ok_or_else(|| format!("`{flag}` needs a value"))
}
