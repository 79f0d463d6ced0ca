//! `cockpit diagnose`: what Cockpit leaves to the reader, said in words.
//!
//! Each check reads a Cockpit output (from our logs or the Python Cockpit's) and flags a
//! pattern the Cockpit paper and the gradient-test literature describe, with its evidence and
//! a documented threshold. A check whose quantities are missing from the log is skipped.
//!
//! | code | pattern | threshold |
//! |---|---|---|
//! | `non-finite` | NaN or ±∞ in any quantity | any |
//! | `overshooting` | α mostly > 1: steps jump past the valley floor | ≥ 50 % of the last half of α values above 1 (≥ 4 values) |
//! | `crawling` | α mostly ≈ −1: steps too small to make progress | ≥ 50 % of the last half within 0.1 of −1 (≥ 4 values) |
//! | `exploding-gradient` | a layer's gradient norm grew | median of the last 10 % ≥ 100 × median of the first 10 % |
//! | `vanishing-gradient` | a layer's gradient norm collapsed | median of the last 10 % ≤ 1e-3 × median of the first 10 % |
//! | `frozen-layer` | a layer stopped moving | update size ≤ 1e-12 absolute, or ≤ 1e-6 × the median update of all layers, on the last 10 % of steps |
//! | `small-batch` | gradient tests say the batch is too small (Byrd et al. 2012; Bollapragada et al. 2017) | median of the last 10 values of NormTest, InnerTest or OrthoTest > 1 |
//! | `rising-curvature` | the loss surface sharpens | HessMaxEV (or the summed HessTrace) median of the last 10 % ≥ 10 × the first 10 % and positive |

use cockpit_quantities::Output;

/// One flagged pattern with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// A stable code, e.g. `overshooting`.
    pub code: &'static str,
    /// What it means, in one sentence.
    pub message: String,
    /// The numbers behind it.
    pub evidence: String,
    /// The steps concerned (first ones).
    pub steps: Vec<usize>,
}

/// Runs every check on `output`.
pub fn diagnose(output: &Output) -> Vec<Finding> {
    let mut findings = Vec::new();
    non_finite(output, &mut findings);
    alpha(output, &mut findings);
    gradient_norms(output, &mut findings);
    frozen_layers(output, &mut findings);
    small_batch(output, &mut findings);
    rising_curvature(output, &mut findings);
    findings
}

fn scalars(output: &Output, key: &str) -> Vec<(usize, f64)> {
    output
        .series(key)
        .into_iter()
        .filter_map(|(s, v)| v.as_f64().map(|x| (s, x)))
        .collect()
}

fn lists(output: &Output, key: &str) -> Vec<(usize, Vec<f64>)> {
    output
        .series(key)
        .into_iter()
        .filter_map(|(s, v)| v.as_list().map(|l| (s, l.to_vec())))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
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

/// `(first 10 %, last 10 %)` of a series, at least one value each.
fn ends<T: Clone>(series: &[T]) -> (Vec<T>, Vec<T>) {
    let k = (series.len() / 10).max(1);
    (series[..k].to_vec(), series[series.len() - k..].to_vec())
}

fn steps_of<T>(series: &[(usize, T)]) -> Vec<usize> {
    series.iter().map(|(s, _)| *s).take(10).collect()
}

fn non_finite(output: &Output, findings: &mut Vec<Finding>) {
    let bad: Vec<(usize, &str)> = output
        .iter()
        .filter(|(_, _, v)| !v.is_finite())
        .map(|(s, k, _)| (s, k))
        .collect();
    if bad.is_empty() {
        return;
    }
    let mut keys: Vec<&str> = bad.iter().map(|(_, k)| *k).collect();
    keys.sort_unstable();
    keys.dedup();
    findings.push(Finding {
        code: "non-finite",
        message: "NaN or infinite values: the run diverged or the loss is undefined".into(),
        evidence: format!("{} values in {}", bad.len(), keys.join(", ")),
        steps: bad.iter().map(|(s, _)| *s).take(10).collect(),
    });
}

fn alpha(output: &Output, findings: &mut Vec<Finding>) {
    let series = scalars(output, "Alpha");
    if series.len() < 8 {
        return;
    }
    let recent = &series[series.len() / 2..];
    let share = |pred: &dyn Fn(f64) -> bool| {
        recent.iter().filter(|(_, a)| pred(*a)).count() as f64 / recent.len() as f64
    };
    let over = share(&|a| a > 1.0);
    let crawl = share(&|a| (a + 1.0).abs() < 0.1);
    if over >= 0.5 {
        findings.push(Finding {
            code: "overshooting",
            message: "steps overshoot: most α > 1, the learning rate is likely too large".into(),
            evidence: format!(
                "{:.0} % of the last {} α values above 1 (median {:.2})",
                100.0 * over,
                recent.len(),
                median(recent.iter().map(|(_, a)| *a).collect())
            ),
            steps: steps_of(recent),
        });
    }
    if crawl >= 0.5 {
        findings.push(Finding {
            code: "crawling",
            message: "steps crawl: most α ≈ −1, the learning rate is likely too small".into(),
            evidence: format!(
                "{:.0} % of the last {} α values within 0.1 of −1",
                100.0 * crawl,
                recent.len()
            ),
            steps: steps_of(recent),
        });
    }
}

fn gradient_norms(output: &Output, findings: &mut Vec<Finding>) {
    let series = lists(output, "GradNorm");
    if series.len() < 4 {
        return;
    }
    let layers = series.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
    for p in 0..layers {
        let values: Vec<(usize, f64)> = series.iter().map(|(s, l)| (*s, l[p])).collect();
        let (first, last) = ends(&values);
        let (a, b) = (
            median(first.iter().map(|x| x.1).collect()),
            median(last.iter().map(|x| x.1).collect()),
        );
        if !(a.is_finite() && b.is_finite()) {
            continue;
        }
        if b >= 100.0 * a && b > 0.0 {
            findings.push(Finding {
                code: "exploding-gradient",
                message: format!("the gradient norm of parameter #{p} exploded"),
                evidence: format!(
                    "median ‖∇‖ {a:.3e} at the start, {b:.3e} at the end ({:.0}×)",
                    b / a.max(f64::MIN_POSITIVE)
                ),
                steps: steps_of(&last),
            });
        } else if a > 0.0 && b <= 1e-3 * a {
            findings.push(Finding {
                code: "vanishing-gradient",
                message: format!("the gradient norm of parameter #{p} vanished"),
                evidence: format!("median ‖∇‖ {a:.3e} at the start, {b:.3e} at the end"),
                steps: steps_of(&last),
            });
        }
    }
}

fn frozen_layers(output: &Output, findings: &mut Vec<Finding>) {
    let series = lists(output, "UpdateSize");
    if series.len() < 4 {
        return;
    }
    let (_, last) = ends(&series);
    let layers = last.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
    let overall = median(last.iter().flat_map(|(_, l)| l.iter().copied()).collect());
    for p in 0..layers {
        let largest = last.iter().map(|(_, l)| l[p].abs()).fold(0.0, f64::max);
        if largest <= 1e-12 || (overall > 0.0 && largest <= 1e-6 * overall) {
            findings.push(Finding {
                code: "frozen-layer",
                message: format!("parameter #{p} stopped moving (dead units, a zero learning rate or a detached layer)"),
                evidence: format!("update size at most {largest:.3e} over the last {} steps (median of all layers {overall:.3e})", last.len()),
                steps: steps_of(&last),
            });
        }
    }
}

fn small_batch(output: &Output, findings: &mut Vec<Finding>) {
    for key in ["NormTest", "InnerTest", "OrthoTest"] {
        let series = scalars(output, key);
        if series.is_empty() {
            continue;
        }
        let recent = &series[series.len().saturating_sub(10)..];
        let m = median(recent.iter().map(|(_, v)| *v).collect());
        if m > 1.0 {
            findings.push(Finding {
                code: "small-batch",
                message: format!(
                    "{key} says the batch is too small for a reliable descent direction"
                ),
                evidence: format!(
                    "median {key} {m:.2} > 1 over the last {} steps",
                    recent.len()
                ),
                steps: steps_of(recent),
            });
        }
    }
}

fn rising_curvature(output: &Output, findings: &mut Vec<Finding>) {
    let mut series = scalars(output, "HessMaxEV");
    let mut key = "HessMaxEV";
    if series.len() < 4 {
        series = lists(output, "HessTrace")
            .into_iter()
            .map(|(s, l)| (s, l.iter().sum()))
            .collect();
        key = "HessTrace";
    }
    if series.len() < 4 {
        return;
    }
    let (first, last) = ends(&series);
    let (a, b) = (
        median(first.iter().map(|x| x.1).collect()),
        median(last.iter().map(|x| x.1).collect()),
    );
    if a > 0.0 && b >= 10.0 * a {
        findings.push(Finding {
            code: "rising-curvature",
            message: "the curvature rose sharply: the loss surface is getting sharper (consider a smaller learning rate)".into(),
            evidence: format!("median {key} {a:.3e} at the start, {b:.3e} at the end ({:.0}×)", b / a),
            steps: steps_of(&last),
        });
    }
}

/// A report of the findings, one block each; "nothing flagged" if there are none.
pub fn report(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "nothing flagged\n".into();
    }
    let mut text = String::new();
    for f in findings {
        text.push_str(&format!(
            "[{}] {}\n    evidence: {}\n    steps: {:?}\n",
            f.code, f.message, f.evidence, f.steps
        ));
    }
    text
}
