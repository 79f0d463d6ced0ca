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
/// The start must also be a cliff: the first loss at least this many times the median of
/// the next [`START`]…
pub(crate) const CLIFF: f64 = 5.0;
/// …or, from a first loss above any chance level ([`MAX_CHANCE`]), the highest of the first
/// [`START`] + 1 losses at least this many times the median of the [`START`] after them (a
/// too-large initialisation's loss may rise for a step or two before it falls).
pub(crate) const LOSS_CLIFF: f64 = 10.0;
/// `ln 10⁶`: no classifier of up to a million classes starts above it at chance level, and a
/// regression on standardised targets starts far below it. A healthy run that learns fast
/// falls as steeply in its first steps as a too-large initialisation's (a GELU classifier under
/// SGD at lr 0.5 from chance level 1.17 falls 11× over its first 7 steps), but from a loss near
/// chance level; the too-large initialisation of the pathology gallery starts at 2 363.
pub(crate) const MAX_CHANCE: f64 = 13.815_510_557_964_274;
/// The gradient norm's own path ([`GRAD_JUMP`]) needs the same window to fall at least this
/// many times: by an order of magnitude at once (the healthy gallery's steepest is 3.5×).
pub(crate) const GRAD_CLIFF: f64 = 10.0;
/// Where the loss is a cross-entropy over known classes ([`Run::with_classes`]), a start
/// below this many times chance level `ln C` is a healthy start whatever follows (a
/// well-initialised classifier predicts near-uniform classes); one above it is far from
/// chance, as a too-large initialisation's confident wrong answers are.
pub(crate) const ABOVE_CHANCE: f64 = 3.0;
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

/// The first value of a series and the median of the next [`START`], where the first is
/// `ratio` times that or more.
fn first_cliff(series: &[(usize, f64)], ratio: f64) -> Option<(f64, f64)> {
    if series.len() <= START {
        return None;
    }
    let first = series[0].1;
    let next = median(values(&series[1..=START]));
    (first.is_finite() && next.is_finite() && next > 0.0 && first >= ratio * next)
        .then_some((first, next))
}

/// The highest of the first [`START`] + 1 values of a series and the median of the [`START`]
/// values after them, where the first is `ratio` times the second or more: a cliff at the
/// start that the trend after it does not continue.
fn window_cliff(series: &[(usize, f64)], ratio: f64) -> Option<(f64, f64)> {
    if series.len() <= 2 * START {
        return None;
    }
    let head = series[..=START]
        .iter()
        .map(|(_, v)| *v)
        .fold(f64::NAN, f64::max);
    let next = median(values(&series[START + 1..=2 * START]));
    (head.is_finite() && next.is_finite() && next > 0.0 && head >= ratio * next)
        .then_some((head, next))
}

/// The initial loss or gradient norm is orders of magnitude above where the run settles
/// ([`LOSS_JUMP`], [`GRAD_JUMP`]), and the start is not a healthy one. Where the classes are
/// known, a first loss near chance level is healthy whatever follows, and one far above it
/// ([`ABOVE_CHANCE`]) is not; without them the run must fall off a cliff in its first steps
/// ([`CLIFF`]; [`LOSS_CLIFF`] from above [`MAX_CHANCE`]; [`GRAD_CLIFF`] for the gradient). The initialisation (or something else fixed
/// before the first step) is off by far.
pub(crate) fn exploding_start(run: &Run) -> Option<Finding> {
    let total: Vec<(usize, f64)> = run.grad_norm.iter().map(|(s, l)| (*s, norm(l))).collect();
    let chance = run.chance_loss();
    if let (Some(chance), Some((_, first))) = (chance, run.loss.first())
        && *first < ABOVE_CHANCE * chance
    {
        return None;
    }
    let above_any_chance = run.loss.first().is_some_and(|(_, l)| *l > MAX_CHANCE);
    let loss_cliff = first_cliff(&run.loss, CLIFF)
        .or_else(|| window_cliff(&run.loss, LOSS_CLIFF).filter(|_| above_any_chance));
    let grad_cliff = window_cliff(&total, GRAD_CLIFF);
    let loss = jump(&run.loss, LOSS_JUMP).filter(|_| chance.is_some() || loss_cliff.is_some());
    let grad = jump(&total, GRAD_JUMP).filter(|_| grad_cliff.is_some());
    if loss.is_none() && grad.is_none() {
        return None;
    }
    let first = run.loss.first().or(total.first())?.0;
    let mut evidence = Vec::new();
    if let Some((a, b)) = loss {
        evidence.push(format!(
            "loss {a:.4} at step {first}, median {b:.4} over the second half ({:.0}×)",
            a / b
        ));
        if let (Some(chance), Some(classes)) = (chance, run.classes) {
            evidence.push(format!(
                "the first loss is {:.0}× chance level (ln {classes} = {chance:.3})",
                a / chance,
            ));
        }
    }
    if let Some((a, b)) = grad {
        evidence.push(format!(
            "‖∇L‖ {a:.3e} at step {first}, median {b:.3e} over the second half ({:.0}×)",
            a / b
        ));
    }
    for (what, cliff) in [("the loss", loss_cliff), ("‖∇L‖", grad_cliff)] {
        if let Some((high, next)) = cliff {
            evidence.push(format!(
                "{what} falls from {high:.3e} to {next:.3e} in its first {} steps ({:.0}×)",
                2 * START + 1,
                high / next
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `n` steps whose loss and network gradient norm follow `loss` and `grad`.
    fn run(n: usize, loss: impl Fn(usize) -> f64, grad: impl Fn(usize) -> f64) -> Run {
        let mut run = Run::default();
        run.loss = (0..n).map(|s| (s, loss(s))).collect();
        run.grad_norm = (0..n).map(|s| (s, vec![grad(s)])).collect();
        run
    }

    /// A smooth fall from chance level to near zero is no exploding start, told the classes or
    /// not; the same fall from 100× chance level is one once the classes are known.
    #[test]
    fn chance_level_decides_without_a_cliff() {
        let smooth = |start: f64| {
            run(
                200,
                move |s| start * (-(s as f64) / 20.0).exp(),
                |s| (-(s as f64) / 40.0).exp(),
            )
        };
        let chance = 3f64.ln();
        let healthy = smooth(chance);
        assert!(exploding_start(&healthy).is_none());
        assert!(exploding_start(&healthy.clone().with_classes(Some(3))).is_none());
        let far = smooth(100.0 * chance);
        assert!(
            exploding_start(&far).is_none(),
            "no cliff, no classes: nothing to say"
        );
        let finding = exploding_start(&far.with_classes(Some(3))).expect("far above chance");
        assert!(
            finding.evidence.contains("chance level (ln 3"),
            "{}",
            finding.evidence
        );
    }

    /// Without the classes, a start that falls off a cliff is an exploding start; a steep but
    /// smooth fall is not.
    #[test]
    fn a_cliff_in_loss_and_gradient_without_the_classes() {
        let cliff_loss = |s: usize| {
            if s <= START {
                1000.0
            } else {
                1.0 / (1.0 + s as f64)
            }
        };
        let both = run(100, cliff_loss, |s| if s <= START { 50.0 } else { 1.0 });
        let finding = exploding_start(&both).expect("a cliff in both");
        assert!(
            finding.evidence.contains("first 7 steps"),
            "{}",
            finding.evidence
        );
        // A loss that falls steeply but smoothly from its first step, gradients steady: a
        // healthy fast start.
        let smooth = run(100, |s| (-(s as f64) / 2.5).exp(), |_| 1.0);
        assert!(exploding_start(&smooth).is_none());
        // Told the classes, a start at chance level is healthy whatever its cliff.
        let at_chance = run(
            100,
            |s| if s <= START { 2.3 } else { 0.01 },
            |s| if s <= START { 50.0 } else { 1.0 },
        );
        assert!(exploding_start(&at_chance.with_classes(Some(10))).is_none());
    }
}
