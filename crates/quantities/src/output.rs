//! What quantities produce and the Cockpit stores: [`Value`]s keyed by step and name.

use std::collections::BTreeMap;

/// A host array with its shape (row-major), e.g. one parameter tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct HostArray {
    /// Shape; empty for a scalar.
    pub shape: Vec<usize>,
    /// Elements in row-major order.
    pub data: Vec<f64>,
}

impl HostArray {
    /// The array transposed, for 2-d arrays (burn's `[in, out]` ↔ PyTorch's `[out, in]`);
    /// other ranks are returned unchanged.
    pub fn transposed(&self) -> Self {
        let [rows, cols] = self.shape[..] else {
            return self.clone();
        };
        let mut data = Vec::with_capacity(self.data.len());
        for c in 0..cols {
            for r in 0..rows {
                data.push(self.data[r * cols + c]);
            }
        }
        Self {
            shape: vec![cols, rows],
            data,
        }
    }
}

/// A one-dimensional histogram: `hist[k]` counts values in `[edges[k], edges[k+1])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram1d {
    /// Counts, one per bin.
    pub hist: Vec<f64>,
    /// Bin edges, one more than bins.
    pub edges: Vec<f64>,
}

/// A two-dimensional histogram with integer counts, `[x bins, y bins]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram2d {
    /// Counts, row-major `[x bins, y bins]`.
    pub hist: Vec<i64>,
    /// `(x bins, y bins)`.
    pub bins: (usize, usize),
    /// Edges along x (gradient elements).
    pub x_edges: Vec<f64>,
    /// Edges along y (parameter values).
    pub y_edges: Vec<f64>,
    /// Per-parameter histograms (`keep_individual`), in parameter order.
    pub individual: Vec<Histogram2d>,
}

/// A per-parameter estimate and the standard error of each entry (HessTrace where the
/// Hessian diagonal is Hutchinson's estimate): the word "estimate" travels with the numbers.
/// In a log the values stay under the quantity's key, as Cockpit writes them, and the errors
/// sit under `<key>_stderr` (a column the Python `CockpitPlotter` has no instrument for).
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The estimates, one per parameter.
    pub values: Vec<f64>,
    /// Their standard errors, from the probes' own spread.
    pub stderr: Vec<f64>,
}

impl Estimate {
    /// The standard error of the network-wide sum of the entries (independent probes per
    /// entry are not assumed: the errors are added in quadrature, the probes' covariance
    /// across parameters left out).
    pub fn stderr_of_sum(&self) -> f64 {
        self.stderr.iter().map(|e| e * e).sum::<f64>().sqrt()
    }

    /// Whether the network-wide sum is at least `z` standard errors from zero (its sign means
    /// something).
    pub fn is_significant(&self, z: f64) -> bool {
        self.values.iter().sum::<f64>().abs() >= z * self.stderr_of_sum()
    }
}

/// One example's part of a step's gradient ([`ExampleShares::top`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleShare {
    /// The example's id ([`StepInfo::with_sample_ids`](crate::StepInfo::with_sample_ids)), or
    /// its position in the batch where the step had no ids.
    pub id: u64,
    /// `‖g_n‖² / Σ_m ‖g_m‖²`: its share of the batch's summed squared per-sample gradient
    /// norms.
    pub share: f64,
    /// Its loss `ℓ_n` at this step.
    pub loss: f64,
}

/// Which examples carry a step's gradient ([`Examples`](crate::quantity::Examples)): the
/// largest shares of `Σ_n ‖g_n‖²` and how concentrated they are.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleShares {
    /// The batch size `B`.
    pub batch: usize,
    /// The fewest examples whose squared gradient norms add up to at least half of
    /// `Σ_n ‖g_n‖²` (`B/2`-ish for an even spread, 1 when one example dominates; 0 for an
    /// all-zero gradient).
    pub half: usize,
    /// Whether [`ExampleShare::id`]s are the user's ids (else batch positions).
    pub ids_known: bool,
    /// The examples with the largest shares, largest first.
    pub top: Vec<ExampleShare>,
}

impl ExampleShares {
    /// [`ExampleShares::half`] as a fraction of the batch, `half / B` (NaN for an empty batch).
    pub fn half_fraction(&self) -> f64 {
        self.half as f64 / self.batch as f64
    }

    /// The largest single share (NaN when none is known).
    pub fn top_share(&self) -> f64 {
        self.top.first().map_or(f64::NAN, |e| e.share)
    }
}

/// One value in the Cockpit output.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// An integer (e.g. `epoch_count`).
    Int(i64),
    /// A number (Loss, NormTest, Alpha, …).
    Float(f64),
    /// One number per parameter (GradNorm, Distance, UpdateSize, HessTrace).
    List(Vec<f64>),
    /// One estimated number per parameter with its standard error (HessTrace on an estimated
    /// diagonal).
    Estimate(Estimate),
    /// One array per parameter (Parameters), written as nested lists.
    Arrays(Vec<HostArray>),
    /// A 1-d histogram (GradHist1d).
    Hist1d(Histogram1d),
    /// A 2-d histogram (GradHist2d).
    Hist2d(Histogram2d),
    /// The examples that carry the step's gradient (Examples).
    Examples(ExampleShares),
    /// Anything else found in a log written by another tool.
    Other(serde_json::Value),
}

impl Value {
    /// The value as one number, for scalar values.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// The per-parameter numbers, for list values.
    pub fn as_list(&self) -> Option<&[f64]> {
        match self {
            Value::List(v) => Some(v),
            Value::Estimate(e) => Some(&e.values),
            _ => None,
        }
    }

    /// Whether every number in the value is finite.
    pub fn is_finite(&self) -> bool {
        match self {
            Value::Int(_) | Value::Other(_) | Value::Hist2d(_) => true,
            Value::Float(v) => v.is_finite(),
            Value::List(v) => v.iter().all(|x| x.is_finite()),
            Value::Estimate(e) => e.values.iter().chain(&e.stderr).all(|x| x.is_finite()),
            Value::Arrays(a) => a.iter().all(|a| a.data.iter().all(|x| x.is_finite())),
            Value::Hist1d(h) => h.hist.iter().all(|x| x.is_finite()),
            Value::Examples(e) => e.top.iter().all(|x| x.share.is_finite()),
        }
    }
}

/// Cockpit's output: `output[step][name] = value`, as `Cockpit.get_output()` returns it, and
/// the tracked parameters' dotted names when known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    steps: BTreeMap<usize, BTreeMap<String, Value>>,
    parameter_names: Vec<String>,
    kinds: BTreeMap<String, String>,
}

impl Output {
    /// An empty output.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` under `step` and `name`, replacing an earlier one.
    pub fn insert(&mut self, step: usize, name: impl Into<String>, value: Value) {
        self.steps
            .entry(step)
            .or_default()
            .insert(name.into(), value);
    }

    /// The value of `name` at `step`.
    pub fn get(&self, step: usize, name: &str) -> Option<&Value> {
        self.steps.get(&step)?.get(name)
    }

    /// Removes and returns the value of `name` at `step`.
    pub fn remove(&mut self, step: usize, name: &str) -> Option<Value> {
        let values = self.steps.get_mut(&step)?;
        let removed = values.remove(name);
        if values.is_empty() {
            self.steps.remove(&step);
        }
        removed
    }

    /// All values stored at `step`.
    pub fn at(&self, step: usize) -> Option<&BTreeMap<String, Value>> {
        self.steps.get(&step)
    }

    /// The steps that have at least one value, in increasing order.
    pub fn steps(&self) -> impl Iterator<Item = usize> + '_ {
        self.steps.keys().copied()
    }

    /// The steps from `from` on with their values, in increasing order (without walking the
    /// steps before).
    pub fn steps_from(
        &self,
        from: usize,
    ) -> impl Iterator<Item = (usize, &BTreeMap<String, Value>)> + '_ {
        self.steps
            .range(from..)
            .map(|(step, values)| (*step, values))
    }

    /// The last step that has a value (without walking the steps).
    pub fn last_step(&self) -> Option<usize> {
        self.steps.keys().next_back().copied()
    }

    /// Every `(step, value)` of one quantity, in step order.
    pub fn series(&self, name: &str) -> Vec<(usize, &Value)> {
        self.steps
            .iter()
            .filter_map(|(step, values)| values.get(name).map(|v| (*step, v)))
            .collect()
    }

    /// Every `(step, name, value)`, in step then name order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &str, &Value)> {
        self.steps.iter().flat_map(|(step, values)| {
            values
                .iter()
                .map(move |(name, value)| (*step, name.as_str(), value))
        })
    }

    /// Whether nothing has been stored.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Merges `other` into `self` (values of `other` win; names are kept where `self` has
    /// none).
    pub fn merge(&mut self, other: Output) {
        for (step, values) in other.steps {
            self.steps.entry(step).or_default().extend(values);
        }
        if self.parameter_names.is_empty() {
            self.parameter_names = other.parameter_names;
        }
        for (key, kind) in other.kinds {
            self.kinds.entry(key).or_insert(kind);
        }
    }

    /// The Cockpit class name (`"HessTrace"`) of the quantity whose values sit under `key`:
    /// the one recorded for the key ([`Output::set_kind`]), else the key itself (Cockpit
    /// stores each quantity under its class name). The kind travels with the key, so no
    /// reader takes it apart: [`QuantityKind::of_key`](crate::QuantityKind::of_key) reads it.
    /// In a log file the recorded kinds sit under the key `quantity_kinds` of the first step,
    /// which the Python `CockpitPlotter` ignores.
    pub fn kind_name<'a>(&'a self, key: &'a str) -> &'a str {
        self.kinds.get(key).map_or(key, String::as_str)
    }

    /// Records that the values under `key` are the quantity `class` (a variant stored under
    /// a key of its own, such as `HessTrace[ggn]` of `HessTrace`). A key that is its own class
    /// needs no record.
    pub fn set_kind(&mut self, key: &str, class: &str) {
        if key != class && self.kinds.get(key).is_none_or(|known| known != class) {
            self.kinds.insert(key.to_string(), class.to_string());
        }
    }

    /// The kinds recorded for keys that are not their class's name, `key → class`.
    pub fn kinds(&self) -> &BTreeMap<String, String> {
        &self.kinds
    }

    /// Every key that has at least one value, in name order.
    pub fn keys(&self) -> std::collections::BTreeSet<&str> {
        self.steps
            .values()
            .flat_map(|values| values.keys().map(String::as_str))
            .collect()
    }

    /// The tracked parameters' dotted names (`layers.0.weight`), in the order of the
    /// per-parameter lists; empty when unknown (a log written by the Python Cockpit). In a log
    /// file they sit under the key `parameter_names` of the first step, which the Python
    /// `CockpitPlotter` ignores.
    pub fn parameter_names(&self) -> &[String] {
        &self.parameter_names
    }

    /// Sets the parameters' names ([`Output::parameter_names`]).
    pub fn set_parameter_names(&mut self, names: Vec<String>) {
        self.parameter_names = names;
    }

    /// The number of parameters the per-parameter lists hold (GradNorm, Distance, …): the
    /// length of the first list found; `None` without one.
    pub fn parameter_count(&self) -> Option<usize> {
        self.steps
            .values()
            .flat_map(|values| values.values())
            .find_map(|value| match value {
                Value::List(list) => Some(list.len()),
                Value::Estimate(e) => Some(e.values.len()),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_swaps_rows_and_columns() {
        let a = HostArray {
            shape: vec![2, 3],
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        };
        let t = a.transposed();
        assert_eq!(t.shape, vec![3, 2]);
        assert_eq!(t.data, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        assert_eq!(t.transposed(), a);
    }

    #[test]
    fn output_series_and_merge() {
        let mut out = Output::new();
        out.insert(2, "Loss", Value::Float(1.0));
        out.insert(0, "Loss", Value::Float(2.0));
        let mut other = Output::new();
        other.insert(1, "GradNorm", Value::List(vec![0.5]));
        out.merge(other);
        assert_eq!(out.steps().collect::<Vec<_>>(), vec![0, 1, 2]);
        let series: Vec<_> = out.series("Loss").into_iter().map(|(s, _)| s).collect();
        assert_eq!(series, vec![0, 2]);
        assert_eq!(out.parameter_count(), Some(1));
        let mut named = Output::new();
        named.set_parameter_names(vec!["fc.weight".into()]);
        out.merge(named);
        assert_eq!(out.parameter_names(), ["fc.weight"]);
        let mut renamed = Output::new();
        renamed.set_parameter_names(vec!["other".into()]);
        out.merge(renamed);
        assert_eq!(out.parameter_names(), ["fc.weight"], "the first names stay");
        assert_eq!(out.kind_name("GradNorm"), "GradNorm");
        let mut keyed = Output::new();
        keyed.insert(3, "HessTrace[ggn]", Value::List(vec![1.0]));
        keyed.set_kind("HessTrace[ggn]", "HessTrace");
        keyed.set_kind("Loss", "Loss");
        assert!(
            keyed.kinds().len() == 1,
            "a key that is its class is not recorded"
        );
        out.merge(keyed);
        assert_eq!(out.kind_name("HessTrace[ggn]"), "HessTrace");
        assert_eq!(
            out.keys().into_iter().collect::<Vec<_>>(),
            ["GradNorm", "HessTrace[ggn]", "Loss"]
        );
    }
}
