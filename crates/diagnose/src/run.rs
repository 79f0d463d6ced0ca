//! [`Run`]: the series of a Cockpit output that the checks read, with the parameter names.

use cockpit_quantities::{ExampleShares, Histogram1d, Output, QuantityKind, Value};

/// `(step, value)` pairs in step order.
pub type Scalars = Vec<(usize, f64)>;
/// `(step, one value per parameter)` pairs in step order.
pub type Lists = Vec<(usize, Vec<f64>)>;

/// What the checks read from one Cockpit output: each instrument's series (empty where the log
/// lacks it) and the parameter names (`parameter #i` where unknown).
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Mini-batch loss.
    pub loss: Scalars,
    /// Local step-size quality α.
    pub alpha: Scalars,
    /// Per-parameter gradient norms.
    pub grad_norm: Lists,
    /// Per-parameter update sizes.
    pub update_size: Lists,
    /// Per-parameter norms ‖θ_p‖, from `Parameters` where the log has it.
    pub param_norm: Lists,
    /// Per-parameter `‖∇θ_p‖/‖θ_p‖`, from `GradParamRatio` where the log has it.
    pub grad_param_ratio: Lists,
    /// Top Hessian eigenvalue.
    pub max_ev: Scalars,
    /// Network-wide Hessian trace (sum over parameters).
    pub trace: Scalars,
    /// The learning rate `log()` recorded.
    pub learning_rate: Scalars,
    /// NormTest, InnerTest, OrthoTest by name.
    pub tests: Vec<(&'static str, Scalars)>,
    /// The gradient-element histograms.
    pub hist1d: Vec<(usize, Histogram1d)>,
    /// Which examples carried each step's gradient (Examples).
    pub examples: Vec<(usize, ExampleShares)>,
    /// The classes of a cross-entropy loss, where known ([`Run::with_classes`]).
    pub classes: Option<usize>,
    names: Vec<String>,
}

/// A run has converged where the median loss of its last 10 % of steps is at most this share
/// of its first [`START_LOSSES`] losses' the loss fell by more than an order of magnitude and stayed there.
/// Near such a floor the gradient shrinks with the loss, and what is left of it is mostly the
/// noise between mini-batches: success, not a vanishing gradient or a batch too small.
pub const CONVERGED: f64 = 0.1;

/// A run learned where the median loss of its last 10 % of steps is at most this share of its
/// first [`START_LOSSES`]': the loss fell at least threefold. Transient loss spikes (a large learning
/// rate's catapult, recovered from), a surface that sharpens as the network fits (progressive
/// sharpening) and a gradient that is mostly noise are then how a good run looks, not what
/// holds it back.
pub const LEARNED: f64 = 1.0 / 3.0;

impl Run {
    /// The series of `output`, with `names` for the per-parameter lists (may be empty).
    pub fn new(output: &Output, names: &[String]) -> Self {
        use QuantityKind as K;
        let param_norm = K::Parameters
            .series(output)
            .into_iter()
            .filter_map(|(s, v)| match v {
                Value::Arrays(arrays) => Some((
                    s,
                    arrays
                        .iter()
                        .map(|a| a.data.iter().map(|x| x * x).sum::<f64>().sqrt())
                        .collect(),
                )),
                _ => None,
            })
            .collect();
        let hist1d = K::GradHist1d
            .series(output)
            .into_iter()
            .filter_map(|(s, v)| match v {
                Value::Hist1d(h) => Some((s, h.clone())),
                _ => None,
            })
            .collect();
        Self {
            loss: K::Loss.numbers(output),
            alpha: K::Alpha.numbers(output),
            grad_norm: K::GradNorm.lists(output),
            update_size: K::UpdateSize.lists(output),
            param_norm,
            grad_param_ratio: K::GradParamRatio.lists(output),
            max_ev: K::HessMaxEV.numbers(output),
            // An estimated trace within 3 standard errors of zero says nothing, its sign least
            // of all: such steps are left out.
            trace: K::HessTrace
                .series(output)
                .into_iter()
                .filter(|(_, value)| match value {
                    Value::Estimate(estimate) => estimate.is_significant(3.0),
                    _ => true,
                })
                .filter_map(|(step, value)| K::HessTrace.network_value(value).map(|v| (step, v)))
                .collect(),
            // Not a quantity: what the epoch log recorded.
            learning_rate: output
                .series("learning_rate")
                .into_iter()
                .filter_map(|(s, v)| v.as_f64().map(|x| (s, x)))
                .collect(),
            tests: [K::NormTest, K::InnerTest, K::OrthoTest]
                .into_iter()
                .map(|k| (k.name(), k.numbers(output)))
                .collect(),
            hist1d,
            examples: K::Examples
                .series(output)
                .into_iter()
                .filter_map(|(s, v)| match v {
                    Value::Examples(e) => Some((s, e.clone())),
                    _ => None,
                })
                .collect(),
            classes: None,
            names: names.to_vec(),
        }
    }

    /// The same run, its loss a cross-entropy over `classes` classes (a language model's: its
    /// vocabulary), so that the start can be compared with chance level `ln C`.
    pub fn with_classes(mut self, classes: Option<usize>) -> Self {
        self.classes = classes.filter(|c| *c >= 2);
        self
    }

    /// A cross-entropy's loss at chance level, `ln C`, where the classes are known.
    pub fn chance_loss(&self) -> Option<f64> {
        self.classes.map(|c| (c as f64).ln())
    }

    /// The median loss of the first and of the last 10 % of steps, where the run is long
    /// enough to judge ([`MIN_LOSSES`](crate::run::MIN_LOSSES)) and both are finite.
    pub fn loss_ends(&self) -> Option<(f64, f64)> {
        if self.loss.len() < MIN_LOSSES {
            return None;
        }
        let (first, last) = ends(&self.loss, 0.1);
        let (a, b) = (median(values(first)), median(values(last)));
        (a.is_finite() && b.is_finite()).then_some((a, b))
    }

    /// Whether the run learned: its loss fell to [`LEARNED`] of where it started or below,
    /// with no value that is not finite.
    pub fn learned(&self) -> bool {
        self.fell_to(LEARNED)
    }

    /// Whether the loss fell to `share` of where it started or below, finite throughout:
    /// the median of the last 10 % of steps against the median of the first
    /// [`START_LOSSES`] (a run that learns within its first tenth of steps started where its
    /// first losses are, not where its first tenth's median is).
    fn fell_to(&self, share: f64) -> bool {
        let start = median(values(&self.loss[..START_LOSSES.min(self.loss.len())]));
        self.loss.iter().all(|(_, l)| l.is_finite())
            && self
                .loss_ends()
                .is_some_and(|(_, b)| start > 0.0 && b >= 0.0 && b <= share * start)
    }

    /// Whether the loss converged: it fell to [`CONVERGED`] of where it started or below,
    /// with no value that is not finite.
    pub fn converged(&self) -> bool {
        self.fell_to(CONVERGED)
    }

    /// The name of parameter `p`: its dotted name where known, else `parameter #p`.
    pub fn name(&self, p: usize) -> String {
        self.names
            .get(p)
            .cloned()
            .unwrap_or_else(|| format!("parameter #{p}"))
    }

    /// Whether parameter `p` is known to be a bias (its name ends in `bias`).
    pub fn is_bias(&self, p: usize) -> bool {
        self.names.get(p).is_some_and(|n| n.ends_with("bias"))
    }

    /// The first layer's weight and bias, by their names: parameter 0 named `…weight` and the
    /// parameter named like it with `bias`.
    pub fn first_layer(&self) -> Option<(usize, usize)> {
        let prefix = self.names.first()?.strip_suffix("weight")?;
        let bias = self
            .names
            .iter()
            .position(|n| n == &format!("{prefix}bias"))?;
        Some((0, bias))
    }

    /// The learning rate in force at `step`: the last one recorded at or before it, else the
    /// first one recorded.
    pub fn learning_rate_at(&self, step: usize) -> Option<f64> {
        self.learning_rate
            .iter()
            .rev()
            .find(|(s, _)| *s <= step)
            .or(self.learning_rate.first())
            .map(|(_, lr)| *lr)
    }
}

/// Below this many loss values a run is too short to judge its progress.
pub const MIN_LOSSES: usize = 20;

/// The losses whose median is where a run started, for [`Run::learned`] and
/// [`Run::converged`].
pub const START_LOSSES: usize = 5;

/// The median of the finite values; NaN when there is none.
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The first and last `fraction` of a series (at least one element each).
pub fn ends<T>(series: &[T], fraction: f64) -> (&[T], &[T]) {
    let k = ((series.len() as f64 * fraction) as usize).clamp(1, series.len().max(1));
    let k = k.min(series.len());
    (&series[..k], &series[series.len() - k..])
}

/// The values of a scalar series.
pub fn values(series: &[(usize, f64)]) -> impl Iterator<Item = f64> + '_ {
    series.iter().map(|(_, v)| *v)
}

/// The share of finite values satisfying `pred` (0 for no finite value).
pub fn share(series: &[(usize, f64)], pred: impl Fn(f64) -> bool) -> f64 {
    let finite: Vec<f64> = values(series).filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return 0.0;
    }
    finite.iter().filter(|v| pred(**v)).count() as f64 / finite.len() as f64
}

/// The network-wide gradient norm of a GradNorm list (as Cockpit's gradient-norm gauge).
pub fn norm(list: &[f64]) -> f64 {
    cockpit_quantities::Reduction::RootSumOfSquares.apply(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_skip_non_finite_values() {
        assert_eq!(median([3.0, f64::NAN, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0]), 2.5);
        assert!(median([f64::NAN]).is_nan());
    }

    #[test]
    fn ends_take_at_least_one() {
        let s = [1, 2, 3];
        assert_eq!(ends(&s, 0.1), (&s[..1], &s[2..]));
        let s: Vec<usize> = (0..100).collect();
        let (a, b) = ends(&s, 0.1);
        assert_eq!((a.len(), b[0]), (10, 90));
    }

    #[test]
    fn learning_rate_in_force() {
        let mut out = Output::new();
        out.insert(9, "learning_rate", Value::Float(0.1));
        out.insert(19, "learning_rate", Value::Float(0.01));
        let run = Run::new(&out, &[]);
        assert_eq!(run.learning_rate_at(3), Some(0.1));
        assert_eq!(run.learning_rate_at(25), Some(0.01));
        assert_eq!(run.name(2), "parameter #2");
    }
}
