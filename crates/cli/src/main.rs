//! `cockpit`: the burn-cockpit command line.
//!
//! ```text
//! cockpit plot LOG.json|LOG.jsonl -o OUT.png|OUT.svg [--secondary] [--watch]   # the dashboard
//! cockpit diagnose LOG.json|LOG.jsonl [--json] [--names N,N,...] [--classes C] # what it shows, in words
//! cockpit replay FIXTURE.json --out LOG.json [--variants]                     # a PyTorch run in burn
//! cockpit check CONFIG.toml|CONFIG.json                                      # a config, before training
//! cockpit examples LOG.json|TABLE.csv [--top N] [--kind K,K] [--json] [--map OUT.png]  # which examples
//! ```
//!
//! Exit status: 0 on success (and when `diagnose` flags nothing), 1 when `diagnose` flags
//! something, 2 on bad usage or input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use cockpit_cli::diagnose::Diagnoser;
use cockpit_cli::replay::{Fixture, LossKind, ReplayError, ReplayOptions, replay};
use cockpit_cli::serve::ServeOptions;
use cockpit_plot::{PlotError, PlotOptions, Screen, WatchEvent, WatchOptions};
use cockpit_quantities::Output;
use cockpit_quantities::log::{LogError, Reader};
use cockpit_quantities::persample::ErrorChain;
use cockpit_tensorboard::TensorBoardWriter;

/// burn-cockpit: Cockpit's dashboard, diagnosis and replay for burn training runs.
#[derive(Debug, Parser)]
#[command(name = "cockpit", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The largest log, stream or fixture read, in bytes (default 1 GiB); a larger input (or
    /// an endless one) is refused before it fills memory.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = cockpit_quantities::log::DEFAULT_READ_LIMIT)]
    max_input_bytes: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Draws Cockpit's dashboard from a log of ours or of the Python Cockpit.
    Plot(PlotArgs),
    /// Says in words what a log shows: a verdict, then each finding with its evidence (exit
    /// status 1 when something is flagged).
    Diagnose(DiagnoseArgs),
    /// Replays a training run recorded from the real (PyTorch) Cockpit in burn, in float64 on
    /// the CPU, tracking every quantity, and writes a Cockpit-format log.
    Replay(ReplayArgs),
    /// Checks a Cockpit config file (TOML or JSON) as a training run would build it, and lists
    /// each quantity with its key, schedule and needs.
    Check(CheckArgs),
    /// Converts a log (ours, a `.jsonl` stream, or one written by the Python Cockpit) into a
    /// TensorBoard event file.
    Export(ExportArgs),
    /// Serves the dashboard (both screens, the last step seen, the diagnosis) as a page that
    /// redraws itself as the log grows; open the printed address in a browser.
    Serve(ServeArgs),
    /// Ranks a run's examples from its per-example table (written beside the log when the run
    /// tracks `Examples` with sample ids): likely mislabeled, never learned, forgotten, hard,
    /// with the evidence for each.
    Examples(ExamplesArgs),
}

#[derive(Debug, Args)]
struct ExamplesArgs {
    /// The run's log (`run.json`, `run.jsonl`: the table beside it, `run.examples.csv`) or the
    /// table itself (`.csv`).
    log: PathBuf,
    /// How many examples to list (0: all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Only these kinds, comma-separated: never-learned, likely-mislabeled, forgotten, hard,
    /// unremarkable (default: every kind but unremarkable).
    #[arg(long, value_delimiter = ',', value_parser = cockpit_cli::examples::parse_suspicion)]
    kind: Vec<cockpit_quantities::examples::Suspicion>,
    /// The loss below which an example counted as learned, for runs without margins (the
    /// `Examples` setting `learned_loss`; default ln 2).
    #[arg(long, default_value_t = std::f64::consts::LN_2)]
    learned_loss: f64,
    /// Print the ranking as JSON (for tools).
    #[arg(long)]
    json: bool,
    /// Also draw the data map (dataset cartography: each example's confidence in its label
    /// against its variability across visits) into this PNG file.
    #[arg(long, value_name = "OUT.png")]
    map: Option<PathBuf>,
    /// Colour the map's points by forgetting events or by what the record suggests.
    #[arg(long, value_enum, default_value_t = MapColouring::Forgetting)]
    map_colour: MapColouring,
}

/// `cockpit examples --map-colour`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum MapColouring {
    Forgetting,
    Suspicion,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The log: Cockpit's JSON log, or the JSON-lines stream (`.jsonl`) of a running training.
    log: PathBuf,
    /// The port (0: any free port; the one taken is printed).
    #[arg(long, default_value_t = 8787)]
    port: u16,
    /// The address to listen on. The default, 127.0.0.1, is this machine only; any other
    /// address lets other machines read the dashboard (a warning says so).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// A further name the server answers to in the Host header (repeatable), e.g. this
    /// machine's name when the page is reached through it; requests naming any other host are
    /// refused (DNS rebinding).
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_host: Vec<String>,
    /// How often to look at the log, in milliseconds (at least 10).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..))]
    interval_ms: u64,
    /// Each screen's image size WIDTHxHEIGHT, from 600x300 up to 16384x16384 pixels.
    #[arg(long, default_value = "1600x800", value_parser = parse_size)]
    size: (u32, u32),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("to").required(true).multiple(true)))]
struct ExportArgs {
    /// The log: a run record, Cockpit's JSON log, or the JSON-lines stream (`.jsonl`).
    log: PathBuf,
    /// The directory to write the event file into (created if needed); point TensorBoard at
    /// it (`tensorboard --logdir DIR`).
    #[arg(long, group = "to")]
    tensorboard: Option<PathBuf>,
    /// Write Cockpit's JSON log here (what the Python `CockpitPlotter` reads); from a run
    /// record one step at a time.
    #[arg(long, group = "to")]
    json: Option<PathBuf>,
    /// Write the JSON-lines stream here; from a run record one step at a time.
    #[arg(long, group = "to")]
    jsonl: Option<PathBuf>,
    /// The parameters' dotted names, comma-separated, in the order of the log's
    /// per-parameter lists (default: the names the log carries, else their indices).
    #[arg(long, value_delimiter = ',')]
    names: Vec<String>,
    /// Replace the event files already in the folder (without it, such a folder is refused:
    /// TensorBoard would show each step twice).
    #[arg(long)]
    replace: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The config file: `.toml` or `.json`.
    config: PathBuf,
}

#[derive(Debug, Args)]
struct PlotArgs {
    /// The log: Cockpit's JSON log, or the JSON-lines stream (`.jsonl`).
    log: PathBuf,
    /// The image to write, PNG or SVG by its extension.
    #[arg(short, long)]
    out: PathBuf,
    /// Draw the secondary screen (MeanGSNR, CABS, EarlyStopping, per-layer histograms).
    #[arg(long)]
    secondary: bool,
    /// Image size WIDTHxHEIGHT, from 600x300 up to 16384x16384 pixels.
    #[arg(long, default_value = "2400x1200", value_parser = parse_size)]
    size: (u32, u32),
    /// The title above the dashboard.
    #[arg(long, default_value = "Cockpit")]
    title: String,
    /// Redraw whenever the log changes (e.g. the stream of a running training).
    #[arg(long)]
    watch: bool,
    /// With --watch: how often to look at the log, in milliseconds (at least 10).
    #[arg(long, default_value_t = 500, requires = "watch", value_parser = clap::value_parser!(u64).range(10..))]
    interval_ms: u64,
    /// With --watch: stop after the log has been idle this many seconds.
    #[arg(long, requires = "watch", value_parser = parse_seconds)]
    idle_exit: Option<Duration>,
}

#[derive(Debug, Args)]
struct DiagnoseArgs {
    /// The log: Cockpit's JSON log, or the JSON-lines stream (`.jsonl`).
    log: PathBuf,
    /// Print the diagnosis as JSON (for CI gating).
    #[arg(long)]
    json: bool,
    /// The parameters' dotted names, comma-separated, in the order of the log's
    /// per-parameter lists (e.g. `fc1.weight,fc1.bias,fc2.weight,fc2.bias`; default: the
    /// names the log carries).
    #[arg(long, value_delimiter = ',')]
    names: Vec<String>,
    /// The classes of the run's cross-entropy loss (a language model's vocabulary): the first
    /// loss is then judged against chance level `ln C`, so a start near it is never called an
    /// exploding start and one far above it always is.
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    classes: Option<u64>,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The fixture recorded from the real Cockpit.
    fixture: PathBuf,
    /// The Cockpit-format log to write.
    #[arg(short, long)]
    out: PathBuf,
    /// Also stream every tracked step to this JSON-lines file.
    #[arg(long)]
    stream: Option<PathBuf>,
    /// Also track the fixture's non-default settings, under the fixture's keys.
    #[arg(long)]
    variants: bool,
    /// Start HessMaxEV from burn-cockpit's own seeded draws instead of the recorded start
    /// vectors.
    #[arg(long)]
    fresh_start: bool,
}

/// Why a command failed (exit status 2).
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Log(#[from] LogError),
    /// A run record could not be exported.
    #[error(transparent)]
    Export(#[from] cockpit_quantities::record::ExportError),
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error(transparent)]
    TensorBoard(#[from] cockpit_tensorboard::TensorBoardError),
    #[error(transparent)]
    Config(#[from] cockpit_quantities::CockpitError),
    #[error("`{}` holds no tracked step", .0.display())]
    EmptyLog(PathBuf),
    #[error(
        "--names gives {given} names but the log's per-parameter lists hold {expected} \
         parameters{}",
        if .logged.is_empty() { String::new() } else { format!(" (the log names them: {})", .logged.join(",")) }
    )]
    NamesMismatch {
        given: usize,
        expected: usize,
        logged: Vec<String>,
    },
    #[error(transparent)]
    Serve(#[from] cockpit_cli::serve::ServeError),
    #[error(
        "no per-example record beside `{}` (looked for `{}`): the run did not track the \
         Examples quantity. Add `QuantityKind::Examples` to the Cockpit's quantities and give \
         each batch's example ids (`Cockpit::step_with_ids`, `StepInfo::with_sample_ids`, or \
         `cockpit_train::train_output_with_ids` in the Learner); the record is written beside \
         the log",
        log.display(),
        table.display()
    )]
    NoExampleRecord { log: PathBuf, table: PathBuf },
}

impl From<cockpit_quantities::record::RecordError> for CliError {
    fn from(err: cockpit_quantities::record::RecordError) -> Self {
        Self::Log(err.into())
    }
}

/// `WIDTHxHEIGHT` within the dashboard's documented limits.
fn parse_size(size: &str) -> Result<(u32, u32), String> {
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .ok_or_else(|| format!("takes WIDTHxHEIGHT in pixels, not `{size}`"))?;
    let options = PlotOptions {
        width: w,
        height: h,
        ..PlotOptions::default()
    };
    options.check().map_err(|e| e.to_string())?;
    Ok((w, h))
}

/// Seconds, from 0 up to what a `Duration` holds (about 5.8e11 years).
fn parse_seconds(seconds: &str) -> Result<Duration, String> {
    seconds
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("takes seconds (≥ 0, at most 1.8e19), not `{seconds}`"))
}

/// Writes to standard output through [`cockpit_cli::console`]: a reader that went away
/// (`cockpit diagnose … | head -1`) is no error, and the exit status stays the command's.
macro_rules! say {
    ($($arg:tt)*) => {
        cockpit_cli::console::out(format_args!($($arg)*))
    };
}

macro_rules! sayln {
    ($($arg:tt)*) => {{
        say!($($arg)*);
        say!("\n");
    }};
}

/// Writes a line to standard error through [`cockpit_cli::console`] (a closed stream is no
/// panic).
macro_rules! tell {
    ($($arg:tt)*) => {{
        cockpit_cli::console::err(format_args!($($arg)*));
        cockpit_cli::console::err(format_args!("\n"));
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every file the command reads is read within this limit.
    let reader = Reader::with_limit(cli.max_input_bytes);
    let result = match cli.command {
        Command::Plot(args) => plot(args, &reader).map(|()| true),
        Command::Diagnose(args) => diagnose(args, &reader),
        Command::Replay(args) => replay_command(args, &reader).map(|()| true),
        Command::Check(args) => check(args).map(|()| true),
        Command::Export(args) => export(args, &reader).map(|()| true),
        Command::Serve(args) => serve(args, &reader).map(|()| true),
        Command::Examples(args) => examples(args, &reader).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            // The error and each of its causes, once.
            tell!("error: {}", ErrorChain(&err));
            ExitCode::from(2)
        }
    }
}

fn check(args: CheckArgs) -> Result<(), CliError> {
    let config = cockpit_quantities::CockpitConfig::from_file(&args.config)?;
    let quantities = config.quantities()?;
    cockpit_quantities::Cockpit::new(quantities)?;
    if let Some(preset) = config.configuration {
        sayln!("preset {} on {:?}", preset.label(), config.schedule);
    }
    for (key, kind) in config.keys() {
        let schedule = config
            .quantities
            .iter()
            .find(|q| q.output_key() == key)
            .and_then(|q| q.schedule.as_ref())
            .unwrap_or(&config.schedule);
        sayln!("{key:<24} {} on {schedule:?}", needs(kind));
    }
    sayln!("ok: {} valid", args.config.display());
    Ok(())
}

/// What a quantity needs, in words.
fn needs(kind: cockpit_quantities::QuantityKind) -> String {
    let needs = kind.spec().needs;
    let words: Vec<&str> = [
        (needs.per_sample, "per-sample gradients"),
        (needs.curvature, "curvature"),
        (needs.plain_sgd, "plain SGD"),
        (needs.next_step, "the next step"),
    ]
    .into_iter()
    .filter_map(|(needed, word)| needed.then_some(word))
    .collect();
    if words.is_empty() {
        "needs: parameters, gradient, loss".into()
    } else {
        format!("needs: {}", words.join(", "))
    }
}

fn read(reader: &Reader, log: &Path) -> Result<Output, CliError> {
    let output = cockpit_quantities::log::read_any_with(reader, log)?;
    if output.is_empty() {
        return Err(CliError::EmptyLog(log.to_path_buf()));
    }
    Ok(output)
}

fn serve(args: ServeArgs, reader: &Reader) -> Result<(), CliError> {
    let options = ServeOptions {
        address: args.bind,
        port: args.port,
        interval: Duration::from_millis(args.interval_ms),
        size: args.size,
        allowed_hosts: args.allow_host,
        reader: *reader,
        ..ServeOptions::new(args.log)
    };
    cockpit_cli::serve::run(options)?;
    Ok(())
}

/// The parameters' names: `--names` where given (refused when its length is not the log's
/// number of parameters), else the names the log carries (none for a Python-written log).
fn names(output: &Output, given: &[String]) -> Result<Vec<String>, CliError> {
    if given.is_empty() {
        return Ok(output.parameter_names().to_vec());
    }
    match output.parameter_count() {
        Some(expected) if expected != given.len() => Err(CliError::NamesMismatch {
            given: given.len(),
            expected,
            logged: output.parameter_names().to_vec(),
        }),
        _ => Ok(given.to_vec()),
    }
}

fn export(args: ExportArgs, reader: &Reader) -> Result<(), CliError> {
    use cockpit_quantities::record::{self, RecordReader};
    if !record::is_record(&args.log) {
        return export_log_file(args, reader);
    }
    // A record is exported one step at a time: memory does not grow with the run.
    let mut run = RecordReader::open(&args.log)?;
    if let Some(json) = &args.json {
        record::export_log(&mut run, json)?;
        sayln!(
            "wrote {} as a Cockpit JSON log to {}",
            args.log.display(),
            json.display()
        );
    }
    if let Some(jsonl) = &args.jsonl {
        record::export_stream(&mut run, jsonl)?;
        sayln!(
            "wrote {} as a JSON-lines stream to {}",
            args.log.display(),
            jsonl.display()
        );
    }
    let Some(tensorboard) = &args.tensorboard else {
        return Ok(());
    };
    // The names are checked against the first step with per-parameter values.
    let mut checked: Option<Vec<String>> = None;
    let mut steps = 0;
    let path = TensorBoardWriter::export_with(tensorboard, args.replace, |writer| {
        run.for_each_step(0, u64::MAX, |one| {
            if checked.is_none() && one.parameter_count().is_some() {
                checked = Some(names(one, &args.names)?);
            }
            let names = checked.as_deref().unwrap_or(&args.names);
            writer.write_output(one, names)?;
            steps += 1;
            Ok::<(), CliError>(())
        })
    })?;
    sayln!(
        "wrote {steps} steps of {} to {}",
        args.log.display(),
        path.display()
    );
    Ok(())
}

/// `cockpit export` of a JSON log or stream (read whole, as the viewers read it).
fn export_log_file(args: ExportArgs, reader: &Reader) -> Result<(), CliError> {
    let output = read(reader, &args.log)?;
    if let Some(json) = &args.json {
        cockpit_quantities::log::write_log(json, &output)?;
        sayln!("wrote {}", json.display());
    }
    if let Some(jsonl) = &args.jsonl {
        let mut stream = cockpit_quantities::log::JsonLinesWriter::create(jsonl)?;
        for step in output.steps().collect::<Vec<_>>() {
            let mut one = Output::new();
            if Some(step) == output.steps().next() {
                one.set_parameter_names(output.parameter_names().to_vec());
            }
            for (key, value) in output.at(step).into_iter().flatten() {
                one.insert(step, key.clone(), value.clone());
            }
            stream.append(step, &one)?;
        }
        sayln!("wrote {}", jsonl.display());
    }
    let Some(tensorboard) = &args.tensorboard else {
        return Ok(());
    };
    let names = names(&output, &args.names)?;
    let path = TensorBoardWriter::export(tensorboard, &output, &names, args.replace)?;
    let steps = output.steps().count();
    sayln!(
        "wrote {steps} steps of {} to {}",
        args.log.display(),
        path.display()
    );
    Ok(())
}

fn examples(args: ExamplesArgs, reader: &Reader) -> Result<(), CliError> {
    use cockpit_cli::examples;
    let table = examples::resolve(&args.log);
    if !table.exists() && table != args.log && args.log.is_file() {
        // A log without its table: the run never kept the record.
        return Err(CliError::NoExampleRecord {
            log: args.log,
            table,
        });
    }
    let (table, all) = examples::ranked(reader, &args.log, args.learned_loss)?;
    let total = all.len();
    if let Some(out) = &args.map {
        let rows: Vec<_> = all.iter().map(|r| r.stats.clone()).collect();
        let colour = match args.map_colour {
            MapColouring::Forgetting => cockpit_plot::MapColour::Forgetting,
            MapColouring::Suspicion => cockpit_plot::MapColour::Suspicion {
                learned_loss: args.learned_loss,
            },
        };
        let options = cockpit_plot::MapOptions {
            colour,
            ..cockpit_plot::MapOptions::default()
        };
        let drawn = cockpit_plot::save_map(out, &rows, &options)?;
        sayln!(
            "wrote {}: {} examples ({} easy-to-learn, {} ambiguous, {} hard-to-learn)",
            out.display(),
            drawn.drawn,
            drawn.regions[0],
            drawn.regions[1],
            drawn.regions[2]
        );
        if drawn.without_confidence > 0 {
            sayln!(
                "{} examples have no confidence (the run's loss gave no margins: the map needs \
                 a cross-entropy loss)",
                drawn.without_confidence
            );
        }
    }
    let mut ranked = examples::select(all, &args.kind);
    if args.top > 0 {
        ranked.truncate(args.top);
    }
    if args.json {
        sayln!("{}", examples::to_json(&ranked));
    } else {
        say!("{}", examples::report(&table, total, &ranked));
    }
    Ok(())
}

/// `Ok(true)` when nothing is flagged.
fn diagnose(args: DiagnoseArgs, reader: &Reader) -> Result<bool, CliError> {
    let output = read(reader, &args.log)?;
    let mut diagnoser = Diagnoser::new().with_names(&names(&output, &args.names)?);
    if let Some(classes) = args.classes {
        diagnoser = diagnoser.with_classes(usize::try_from(classes).unwrap_or(usize::MAX));
    }
    let diagnosis = diagnoser.run(&output);
    if args.json {
        sayln!("{}", diagnosis.to_json());
    } else {
        say!("{}", diagnosis.report());
    }
    Ok(!diagnosis.is_flagged())
}

fn plot(args: PlotArgs, reader: &Reader) -> Result<(), CliError> {
    let options = PlotOptions {
        width: args.size.0,
        height: args.size.1,
        screen: if args.secondary {
            Screen::Secondary
        } else {
            Screen::Primary
        },
        title: args.title,
    };
    if !args.watch {
        let rendered = cockpit_plot::plot_file_with(reader, &args.log, &args.out, &options)?;
        sayln!("wrote {}", args.out.display());
        if let Some(advice) = rendered.blank_advice() {
            sayln!("{advice}");
        }
        return Ok(());
    }
    let live = WatchOptions {
        interval: Duration::from_millis(args.interval_ms),
        idle_exit: args.idle_exit,
        reader: *reader,
    };
    sayln!("watching {} (Ctrl-C to stop)", args.log.display());
    let out = &args.out;
    cockpit_plot::watch(&args.log, out, &options, &live, |event| match event {
        WatchEvent::Drawn { steps, .. } => sayln!("drew {steps} steps into {}", out.display()),
        WatchEvent::Skipped(err) => {
            tell!("waiting for a readable log: {}", ErrorChain(err))
        }
    })?;
    Ok(())
}

fn replay_command(args: ReplayArgs, reader: &Reader) -> Result<(), CliError> {
    let fixture = Fixture::load_with(reader, &args.fixture)?;
    let options = ReplayOptions {
        stream: args.stream,
        variants: args.variants,
        recorded_start_vectors: !args.fresh_start,
        ..ReplayOptions::cpu_f64()
    };
    let run = replay(&fixture, &options)?;
    cockpit_quantities::log::write_log(&args.out, &run.output)?;
    for warning in &run.warnings {
        tell!("warning: {warning}");
    }
    for (quantity, reason) in &run.refused {
        tell!("note: {quantity} refused: {reason}");
    }
    if args.variants && !run.skipped_variants.is_empty() {
        tell!(
            "note: variants not computed yet: {}",
            run.skipped_variants.join(", ")
        );
    }
    let quantities: Vec<&str> = options.quantities.iter().map(|k| k.name()).collect();
    sayln!(
        "replayed {} steps of `{}` ({} loss, SGD lr {}) tracking {}; wrote {}",
        fixture.steps.len(),
        fixture.name.as_deref().unwrap_or("fixture"),
        match fixture.loss {
            LossKind::Mse => "MSE",
            LossKind::CrossEntropy => "cross-entropy",
        },
        fixture.optimizer.lr,
        quantities.join(", "),
        args.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes_are_checked_before_drawing() {
        assert_eq!(parse_size("1200x600"), Ok((1200, 600)));
        for bad in ["100000x100000", "599x300", "12x", "axb", "4294967296x10"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
