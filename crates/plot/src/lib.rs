//! # cockpit-plot
//!
//! Cockpit's dashboard (`CockpitPlotter`) drawn in Rust with [plotters]: PNG or SVG from a
//! Cockpit log — ours or one the Python Cockpit wrote — with no Python, display or system
//! font (DejaVu Sans is embedded).
//!
//! ```no_run
//! use cockpit_plot::{PlotOptions, plot_file};
//! let rendered = plot_file("cockpit_log.json", "dashboard.png", &PlotOptions::default())?;
//! assert!(rendered.panel("alpha_gauge").is_some());
//! # Ok::<(), cockpit_plot::PlotError>(())
//! ```
//!
//! The primary screen has three columns — STEP SIZE (blue), GRADIENTS (orange), CURVATURE
//! (green) — of three instruments each, then the hyperparameter and performance row; the
//! secondary screen has MeanGSNR, CABS, EarlyStopping, the quantities beyond Cockpit drawn by
//! their kind ([`dashboard::SECONDARY_QUANTITIES`]: the GradParamRatio gauge), the per-layer 2d
//! histograms and, where the log has Examples, the examples view (the concentration of the
//! gradient on few examples and the last step's largest shares). An instrument whose data is
//! missing is left blank (and reported in [`Rendered`]).
//!
//! Drawing only reads the log: it never touches a model or a backend.

pub mod dashboard;
pub mod data;
mod error;
mod font;
mod instrument;
mod map;
mod style;
mod watch;

use std::path::Path;

use cockpit_quantities::Output;
use cockpit_quantities::log::{Reader, read_any_with, write_atomic};
use image::ImageEncoder;
use plotters::prelude::*;
use std::io::Write;

pub use dashboard::{Header, Panel, Rect, Rendered, Screen};
pub use data::{DashboardData, ExamplesMap, Series};
pub use error::PlotError;

/// A plotters drawing backend the dashboard draws on (every backend whose error is an owned
/// value, as plotters' bitmap and SVG backends' are): its errors then travel whole as
/// [`PlotError::Draw`]'s source.
pub trait Canvas: plotters::prelude::DrawingBackend<ErrorType: 'static> {}

impl<T: plotters::prelude::DrawingBackend<ErrorType: 'static>> Canvas for T {}
pub use map::{DrawnMap, MapColour, MapOptions, draw_map, render_map_png, save_map};
pub use watch::{WatchEvent, WatchOptions, watch};

/// Size, screen and title of a dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotOptions {
    /// Width in pixels (default 2400; Cockpit's figure is 30 × 15 inches).
    pub width: u32,
    /// Height in pixels (default 1200).
    pub height: u32,
    /// Primary or secondary screen.
    pub screen: Screen,
    /// The title (default "Cockpit").
    pub title: String,
}

impl Default for PlotOptions {
    fn default() -> Self {
        Self {
            width: 2400,
            height: 1200,
            screen: Screen::Primary,
            title: "Cockpit".into(),
        }
    }
}

impl PlotOptions {
    /// The smallest dashboard that can be laid out, `(width, height)` in pixels.
    pub const MIN_SIZE: (u32, u32) = (600, 300);
    /// The largest side in pixels: beyond it the drawing library's pixel arithmetic
    /// overflows (and a 16384 × 16384 RGB image is already 805 MB).
    pub const MAX_SIDE: u32 = 16_384;

    /// Checks the size before anything is allocated or drawn.
    ///
    /// # Errors
    ///
    /// [`PlotError::Size`] below [`PlotOptions::MIN_SIZE`] or above
    /// [`PlotOptions::MAX_SIDE`] on either side.
    pub fn check(&self) -> Result<(), PlotError> {
        let (w, h) = (self.width, self.height);
        let (min_w, min_h) = Self::MIN_SIZE;
        if w < min_w || h < min_h || w > Self::MAX_SIDE || h > Self::MAX_SIDE {
            return Err(PlotError::Size {
                width: w,
                height: h,
            });
        }
        Ok(())
    }
}

fn checked(output: &Output, options: &PlotOptions) -> Result<DashboardData, PlotError> {
    options.check()?;
    if output.is_empty() {
        return Err(PlotError::Empty);
    }
    Ok(DashboardData::from_output(output))
}

/// Draws into an RGB buffer (`width · height · 3` bytes, row-major).
///
/// # Errors
///
/// [`PlotError::Empty`] for an empty output, [`PlotError::Size`], [`PlotError::Draw`].
pub fn render_rgb(
    output: &Output,
    options: &PlotOptions,
) -> Result<(Vec<u8>, Rendered), PlotError> {
    rgb_of(&checked(output, options)?, options)
}

fn rgb_of(data: &DashboardData, options: &PlotOptions) -> Result<(Vec<u8>, Rendered), PlotError> {
    let mut buffer = vec![0u8; options.width as usize * options.height as usize * 3];
    let rendered = {
        let root = BitMapBackend::with_buffer(&mut buffer, (options.width, options.height))
            .into_drawing_area();
        let rendered = dashboard::draw(&root, data, options.screen, &options.title)?;
        root.present().map_err(error::draw_err)?;
        rendered
    };
    Ok((buffer, rendered))
}

/// Draws a PNG image, encoded in memory.
///
/// # Errors
///
/// As [`render_rgb`], and [`PlotError::Draw`] if the encoder fails.
pub fn render_png(
    output: &Output,
    options: &PlotOptions,
) -> Result<(Vec<u8>, Rendered), PlotError> {
    png_of(&checked(output, options)?, options)
}

fn png_of(data: &DashboardData, options: &PlotOptions) -> Result<(Vec<u8>, Rendered), PlotError> {
    let (rgb, rendered) = rgb_of(data, options)?;
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(&rgb, options.width, options.height, image::ColorType::Rgb8)
        .map_err(error::draw_err)?;
    Ok((png, rendered))
}

/// Draws an SVG document.
///
/// # Errors
///
/// As [`render_rgb`].
pub fn render_svg(output: &Output, options: &PlotOptions) -> Result<(String, Rendered), PlotError> {
    svg_of(&checked(output, options)?, options)
}

fn svg_of(data: &DashboardData, options: &PlotOptions) -> Result<(String, Rendered), PlotError> {
    let mut svg = String::new();
    let rendered = {
        let root =
            SVGBackend::with_string(&mut svg, (options.width, options.height)).into_drawing_area();
        let rendered = dashboard::draw(&root, data, options.screen, &options.title)?;
        root.present().map_err(error::draw_err)?;
        rendered
    };
    Ok((svg, rendered))
}

/// Draws `output` into `path`, PNG or SVG by its extension. The image is drawn in memory and
/// the file replaced atomically
/// ([`write_atomic`]): an interruption or a full disk
/// leaves the previous image (or none), never a cut one, and concurrent writers never share a
/// temporary file. Panels whose data the log lacks are left blank; the returned
/// [`Rendered::blank_advice`] says which quantities would fill them:
///
/// ```ignore
/// let rendered = cockpit_plot::save(cockpit.output(), "run.png", &PlotOptions::default())?;
/// if let Some(advice) = rendered.blank_advice() {
///     eprintln!("{advice}"); // "left blank, …; add to the Cockpit: HessMaxEV; HessTrace; …"
/// }
/// ```
///
/// # Errors
///
/// [`PlotError::Format`] for another extension, [`PlotError::Write`] if the file cannot be
/// written, and those of [`render_rgb`].
pub fn save(
    output: &Output,
    path: impl AsRef<Path>,
    options: &PlotOptions,
) -> Result<Rendered, PlotError> {
    save_data(&checked(output, options)?, path.as_ref(), options)
}

fn save_data(
    data: &DashboardData,
    path: &Path,
    options: &PlotOptions,
) -> Result<Rendered, PlotError> {
    let write_err = |err: std::io::Error| PlotError::Write {
        path: path.to_path_buf(),
        source: err,
    };
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => {
            let (svg, rendered) = svg_of(data, options)?;
            write_atomic(path, |file| file.write_all(svg.as_bytes())).map_err(write_err)?;
            Ok(rendered)
        }
        Some("png") => {
            let (png, rendered) = png_of(data, options)?;
            write_atomic(path, |file| file.write_all(&png)).map_err(write_err)?;
            Ok(rendered)
        }
        _ => Err(PlotError::Format(path.to_path_buf())),
    }
}

/// Reads a log (`.jsonl`: the JSON-lines stream; anything else: Cockpit's JSON log) and
/// draws it into `out`. Where the run wrote its per-example table beside the log
/// (`run.examples.csv`, for `run.json` or `run.jsonl`), the secondary screen's examples view
/// also draws the data map ([`DashboardData::with_examples_table`]).
///
/// # Errors
///
/// [`PlotError::Log`] if the log or the table beside it cannot be read, and those of
/// [`save`].
pub fn plot_file(
    log: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: &PlotOptions,
) -> Result<Rendered, PlotError> {
    plot_file_with(&Reader::default(), log, out, options)
}

/// [`plot_file`], reading the log and its table within `reader`'s limit.
///
/// # Errors
///
/// As [`plot_file`].
pub fn plot_file_with(
    reader: &Reader,
    log: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: &PlotOptions,
) -> Result<Rendered, PlotError> {
    let log = log.as_ref();
    let output = read_any_with(reader, log).map_err(PlotError::from)?;
    let mut data = checked(&output, options)?;
    // `run.json` and `run.jsonl` share the stem, so the one table beside both.
    let table = cockpit_quantities::examples::table_path(log);
    if table.is_file() {
        let rows = cockpit_quantities::examples::read_table_with(reader, &table)?;
        data = data.with_examples_table(&rows);
    }
    save_data(&data, out.as_ref(), options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cockpit_quantities::Value;

    /// A run of losses and gradient norms alone leaves the curvature and the hyperparameters
    /// blank, and the advice names what fills them, each once; on the secondary screen every
    /// blank panel names its quantity.
    #[test]
    fn blank_panels_say_what_fills_them() {
        let mut output = Output::new();
        for step in 0..5 {
            output.insert(step, "Loss", Value::Float(1.0 / (1.0 + step as f64)));
            output.insert(step, "GradNorm", Value::List(vec![0.5, 0.25]));
        }
        let options = PlotOptions::default();
        let (_, rendered) = render_svg(&output, &options).unwrap();
        let advice = rendered.blank_advice().unwrap();
        for needed in ["HessTrace", "HessMaxEV", "EpochLog", "Alpha"] {
            assert_eq!(advice.matches(needed).count(), 1, "{needed}: {advice}");
        }
        assert!(
            !advice.contains("GradNorm") && !advice.contains("Loss"),
            "{advice}"
        );
        let secondary = PlotOptions {
            screen: Screen::Secondary,
            ..options
        };
        let (_, rendered) = render_svg(&output, &secondary).unwrap();
        let advice = rendered.blank_advice().unwrap();
        assert!(advice.contains("GradParamRatio"), "{advice}");
        assert!(!advice.contains("its quantity"), "{advice}");
        assert!(advice.contains("CABS (plain SGD only)"), "{advice}");
        // Under Adam (or momentum), nothing the Cockpit would refuse is asked for.
        let adam = rendered.blank_advice_for(false).unwrap();
        assert!(
            !adam.contains("CABS") && !adam.contains("EarlyStopping"),
            "{adam}"
        );
        assert!(adam.contains("MeanGSNR"), "{adam}");
    }
}
