//! The dashboard drawn into an image buffer, checked for structure: size, panels, the colour

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! of each column, marks where data exists and blank panels where it does not.

use std::path::PathBuf;

use burn_cockpit::log::read_log;

// Cockpit's palette (its plotting code: the three column colours, seaborn's "dark" panel
// on a white page), written here independently of the plot crate's.
const BLUE: (u8, u8, u8) = (0x4a, 0x73, 0xad);
const ORANGE: (u8, u8, u8) = (0xf2, 0x80, 0x33);
const GREEN: (u8, u8, u8) = (0x33, 0x99, 0x66);
const GREY: (u8, u8, u8) = (0x59, 0x59, 0x59);
const PAGE: (u8, u8, u8) = (0xff, 0xff, 0xff);
const PANEL: (u8, u8, u8) = (0xea, 0xea, 0xf2);
use burn_cockpit::plot::{
    PlotError, PlotOptions, Rect, Rendered, Screen, WatchEvent, WatchOptions, render_rgb,
    render_svg, save, watch,
};
use burn_cockpit::{Output, Value};
use cockpit_cli::replay::{Fixture, ReplayOptions, replay};

const PRIMARY: [&str; 11] = [
    "alpha_gauge",
    "distance_gauge",
    "grad_norm_gauge",
    "gradient_tests_gauge",
    "histogram_1d_gauge",
    "histogram_2d_gauge",
    "max_ev_gauge",
    "trace_gauge",
    "tic_gauge",
    "hyperparameter_gauge",
    "performance_gauge",
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn small() -> PlotOptions {
    PlotOptions {
        width: 1200,
        height: 600,
        ..PlotOptions::default()
    }
}

/// A full-configuration replay of a recorded run, with the variants (per-layer histograms).
fn full_replay(stream: Option<PathBuf>) -> Output {
    let fixture = Fixture::load(fixture("mlp_mse.json")).unwrap();
    let mut options = ReplayOptions::cpu_f64();
    options.variants = true;
    options.stream = stream;
    replay(&fixture, &options).unwrap().output
}

struct Image<'a> {
    rgb: &'a [u8],
    width: u32,
}

impl Image<'_> {
    fn count(&self, r: Rect, keep: impl Fn((u8, u8, u8)) -> bool) -> usize {
        let mut n = 0;
        for y in r.y..r.y + r.h {
            for x in r.x..r.x + r.w {
                let i = 3 * (y * self.width + x) as usize;
                if keep((self.rgb[i], self.rgb[i + 1], self.rgb[i + 2])) {
                    n += 1;
                }
            }
        }
        n
    }

    /// Pixels that are neither page nor plot background: marks, axes, text.
    fn marks(&self, r: Rect) -> usize {
        let (page, panel) = (PAGE, PANEL);
        self.count(r, |p| p != page && p != panel)
    }
}

fn near(c: (u8, u8, u8), target: (u8, u8, u8)) -> bool {
    let d = |a: u8, b: u8| (a as i32 - b as i32).abs();
    d(c.0, target.0) + d(c.1, target.1) + d(c.2, target.2) <= 12
}

/// Every named panel is drawn and holds at least `min` marked pixels.
fn assert_drawn(image: &Image<'_>, rendered: &Rendered, names: &[&str], min: usize) {
    for name in names {
        let panel = rendered
            .panel(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(panel.drawn, "{name}");
        let marks = image.marks(panel.rect);
        assert!(marks > min, "{name}: only {marks} marked pixels");
    }
}

fn check_headers(image: &Image<'_>, rendered: &Rendered, expected: &[(&str, (u8, u8, u8))]) {
    assert_eq!(rendered.headers.len(), expected.len());
    for (header, (label, colour)) in rendered.headers.iter().zip(expected) {
        assert_eq!(header.label, *label);
        assert_eq!(header.colour, *colour, "{label}");
        let r = header.rect;
        let exact = image.count(r, |p| p == *colour);
        assert!(
            exact as f64 > 0.7 * (r.w * r.h) as f64,
            "{label}: {exact} of {} pixels in its colour",
            r.w * r.h
        );
    }
}

#[test]
fn a_full_replay_log_draws_every_instrument_in_its_column_colours() {
    let output = full_replay(None);
    let options = small();
    let (rgb, rendered) = render_rgb(&output, &options).unwrap();
    assert_eq!(rgb.len(), 1200 * 600 * 3);
    assert_eq!((rendered.width, rendered.height), (1200, 600));
    let image = Image {
        rgb: &rgb,
        width: 1200,
    };
    check_headers(
        &image,
        &rendered,
        &[
            ("STEP SIZE", BLUE),
            ("GRADIENTS", ORANGE),
            ("CURVATURE", GREEN),
            ("HYPERPARAMETERS", GREY),
            ("PERFORMANCE", GREY),
        ],
    );
    // Every instrument, the learning rate included (the replay logs its pass).
    assert_drawn(&image, &rendered, &PRIMARY, 300);
    // Column colours in the marks: blue "last 10 %" bars in the Alpha gauge, orange bars in the
    // 1d histogram.
    let alpha = rendered.panel("alpha_gauge").unwrap().rect;
    assert!(image.count(alpha, |p| near(p, BLUE)) > 20, "blue α bars");
    let hist = rendered.panel("histogram_1d_gauge").unwrap().rect;
    assert!(
        image.count(hist, |p| p == ORANGE) > 200,
        "orange histogram bars"
    );
}

#[test]
fn the_python_written_log_draws_every_instrument_to_png_and_svg() {
    let output = read_log(fixture("cockpit_write_example.json")).unwrap();
    let (rgb, rendered) = render_rgb(&output, &small()).unwrap();
    let image = Image {
        rgb: &rgb,
        width: 1200,
    };
    assert_drawn(&image, &rendered, &PRIMARY, 300);
    let (svg, rendered_svg) = render_svg(&output, &small()).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("STEP SIZE") && svg.contains("CURVATURE"));
    assert_eq!(rendered_svg, rendered, "same layout in both formats");

    let dir = tempdir("formats");
    for file in ["dash.png", "dash.svg"] {
        let path = dir.join(file);
        save(&output, &path, &small()).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 10_000, "{file}");
    }
    let png = std::fs::read(dir.join("dash.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn missing_data_leaves_panels_blank_and_one_step_still_draws() {
    let mut output = Output::new();
    output.insert(0, "Loss", Value::Float(1.5));
    output.insert(0, "GradNorm", Value::List(vec![0.3, 0.4]));
    let (rgb, rendered) = render_rgb(&output, &small()).unwrap();
    let image = Image {
        rgb: &rgb,
        width: 1200,
    };
    for name in PRIMARY {
        let panel = rendered.panel(name).unwrap();
        let expected = matches!(name, "performance_gauge" | "grad_norm_gauge");
        assert_eq!(panel.drawn, expected, "{name}");
        if !expected {
            // Blank: no plot, only the grey label saying what fills it (issue 64).
            let grey = |p: (u8, u8, u8)| {
                let (r, g, b) = (p.0 as i32, p.1 as i32, p.2 as i32);
                (r - g).abs() <= 6 && (g - b).abs() <= 6
            };
            let coloured = image.count(panel.rect, |p| p != PAGE && p != PANEL && !grey(p));
            assert_eq!(coloured, 0, "{name} should be blank but for its label");
            assert!(image.marks(panel.rect) > 0, "{name} should carry its label");
        } else {
            assert!(image.marks(panel.rect) > 100, "{name}");
        }
    }
}

#[test]
fn the_secondary_screen_draws_auxiliary_and_per_layer_histograms() {
    let output = full_replay(None);
    let options = PlotOptions {
        screen: Screen::Secondary,
        ..small()
    };
    let (rgb, rendered) = render_rgb(&output, &options).unwrap();
    let image = Image {
        rgb: &rgb,
        width: 1200,
    };
    let labels: Vec<&str> = rendered.headers.iter().map(|h| h.label).collect();
    // The replay tracks Examples too (by batch position: a fixture has no sample ids): its
    // view sits below the per-layer histograms.
    assert_eq!(labels, ["AUXILIARY", "LAYERWISE", "EXAMPLES"]);
    let examples = rendered.panel("examples_gauge").unwrap();
    assert!(examples.drawn && image.marks(examples.rect) > 300);
    let gsnr = rendered.panel("mean_gsnr_gauge").unwrap();
    assert!(gsnr.drawn && image.marks(gsnr.rect) > 300);
    // mlp_mse has momentum-free SGD: CABS and EarlyStopping are there too.
    for name in ["cabs_gauge", "early_stopping_gauge"] {
        assert!(rendered.panel(name).unwrap().drawn, "{name}");
    }
    // A quantity beyond Cockpit's instruments, drawn by its kind (the replay tracks it).
    let ratio = rendered.panel("GradParamRatio_gauge").unwrap();
    assert!(ratio.drawn && image.marks(ratio.rect) > 300);
    // The same log without it (the keyed variants keep their kinds).
    let mut without = output.clone();
    for step in output.steps() {
        without.remove(step, "GradParamRatio");
    }
    let (_, rendered) = render_rgb(&without, &options).unwrap();
    assert!(!rendered.panel("GradParamRatio_gauge").unwrap().drawn);
    let layers: Vec<_> = rendered
        .panels
        .iter()
        .filter(|p| p.name.starts_with("layerwise["))
        .collect();
    assert!(layers.len() >= 2, "{layers:?}");
    for panel in layers {
        assert!(
            panel.drawn && image.marks(panel.rect) > 300,
            "{}",
            panel.name
        );
    }
}

#[test]
fn bad_logs_and_paths_give_clear_errors() {
    let dir = tempdir("errors");
    assert!(matches!(
        render_rgb(&Output::new(), &small()),
        Err(PlotError::Empty)
    ));
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"0\": {\"Loss\": ").unwrap();
    let err = burn_cockpit::plot::plot_file(&bad, dir.join("x.png"), &small()).unwrap_err();
    assert!(matches!(err, PlotError::Log(_)), "{err}");
    assert!(err.to_string().contains("bad.json"), "{err}");
    let missing = burn_cockpit::plot::plot_file(dir.join("none.json"), dir.join("x.png"), &small());
    assert!(matches!(missing, Err(PlotError::Log(_))));
    let mut output = Output::new();
    output.insert(0, "Loss", Value::Float(1.0));
    assert!(matches!(
        save(&output, dir.join("x.jpg"), &small()),
        Err(PlotError::Format(_))
    ));
    let err = save(&output, dir.join("no/such/dir/x.png"), &small()).unwrap_err();
    assert!(matches!(err, PlotError::Write { .. }), "{err}");
    let err = save(&output, dir.join("no/such/dir/x.svg"), &small()).unwrap_err();
    assert!(matches!(err, PlotError::Write { .. }), "{err}");
    let tiny = PlotOptions {
        width: 100,
        height: 100,
        ..small()
    };
    assert!(matches!(
        render_rgb(&output, &tiny),
        Err(PlotError::Size { .. })
    ));
}

#[test]
fn watch_redraws_as_the_stream_grows() {
    let dir = tempdir("watch");
    let full = dir.join("full.jsonl");
    full_replay(Some(full.clone()));
    let lines: Vec<String> = std::fs::read_to_string(&full)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(lines.len() >= 4);
    let live = dir.join("live.jsonl");
    let half = lines.len() / 2;
    std::fs::write(&live, lines[..half].join("\n") + "\n").unwrap();
    let out = dir.join("live.png");
    let writer = {
        let (live, rest) = (live.clone(), lines[half..].to_vec());
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(600));
            let mut text = std::fs::read_to_string(&live).unwrap();
            text.push_str(&(rest.join("\n") + "\n"));
            std::fs::write(&live, text).unwrap();
        })
    };
    let mut drawn = Vec::new();
    watch(
        &live,
        &out,
        &small(),
        &WatchOptions {
            interval: std::time::Duration::from_millis(50),
            idle_exit: Some(std::time::Duration::from_millis(2500)),
            ..WatchOptions::default()
        },
        |event| {
            if let WatchEvent::Drawn { steps, .. } = event {
                drawn.push(steps);
            }
        },
    )
    .unwrap();
    writer.join().unwrap();
    assert!(drawn.len() >= 2, "{drawn:?}");
    assert_eq!(drawn.first(), Some(&half));
    let steps = burn_cockpit::log::read_stream(&full)
        .unwrap()
        .steps()
        .count();
    assert_eq!(drawn.last(), Some(&steps));
    assert!(out.exists());
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("burn-cockpit-dash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
