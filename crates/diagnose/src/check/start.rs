//! The start of a run: an exploding start (the initial loss or gradient orders of magnitude
//! above where the run settles) and inputs that were never standardised.

use crate::run::{median, norm, values};
use crate::{Code, Finding, Run};

/// `exploding-start`: the loss at the first step at least this many times the median loss of
/// the run's second half…
pub(crate) const LOSS_JUMP: f64 = 10.0;
/// …or the network gradient norm at the first step at least this many times its median over
/// the second half.
pub(crate) const GRAD_JUMP: f64 = 30.0;
/// Steps that count as the start.
pub(crate) const START: usize = 3;
/// A loss jump alone is an exploding start only where the start is a cliff — the first loss
/// at least this many times the median of the next [`START`] losses — or the gradient norm at
/// the first step is at least this many times its settled median too. A network that learns
/// well from a healthy start falls gradually with gradients of the same order (a language
/// model's cross-entropy from `ln V` = 2.66 to 0.24 over 160 steps is 11×; its first steps fall
/// 12 %, its gradient norm starts at 1.7× its settled median), and is not flagged.
pub(crate) const CLIFF: f64 = 3.0;
/// `misscaled-inputs`: the first layer's `‖∇W‖/‖∇b‖` at least this over the first steps. For a
/// dense layer it is the (gradient-weighted) input norm `‖x‖`: standardised inputs have
/// `‖x‖ ≈ √d`, so this flags raw pixel scales for any `d` below 10⁴.
pub(crate) const INPUT_NORM: f64 = 100.0;
/// Evidence only: the share of gradient elements in the histogram's two outer bins.
pub(crate) const EDGE_SHARE: f64 = 0.05;

/// The first value and the second half's median of a series, when the first is `ratio` times
/// the median or more.
fn jump(series: &[(usize, f64)], ratio: f64) -> Option<(f64, f64)> {
    if series.len() < 2 * START + 2 {
        return None;
    }
    let first = series[0].1;
    let settled = median(values(&series[series.len() / 2..]));
    (first.is_finite() && settled.is_finite() && settled > 0.0 && first >= ratio * settled)
        .then_some((first, settled))
}

/// The share of gradient elements in the outer bins of the first histogram, as evidence.
fn edge_evidence(run: &Run) -> Option<String> {
    let (step, h) = run.hist1d.first()?;
    let total: f64 = h.hist.iter().sum();
    let edges = h.hist.first().copied().unwrap_or(0.0) + h.hist.last().copied().unwrap_or(0.0);
    (total > 0.0 && edges / total >= EDGE_SHARE).then(|| {
        format!(
            "{:.0} % of the gradient elements in the histogram's outer bins at step {step}",
            100.0 * edges / total
        )
    })
}

/// The initial loss or gradient norm is orders of magnitude above where the run settles: the
/// initialisation (or something else fixed before the first step) is off by far.
pub(crate) fn exploding_start(run: &Run) -> Option<Finding> {
    let total: Vec<(usize, f64)> = run.grad_norm.iter().map(|(s, l)| (*s, norm(l))).collect();
    let grad = jump(&total, GRAD_JUMP);
    let loss = jump(&run.loss, LOSS_JUMP).filter(|(first, _)| {
        let next = median(values(&run.loss[1..=START.min(run.loss.len() - 1)]));
        *first >= CLIFF * next || grad.is_some() || jump(&total, CLIFF).is_some()
    });
    let first = run.loss.first().or(total.first())?.0;
    let mut evidence = Vec::new();
    if let Some((a, b)) = loss {
        evidence.push(format!(
            "loss {a:.4} at step {first}, median {b:.4} over the second half ({:.0}×)",
            a / b
        ));
    }
    if let Some((a, b)) = grad {
        evidence.push(format!(
            "‖∇L‖ {a:.3e} at step {first}, median {b:.3e} over the second half ({:.0}×)",
            a / b
        ));
    }
    if evidence.is_empty() {
        return None;
    }
    evidence.extend(edge_evidence(run));
    Some(Finding::new(
        Code::ExplodingStart,
        "exploding start: the initial loss and gradients are orders of magnitude above where the run settles (initialisation too large?)",
        evidence.join("; "),
        run.loss.iter().take(START).map(|(s, _)| *s).collect(),
    ))
}

/// The first layer's weight and bias gradients say its inputs are far from standardised:
/// `‖∇W‖/‖∇b‖` (the input norm) of [`INPUT_NORM`] or more on the first steps where the layer
/// still has a gradient (a layer that dies after a bad start keeps the evidence of its first
/// steps: later ones, where both gradients are zero, say nothing of the inputs). Needs the
/// parameter names (to find the first layer's weight and bias).
pub(crate) fn misscaled_inputs(run: &Run) -> Option<Finding> {
    let (w, b) = run.first_layer()?;
    let pairs: Vec<(usize, Option<(f64, f64)>)> = run
        .grad_norm
        .iter()
        .map(|(s, l)| (*s, l.get(w).copied().zip(l.get(b).copied())))
        .collect();
    let has_gradient =
        |(gw, gb): (f64, f64)| gw.is_finite() && gb.is_finite() && gw > 0.0 && gb > 0.0;
    // The first steps where the layer has a gradient, among the run's first quarter.
    let early = (pairs.len() / 4).max(START);
    let ratios: Vec<(usize, f64)> = pairs
        .iter()
        .take(early)
        .filter_map(|(s, g)| g.filter(|g| has_gradient(*g)).map(|(gw, gb)| (*s, gw / gb)))
        .take(START)
        .collect();
    let ratio = median(values(&ratios));
    if ratios.is_empty() || ratio.is_nan() || ratio < INPUT_NORM {
        return None;
    }
    let steps = match ratios.as_slice() {
        [(only, _)] => format!("at step {only}"),
        _ => format!("over the first {} steps with a gradient", ratios.len()),
    };
    let mut evidence = vec![format!(
        "‖∇{}‖/‖∇{}‖ = {ratio:.0} {steps}: the first layer sees inputs of norm ~{ratio:.0}",
        run.name(w),
        run.name(b),
    )];
    // A layer without a gradient from some early step on: it died (after the evidence).
    let last = ratios.last().map_or(0, |(s, _)| *s);
    if let Some((died, _)) = pairs
        .iter()
        .find(|(s, g)| *s > last && g.is_some_and(|(gw, gb)| gw == 0.0 && gb == 0.0))
        && pairs
            .iter()
            .filter(|(s, _)| s >= died)
            .all(|(_, g)| g.is_none_or(|g| !has_gradient(g)))
    {
        evidence.push(format!(
            "the first layer has no gradient from step {died} on (its units died)"
        ));
    }
    evidence.extend(edge_evidence(run));
    Some(
        Finding::new(
            Code::MisscaledInputs,
            "inputs not standardised: the first layer sees inputs orders of magnitude larger than it is initialised for",
            evidence.join("; "),
            ratios.iter().map(|(s, _)| *s).collect(),
        )
        .with_parameters(vec![run.name(w), run.name(b)]),
    )
}
