//! No panic and no hang on any input: property tests over the readers (Cockpit's JSON log,
//! the JSON-lines stream, config files and schedules, replay fixtures), the dashboard and
//! `diagnose`. Bounded so that the whole file runs in CI in seconds; set `PROPTEST_CASES` for
//! a longer run.
//!
//! Each case runs under a watchdog: one that does not return within [`PATIENCE`] fails as a
//! hang instead of stalling the suite.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::mpsc;
use std::time::Duration;

use burn_cockpit::diagnose::Diagnoser;
use burn_cockpit::log::{parse_log, read_stream};
use burn_cockpit::plot::{PlotOptions, Screen, render_rgb};
use burn_cockpit::{
    CockpitConfig, ExampleShare, ExampleShares, Histogram1d, Histogram2d, Output, Schedule, Value,
};
use cockpit_cli::replay::Fixture;
use proptest::prelude::*;

/// How long one case may take before it counts as a hang (debug build, shared CI machine).
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `work` on its own thread; panics if it does not return within [`PATIENCE`] (the thread
/// is then left behind) and re-raises its panic.
fn within<R: Send + 'static>(what: &str, work: impl FnOnce() -> R + Send + 'static) -> R {
    let (send, receive) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let result = work();
        let _ = send.send(());
        result
    });
    match receive.recv_timeout(PATIENCE) {
        Ok(()) => handle
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        Err(mpsc::RecvTimeoutError::Disconnected) => handle
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no answer after {PATIENCE:?}"),
    }
}

/// `default` cases from a fixed seed, so that CI runs the same inputs every time;
/// `PROPTEST_CASES` and `PROPTEST_RNG_SEED` (a number) explore further.
fn cases(default: u32) -> ProptestConfig {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    ProptestConfig {
        cases: env("PROPTEST_CASES").map_or(default, |c| c as u32),
        rng_seed: proptest::test_runner::RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(22)),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Numbers that break arithmetic: extremes, subnormals, signed zeros, non-finite values and
/// ordinary ones.
fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -10.0f64..10.0,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(f64::MAX),
        1 => Just(-f64::MAX),
        1 => Just(1.7e308),
        1 => Just(f64::MIN_POSITIVE),
        1 => Just(5e-324),
        1 => Just(1e16),
        1 => Just(1e16 + 2.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => any::<f64>(),
    ]
}

/// The keys a reader looks for, and some it does not.
const KEYS: [&str; 25] = [
    "Loss",
    "Alpha",
    "GradNorm",
    "Distance",
    "UpdateSize",
    "NormTest",
    "InnerTest",
    "OrthoTest",
    "GradHist1d",
    "GradHist2d",
    "HessMaxEV",
    "HessTrace",
    "TICDiag",
    "TICTrace",
    "MeanGSNR",
    "CABS",
    "EarlyStopping",
    "Examples",
    "Time",
    "Parameters",
    "train_accuracy",
    "valid_accuracy",
    "learning_rate",
    "epoch_count",
    "train_loss",
];

fn histogram_1d() -> impl Strategy<Value = Histogram1d> {
    (
        prop::collection::vec(number(), 0..12),
        prop::collection::vec(number(), 0..12),
    )
        .prop_map(|(hist, edges)| Histogram1d { hist, edges })
}

fn histogram_2d() -> impl Strategy<Value = Histogram2d> {
    (
        0usize..6,
        0usize..6,
        prop::collection::vec(any::<i64>(), 0..40),
        prop::collection::vec(number(), 0..8),
        prop::collection::vec(number(), 0..8),
    )
        .prop_map(|(x, y, hist, x_edges, y_edges)| Histogram2d {
            hist,
            bins: (x, y),
            x_edges,
            y_edges,
            individual: Vec::new(),
        })
}

fn example_shares() -> impl Strategy<Value = ExampleShares> {
    (
        any::<usize>(),
        any::<usize>(),
        any::<bool>(),
        prop::collection::vec((any::<u64>(), number(), number()), 0..6),
    )
        .prop_map(|(batch, half, ids_known, top)| ExampleShares {
            batch,
            half,
            ids_known,
            top: top
                .into_iter()
                .map(|(id, share, loss)| ExampleShare { id, share, loss })
                .collect(),
        })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => example_shares().prop_map(Value::Examples),
        4 => number().prop_map(Value::Float),
        1 => any::<i64>().prop_map(Value::Int),
        2 => prop::collection::vec(number(), 0..5).prop_map(Value::List),
        1 => histogram_1d().prop_map(Value::Hist1d),
        1 => histogram_2d().prop_map(Value::Hist2d),
    ]
}

/// A log of up to 12 steps (any step numbers) with any of the readers' keys.
fn output() -> impl Strategy<Value = Output> {
    prop::collection::vec(
        (
            prop_oneof![0usize..40, any::<usize>()],
            prop::sample::select(KEYS.to_vec()),
            value(),
        ),
        1..30,
    )
    .prop_map(|entries| {
        let mut output = Output::new();
        for (step, key, value) in entries {
            output.insert(step % (1 << 53), key, value);
        }
        output
    })
}

/// JSON text that is nearly a log: objects keyed by steps and quantity names, numbers
/// (written as Python writes NaN and Infinity too), json_tricks arrays with odd shapes.
fn log_like_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        number().prop_map(|v| {
            if v.is_nan() {
                "NaN".to_string()
            } else if v.is_infinite() {
                if v > 0.0 { "Infinity".into() } else { "-Infinity".into() }
            } else {
                format!("{v:e}")
            }
        }),
        any::<i64>().prop_map(|v| v.to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        "[a-z\"\\\\]{0,6}".prop_map(|s| format!("{s:?}")),
        (prop::collection::vec(-3i64..1000, 0..4), prop::collection::vec(-5i64..5, 0..6)).prop_map(
            |(shape, data)| {
                format!(
                    "{{\"__ndarray__\": {data:?}, \"dtype\": \"float64\", \"shape\": {shape:?}, \"Corder\": true}}"
                )
            }
        ),
    ];
    let tree = leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec(
                (
                    prop_oneof![
                        prop::sample::select(KEYS.to_vec()).prop_map(str::to_string),
                        prop::sample::select(vec![
                            "hist",
                            "edges",
                            "bins",
                            "x_edges",
                            "y_edges",
                            "0",
                            "1",
                            "-1",
                            "1e400",
                            "99999999999999999999999"
                        ])
                        .prop_map(str::to_string),
                    ],
                    inner,
                ),
                0..5
            )
            .prop_map(|fields| {
                let body: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v)| format!("{k:?}: {v}"))
                    .collect();
                format!("{{{}}}", body.join(", "))
            }),
        ]
    });
    prop::collection::vec(
        (
            prop_oneof![
                Just("0".to_string()),
                Just("7".to_string()),
                any::<u64>().prop_map(|s| s.to_string()),
                Just("x".to_string())
            ],
            tree,
        ),
        0..4,
    )
    .prop_map(|steps| {
        let body: Vec<String> = steps
            .into_iter()
            .map(|(k, v)| format!("{k:?}: {v}"))
            .collect();
        format!("{{{}}}", body.join(", "))
    })
}

/// A reader answers every input with a value or an error, and a log it accepts is drawn and
/// diagnosed without a panic.
fn read_draw_diagnose(text: String) {
    within("reading, drawing and diagnosing a log", move || {
        if let Ok(output) = parse_log(&text)
            && !output.is_empty()
        {
            let _ = Diagnoser::new().run(&output).report();
            let options = PlotOptions {
                width: 600,
                height: 300,
                ..PlotOptions::default()
            };
            let _ = render_rgb(&output, &options);
        }
    });
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn log_reader_takes_any_text(text in "\\PC{0,200}") {
        within("parse_log", move || { let _ = parse_log(&text); });
    }

    #[test]
    fn log_like_json_is_read_drawn_and_diagnosed(text in log_like_text()) {
        read_draw_diagnose(text);
    }

    #[test]
    fn stream_reader_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400), lines in prop::collection::vec(log_like_text(), 0..3)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut content: Vec<u8> = lines
            .iter()
            .flat_map(|l| format!("{{\"output\": {l}, \"tracked_at\": 0}}\n").into_bytes())
            .collect();
        content.extend(bytes);
        std::fs::write(&path, content).unwrap();
        within("read_stream", move || { let _ = read_stream(&path); });
    }

    #[test]
    fn configs_and_schedules_never_hang_or_panic(
        bins in prop_oneof![Just("0".to_string()), Just("1000000000000".to_string()), Just("4000000000".to_string()), Just("[100000, 100000]".to_string()), (0u64..2000).prop_map(|b| b.to_string()), "[0-9e.+-]{1,25}"],
        range in prop_oneof![Just("[-1e308, 1e308]".to_string()), Just("[1, -1]".to_string()), (number(), number()).prop_map(|(a, b)| format!("[{a:e}, {b:e}]"))],
        schedule in prop_oneof![
            "(linear|logarithmic)\\([0-9e.,= a-z+-]{0,30}\\)",
            Just("logarithmic(0, 3, 1000000000000)".to_string()),
            Just("linear(99999999999999999999999)".to_string()),
        ],
        class in prop::sample::select(vec!["GradHist1d", "GradHist2d"]),
        key in prop_oneof![Just(None), Just(Some(String::new())), prop::sample::select(KEYS.to_vec()).prop_map(|k| Some(k.to_string()))],
    ) {
        let key = key.map(|k| format!("key = {k:?}\n")).unwrap_or_default();
        let text = format!(
            "schedule = {schedule:?}\n[[quantity]]\nclass = \"{class}\"\n{key}kwargs = {{ bins = {bins}, range = {range} }}\n"
        );
        within("a config", move || {
            let _ = text.parse::<Schedule>();
            if let Ok(config) = CockpitConfig::from_toml(&text)
                && let Ok(cockpit) = config.build()
            {
                // What is accepted is within the documented bounds.
                assert!(!cockpit.quantity_names().iter().any(|n| n.is_empty()));
            }
        });
    }
}

proptest! {
    #![proptest_config(cases(24))]

    #[test]
    fn any_log_is_drawn_and_diagnosed(output in output(), secondary in any::<bool>()) {
        within("drawing and diagnosing", move || {
            let report = Diagnoser::new().run(&output).report();
            assert!(!report.is_empty());
            let options = PlotOptions {
                width: 600,
                height: 300,
                screen: if secondary { Screen::Secondary } else { Screen::Primary },
                ..PlotOptions::default()
            };
            let _ = render_rgb(&output, &options);
            // Exported whole: one event file, read back by the test's own reader.
            let dir = tempfile::tempdir().unwrap();
            let path = burn_cockpit::tensorboard::TensorBoardWriter::export(dir.path(), &output, &[], false).unwrap();
            let files = std::fs::read_dir(dir.path()).unwrap().count();
            assert_eq!(files, 1, "only the event file, no partial one");
            assert!(std::fs::metadata(&path).unwrap().len() > 0);
        });
    }

    #[test]
    fn fixtures_with_bad_numbers_are_errors(edits in prop::collection::vec((0usize..40_000, number()), 1..6)) {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mlp_ce.json"),
        )
        .unwrap();
        within("a fixture", move || {
            let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut numbers = Vec::new();
            collect_numbers(&mut json, &mut numbers);
            for (at, value) in &edits {
                if let Some(slot) = numbers.get(at % numbers.len().max(1)) {
                    let replacement = serde_json::Number::from_f64(*value)
                        .map(serde_json::Value::Number)
                        .unwrap_or(serde_json::Value::Null);
                    if let Some(target) = json.pointer_mut(slot) {
                        *target = replacement;
                    }
                }
            }
            if let Ok(fixture) = Fixture::parse(&json.to_string()) {
                let _ = fixture.validate();
            }
        });
    }
}

/// JSON pointers of every number in `json`.
fn collect_numbers(json: &mut serde_json::Value, out: &mut Vec<String>) {
    fn walk(json: &serde_json::Value, path: String, out: &mut Vec<String>) {
        match json {
            serde_json::Value::Number(_) => out.push(path),
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, format!("{path}/{i}"), out);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    walk(
                        v,
                        format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                        out,
                    );
                }
            }
            _ => {}
        }
    }
    walk(json, String::new(), out);
}

/// The cases the issue found, each once: finite extremes that made the axis code loop, a 2-d
/// histogram whose edges are shorter than its bins, a very wide image.
#[test]
fn the_reported_inputs_are_drawn() {
    let cases = [
        r#"{"0": {"Loss": 1.7e308}, "1": {"Loss": 0}}"#,
        r#"{"0": {"Loss": 1e16}, "1": {"Loss": 1.0000000000000002e16}}"#,
        r#"{"0": {"GradHist2d": {"hist": {"__ndarray__": [[1, 2], [3, 4]], "dtype": "int64", "shape": [2, 2], "Corder": true}, "edges": [[0, 1], [0]]}}}"#,
    ];
    for text in cases {
        read_draw_diagnose(text.to_string());
    }
    let mut short_edges = Output::new();
    short_edges.insert(
        0,
        "GradHist2d",
        Value::Hist2d(Histogram2d {
            hist: vec![1, 2, 3, 4],
            bins: (2, 2),
            x_edges: vec![0.0, 1.0],
            y_edges: vec![0.0, 1.0, 2.0],
            individual: Vec::new(),
        }),
    );
    short_edges.insert(0, "Loss", Value::Float(1.0));
    within("short 2-d edges", move || {
        render_rgb(&short_edges, &PlotOptions::default()).unwrap();
    });
    let output = parse_log(cases[0]).unwrap();
    for (width, height) in [(16_384, 301), (600, 16_384), (600, 300)] {
        let options = PlotOptions {
            width,
            height,
            ..PlotOptions::default()
        };
        let output = output.clone();
        within("an extreme size", move || {
            render_rgb(&output, &options).unwrap();
        });
    }
}
