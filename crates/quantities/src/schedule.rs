//! Track schedules: at which steps a quantity is computed.
//!
//! The two schedules of Cockpit (`cockpit.utils.schedules`), with the same semantics.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::CockpitError;
use crate::call::{Call, CallError};

/// Decides whether a quantity is computed at a step.
///
/// Build one with [`Schedule::linear`], [`Schedule::logarithmic`], [`Schedule::every_step`]
/// or [`Schedule::custom`]. Cloning is cheap.
#[derive(Clone)]
pub struct Schedule {
    kind: ScheduleKind,
}

#[derive(Clone)]
enum ScheduleKind {
    Linear {
        interval: usize,
        offset: i64,
    },
    Steps {
        steps: Arc<BTreeSet<usize>>,
        label: String,
    },
    Custom(Arc<dyn Fn(usize) -> bool + Send + Sync>),
}

impl Schedule {
    /// The most points a logarithmic schedule may have (Cockpit's default is 300; each point
    /// is computed once when the schedule is built).
    pub const MAX_LOGARITHMIC_STEPS: usize = 1_000_000;

    /// Every step: Cockpit's default `linear(1, 0)`.
    pub fn every_step() -> Self {
        Self {
            kind: ScheduleKind::Linear {
                interval: 1,
                offset: 0,
            },
        }
    }

    /// Cockpit's `linear(interval, offset)`: active at step `s` iff `s − offset ≥ 0` and
    /// `(s − offset) % interval == 0`. `linear(3, −1)` gives 2, 5, 8, …; `linear(1, 2)` gives
    /// 2, 3, 4, ….
    ///
    /// # Errors
    ///
    /// [`CockpitError::InvalidSchedule`] if `interval` is 0.
    pub fn linear(interval: usize, offset: i64) -> Result<Self, CockpitError> {
        if interval == 0 {
            return Err(CockpitError::InvalidSchedule(
                "linear schedule needs an interval of at least 1".into(),
            ));
        }
        Ok(Self {
            kind: ScheduleKind::Linear { interval, offset },
        })
    }

    /// Cockpit's `logarithmic(start, end, steps, base, init)`: active at the steps
    /// `int(logspace(start, end, steps, base))` (computed in `float32` as `torch.logspace` does,
    /// then truncated), plus step 0 if `init`. `logarithmic(0, 1, 4, 10, false)` gives
    /// {1, 2, 4, 10}.
    ///
    /// # Errors
    ///
    /// [`CockpitError::InvalidSchedule`] for a non-finite or non-positive base, non-finite
    /// exponents, or more than [`Schedule::MAX_LOGARITHMIC_STEPS`] points.
    pub fn logarithmic(
        start: f64,
        end: f64,
        steps: usize,
        base: f64,
        init: bool,
    ) -> Result<Self, CockpitError> {
        if steps > Self::MAX_LOGARITHMIC_STEPS {
            return Err(CockpitError::InvalidSchedule(format!(
                "logarithmic schedule with {steps} points: at most {} are allowed",
                Self::MAX_LOGARITHMIC_STEPS
            )));
        }
        if !(base.is_finite() && base > 0.0 && start.is_finite() && end.is_finite()) {
            return Err(CockpitError::InvalidSchedule(format!(
                "logarithmic schedule needs finite exponents and a positive base, got \
                 start={start}, end={end}, base={base}"
            )));
        }
        // Cockpit's steps come from torch.logspace in float32: exponents, a base or steps
        // float32 cannot hold would be computed as infinities (Python's `int` refuses them;
        // here they would silently vanish), so they are refused.
        let largest = (base as f32).powf((start as f32).max(end as f32));
        if !((start as f32).is_finite() && (end as f32).is_finite() && largest.is_finite()) {
            return Err(CockpitError::InvalidSchedule(format!(
                "logarithmic schedule from {base}^{start} to {base}^{end}: its steps are \
                 computed in float32 (as torch.logspace does for Cockpit), which cannot hold them"
            )));
        }
        let mut set = BTreeSet::new();
        if init {
            set.insert(0);
        }
        // torch.logspace fills the first half from `start` and the second half from `end`,
        // in the default dtype float32; int() truncates towards zero.
        let (start32, end32, base32) = (start as f32, end as f32, base as f32);
        let step32 = if steps > 1 {
            (end32 - start32) / (steps as f32 - 1.0)
        } else {
            0.0
        };
        let half = steps / 2;
        for i in 0..steps {
            // torch.linspace with one point gives `start` (it fills with it).
            let exponent = if steps == 1 {
                start32
            } else if i < half {
                start32 + step32 * i as f32
            } else {
                end32 - step32 * (steps - i - 1) as f32
            };
            let value = base32.powf(exponent);
            if value.is_finite() && value >= 0.0 {
                set.insert(value.trunc() as usize);
            }
        }
        let label = format!("logarithmic({start}, {end}, {steps}, {base}, {init})");
        Ok(Self {
            kind: ScheduleKind::Steps {
                steps: Arc::new(set),
                label,
            },
        })
    }

    /// Active exactly at the given steps.
    pub fn steps(steps: impl IntoIterator<Item = usize>) -> Self {
        let steps: BTreeSet<usize> = steps.into_iter().collect();
        let label = format!("steps({steps:?})");
        Self {
            kind: ScheduleKind::Steps {
                steps: Arc::new(steps),
                label,
            },
        }
    }

    /// Any rule `step -> bool`.
    pub fn custom(rule: impl Fn(usize) -> bool + Send + Sync + 'static) -> Self {
        Self {
            kind: ScheduleKind::Custom(Arc::new(rule)),
        }
    }

    /// Whether the schedule is active at `step`.
    pub fn is_active(&self, step: usize) -> bool {
        match &self.kind {
            ScheduleKind::Linear { interval, offset } => {
                let shifted = step as i128 - i128::from(*offset);
                shifted >= 0 && shifted % (*interval as i128) == 0
            }
            ScheduleKind::Steps { steps, .. } => steps.contains(&step),
            ScheduleKind::Custom(rule) => rule(step),
        }
    }

    /// Whether the schedule was active at the step before `step` (Cockpit's `is_end` of a
    /// two-step quantity); false at step 0.
    pub fn was_active_before(&self, step: usize) -> bool {
        step.checked_sub(1).is_some_and(|prev| self.is_active(prev))
    }
}

impl Default for Schedule {
    fn default() -> Self {
        Self::every_step()
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ScheduleKind::Linear { interval, offset } => write!(f, "linear({interval}, {offset})"),
            ScheduleKind::Steps { label, .. } => f.write_str(label),
            ScheduleKind::Custom(_) => f.write_str("custom"),
        }
    }
}

/// Parses Cockpit's schedule calls: `linear(interval, offset=0)`,
/// `logarithmic(start, end, steps=300, base=10, init=True)`, with arguments by position or by
/// keyword (Python's `True`/`False` or `true`/`false`), and `every_step` for `linear(1)`.
///
/// ```
/// # use cockpit_quantities::Schedule;
/// let schedule: Schedule = "linear(3, offset=-1)".parse()?;
/// assert!(schedule.is_active(2) && schedule.is_active(5) && !schedule.is_active(3));
/// # Ok::<(), cockpit_quantities::CockpitError>(())
/// ```
impl FromStr for Schedule {
    type Err = CockpitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let quoted = crate::error::excerpt(text);
        let bad = |why: &str| CockpitError::InvalidSchedule(format!("`{quoted}`: {why}"));
        if text == "every_step" {
            return Ok(Self::every_step());
        }
        let call = Call::parse(text).map_err(|err| match err {
            CallError::NotACall => bad("expected `linear(…)`, `logarithmic(…)` or `every_step`"),
            other => bad(&other.to_string()),
        })?;
        let signature: &[&'static str] = match call.name {
            "linear" => &["interval", "offset"],
            "logarithmic" => &["start", "end", "steps", "base", "init"],
            other => {
                return Err(bad(&format!(
                    "unknown schedule `{}`",
                    crate::error::excerpt(other)
                )));
            }
        };
        let args = call.bind(signature).map_err(|err| bad(&err.to_string()))?;
        let number = |k: usize, default: Option<f64>| -> Result<f64, CockpitError> {
            match args[k] {
                Some(v) => v.parse::<f64>().map_err(|_| {
                    bad(&format!(
                        "`{}` is not a number: `{}`",
                        signature[k],
                        crate::error::excerpt(v)
                    ))
                }),
                None => default.ok_or_else(|| bad(&format!("`{}` is required", signature[k]))),
            }
        };
        // Whole numbers are read exactly (an integer literal, or a float literal with no
        // fraction below 2^53); anything out of the target's range is an error, not a
        // saturated value.
        let count = |k: usize, default: Option<i128>| -> Result<i128, CockpitError> {
            let Some(v) = args[k] else {
                return default.ok_or_else(|| bad(&format!("`{}` is required", signature[k])));
            };
            if let Ok(n) = v.parse::<i128>() {
                return Ok(n);
            }
            match v.parse::<f64>() {
                Ok(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => Ok(f as i128),
                Ok(f) if f.is_finite() && f.fract() != 0.0 => {
                    Err(bad(&format!("`{}` must be a whole number", signature[k])))
                }
                Ok(_) => Err(bad(&format!(
                    "`{}` is out of range: `{}`",
                    signature[k],
                    crate::error::excerpt(v)
                ))),
                Err(_) => Err(bad(&format!(
                    "`{}` is not a number: `{}`",
                    signature[k],
                    crate::error::excerpt(v)
                ))),
            }
        };
        let out_of_range =
            |k: usize, n: i128| bad(&format!("`{}` = {n} is out of range", signature[k]));
        if signature.len() == 2 {
            let interval = count(0, None)?;
            if interval < 0 {
                return Err(bad("`interval` must not be negative"));
            }
            let interval = usize::try_from(interval).map_err(|_| out_of_range(0, interval))?;
            let offset = count(1, Some(0))?;
            let offset = i64::try_from(offset).map_err(|_| out_of_range(1, offset))?;
            Self::linear(interval, offset)
        } else {
            let steps = count(2, Some(300))?;
            if steps < 0 {
                return Err(bad("`steps` must not be negative"));
            }
            let steps = usize::try_from(steps).map_err(|_| out_of_range(2, steps))?;
            let init = match args[4].map(str::to_ascii_lowercase).as_deref() {
                None | Some("true") => true,
                Some("false") => false,
                Some(other) => {
                    return Err(bad(&format!(
                        "`init` must be true or false, got `{}`",
                        crate::error::excerpt(other)
                    )));
                }
            };
            Self::logarithmic(
                number(0, None)?,
                number(1, None)?,
                steps,
                number(3, Some(10.0))?,
                init,
            )
        }
    }
}

/// Deserialises from the text [`Schedule::from_str`] reads (e.g. `"linear(16)"`).
impl<'de> serde::Deserialize<'de> for Schedule {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::config::parse_text(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(schedule: &Schedule, n: usize) -> Vec<usize> {
        (0..n).filter(|&s| schedule.is_active(s)).collect()
    }

    /// Cockpit's `test_utils`: `linear` for interval ∈ {1,2,3}, offset ∈ {0,1,2,−1}, 100 steps,
    /// against the definition written out by hand.
    #[test]
    fn linear_matches_cockpit_definition() {
        for interval in [1usize, 2, 3] {
            for offset in [0i64, 1, 2, -1] {
                let schedule = Schedule::linear(interval, offset).unwrap();
                let expected: Vec<usize> = (0..100usize)
                    .filter(|&s| {
                        let s = s as i64 - offset;
                        s >= 0 && s % interval as i64 == 0
                    })
                    .collect();
                assert_eq!(
                    active(&schedule, 100),
                    expected,
                    "linear({interval}, {offset})"
                );
            }
        }
    }

    #[test]
    fn linear_examples_from_the_docs() {
        assert_eq!(active(&Schedule::linear(3, -1).unwrap(), 10), vec![2, 5, 8]);
        assert_eq!(
            active(&Schedule::linear(1, 2).unwrap(), 6),
            vec![2, 3, 4, 5]
        );
        assert!(Schedule::linear(0, 0).is_err());
    }

    #[test]
    fn logarithmic_examples_from_cockpit_tests() {
        let schedule = Schedule::logarithmic(0.0, 1.0, 4, 10.0, false).unwrap();
        assert_eq!(active(&schedule, 20), vec![1, 2, 4, 10]);
        let with_init = Schedule::logarithmic(0.0, 1.0, 4, 10.0, true).unwrap();
        assert_eq!(active(&with_init, 20), vec![0, 1, 2, 4, 10]);
        // torch.logspace(0, 2, 3) = [1, 10, 100]: the exact powers must not truncate down.
        let powers = Schedule::logarithmic(0.0, 2.0, 3, 10.0, false).unwrap();
        assert_eq!(active(&powers, 200), vec![1, 10, 100]);
        assert!(Schedule::logarithmic(0.0, 1.0, 4, -2.0, true).is_err());
    }

    #[test]
    fn was_active_before_is_cockpits_is_end() {
        let schedule = Schedule::linear(1, 2).unwrap();
        assert_eq!(
            (0..6)
                .filter(|&s| schedule.was_active_before(s))
                .collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
    }
    #[test]
    fn parses_cockpit_schedule_calls() {
        let parse = |t: &str| t.parse::<Schedule>();
        assert_eq!(active(&parse("linear(3, -1)").unwrap(), 10), vec![2, 5, 8]);
        assert_eq!(
            active(&parse("linear(interval=2)").unwrap(), 5),
            vec![0, 2, 4]
        );
        assert_eq!(active(&parse("every_step").unwrap(), 3), vec![0, 1, 2]);
        assert_eq!(
            active(&parse("logarithmic(0, 1, 4, init=False)").unwrap(), 20),
            vec![1, 2, 4, 10]
        );
        assert_eq!(
            active(
                &parse("logarithmic(start=0, end=1, steps=4, base=10)").unwrap(),
                20
            ),
            vec![0, 1, 2, 4, 10]
        );
        // The largest power float32 holds is still a schedule.
        assert!(parse("logarithmic(0, 38, 3)").unwrap().is_active(1));
        for bad in [
            "linear(0)",
            "linear(1.5)",
            "linear()",
            "linear(2",
            "cosine(3)",
            "linear(2, 0, 1)",
            "linear(step=2)",
            "logarithmic(0, 1, 4, 10, maybe)",
            // A keyword given twice (Python refuses it too), and again after its position.
            "linear(interval=1, interval=2)",
            "linear(2, interval=3)",
            // Steps float32 cannot hold (torch.logspace computes in float32).
            "logarithmic(0, 1e300, 1e6)",
            "logarithmic(0, 50)",
            "logarithmic(0, 2, 10, 1e300)",
            "",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                matches!(err, CockpitError::InvalidSchedule(_)),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn settings_that_would_hang_or_saturate_are_refused() {
        let start = std::time::Instant::now();
        for bad in [
            "logarithmic(0, 3, 1000000000000)",
            "logarithmic(0, 3, 1e12)",
            "linear(99999999999999999999999)",
            "linear(1e300)",
            "linear(1, 99999999999999999999)",
            "linear(1, 1e19)",
            "logarithmic(0, 3, 99999999999999999999999)",
        ] {
            let err = bad.parse::<Schedule>().unwrap_err();
            assert!(
                matches!(err, CockpitError::InvalidSchedule(_)),
                "{bad}: {err}"
            );
        }
        assert!(Schedule::logarithmic(0.0, 3.0, 1 << 40, 10.0, true).is_err());
        assert!(start.elapsed().as_secs() < 5, "refused without iterating");
        // Exact large values still parse as written, not through a float.
        let far: Schedule = "linear(9007199254740993)".parse().unwrap();
        assert!(far.is_active(9_007_199_254_740_993) && !far.is_active(9_007_199_254_740_992));
        let schedule = Schedule::logarithmic(0.0, 3.0, Schedule::MAX_LOGARITHMIC_STEPS, 10.0, true);
        assert!(schedule.unwrap().is_active(1000));
    }

    proptest::proptest! {
        // A fixed seed in CI (PROPTEST_RNG_SEED and PROPTEST_CASES explore further).
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
            rng_seed: proptest::test_runner::RngSeed::Fixed(
                std::env::var("PROPTEST_RNG_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
            ),
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any text: a schedule or a typed error, never a panic; an error quotes the text
        /// short.
        #[test]
        fn any_text_parses_or_is_refused(text in "(linear|logarithmic|steps)?\\(?[-0-9a-z=., e+]{0,40}\\)?") {
            if let Err(err) = text.parse::<Schedule>() {
                proptest::prop_assert!(matches!(err, CockpitError::InvalidSchedule(_)));
                proptest::prop_assert!(err.to_string().len() < 400);
            }
        }

        /// `linear(interval, offset)` in any spelling of its keywords means Cockpit's rule:
        /// step − offset ≥ 0 and a multiple of the interval.
        #[test]
        fn linear_schedules_follow_cockpits_rule(interval in 1usize..50, offset in -20i64..20, keywords in proptest::bool::ANY, step in 0usize..500) {
            let text = if keywords {
                format!("linear(offset={offset}, interval={interval})")
            } else {
                format!("linear({interval}, {offset})")
            };
            let schedule: Schedule = text.parse().unwrap();
            let shifted = step as i64 - offset;
            let expected = shifted >= 0 && shifted % interval as i64 == 0;
            proptest::prop_assert_eq!(schedule.is_active(step), expected, "{} at {}", text, step);
        }

        /// `logarithmic(start, end, steps)`: refused, or active at step 0 (init) and at
        /// `⌊10^end⌋` when that is reachable, never at a step beyond it.
        #[test]
        fn logarithmic_schedules_are_bounded(start in -3.0f64..3.0, span in 0.0f64..4.0, steps in 1usize..200) {
            let end = start + span;
            match format!("logarithmic({start}, {end}, {steps})").parse::<Schedule>() {
                Ok(schedule) => {
                    proptest::prop_assert!(schedule.is_active(0));
                    // Computed in float32, as torch.logspace does: a few units of float32
                    // rounding above 10^end at most.
                    let beyond = (10f64.powf(end) * (1.0 + 1e-5)).ceil() as usize + 2;
                    proptest::prop_assert!(!schedule.is_active(beyond));
                    if steps == 1 {
                        let first = 10f32.powf(start as f32).trunc() as usize;
                        proptest::prop_assert!(schedule.is_active(first), "one point: 10^start");
                    }
                }
                Err(err) => proptest::prop_assert!(matches!(err, CockpitError::InvalidSchedule(_))),
            }
        }
    }
}
