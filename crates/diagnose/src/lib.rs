//! # cockpit-diagnose
//!
//! Reads a Cockpit output — ours or the Python Cockpit's log — the way an expert reads the
//! dashboard, and says what went wrong in words: one verdict line, then the findings ordered
//! by the step they first show, each with its evidence, the parameters concerned and what to
//! do. Symptoms (dead units, NaNs, a flat loss) are merged into the cause that came first, so
//! units that died *because* the step size blew up are one story, not three.
//!
//! ```
//! use cockpit_diagnose::Diagnoser;
//! # let output = cockpit_quantities::Output::new();
//! let diagnosis = Diagnoser::new().run(&output);
//! print!("{}", diagnosis.report());
//! ```
//!
//! ## Checks and thresholds
//!
//! No single instrument separates a good run from a bad one (a healthy stochastic run has a
//! median α slightly above 0, Schneider et al. 2021): the checks combine instruments. Each
//! needs the quantities named; one whose quantities are missing stays silent, and the report
//! names what the log lacks ([`Diagnosis::unread`]). The constants below are the code's.
//!
//! | code | what | needs | threshold |
//! |---|---|---|---|
//! | `step-too-large` | learning rate too large | Loss, Alpha or HessMaxEV + `learning_rate` | a loss spike (≥ 3× the lowest loss before it and above it by ≥ 10 % of the first loss, or NaN) or a rising loss (last 10 % ≥ 1.5× the first 10 %), together with α > 1 on ≥ 25 % of steps or `lr·λ_max > 2` (beyond the stability limit of the local quadratic model); spikes in a run that learned (see below) are transients and do not count |
//! | `step-too-small` | learning rate too small | Loss, Alpha | median α ≤ −0.4 and the loss fell by < 5 % (first 10 % vs last 10 % of steps, ≥ 20 steps) |
//! | `exploding-start` | too-large initialisation | Loss or GradNorm | the first loss ≥ 10× the median of the run's second half and, with the classes known (`with_classes`, `--classes`), ≥ 3× chance level `ln C`; without them a cliff: the first loss ≥ 5× the median of the next 3, or, from a first loss above `ln 10⁶` (no chance level), the highest of the first 4 ≥ 10× the median of the 3 after them. Or the network gradient norm ≥ 30× its second-half median with the same window ≥ 10×. With the classes known, a first loss below 3× chance level is never an exploding start |
//! | `misscaled-inputs` | inputs not standardised | GradNorm per parameter and the parameter names | the first layer's `‖∇W‖/‖∇b‖` (the gradient-weighted input norm) ≥ 100, median over the first 3 steps where that layer still has a gradient (a layer that dies after a bad start is read before it died) |
//! | `gradient-imbalance` | gradients vanish through depth | GradNorm (Parameters: relative to ‖θ‖) | per step, the parameters' `‖∇θ‖/‖θ‖` (or `‖∇θ‖`), biases and zeros left out, span ≥ 3 decades on ≥ 80 % of steps |
//! | `frozen-layer` | a parameter stopped moving | UpdateSize | every update of the last 10 % of steps ≤ 1e-12, or ≤ 1e-6 × the median update |
//! | `small-batch` | batch too small (Byrd et al. 2012; Bollapragada et al. 2017) | NormTest and Loss (≥ 4 steps each) | median NormTest ≥ 0.9 (noise ≥ 90 % of the mean gradient's squared norm) and a mini-batch loss whose median step-to-step change is ≥ 25 % of its median, in a run that did not learn |
//! | `rising-curvature` | the loss surface sharpens | HessMaxEV or HessTrace | median of the last 10 % ≥ 10× the first 10 %, in a run that did not learn (a network that fits its data sharpens the surface it settles in) |
//! | `exploding-gradient` / `vanishing-gradient` | a gradient norm changed by orders of magnitude over the run | GradNorm | median of the last 10 % ≥ 100× / ≤ 1e-3× the first 10 % (vanishing: not where the loss converged, falling to ≤ 0.1× its start) |
//! | `loss-not-decreasing` | no progress | Loss | median loss of the last 10 % ≥ 0.97× the first 10 % (≥ 20 steps) |
//! | `non-finite` | divergence | any | NaN or ±∞ in Loss, Alpha, HessMaxEV, GradNorm or UpdateSize |
//!
//! A run *learned* where the median loss of its last 10 % of steps is at most a third of the
//! median of its first 5 losses ([`run::LEARNED`]): most healthy runs have a mini-batch gradient that is mostly
//! noise, sharpen the surface they settle in and, at a large learning rate, spike and recover;
//! none of that is flagged in a run that learned.
//!
//! The first six are *causes* (a setting to change); the rest are *symptoms*, reported under the
//! earliest cause that showed at or before them. The thresholds were tuned on two galleries of
//! real runs: `examples/pathologies.rs` (one per pathology, each named as the verdict) and
//! `examples/healthy.rs` (twelve healthy runs — fast and slow, SGD and Adam, 3 to 100 classes,
//! smooth activations, a CNN, a language model, memorisation, a regression — on which nothing
//! is flagged, with or without the classes); `tests/integration/pathologies.rs` and
//! `healthy_runs.rs` keep them honest. Thresholds are never tuned on synthetic series.
//!
//! [`Diagnosis::is_flagged`] is what `cockpit diagnose`'s exit status says: 0 where nothing is
//! flagged, 1 where something is (a CI job can gate on it).
//!
//! During training, [`Monitor`] runs the checks at epoch ends and warns once per new finding.

mod check;
mod diagnosis;
mod finding;
mod monitor;
pub mod run;

pub use diagnosis::{CAUSE_WINDOW, Diagnoser, Diagnosis};
pub use finding::{Code, Finding};
pub use monitor::Monitor;
pub use run::Run;

/// Every check on `output`, without parameter names: `Diagnoser::new().run(output)`.
pub fn diagnose(output: &cockpit_quantities::Output) -> Diagnosis {
    Diagnoser::new().run(output)
}
