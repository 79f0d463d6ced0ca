//! How a Cockpit value becomes a metric entry.

use cockpit_quantities::{QuantityKind, Value};

/// How a quantity is shown in burn's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricForm {
    /// A number per step: scalars as they are, layer-wise lists reduced over layers.
    Numeric,
    /// A line of text per step: histograms.
    Text,
}

impl MetricForm {
    /// The form burn shows `kind` in: numeric for scalars and per-parameter lists, text for
    /// the rest (by the quantity's [`ValueShape`](cockpit_quantities::quantity::ValueShape)).
    pub fn of(kind: QuantityKind) -> Self {
        if kind.spec().shape.is_numeric() {
            Self::Numeric
        } else {
            Self::Text
        }
    }
}

/// Where the epoch-writing metric reports burn's epoch ends (with the learning rate burn
/// last reported): the only thing a metric can ask of the adapter besides reading values.
pub(crate) trait EpochSink: Send + Sync {
    /// burn ended an epoch.
    fn end_epoch(&self, learning_rate: Option<f64>);
}

/// The metric's name in burn (unique among a run's metrics; `Cockpit Loss` does not collide
/// with burn's `Loss`). burn's file logger writes it as `Cockpit_<Name>.log`.
pub fn metric_name(key: &str) -> String {
    format!("Cockpit {key}")
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One line describing a histogram (or any value): range, total and a bar per bin.
pub fn text_value(value: &Value) -> String {
    match value {
        Value::Hist1d(h) => {
            let total: f64 = h.hist.iter().sum();
            let (lo, hi) = (
                h.edges.first().copied().unwrap_or(f64::NAN),
                h.edges.last().copied().unwrap_or(f64::NAN),
            );
            format!(
                "[{lo:.3e}, {hi:.3e}] n={total} {}",
                bars(h.hist.iter().copied())
            )
        }
        Value::Hist2d(h) => {
            // The marginal over gradient elements (x), as the 2d instrument's top panel.
            let (nx, ny) = h.bins;
            let marginal = (0..nx).map(|i| {
                h.hist[i * ny..(i + 1) * ny]
                    .iter()
                    .map(|&c| c as f64)
                    .sum::<f64>()
            });
            format!("{nx}x{ny} bins, gradient marginal {}", bars(marginal))
        }
        Value::Arrays(arrays) => format!("{} arrays", arrays.len()),
        Value::Examples(e) => {
            let top: Vec<String> = e
                .top
                .iter()
                .take(3)
                .map(|t| format!("{} {:.1}%", t.id, 100.0 * t.share))
                .collect();
            let who = if e.ids_known { "ids" } else { "positions" };
            format!(
                "{} of {} examples carry half; top {who}: {}",
                e.half,
                e.batch,
                top.join(", ")
            )
        }
        other => other
            .as_f64()
            .map_or_else(|| "n/a".into(), |v| format!("{v}")),
    }
}

fn bars(counts: impl Iterator<Item = f64> + Clone) -> String {
    let max = counts.clone().fold(0.0_f64, f64::max);
    counts
        .map(|c| {
            if max <= 0.0 || c <= 0.0 {
                ' '
            } else {
                let level = ((c / max) * (BARS.len() - 1) as f64).round() as usize;
                BARS[level.min(BARS.len() - 1)]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cockpit_quantities::Histogram1d;

    #[test]
    fn histograms_are_text() {
        let h = Value::Hist1d(Histogram1d {
            hist: vec![0.0, 2.0, 4.0],
            edges: vec![-1.0, 0.0, 1.0, 2.0],
        });
        let text = text_value(&h);
        assert!(text.ends_with(" ▅█"), "{text}"); // 2/4 of the tallest: level round(3.5) = 4
        assert!(text.contains("n=6"), "{text}");
        assert_eq!(MetricForm::of(QuantityKind::GradHist1d), MetricForm::Text);
        assert_eq!(MetricForm::of(QuantityKind::Examples), MetricForm::Text);
        let shares = Value::Examples(cockpit_quantities::ExampleShares {
            batch: 8,
            half: 2,
            ids_known: true,
            top: vec![cockpit_quantities::ExampleShare {
                id: 41,
                share: 0.3,
                loss: 2.0,
            }],
        });
        assert_eq!(
            text_value(&shares),
            "2 of 8 examples carry half; top ids: 41 30.0%"
        );
        assert_eq!(MetricForm::of(QuantityKind::Alpha), MetricForm::Numeric);
    }
}
