//! Which examples carry the gradient: late in training, when a handful of examples carry half
//! of `Σ_n ‖g_n‖²` step after step, the network is spending its updates on them — often
//! wrong labels, duplicates or outliers being memorised.

use std::collections::BTreeMap;

use crate::run::median;
use crate::{Code, Finding, Run};

/// `few-examples`: over the last third of the tracked steps (at least [`LATE_STEPS`]), the
/// median share of the batch that carries half of `Σ_n ‖g_n‖²` is at most this.
pub(crate) const CONCENTRATION: f64 = 0.05;
/// The fewest late steps the check reads.
pub(crate) const LATE_STEPS: usize = 3;

pub(crate) fn few_examples(run: &Run) -> Option<Finding> {
    let tracked = &run.examples;
    let late = &tracked[tracked.len() - tracked.len().div_ceil(3)..];
    if late.len() < LATE_STEPS || tracked.len() < 2 * LATE_STEPS {
        return None;
    }
    let fraction = median(late.iter().map(|(_, e)| e.half_fraction()));
    if fraction.is_nan() || fraction > CONCENTRATION {
        return None;
    }
    let batch = median(late.iter().map(|(_, e)| e.batch as f64));
    let half = median(late.iter().map(|(_, e)| e.half as f64));
    // The examples at the top most often, where the steps named them.
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (_, e) in late.iter().filter(|(_, e)| e.ids_known) {
        for top in e.top.iter().take(e.half.max(1)) {
            *counts.entry(top.id).or_default() += 1;
        }
    }
    let mut frequent: Vec<(u64, usize)> = counts.into_iter().collect();
    frequent.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let named = if frequent.is_empty() {
        "; the steps carried no sample ids, so the examples are not named".to_string()
    } else {
        format!(
            "; most often among them: {}",
            frequent
                .iter()
                .take(5)
                .map(|(id, n)| format!("id {id} ({n} steps)"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Some(Finding::new(
        Code::FewExamples,
        "late in training a handful of examples carry most of the gradient",
        format!(
            "median {half:.0} of {batch:.0} examples ({:.1} %) carry half of Σ‖g_n‖² over the \
             last {} tracked steps{named}",
            100.0 * fraction,
            late.len()
        ),
        late.iter()
            .filter(|(_, e)| e.half_fraction() <= CONCENTRATION)
            .map(|(s, _)| *s)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use cockpit_quantities::{ExampleShare, ExampleShares, Output, Value};

    use super::*;

    fn log(halves: &[usize]) -> Output {
        let mut output = Output::new();
        for (step, &half) in halves.iter().enumerate() {
            output.insert(
                step,
                "Examples",
                Value::Examples(ExampleShares {
                    batch: 100,
                    half,
                    ids_known: true,
                    top: vec![ExampleShare {
                        id: 7,
                        share: 0.4,
                        loss: 3.0,
                    }],
                }),
            );
        }
        output
    }

    /// Spread early, concentrated late: flagged, naming the example; spread throughout, or
    /// too few steps: not.
    #[test]
    fn flags_concentration_late_in_training() {
        let run = |halves: &[usize]| few_examples(&Run::new(&log(halves), &[]));
        let finding = run(&[40, 35, 30, 20, 3, 2, 2]).expect("flagged");
        assert_eq!(finding.code, Code::FewExamples);
        assert!(finding.evidence.contains("id 7"), "{}", finding.evidence);
        assert!(run(&[40, 35, 30, 20, 30, 25, 20]).is_none());
        assert!(run(&[2, 2, 2]).is_none());
        assert!(run(&[]).is_none());
    }
}
