//! `cockpit diagnose` on synthetic logs built to show each pattern, and on a healthy run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use cockpit_cli::diagnose::Diagnoser;
use cockpit_quantities::{Output, Value};

/// A healthy run of `n` steps: falling loss, α around 0, steady gradient and update sizes,
/// gradient tests below their limits, flat curvature.
fn healthy(n: usize) -> Output {
    let mut out = Output::new();
    for s in 0..n {
        let t = s as f64;
        out.insert(s, "Loss", Value::Float(2.0 / (1.0 + 0.05 * t)));
        out.insert(s, "Alpha", Value::Float(0.3 * (t * 0.7).sin()));
        out.insert(
            s,
            "GradNorm",
            Value::List(vec![0.5 + 0.05 * (t * 0.3).cos(), 0.2, 0.3]),
        );
        out.insert(s, "UpdateSize", Value::List(vec![0.01, 0.004, 0.006]));
        out.insert(
            s,
            "Distance",
            Value::List(vec![0.01 * t, 0.004 * t, 0.006 * t]),
        );
        out.insert(s, "NormTest", Value::Float(0.6));
        out.insert(s, "InnerTest", Value::Float(0.4));
        out.insert(s, "OrthoTest", Value::Float(0.5));
        out.insert(s, "HessMaxEV", Value::Float(1.0 + 0.01 * t));
    }
    out
}

fn codes(out: &Output, names: &[String]) -> Vec<&'static str> {
    Diagnoser::new()
        .with_names(names)
        .run(out)
        .codes()
        .into_iter()
        .map(|c| c.as_str())
        .collect()
}

#[test]
fn a_healthy_run_flags_nothing() {
    assert_eq!(codes(&healthy(100), &[]), Vec::<&str>::new());
}

#[test]
fn each_pattern_is_flagged_with_evidence() {
    let n = 100;
    let set = |out: &mut Output, key: &str, f: &dyn Fn(usize) -> Value| {
        for s in 0..n {
            out.insert(s, key, f(s));
        }
    };
    let falling = |s: usize| 2.0 / (1.0 + 0.05 * s as f64);
    // A loss that falls by a third: progress, but not a run that learned (threefold).
    let slow = |s: usize| 1.2 + 0.8 * (-(s as f64) / 20.0).exp();
    type Mutation<'a> = Box<dyn Fn(&mut Output) + 'a>;
    let names: Vec<String> = ["fc1.weight", "fc1.bias", "fc2.weight"]
        .map(String::from)
        .to_vec();
    let cases: Vec<(Vec<&str>, Mutation<'_>)> = vec![
        (
            vec!["step-too-large", "loss-not-decreasing"],
            Box::new(move |o: &mut Output| {
                set(o, "Loss", &|s| {
                    Value::Float(if s >= 10 {
                        5.0 * falling(s)
                    } else {
                        falling(s)
                    })
                });
                set(o, "Alpha", &|s| {
                    Value::Float(if s % 2 == 0 { 1.5 } else { 0.2 })
                });
            }),
        ),
        (
            vec!["step-too-small", "loss-not-decreasing"],
            Box::new(move |o: &mut Output| {
                set(o, "Alpha", &|_| Value::Float(-0.9));
                set(o, "Loss", &|s| Value::Float(1.5 + 0.01 * ((s % 3) as f64)));
            }),
        ),
        (
            vec!["exploding-start"],
            Box::new(move |o: &mut Output| o.insert(0, "Loss", Value::Float(100.0))),
        ),
        (
            vec!["misscaled-inputs", "exploding-start"],
            Box::new(move |o: &mut Output| {
                for s in 0..3 {
                    o.insert(s, "GradNorm", Value::List(vec![60.0, 0.2, 0.3]));
                }
            }),
        ),
        (
            vec!["gradient-imbalance"],
            Box::new(move |o: &mut Output| {
                set(o, "GradNorm", &|_| Value::List(vec![2e-5, 0.2, 0.3]))
            }),
        ),
        (
            // Noise that holds the run back: the loss falls by less than threefold (a run
            // that learned is not flagged for noise, as most healthy runs are noise-dominated).
            vec!["small-batch"],
            Box::new(move |o: &mut Output| {
                set(o, "NormTest", &|_| Value::Float(1.0));
                set(o, "Loss", &|s| {
                    Value::Float(slow(s) * if s % 2 == 0 { 1.4 } else { 0.6 })
                });
            }),
        ),
        (
            vec!["exploding-gradient"],
            Box::new(move |o: &mut Output| {
                set(o, "GradNorm", &|s| {
                    Value::List(vec![0.5 * 1.1f64.powi(s as i32), 0.2, 0.3])
                })
            }),
        ),
        (
            vec!["vanishing-gradient"],
            Box::new(move |o: &mut Output| {
                set(o, "GradNorm", &|s| {
                    Value::List(vec![0.5, 0.2 * 0.9f64.powi(s as i32), 0.3])
                })
            }),
        ),
        (
            vec!["frozen-layer"],
            Box::new(move |o: &mut Output| {
                set(o, "UpdateSize", &|s| {
                    Value::List(vec![0.01, if s > 50 { 0.0 } else { 0.004 }, 0.006])
                })
            }),
        ),
        (
            // In a run that did not learn (in one that did, sharpening is how fitting looks).
            vec!["rising-curvature"],
            Box::new(move |o: &mut Output| {
                set(o, "HessMaxEV", &|s| Value::Float(1.0 + s as f64));
                set(o, "Loss", &|s| Value::Float(slow(s)));
            }),
        ),
        (
            vec!["non-finite"],
            Box::new(|o: &mut Output| o.insert(42, "Loss", Value::Float(f64::NAN))),
        ),
    ];
    for (expected, make) in cases {
        let mut out = healthy(n);
        make(&mut out);
        assert_eq!(codes(&out, &names), expected, "{expected:?}");
        let d = Diagnoser::new().with_names(&names).run(&out);
        let top = &d.findings[0];
        assert!(
            !top.evidence.is_empty() && !top.steps.is_empty(),
            "{expected:?}"
        );
        assert!(
            d.summary
                .as_deref()
                .is_some_and(|s| s.contains(&top.evidence))
        );
    }
}

#[test]
fn the_command_exits_one_when_flagged_and_two_on_bad_input() {
    let dir = std::env::temp_dir().join(format!("cockpit-diagnose-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |path: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("diagnose")
            .arg(path)
            .output()
            .unwrap()
    };

    cockpit_quantities::log::write_log(dir.join("healthy.json"), &healthy(50)).unwrap();
    let ok = run(&dir.join("healthy.json"));
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("nothing flagged"));

    let mut sick = healthy(50);
    for s in 0..50 {
        sick.insert(s, "NormTest", Value::Float(1.0));
        let level = 1.2 + 0.8 * (-(s as f64) / 20.0).exp();
        sick.insert(
            s,
            "Loss",
            Value::Float(level * if s % 2 == 0 { 1.2 } else { 0.8 }),
        );
    }
    cockpit_quantities::log::write_log(dir.join("sick.json"), &sick).unwrap();
    let flagged = run(&dir.join("sick.json"));
    assert_eq!(flagged.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&flagged.stdout).contains("[small-batch]"));
    let as_json = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .args(["diagnose", "--json", "--names", "a.weight,a.bias,b.weight"])
        .arg(dir.join("sick.json"))
        .output()
        .unwrap();
    assert_eq!(as_json.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&as_json.stdout).unwrap();
    assert_eq!(json["flagged"], true);
    assert_eq!(json["findings"][0]["code"], "small-batch");
    let bad_option = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .args(["diagnose", "--frobnicate"])
        .output()
        .unwrap();
    assert_eq!(bad_option.status.code(), Some(2));

    // The log the Python Cockpit wrote reads too.
    let python = run(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cockpit_write_example.json"));
    assert!(
        matches!(python.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&python.stderr)
    );

    std::fs::write(dir.join("truncated.json"), "{\"0\": {\"Loss\": ").unwrap();
    std::fs::write(dir.join("empty.json"), "{}").unwrap();
    for bad in ["truncated.json", "empty.json", "absent.json"] {
        let out = run(&dir.join(bad));
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error:"),
            "{bad}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The names a log carries name the parameters without `--names`; `--names` of the wrong
/// length is refused with the log's own names.
#[test]
fn the_logs_parameter_names_are_used_and_wrong_names_refused() {
    let dir = std::env::temp_dir().join(format!("cockpit-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = healthy(50);
    for s in 0..50 {
        out.insert(s, "UpdateSize", Value::List(vec![0.01, 0.0, 0.006]));
    }
    let path = dir.join("frozen.json");
    let names = |out: &mut Output| {
        out.set_parameter_names(vec!["a.weight".into(), "a.bias".into(), "b.weight".into()]);
    };
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cockpit"))
            .arg("diagnose")
            .arg(&path)
            .args(args)
            .output()
            .unwrap()
    };
    cockpit_quantities::log::write_log(&path, &out).unwrap();
    let unnamed = run(&[]);
    assert!(String::from_utf8_lossy(&unnamed.stdout).contains("parameter #1"));
    names(&mut out);
    cockpit_quantities::log::write_log(&path, &out).unwrap();
    let read = cockpit_quantities::log::read_log(&path).unwrap();
    assert_eq!(read.parameter_names(), ["a.weight", "a.bias", "b.weight"]);
    assert_eq!(read, out, "the names survive a round trip");
    let named = run(&[]);
    let text = String::from_utf8_lossy(&named.stdout);
    assert_eq!(named.status.code(), Some(1), "{text}");
    assert!(
        text.contains("a.bias") && !text.contains("parameter #1"),
        "{text}"
    );
    let wrong = run(&["--names", "x,y"]);
    assert_eq!(wrong.status.code(), Some(2));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("2 names") && err.contains("3 parameters") && err.contains("a.weight"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_run_that_learns_far_from_a_healthy_start_is_not_an_exploding_start() {
    // Cross-entropy from ln 11 falling gradually to a twelfth of it (a language model learning
    // its data), with gradients of the same order throughout: no cliff, no exploding start.
    let n = 160;
    let mut out = healthy(n);
    for s in 0..n {
        let loss = 0.22 + 2.44 * (-(s as f64) / 25.0).exp();
        out.insert(s, "Loss", Value::Float(loss));
    }
    assert!(!codes(&out, &[]).contains(&"exploding-start"));
    // The same fall shed in one step is the too-large initialisation's cliff.
    out.insert(1, "Loss", Value::Float(0.4));
    out.insert(2, "Loss", Value::Float(0.35));
    out.insert(3, "Loss", Value::Float(0.3));
    assert!(codes(&out, &[]).contains(&"exploding-start"));
}
