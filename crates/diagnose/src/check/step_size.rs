//! The step size: too large (loss spikes or rises, α > 1, `lr·λ_max > 2`) and too small
//! (α ≈ −1 and a loss that does not fall).

use crate::run::MIN_LOSSES;
use crate::run::{ends, median, share, values};
use crate::{Code, Finding, Run};

/// A loss spike: the loss at least this many times the lowest loss before it…
pub(crate) const SPIKE: f64 = 3.0;
/// …and above it by at least this share of the first loss: near the floor of a converged run,
/// a mini-batch loss from 1e-4 to 5e-4 is no blow-up. In a run that learned
/// ([`Run::learned`]), spikes are transients it recovered from (a large learning rate's
/// catapult) and are not counted.
pub(crate) const SPIKE_HEIGHT: f64 = 0.1;
/// A rising loss: the median of the last 10 % at least this many times the first 10 %'s.
pub(crate) const RISING: f64 = 1.5;
/// `step-too-large`: at least this share of the α values above 1.
pub(crate) const OVERSHOOT_SHARE: f64 = 0.25;
/// The stability limit of the local quadratic model: gradient descent on a quadratic with top
/// curvature λ diverges along its eigenvector once `lr·λ > 2`.
pub(crate) const STABILITY_LIMIT: f64 = 2.0;
/// `step-too-small`: median α at or below this.
pub(crate) const CRAWL_ALPHA: f64 = -0.4;
/// `step-too-small`: the loss fell by less than this share of its start.
pub(crate) const CRAWL_PROGRESS: f64 = 0.05;

/// The first step whose loss is [`SPIKE`] × the lowest loss before it and [`SPIKE_HEIGHT`] of
/// the first loss above it (or not finite after finite ones), with that loss and the lowest one.
fn first_spike(run: &Run) -> Option<(usize, f64, f64)> {
    if run.learned() {
        return None;
    }
    let scale = run
        .loss
        .iter()
        .map(|(_, l)| *l)
        .find(|l| l.is_finite())
        .map_or(0.0, f64::abs);
    let mut lowest = f64::INFINITY;
    for &(step, loss) in &run.loss {
        if lowest.is_finite()
            && (!loss.is_finite()
                || (loss >= SPIKE * lowest && loss - lowest >= SPIKE_HEIGHT * scale))
        {
            return Some((step, lowest, loss));
        }
        if loss.is_finite() {
            lowest = lowest.min(loss);
        }
    }
    None
}

/// The first tracked step where `lr · λ_max` exceeds [`STABILITY_LIMIT`], with the product.
fn first_unstable(run: &Run) -> Option<(usize, f64, f64)> {
    run.max_ev.iter().find_map(|&(step, ev)| {
        let lr = run.learning_rate_at(step)?;
        (lr * ev.abs() > STABILITY_LIMIT).then_some((step, lr, ev))
    })
}

/// Loss spikes or a rising loss together with α > 1 on many steps, or with a step beyond the
/// stability limit at or before the spike.
pub(crate) fn too_large(run: &Run) -> Option<Finding> {
    let spike = first_spike(run);
    let rising = run.loss.len() >= MIN_LOSSES && {
        let (first, last) = ends(&run.loss, 0.1);
        let (a, b) = (median(values(first)), median(values(last)));
        a > 0.0 && (b >= RISING * a || b.is_nan())
    };
    let over = share(&run.alpha, |a| a > 1.0);
    let first_over = run.alpha.iter().find(|(_, a)| *a > 1.0).map(|(s, _)| *s);
    let unstable = first_unstable(run);
    let overshooting = over >= OVERSHOOT_SHARE && run.alpha.len() >= 4;
    // Instability explains a blow-up that follows it, not one long before it (a noisy
    // mini-batch Hessian can cross the limit once without consequence).
    let unstable = unstable.filter(|(at, _, _)| spike.map_or(rising, |(s, _, _)| *at <= s));
    if !((spike.is_some() || rising) && (overshooting || unstable.is_some())) {
        return None;
    }
    let mut evidence = Vec::new();
    let mut first = usize::MAX;
    if let Some((step, before, after)) = spike {
        evidence.push(format!("loss {before:.4} → {after:.4} at step {step}"));
        first = first.min(step);
    }
    if rising {
        let (a, b) = ends(&run.loss, 0.1);
        evidence.push(format!(
            "median loss {:.4} → {:.4} from the first to the last 10 % of steps",
            median(values(a)),
            median(values(b))
        ));
    }
    if overshooting {
        evidence.push(format!(
            "α > 1 on {:.0} % of steps (median α {:.2})",
            100.0 * over,
            median(values(&run.alpha))
        ));
        first = first.min(first_over.unwrap_or(usize::MAX));
    }
    if let Some((step, lr, ev)) = unstable {
        evidence.push(format!(
            "lr·λ_max = {lr}·{ev:.3} = {:.2} > 2 at step {step}",
            lr * ev
        ));
        first = first.min(step);
    }
    let steps: Vec<usize> = run
        .alpha
        .iter()
        .filter(|(_, a)| *a > 1.0)
        .map(|(s, _)| *s)
        .collect();
    let first = if first == usize::MAX { 0 } else { first };
    Some(
        Finding::new(
            Code::StepTooLarge,
            "learning rate too large: steps overshoot the valley floor and the loss blows up",
            evidence.join("; "),
            steps,
        )
        .starting_at(first),
    )
}

/// α near −1 (median) together with a loss that does not fall.
pub(crate) fn too_small(run: &Run) -> Option<Finding> {
    if run.alpha.len() < 8 || run.loss.len() < MIN_LOSSES {
        return None;
    }
    let alpha = median(values(&run.alpha));
    let (first, last) = ends(&run.loss, 0.1);
    let (a, b) = (median(values(first)), median(values(last)));
    let progress = (a - b) / a.abs().max(f64::MIN_POSITIVE);
    if !(alpha <= CRAWL_ALPHA && progress < CRAWL_PROGRESS) {
        return None;
    }
    Some(Finding::new(
        Code::StepTooSmall,
        "learning rate too small: steps crawl (α ≈ −1) and the loss barely moves",
        format!(
            "median α {alpha:.2} over {} steps; median loss {a:.4} → {b:.4} ({:+.1} %)",
            run.alpha.len(),
            -100.0 * progress
        ),
        run.alpha.iter().map(|(s, _)| *s).collect(),
    ))
}
