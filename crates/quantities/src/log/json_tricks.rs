//! Cockpit's on-disk encoding: `json_tricks.dump(indent=4, sort_keys=True)` of the output.
//!
//! Step keys are strings; scalars and per-parameter lists are plain JSON; parameter arrays are
//! nested lists; histogram arrays are json_tricks ndarray objects
//! `{"__ndarray__": [...], "dtype": "...", "shape": [...]}` with `"Corder": true` on 2-d ones.
//! The Python `CockpitPlotter` needs that encoding for the histograms.

use std::collections::BTreeMap;

use super::json::Json;
use crate::{ExampleShare, ExampleShares, Histogram1d, Histogram2d, HostArray, Output, Value};

/// The key of the first step's entry that holds the parameters' dotted names (a column the
/// Python `CockpitPlotter` has no instrument for, so it ignores it).
pub(crate) const PARAMETER_NAMES_KEY: &str = "parameter_names";

/// The key of the first step's entry that holds the kinds of keyed variants
/// ([`Output::kinds`], `{"HessTrace[ggn]": "HessTrace"}`), which the Python `CockpitPlotter`
/// ignores as it does the names.
pub(crate) const KINDS_KEY: &str = "quantity_kinds";

/// The suffix of the key beside an estimate's that holds its standard errors.
pub(crate) const STDERR_SUFFIX: &str = "_stderr";

/// Encodes a whole output as Cockpit's log document.
pub(crate) fn encode_output(output: &Output) -> Json {
    let mut steps: BTreeMap<String, Json> = BTreeMap::new();
    for (step, name, value) in output.iter() {
        let entry = steps
            .entry(step.to_string())
            .or_insert_with(|| Json::Object(BTreeMap::new()));
        if let Json::Object(map) = entry {
            map.insert(name.to_string(), encode_value(value));
            if let Value::Estimate(estimate) = value {
                map.insert(format!("{name}{STDERR_SUFFIX}"), floats(&estimate.stderr));
            }
        }
    }
    if let (Some(first), false) = (output.steps().next(), output.parameter_names().is_empty())
        && let Some(Json::Object(map)) = steps.get_mut(&first.to_string())
    {
        let names = output.parameter_names().iter().cloned().map(Json::Str);
        map.insert(PARAMETER_NAMES_KEY.into(), Json::Array(names.collect()));
    }
    if let (Some(first), false) = (output.steps().next(), output.kinds().is_empty())
        && let Some(Json::Object(map)) = steps.get_mut(&first.to_string())
    {
        let kinds = output
            .kinds()
            .iter()
            .map(|(key, class)| (key.clone(), Json::Str(class.clone())));
        map.insert(KINDS_KEY.into(), Json::Object(kinds.collect()));
    }
    Json::Object(steps)
}

/// Decodes a Cockpit log document.
pub(crate) fn decode_output(json: Json) -> Result<Output, String> {
    let Json::Object(steps) = json else {
        return Err("the top level must be an object keyed by step".into());
    };
    let mut output = Output::new();
    for (key, values) in steps {
        let step: usize = key
            .parse()
            .map_err(|_| format!("step key `{key}` is not a non-negative integer"))?;
        let Json::Object(values) = values else {
            return Err(format!("step `{key}` must hold an object of quantities"));
        };
        for (name, value) in values {
            if name == PARAMETER_NAMES_KEY
                && let Json::Array(items) = &value
                && let Some(names) = items
                    .iter()
                    .map(|item| match item {
                        Json::Str(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect::<Option<Vec<String>>>()
            {
                output.set_parameter_names(names);
                continue;
            }
            if name == KINDS_KEY
                && let Json::Object(kinds) = &value
                && kinds.values().all(|class| matches!(class, Json::Str(_)))
            {
                for (key, class) in kinds {
                    if let Json::Str(class) = class {
                        output.set_kind(key, class);
                    }
                }
                continue;
            }
            let value =
                decode_value(value).map_err(|why| format!("step {key}, `{name}`: {why}"))?;
            output.insert(step, name, value);
        }
        join_estimates(&mut output, step);
    }
    Ok(output)
}

/// Joins each `<key>_stderr` list at `step` to the same-length list under `<key>` as an
/// [`Estimate`](crate::Estimate).
fn join_estimates(output: &mut Output, step: usize) {
    let Some(values) = output.at(step) else {
        return;
    };
    let pairs: Vec<(String, String)> = values
        .keys()
        .filter_map(|key| {
            let base = key.strip_suffix(STDERR_SUFFIX)?;
            let (Some(Value::List(v)), Some(Value::List(e))) = (values.get(base), values.get(key))
            else {
                return None;
            };
            (v.len() == e.len()).then(|| (base.to_string(), key.clone()))
        })
        .collect();
    for (base, key) in pairs {
        let (Some(Value::List(values)), Some(Value::List(stderr))) =
            (output.get(step, &base).cloned(), output.remove(step, &key))
        else {
            continue;
        };
        output.insert(
            step,
            base,
            Value::Estimate(crate::Estimate { values, stderr }),
        );
    }
}

pub(crate) fn encode_value(value: &Value) -> Json {
    match value {
        Value::Int(i) => Json::Int(*i),
        Value::Float(f) => Json::Float(*f),
        Value::List(values) => floats(values),
        Value::Estimate(estimate) => floats(&estimate.values),
        Value::Arrays(arrays) => Json::Array(arrays.iter().map(nested).collect()),
        Value::Hist1d(h) => encode_hist1d(h),
        Value::Hist2d(h) => {
            let mut map = encode_hist2d(h);
            if !h.individual.is_empty() {
                map.insert("param_groups".into(), Json::Int(h.individual.len() as i64));
                for (k, single) in h.individual.iter().enumerate() {
                    map.insert(format!("param_{k}"), Json::Object(encode_hist2d(single)));
                }
            }
            Json::Object(map)
        }
        Value::Examples(e) => encode_examples(e),
        Value::Other(json) => Json::from_serde(json.clone()),
    }
}

/// Examples' value: an object the Python `CockpitPlotter` has no instrument for (it reads
/// only the keys it knows).
fn encode_examples(e: &ExampleShares) -> Json {
    let mut map = BTreeMap::new();
    map.insert("batch".into(), Json::Int(e.batch as i64));
    map.insert("half".into(), Json::Int(e.half as i64));
    map.insert("ids_known".into(), Json::Bool(e.ids_known));
    map.insert(
        "top_ids".into(),
        Json::Array(e.top.iter().map(|t| encode_id(t.id)).collect()),
    );
    map.insert(
        "top_shares".into(),
        floats(&e.top.iter().map(|t| t.share).collect::<Vec<_>>()),
    );
    map.insert(
        "top_losses".into(),
        floats(&e.top.iter().map(|t| t.loss).collect::<Vec<_>>()),
    );
    Json::Object(map)
}

/// An id as a JSON integer, or as its decimal text at 2⁶³ and above (beyond JSON's signed
/// integers as most readers take them).
fn encode_id(id: u64) -> Json {
    i64::try_from(id).map_or_else(|_| Json::Str(id.to_string()), Json::Int)
}

/// The object [`encode_examples`] writes, or `None` for any other object.
fn decode_examples(map: &BTreeMap<String, Json>) -> Option<Value> {
    let count = |key: &str| match map.get(key)? {
        Json::Int(i) if *i >= 0 => Some(*i as usize),
        _ => None,
    };
    let numbers = |key: &str| match map.get(key)? {
        Json::Array(items) => items.iter().map(Json::as_f64).collect::<Option<Vec<_>>>(),
        _ => None,
    };
    let ids: Vec<u64> = match map.get("top_ids")? {
        Json::Array(items) => items
            .iter()
            .map(|i| match i {
                Json::Int(i) => u64::try_from(*i).ok(),
                Json::Str(text) => text.parse().ok(),
                _ => None,
            })
            .collect::<Option<_>>()?,
        _ => return None,
    };
    let (shares, losses) = (numbers("top_shares")?, numbers("top_losses")?);
    if shares.len() != ids.len() || losses.len() != ids.len() {
        return None;
    }
    Some(Value::Examples(ExampleShares {
        batch: count("batch")?,
        half: count("half")?,
        ids_known: matches!(map.get("ids_known"), Some(Json::Bool(true))),
        top: ids
            .into_iter()
            .zip(shares.into_iter().zip(losses))
            .map(|(id, (share, loss))| ExampleShare { id, share, loss })
            .collect(),
    }))
}

fn encode_hist1d(h: &Histogram1d) -> Json {
    let mut map = BTreeMap::new();
    map.insert(
        "edges".into(),
        ndarray(floats(&h.edges), "float64", &[h.edges.len()]),
    );
    map.insert(
        "hist".into(),
        ndarray(floats(&h.hist), "float64", &[h.hist.len()]),
    );
    Json::Object(map)
}

fn encode_hist2d(h: &Histogram2d) -> BTreeMap<String, Json> {
    let (xb, yb) = h.bins;
    let rows = (0..xb)
        .map(|r| {
            Json::Array(
                h.hist[r * yb..(r + 1) * yb]
                    .iter()
                    .map(|c| Json::Int(*c))
                    .collect(),
            )
        })
        .collect();
    let mut map = BTreeMap::new();
    map.insert(
        "edges".into(),
        Json::Array(vec![
            ndarray(floats(&h.x_edges), "float64", &[h.x_edges.len()]),
            ndarray(floats(&h.y_edges), "float64", &[h.y_edges.len()]),
        ]),
    );
    map.insert(
        "hist".into(),
        ndarray(Json::Array(rows), "int64", &[xb, yb]),
    );
    map
}

fn floats(values: &[f64]) -> Json {
    Json::Array(values.iter().map(|v| Json::Float(*v)).collect())
}

fn ndarray(data: Json, dtype: &str, shape: &[usize]) -> Json {
    let mut map = BTreeMap::new();
    if shape.len() > 1 {
        map.insert("Corder".into(), Json::Bool(true));
    }
    map.insert("__ndarray__".into(), data);
    map.insert("dtype".into(), Json::Str(dtype.into()));
    map.insert(
        "shape".into(),
        Json::Array(shape.iter().map(|s| Json::Int(*s as i64)).collect()),
    );
    Json::Object(map)
}

/// An array as nested lists (`numpy.ndarray.tolist()`).
fn nested(array: &HostArray) -> Json {
    fn level(shape: &[usize], data: &[f64]) -> Json {
        match shape.split_first() {
            None => Json::Float(data.first().copied().unwrap_or(f64::NAN)),
            Some((&n, rest)) => {
                let stride: usize = rest.iter().product();
                Json::Array(
                    (0..n)
                        .map(|i| level(rest, &data[i * stride..(i + 1) * stride]))
                        .collect(),
                )
            }
        }
    }
    level(&array.shape, &array.data)
}

/// A value of the log; `Err` says why a histogram is not one (edges and counts that disagree).
fn decode_value(json: Json) -> Result<Value, String> {
    let value = match json {
        Json::Int(i) => Value::Int(i),
        Json::Float(f) => Value::Float(f),
        Json::Array(items) if items.iter().all(|i| i.as_f64().is_some()) => {
            Value::List(items.iter().filter_map(Json::as_f64).collect())
        }
        Json::Array(items) => match items.iter().map(unnest).collect::<Option<Vec<_>>>() {
            Some(arrays) => Value::Arrays(arrays),
            None => Value::Other(Json::Array(items).into_serde()),
        },
        Json::Object(map) => match decode_histogram(&map).or_else(|| decode_examples(&map)) {
            Some(value) => value,
            None => Value::Other(Json::Object(map).into_serde()),
        },
        other => Value::Other(other.into_serde()),
    };
    match &value {
        Value::Hist1d(h) => check_edges("", h.hist.len(), h.edges.len())?,
        Value::Hist2d(h) => {
            for (which, single) in std::iter::once(("", h))
                .chain(h.individual.iter().map(|single| ("a parameter's ", single)))
            {
                check_edges(which, single.bins.0, single.x_edges.len())?;
                check_edges(which, single.bins.1, single.y_edges.len())?;
            }
        }
        _ => {}
    }
    Ok(value)
}

/// A histogram axis has one edge more than bins.
fn check_edges(which: &str, bins: usize, edges: usize) -> Result<(), String> {
    if edges == bins + 1 {
        Ok(())
    } else {
        Err(format!(
            "{which}histogram has {bins} bins but {edges} edges (an axis has one edge more \
             than bins)"
        ))
    }
}

fn decode_histogram(map: &BTreeMap<String, Json>) -> Option<Value> {
    let (hist, edges) = (map.get("hist")?, map.get("edges")?);
    match edges {
        Json::Array(axes)
            if axes.len() == 2
                && axes
                    .iter()
                    .all(|a| unnest(&un_ndarray(a)).is_some_and(|x| x.shape.len() == 1)) =>
        {
            let mut h = decode_hist2d(hist, &axes[0], &axes[1])?;
            if let Some(groups) = map.get("param_groups").and_then(Json::as_f64) {
                for k in 0..groups as usize {
                    let Some(Json::Object(single)) = map.get(&format!("param_{k}")) else {
                        return None;
                    };
                    let Json::Array(axes) = single.get("edges")? else {
                        return None;
                    };
                    h.individual.push(decode_hist2d(
                        single.get("hist")?,
                        axes.first()?,
                        axes.get(1)?,
                    )?);
                }
            }
            Some(Value::Hist2d(h))
        }
        _ => {
            let hist = unnest(&un_ndarray(hist))?;
            let edges = unnest(&un_ndarray(edges))?;
            Some(Value::Hist1d(Histogram1d {
                hist: hist.data,
                edges: edges.data,
            }))
        }
    }
}

fn decode_hist2d(hist: &Json, x: &Json, y: &Json) -> Option<Histogram2d> {
    let hist = unnest(&un_ndarray(hist))?;
    let [xb, yb] = hist.shape[..] else {
        return None;
    };
    Some(Histogram2d {
        hist: hist.data.iter().map(|c| *c as i64).collect(),
        bins: (xb, yb),
        x_edges: unnest(&un_ndarray(x))?.data,
        y_edges: unnest(&un_ndarray(y))?.data,
        individual: Vec::new(),
    })
}

/// The data of a json_tricks ndarray object, or the JSON itself if it is not one.
fn un_ndarray(json: &Json) -> Json {
    match json {
        Json::Object(map) => map.get("__ndarray__").cloned().unwrap_or(Json::Null),
        other => other.clone(),
    }
}

/// Nested lists of numbers as a shaped array (rectangular only).
fn unnest(json: &Json) -> Option<HostArray> {
    match json {
        Json::Int(_) | Json::Float(_) => Some(HostArray {
            shape: vec![],
            data: vec![json.as_f64()?],
        }),
        Json::Array(items) => {
            let inner: Vec<HostArray> = items.iter().map(unnest).collect::<Option<_>>()?;
            let sub_shape = inner.first().map(|a| a.shape.clone()).unwrap_or_default();
            if inner.iter().any(|a| a.shape != sub_shape) {
                return None;
            }
            let mut shape = vec![inner.len()];
            shape.extend(sub_shape);
            Some(HostArray {
                shape,
                data: inner.into_iter().flat_map(|a| a.data).collect(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_the_encoding() {
        let mut output = Output::new();
        output.insert(0, "Loss", Value::Float(1.25));
        output.insert(0, "epoch_count", Value::Int(3));
        output.insert(1, "GradNorm", Value::List(vec![0.5, 0.25]));
        output.insert(
            1,
            "Parameters",
            Value::Arrays(vec![
                HostArray {
                    shape: vec![2, 2],
                    data: vec![1.0, 2.0, 3.0, 4.0],
                },
                HostArray {
                    shape: vec![2],
                    data: vec![5.0, 6.0],
                },
            ]),
        );
        output.insert(
            2,
            "GradHist1d",
            Value::Hist1d(Histogram1d {
                hist: vec![1.0, 0.0],
                edges: vec![-1.0, 0.0, 1.0],
            }),
        );
        output.insert(
            2,
            "GradHist2d",
            Value::Hist2d(Histogram2d {
                hist: vec![1, 2, 3, 4, 5, 6],
                bins: (2, 3),
                x_edges: vec![-1.0, 0.0, 1.0],
                y_edges: vec![-1.0, 0.0, 1.0, 2.0],
                individual: vec![],
            }),
        );
        let decoded =
            decode_output(Json::parse(&encode_output(&output).to_pretty()).unwrap()).unwrap();
        assert_eq!(decoded, output);
    }

    /// An estimate keeps Cockpit's list under its key, its errors beside it under
    /// `<key>_stderr`, and comes back as an estimate.
    #[test]
    fn estimates_travel_with_their_errors() {
        let mut output = Output::new();
        output.insert(
            4,
            "HessTrace",
            Value::Estimate(crate::Estimate {
                values: vec![1.5, -0.25],
                stderr: vec![0.5, 0.125],
            }),
        );
        let text = encode_output(&output).to_line();
        assert!(text.contains(r#""HessTrace": [1.5, -0.25]"#), "{text}");
        assert!(
            text.contains(r#""HessTrace_stderr": [0.5, 0.125]"#),
            "{text}"
        );
        let decoded = decode_output(Json::parse(&text).unwrap()).unwrap();
        assert_eq!(decoded, output);
        // A `_stderr` list of another length, or beside no list, stays what it is.
        let odd = r#"{"0": {"HessTrace": [1.0], "HessTrace_stderr": [0.1, 0.2], "X_stderr": [1]}}"#;
        let decoded = decode_output(Json::parse(odd).unwrap()).unwrap();
        assert!(matches!(decoded.get(0, "HessTrace"), Some(Value::List(_))));
        assert!(decoded.get(0, "X_stderr").is_some());
    }

    /// Examples' shares round-trip, ids at and above 2⁶³ included; an object that only looks
    /// like one (a negative id, lists of different lengths) stays `Other`.
    #[test]
    fn example_shares_round_trip() {
        let mut output = Output::new();
        output.insert(
            2,
            "Examples",
            Value::Examples(ExampleShares {
                batch: 128,
                half: 3,
                ids_known: true,
                top: vec![
                    ExampleShare {
                        id: u64::MAX,
                        share: 0.5,
                        loss: 2.25,
                    },
                    ExampleShare {
                        id: 7,
                        share: 0.125,
                        loss: 0.5,
                    },
                ],
            }),
        );
        let text = encode_output(&output).to_line();
        let decoded = decode_output(Json::parse(&text).unwrap()).unwrap();
        assert_eq!(decoded, output);
        for odd in [
            r#"{"0": {"Examples": {"batch": 2, "half": 1, "top_ids": [-1], "top_shares": [1.0], "top_losses": [1.0]}}}"#,
            r#"{"0": {"Examples": {"batch": 2, "half": 1, "top_ids": [1, 2], "top_shares": [1.0], "top_losses": [1.0]}}}"#,
        ] {
            let decoded = decode_output(Json::parse(odd).unwrap()).unwrap();
            assert!(
                matches!(decoded.get(0, "Examples"), Some(Value::Other(_))),
                "{odd}"
            );
        }
    }

    #[test]
    fn two_dimensional_ndarrays_carry_corder() {
        let h = Value::Hist2d(Histogram2d {
            hist: vec![0; 4],
            bins: (2, 2),
            x_edges: vec![0.0, 1.0, 2.0],
            y_edges: vec![0.0, 1.0, 2.0],
            individual: vec![],
        });
        let text = encode_value(&h).to_line();
        assert!(text.contains(r#""hist": {"Corder": true, "__ndarray__": [[0, 0], [0, 0]], "dtype": "int64", "shape": [2, 2]}"#), "{text}");
    }

    #[test]
    fn malformed_documents_are_refused() {
        assert!(decode_output(Json::Array(vec![])).is_err());
        let mut map = BTreeMap::new();
        map.insert("step-one".to_string(), Json::Object(BTreeMap::new()));
        assert!(
            decode_output(Json::Object(map))
                .unwrap_err()
                .contains("step-one")
        );
    }

    /// A histogram whose edges and counts disagree is refused (it was cut to fit), naming the
    /// step and the key; so plot, diagnose, serve and export, which read through here,
    /// refuse it too.
    #[test]
    fn histograms_whose_edges_and_counts_disagree_are_refused() {
        let log = r#"{"3": {"GradHist1d": {"hist": [1, 2, 3, 4, 5], "edges": [0, 1, 2]}}}"#;
        let err = decode_output(Json::parse(log).unwrap()).unwrap_err();
        assert!(
            err.contains("step 3")
                && err.contains("GradHist1d")
                && err.contains("5 bins but 3 edges"),
            "{err}"
        );
        let log =
            r#"{"0": {"GradHist2d": {"hist": [[1, 2], [3, 4]], "edges": [[0, 1, 2], [0, 1]]}}}"#;
        let err = decode_output(Json::parse(log).unwrap()).unwrap_err();
        assert!(err.contains("2 bins but 2 edges"), "{err}");
        let fine = r#"{"0": {"GradHist1d": {"hist": [1, 2], "edges": [0, 1, 2]}}}"#;
        assert!(decode_output(Json::parse(fine).unwrap()).is_ok());
    }
}
