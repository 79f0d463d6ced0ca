//! The `cockpit` binary end to end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(format!("{name}.json"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cockpit-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn replay_writes_a_cockpit_log_and_a_stream() {
    let dir = scratch("ok");
    let out = dir.join("log.json");
    let status = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .args(["replay"])
        .arg(fixture("mlp_mse"))
        .arg("--out")
        .arg(&out)
        .arg("--stream")
        .arg(dir.join("log.jsonl"))
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("replayed 8 steps"), "{stdout}");
    let log = cockpit_quantities::log::read_log(&out).unwrap();
    assert_eq!(log.steps().count(), 8);
    assert_eq!(
        cockpit_quantities::log::read_stream(dir.join("log.jsonl")).unwrap(),
        log
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_gives_a_clear_error_and_exit_status_2() {
    let dir = scratch("bad");
    let truncated = dir.join("truncated.json");
    let text = std::fs::read_to_string(fixture("mlp_ce")).unwrap();
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let mismatched = dir.join("mismatched.json");
    std::fs::write(&mismatched, text.replacen("\"in\":6", "\"in\":7", 1)).unwrap();
    let cases: [(Vec<PathBuf>, &str); 4] = [
        (
            vec![truncated, "--out".into(), dir.join("a.json")],
            "malformed fixture",
        ),
        (
            vec![mismatched, "--out".into(), dir.join("b.json")],
            "shape",
        ),
        (
            vec![dir.join("absent.json"), "--out".into(), dir.join("c.json")],
            "cannot read",
        ),
        (
            vec![
                fixture("mlp_ce"),
                "--out".into(),
                dir.join("no/such/dir/d.json"),
            ],
            "cannot write",
        ),
    ];
    for (args, expected) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("replay")
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let usage = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .arg("replay")
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn plot_draws_png_and_svg_and_reports_bad_input() {
    let dir = scratch("plot");
    let cockpit = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("plot")
            .args(args)
            .output()
            .unwrap()
    };
    let log = fixture("cockpit_write_example");
    for (file, secondary) in [("d.png", false), ("d.svg", false), ("s.png", true)] {
        let out = dir.join(file);
        let mut args = vec![
            log.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--size".as_ref(),
            "1200x600".as_ref(),
        ];
        if secondary {
            args.push("--secondary".as_ref());
        }
        let run = cockpit(&args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(std::fs::metadata(&out).unwrap().len() > 10_000, "{file}");
    }
    // Missing data is listed by the quantity to add: the Python example has no CABS /
    // EarlyStopping.
    let run = cockpit(&[
        log.as_os_str(),
        "-o".as_ref(),
        dir.join("t.png").as_os_str(),
        "--secondary".as_ref(),
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("left blank")
            && stdout.contains("add to the Cockpit: ")
            && stdout.contains("CABS")
            && !stdout.contains("cabs_gauge")
            && !stdout.contains("its quantity"),
        "{stdout}"
    );

    for (content, what) in [
        ("", "empty"),
        ("{\"0\": {\"Loss\": 1.0", "truncated"),
        ("[1, 2]", "not a log"),
    ] {
        let bad = dir.join(format!("{}.json", what.replace(' ', "_")));
        std::fs::write(&bad, content).unwrap();
        let run = cockpit(&[
            bad.as_os_str(),
            "-o".as_ref(),
            dir.join("x.png").as_os_str(),
        ]);
        assert_eq!(run.status.code(), Some(2), "{what}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.starts_with("error:") && stderr.contains(".json"),
            "{what}: {stderr}"
        );
    }
    let run = cockpit(&[
        log.as_os_str(),
        "-o".as_ref(),
        dir.join("x.bmp").as_os_str(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains(".png or .svg"));
    let run = cockpit(&[log.as_os_str()]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--out"));
    // Sizes are checked before anything is allocated: a typed error, not an overflow.
    let run = cockpit(&[
        log.as_os_str(),
        "-o".as_ref(),
        dir.join("huge.png").as_os_str(),
        "--size".as_ref(),
        "100000x100000".as_ref(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("16384x16384") && !stderr.contains("panicked"),
        "{stderr}"
    );
    // --help per subcommand and --version.
    for args in [
        &["plot", "--help"][..],
        &["diagnose", "--help"],
        &["replay", "--help"],
        &["--version"],
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .args(args)
            .output()
            .unwrap();
        assert!(run.status.success(), "{args:?}");
        assert!(!run.stdout.is_empty(), "{args:?}");
    }
}

/// `cockpit check` accepts a good config and lists it; refuses bad settings and unreadable
/// files with exit status 2 and a message naming the problem.
#[test]
fn check_validates_config_files() {
    let dir = scratch("check");
    let run = |path: &PathBuf| {
        Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("check")
            .arg(path)
            .output()
            .unwrap()
    };
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "configuration = \"business\"\nschedule = \"linear(8)\"\n[[quantity]]\nclass = \"GradHist1d\"\nkwargs = { bins = 30 }\n",
    )
    .unwrap();
    let out = run(&good);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("HessTrace") && stdout.contains("curvature"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("GradHist1d").count(), 1, "{stdout}");

    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"quantity": [{"class": "GradHist1d", "kwargs": {"range": [2, -2]}}]}"#,
    )
    .unwrap();
    for (path, expected) in [(bad, "lo < hi"), (dir.join("missing.toml"), "missing.toml")] {
        let out = run(&path);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn refs(args: &[std::ffi::OsString]) -> Vec<&std::ffi::OsStr> {
    args.iter().map(|a| a.as_os_str()).collect()
}

/// Runs `cockpit` with `args`; panics if it takes longer than `secs` (a hang).
fn run_within(secs: u64, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() > secs {
            child.kill().ok();
            panic!("`cockpit {args:?}` still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The inputs issue 22 found crashing or hanging the command: each ends with 0 or a clear
/// error and status 2, never a panic (101) or a hang.
#[test]
fn no_input_panics_or_hangs_the_command() {
    let dir = scratch("robust");
    let extreme = dir.join("extreme.json");
    std::fs::write(&extreme, r#"{"0": {"Loss": 1.7e308}, "1": {"Loss": 0}}"#).unwrap();
    let png = dir.join("out.png");
    let os = |s: &str| std::ffi::OsString::from(s);
    let plot = |extra: &[&str]| {
        let mut args = vec![
            os("plot"),
            extreme.clone().into_os_string(),
            os("-o"),
            png.clone().into_os_string(),
        ];
        args.extend(extra.iter().map(|s| os(s)));
        args
    };
    for extra in [&[][..], &["--size", "16384x301"][..]] {
        let args = plot(extra);
        let out = run_within(120, &refs(&args));
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let args = plot(&["--watch", "--idle-exit", "1e300"]);
    let out = run_within(60, &refs(&args));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // --watch on a log that never appears says so (status 2).
    let args = vec![
        os("plot"),
        dir.join("never.jsonl").into_os_string(),
        os("-o"),
        png.clone().into_os_string(),
        os("--watch"),
        os("--interval-ms"),
        os("50"),
        os("--idle-exit"),
        os("0.3"),
    ];
    let out = run_within(60, &refs(&args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did not appear"), "{stderr}");

    // A folder that does not exist: a sentence, not a backend's debug output.
    let args = vec![
        os("plot"),
        extreme.clone().into_os_string(),
        os("-o"),
        dir.join("no/such/out.png").into_os_string(),
    ];
    let out = run_within(60, &refs(&args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("folder does not exist") && !stderr.contains("Os {"),
        "{stderr}"
    );

    // Two watchers of one image each finish cleanly (their temporary files are their own).
    let watchers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_cockpit"))
                .args(refs(&plot(&[
                    "--watch",
                    "--interval-ms",
                    "20",
                    "--idle-exit",
                    "1",
                ])))
                .output()
        })
        .collect();
    for watcher in watchers {
        let watcher = watcher.unwrap();
        assert!(
            watcher.status.success(),
            "{}",
            String::from_utf8_lossy(&watcher.stderr)
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Settings `check` used to accept and training then aborted or hung on.
    for (name, text) in [
        (
            "bins.toml",
            "[[quantity]]\nclass = \"GradHist1d\"\nkwargs = { bins = 1000000000000 }",
        ),
        (
            "bins2d.toml",
            "[[quantity]]\nclass = \"GradHist2d\"\nkwargs = { bins = [100000, 100000] }",
        ),
        (
            "log.toml",
            "schedule = \"logarithmic(0, 3, 1000000000000)\"\nconfiguration = \"economy\"",
        ),
        (
            "linear.toml",
            "schedule = \"linear(99999999999999999999999)\"\nconfiguration = \"economy\"",
        ),
        (
            "key.toml",
            "[[quantity]]\nclass = \"HessTrace\"\nkey = \"\"",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let args = [os("check"), path.into_os_string()];
        let out = run_within(30, &refs(&args));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `cockpit diagnose … | head -1`: a reader that goes away ends the command quietly with the
/// status it decided (1: something flagged), not a broken-pipe panic (101).
#[test]
fn diagnose_into_a_closed_pipe_keeps_its_exit_status() {
    let dir = scratch("pipe");
    let log = dir.join("sick.json");
    let mut text = String::from("{");
    for step in 0..40 {
        let loss = if step % 2 == 0 { 1.0 } else { 9.0 } * (1.0 + step as f64);
        text.push_str(&format!(
            "\"{step}\": {{\"Loss\": {loss}, \"Alpha\": 1.5, \"GradNorm\": [1e-9, {loss}]}}{}",
            if step < 39 { ", " } else { "" }
        ));
    }
    text.push('}');
    std::fs::write(&log, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .arg("diagnose")
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before the first line
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `cockpit export` writes one event file for the Python Cockpit's log (its values are
/// checked record by record in the workspace's `tests/integration/tensorboard.rs`); a log that
/// is not there is an error with exit status 2 and no file.
#[test]
fn export_writes_a_tensorboard_event_file() {
    let dir = scratch("export");
    let events = dir.join("tensorboard");
    let status = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .args(["export"])
        .arg(fixture("cockpit_write_example"))
        .arg("--tensorboard")
        .arg(&events)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.starts_with("wrote "), "{stdout}");
    let files: Vec<_> = std::fs::read_dir(&events)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    assert!(files[0].to_string_lossy().contains("tfevents"));
    assert!(std::fs::metadata(&files[0]).unwrap().len() > 1000);

    // A second export into the same folder is refused (TensorBoard would show each step
    // twice), unless asked to replace; then one event file remains.
    let again = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .args(["export"])
            .arg(fixture("cockpit_write_example"))
            .arg("--tensorboard")
            .arg(&events)
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = again(&[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--replace"));
    let replaced = again(&["--replace"]);
    assert!(
        replaced.status.success(),
        "{}",
        String::from_utf8_lossy(&replaced.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(&events)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().contains("tfevents"));

    let missing = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .args(["export", "no-such-log.json", "--tensorboard"])
        .arg(dir.join("other"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no-such-log.json"));
    assert!(!dir.join("other").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every subcommand writing to a closed standard error (`cockpit … 2>&1 | true`) and closed
/// standard output ends with the status it decided — 2 for these failing runs, 1 for a
/// diagnosis that flags something — never a broken-pipe panic (101); `serve` keeps serving
/// with both closed (it prints its address first).
#[test]
fn closed_output_streams_never_panic() {
    let dir = scratch("closed");
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let sick = dir.join("sick.json");
    let steps: Vec<String> = (0..20)
        .map(|s| {
            format!(
                "\"{s}\": {{\"Loss\": {}}}",
                if s % 2 == 0 { 1.0 } else { 9.0 }
            )
        })
        .collect();
    std::fs::write(&sick, format!("{{{}}}", steps.join(", "))).unwrap();
    let missing = dir.join("missing.json");
    let closed = || {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        writer
    };
    let cases: [(Vec<std::ffi::OsString>, i32); 6] = [
        (vec!["diagnose".into(), empty.clone().into()], 2),
        (vec!["diagnose".into(), sick.clone().into()], 1),
        (vec!["check".into(), missing.clone().into()], 2),
        (
            vec![
                "plot".into(),
                missing.clone().into(),
                "--out".into(),
                dir.join("a.png").into(),
            ],
            2,
        ),
        (
            vec![
                "export".into(),
                missing.clone().into(),
                "--tensorboard".into(),
                dir.join("tb").into(),
            ],
            2,
        ),
        (
            vec![
                "replay".into(),
                missing.clone().into(),
                "--out".into(),
                dir.join("r.json").into(),
            ],
            2,
        ),
    ];
    for (args, expected) in cases {
        let status = Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .args(&args)
            .stdout(closed())
            .stderr(closed())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(expected), "cockpit {args:?}");
    }
    let mut serve = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .arg("serve")
        .arg(&sick)
        .args(["--port", "0"])
        .stdout(closed())
        .stderr(closed())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let early = serve.try_wait().unwrap();
    serve.kill().ok();
    serve.wait().ok();
    assert_eq!(early, None, "serve exited with both streams closed");
    std::fs::remove_dir_all(&dir).ok();
}

/// Endless inputs are refused at the readers' limits, quickly and with exit status 2, not
/// read until memory runs out.
#[cfg(unix)]
#[test]
fn endless_inputs_are_refused_at_the_limit() {
    let dir = scratch("endless");
    let started = std::time::Instant::now();
    for args in [
        vec!["check".to_string(), "/dev/zero".into()],
        vec!["diagnose".into(), "/dev/zero".into()],
        vec![
            "export".into(),
            "/dev/zero".into(),
            "--tensorboard".into(),
            dir.join("tb").display().to_string(),
        ],
        vec![
            "plot".into(),
            "/dev/zero".into(),
            "-o".into(),
            dir.join("x.png").display().to_string(),
        ],
    ] {
        // A small limit keeps the test's memory small; the default (1 GiB) is the same code.
        let run = Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .args(["--max-input-bytes", "1000000"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("larger than"), "{args:?}: {stderr}");
        assert!(stderr.len() < 1000, "{args:?}: a short message");
    }
    assert!(!dir.join("tb").exists() || std::fs::read_dir(dir.join("tb")).unwrap().count() == 0);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An export that fails midway (the file-size limit stands in for a full disk: writes fail
/// with EFBIG) leaves no event file behind, not a partial one.
#[cfg(unix)]
#[test]
fn a_failed_export_leaves_no_event_file() {
    let dir = scratch("export-fails");
    let events = dir.join("tensorboard");
    std::fs::create_dir_all(&events).unwrap();
    let script = format!(
        "trap '' XFSZ; ulimit -f 2; exec {} export {} --tensorboard {}",
        env!("CARGO_BIN_EXE_cockpit"),
        fixture("cockpit_write_example").display(),
        events.display()
    );
    let run = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_eq!(
        run.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(&events)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn examples_of_a_run_without_the_record_says_what_to_add() {
    let output = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .arg("examples")
        .arg(fixture("mlp_ce"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for words in [
        "QuantityKind::Examples",
        "step_with_ids",
        "mlp_ce.examples.csv",
    ] {
        assert!(stderr.contains(words), "{words}: {stderr}");
    }
    // A path that names nothing is still a file that cannot be read.
    let output = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .arg("examples")
        .arg(fixture("no_such_run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("QuantityKind::Examples"), "{stderr}");
}

/// `cockpit examples --map`: the data map of a record written as a PNG, with the regions
/// counted; a record without margins (not a cross-entropy) says why nothing is placed.
#[test]
fn examples_draws_the_data_map() {
    use cockpit_quantities::examples::{ExampleRecord, Visit, write_table};
    let dir = tempfile::tempdir().unwrap();
    for (margins, name) in [(true, "ce"), (false, "mse")] {
        let mut record = ExampleRecord::new(32, std::f64::consts::LN_2);
        for step in 0..5 {
            let visits: Vec<Visit> = (0..30)
                .map(|id| Visit {
                    id,
                    step,
                    loss: 0.05 * id as f64 * (1.0 + (step % 2) as f64),
                    grad_norm: 1.0,
                    relative_share: 1.0,
                    margin: margins.then_some(1.0 - 0.05 * id as f64),
                    worst: None,
                })
                .collect();
            record.fold(&visits);
        }
        let table = dir.path().join(format!("{name}.examples.csv"));
        write_table(&table, &record).unwrap();
        let map = dir.path().join(format!("{name}.map.png"));
        let output = Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("examples")
            .arg(&table)
            .arg("--map")
            .arg(&map)
            .args(["--map-colour", "suspicion"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(std::fs::read(&map).unwrap().starts_with(b"\x89PNG"));
        if margins {
            assert!(stdout.contains("30 examples ("), "{stdout}");
            assert!(stdout.contains("hard-to-learn)"), "{stdout}");
        } else {
            assert!(
                stdout.contains("30 examples have no confidence"),
                "{stdout}"
            );
        }
    }
}

/// The events of a TensorBoard file, each without its wall time (field 1, a double, first in
/// every event we write): the framing is read (length, its CRC, data, the data's CRC).
fn events_without_time(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let mut events = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let data = &bytes[at + 12..at + 12 + len];
        let data = match data.first() {
            Some(0x09) => &data[9..],
            _ => data,
        };
        events.push(data.to_vec());
        at += 12 + len + 4;
    }
    events
}

/// `cockpit export RUN.db --tensorboard` reads the record one step at a time and writes the
/// events the same values give when exported from a JSON log (the Python Cockpit's log,
/// written into a record here), event for event but for the wall times.
#[test]
fn a_record_exports_to_tensorboard_as_its_log_does() {
    use cockpit_quantities::log::read_log;
    use cockpit_quantities::record::RunRecord;
    let dir = scratch("export-record");
    let log = fixture("cockpit_write_example");
    let output = read_log(&log).unwrap();
    let run = dir.join("run.db");
    {
        let mut record = RunRecord::create(&run).unwrap();
        record
            .write_values(&output, output.parameter_names())
            .unwrap();
        record.commit().unwrap();
    }
    let export = |source: &std::path::Path, into: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("export")
            .arg(source)
            .arg("--tensorboard")
            .arg(dir.join(into))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        events_without_time(&dir.join(into))
    };
    let (from_log, from_record) = (export(&log, "from-log"), export(&run, "from-record"));
    assert!(from_log.len() > 2, "{} events", from_log.len());
    assert_eq!(from_log, from_record);
    let _ = std::fs::remove_dir_all(&dir);
}
