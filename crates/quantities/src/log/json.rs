//! A small JSON tree that, unlike `serde_json::Value`, holds NaN and infinities, and prints
//! exactly as Python's `json.dumps(indent=4, sort_keys=True)` lays a document out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A JSON document as Python's `json` module sees it (NaN and ±Infinity allowed).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

const NAN: &str = "\u{1}cockpit-NaN";
const INF: &str = "\u{1}cockpit-Infinity";
const NEG_INF: &str = "\u{1}cockpit--Infinity";

impl Json {
    /// Pretty-prints with four-space indentation and sorted keys (the key order is the
    /// `BTreeMap`'s, which is Python's `sort_keys` order for string keys).
    pub(crate) fn to_pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(0));
        out
    }

    /// One line, for JSON-lines streams.
    pub(crate) fn to_line(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None);
        out
    }

    fn write(&self, out: &mut String, level: Option<usize>) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::Float(f) => write_float(out, *f),
            Json::Str(s) => write_str(out, s),
            Json::Array(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    separator(out, i, level);
                    item.write(out, level.map(|l| l + 1));
                }
                close(out, level);
                out.push(']');
            }
            Json::Object(map) => {
                if map.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push('{');
                for (i, (key, value)) in map.iter().enumerate() {
                    separator(out, i, level);
                    write_str(out, key);
                    out.push_str(": ");
                    value.write(out, level.map(|l| l + 1));
                }
                close(out, level);
                out.push('}');
            }
        }
    }

    /// Parses JSON text, accepting Python's bare `NaN`, `Infinity` and `-Infinity`.
    pub(crate) fn parse(text: &str) -> Result<Json, serde_json::Error> {
        let value: serde_json::Value = serde_json::from_str(&protect_non_finite(text))?;
        Ok(Json::from_serde(value))
    }

    pub(crate) fn from_serde(value: serde_json::Value) -> Json {
        match value {
            serde_json::Value::Null => Json::Null,
            serde_json::Value::Bool(b) => Json::Bool(b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Json::Int(i),
                None => Json::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => match s.as_str() {
                NAN => Json::Float(f64::NAN),
                INF => Json::Float(f64::INFINITY),
                NEG_INF => Json::Float(f64::NEG_INFINITY),
                _ => Json::Str(s),
            },
            serde_json::Value::Array(items) => {
                Json::Array(items.into_iter().map(Json::from_serde).collect())
            }
            serde_json::Value::Object(map) => Json::Object(
                map.into_iter()
                    .map(|(k, v)| (k, Json::from_serde(v)))
                    .collect(),
            ),
        }
    }

    /// The tree as a `serde_json::Value` (non-finite numbers become `null`).
    pub(crate) fn into_serde(self) -> serde_json::Value {
        match self {
            Json::Null => serde_json::Value::Null,
            Json::Bool(b) => serde_json::Value::Bool(b),
            Json::Int(i) => serde_json::Value::from(i),
            Json::Float(f) => serde_json::Number::from_f64(f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Json::Str(s) => serde_json::Value::String(s),
            Json::Array(items) => {
                serde_json::Value::Array(items.into_iter().map(Json::into_serde).collect())
            }
            Json::Object(map) => serde_json::Value::Object(
                map.into_iter().map(|(k, v)| (k, v.into_serde())).collect(),
            ),
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Int(i) => Some(*i as f64),
            Json::Float(f) => Some(*f),
            _ => None,
        }
    }
}

fn separator(out: &mut String, index: usize, level: Option<usize>) {
    if index > 0 {
        out.push(',');
        if level.is_none() {
            out.push(' ');
        }
    }
    if let Some(level) = level {
        out.push('\n');
        out.push_str(&"    ".repeat(level + 1));
    }
}

fn close(out: &mut String, level: Option<usize>) {
    if let Some(level) = level {
        out.push('\n');
        out.push_str(&"    ".repeat(level));
    }
}

fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f == f64::INFINITY {
        out.push_str("Infinity");
    } else if f == f64::NEG_INFINITY {
        out.push_str("-Infinity");
    } else {
        // serde_json prints the shortest representation that reads back to the same f64.
        out.push_str(
            &serde_json::Number::from_f64(f).map_or_else(|| "null".into(), |n| n.to_string()),
        );
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push_str(&serde_json::Value::String(s.to_string()).to_string());
}

/// Rewrites bare `NaN`, `Infinity` and `-Infinity` tokens (outside strings) as sentinel
/// strings that `serde_json` accepts.
fn protect_non_finite(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let replaced = [("-Infinity", NEG_INF), ("Infinity", INF), ("NaN", NAN)]
            .into_iter()
            .find(|(token, _)| rest.starts_with(token));
        if let Some((token, sentinel)) = replaced {
            write_str(&mut out, sentinel);
            rest = &rest[token.len()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_printing_matches_python_layout() {
        let mut inner = BTreeMap::new();
        inner.insert(
            "b".to_string(),
            Json::Array(vec![Json::Float(0.5), Json::Int(2)]),
        );
        inner.insert("a".to_string(), Json::Array(vec![]));
        let mut map = BTreeMap::new();
        map.insert("10".to_string(), Json::Object(inner));
        map.insert("2".to_string(), Json::Float(f64::NAN));
        let text = Json::Object(map).to_pretty();
        // Python: json.dumps({"2": float("nan"), "10": {"b": [0.5, 2], "a": []}}, indent=4, sort_keys=True)
        let python = "{\n    \"10\": {\n        \"a\": [],\n        \"b\": [\n            0.5,\n            2\n        ]\n    },\n    \"2\": NaN\n}";
        assert_eq!(text, python);
    }

    #[test]
    fn non_finite_numbers_round_trip_and_strings_are_untouched() {
        let text = r#"{"x": [NaN, Infinity, -Infinity, 1.5], "s": "NaN Infinity \" NaN"}"#;
        let Json::Object(map) = Json::parse(text).unwrap() else {
            panic!("not an object")
        };
        let Json::Array(x) = &map["x"] else { panic!() };
        assert!(x[0].as_f64().unwrap().is_nan());
        assert_eq!(x[1].as_f64(), Some(f64::INFINITY));
        assert_eq!(x[2].as_f64(), Some(f64::NEG_INFINITY));
        assert_eq!(map["s"], Json::Str("NaN Infinity \" NaN".into()));
        assert_eq!(Json::Float(0.1).to_line(), "0.1");
        assert_eq!(
            Json::parse(&Json::Float(1e-5).to_line()).unwrap(),
            Json::Float(1e-5)
        );
    }
}
