//! Gradient norms across depth (imbalance) and over time (exploding, vanishing).

use crate::run::{ends, median};
use crate::{Code, Finding, Run};

/// `gradient-imbalance`: the per-step spread of the parameters' (relative) gradient norms, in
/// decades, exceeds this…
pub(crate) const IMBALANCE_DECADES: f64 = 3.0;
/// …on at least this share of the steps.
pub(crate) const IMBALANCE_SHARE: f64 = 0.8;
/// `exploding-gradient`: median of the last 10 % at least this many times the first 10 %'s.
pub(crate) const EXPLODING: f64 = 100.0;
/// `vanishing-gradient`: median of the last 10 % at most this share of the first 10 %'s.
pub(crate) const VANISHING: f64 = 1e-3;

/// Per step, `log10(max/min)` over the parameters of `‖∇θ_p‖ / ‖θ_p‖` (the log's
/// `GradParamRatio`; else from `GradNorm` and `Parameters`; plain `‖∇θ_p‖` where the log has
/// neither), biases left out where the names tell them, zero norms left out (those are frozen,
/// a check of its own); with the indices of the extremes.
fn spreads(run: &Run) -> Vec<(usize, f64, usize, usize)> {
    let param_norms: std::collections::BTreeMap<usize, &Vec<f64>> =
        run.param_norm.iter().map(|(s, p)| (*s, p)).collect();
    let relative: Vec<(usize, Vec<f64>)> = if run.grad_param_ratio.is_empty() {
        run.grad_norm
            .iter()
            .map(|(step, grads)| {
                let params = param_norms.get(step);
                let ratios = grads
                    .iter()
                    .enumerate()
                    .map(|(p, g)| g / params.and_then(|n| n.get(p)).copied().unwrap_or(1.0))
                    .collect();
                (*step, ratios)
            })
            .collect()
    } else {
        run.grad_param_ratio.clone()
    };
    relative
        .iter()
        .filter_map(|(step, ratios)| {
            let relative: Vec<(usize, f64)> = ratios
                .iter()
                .copied()
                .enumerate()
                .filter(|(p, _)| !run.is_bias(*p))
                .filter(|(_, r)| r.is_finite() && *r > 0.0)
                .collect();
            let lo = relative.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
            let hi = relative.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
            (relative.len() >= 2).then(|| (*step, (hi.1 / lo.1).log10(), lo.0, hi.0))
        })
        .collect()
}

/// The layers' gradient norms (relative to their parameter norms) spread over more than
/// [`IMBALANCE_DECADES`] on most steps.
pub(crate) fn imbalance(run: &Run) -> Option<Finding> {
    let spreads = spreads(run);
    if spreads.len() < 4 {
        return None;
    }
    let wide: Vec<_> = spreads
        .iter()
        .filter(|(_, d, _, _)| *d >= IMBALANCE_DECADES)
        .collect();
    if (wide.len() as f64) < IMBALANCE_SHARE * spreads.len() as f64 {
        return None;
    }
    // The extremes most often seen.
    let most = |pick: fn(&(usize, f64, usize, usize)) -> usize| {
        let mut counts = std::collections::BTreeMap::new();
        for s in &wide {
            *counts.entry(pick(s)).or_insert(0usize) += 1;
        }
        counts
            .into_iter()
            .max_by_key(|(_, c)| *c)
            .map_or(0, |(p, _)| p)
    };
    let (low, high) = (most(|s| s.2), most(|s| s.3));
    let relative = if run.param_norm.is_empty() && run.grad_param_ratio.is_empty() {
        "‖∇θ‖"
    } else {
        "‖∇θ‖/‖θ‖"
    };
    Some(
        Finding::new(
            Code::GradientImbalance,
            "gradients vanish through depth: some layers get gradients orders of magnitude smaller than others and barely learn",
            format!(
                "{relative} spans {:.1} decades (median over steps) on {} of {} steps; smallest mostly {}, largest mostly {}",
                median(spreads.iter().map(|s| s.1)),
                wide.len(),
                spreads.len(),
                run.name(low),
                run.name(high)
            ),
            wide.iter().map(|s| s.0).collect(),
        )
        .with_parameters(vec![run.name(low), run.name(high)]),
    )
}

/// A parameter's gradient norm grew or collapsed by orders of magnitude from the first 10 % of
/// steps to the last.
pub(crate) fn over_time(run: &Run) -> Vec<Finding> {
    let series = &run.grad_norm;
    if series.len() < 4 {
        return Vec::new();
    }
    let layers = series.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
    let (first, last) = ends(series, 0.1);
    // A loss that reached its floor takes the gradient down with it: success.
    let converged = run.converged();
    let mut exploding = Vec::new();
    let mut vanishing = Vec::new();
    for p in 0..layers {
        let a = median(first.iter().map(|(_, l)| l[p]));
        let b = median(last.iter().map(|(_, l)| l[p]));
        if !(a.is_finite() && b.is_finite()) {
            continue;
        }
        if b > 0.0 && b >= EXPLODING * a {
            exploding.push((p, a, b));
        } else if a > 0.0 && b <= VANISHING * a && !converged {
            vanishing.push((p, a, b));
        }
    }
    let steps: Vec<usize> = last.iter().map(|(s, _)| *s).collect();
    let mut findings = Vec::new();
    for (code, group, what) in [
        (Code::ExplodingGradient, exploding, "grew"),
        (Code::VanishingGradient, vanishing, "collapsed"),
    ] {
        if group.is_empty() {
            continue;
        }
        let evidence: Vec<String> = group
            .iter()
            .take(4)
            .map(|(p, a, b)| format!("{} {a:.3e} → {b:.3e}", run.name(*p)))
            .collect();
        findings.push(
            Finding::new(
                code,
                format!(
                    "the gradient norm of {} parameter(s) {what} by orders of magnitude during training",
                    group.len()
                ),
                format!(
                    "median ‖∇θ‖ over the first and last 10 % of steps: {}{}",
                    evidence.join(", "),
                    if group.len() > 4 { ", …" } else { "" }
                ),
                steps.clone(),
            )
            .with_parameters(group.iter().map(|(p, _, _)| run.name(*p)).collect()),
        );
    }
    findings
}

#[cfg(test)]
mod tests {
    use cockpit_quantities::{HostArray, Output, Value};

    use super::*;

    /// Gradient norms 1e-4 and 1 on two weights whose norms are 1e-4 and 1.
    fn output(with_parameters: bool) -> Output {
        let mut out = Output::new();
        for s in 0..10 {
            out.insert(s, "GradNorm", Value::List(vec![1e-4, 1.0]));
            if with_parameters {
                let array = |norm: f64| HostArray {
                    shape: vec![1],
                    data: vec![norm],
                };
                out.insert(
                    s,
                    "Parameters",
                    Value::Arrays(vec![array(1e-4), array(1.0)]),
                );
            }
        }
        out
    }

    #[test]
    fn imbalance_is_relative_to_the_parameter_norms_where_known() {
        let names = ["a.weight".to_string(), "b.weight".to_string()];
        let absolute = imbalance(&Run::new(&output(false), &names));
        let finding = absolute.expect("4 decades apart without parameter norms");
        assert_eq!(finding.parameters, ["a.weight", "b.weight"]);
        assert!(
            finding.evidence.contains("4.0 decades"),
            "{}",
            finding.evidence
        );
        // Relative to ‖θ‖ both layers move at the same rate.
        assert!(imbalance(&Run::new(&output(true), &names)).is_none());
    }

    /// The log's GradParamRatio is the ratio read, before GradNorm and Parameters.
    #[test]
    fn imbalance_reads_grad_param_ratio_where_logged() {
        let names = ["a.weight".to_string(), "b.weight".to_string()];
        // GradNorm alone says 4 decades apart; the logged ratios say the layers move alike.
        let mut even = output(false);
        for s in 0..10 {
            even.insert(s, "GradParamRatio", Value::List(vec![0.01, 0.012]));
        }
        assert!(imbalance(&Run::new(&even, &names)).is_none());
        // And ratios 5 decades apart are flagged even where GradNorm is flat.
        let mut apart = Output::new();
        for s in 0..10 {
            apart.insert(s, "GradNorm", Value::List(vec![1.0, 1.0]));
            apart.insert(s, "GradParamRatio", Value::List(vec![1e-6, 0.1]));
        }
        let finding = imbalance(&Run::new(&apart, &names)).expect("5 decades apart");
        assert!(
            finding.evidence.contains("‖∇θ‖/‖θ‖ spans 5.0 decades"),
            "{}",
            finding.evidence
        );
    }

    #[test]
    fn biases_are_left_out_where_named() {
        let names = ["a.weight".to_string(), "a.bias".to_string()];
        assert!(imbalance(&Run::new(&output(false), &names)).is_none());
    }
}
