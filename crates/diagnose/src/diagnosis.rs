//! [`Diagnoser`] and [`Diagnosis`]: every check, then one story — findings ordered by the step
//! they first show, symptoms merged into the cause that came first, a one-line verdict.

use cockpit_quantities::Output;
use serde::Serialize;

use crate::{Finding, Run, check};

/// Runs the checks on a Cockpit output.
///
/// ```
/// use cockpit_diagnose::Diagnoser;
/// # let output = cockpit_quantities::Output::new();
/// let diagnosis = Diagnoser::new()
///     .with_names(&["fc1.weight".into(), "fc1.bias".into()])
///     .run(&output);
/// if diagnosis.is_flagged() {
///     eprintln!("{}", diagnosis.report());
/// }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Diagnoser {
    names: Vec<String>,
    classes: Option<usize>,
}

impl Diagnoser {
    /// A diagnoser with the names the output carries ([`Output::parameter_names`]; findings
    /// say `parameter #i` where there are none).
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the parameters, in the order of the log's per-parameter lists (e.g.
    /// [`Cockpit::parameter_names`](cockpit_quantities::Cockpit::parameter_names)).
    pub fn with_names(mut self, names: &[String]) -> Self {
        self.names = names.to_vec();
        self
    }

    /// Says that the loss is a cross-entropy over `classes` classes (a language model's: its
    /// vocabulary), so that the first loss is judged against chance level `ln C`: a start
    /// near it is healthy however far the run falls, one far above it is an exploding start
    /// even without a cliff. Without it, an exploding start needs a cliff in the first steps.
    pub fn with_classes(mut self, classes: usize) -> Self {
        self.classes = Some(classes);
        self
    }

    /// Every check on `output`, with the names given to [`Diagnoser::with_names`], else the
    /// output's own.
    pub fn run(&self, output: &Output) -> Diagnosis {
        let names = if self.names.is_empty() {
            output.parameter_names()
        } else {
            &self.names
        };
        let mut diagnosis = Diagnosis::from_findings(check::all(
            &Run::new(output, names).with_classes(self.classes),
        ));
        diagnosis.unread = READ
            .iter()
            .filter(|(kind, _)| kind.series(output).is_empty())
            .map(|(kind, checks)| format!("{} ({checks})", kind.name()))
            .collect();
        diagnosis
    }
}

/// How many steps after a cause another cause may start and still be explained by it (an
/// exploding start makes the learning rate too large for the first steps).
pub const CAUSE_WINDOW: usize = 3;

/// What the checks found, as one story.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The verdict in one line; `None` when nothing is flagged.
    pub summary: Option<String>,
    /// Root findings ordered by the step they first show, each with the findings it explains.
    pub findings: Vec<Finding>,
    /// The quantities some checks read that the log does not hold: those checks had nothing
    /// to look at (add the quantities to the Cockpit to have them run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
}

/// What the checks read, and which checks read it.
const READ: [(cockpit_quantities::QuantityKind, &str); 7] = {
    use cockpit_quantities::QuantityKind as K;
    [
        (K::Loss, "every loss check"),
        (K::Alpha, "step-too-large, step-too-small"),
        (
            K::GradNorm,
            "exploding-start, gradient-imbalance, exploding- and vanishing-gradient",
        ),
        (K::UpdateSize, "frozen-layer"),
        (K::NormTest, "small-batch"),
        (K::HessMaxEV, "step-too-large (lr·λ_max), rising-curvature"),
        (K::GradParamRatio, "gradient-imbalance over time"),
    ]
};

/// The codes of every check, in the order they run.
pub const CHECKS: &str = "non-finite, step-too-large, step-too-small, exploding-start, \
    misscaled-inputs, gradient-imbalance, frozen-layer, small-batch, rising-curvature, \
    loss-not-decreasing, few-examples";

impl Diagnosis {
    /// Orders `findings` by the step they first show and merges each into the earliest
    /// finding that explains it ([`Code::explains`](crate::Code::explains)) and showed at or
    /// before it — a cause explains another cause only within [`CAUSE_WINDOW`] steps.
    pub fn from_findings(mut findings: Vec<Finding>) -> Self {
        findings.sort_by_key(|f| (f.first_step, !f.code.is_cause(), f.code));
        let mut roots: Vec<Finding> = Vec::new();
        for finding in findings {
            let host = roots.iter_mut().find(|root| {
                root.code.explains(finding.code)
                    && root.first_step <= finding.first_step
                    && (!finding.code.is_cause()
                        || finding.first_step <= root.first_step + CAUSE_WINDOW)
            });
            match host {
                Some(root) => root.consequences.push(finding),
                None => roots.push(finding),
            }
        }
        // The verdict: the first cause; a symptom only where no cause was recognised.
        let summary = roots
            .iter()
            .find(|f| f.code.is_cause())
            .or(roots.first())
            .map(|top| {
                let label = if top.code.is_cause() {
                    "most likely"
                } else {
                    "flagged"
                };
                format!(
                    "{label}: {} — first sign at step {}: {}",
                    top.message, top.first_step, top.evidence
                )
            });
        Self {
            summary,
            findings: roots,
            unread: Vec::new(),
        }
    }

    /// Whether anything was flagged.
    pub fn is_flagged(&self) -> bool {
        !self.findings.is_empty()
    }

    /// Every finding's code, roots and consequences, in report order.
    pub fn codes(&self) -> Vec<crate::Code> {
        self.all().map(|f| f.code).collect()
    }

    /// Every finding, roots and the consequences under each, in report order.
    pub fn all(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .flat_map(|f| std::iter::once(f).chain(f.consequences.iter()))
    }

    /// The report for a person: the verdict, then one block per finding with its evidence,
    /// the parameters concerned and what to do; "nothing flagged" and the checks that ran when
    /// clean. Either way, the quantities some checks lacked.
    pub fn report(&self) -> String {
        let unread = if self.unread.is_empty() {
            String::new()
        } else {
            format!(
                "not in the log, so not checked: {}\n",
                self.unread.join("; ")
            )
        };
        let Some(summary) = &self.summary else {
            return format!("nothing flagged by the checks {CHECKS}\n{unread}");
        };
        let mut text = format!("{summary}\n\n");
        for finding in &self.findings {
            block(&mut text, finding, "");
            if !finding.consequences.is_empty() {
                text.push_str("    explains:\n");
                for consequence in &finding.consequences {
                    block(&mut text, consequence, "      ");
                }
            }
        }
        text.push_str(&unread);
        text
    }

    /// The diagnosis as JSON (`{"flagged", "summary", "findings": [...]}`), for CI gating.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Json<'a> {
            flagged: bool,
            #[serde(flatten)]
            diagnosis: &'a Diagnosis,
        }
        serde_json::to_string_pretty(&Json {
            flagged: self.is_flagged(),
            diagnosis: self,
        })
        .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
    }
}

fn block(text: &mut String, f: &Finding, indent: &str) {
    text.push_str(&format!(
        "{indent}[{}] from step {}: {}\n{indent}    evidence: {}\n",
        f.code, f.first_step, f.message, f.evidence
    ));
    if !f.parameters.is_empty() {
        text.push_str(&format!(
            "{indent}    parameters: {}\n",
            f.parameters.join(", ")
        ));
    }
    if indent.is_empty() {
        text.push_str(&format!("{indent}    advice: {}\n", f.code.advice()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    fn at(code: Code, step: usize) -> Finding {
        Finding::new(code, code.as_str(), "e", vec![step])
    }

    #[test]
    fn symptoms_join_the_earliest_cause_before_them() {
        let d = Diagnosis::from_findings(vec![
            at(Code::FrozenLayer, 12),
            at(Code::NonFinite, 0),
            at(Code::StepTooLarge, 1),
            at(Code::VanishingGradient, 30),
            at(Code::SmallBatch, 5),
        ]);
        let roots: Vec<Code> = d.findings.iter().map(|f| f.code).collect();
        assert_eq!(
            roots,
            vec![Code::NonFinite, Code::StepTooLarge, Code::SmallBatch]
        );
        let explained: Vec<Code> = d.findings[1].consequences.iter().map(|f| f.code).collect();
        assert_eq!(explained, vec![Code::FrozenLayer, Code::VanishingGradient]);
        assert!(
            d.summary
                .as_deref()
                .is_some_and(|s| s.starts_with("most likely: step-too-large"))
        );
        let only_symptoms = Diagnosis::from_findings(vec![at(Code::FrozenLayer, 2)]);
        assert!(
            only_symptoms
                .summary
                .as_deref()
                .is_some_and(|s| s.starts_with("flagged: frozen-layer"))
        );
    }

    #[test]
    fn the_verdict_names_the_first_cause() {
        let d = Diagnosis::from_findings(vec![
            at(Code::LossNotDecreasing, 3),
            at(Code::StepTooSmall, 0),
        ]);
        assert_eq!(d.codes(), vec![Code::StepTooSmall, Code::LossNotDecreasing]);
        assert!(
            d.summary
                .as_deref()
                .is_some_and(|s| s.starts_with("most likely: step-too-small"))
        );
        assert!(d.report().contains("explains:"));
        let json: serde_json::Value = serde_json::from_str(&d.to_json()).unwrap_or_default();
        assert_eq!(json["flagged"], true);
        assert_eq!(json["findings"][0]["code"], "step-too-small");
        assert_eq!(
            json["findings"][0]["consequences"][0]["code"],
            "loss-not-decreasing"
        );
    }

    #[test]
    fn a_clean_run_says_so() {
        let d = Diagnosis::from_findings(Vec::new());
        assert!(!d.is_flagged());
        assert!(
            d.report()
                .starts_with("nothing flagged by the checks non-finite")
        );
        assert!(d.to_json().contains("\"flagged\": false"));
    }

    #[test]
    fn non_finite_histogram_edges_are_flagged() {
        let mut output = Output::new();
        for step in 0..30 {
            output.insert(
                step,
                "Loss",
                cockpit_quantities::Value::Float(2.0 - 0.01 * step as f64),
            );
            output.insert(
                step,
                "GradHist1d",
                cockpit_quantities::Value::Hist1d(cockpit_quantities::Histogram1d {
                    hist: vec![1.0, 2.0],
                    edges: vec![f64::NAN, f64::NAN, f64::INFINITY],
                }),
            );
        }
        let d = Diagnoser::new().run(&output);
        assert!(
            d.codes().contains(&crate::Code::NonFinite),
            "{}",
            d.report()
        );
        assert!(d.report().contains("GradHist1d edges"), "{}", d.report());
    }

    #[test]
    fn the_quantities_the_checks_lack_are_named() {
        let mut output = Output::new();
        for step in 0..5 {
            output.insert(
                step,
                "Loss",
                cockpit_quantities::Value::Float(1.0 / (step + 1) as f64),
            );
        }
        let d = Diagnoser::new().run(&output);
        assert!(
            !d.unread.iter().any(|u| u.starts_with("Loss")),
            "{:?}",
            d.unread
        );
        assert!(
            d.unread.iter().any(|u| u.starts_with("HessMaxEV")),
            "{:?}",
            d.unread
        );
        assert!(
            d.report().contains("not in the log, so not checked: Alpha"),
            "{}",
            d.report()
        );
    }
}
