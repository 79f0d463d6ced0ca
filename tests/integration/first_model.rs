//! The most common first model (`examples/gelu_adam.rs`: a GELU MLP on three blobs, Adam,
//! `business` at every step), as a new user meets it: its notes name only what a
//! `Cockpit::step` user has and no ReLU, `diagnose` flags nothing, and its dashboard shows a
//! histogram of more than one bar and a TIC panel that one wild value does not flatten.

use burn_cockpit::diagnose::Diagnoser;
use burn_cockpit::plot::{PlotOptions, render_rgb};
use burn_cockpit::{Output, Value};

#[path = "../../examples/gelu_adam.rs"]
#[allow(dead_code)]
mod gelu_adam;

/// Steps trained here (the example's default is 300).
const STEPS: usize = 120;

/// The red of the markers for values off an axis's scale (written here independently).
const OUTLIER: (u8, u8, u8) = (0xd6, 0x27, 0x28);
const ORANGE: (u8, u8, u8) = (0xf2, 0x80, 0x33);

#[test]
fn the_gelu_adam_model_reads_as_healthy() {
    let device = burn_cockpit::backend::device_named("flex").unwrap();
    let cockpit = gelu_adam::train(STEPS, Some(42), &device, |_| {}).unwrap();

    // Notes: the fix for the API in use, with its cost; nothing of ReLU in a GELU model.
    let warnings = cockpit.warnings().join("\n");
    assert!(!warnings.contains("RecordedCurvature"), "{warnings}");
    assert!(!warnings.contains("ReLU"), "{warnings}");
    assert!(
        warnings.contains("StepOptions::with_piecewise_linear(true)")
            && warnings.contains("backward passes per curved unit"),
        "{warnings}"
    );

    // The diagnosis: a healthy run, told the classes or not.
    let output = cockpit.output();
    for diagnoser in [
        Diagnoser::new(),
        Diagnoser::new().with_classes(gelu_adam::CLASSES),
    ] {
        let diagnosis = diagnoser.run(output);
        assert!(!diagnosis.is_flagged(), "{}", diagnosis.report());
    }

    // The histogram: more than one populated bin, drawn over the bins it occupies.
    let (_, last) = output.series("GradHist1d").pop().unwrap();
    let Value::Hist1d(hist) = last else {
        panic!("GradHist1d is a histogram")
    };
    assert!(hist.hist.iter().filter(|c| **c > 0.0).count() > 1);
    let options = PlotOptions::default();
    let (rgb, rendered) = render_rgb(output, &options).unwrap();
    let width = rendered.width as usize;
    let panel = rendered.panel("histogram_1d_gauge").unwrap();
    assert!(panel.drawn);
    let r = panel.rect;
    let pixel = |x: u32, y: u32| {
        let i = 3 * (y as usize * width + x as usize);
        (rgb[i], rgb[i + 1], rgb[i + 2])
    };
    let bar_columns = (r.x..r.x + r.w)
        .filter(|&x| (r.y..r.y + r.h).any(|y| pixel(x, y) == ORANGE))
        .count();
    assert!(
        bar_columns * 5 > r.w as usize,
        "the bars take {bar_columns} of {} pixel columns",
        r.w
    );

    // TIC: one wild value (the user's run had −10 000) is marked at the panel's edge, red.
    let mut wild: Output = output.clone();
    let step = wild
        .series("TICDiag")
        .get(STEPS / 2)
        .map(|(s, _)| *s)
        .unwrap();
    wild.insert(step, "TICDiag", Value::Float(-10_000.0));
    let red = |output: &Output| {
        let (rgb, rendered) = render_rgb(output, &options).unwrap();
        let r = rendered.panel("tic_gauge").unwrap().rect;
        (r.y..r.y + r.h)
            .flat_map(|y| (r.x..r.x + r.w).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let i = 3 * (y as usize * width + x as usize);
                (rgb[i], rgb[i + 1], rgb[i + 2]) == OUTLIER
            })
            .count()
    };
    let (before, after) = (red(output), red(&wild));
    assert!(
        after > before,
        "red marker pixels: {before} before, {after} with the wild value"
    );
}
