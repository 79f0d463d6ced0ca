//! `cockpit`: the burn-cockpit command line.
//!
//! ```text
//! cockpit plot LOG.json|LOG.jsonl -o OUT.png|OUT.svg [--secondary] [--watch]   # the dashboard
//! cockpit diagnose LOG.json|LOG.jsonl [--json] [--names N,N,...]             # what it shows, in words
//! cockpit replay FIXTURE.json --out LOG.json [--variants]                     # a PyTorch run in burn
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use cockpit_cli::replay::{Fixture, ReplayOptions, replay};

const USAGE: &str = "\
usage: cockpit plot LOG.json|LOG.jsonl -o OUT.png|OUT.svg [--secondary] [--size WxH] [--title T]
                  [--watch [--interval-ms N] [--idle-exit SECONDS]]
       cockpit diagnose LOG.json|LOG.jsonl [--json] [--names NAME,NAME,...]
       cockpit replay FIXTURE.json --out LOG.json [--stream LOG.jsonl] [--variants] [--fresh-start]

plot draws Cockpit's dashboard (the secondary screen with --secondary) from a log of ours or
of the Python Cockpit; --watch redraws it whenever the log (e.g. the JSON-lines stream of a
running training) changes, until the log has been idle for --idle-exit seconds.
diagnose says in words what the log shows: a verdict line, then each finding with its evidence,
the parameters concerned (named by --names, in the order of the log's per-parameter lists) and
what to do; --json prints the same as JSON. Exit status 1 when something is flagged.
replay replays a training run recorded from the real (PyTorch) Cockpit in burn, in float64 on the
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
        Some("plot") => plot_command(&args[1..]),
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
    let mut path = None;
    let mut json = false;
    let mut names = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--names" => {
                names = value(&mut iter, arg)?
                    .split(',')
                    .map(|n| n.trim().to_string())
                    .collect();
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with('-') => {
                return Err(format!("unknown option `{flag}`\n\n{USAGE}"));
            }
            log if path.is_none() => path = Some(log.to_string()),
            extra => return Err(format!("unexpected argument `{extra}`\n\n{USAGE}")),
        }
    }
    let path = path.ok_or_else(|| format!("diagnose takes one log file\n\n{USAGE}"))?;
    let output = if path.ends_with(".jsonl") {
        cockpit_quantities::log::read_stream(&path)
    } else {
        cockpit_quantities::log::read_log(&path)
    }
    .map_err(|e| e.to_string())?;
    if output.is_empty() {
        return Err(format!("`{path}` holds no tracked step"));
    }
    let diagnosis = cockpit_cli::diagnose::Diagnoser::new()
        .with_names(&names)
        .run(&output);
    if json {
        println!("{}", diagnosis.to_json());
    } else {
        print!("{}", diagnosis.report());
    }
    if diagnosis.is_flagged() {
        Err(FLAGGED.into())
    } else {
        Ok(())
    }
}

fn plot_command(args: &[String]) -> Result<(), String> {
    use cockpit_plot::{PlotOptions, Screen, WatchEvent, WatchOptions};
    let mut log = None;
    let mut out = None;
    let mut options = PlotOptions::default();
    let mut live: Option<WatchOptions> = None;
    let mut interval = None;
    let mut idle = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--out" | "-o" => out = Some(PathBuf::from(value(&mut iter, arg)?)),
            "--secondary" => options.screen = Screen::Secondary,
            "--title" => options.title = value(&mut iter, arg)?.to_string(),
            "--size" => {
                let size = value(&mut iter, arg)?;
                let (w, h) = size
                    .split_once('x')
                    .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
                    .ok_or_else(|| format!("--size takes WIDTHxHEIGHT, not `{size}`"))?;
                (options.width, options.height) = (w, h);
            }
            "--watch" => live = Some(WatchOptions::default()),
            "--interval-ms" => {
                let v = value(&mut iter, arg)?;
                interval = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("--interval-ms takes milliseconds, not `{v}`"))?,
                );
            }
            "--idle-exit" => {
                let v = value(&mut iter, arg)?;
                idle = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| *s >= 0.0)
                        .ok_or_else(|| format!("--idle-exit takes seconds, not `{v}`"))?,
                );
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with('-') => {
                return Err(format!("unknown option `{flag}`\n\n{USAGE}"));
            }
            path if log.is_none() => log = Some(PathBuf::from(path)),
            extra => return Err(format!("unexpected argument `{extra}`\n\n{USAGE}")),
        }
    }
    let log = log.ok_or_else(|| format!("missing LOG.json\n\n{USAGE}"))?;
    let out = out.ok_or_else(|| format!("missing -o OUT.png|OUT.svg\n\n{USAGE}"))?;
    let Some(mut live) = live else {
        let rendered = cockpit_plot::plot_file(&log, &out, &options).map_err(|e| e.to_string())?;
        let missing: Vec<&str> = rendered
            .panels
            .iter()
            .filter(|p| !p.drawn)
            .map(|p| p.name.as_str())
            .collect();
        println!("wrote {}", out.display());
        if !missing.is_empty() {
            println!("left out (no data in the log): {}", missing.join(", "));
        }
        return Ok(());
    };
    if let Some(ms) = interval {
        live.interval = std::time::Duration::from_millis(ms.max(10));
    }
    live.idle_exit = idle.map(std::time::Duration::from_secs_f64);
    println!("watching {} (Ctrl-C to stop)", log.display());
    cockpit_plot::watch(&log, &out, &options, &live, |event| match event {
        WatchEvent::Drawn { steps, .. } => println!("drew {steps} steps into {}", out.display()),
        WatchEvent::Skipped(err) => eprintln!("waiting for a readable log: {err}"),
    })
    .map_err(|e| e.to_string())
}

fn value<'a>(iter: &mut impl Iterator<Item = &'a String>, flag: &str) -> Result<&'a str, String> {
    iter.next()
        .map(String::as_str)
        .ok_or_else(|| format!("`{flag}` needs a value"))
}
