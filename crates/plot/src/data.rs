//! What the dashboard draws, pulled out of a Cockpit [`Output`] once.

use cockpit_quantities::{Histogram1d, Histogram2d, Output, QuantityKind, Value};

/// One number per step (non-finite values are dropped: they cannot be drawn).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Steps (x).
    pub steps: Vec<f64>,
    /// Values (y).
    pub values: Vec<f64>,
}

impl Series {
    /// Whether nothing can be drawn.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// The last value.
    pub fn last(&self) -> Option<f64> {
        self.values.last().copied()
    }

    /// A quantity's series, per-parameter lists reduced as Cockpit's instruments do
    /// ([`QuantityKind::network_value`]).
    fn quantity(output: &Output, kind: QuantityKind) -> Self {
        Self::of(kind.numbers(output))
    }

    /// An epoch-log series (not a quantity: the learning rate, accuracies).
    fn epoch(output: &Output, key: &str) -> Self {
        Self::of(
            output
                .series(key)
                .into_iter()
                .filter_map(|(step, value)| value.as_f64().map(|v| (step, v))),
        )
    }

    fn of(points: impl IntoIterator<Item = (usize, f64)>) -> Self {
        let mut series = Self::default();
        for (step, v) in points {
            if v.is_finite() {
                series.steps.push(drawable(step as f64));
                series.values.push(drawable(v));
            }
        }
        series
    }

    /// Cockpit's exponential moving average, `ewm(alpha=0.2, adjust=False)`.
    pub fn ema(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.values.len());
        let mut prev: Option<f64> = None;
        for &v in &self.values {
            let next = prev.map_or(v, |p| 0.8 * p + 0.2 * v);
            out.push(next);
            prev = Some(next);
        }
        out
    }
}

/// The largest magnitude the dashboard draws: larger finite values (a run that blew up) are
/// drawn at this bound. Beyond it the drawing library's coordinate arithmetic overflows.
pub(crate) const LIMIT: f64 = 1e300;

/// `v` clamped to ±[`LIMIT`] (NaN stays NaN).
fn drawable(v: f64) -> f64 {
    v.clamp(-LIMIT, LIMIT)
}

fn drawable_hist1d(mut h: Histogram1d) -> Histogram1d {
    h.hist.iter_mut().for_each(|v| *v = drawable(*v));
    h.edges.iter_mut().for_each(|v| *v = drawable(*v));
    h
}

fn drawable_hist2d(mut h: Histogram2d) -> Histogram2d {
    h.x_edges.iter_mut().for_each(|v| *v = drawable(*v));
    h.y_edges.iter_mut().for_each(|v| *v = drawable(*v));
    h.individual = h.individual.into_iter().map(drawable_hist2d).collect();
    h
}

/// The data map of a run's per-example table, as the secondary screen draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExamplesMap {
    /// Each example with a confidence: its variability, its confidence and its region.
    pub points: Vec<(f64, f64, cockpit_quantities::examples::Region)>,
    /// The run's region borders.
    pub borders: cockpit_quantities::examples::MapBorders,
}

/// Everything the primary and secondary screens draw.
#[derive(Debug, Clone, Default)]
pub struct DashboardData {
    /// Alpha.
    pub alpha: Series,
    /// Distance (root-sum-of-squares over layers).
    pub distance: Series,
    /// UpdateSize (root-sum-of-squares over layers).
    pub update_size: Series,
    /// GradNorm (root-sum-of-squares over layers).
    pub grad_norm: Series,
    /// NormTest.
    pub norm_test: Series,
    /// InnerTest.
    pub inner_test: Series,
    /// OrthoTest.
    pub ortho_test: Series,
    /// The last GradHist1d and its step.
    pub hist1d: Option<(usize, Histogram1d)>,
    /// The last GradHist2d and its step.
    pub hist2d: Option<(usize, Histogram2d)>,
    /// HessMaxEV.
    pub max_ev: Series,
    /// HessTrace (summed over layers).
    pub trace: Series,
    /// The standard error of HessTrace's sum at the steps where it is an estimate (empty
    /// where it is exact).
    pub trace_stderr: Series,
    /// TICDiag.
    pub tic_diag: Series,
    /// TICTrace.
    pub tic_trace: Series,
    /// `learning_rate` from `log()`.
    pub learning_rate: Series,
    /// Loss.
    pub loss: Series,
    /// `train_accuracy` from `log()`.
    pub train_accuracy: Series,
    /// `valid_accuracy` from `log()`.
    pub valid_accuracy: Series,
    /// MeanGSNR.
    pub mean_gsnr: Series,
    /// CABS.
    pub cabs: Series,
    /// EarlyStopping.
    pub early_stopping: Series,
    /// Examples' concentration: the share of the batch that carries half of `Σ_n ‖g_n‖²`.
    pub examples_half: Series,
    /// The last Examples value and its step (the examples with the largest shares).
    pub examples_top: Option<(usize, cockpit_quantities::ExampleShares)>,
    /// The data map of the per-example table beside the log, where there is one
    /// ([`DashboardData::with_examples_table`]): each example's variability, confidence and
    /// region, and the run's borders.
    pub examples_map: Option<ExamplesMap>,
    /// Steps in the log.
    pub steps: usize,
    /// The parameters' dotted names the log carries (empty for a Python-written log): the
    /// per-layer histograms' titles.
    pub parameter_names: Vec<String>,
    /// Every quantity with a number per step, network-wide ([`QuantityKind::network_value`]),
    /// for the gauges drawn by kind (the quantity gauge).
    pub quantities: std::collections::BTreeMap<QuantityKind, Series>,
}

impl DashboardData {
    /// Adds the data map of the run's per-example table (`cockpit examples`' rows) to the
    /// examples view of the secondary screen; rows without a confidence are left out.
    pub fn with_examples_table(
        mut self,
        rows: &[cockpit_quantities::examples::ExampleStats],
    ) -> Self {
        use cockpit_quantities::examples::{MapBorders, coordinates};
        self.examples_map = MapBorders::of(rows).map(|borders| {
            let points = rows
                .iter()
                .filter_map(|r| {
                    let (x, y) = coordinates(r)?;
                    Some((x, y, borders.region(r)?))
                })
                .collect();
            ExamplesMap { points, borders }
        });
        self
    }

    /// Reads every instrument's data from `output` (a log of ours or of the Python Cockpit).
    pub fn from_output(output: &Output) -> Self {
        let hist1d = QuantityKind::GradHist1d
            .last(output)
            .and_then(|(step, v)| match v {
                Value::Hist1d(h) => Some((step, h.clone())),
                _ => None,
            });
        let mut hist2d = QuantityKind::GradHist2d
            .last(output)
            .and_then(|(step, v)| match v {
                Value::Hist2d(h) => Some((step, h.clone())),
                _ => None,
            });
        // Per-layer histograms may come from a variant (`GradHist2d[keep_individual=True]`).
        if hist2d.as_ref().is_none_or(|(_, h)| h.individual.is_empty())
            && let Some((step, h)) = QuantityKind::GradHist2d
                .keys(output)
                .into_iter()
                .flat_map(|key| output.series(key))
                .filter_map(|(step, v)| match v {
                    Value::Hist2d(h) if !h.individual.is_empty() => Some((step, h)),
                    _ => None,
                })
                .max_by_key(|(step, _)| *step)
        {
            hist2d = Some((step, h.clone()));
        }
        let hist1d = hist1d.map(|(step, h)| (step, drawable_hist1d(h)));
        let hist2d = hist2d.map(|(step, h)| (step, drawable_hist2d(h)));
        Self {
            alpha: Series::quantity(output, QuantityKind::Alpha),
            distance: Series::quantity(output, QuantityKind::Distance),
            update_size: Series::quantity(output, QuantityKind::UpdateSize),
            grad_norm: Series::quantity(output, QuantityKind::GradNorm),
            norm_test: Series::quantity(output, QuantityKind::NormTest),
            inner_test: Series::quantity(output, QuantityKind::InnerTest),
            ortho_test: Series::quantity(output, QuantityKind::OrthoTest),
            hist1d,
            hist2d,
            max_ev: Series::quantity(output, QuantityKind::HessMaxEV),
            trace: Series::quantity(output, QuantityKind::HessTrace),
            trace_stderr: Series::of(
                QuantityKind::HessTrace
                    .series(output)
                    .into_iter()
                    .filter_map(|(step, value)| match value {
                        Value::Estimate(estimate) => Some((step, estimate.stderr_of_sum())),
                        _ => None,
                    }),
            ),
            tic_diag: Series::quantity(output, QuantityKind::TICDiag),
            tic_trace: Series::quantity(output, QuantityKind::TICTrace),
            learning_rate: Series::epoch(output, "learning_rate"),
            loss: Series::quantity(output, QuantityKind::Loss),
            train_accuracy: Series::epoch(output, "train_accuracy"),
            valid_accuracy: Series::epoch(output, "valid_accuracy"),
            mean_gsnr: Series::quantity(output, QuantityKind::MeanGSNR),
            cabs: Series::quantity(output, QuantityKind::CABS),
            early_stopping: Series::quantity(output, QuantityKind::EarlyStopping),
            examples_half: Series::of(
                QuantityKind::Examples
                    .series(output)
                    .into_iter()
                    .filter_map(|(step, value)| match value {
                        Value::Examples(e) => Some((step, e.half_fraction())),
                        _ => None,
                    }),
            ),
            examples_map: None,
            examples_top: QuantityKind::Examples
                .last(output)
                .and_then(|(step, v)| match v {
                    Value::Examples(e) => Some((step, e.clone())),
                    _ => None,
                }),
            steps: output.steps().count(),
            parameter_names: output.parameter_names().to_vec(),
            quantities: QuantityKind::ALL
                .into_iter()
                .filter(|kind| kind.spec().shape.is_numeric())
                .map(|kind| (kind, Series::quantity(output, kind)))
                .filter(|(_, series)| !series.values.is_empty())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ema_follows_pandas_ewm_without_adjustment() {
        let s = Series {
            steps: vec![0.0, 1.0, 2.0],
            values: vec![1.0, 2.0, 4.0],
        };
        // y0 = 1, y1 = 0.8·1 + 0.2·2 = 1.2, y2 = 0.8·1.2 + 0.2·4 = 1.76
        let ema = s.ema();
        assert!(
            (ema[1] - 1.2).abs() < 1e-12 && (ema[2] - 1.76).abs() < 1e-12,
            "{ema:?}"
        );
    }

    #[test]
    fn layerwise_lists_are_reduced_as_cockpit_draws_them() {
        let mut out = Output::new();
        out.insert(0, "GradNorm", Value::List(vec![3.0, 4.0]));
        out.insert(0, "HessTrace", Value::List(vec![3.0, 4.0]));
        out.insert(1, "GradNorm", Value::Float(f64::NAN));
        let d = DashboardData::from_output(&out);
        assert_eq!(d.grad_norm.values, vec![5.0]);
        assert_eq!(d.trace.values, vec![7.0]);
        assert_eq!(d.steps, 2);
    }
}
