//! The [`Quantity`] trait and the per-step context quantities compute from.

use std::sync::Arc;

use burn::tensor::Tensor;

use crate::persample::{Elements, PerSampleNeeds, PerSampleSource, PerSampleStats};
use crate::{CockpitError, ParamEntry, QuantityError, Snapshot, StepInfo, Value};

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
    /// The per-sample statistics every quantity of this step asked for, reduced in one pass
    /// (or why they could not be had).
    pub per_sample: Result<Option<&'a PerSampleStats>, &'a QuantityError>,
}

impl StepContext<'_> {
    /// The reduced per-sample statistics of this step.
    ///
    /// # Errors
    ///
    /// [`QuantityError::MissingInfo`] if the step info has no per-sample source, or the error
    /// of the source.
    pub fn per_sample_stats(&self) -> Result<&PerSampleStats, QuantityError> {
        match self.per_sample {
            Ok(Some(stats)) => Ok(stats),
            Ok(None) => Err(missing_per_sample()),
            Err(err) => Err(err.clone()),
        }
    }

    /// The step's per-sample source (for quantities that need more than the shared
    /// statistics, such as Alpha's projections).
    ///
    /// # Errors
    ///
    /// [`QuantityError::MissingInfo`] if the step info has none.
    pub fn per_sample_source(&self) -> Result<&Arc<dyn PerSampleSource>, QuantityError> {
        self.info.per_sample().ok_or_else(missing_per_sample)
    }

    /// The step's curvature source.
    ///
    /// # Errors
    ///
    /// [`QuantityError::MissingInfo`] if the step info has none.
    pub fn curvature(&self) -> Result<&Arc<dyn crate::curvature::CurvatureSource>, QuantityError> {
        self.info.curvature().ok_or(QuantityError::MissingInfo(
            "curvature (StepInfo::with_curvature)",
        ))
    }

    /// The batch size: from the per-sample source, else the step info.
    pub fn batch_size(&self) -> Option<usize> {
        self.info
            .per_sample()
            .map(|s| s.batch_size())
            .or(self.info.batch_size())
    }
}

pub(crate) fn missing_per_sample() -> QuantityError {
    QuantityError::MissingInfo("per-sample gradients (StepInfo::with_per_sample)")
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

    /// Checks the quantity's settings (linfa's `check()` habit): the Cockpit calls it when the
    /// quantity joins, so impossible settings are refused before training, not met as a
    /// division by zero mid-run.
    ///
    /// # Errors
    ///
    /// [`CockpitError::InvalidSettings`] naming the quantity and what is wrong.
    fn check(&self) -> Result<(), CockpitError> {
        Ok(())
    }

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

    /// The per-sample statistics this quantity reads at `step` (through
    /// [`StepContext::per_sample_stats`]); the Cockpit computes the union in one pass.
    fn per_sample_needs(&self, _step: usize) -> PerSampleNeeds {
        PerSampleNeeds::NONE
    }

    /// Warnings from the last `compute` (e.g. HessMaxEV not converging), handed to the
    /// Cockpit's warnings.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the quantity reads the step's curvature source at `step`.
    fn uses_curvature(&self, _step: usize) -> bool {
        false
    }

    /// Whether the quantity reads the step's per-sample gradients at `step` at all (through the
    /// shared statistics or the source itself).
    fn uses_per_sample(&self, step: usize) -> bool {
        self.per_sample_needs(step).any()
    }

    /// Receives per-sample gradient elements `[b, numel]` of parameter `index` (snapshot
    /// order), before `compute`, when [`PerSampleNeeds::elements`] was asked for.
    ///
    /// # Errors
    ///
    /// A [`QuantityError`] stops the step's per-sample pass.
    fn accept_chunk(
        &mut self,
        _step: usize,
        _index: usize,
        _entry: &ParamEntry,
        _elements: Elements,
    ) -> Result<(), QuantityError> {
        Ok(())
    }
}

/// Sums per-parameter `[B]` statistics over the parameters.
pub(crate) fn sum_over_params(parts: &[Tensor<1>]) -> Result<Tensor<1>, QuantityError> {
    parts
        .iter()
        .cloned()
        .reduce(|a, b| a + b)
        .ok_or_else(|| QuantityError::Shape("no parameter".into()))
}

/// Reads several one-element tensors in one host read.
pub(crate) fn read_scalars(parts: Vec<Tensor<1>>) -> Result<Vec<f64>, QuantityError> {
    Ok(crate::readback::read_values(Tensor::cat(parts, 0))?)
}

/// `x` if the batch has at least two samples, NaN otherwise (the `1/(B−1)` quantities are
/// undefined for `B = 1`).
pub(crate) fn needs_two(batch: usize, x: impl FnOnce() -> f64) -> f64 {
    if batch < 2 { f64::NAN } else { x() }
}

/// Per-parameter L2 norms read back from per-parameter squared norms: one host read.
pub(crate) fn sqrt_list(squared: burn::tensor::Tensor<1>) -> Result<Value, QuantityError> {
    let values = crate::readback::read_values(squared.sqrt())?;
    Ok(Value::List(values))
}

/// `ε` of a ratio's denominator must be a non-negative finite number.
pub(crate) fn check_epsilon(quantity: &str, epsilon: f64) -> Result<(), CockpitError> {
    if epsilon.is_finite() && epsilon >= 0.0 {
        Ok(())
    } else {
        Err(invalid(
            quantity,
            format!("epsilon must be finite and ≥ 0, got {epsilon}"),
        ))
    }
}

/// [`CockpitError::InvalidSettings`] for `quantity`.
pub(crate) fn invalid(quantity: &str, reason: String) -> CockpitError {
    CockpitError::InvalidSettings {
        quantity: quantity.to_string(),
        reason,
    }
}

/// The most bins a histogram axis may have: `GradHist1d`'s counts, its thresholds and each
/// counting thread's partial counts are `bins` numbers each (8 MiB per copy at this bound).
/// Cockpit's defaults are 100 (1-d) and 40 × 50 (2-d).
pub const MAX_BINS: usize = 1 << 20;

/// The most cells a 2-d histogram may have (`x bins · y bins`): the same bound as
/// [`MAX_BINS`], since the counts, each counting thread's copy and the 0/1 matrix product that
/// counts small gradients are that many numbers each.
pub const MAX_BINS_2D: usize = MAX_BINS;

/// A histogram axis needs between one and [`MAX_BINS`] bins and a finite range `lo < hi`
/// whose width `hi − lo` is finite too (a wider one puts every value in one bin).
pub(crate) fn check_axis(
    quantity: &str,
    axis: &str,
    bins: usize,
    (lo, hi): (f64, f64),
) -> Result<(), CockpitError> {
    if bins == 0 {
        return Err(invalid(quantity, format!("{axis}needs at least one bin")));
    }
    if bins > MAX_BINS {
        return Err(invalid(
            quantity,
            format!("{axis}{bins} bins is more than the {MAX_BINS} allowed"),
        ));
    }
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(invalid(
            quantity,
            format!("{axis}range ({lo}, {hi}) must be finite with lo < hi"),
        ));
    }
    let width = (hi - lo) / bins as f64;
    if !(hi - lo).is_finite() || width <= 0.0 || !(1.0 / width).is_finite() {
        return Err(invalid(
            quantity,
            format!(
                "{axis}range ({lo}, {hi}) with {bins} bins has a bin width ({width:e}) that                  float64 cannot work with"
            ),
        ));
    }
    Ok(())
}

/// Only one Monte-Carlo sample of the GGN diagonal is implemented (Cockpit's default).
pub(crate) fn check_mc_samples(quantity: &str, mc_samples: usize) -> Result<(), CockpitError> {
    if mc_samples == 1 {
        Ok(())
    } else {
        Err(invalid(
            quantity,
            format!("mc_samples = {mc_samples}: only 1 Monte-Carlo sample is implemented"),
        ))
    }
}
