//! The [`Quantity`] trait and the per-step context quantities compute from.

use crate::{QuantityError, Snapshot, StepInfo, Value};

/// Everything a quantity may read at one tracked step.
///
/// Built by the [`Cockpit`](crate::Cockpit) after `backward` and before the optimizer step, so
/// `params` are θ_t (the weights used in this step's forward pass) and `grads` are ∇L(θ_t).
#[derive(Debug)]
pub struct StepContext<'a> {
    /// The step being tracked.
    pub step: usize,
    /// The trainable parameters θ_t.
    pub params: &'a Snapshot,
    /// Their mean mini-batch gradients, aligned with `params`.
    pub grads: &'a Snapshot,
    /// The step's info (loss, batch size, per-sample losses, optimizer).
    pub info: &'a StepInfo,
    /// The mini-batch loss, read from the device once per step.
    pub loss: f64,
}

/// A Cockpit quantity: decides when it runs and what it stores.
///
/// A *single-step* quantity computes its value from the current step and stores it under that
/// step. A *two-step* quantity (Distance, UpdateSize, Alpha) also runs at the step after a
/// scheduled one, caches what it needs in between, and stores its result under the earlier step
/// (Cockpit's `SAVE_SHIFT`). Caches hold device handles and are dropped as soon as no later step
/// can need them.
pub trait Quantity: Send {
    /// The key the value is stored under: Cockpit's class name (`"GradNorm"`), or a variant key
    /// such as `"GradHist1d[bins=20]"`.
    fn name(&self) -> &str;

    /// Whether the quantity has work to do at `step` (computing or caching).
    fn should_compute(&self, step: usize) -> bool;

    /// Computes at the context's step. Returns the value and the step to store it under, or
    /// `None` when there is nothing to store (a two-step quantity at its start point).
    ///
    /// # Errors
    ///
    /// A [`QuantityError`] when this quantity cannot be computed; the Cockpit still runs the
    /// others.
    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError>;
}

/// Per-parameter L2 norms read back from per-parameter squared norms: one host read.
pub(crate) fn sqrt_list(squared: burn::tensor::Tensor<1>) -> Result<Value, QuantityError> {
    let values = crate::snapshot::read_values(squared.sqrt())?;
    Ok(Value::List(values))
}
