//! The dashboard's layout: Cockpit's three columns of three instruments, the hyperparameter
//! and performance row, and the secondary screen.

use plotters::prelude::*;

use crate::data::DashboardData;
use crate::error::{PlotError, draw_err};
use crate::instrument::base::{Area, Scale};
use crate::instrument::{
    alpha_gauge, cabs_gauge, distance_gauge, early_stopping_gauge, grad_norm_gauge,
    gradient_tests_gauge, histogram_1d_gauge, histogram_2d_gauge, hyperparameter_gauge,
    max_ev_gauge, mean_gsnr_gauge, performance_gauge, tic_gauge, trace_gauge,
};
use crate::style::{BLUE, GREEN, GREY, INK, ORANGE, PAGE};

/// Which of CockpitPlotter's screens to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Screen {
    /// Step size, gradients, curvature, hyperparameters and performance.
    #[default]
    Primary,
    /// MeanGSNR, CABS, EarlyStopping and the per-layer 2d histograms.
    Secondary,
}

/// A pixel rectangle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width.
    pub w: u32,
    /// Height.
    pub h: u32,
}

/// A coloured column header ("STEP SIZE", …).
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The header's text.
    pub label: &'static str,
    /// Its colour, `(r, g, b)`.
    pub colour: (u8, u8, u8),
    /// Where it is.
    pub rect: Rect,
}

/// One instrument's place and whether it was drawn (its data present).
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Cockpit's instrument name (`alpha_gauge`, …; `layerwise[<i>]` on the secondary screen).
    pub name: String,
    /// Where it is.
    pub rect: Rect,
    /// Whether it was drawn; a panel whose data is missing is left blank.
    pub drawn: bool,
}

/// What was drawn where: the structure tests and callers can check it without reading pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
    /// Column headers.
    pub headers: Vec<Header>,
    /// Instruments.
    pub panels: Vec<Panel>,
}

impl Rendered {
    /// The panel of an instrument.
    pub fn panel(&self, name: &str) -> Option<&Panel> {
        self.panels.iter().find(|p| p.name == name)
    }
}

type Instrument<DB> = fn(&Area<DB>, Scale, &DashboardData) -> Result<bool, PlotError>;

/// A column: its header, colour and three named instruments.
type Column<DB> = (&'static str, RGBColor, [(&'static str, Instrument<DB>); 3]);

/// Draws `screen` of the dashboard onto `root` (any plotters backend).
///
/// # Errors
///
/// [`PlotError::Size`] below 600×300 pixels, [`PlotError::Draw`] if the backend fails.
pub fn draw<DB: DrawingBackend>(
    root: &Area<DB>,
    data: &DashboardData,
    screen: Screen,
    title: &str,
) -> Result<Rendered, PlotError> {
    let (width, height) = root.dim_in_pixel();
    if width < 600 || height < 300 {
        return Err(PlotError::Size { width, height });
    }
    crate::font::register()?;
    let scale = Scale(height as f64 / 1200.0);
    root.fill(&PAGE).map_err(draw_err)?;
    let title_h = (height as f64 * 0.045) as u32;
    root.draw(&Text::new(
        title.to_string(),
        ((width / 2) as i32, (title_h / 3) as i32),
        scale.font(30.0).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        )),
    ))
    .map_err(draw_err)?;
    let mut rendered = Rendered {
        width,
        height,
        headers: Vec::new(),
        panels: Vec::new(),
    };
    let gap = (width as f64 * 0.008) as u32;
    let header_h = (height as f64 * 0.028) as u32;
    let top = title_h;
    let body_h = height - top - gap;
    let col_w = (width - 4 * gap) / 3;
    let col_x = |c: u32| gap + c * (col_w + gap);

    match screen {
        Screen::Primary => {
            let top_h = (body_h - gap) * 3 / 4;
            let bottom_y = top + top_h + gap;
            let bottom_h = height - bottom_y - gap;
            let columns: [Column<DB>; 3] = [
                (
                    "STEP SIZE",
                    BLUE,
                    [
                        ("alpha_gauge", alpha_gauge::draw::<DB>),
                        ("distance_gauge", distance_gauge::draw::<DB>),
                        ("grad_norm_gauge", grad_norm_gauge::draw::<DB>),
                    ],
                ),
                (
                    "GRADIENTS",
                    ORANGE,
                    [
                        ("gradient_tests_gauge", gradient_tests_gauge::draw::<DB>),
                        ("histogram_1d_gauge", histogram_1d_gauge::draw::<DB>),
                        ("histogram_2d_gauge", histogram_2d_gauge::draw::<DB>),
                    ],
                ),
                (
                    "CURVATURE",
                    GREEN,
                    [
                        ("max_ev_gauge", max_ev_gauge::draw::<DB>),
                        ("trace_gauge", trace_gauge::draw::<DB>),
                        ("tic_gauge", tic_gauge::draw::<DB>),
                    ],
                ),
            ];
            for (c, (label, colour, instruments)) in columns.into_iter().enumerate() {
                let x = col_x(c as u32);
                let cell = Rect {
                    x,
                    y: top,
                    w: col_w,
                    h: top_h,
                };
                column(
                    root,
                    scale,
                    data,
                    &mut rendered,
                    cell,
                    header_h,
                    label,
                    colour,
                    &instruments,
                )?;
            }
            let hyper = Rect {
                x: col_x(0),
                y: bottom_y,
                w: col_w,
                h: bottom_h,
            };
            column(
                root,
                scale,
                data,
                &mut rendered,
                hyper,
                header_h,
                "HYPERPARAMETERS",
                GREY,
                &[("hyperparameter_gauge", hyperparameter_gauge::draw::<DB>)],
            )?;
            let perf = Rect {
                x: col_x(1),
                y: bottom_y,
                w: 2 * col_w + gap,
                h: bottom_h,
            };
            column(
                root,
                scale,
                data,
                &mut rendered,
                perf,
                header_h,
                "PERFORMANCE",
                GREY,
                &[("performance_gauge", performance_gauge::draw::<DB>)],
            )?;
        }
        Screen::Secondary => {
            let aux = Rect {
                x: col_x(0),
                y: top,
                w: col_w,
                h: body_h,
            };
            column(
                root,
                scale,
                data,
                &mut rendered,
                aux,
                header_h,
                "AUXILIARY",
                GREY,
                &[
                    ("mean_gsnr_gauge", mean_gsnr_gauge::draw::<DB>),
                    ("cabs_gauge", cabs_gauge::draw::<DB>),
                    ("early_stopping_gauge", early_stopping_gauge::draw::<DB>),
                ],
            )?;
            let layer = Rect {
                x: col_x(1),
                y: top,
                w: 2 * col_w + gap,
                h: body_h,
            };
            layerwise(root, scale, data, &mut rendered, layer, header_h)?;
        }
    }
    Ok(rendered)
}

fn sub<DB: DrawingBackend>(root: &Area<DB>, r: Rect) -> Area<DB> {
    root.clone().shrink((r.x, r.y), (r.w, r.h))
}

fn header<DB: DrawingBackend>(
    root: &Area<DB>,
    scale: Scale,
    rendered: &mut Rendered,
    rect: Rect,
    label: &'static str,
    colour: RGBColor,
) -> Result<(), PlotError> {
    let area = sub(root, rect);
    area.fill(&colour).map_err(draw_err)?;
    area.draw(&Text::new(
        label,
        ((rect.w / 2) as i32, (rect.h / 2) as i32),
        scale
            .font(18.0)
            .color(&PAGE)
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Center,
            )),
    ))
    .map_err(draw_err)?;
    rendered.headers.push(Header {
        label,
        colour: (colour.0, colour.1, colour.2),
        rect,
    });
    Ok(())
}

/// A header and instruments stacked below it.
#[allow(clippy::too_many_arguments)]
fn column<DB: DrawingBackend>(
    root: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
    rendered: &mut Rendered,
    cell: Rect,
    header_h: u32,
    label: &'static str,
    colour: RGBColor,
    instruments: &[(&str, Instrument<DB>)],
) -> Result<(), PlotError> {
    header(
        root,
        scale,
        rendered,
        Rect {
            h: header_h,
            ..cell
        },
        label,
        colour,
    )?;
    let n = instruments.len() as u32;
    let body_y = cell.y + header_h;
    let each = (cell.h - header_h) / n.max(1);
    for (i, (name, instrument)) in instruments.iter().enumerate() {
        let rect = Rect {
            x: cell.x,
            y: body_y + i as u32 * each,
            w: cell.w,
            h: each,
        };
        let drawn = instrument(&sub(root, rect), scale, data)?;
        rendered.panels.push(Panel {
            name: (*name).to_string(),
            rect,
            drawn,
        });
    }
    Ok(())
}

/// One 2d histogram per parameter (`GradHist2d` with `keep_individual`), on a grid of at
/// least 2×2.
fn layerwise<DB: DrawingBackend>(
    root: &Area<DB>,
    scale: Scale,
    data: &DashboardData,
    rendered: &mut Rendered,
    cell: Rect,
    header_h: u32,
) -> Result<(), PlotError> {
    header(
        root,
        scale,
        rendered,
        Rect {
            h: header_h,
            ..cell
        },
        "LAYERWISE",
        GREY,
    )?;
    let individual = data
        .hist2d
        .as_ref()
        .map(|(_, h)| h.individual.as_slice())
        .unwrap_or_default();
    let side = (individual.len() as f64).sqrt().ceil().max(2.0) as u32;
    let (w, h) = (cell.w / side, (cell.h - header_h) / side);
    for (i, hist) in individual.iter().enumerate() {
        let (r, c) = (i as u32 / side, i as u32 % side);
        let rect = Rect {
            x: cell.x + c * w,
            y: cell.y + header_h + r * h,
            w,
            h,
        };
        let small = Scale(scale.0 * 0.8);
        let drawn = histogram_2d_gauge::draw_histogram(
            &sub(root, rect),
            small,
            &format!("parameter {i}"),
            hist,
        )?;
        rendered.panels.push(Panel {
            name: format!("layerwise[{i}]"),
            rect,
            drawn,
        });
    }
    if individual.is_empty() {
        let area = sub(
            root,
            Rect {
                y: cell.y + header_h,
                h: cell.h - header_h,
                ..cell
            },
        );
        area.draw(&Text::new(
            "no per-layer histograms (GradHist2d with keep_individual)",
            (scale.px(20.0) as i32, scale.px(30.0) as i32),
            scale.font(14.0).color(&INK),
        ))
        .map_err(draw_err)?;
    }
    Ok(())
}
