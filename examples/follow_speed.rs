//! What `cockpit serve` pays per appended step of a running training's JSON-lines stream:
//! writes a synthetic 10,000-step stream (every instrument's data, as `dashboard_speed`), then
//! times, in one run, a full read of it with the diagnosis (what `serve` did at each change
//! before it followed the stream) against [`Follower::look`] after each appended step (the
//! appended line merged in place, the diagnosis rerun on its schedule):
//!
//! ```text
//! cargo run --release --example follow_speed [-- --steps 10000 --appended 2000]
//! ```

use std::time::Instant;

use burn_cockpit::Output;
use burn_cockpit::diagnose::Diagnoser;
use burn_cockpit::log::{JsonLinesWriter, Reader, read_stream_prefix};
use cockpit_cli::follow::Follower;

#[path = "common/synthetic_log.rs"]
mod synthetic_log;
use synthetic_log::synthetic_step;

/// The options (`--help`; unknown options are refused).
#[derive(Debug, clap::Parser)]
struct Args {
    /// Steps in the stream before the appended ones.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Steps appended one at a time, each followed by a look.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    appended: u64,
    /// Full reads timed (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    reads: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Args as clap::Parser>::parse();
    let (steps, appended) = (args.steps as usize, args.appended as usize);
    let total = steps + appended;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("run.jsonl");
    let mut writer = JsonLinesWriter::create(&path)?;
    for step in 0..steps {
        writer.append(step, &synthetic_step(step, total))?;
    }
    println!(
        "{steps}-step stream: {:.1} MB",
        std::fs::metadata(&path)?.len() as f64 / 1e6
    );

    // Before: every change read the whole stream and diagnosed the whole run.
    let mut full = Vec::new();
    for _ in 0..args.reads {
        let start = Instant::now();
        let (output, _) = read_stream_prefix(&path)?;
        let diagnosis = Diagnoser::new().run(&output);
        std::hint::black_box(diagnosis);
        full.push(start.elapsed().as_secs_f64());
    }
    full.sort_by(f64::total_cmp);
    let full_read = full[full.len() / 2];

    // After: the follower, caught up once, then one look per appended step.
    let mut follower = Follower::new(&Reader::default(), &path);
    let mut shown = Output::new();
    let start = Instant::now();
    follower.look(&mut shown)?;
    let first = start.elapsed().as_secs_f64();
    let (mut looking, mut reruns) = (0.0, 0);
    for step in steps..total {
        writer.append(step, &synthetic_step(step, total))?;
        let start = Instant::now();
        let look = follower.look(&mut shown)?;
        looking += start.elapsed().as_secs_f64();
        reruns += usize::from(look.verdict.is_some());
    }
    let per_step = looking / appended as f64;
    assert_eq!(shown.last_step(), Some(total - 1));
    println!(
        "full read + diagnosis (before, per change): {:.1} ms",
        full_read * 1e3
    );
    println!("first look (a full read): {:.1} ms", first * 1e3);
    println!(
        "per appended step (after): {:.3} ms = {:.2} % of a full read ({reruns} diagnosis \
         reruns in {appended} steps)",
        per_step * 1e3,
        100.0 * per_step / full_read
    );
    Ok(())
}
