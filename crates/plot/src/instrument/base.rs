//! What instruments share: ranges, number formats, and the scatter-plus-moving-average chart
//! most of Cockpit's instruments are.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor;

use crate::data::Series;
use crate::error::{PlotError, draw_err};
use crate::style::{INK, OUTLIER, PANEL, cool, viridis};

/// A drawing area of any plotters backend.
pub type Area<DB> = DrawingArea<DB, Shift>;

/// Room for the x tick labels and axis description, in reference pixels.
pub const X_LABELS: f64 = 40.0;
/// Room for the left y tick labels and axis description, in reference pixels.
pub const Y_LABELS: f64 = 72.0;
/// Room for a twin axis's tick labels and description, in reference pixels.
pub const RIGHT_LABELS: f64 = 88.0;
/// Text is drawn this much larger than the reference sizes the instruments name (readable at
/// the default 2400×1200 without zooming).
pub const TEXT_SCALE: f64 = 1.3;

/// Room above a chart's plotting area for its legend row, in reference pixels
/// ([`legend_above`]).
pub const LEGEND: f64 = 26.0;

/// Sizes that scale with the image.
#[derive(Debug, Clone, Copy)]
pub struct Scale(pub f64);

impl Scale {
    /// A length of `px` pixels at the reference height of 1200 pixels.
    pub fn px(self, px: f64) -> u32 {
        (px * self.0).round().max(1.0) as u32
    }

    /// A length that holds text (a label area, a legend row): `px` reference pixels, grown
    /// as the fonts are where they stop shrinking (no font is drawn below 6 px), so that
    /// labels keep their room on small images.
    pub fn text(self, px: f64) -> u32 {
        let smallest = 6.0 / (12.0 * TEXT_SCALE);
        (px * self.0.max(smallest)).round().max(1.0) as u32
    }

    /// A font of `px` pixels at the reference height.
    pub fn font(self, px: f64) -> TextStyle<'static> {
        ("sans-serif", (px * TEXT_SCALE * self.0).max(6.0))
            .into_font()
            .color(&INK)
    }
}

/// The padded range of the finite values, or `None` when there is none.
pub fn bounds(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return None;
    }
    Some(padded_range(lo, hi))
}

/// A value more than this many times the span of the central 90 % of a series (its 5th to
/// 95th percentile) beyond that span, with neither neighbour in the series beyond it on the
/// same side, is an outlier: an isolated value (a TIC of −10 000 among values within ±300),
/// not a trend (a gradient norm falling over decades keeps its first steps on the axis).
pub const OUTLIER_FENCE: f64 = 2.0;
/// Where outliers are more than this share of the series, the series is taken whole.
pub const OUTLIER_SHARE: f64 = 0.1;

/// The range of a series (in step order) robust to a few isolated outliers
/// ([`OUTLIER_FENCE`]): the padded range of the other values, where the outliers are at most
/// [`OUTLIER_SHARE`] of the finite values; else the padded range of all ([`bounds`]). A
/// series of fewer than 8 finite values is taken whole.
pub fn robust_bounds(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let series: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    if series.len() < 8 {
        return bounds(series);
    }
    let mut sorted = series.clone();
    sorted.sort_by(f64::total_cmp);
    let quantile = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    let (low, high) = (quantile(0.05), quantile(0.95));
    let (lo, hi) = (
        low - OUTLIER_FENCE * (high - low),
        high + OUTLIER_FENCE * (high - low),
    );
    // −1 below the fence, +1 above it, 0 within.
    let side = |v: f64| (v > hi) as i8 - (v < lo) as i8;
    let outlier: Vec<bool> = (0..series.len())
        .map(|i| {
            let s = side(series[i]);
            let beside =
                |j: Option<usize>| j.and_then(|j| series.get(j)).is_some_and(|v| side(*v) == s);
            s != 0 && !beside(i.checked_sub(1)) && !beside(Some(i + 1))
        })
        .collect();
    let count = outlier.iter().filter(|o| **o).count();
    if count == 0 || count as f64 > OUTLIER_SHARE * series.len() as f64 {
        return bounds(series);
    }
    bounds(
        series
            .iter()
            .zip(&outlier)
            .filter(|(_, o)| !**o)
            .map(|(v, _)| *v),
    )
}

/// Whether histogram `edges` can be drawn for `bins` bins: one more edge than bins, finite,
/// non-decreasing, and spanning a range the axis can tell apart from a point (at least a
/// millionth of its magnitude). A log cut short or edited by hand fails this and its
/// instrument is left blank.
pub(crate) fn drawable_edges(edges: &[f64], bins: usize) -> bool {
    let (Some(&first), Some(&last)) = (edges.first(), edges.last()) else {
        return false;
    };
    edges.len() == bins + 1
        && edges.iter().all(|e| e.is_finite())
        && edges.windows(2).all(|w| w[0] <= w[1])
        && last - first > 1e-6 * first.abs().max(last.abs())
}

/// The largest magnitude an axis reaches: beyond it the tick arithmetic of the drawing
/// library overflows (values are clamped to it; such a run has blown up anyway).
const AXIS_LIMIT: f64 = crate::data::LIMIT;

/// `[lo, hi]` padded into a range the drawing library can tick: within ±[`AXIS_LIMIT`], and
/// at least a millionth of its magnitude wide (a narrower one cannot be told apart in float64
/// and makes tick generation loop without end).
fn padded_range(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = (
        lo.clamp(-AXIS_LIMIT, AXIS_LIMIT),
        hi.clamp(-AXIS_LIMIT, AXIS_LIMIT),
    );
    let magnitude = lo.abs().max(hi.abs());
    let (mid, half) = if hi > lo {
        let span = (hi - lo).max(1e-6 * magnitude);
        (0.5 * lo + 0.5 * hi, 0.55 * span)
    } else {
        // One value: a tenth of its magnitude either side.
        (lo, 0.1 * magnitude.max(1e-12))
    };
    (
        (mid - half).clamp(-1.1 * AXIS_LIMIT, AXIS_LIMIT),
        (mid + half).clamp(-AXIS_LIMIT, 1.1 * AXIS_LIMIT),
    )
}

/// The padded range of iteration numbers: as [`bounds`], but at least one iteration wide, so
/// a single tracked step gets readable ticks (not ±1e-12 that spill into the next panel).
pub fn step_bounds(steps: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = bounds(steps)?;
    if hi - lo >= 1.0 {
        return Some((lo, hi));
    }
    let mid = 0.5 * (lo + hi);
    Some((mid - 0.5, mid + 0.5))
}

/// A compact number: fixed for moderate magnitudes, scientific otherwise.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if !(1e-2..1e4).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A tick label with as many decimals as an axis spanning `span` needs to tell ticks apart.
pub fn tick(v: f64, span: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e5).contains(&a) || span.is_nan() || span <= 0.0 {
        return format!("{v:.2e}");
    }
    let decimals = (1.0 - span.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{v:.decimals$}")
}

/// The label of a log-axis tick at `decade`: `1`, `10`, `100`, `1000`, then `1e4`, …; ticks
/// between powers of ten stay unlabelled.
pub fn power_of_ten(decade: f64) -> String {
    let k = decade.round();
    if (decade - k).abs() > 1e-6 || k < 0.0 {
        return String::new();
    }
    if k <= 3.0 {
        format!("{}", 10u32.pow(k as u32))
    } else {
        format!("1e{k}")
    }
}

/// How many tick labels fit along `pixels` (one per ~30 reference pixels, 2 to 6).
pub fn label_count(pixels: u32, scale: Scale) -> usize {
    (pixels as f64 / (30.0 * scale.0)).clamp(2.0, 6.0) as usize
}

/// A chart's title, centred at the top of `area` as plotters draws a caption, with a row for
/// its legend below it: returns the area below both, for the chart (built with a margin of
/// `scale.px(6.0)` and no caption). [`legend_above`] fills the row.
pub(crate) fn titled<DB: crate::Canvas>(
    area: &Area<DB>,
    title: &str,
    scale: Scale,
) -> Result<Area<DB>, PlotError> {
    let font = scale.font(17.0);
    let (w, _) = area.dim_in_pixel();
    let (_, h) = area.estimate_text_size(title, &font).map_err(draw_err)?;
    let top = scale.px(6.0);
    area.draw(&Text::new(
        title.to_string(),
        ((w / 2) as i32, top as i32),
        font.pos(text_anchor::Pos::new(
            text_anchor::HPos::Center,
            text_anchor::VPos::Top,
        )),
    ))
    .map_err(draw_err)?;
    Ok(area
        .clone()
        .split_vertically(top + h + scale.text(LEGEND))
        .1)
}

/// A legend that never covers data: `entries` (text and colour) in one row, right-aligned,
/// in the row [`titled`] leaves above the plotting area `plot` (a chart's `plotting_area()`,
/// built with a margin of `scale.px(6.0)`). Each entry is a short bar of its colour and its
/// text.
pub(crate) fn legend_above<DB: crate::Canvas, X, Y>(
    area: &Area<DB>,
    plot: &DrawingArea<DB, Cartesian2d<X, Y>>,
    scale: Scale,
    entries: &[(String, RGBColor)],
) -> Result<(), PlotError>
where
    X: Ranged,
    Y: Ranged,
{
    let (xs, ys) = plot.get_pixel_range();
    let (bx, by) = area.get_base_pixel();
    let font = scale.font(11.0);
    let bar = scale.px(16.0) as i32;
    let gap = scale.px(8.0) as i32;
    let mut right = xs.end - bx;
    let middle = ys.start - by - scale.text(6.0 + LEGEND / 2.0) as i32;
    for (text, colour) in entries.iter().rev() {
        let (w, _) = area.estimate_text_size(text, &font).map_err(draw_err)?;
        let left = right - w as i32;
        area.draw(&Text::new(
            text.clone(),
            (left, middle),
            font.pos(text_anchor::Pos::new(
                text_anchor::HPos::Left,
                text_anchor::VPos::Center,
            )),
        ))
        .map_err(draw_err)?;
        let bar_right = left - scale.px(4.0) as i32;
        area.draw(&Rectangle::new(
            [
                (bar_right - bar, middle - scale.px(3.0) as i32),
                (bar_right, middle + scale.px(3.0) as i32),
            ],
            colour.filled(),
        ))
        .map_err(draw_err)?;
        right = bar_right - bar - gap;
    }
    Ok(())
}

/// `(x, y)` pairs in axis coordinates.
pub(crate) type Points = Vec<(f64, f64)>;

/// One series of a scatter chart.
#[derive(Debug, Clone, Copy)]
pub struct Plot<'a> {
    /// The data.
    pub series: &'a Series,
    /// The axis label.
    pub label: &'a str,
    /// Draw on a log axis (non-positive values are left out).
    pub log: bool,
}

impl Plot<'_> {
    /// The drawable points (log10 of the values on a log axis) and their moving average.
    pub(crate) fn points(&self) -> (Points, Points) {
        let keep = |v: f64| !self.log || v > 0.0;
        let map = |v: f64| if self.log { v.log10() } else { v };
        let ema = self.series.ema();
        let mut points = Vec::with_capacity(self.series.len());
        let mut smooth = Vec::with_capacity(self.series.len());
        for ((&x, &y), &e) in self.series.steps.iter().zip(&self.series.values).zip(&ema) {
            if keep(y) {
                points.push((x, map(y)));
            }
            if keep(e) {
                smooth.push((x, map(e)));
            }
        }
        (points, smooth)
    }

    /// A tick label: on a log axis spanning a decade or more, the powers of ten alone (as
    /// matplotlib labels a log axis); within one decade, the values.
    fn label_of(&self, v: f64, span: f64) -> String {
        if self.log && span >= 1.0 {
            power_of_ten(v)
        } else if self.log {
            number(10f64.powf(v))
        } else {
            tick(v, span)
        }
    }
}

/// Points coloured by iteration (viridis, reversed for a twin series).
fn scatter<'a>(
    points: &'a [(f64, f64)],
    reversed: bool,
    radius: u32,
) -> impl Iterator<Item = Circle<(f64, f64), u32>> + 'a {
    let n = points.len().max(2) as f64 - 1.0;
    points.iter().enumerate().map(move |(i, &p)| {
        let t = i as f64 / n;
        let t = if reversed { 1.0 - t } else { t };
        Circle::new(p, radius, viridis(t).filled())
    })
}

/// The moving average as a line coloured along the "cool" map.
fn ema_line(
    points: &[(f64, f64)],
    reversed: bool,
    width: u32,
) -> impl Iterator<Item = PathElement<(f64, f64)>> + '_ {
    let n = points.len().max(2) as f64 - 1.0;
    points.windows(2).enumerate().map(move |(i, w)| {
        let t = i as f64 / n;
        let t = if reversed { 1.0 - t } else { t };
        PathElement::new(vec![w[0], w[1]], cool(t).stroke_width(width))
    })
}

pub(crate) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The primary axes, points and moving average of [`scatter_ema`].
pub(crate) fn primary<DB: crate::Canvas>(
    chart: &mut Chart<'_, DB>,
    scale: Scale,
    main: Plot<'_>,
    points: &[(f64, f64)],
    smooth: &[(f64, f64)],
    y_count: usize,
) -> Result<(), PlotError> {
    let x_range = chart.x_range();
    let y_range = chart.y_range();
    chart.plotting_area().fill(&PANEL).map_err(draw_err)?;
    let y_label = |v: &f64| main.label_of(*v, y_range.end - y_range.start);
    let x_label = |v: &f64| tick(*v, x_range.end - x_range.start);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("iteration")
        .y_desc(main.label)
        .label_style(scale.font(12.0))
        .axis_desc_style(scale.font(13.0))
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_labels(6)
        .y_labels(y_count)
        .draw()
        .map_err(draw_err)?;
    let (points, smooth) = (
        inside(points, &x_range, &y_range),
        pinned(smooth, y_range.clone()),
    );
    chart
        .draw_series(scatter(&points, false, scale.px(3.0)))
        .map_err(draw_err)?;
    chart
        .draw_series(edge_markers(&points, y_range, scale.px(3.0)))
        .map_err(draw_err)?;
    chart
        .draw_series(ema_line(&smooth, false, scale.px(2.0)))
        .map_err(draw_err)?;
    Ok(())
}

/// `points` pulled to within a margin around the axes' ranges: a point far outside them
/// would overflow the drawing library's pixel arithmetic (such points are off the panel
/// either way; a line towards one keeps its direction near the panel).
pub(crate) fn inside(
    points: &[(f64, f64)],
    x: &std::ops::Range<f64>,
    y: &std::ops::Range<f64>,
) -> Points {
    let pull = |v: f64, r: &std::ops::Range<f64>| {
        let margin = 2.0 * (r.end - r.start).abs();
        v.clamp(r.start - margin, r.end + margin)
    };
    points
        .iter()
        .map(|&(a, b)| (pull(a, x), pull(b, y)))
        .collect()
}

/// How many of `points` lie outside the axis range `y` (drawn as markers at its edge).
fn off_scale(points: &[(f64, f64)], y: std::ops::Range<f64>) -> usize {
    points
        .iter()
        .filter(|p| p.1 < y.start || p.1 > y.end)
        .count()
}

/// `points` with their values pulled onto the axis range `y`: a moving average past an
/// outlier runs along the edge instead of off the panel.
fn pinned(points: &[(f64, f64)], y: std::ops::Range<f64>) -> Points {
    points
        .iter()
        .map(|&(x, v)| (x, v.clamp(y.start, y.end)))
        .collect()
}

/// A red triangle at the edge of the axis range `y` for every point beyond it: outliers are
/// marked where they left the panel, never dropped silently.
fn edge_markers(
    points: &[(f64, f64)],
    y: std::ops::Range<f64>,
    radius: u32,
) -> impl Iterator<Item = TriangleMarker<(f64, f64), u32>> + '_ {
    points
        .iter()
        .filter(move |p| p.1 < y.start || p.1 > y.end)
        .map(move |&(x, v)| {
            let at = if v < y.start { y.start } else { y.end };
            TriangleMarker::new((x, at), radius * 2, OUTLIER.filled())
        })
}

/// Cockpit's most common instrument: the values as points coloured by iteration plus their
/// exponential moving average, optionally a second series on a twin axis. Returns `false`
/// (drawing nothing) when the main series is empty.
pub fn scatter_ema<DB: crate::Canvas>(
    area: &Area<DB>,
    scale: Scale,
    title: &str,
    main: Plot<'_>,
    twin: Option<Plot<'_>>,
) -> Result<bool, PlotError> {
    let (points, smooth) = main.points();
    let twin = twin
        .map(|t| (t, t.points()))
        .filter(|(_, (p, _))| !p.is_empty());
    let xs = points
        .iter()
        .chain(&smooth)
        .chain(twin.iter().flat_map(|(_, (p, s))| p.iter().chain(s)))
        .map(|p| p.0);
    let (Some((x0, x1)), Some((y0, y1))) =
        (step_bounds(xs), robust_bounds(points.iter().map(|p| p.1)))
    else {
        return Ok(false);
    };
    let (main_off, twin_off) = (
        off_scale(&points, y0..y1),
        twin.as_ref().map_or(0, |(_, (p, _))| {
            robust_bounds(p.iter().map(|p| p.1)).map_or(0, |(a, b)| off_scale(p, a..b))
        }),
    );
    let title = match main_off + twin_off {
        0 => title.to_string(),
        1 => format!("{title} (1 value off scale, marked at the edge)"),
        n => format!("{title} ({n} values off scale, marked at the edge)"),
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, scale.font(17.0))
        .margin(scale.px(6.0))
        .x_label_area_size(scale.text(X_LABELS))
        .y_label_area_size(scale.text(Y_LABELS));
    if twin.is_some() {
        builder.right_y_label_area_size(scale.text(RIGHT_LABELS));
    }
    let chart = builder
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_err)?;
    let radius = scale.px(3.0);
    let (_, h) = area.dim_in_pixel();
    let y_count = label_count(h, scale);
    let twin = twin.and_then(|(plot, (points, smooth))| {
        robust_bounds(points.iter().map(|p| p.1)).map(|b| (plot, points, smooth, b))
    });
    let Some((plot, twin_points, twin_smooth, (t0, t1))) = twin else {
        let mut chart = chart;
        primary(&mut chart, scale, main, &points, &smooth, y_count)?;
        return Ok(true);
    };
    // The secondary axis takes the right label area: set it up before the primary mesh.
    let mut chart = chart.set_secondary_coord(x0..x1, t0..t1);
    primary(&mut chart, scale, main, &points, &smooth, y_count)?;
    let twin_label = |v: &f64| plot.label_of(*v, t1 - t0);
    chart
        .configure_secondary_axes()
        .y_desc(plot.label)
        .label_style(scale.font(12.0))
        .axis_desc_style(scale.font(13.0))
        .y_label_formatter(&twin_label)
        .y_labels(y_count)
        .draw()
        .map_err(draw_err)?;
    let (twin_points, twin_smooth) = (
        inside(&twin_points, &(x0..x1), &(t0..t1)),
        pinned(&twin_smooth, t0..t1),
    );
    chart
        .draw_secondary_series(scatter(&twin_points, true, radius))
        .map_err(draw_err)?;
    chart
        .draw_secondary_series(edge_markers(&twin_points, t0..t1, radius))
        .map_err(draw_err)?;
    chart
        .draw_secondary_series(ema_line(&twin_smooth, true, scale.px(2.0)))
        .map_err(draw_err)?;
    Ok(true)
}

/// Defines an instrument's `draw` as one series of points plus its moving average:
/// `scatter_gauge!("Title", data_field, "axis label", log_axis)`.
macro_rules! scatter_gauge {
    ($title:literal, $field:ident, $label:literal, $log:literal) => {
        /// Draws the instrument; `false` when its data is missing.
        ///
        /// # Errors
        ///
        /// [`PlotError::Draw`](crate::PlotError::Draw) if the backend fails.
        pub fn draw<DB: crate::Canvas>(
            area: &$crate::instrument::base::Area<DB>,
            scale: $crate::instrument::base::Scale,
            data: &$crate::data::DashboardData,
        ) -> Result<bool, $crate::PlotError> {
            let main = $crate::instrument::base::Plot {
                series: &data.$field,
                label: $label,
                log: $log,
            };
            $crate::instrument::base::scatter_ema(area, scale, $title, main, None)
        }
    };
}
pub(crate) use scatter_gauge;

#[cfg(test)]
mod tests {
    use super::*;

    /// One value far off a series near 1 is left out of the range (and drawn at its edge);
    /// a trend over decades and a handful of values too many are not.
    #[test]
    fn robust_bounds_leave_out_a_few_outliers_only() {
        let mut tic: Vec<f64> = (0..200).map(|i| 1.0 + 0.01 * (i % 7) as f64).collect();
        tic[57] = -10_000.0;
        let (lo, hi) = robust_bounds(tic.iter().copied()).unwrap();
        assert!(lo > -1.0 && hi < 2.0, "{lo} {hi}");
        assert_eq!(
            off_scale(
                &tic.iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64, *v))
                    .collect::<Vec<_>>(),
                lo..hi
            ),
            1
        );
        let falling: Vec<f64> = (0..200).map(|i| (-(i as f64) / 20.0).exp()).collect();
        assert_eq!(
            robust_bounds(falling.iter().copied()),
            bounds(falling.iter().copied())
        );
        // Eight isolated spikes among two hundred (4 %) are outliers too; a dozen values in a
        // row (a plateau, a trend) are not, nor are spikes on one in five steps.
        let spiky = |every: usize| -> Vec<f64> {
            (0..200)
                .map(|i| {
                    if i % every == 3 {
                        -500.0
                    } else {
                        1.0 + 0.01 * (i % 7) as f64
                    }
                })
                .collect()
        };
        let (lo, _) = robust_bounds(spiky(25)).unwrap();
        assert!(lo > -1.0, "{lo}");
        assert_eq!(robust_bounds(spiky(5)), bounds(spiky(5)));
        let mut plateau: Vec<f64> = (0..200).map(|i| 1.0 + 0.01 * (i % 7) as f64).collect();
        for v in &mut plateau[100..112] {
            *v = -500.0;
        }
        assert_eq!(
            robust_bounds(plateau.iter().copied()),
            bounds(plateau.iter().copied())
        );
    }

    #[test]
    fn bounds_pad_and_skip_non_finite() {
        assert_eq!(bounds([f64::NAN]), None);
        let (lo, hi) = bounds([0.0, 10.0, f64::INFINITY]).unwrap_or_default();
        assert!((lo + 0.5).abs() < 1e-12 && (hi - 10.5).abs() < 1e-12);
        let (lo, hi) = bounds([2.0]).unwrap_or_default();
        assert!(lo < 2.0 && hi > 2.0);
        assert_eq!(step_bounds([0.0]), Some((-0.5, 0.5)));
        let (lo, hi) = step_bounds([0.0, 100.0]).unwrap_or_default();
        assert!(lo < 0.0 && hi > 100.0);
    }

    #[test]
    fn degenerate_and_extreme_ranges_stay_drawable() {
        // A constant series keeps a tenth of its value either side (readable ticks).
        let (lo, hi) = bounds([0.05, 0.05]).unwrap();
        assert!(
            (lo - 0.045).abs() < 1e-12 && (hi - 0.055).abs() < 1e-12,
            "{lo} {hi}"
        );
        // Values float64 cannot tell apart get at least a millionth of their magnitude.
        let (lo, hi) = bounds([1e16, 1e16 + 2.0]).unwrap();
        assert!(hi - lo >= 1e10, "{lo} {hi}");
        // Finite extremes are clamped to what the axis arithmetic can take.
        let (lo, hi) = bounds([0.0, 1.7e308]).unwrap();
        assert!(
            lo.is_finite() && hi.is_finite() && (hi - lo).is_finite(),
            "{lo} {hi}"
        );
    }

    #[test]
    fn ticks_tell_close_values_apart() {
        assert_ne!(tick(0.061, 0.02), tick(0.064, 0.02));
        assert_eq!(tick(150.0, 100.0), "150");
        assert_eq!(tick(2.5e-7, 1e-7), "2.50e-7");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(1.5e-5), "1.5e-5");
        assert_eq!(number(250.0), "250");
        assert_eq!(number(0.0), "0");
    }

    #[test]
    fn log_ticks_read_as_powers_of_ten() {
        let labels: Vec<String> = [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0]
            .into_iter()
            .map(power_of_ten)
            .collect();
        assert_eq!(labels, ["1", "", "10", "100", "1000", "1e4", "1e6"]);
        assert_eq!(power_of_ten(-0.3), "");
    }
}
