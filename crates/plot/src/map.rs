//! The data map (dataset cartography, Swayamdipta et al., 2020): each example of an
//! [`Examples`](cockpit_quantities::quantity::Examples) record as a point at its variability
//! (x) and confidence (y), coloured by its forgetting events or by what the record suggests,
//! with the three regions marked.

use std::io::Write;
use std::path::Path;

use cockpit_quantities::examples::{
    ExampleStats, MapBorders, Region, Suspicion, coordinates, suspicion,
};
use cockpit_quantities::log::write_atomic;
use image::ImageEncoder;
use plotters::prelude::*;

use crate::error::draw_err;
use crate::style::{BLUE, GREEN, INK, ORANGE, PAGE, PANEL};
use crate::{PlotError, PlotOptions};

/// What the points' colours say.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum MapColour {
    /// Forgetting events: none, one, two or more (Toneva et al., 2019).
    Forgetting,
    /// What the record suggests ([`suspicion`]), the learned threshold being this loss.
    Suspicion {
        /// The loss under which an example counts as learned (`Examples`' `learned_loss`).
        learned_loss: f64,
    },
}

/// The map's size and colouring.
#[derive(Debug, Clone, PartialEq)]
pub struct MapOptions {
    /// Width in pixels (default 1200).
    pub width: u32,
    /// Height in pixels (default 900).
    pub height: u32,
    /// The colouring (default: forgetting events).
    pub colour: MapColour,
}

impl Default for MapOptions {
    fn default() -> Self {
        Self {
            width: 1200,
            height: 900,
            colour: MapColour::Forgetting,
        }
    }
}

/// What was drawn.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct DrawnMap {
    /// Examples drawn (those with a confidence).
    pub drawn: usize,
    /// Examples without a confidence (a loss that is not a cross-entropy), not drawn.
    pub without_confidence: usize,
    /// Examples per region, in [`Region`] order (easy, ambiguous, hard).
    pub regions: [usize; 3],
}

/// The classes of the colouring, with their colour and legend text.
fn classes(colour: MapColour) -> Vec<(RGBColor, &'static str)> {
    match colour {
        MapColour::Forgetting => vec![
            (BLUE, "never forgotten"),
            (ORANGE, "forgotten once"),
            (RGBColor(0xc0, 0x39, 0x2b), "forgotten twice or more"),
        ],
        MapColour::Suspicion { .. } => vec![
            (GREEN, "unremarkable"),
            (BLUE, "hard"),
            (ORANGE, "forgotten"),
            (RGBColor(0xc0, 0x39, 0x2b), "likely-mislabeled"),
            (RGBColor(0x6c, 0x34, 0x83), "never-learned"),
        ],
    }
}

/// The class index of one example.
fn class(stats: &ExampleStats, colour: MapColour) -> usize {
    match colour {
        MapColour::Forgetting => stats.forgetting.min(2) as usize,
        MapColour::Suspicion { learned_loss } => match suspicion(stats, learned_loss) {
            Suspicion::Hard => 1,
            Suspicion::Forgotten => 2,
            Suspicion::MislabeledLike => 3,
            Suspicion::NeverLearned => 4,
            _ => 0,
        },
    }
}

/// Draws the map of `rows` onto `root`.
///
/// # Errors
///
/// [`PlotError::Size`] below 600×300 pixels, [`PlotError::Draw`] if the backend fails.
pub fn draw_map<DB: crate::Canvas>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[ExampleStats],
    colour: MapColour,
) -> Result<DrawnMap, PlotError> {
    let (width, height) = root.dim_in_pixel();
    let (min_width, min_height) = PlotOptions::MIN_SIZE;
    if width < min_width || height < min_height {
        return Err(PlotError::Size { width, height });
    }
    crate::font::register()?;
    root.fill(&PAGE).map_err(draw_err)?;
    let px = |size: f64| size * height as f64 / 900.0;
    let text = |size: f64| ("sans-serif", px(size)).into_font();
    let placed: Vec<((f64, f64), usize)> = rows
        .iter()
        .filter_map(|stats| coordinates(stats).map(|xy| (xy, class(stats, colour))))
        .collect();
    let borders = MapBorders::of(rows);
    let mut drawn = DrawnMap {
        drawn: placed.len(),
        without_confidence: rows.len() - placed.len(),
        ..DrawnMap::default()
    };
    for stats in rows {
        if let Some(region) = borders.and_then(|b| b.region(stats)) {
            drawn.regions[region as usize] += 1;
        }
    }
    // A band for the title and the legend, the chart under it.
    let band = (height as f64 * 0.11) as u32;
    let (header, body) = root.split_vertically(band);
    let title = format!(
        "Data map: {} examples ({} easy-to-learn, {} ambiguous, {} hard-to-learn)",
        drawn.drawn, drawn.regions[0], drawn.regions[1], drawn.regions[2]
    );
    header
        .draw(&Text::new(
            title,
            ((width / 12) as i32, px(12.0) as i32),
            text(26.0).color(&INK),
        ))
        .map_err(draw_err)?;
    let classes = classes(colour);
    let radius = (px(3.0).round() as i32).max(2);
    let (mut x, y) = ((width / 12) as i32, (band as f64 * 0.72) as i32);
    for (colour, label) in &classes {
        let style = text(16.0).color(&INK);
        header
            .draw(&Circle::new((x, y), radius + 2, colour.filled()))
            .map_err(draw_err)?;
        header
            .draw(&Text::new(
                label.to_string(),
                (x + radius + 8, y - px(8.0) as i32),
                style.clone(),
            ))
            .map_err(draw_err)?;
        let (w, _) = header.estimate_text_size(label, &style).map_err(draw_err)?;
        x += radius + 8 + w as i32 + px(30.0) as i32;
    }
    let x_max = (placed.iter().map(|((x, _), _)| *x).fold(0.05_f64, f64::max) * 1.08).min(1.0);
    let mut chart = ChartBuilder::on(&body)
        .margin_right((width / 40).max(8))
        .margin_bottom((height / 60).max(4))
        .x_label_area_size(height / 12)
        .y_label_area_size(width / 10)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)
        .map_err(draw_err)?;
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("variability (spread of the labelled class's probability across visits)")
        .y_desc("confidence (its mean)")
        .label_style(text(16.0).color(&INK))
        .axis_desc_style(text(18.0).color(&INK))
        .light_line_style(PAGE.mix(0.6))
        .bold_line_style(PAGE)
        .draw()
        .map_err(draw_err)?;
    // Common classes first, so that the rare ones stay visible on top.
    for (index, (colour, _)) in classes.iter().enumerate() {
        chart
            .draw_series(
                placed
                    .iter()
                    .filter(|(_, c)| *c == index)
                    .map(|((x, y), _)| Circle::new((*x, *y), radius, colour.mix(0.7).filled())),
            )
            .map_err(draw_err)?;
    }
    // The regions' borders, and their names on a white ground at the regions' outer corners.
    if let Some(borders) = borders {
        draw_borders(&mut chart, &borders, 2)?;
        let inset = px(8.0) as i32;
        let corners = [
            (
                Region::EasyToLearn,
                chart.backend_coord(&(0.0, 1.0)),
                false,
                false,
            ),
            (
                Region::HardToLearn,
                chart.backend_coord(&(0.0, 0.0)),
                false,
                true,
            ),
            (
                Region::Ambiguous,
                chart.backend_coord(&(x_max, 1.0)),
                true,
                false,
            ),
        ];
        let style = text(18.0).color(&INK);
        for (region, (cx, cy), right, bottom) in corners {
            let label = region.label();
            let (w, h) = body.estimate_text_size(label, &style).map_err(draw_err)?;
            let (w, h) = (w as i32, h as i32);
            let left = if right { cx - inset - w } else { cx + inset };
            let top = if bottom { cy - inset - h } else { cy + inset };
            let (ox, oy) = body.get_base_pixel();
            let (left, top) = (left - ox, top - oy);
            body.draw(&Rectangle::new(
                [(left - 4, top - 3), (left + w + 4, top + h + 3)],
                PAGE.mix(0.85).filled(),
            ))
            .map_err(draw_err)?;
            body.draw(&Text::new(label.to_string(), (left, top), style.clone()))
                .map_err(draw_err)?;
        }
    }
    root.present().map_err(draw_err)?;
    Ok(drawn)
}

/// The regions' borders of `borders` on a map's chart: the variability border from bottom to
/// top, the confidence border left of it.
pub(crate) fn draw_borders<DB: crate::Canvas>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    borders: &MapBorders,
    width: u32,
) -> Result<(), PlotError> {
    let guide = ShapeStyle::from(&INK.mix(0.6)).stroke_width(width);
    let (v, c) = (borders.variability, borders.confidence);
    chart
        .draw_series([
            PathElement::new([(v, 0.0), (v, 1.0)], guide),
            PathElement::new([(0.0, c), (v, c)], guide),
        ])
        .map_err(draw_err)?;
    Ok(())
}

/// Draws the map as a PNG image in memory.
///
/// # Errors
///
/// As [`draw_map`], [`PlotError::Size`] above [`PlotOptions::MAX_SIDE`].
pub fn render_map_png(
    rows: &[ExampleStats],
    options: &MapOptions,
) -> Result<(Vec<u8>, DrawnMap), PlotError> {
    let (width, height) = (options.width, options.height);
    PlotOptions {
        width,
        height,
        ..PlotOptions::default()
    }
    .check()?;
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    let drawn = {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        draw_map(&root, rows, options.colour)?
    };
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(&rgb, width, height, image::ColorType::Rgb8)
        .map_err(draw_err)?;
    Ok((png, drawn))
}

/// Writes the map of `rows` to `path` as a PNG image, replaced atomically.
///
/// # Errors
///
/// [`PlotError::Format`] for a name not ending in `.png`, [`PlotError::Write`] if the file
/// cannot be written, and those of [`render_map_png`].
pub fn save_map(
    path: impl AsRef<Path>,
    rows: &[ExampleStats],
    options: &MapOptions,
) -> Result<DrawnMap, PlotError> {
    let path = path.as_ref();
    if !path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        return Err(PlotError::Format(path.to_path_buf()));
    }
    let (png, drawn) = render_map_png(rows, options)?;
    write_atomic(path, |file| file.write_all(&png)).map_err(|err| PlotError::Write {
        path: path.to_path_buf(),
        source: err,
    })?;
    Ok(drawn)
}

#[cfg(test)]
mod tests {
    use cockpit_quantities::examples::{ExampleRecord, Visit};

    use super::*;

    fn rows(margins: bool) -> Vec<ExampleStats> {
        let mut record = ExampleRecord::new(16, std::f64::consts::LN_2);
        for step in 0..4 {
            let visits: Vec<Visit> = (0..12)
                .map(|id| Visit {
                    id,
                    step,
                    loss: 0.1 * id as f64 * (1.0 + (step % 2) as f64),
                    grad_norm: 1.0,
                    relative_share: 1.0,
                    margin: margins.then_some(1.0 - 0.1 * id as f64),
                    worst: None,
                })
                .collect();
            record.fold(&visits);
        }
        record.rows().into_iter().cloned().collect()
    }

    /// Every example with a confidence is drawn and counted in one region; a loss without
    /// margins draws none and says so; a wrong name or size is refused before drawing.
    #[test]
    fn the_map_counts_what_it_draws_and_refuses_bad_requests() {
        let (png, drawn) = render_map_png(&rows(true), &MapOptions::default()).unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        assert_eq!((drawn.drawn, drawn.without_confidence), (12, 0));
        assert_eq!(drawn.regions.iter().sum::<usize>(), 12);
        let (_, none) = render_map_png(&rows(false), &MapOptions::default()).unwrap();
        assert_eq!((none.drawn, none.without_confidence), (0, 12));
        let small = MapOptions {
            width: 100,
            ..MapOptions::default()
        };
        assert!(matches!(
            render_map_png(&rows(true), &small),
            Err(PlotError::Size { .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            save_map(
                dir.path().join("map.svg"),
                &rows(true),
                &MapOptions::default()
            ),
            Err(PlotError::Format(_))
        ));
        let drawn = save_map(
            dir.path().join("map.png"),
            &rows(true),
            &MapOptions::default(),
        );
        assert_eq!(drawn.unwrap().drawn, 12);
    }
}
