//! `cockpit examples`: the per-example table of a run, most suspicious examples first, with
//! the evidence for each.

use std::path::{Path, PathBuf};

use cockpit_quantities::examples::{
    ExampleStats, Ranked, Suspicion, rank, read_table_with, table_path,
};
use cockpit_quantities::log::LogError;
use cockpit_quantities::log::Reader;

/// The table a path names: the table itself (`….examples.csv`, or any `.csv`), else the
/// table beside the log it names (`run.json` → `run.examples.csv`).
pub fn resolve(path: &Path) -> PathBuf {
    if path.extension().is_some_and(|e| e == "csv") {
        path.to_path_buf()
    } else {
        let path = match path.extension() {
            // A stream `run.jsonl` lies beside the log `run.json`.
            Some(e) if e == "jsonl" => path.with_extension("json"),
            _ => path.to_path_buf(),
        };
        table_path(path)
    }
}

/// Every example of the table at (or beside) `path`, most suspicious first, and the table's
/// path.
///
/// # Errors
///
/// As [`read_table_with`].
pub fn ranked(
    reader: &Reader,
    path: &Path,
    learned_loss: f64,
) -> Result<(PathBuf, Vec<Ranked>), LogError> {
    let table = resolve(path);
    let rows: Vec<ExampleStats> = read_table_with(reader, &table)?;
    Ok((table, rank(&rows, learned_loss)))
}

/// The examples whose record suggests one of `kinds` (every kind but
/// [`Suspicion::Unremarkable`] when `kinds` is empty), in their order.
pub fn select(ranked: Vec<Ranked>, kinds: &[Suspicion]) -> Vec<Ranked> {
    ranked
        .into_iter()
        .filter(|r| {
            if kinds.is_empty() {
                r.suspicion != Suspicion::Unremarkable
            } else {
                kinds.contains(&r.suspicion)
            }
        })
        .collect()
}

/// The ranking as text: a header, then one line per example.
pub fn report(table: &Path, total: usize, ranked: &[Ranked]) -> String {
    let mut text = format!(
        "{} suspicious example(s) of {total} in {} (most suspicious first; score: the mean \
         loss over the example's visits)\n",
        ranked.len(),
        table.display()
    );
    for (k, r) in ranked.iter().enumerate() {
        // A sequence's (or map's) worst position says where in it to look.
        let worst = match r.stats.worst_position {
            Some(position) => format!(
                "; worst position {position} (loss {:.3})",
                r.stats.worst_position_loss
            ),
            None => String::new(),
        };
        text.push_str(&format!(
            "{:>4}. id {:<10} {:<18} score {:>8.3}  {}{worst}\n",
            k + 1,
            r.stats.id,
            r.suspicion.label(),
            r.score,
            r.evidence
        ));
    }
    text
}

/// The ranking as JSON (for tools): one object per example with its rank, score, suspicion,
/// evidence and record.
pub fn to_json(ranked: &[Ranked]) -> serde_json::Value {
    serde_json::Value::Array(
        ranked
            .iter()
            .enumerate()
            .map(|(k, r)| {
                serde_json::json!({
                    "rank": k + 1,
                    "id": r.stats.id,
                    "score": finite(r.score),
                    "suspicion": r.suspicion.label(),
                    "evidence": r.evidence,
                    // serde_json writes a NaN as null.
                    "record": serde_json::to_value(&r.stats).unwrap_or_default(),
                })
            })
            .collect(),
    )
}

/// JSON has no NaN: `null` in its place.
fn finite(x: f64) -> serde_json::Value {
    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// A suspicion by its printed word.
///
/// # Errors
///
/// The words there are, for an unknown one.
pub fn parse_suspicion(word: &str) -> Result<Suspicion, String> {
    [
        Suspicion::NeverLearned,
        Suspicion::MislabeledLike,
        Suspicion::Forgotten,
        Suspicion::Hard,
        Suspicion::Unremarkable,
    ]
    .into_iter()
    .find(|s| s.label() == word)
    .ok_or_else(|| {
        format!(
            "unknown kind `{word}`; one of never-learned, likely-mislabeled, forgotten, hard, \
             unremarkable"
        )
    })
}
