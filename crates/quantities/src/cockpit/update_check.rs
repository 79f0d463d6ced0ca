//! [`UpdateCheck`]: whether the optimizer moved the parameters by the plain SGD step
//! `−lr·∇L` the optimizer info announced. CABS and EarlyStopping assume that step, and Alpha
//! takes it for the update on its cheap path; a learning-rate schedule the Cockpit is not told
//! about, or another optimizer announced as SGD, would make all three wrong without a word.
//!
//! The check compares `θ_{s+1} − θ_s` with `−lr·∇L_s` on a tracked step `s` and the step after
//! it (tracked or not): at every such pair until one confirms the rule, then every
//! [`CHECK_EVERY`]-th tracked step, and again every pair after a contradiction until one
//! confirms it. Its three numbers ride in the next batched read (no read of their own).

use burn::tensor::{DType, Tensor};

use crate::persample::reduce::sum_all;
use crate::quantity::{Carried, CarriedError};
use crate::readback::Readable;
use crate::{OptimizerInfo, QuantityError, Snapshot};

/// The relative mismatch `‖(θ_{s+1} − θ_s) + lr·∇L_s‖ / ‖lr·∇L_s‖` above which the step was
/// not the announced plain SGD step.
const MISMATCH: f64 = 1e-2;

/// Once confirmed, the rule is checked again on every this many tracked plain-SGD steps (a
/// schedule that changes the rate later in the run, without `set_learning_rate`).
pub(crate) const CHECK_EVERY: usize = 16;

/// The check's state across steps (one per Cockpit).
#[derive(Debug, Default)]
pub(crate) struct UpdateCheck {
    /// The start of a pair to check: kept at a tracked step whose optimizer info is plain SGD.
    kept: Option<Kept>,
    /// Pairs whose device numbers wait for the next batched read.
    awaited: Vec<Awaited>,
    /// The pairs of the read in flight, in the order their numbers were handed out.
    reading: Vec<Pair>,
    /// Whether a pair has confirmed the rule (and none contradicted it since).
    confirmed: bool,
    /// The start step of the pair that contradicted the rule, until a later pair confirms it.
    contradicted: Option<usize>,
    /// Tracked plain-SGD steps seen since the last confirmation (the cadence).
    since_confirmed: usize,
    /// The tracked steps whose quantities were offered the announced step (newest last, the
    /// last two kept).
    offered: Vec<usize>,
}

#[derive(Debug)]
struct Kept {
    step: usize,
    lr: f64,
    params: Snapshot,
    grads: Snapshot,
    grad_sq_norm: Tensor<1>,
}

#[derive(Debug)]
struct Pair {
    start: usize,
    lr: f64,
    /// The parameters' unit roundoff (`2⁻²⁴` in float32).
    unit: f64,
}

#[derive(Debug)]
struct Awaited {
    pair: Pair,
    /// `‖∇L_s‖²`, `‖(θ_{s+1} − θ_s) + lr·∇L_s‖²`, `‖θ_{s+1}‖²`.
    numbers: [Tensor<1>; 3],
}

impl UpdateCheck {
    /// Whether the quantities may take the announced plain SGD step for the update (no pair
    /// has contradicted it since the last confirmation).
    pub(crate) fn trusted(&self) -> bool {
        self.contradicted.is_none()
    }

    /// The step a contradiction was found at, while it stands.
    pub(crate) fn contradicted_at(&self) -> Option<usize> {
        self.contradicted
    }

    /// Whether the quantities of tracked `step` were offered the announced step.
    pub(crate) fn offered_at(&self, step: usize) -> bool {
        self.offered.contains(&step)
    }

    /// At every step the Cockpit sees (tracked or not), before anything else: the numbers of
    /// the pair that ends here, if one was kept at the step before.
    pub(crate) fn end(&mut self, step: usize, params: &Snapshot) {
        let Some(kept) = self.kept.take() else {
            return;
        };
        if kept.step + 1 != step {
            return;
        }
        // The parameter set was checked against the first step's before this call: the
        // differences cannot fail on shapes; a failure leaves the pair unchecked.
        let Ok(moved) = params.difference(&kept.params) else {
            return;
        };
        let Ok(off) = moved.scaled_sq_distances(&kept.grads, -kept.lr) else {
            return;
        };
        self.awaited.push(Awaited {
            pair: Pair {
                start: kept.step,
                lr: kept.lr,
                unit: unit_roundoff(params),
            },
            numbers: [kept.grad_sq_norm, sum_all(off), sum_all(params.sq_norms())],
        });
    }

    /// At a tracked step, before its quantities run: records whether they are offered the
    /// announced step, and keeps the step as the start of a pair where a check is due.
    /// `grad_sq_norm` is asked for only then.
    pub(crate) fn start(
        &mut self,
        step: usize,
        optimizer: Option<&OptimizerInfo>,
        params: &Snapshot,
        grads: &Snapshot,
        grad_sq_norm: impl FnOnce() -> Tensor<1>,
    ) {
        let lr = optimizer
            .filter(|o| o.is_plain_sgd())
            .and_then(OptimizerInfo::lr)
            .filter(|lr| lr.is_finite() && *lr > 0.0);
        self.offered.retain(|at| *at + 1 >= step);
        let Some(lr) = lr else {
            return;
        };
        if self.trusted() {
            self.offered.push(step);
        }
        // Unconfirmed: every pair, but one at a time (the next is kept once this one's
        // numbers are read); confirmed: every CHECK_EVERY-th tracked plain-SGD step.
        let due = if self.confirmed {
            self.since_confirmed.is_multiple_of(CHECK_EVERY)
        } else {
            self.awaited.is_empty() && self.reading.is_empty()
        };
        self.since_confirmed += 1;
        if due {
            self.kept = Some(Kept {
                step,
                lr,
                params: params.clone(),
                grads: grads.clone(),
                grad_sq_norm: grad_sq_norm(),
            });
        }
    }

    /// The awaited pairs' numbers for the step's batched read, in order.
    pub(crate) fn readables(&mut self) -> Vec<Readable> {
        let awaited = std::mem::take(&mut self.awaited);
        let mut readables = Vec::with_capacity(3 * awaited.len());
        for Awaited { pair, numbers } in awaited {
            self.reading.push(pair);
            readables.extend(numbers.into_iter().map(Readable::from));
        }
        readables
    }

    /// How many readables [`UpdateCheck::readables`] handed out for the read in flight.
    pub(crate) fn reading(&self) -> usize {
        3 * self.reading.len()
    }

    /// The verdicts of the read's pairs from their host numbers (three per pair, as handed
    /// out): what to say (once per change: contradicted, confirmed again). `None`: the read
    /// failed and the pairs stay unchecked.
    pub(crate) fn verdict(&mut self, host: Option<&[f64]>) -> Vec<String> {
        let pairs = std::mem::take(&mut self.reading);
        let mut messages = Vec::new();
        let Some(host) = host else {
            return messages;
        };
        for (pair, numbers) in pairs.into_iter().zip(host.chunks_exact(3)) {
            let t = pair.lr * numbers[0].sqrt();
            let relative = numbers[1].sqrt() / t;
            // Storing θ_{s+1} rounds each parameter by up to `unit·|θ_i|`: a step smaller
            // than that rounding is not contradicted by it.
            let rounding = 2.0 * pair.unit * numbers[2].sqrt() / t;
            if !(t > 0.0 && relative.is_finite() && rounding.is_finite()) {
                // A zero or non-finite step says nothing either way.
                continue;
            }
            if relative > MISMATCH + rounding {
                self.confirmed = false;
                if self.contradicted.is_none() {
                    self.contradicted = Some(pair.start);
                    messages.push(format!(
                        "step {}: the parameters moved {relative:.2e} (relative) away from \
                         the plain SGD step −lr·∇L with lr = {} the optimizer info \
                         announced. A learning-rate schedule: call \
                         `cockpit.set_learning_rate(lr)` whenever it changes; another \
                         optimizer: announce it (`OptimizerInfo::from_adam`, `from_adamw`, \
                         `sgd_momentum`, …). Until a later step moves by the announced rule, \
                         CABS and EarlyStopping are refused and Alpha follows the update \
                         actually taken",
                        pair.start, pair.lr
                    ));
                }
            } else {
                if let Some(at) = self.contradicted.take() {
                    messages.push(format!(
                        "step {}: the parameters moved by the announced plain SGD step again \
                         (contradicted at step {at}); CABS and EarlyStopping resume",
                        pair.start
                    ));
                }
                if !self.confirmed {
                    self.confirmed = true;
                    self.since_confirmed = 1;
                }
            }
        }
        messages
    }
}

/// The unit roundoff of the parameters' float type (`2⁻²⁴` for float32, `2⁻⁵³` for float64;
/// half precision's for the halves).
impl UpdateCheck {
    /// The check's state for a checkpoint (between steps: nothing is awaited or being read).
    pub(crate) fn carry(&self) -> Result<Carried, QuantityError> {
        let mut carried = Carried::new()
            .with_numbers(
                "flags",
                vec![
                    f64::from(u8::from(self.confirmed)),
                    self.contradicted.map_or(-1.0, |s| s as f64),
                    self.since_confirmed as f64,
                ],
            )
            .with_numbers("offered", self.offered.iter().map(|&s| s as f64).collect());
        if let Some(kept) = &self.kept {
            carried = carried
                .with_numbers("kept", vec![kept.step as f64, kept.lr])
                .with_tensor("kept_norm", &kept.grad_sq_norm)?
                .with_snapshot("kept_params", &kept.params)?
                .with_snapshot("kept_grads", &kept.grads)?;
        }
        Ok(carried)
    }

    /// Takes back [`UpdateCheck::carry`]'s state on the device and with the ids of `params`.
    pub(crate) fn restore(
        &mut self,
        carried: &Carried,
        params: &Snapshot,
    ) -> Result<(), CarriedError> {
        const OWNER: &str = "Cockpit (update check)";
        let &[confirmed, contradicted, since] = carried.numbers(OWNER, "flags")? else {
            return Err(CarriedError::Missing {
                owner: OWNER.into(),
                part: "flags".into(),
            });
        };
        *self = Self {
            confirmed: confirmed != 0.0,
            contradicted: (contradicted >= 0.0).then_some(contradicted as usize),
            since_confirmed: since as usize,
            offered: carried
                .numbers(OWNER, "offered")?
                .iter()
                .map(|&s| s as usize)
                .collect(),
            ..Self::default()
        };
        if carried.has("kept") {
            let &[step, lr] = carried.numbers(OWNER, "kept")? else {
                return Err(CarriedError::Missing {
                    owner: OWNER.into(),
                    part: "kept".into(),
                });
            };
            self.kept = Some(Kept {
                step: step as usize,
                lr,
                params: carried.snapshot(OWNER, "kept_params", params)?,
                grads: carried.snapshot(OWNER, "kept_grads", params)?,
                grad_sq_norm: carried.tensor(OWNER, "kept_norm", &params.device())?,
            });
        }
        Ok(())
    }
}

fn unit_roundoff(params: &Snapshot) -> f64 {
    match params.entries().first().map(|e| e.value.dtype()) {
        Some(DType::F64) => f64::EPSILON / 2.0,
        Some(DType::F16) => 2f64.powi(-11),
        Some(DType::BF16) => 2f64.powi(-8),
        _ => f64::from(f32::EPSILON) / 2.0,
    }
}
