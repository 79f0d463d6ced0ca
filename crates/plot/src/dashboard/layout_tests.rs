//! The primary screen's layout, checked on the boxes of what is drawn rather than on pixels: a
//! drawing backend of the tests' own records every text's box (from the font's layout, the
//! anchor and the rotation, as plotters places glyphs), every point and line, and every chart's
//! plotting area (the panel colour's fills). At the default size and at the smallest size
//! accepted: no instrument under 60 px; no two texts overlap; no text inside a plot covers a
//! point or a line of data; at the default size every plot is at least 60 px tall.

use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind, text_anchor,
};

use super::{Rendered, Screen, draw};
use crate::data::DashboardData;
use cockpit_quantities::{Output, Value};

/// A pixel box `[x0, x1) × [y0, y1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Boxed {
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
}

impl Boxed {
    fn around(a: BackendCoord, b: BackendCoord) -> Self {
        Self {
            x0: a.0.min(b.0),
            y0: a.1.min(b.1),
            x1: a.0.max(b.0),
            y1: a.1.max(b.1),
        }
    }

    fn height(&self) -> i32 {
        self.y1 - self.y0
    }

    /// Shrunk by `by` pixels on every side (what antialiasing and glyph bearings blur).
    fn inset(&self, by: i32) -> Self {
        Self {
            x0: self.x0 + by,
            y0: self.y0 + by,
            x1: self.x1 - by,
            y1: self.y1 - by,
        }
    }

    fn overlaps(&self, other: &Self) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }

    fn contains(&self, (x, y): BackendCoord) -> bool {
        self.x0 <= x && x < self.x1 && self.y0 <= y && y < self.y1
    }
}

/// What a screen drew, as boxes and points.
#[derive(Debug, Default)]
struct Recording {
    size: (u32, u32),
    texts: Vec<(String, Boxed)>,
    /// Scatter points (circle centres) and points along lines, sampled every 2 px.
    marks: Vec<BackendCoord>,
    /// Plotting areas: rectangles filled with the panel colour.
    plots: Vec<Boxed>,
}

/// The backend: records into a [`Recording`] the test keeps.
struct Recorder(std::rc::Rc<std::cell::RefCell<Recording>>);

impl DrawingBackend for Recorder {
    type ErrorType = std::io::Error;

    fn get_size(&self) -> (u32, u32) {
        self.0.borrow().size
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }

    fn draw_pixel(
        &mut self,
        _: BackendCoord,
        _: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.draw_path([from, to], style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let colour = style.color();
        let panel = crate::style::PANEL;
        if fill && colour.alpha >= 1.0 && colour.rgb == (panel.0, panel.1, panel.2) {
            self.0
                .borrow_mut()
                .plots
                .push(Boxed::around(upper_left, bottom_right));
        }
        Ok(())
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let points: Vec<BackendCoord> = path.into_iter().collect();
        let marks = &mut self.0.borrow_mut().marks;
        for pair in points.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            let steps = ((x1 - x0).abs().max((y1 - y0).abs()) / 2).max(1);
            for k in 0..=steps {
                marks.push((x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps));
            }
        }
        Ok(())
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        _: u32,
        _: &S,
        _: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.borrow_mut().marks.push(center);
        Ok(())
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        _: I,
        _: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }

    /// The box plotters' own `draw_text` fills: the font's layout box, moved by the anchor,
    /// rotated by the transform about `pos`.
    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        if text.trim().is_empty() || style.color().alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (w, h) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            text_anchor::HPos::Left => 0,
            text_anchor::HPos::Right => -w,
            text_anchor::HPos::Center => -w / 2,
        };
        let dy = match style.anchor().v_pos {
            text_anchor::VPos::Top => 0,
            text_anchor::VPos::Center => -h / 2,
            text_anchor::VPos::Bottom => -h,
        };
        let t = style.transform();
        let a = t.transform(dx, dy);
        let b = t.transform(dx + w, dy + h);
        let boxed = Boxed::around((pos.0 + a.0, pos.1 + a.1), (pos.0 + b.0, pos.1 + b.1));
        self.0.borrow_mut().texts.push((text.to_string(), boxed));
        Ok(())
    }

    fn blit_bitmap(
        &mut self,
        _: BackendCoord,
        _: (u32, u32),
        _: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }
}

/// The Python Cockpit's log of every instrument (3 steps), and the same run continued to 300
/// steps: long histories, α on both sides of the parabola's minimum, the learning rate
/// decayed twice and the accuracies logged every 30 steps.
fn runs() -> Vec<(&'static str, Output)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/cockpit_write_example.json"
    );
    let short = cockpit_quantities::log::read_log(path).expect("the fixture log reads");
    let mut long = short.clone();
    let hist1d = short.get(2, "GradHist1d").cloned().expect("a 1d histogram");
    let hist2d = short.get(2, "GradHist2d").cloned().expect("a 2d histogram");
    for step in 3..300 {
        let t = step as f64;
        let wave = (t / 17.0).sin();
        let float = |v: f64| Value::Float(v);
        let list = |v: f64| Value::List(vec![v, 0.5 * v, 0.25 * v, 0.1 * v]);
        long.insert(step, "Alpha", float(1.2 * wave));
        long.insert(step, "Loss", float(2.0 / (1.0 + 0.02 * t) + 0.1 * wave));
        long.insert(step, "GradNorm", list(1.0 + 0.3 * wave));
        long.insert(step, "Distance", list(0.01 * t));
        long.insert(step, "UpdateSize", list(0.05 + 0.01 * wave));
        long.insert(step, "NormTest", float(10f64.powf(0.6 * wave)));
        long.insert(step, "InnerTest", float(0.2 * (1.5 + wave)));
        long.insert(step, "OrthoTest", float(0.8 + 0.3 * wave));
        long.insert(step, "HessMaxEV", float(1.0 + 0.1 * t.sqrt()));
        long.insert(step, "HessTrace", list(4.0 - 0.005 * t));
        long.insert(step, "TICDiag", float(30.0 + 10.0 * wave));
        long.insert(step, "GradHist1d", hist1d.clone());
        long.insert(step, "GradHist2d", hist2d.clone());
        if step % 30 == 0 {
            let lr = if step < 100 {
                0.1
            } else if step < 200 {
                0.05
            } else {
                0.01
            };
            long.insert(step, "learning_rate", float(lr));
            long.insert(step, "train_accuracy", float(0.5 + 0.0015 * t));
            long.insert(step, "valid_accuracy", float(0.45 + 0.0012 * t));
        }
    }
    vec![("the Python log", short), ("a 300-step run", long)]
}

fn record(output: &Output, width: u32, height: u32) -> (Recording, Rendered) {
    let recording = std::rc::Rc::new(std::cell::RefCell::new(Recording {
        size: (width, height),
        ..Recording::default()
    }));
    let root = Recorder(recording.clone()).into_drawing_area();
    let rendered = draw(
        &root,
        &DashboardData::from_output(output),
        Screen::Primary,
        "Cockpit",
    )
    .expect("the dashboard draws");
    drop(root);
    let recording = std::rc::Rc::try_unwrap(recording)
        .map(std::cell::RefCell::into_inner)
        .unwrap_or_else(|shared| std::mem::take(&mut shared.borrow_mut()));
    (recording, rendered)
}

/// What breaks the layout rules, in words (empty: none).
fn faults(recording: &Recording, rendered: &Rendered, plots_at_least: i32) -> Vec<String> {
    let mut faults = Vec::new();
    for panel in &rendered.panels {
        if panel.rect.h < 60 {
            faults.push(format!("{} is {} px tall", panel.name, panel.rect.h));
        }
    }
    for plot in &recording.plots {
        if plot.height() < plots_at_least {
            faults.push(format!("a plot at {plot:?} is {} px tall", plot.height()));
        }
    }
    let (w, h) = (recording.size.0 as i32, recording.size.1 as i32);
    let texts = &recording.texts;
    for (i, (text, boxed)) in texts.iter().enumerate() {
        if boxed.x0 < 0 || boxed.y0 < 0 || boxed.x1 > w || boxed.y1 > h {
            faults.push(format!("{text:?} at {boxed:?} leaves the {w}×{h} image"));
        }
        for (other, other_box) in &texts[i + 1..] {
            if boxed.inset(1).overlaps(&other_box.inset(1)) {
                faults.push(format!(
                    "{text:?} at {boxed:?} overlaps {other:?} at {other_box:?}"
                ));
            }
        }
        // A text inside a plot must not cover its data (lines and points away from the
        // plot's frame, where the axes are).
        let centre = ((boxed.x0 + boxed.x1) / 2, (boxed.y0 + boxed.y1) / 2);
        for plot in recording.plots.iter().filter(|p| p.contains(centre)) {
            let inner = plot.inset(3);
            if let Some(mark) = recording
                .marks
                .iter()
                .find(|m| inner.contains(**m) && boxed.inset(1).contains(**m))
            {
                faults.push(format!("{text:?} at {boxed:?} covers data at {mark:?}"));
            }
        }
    }
    faults
}

#[test]
fn the_primary_screen_keeps_its_texts_apart_and_off_the_data() {
    for (name, output) in runs() {
        for (width, height, plots_at_least) in [(2400, 1200, 60), (600, 300, 0)] {
            let (recording, rendered) = record(&output, width, height);
            assert!(
                rendered.panels.iter().all(|p| p.drawn),
                "{name}: every instrument drawn"
            );
            assert!(recording.texts.len() > 100 && recording.marks.len() > 100);
            let faults = faults(&recording, &rendered, plots_at_least);
            assert!(
                faults.is_empty(),
                "{name} at {width}×{height}:\n{}",
                faults.join("\n")
            );
        }
    }
}

/// The checks see what they are meant to: a legend drawn over a chart's data, the way the
/// old in-plot legends were, is caught.
#[test]
fn a_legend_over_the_data_is_caught() {
    let (_, output) = runs().remove(1);
    let (mut recording, rendered) = record(&output, 2400, 1200);
    assert!(faults(&recording, &rendered, 60).is_empty());
    let plot = recording.plots[0];
    let mark = *recording
        .marks
        .iter()
        .find(|m| plot.inset(3).contains(**m))
        .expect("a plot with data");
    recording.texts.push((
        "legend".into(),
        Boxed::around((mark.0 - 20, mark.1 - 8), (mark.0 + 20, mark.1 + 8)),
    ));
    let found = faults(&recording, &rendered, 60);
    assert!(found.iter().any(|f| f.contains("covers data")), "{found:?}");
}
