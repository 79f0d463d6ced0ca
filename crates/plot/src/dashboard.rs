//! The dashboard's layout: Cockpit's three columns of three instruments, the hyperparameter
//! and performance row, and the secondary screen.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::data::DashboardData;
use crate::error::{PlotError, draw_err};
use crate::instrument::base::{Area, Scale};
use crate::instrument::{
    alpha_gauge, cabs_gauge, distance_gauge, early_stopping_gauge, examples_gauge, grad_norm_gauge,
    gradient_tests_gauge, histogram_1d_gauge, histogram_2d_gauge, hyperparameter_gauge,
    max_ev_gauge, mean_gsnr_gauge, performance_gauge, quantity_gauge, tic_gauge, trace_gauge,
};
use crate::style::{BLUE, GREEN, GREY, INK, ORANGE, PAGE};
use cockpit_quantities::QuantityKind;

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

impl Panel {
    /// What a log needs for this instrument to be drawn: the quantities to add to the Cockpit
    /// (or the epoch log's keys).
    pub fn needs(&self) -> &'static str {
        match self.name.as_str() {
            "alpha_gauge" => "Alpha (two tracked steps in a row)",
            "distance_gauge" => "Distance and UpdateSize",
            "grad_norm_gauge" => "GradNorm",
            "gradient_tests_gauge" => "NormTest, InnerTest and OrthoTest",
            "histogram_1d_gauge" => "GradHist1d",
            "histogram_2d_gauge" => "GradHist2d",
            "max_ev_gauge" => "HessMaxEV",
            "trace_gauge" => "HessTrace",
            "tic_gauge" => "TICDiag or TICTrace",
            "hyperparameter_gauge" => "the learning rate (Cockpit::log with an EpochLog)",
            "performance_gauge" => "Loss",
            "mean_gsnr_gauge" => "MeanGSNR",
            "cabs_gauge" => "CABS (plain SGD only)",
            "early_stopping_gauge" => "EarlyStopping (plain SGD only)",
            "examples_gauge" => "Examples (with sample ids)",
            name if name.starts_with("layerwise") => "GradHist2d",
            // The quantities drawn by name (the secondary screen's GradParamRatio).
            name => SECONDARY_QUANTITIES
                .iter()
                .find(|kind| name.strip_suffix("_gauge") == Some(kind.name()))
                .map_or("its quantity", |kind| kind.name()),
        }
    }
}

impl Panel {
    /// Whether the quantity this panel draws is computed only under plain SGD (CABS and
    /// EarlyStopping: the Cockpit refuses them under momentum, Adam and the others, as
    /// Cockpit does).
    pub fn plain_sgd_only(&self) -> bool {
        matches!(self.name.as_str(), "cabs_gauge" | "early_stopping_gauge")
    }
}

impl Rendered {
    /// The panel of an instrument.
    pub fn panel(&self, name: &str) -> Option<&Panel> {
        self.panels.iter().find(|p| p.name == name)
    }

    /// What the panels left blank need, in words for the user (`None` when every panel was
    /// drawn): "left blank, the log has no data for them; add to the Cockpit: HessMaxEV;
    /// HessTrace; …", the line `cockpit plot` prints. A run with `economy` leaves the
    /// curvature column blank, one without an epoch log the hyperparameters.
    pub fn blank_advice(&self) -> Option<String> {
        self.blank_advice_for(true)
    }

    /// [`Rendered::blank_advice`] for a run under `plain_sgd` or not
    /// ([`OptimizerInfo::is_plain_sgd`](cockpit_quantities::OptimizerInfo::is_plain_sgd)):
    /// under momentum, Adam and the others it never asks for CABS or EarlyStopping, which the
    /// Cockpit refuses there.
    pub fn blank_advice_for(&self, plain_sgd: bool) -> Option<String> {
        let mut missing: Vec<&str> = Vec::new();
        for panel in self
            .panels
            .iter()
            .filter(|p| !p.drawn && (plain_sgd || !p.plain_sgd_only()))
        {
            if !missing.contains(&panel.needs()) {
                missing.push(panel.needs());
            }
        }
        (!missing.is_empty()).then(|| {
            format!(
                "left blank, the log has no data for them; add to the Cockpit: {}",
                missing.join("; ")
            )
        })
    }
}

type Instrument<DB> = fn(&Area<DB>, Scale, &DashboardData) -> Result<bool, PlotError>;

/// The quantities the secondary screen draws below Cockpit's auxiliary instruments, each by
/// its kind (the quantity gauge): a new quantity shows there by its line here.
pub const SECONDARY_QUANTITIES: &[QuantityKind] = &[QuantityKind::GradParamRatio];

/// A column: its header, colour and three named instruments.
type Column<DB> = (&'static str, RGBColor, [(&'static str, Instrument<DB>); 3]);

/// Draws `screen` of the dashboard onto `root` (any plotters backend).
///
/// # Errors
///
/// [`PlotError::Size`] below 600×300 pixels, [`PlotError::Draw`] if the backend fails.
pub fn draw<DB: crate::Canvas>(
    root: &Area<DB>,
    data: &DashboardData,
    screen: Screen,
    title: &str,
) -> Result<Rendered, PlotError> {
    let (width, height) = root.dim_in_pixel();
    let (min_width, min_height) = crate::PlotOptions::MIN_SIZE;
    if width < min_width || height < min_height {
        return Err(PlotError::Size { width, height });
    }
    crate::font::register()?;
    let scale = Scale(height as f64 / 1200.0);
    root.fill(&PAGE).map_err(draw_err)?;
    let title_h = (height as f64 * 0.045) as u32;
    root.draw(&Text::new(
        title.to_string(),
        ((width / 2) as i32, (title_h / 3) as i32),
        scale.font(30.0).pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(draw_err)?;
    let mut page = Page {
        root,
        scale,
        data,
        header_h: (height as f64 * 0.028) as u32,
        rendered: Rendered {
            width,
            height,
            headers: Vec::new(),
            panels: Vec::new(),
        },
    };
    // Gaps follow the shorter side, so that very wide or very tall images still lay out.
    let gap = (width as f64 * 0.008).min(height as f64 * 0.016) as u32;
    let top = title_h;
    let body_h = height.saturating_sub(top + gap);
    let col_w = width.saturating_sub(4 * gap) / 3;
    let col_x = |c: u32| gap + c * (col_w + gap);

    match screen {
        Screen::Primary => {
            let top_h = body_h.saturating_sub(gap) * 3 / 4;
            let bottom_y = top + top_h + gap;
            let bottom_h = height.saturating_sub(bottom_y + gap);
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
                let cell = Rect {
                    x: col_x(c as u32),
                    y: top,
                    w: col_w,
                    h: top_h,
                };
                page.column(cell, label, colour, &instruments, &[])?;
            }
            let hyper = Rect {
                x: col_x(0),
                y: bottom_y,
                w: col_w,
                h: bottom_h,
            };
            page.column(
                hyper,
                "HYPERPARAMETERS",
                GREY,
                &[("hyperparameter_gauge", hyperparameter_gauge::draw::<DB>)],
                &[],
            )?;
            let perf = Rect {
                x: col_x(1),
                y: bottom_y,
                w: 2 * col_w + gap,
                h: bottom_h,
            };
            page.column(
                perf,
                "PERFORMANCE",
                GREY,
                &[("performance_gauge", performance_gauge::draw::<DB>)],
                &[],
            )?;
        }
        Screen::Secondary => {
            let aux = Rect {
                x: col_x(0),
                y: top,
                w: col_w,
                h: body_h,
            };
            page.column(
                aux,
                "AUXILIARY",
                GREY,
                &[
                    ("mean_gsnr_gauge", mean_gsnr_gauge::draw::<DB>),
                    ("cabs_gauge", cabs_gauge::draw::<DB>),
                    ("early_stopping_gauge", early_stopping_gauge::draw::<DB>),
                ],
                SECONDARY_QUANTITIES,
            )?;
            let right = Rect {
                x: col_x(1),
                y: top,
                w: 2 * col_w + gap,
                h: body_h,
            };
            let layerwise = data
                .hist2d
                .as_ref()
                .is_some_and(|(_, h)| !h.individual.is_empty());
            if data.examples_top.is_some() {
                // The examples (beyond Cockpit) below the per-layer histograms, or in their
                // place when there are none.
                // The height the per-layer histograms and their gap take (none without them).
                let taken = if layerwise {
                    let upper = body_h.saturating_sub(gap) * 3 / 5;
                    page.layerwise(Rect { h: upper, ..right })?;
                    upper + gap
                } else {
                    0
                };
                let lower = Rect {
                    y: top + taken,
                    h: body_h.saturating_sub(taken),
                    ..right
                };
                page.column(
                    lower,
                    "EXAMPLES",
                    GREY,
                    &[("examples_gauge", examples_gauge::draw::<DB>)],
                    &[],
                )?;
            } else {
                page.layerwise(right)?;
            }
        }
    }
    Ok(page.rendered)
}

/// The drawing in progress: where it goes, what it draws, and what has been drawn.
struct Page<'a, DB: crate::Canvas> {
    root: &'a Area<DB>,
    scale: Scale,
    data: &'a DashboardData,
    header_h: u32,
    rendered: Rendered,
}

impl<DB: crate::Canvas> Page<'_, DB> {
    fn area(&self, r: Rect) -> Area<DB> {
        self.root.clone().shrink((r.x, r.y), (r.w, r.h))
    }

    /// Draws the header band at the top of `cell` and returns the rest of the cell.
    fn header(
        &mut self,
        cell: Rect,
        label: &'static str,
        colour: RGBColor,
    ) -> Result<Rect, PlotError> {
        let rect = Rect {
            h: self.header_h,
            ..cell
        };
        let area = self.area(rect);
        area.fill(&colour).map_err(draw_err)?;
        area.draw(&Text::new(
            label,
            ((rect.w / 2) as i32, (rect.h / 2) as i32),
            self.scale
                .font(18.0)
                .color(&PAGE)
                .pos(Pos::new(HPos::Center, VPos::Center)),
        ))
        .map_err(draw_err)?;
        self.rendered.headers.push(Header {
            label,
            colour: (colour.0, colour.1, colour.2),
            rect,
        });
        Ok(Rect {
            y: cell.y + self.header_h,
            h: cell.h.saturating_sub(self.header_h),
            ..cell
        })
    }

    /// Records that instrument `name` was (or was not) drawn into `rect`.
    /// Records a panel; a blank one is labelled with what fills it ("not tracked: add …").
    fn record(&mut self, name: String, rect: Rect, drawn: bool) -> Result<(), PlotError> {
        let panel = Panel { name, rect, drawn };
        if !drawn {
            let (w, h) = (rect.w as i32, rect.h as i32);
            let style = self
                .scale
                .font(13.0)
                .color(&GREY)
                .pos(Pos::new(HPos::Center, VPos::Center));
            let area = self.area(rect);
            area.draw(&Text::new(
                "not tracked: add".to_string(),
                (w / 2, h / 2 - self.scale.px(10.0) as i32),
                style.clone(),
            ))
            .map_err(draw_err)?;
            area.draw(&Text::new(
                panel.needs().to_string(),
                (w / 2, h / 2 + self.scale.px(10.0) as i32),
                style,
            ))
            .map_err(draw_err)?;
        }
        self.rendered.panels.push(panel);
        Ok(())
    }

    /// A header and instruments stacked below it.
    fn column(
        &mut self,
        cell: Rect,
        label: &'static str,
        colour: RGBColor,
        instruments: &[(&str, Instrument<DB>)],
        quantities: &[QuantityKind],
    ) -> Result<(), PlotError> {
        let body = self.header(cell, label, colour)?;
        let each = body.h / ((instruments.len() + quantities.len()) as u32).max(1);
        let rect = |i: usize| Rect {
            y: body.y + i as u32 * each,
            h: each,
            ..body
        };
        for (i, (name, instrument)) in instruments.iter().enumerate() {
            let drawn = instrument(&self.area(rect(i)), self.scale, self.data)?;
            self.record((*name).to_string(), rect(i), drawn)?;
        }
        for (j, kind) in quantities.iter().enumerate() {
            let at = rect(instruments.len() + j);
            let drawn = quantity_gauge::draw(&self.area(at), self.scale, self.data, *kind)?;
            self.record(format!("{}_gauge", kind.name()), at, drawn)?;
        }
        Ok(())
    }

    /// One 2d histogram per parameter (`GradHist2d` with `keep_individual`), on a grid of at
    /// least 2×2.
    fn layerwise(&mut self, cell: Rect) -> Result<(), PlotError> {
        let body = self.header(cell, "LAYERWISE", GREY)?;
        let data = self.data;
        let individual = data
            .hist2d
            .as_ref()
            .map(|(_, h)| h.individual.as_slice())
            .unwrap_or_default();
        let side = (individual.len() as f64).sqrt().ceil().max(2.0) as u32;
        let (w, h) = (body.w / side, body.h / side);
        let small = Scale(self.scale.0 * 0.8);
        for (i, hist) in individual.iter().enumerate() {
            let (r, c) = (i as u32 / side, i as u32 % side);
            let rect = Rect {
                x: body.x + c * w,
                y: body.y + r * h,
                w,
                h,
            };
            let title = data
                .parameter_names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("parameter {i}"));
            let drawn = histogram_2d_gauge::draw_histogram(&self.area(rect), small, &title, hist)?;
            self.record(format!("layerwise[{i}]"), rect, drawn)?;
        }
        if individual.is_empty() {
            self.area(body)
                .draw(&Text::new(
                    "no per-layer histograms (GradHist2d with keep_individual)",
                    (self.scale.px(20.0) as i32, self.scale.px(30.0) as i32),
                    self.scale.font(14.0).color(&INK),
                ))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod layout_tests;
