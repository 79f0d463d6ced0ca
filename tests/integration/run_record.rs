//! The run record: written as the run goes, read back exactly, exported byte for byte as the
//! JSON log, a resumed run equal to an uninterrupted one (in the loop, and after SIGKILL at
//! random steps in a child process), and the refusals (a second writer, another model, files
//! that are not records).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::tensor::Device;
use burn_cockpit::persample::Linear;
use burn_cockpit::record::{RecordError, RecordReader, RunRecord, export_log, export_stream};
use burn_cockpit::{Cockpit, CockpitError, Configuration, Output, Schedule};

#[path = "../../examples/common/long_run.rs"]
mod long_run;
use long_run::{LongRun, run};

/// The environment variable that turns [`child_run`] into a training run (the parent test
/// sets it and kills the process).
const CHILD: &str = "COCKPIT_TEST_LONG_RUN_CHILD";

/// `output` written into a fresh record and read back whole, with its JSON export checked
/// against the log `write_log` writes for the same values.
pub fn through_record(output: &Output) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    {
        let mut record = RunRecord::create(&path).unwrap();
        record
            .write_values(output, output.parameter_names())
            .unwrap();
        record.commit().unwrap();
    }
    let mut reader = RecordReader::open(&path).unwrap();
    let back = reader.read_all().unwrap();
    let exported = dir.path().join("exported.json");
    export_log(&mut reader, &exported).unwrap();
    let written = dir.path().join("written.json");
    burn_cockpit::log::write_log(&written, &back).unwrap();
    assert_eq!(
        std::fs::read_to_string(&exported).unwrap(),
        std::fs::read_to_string(&written).unwrap(),
        "the record's export is the JSON log of its values"
    );
    back
}

fn values(path: &Path) -> Output {
    RecordReader::open(path).unwrap().read_all().unwrap()
}

fn options(record: PathBuf, steps: usize, resume: bool) -> LongRun {
    LongRun {
        steps,
        record,
        resume,
        checkpoint_every: 10,
    }
}

#[test]
fn a_resumed_run_equals_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let whole = dir.path().join("whole.db");
    run(&options(whole.clone(), 40, false), &device, |_| {}).unwrap();
    // Stopped at its checkpoint of step 20, then extended to 33 (a checkpoint at 30, steps
    // 30..33 written), then resumed from 30 (those steps written again) to the end.
    let cut = dir.path().join("cut.db");
    run(&options(cut.clone(), 20, false), &device, |_| {}).unwrap();
    let extended = run(&options(cut.clone(), 33, true), &device, |_| {}).unwrap();
    assert_eq!(extended.from, 20);
    let resumed = run(&options(cut.clone(), 40, true), &device, |_| {}).unwrap();
    assert_eq!(resumed.from, 30);
    let (a, b) = (values(&whole), values(&cut));
    assert_eq!(a.steps().count(), 40);
    assert_eq!(a, b, "every value of every step, to the bit");
    // Distance is measured from the run's initial parameters: it keeps growing across the
    // resume instead of starting again from zero.
    let distance = |step| b.get(step, "Distance").unwrap().as_list().unwrap().to_vec();
    assert!(distance(21).iter().sum::<f64>() > distance(5).iter().sum::<f64>());
    // The exports of both records are the same files.
    let export = |path: &Path, name: &str| {
        let out = dir.path().join(name);
        export_stream(&mut RecordReader::open(path).unwrap(), &out).unwrap();
        std::fs::read(out).unwrap()
    };
    assert_eq!(export(&whole, "a.jsonl"), export(&cut, "b.jsonl"));
}

/// The training run a killed child process does (a no-op unless the parent set [`CHILD`]).
#[test]
fn child_run() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (path, steps, resume) = {
        let mut parts = spec.split('|');
        (
            PathBuf::from(parts.next().unwrap()),
            parts.next().unwrap().parse().unwrap(),
            parts.next() == Some("resume"),
        )
    };
    let progress = progress_path(&path);
    run(&options(path, steps, resume), &Device::flex(), |step| {
        let _ = std::fs::write(&progress, step.to_string());
    })
    .unwrap();
}

/// Where the child writes the last step it finished.
fn progress_path(record: &Path) -> PathBuf {
    record.with_extension("progress")
}

/// Starts the child run and kills it (SIGKILL) once its record reaches `kill_at`; `None` runs
/// it to its end.
fn child(path: &Path, steps: usize, resume: bool, kill_at: Option<u64>) {
    let spec = format!(
        "{}|{steps}|{}",
        path.display(),
        if resume { "resume" } else { "fresh" }
    );
    let _ = std::fs::remove_file(progress_path(path));
    let mut process = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "run_record::child_run",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, spec)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let Some(kill_at) = kill_at else {
        assert!(process.wait().unwrap().success(), "the child run failed");
        return;
    };
    let started = Instant::now();
    loop {
        if let Some(status) = process.try_wait().unwrap() {
            panic!("the child ended ({status}) before step {kill_at}");
        }
        let reached = std::fs::read_to_string(progress_path(path))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if reached.is_some_and(|last| last >= kill_at) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the child hangs"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    process.kill().unwrap(); // SIGKILL on Unix: no destructor, no commit, no flush
    process.wait().unwrap();
}

#[test]
fn killed_at_random_steps_and_resumed_the_record_is_the_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let steps = 70;
    let whole = dir.path().join("whole.db");
    run(
        &options(whole.clone(), steps, false),
        &Device::flex(),
        |_| {},
    )
    .unwrap();
    let killed = dir.path().join("killed.db");
    // Kill points from a fixed stream, each after the run's newest checkpoint.
    let mut rng = 0x9e37_79b9_u64;
    let mut draw = |lo: u64, hi: u64| {
        rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        lo + (rng >> 33) % (hi - lo)
    };
    let first = draw(12, 25);
    child(&killed, steps, false, Some(first));
    let second = draw(first.max(30) + 1, 45);
    child(&killed, steps, true, Some(second));
    let third = draw(second.max(50) + 1, 65);
    child(&killed, steps, true, Some(third));
    child(&killed, steps, true, None);
    assert_eq!(
        values(&whole),
        values(&killed),
        "killed at steps {first}, {second}, {third} and resumed"
    );
}

#[derive(Module, Debug)]
struct Other {
    layer: Linear,
}

#[test]
fn a_record_of_another_model_and_a_second_writer_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    run(&options(path.clone(), 12, false), &Device::flex(), |_| {}).unwrap();
    // Another model: named by its first difference.
    let device = Device::flex().autodiff();
    let other = Other {
        layer: Linear::new(&LinearConfig::new(3, 2), &device),
    };
    let cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())
        .unwrap()
        .with_console(false);
    let err = cockpit
        .resume(RunRecord::open(&path).unwrap(), 10, &other)
        .unwrap_err();
    assert!(
        matches!(err, CockpitError::Resume { step: 10, .. }),
        "{err}"
    );
    let chain = burn_cockpit::persample::ErrorChain(&err).to_string();
    assert!(chain.contains("layer.weight"), "{chain}");
    // A step without a saved state: the saved ones are named.
    let cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())
        .unwrap()
        .with_console(false);
    let err = cockpit
        .resume(RunRecord::open(&path).unwrap(), 7, &other)
        .unwrap_err();
    assert!(err.to_string().contains("saved: 10"), "{err}");
    // Other quantities than the stopped run's.
    let model = long_run::Mlp::new(&device);
    let fewer = Cockpit::from_kinds(
        [burn_cockpit::quantity::QuantityKind::Loss],
        &Schedule::every_step(),
    )
    .unwrap();
    let err = fewer
        .resume(RunRecord::open(&path).unwrap(), 10, &model)
        .unwrap_err();
    let chain = burn_cockpit::persample::ErrorChain(&err).to_string();
    assert!(chain.contains("Alpha"), "{chain}");
    // A second writer while the first holds the record.
    let first = RunRecord::open(&path).unwrap();
    assert!(matches!(
        RunRecord::open(&path),
        Err(RecordError::Busy { .. })
    ));
    assert!(matches!(
        RunRecord::create(&path),
        Err(RecordError::Busy { .. })
    ));
    drop(first);
    assert!(path.exists(), "a refused writer removes nothing");
    RunRecord::open(&path).unwrap();
}

#[test]
fn files_that_are_not_records_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    // A JSON log is not a record.
    let json = dir.path().join("run.json");
    std::fs::write(&json, "{}").unwrap();
    assert!(matches!(
        RecordReader::open(&json),
        Err(RecordError::NotARecord { .. })
    ));
    // Another SQLite database.
    let other = dir.path().join("other.db");
    {
        let record = RunRecord::create(&other).unwrap();
        drop(record);
    }
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute_batch("DROP TABLE vals").unwrap();
    drop(conn);
    let err = RecordReader::open(&other).unwrap_err();
    assert!(err.to_string().contains("no `vals` table"), "{err}");
    // A record cut short on disk: an error, never a panic or a hang.
    let path = dir.path().join("cut.db");
    run(&options(path.clone(), 12, false), &Device::flex(), |_| {}).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for keep in [100, bytes.len() / 2] {
        let cut = dir.path().join(format!("cut-{keep}.db"));
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        let read = RecordReader::open(&cut).and_then(|mut r| r.read_all());
        assert!(read.is_err(), "a record cut at {keep} bytes read as whole");
    }
    // The viewers name the problem too.
    let err = burn_cockpit::log::read_any(&other).unwrap_err();
    assert!(err.to_string().contains("not a run record"), "{err}");
}

#[test]
fn an_overview_keeps_every_spike_and_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.db");
    let steps = 20_000;
    let spike = 13_337;
    {
        let mut record = RunRecord::create(&path).unwrap();
        let mut chunk = Output::new();
        for step in 0..steps {
            let loss = if step == spike {
                50.0
            } else {
                1.0 / (1.0 + step as f64)
            };
            chunk.insert(step, "Loss", burn_cockpit::Value::Float(loss));
            chunk.insert(step, "GradNorm", burn_cockpit::Value::List(vec![0.5, 0.25]));
            if chunk.steps().count() == 1000 {
                record.write_values(&chunk, &[]).unwrap();
                chunk = Output::new();
            }
        }
        record.write_values(&chunk, &[]).unwrap();
    }
    let overview = RecordReader::open(&path)
        .unwrap()
        .read_overview(500)
        .unwrap();
    let kept = overview.series("Loss");
    assert!(kept.len() <= 3 * 500, "{} steps kept", kept.len());
    assert!(
        kept.iter()
            .any(|(s, v)| *s == spike && v.as_f64() == Some(50.0)),
        "the spike at step {spike} is in the overview"
    );
    assert_eq!(kept.last().map(|(s, _)| *s), Some(steps - 1));
    // A short record is read whole.
    assert_eq!(
        RecordReader::open(&path)
            .unwrap()
            .read_overview(steps)
            .unwrap()
            .series("Loss")
            .len(),
        steps
    );
}

/// Memory after warm-up does not grow with the steps when the values go to a record.
#[test]
fn a_recorded_run_keeps_no_history_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex().autodiff();
    let model = long_run::Mlp::new(&device);
    let kinds = [
        burn_cockpit::quantity::QuantityKind::Loss,
        burn_cockpit::quantity::QuantityKind::GradNorm,
        burn_cockpit::quantity::QuantityKind::Distance,
    ];
    let mut cockpit = Cockpit::from_kinds(kinds, &Schedule::every_step())
        .unwrap()
        .with_console(false)
        .with_record(RunRecord::create(dir.path().join("run.db")).unwrap());
    for step in 0..50 {
        let (x, y) = long_run::batch(step, &device);
        let forward = move |m: &long_run::Mlp| m.forward(x.clone());
        cockpit
            .step(
                &model,
                forward,
                burn_cockpit::curvature::OutputLoss::classes(y, 10),
            )
            .unwrap();
    }
    // Only the names stay in the output; the latest call's values in `latest`.
    assert!(cockpit.output().is_empty());
    assert_eq!(cockpit.output().parameter_names().len(), 4);
    assert_eq!(cockpit.latest().steps().collect::<Vec<_>>(), vec![49]);
    drop(cockpit);
    assert_eq!(values(&dir.path().join("run.db")).steps().count(), 50);
}

/// The environment variable that turns [`flat_memory_child`] into the measurement (the parent
/// test sets it to the record's path and reads the child's output).
const MEMORY_CHILD: &str = "COCKPIT_TEST_FLAT_MEMORY_CHILD";

/// Steps of the memory measurement, and the step after which the warm-up is over.
const MEMORY_STEPS: usize = 10_000;
const MEMORY_WARM: usize = 1_000;

/// A model small enough for 10⁴ tracked steps in a debug test.
#[derive(Module, Debug)]
struct Tiny {
    layer: Linear,
}

/// 10⁴ steps of `economy` on a tiny model, every step, into a record; prints the resident set
/// after the warm-up and at the end (a no-op unless the parent set [`MEMORY_CHILD`]).
#[test]
fn flat_memory_child() {
    let Ok(path) = std::env::var(MEMORY_CHILD) else {
        return;
    };
    let device = Device::flex().autodiff();
    let mut model = Tiny {
        layer: Linear::new(&LinearConfig::new(4, 3), &device),
    };
    let mut optimizer = burn::optim::SgdConfig::new().init();
    let mut cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())
        .unwrap()
        .with_console(false)
        .with_record(RunRecord::create(&path).unwrap());
    for step in 0..MEMORY_STEPS {
        let (x, y) = {
            let x: Vec<f32> = (0..8 * 4)
                .map(|i| (((i + step) * 37 % 23) as f32 - 11.0) / 11.0)
                .collect();
            let y: Vec<i64> = (0..8).map(|i| ((i + step) % 3) as i64).collect();
            (
                burn::tensor::Tensor::<2>::from_data(
                    burn::tensor::TensorData::new(x, [8, 4]),
                    &device,
                ),
                burn::tensor::Tensor::<1, burn::tensor::Int>::from_data(
                    burn::tensor::TensorData::new(y, [8]),
                    &device,
                ),
            )
        };
        let forward = move |m: &Tiny| m.layer.forward(x.clone());
        let stepped = cockpit
            .step(
                &model,
                forward,
                burn_cockpit::curvature::OutputLoss::classes(y, 3),
            )
            .unwrap();
        model = optimizer.step(0.05, model, stepped.grads);
        if step + 1 == MEMORY_WARM {
            println!("rss_mb warm {:.3}", long_run::rss_mb());
        }
    }
    cockpit.flush().unwrap();
    println!("rss_mb end {:.3}", long_run::rss_mb());
}

/// Memory after warm-up stays flat over 10⁴ recorded steps of `economy` (measured in a process
/// of its own, so no other test's allocations count): within 4 MB. Measured in debug: +2.0 MB
/// (SQLite's page cache filling to its 2 MB bound); the same run without a record, which
/// keeps its history in memory, grew by 32 MB and fails here.
#[test]
fn memory_stays_flat_over_ten_thousand_recorded_steps() {
    if !Path::new("/proc/self/status").exists() {
        eprintln!("skipped: the resident set is read from /proc (Linux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flat.db");
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "run_record::flat_memory_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MEMORY_CHILD, &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |label: &str| -> f64 {
        text.lines()
            .find_map(|l| l.split_once(label).map(|(_, value)| value))
            .unwrap_or_else(|| panic!("no `{label}` in {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let (warm, end) = (read("rss_mb warm"), read("rss_mb end"));
    println!("rss_mb warm {warm:.1}, end {end:.1} after {MEMORY_STEPS} steps");
    assert!(
        end - warm <= 4.0,
        "memory grew by {:.1} MB over {} steps after warm-up",
        end - warm,
        MEMORY_STEPS - MEMORY_WARM
    );
    assert_eq!(values(&path).steps().count(), MEMORY_STEPS);
}

/// The per-example record goes on across a resume: a run stopped after its checkpoint at
/// step 6 and resumed there ends with the Examples record (every example's visits, means,
/// trends, forgetting events) and the values of the run never stopped.
#[test]
fn the_examples_record_goes_on_across_a_resume() {
    use burn::tensor::{Int, Tensor, TensorData};
    use burn_cockpit::curvature::OutputLoss;
    use burn_cockpit::quantity::QuantityKind;
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex().autodiff();
    let new_cockpit = |path: &Path, resume_at: Option<usize>, model: &Tiny| {
        let cockpit = Cockpit::from_kinds(
            [QuantityKind::Loss, QuantityKind::Examples],
            &Schedule::every_step(),
        )
        .unwrap()
        .with_console(false);
        match resume_at {
            None => cockpit.with_record(RunRecord::create(path).unwrap()),
            Some(step) => cockpit
                .resume(RunRecord::open(path).unwrap(), step, model)
                .unwrap(),
        }
    };
    // Steps `from..to` of SGD on a fixed data set of 12 examples, 4 a batch, from `model`.
    let train = |cockpit: &mut Cockpit, mut model: Tiny, from: usize, to: usize| {
        let mut optimizer = burn::optim::SgdConfig::new().init();
        for step in from..to {
            let ids: Vec<u64> = (0..4).map(|i| ((step * 4 + i) % 12) as u64).collect();
            let x: Vec<f32> = ids
                .iter()
                .flat_map(|&id| (0..4).map(move |j| ((id * 7 + j) % 5) as f32 / 2.0 - 1.0))
                .collect();
            let y: Vec<i64> = ids.iter().map(|&id| (id % 3) as i64).collect();
            let x = Tensor::<2>::from_data(TensorData::new(x, [4, 4]), &device);
            let y = Tensor::<1, Int>::from_data(TensorData::new(y, [4]), &device);
            let forward = move |m: &Tiny| m.layer.forward(x.clone());
            let stepped = cockpit
                .step_with_ids(&model, forward, OutputLoss::classes(y, 3), ids)
                .unwrap();
            model = optimizer.step(0.5, model, stepped.grads);
        }
        model
    };
    let start = || Tiny {
        layer: Linear::new(&LinearConfig::new(4, 3), &device),
    };
    let first = start();
    let whole_path = dir.path().join("whole.db");
    let mut whole = new_cockpit(&whole_path, None, &first);
    train(&mut whole, first.clone(), 0, 12);
    whole.flush().unwrap();

    let cut_path = dir.path().join("cut.db");
    let mut cut = new_cockpit(&cut_path, None, &first);
    let at_six = train(&mut cut, first, 0, 6);
    cut.checkpoint().unwrap();
    // Two more steps, lost to the "crash", then a resume at 6.
    train(&mut cut, at_six.clone(), 6, 8);
    drop(cut);
    let mut resumed = new_cockpit(&cut_path, Some(6), &at_six);
    train(&mut resumed, at_six, 6, 12);
    resumed.flush().unwrap();

    let rows = |c: &Cockpit| format!("{:?}", c.examples().unwrap().rows());
    assert_eq!(whole.examples().unwrap().len(), 12);
    assert_eq!(rows(&whole), rows(&resumed));
    drop((whole, resumed));
    assert_eq!(values(&whole_path), values(&cut_path));
}
