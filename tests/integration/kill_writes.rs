//! Files the project rewrites survive an interruption at any point: a child process rewrites
//! a Cockpit log and a dashboard PNG in a loop and is killed (`SIGKILL`) at varied moments;
//! every time, each file is the previous version or the new one, never cut.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use burn_cockpit::log::{read_log, write_log};
use burn_cockpit::plot::{PlotOptions, save};
use burn_cockpit::{Output, Value};

const TARGET: &str = "COCKPIT_KILL_TEST_DIR";

/// A log of `steps` steps, large enough that writing it takes a while.
fn output(steps: usize, seed: usize) -> Output {
    let mut output = Output::new();
    for step in 0..steps {
        let v = (step * 7 + seed) as f64 / 13.0;
        output.insert(step, "Loss", Value::Float(v));
        output.insert(step, "GradNorm", Value::List(vec![v; 16]));
        output.insert(step, "Alpha", Value::Float(v.sin()));
    }
    output
}

/// The child: rewrites the log and the dashboard until it is killed. A no-op when the test
/// binary runs normally (the variable is unset).
#[test]
fn writer_child() {
    let Ok(dir) = std::env::var(TARGET) else {
        return;
    };
    let dir = Path::new(&dir);
    let options = PlotOptions {
        width: 600,
        height: 300,
        ..PlotOptions::default()
    };
    for round in 0.. {
        write_log(dir.join("cockpit.json"), &output(400 + round % 3, round)).unwrap();
        save(&output(30, round), dir.join("dashboard.png"), &options).unwrap();
    }
}

fn png_is_whole(bytes: &[u8]) -> bool {
    const END: [u8; 12] = [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82];
    bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.ends_with(&END)
}

#[test]
fn killed_writers_leave_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let tries = 30;
    let mut checked = 0;
    for attempt in 0..tries {
        let mut child = Command::new(&exe)
            .args([
                "kill_writes::writer_child",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(TARGET, dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Varied moments: a different point of a write every time.
        let wait = 150 + (attempt * 37 % 23) * 11;
        std::thread::sleep(Duration::from_millis(wait as u64));
        child.kill().unwrap();
        child.wait().unwrap();
        let log = dir.path().join("cockpit.json");
        if log.exists() {
            let read = read_log(&log);
            assert!(read.is_ok(), "try {attempt}: a cut log: {:?}", read.err());
            checked += 1;
        }
        let png = dir.path().join("dashboard.png");
        if png.exists() {
            let bytes = std::fs::read(&png).unwrap();
            assert!(
                png_is_whole(&bytes),
                "try {attempt}: a cut PNG ({} bytes)",
                bytes.len()
            );
        }
    }
    assert!(
        checked >= tries / 2,
        "the child wrote too rarely to test anything: {checked}"
    );
}
