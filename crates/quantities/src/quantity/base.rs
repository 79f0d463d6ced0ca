//! The [`Quantity`] trait and the per-step context quantities compute from.

use std::sync::Arc;

use burn::tensor::Tensor;

use serde::de::DeserializeOwned;

use super::spec::QuantitySpec;
use crate::histogram::BinsElements;
use crate::persample::reduce::{sum_all, sum_parts};
use crate::persample::{Direction, PerSampleNeeds, PerSampleSource, PerSampleStats, Statistic};
use crate::readback::Readable;
use crate::{CockpitError, QuantityError, Schedule, Snapshot, StepInfo, Value};

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
    /// The mini-batch loss once read ([`StepContext::loss`]).
    pub(crate) loss: std::cell::OnceCell<f64>,
    /// The gradient's per-parameter squared norms once computed ([`StepContext::grad_sq_norms`]).
    pub(crate) grad_sq_norms: std::cell::OnceCell<Tensor<1>>,
    /// Their sum once computed ([`StepContext::grad_sq_norm`]).
    pub(crate) grad_sq_norm: std::cell::OnceCell<Tensor<1>>,
    /// `Σ_p ‖g_{n,p}‖²` once computed ([`StepContext::sample_sq_norms`]).
    pub(crate) sample_sq_norms: std::cell::OnceCell<Tensor<1>>,
    /// `Σ_p ⟨g_{n,p}, ∇_p L⟩` once computed ([`StepContext::sample_grad_dots`]).
    pub(crate) sample_grad_dots: std::cell::OnceCell<Tensor<1>>,
    /// The per-sample statistics every quantity of this step asked for, reduced in one pass
    /// (or why they could not be had).
    pub per_sample: Result<Option<&'a PerSampleStats>, &'a QuantityError>,
    /// The step at which the Cockpit's update check found the parameters moved otherwise
    /// than by the announced plain SGD step, while no later step has confirmed it.
    pub(crate) sgd_contradicted: Option<usize>,
}

impl StepContext<'_> {
    /// The mini-batch loss as a host number, read from the device the first time a quantity
    /// asks (one read). Quantities that [`enqueue`](Quantity::enqueue) their numbers put
    /// `info.loss()` in the step's batched read instead; a loss that cannot be read is NaN.
    pub fn loss(&self) -> f64 {
        *self.loss.get_or_init(|| {
            crate::readback::read_values(self.info.loss().clone())
                .ok()
                .and_then(|values| values.first().copied())
                .unwrap_or(f64::NAN)
        })
    }

    /// `‖∇_p L‖²` per parameter, `[P]`, on the device: computed the first time a quantity asks
    /// and shared by every other quantity of the step (GradNorm, GradParamRatio, the gradient
    /// tests, CABS), so a step issues the `P` reductions once however many quantities need them.
    pub fn grad_sq_norms(&self) -> Tensor<1> {
        self.grad_sq_norms
            .get_or_init(|| self.grads.sq_norms())
            .clone()
    }

    /// `‖∇L‖²`, `[1]`, on the device: the sum of [`StepContext::grad_sq_norms`], computed once
    /// per step like them.
    pub fn grad_sq_norm(&self) -> Tensor<1> {
        self.grad_sq_norm
            .get_or_init(|| sum_all(self.grad_sq_norms()))
            .clone()
    }

    /// Each sample's squared gradient norm over every parameter, `Σ_p ‖g_{n,p}‖²`, `[B]`, on
    /// the device: summed over the parameters the first time a quantity asks and shared by
    /// every other (NormTest, OrthoTest, Examples).
    ///
    /// # Errors
    ///
    /// As [`StepContext::per_sample_stats`]; [`QuantityError::Shape`] without a parameter.
    pub fn sample_sq_norms(&self) -> Result<Tensor<1>, QuantityError> {
        self.summed_once(&self.sample_sq_norms, |stats| stats.get(Statistic::SqNorm))
    }

    /// Each sample's projection on the mean gradient over every parameter,
    /// `Σ_p ⟨g_{n,p}, ∇_p L⟩`, `[B]`, on the device, computed once per step like
    /// [`StepContext::sample_sq_norms`] (InnerTest, OrthoTest).
    ///
    /// # Errors
    ///
    /// As [`StepContext::sample_sq_norms`].
    pub fn sample_grad_dots(&self) -> Result<Tensor<1>, QuantityError> {
        self.summed_once(&self.sample_grad_dots, |stats| {
            stats.get(Statistic::Dot(Direction::Gradient))
        })
    }

    /// The sum over the parameters of the per-sample statistic `pick` selects, kept in `cell`.
    fn summed_once(
        &self,
        cell: &std::cell::OnceCell<Tensor<1>>,
        pick: impl FnOnce(&PerSampleStats) -> Option<&[Tensor<1>]>,
    ) -> Result<Tensor<1>, QuantityError> {
        if let Some(summed) = cell.get() {
            return Ok(summed.clone());
        }
        let summed = sum_over_params(pick(self.per_sample_stats()?).unwrap_or_default())?;
        Ok(cell.get_or_init(|| summed).clone())
    }

    /// Whether the announced plain SGD step may stand for the update: no tracked step has
    /// contradicted it since it was last confirmed.
    pub fn sgd_trusted(&self) -> bool {
        self.sgd_contradicted.is_none()
    }

    /// The learning rate of plain SGD (no momentum, dampening or weight decay), which CABS and
    /// EarlyStopping's formulas assume; otherwise why `quantity` is refused (another optimizer,
    /// or an announced SGD step the parameters did not take).
    pub(crate) fn plain_sgd_lr(&self, quantity: &str) -> Result<f64, QuantityError> {
        if let Some(at) = self.sgd_contradicted {
            return Err(QuantityError::Unsupported(format!(
                "{quantity} assumes the announced plain SGD step, which the parameters did not \
                 take at step {at} (see that step's warning: `set_learning_rate` for a \
                 schedule, `OptimizerInfo::from_adam`, … for another optimizer); refused until \
                 a later step moves by it"
            )));
        }
        match self.info.optimizer() {
            None => Err(QuantityError::MissingInfo("optimizer")),
            Some(optimizer @ crate::OptimizerInfo::Sgd { lr, .. }) if optimizer.is_plain_sgd() => {
                Ok(*lr)
            }
            Some(other) => Err(QuantityError::Unsupported(format!(
                "{quantity} only supports zero-momentum SGD (Cockpit raises ValueError), got {other:?}"
            ))),
        }
    }

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

/// What [`Quantity::enqueue`] hands the Cockpit.
#[derive(Debug)]
pub enum Enqueued {
    /// The value (or nothing to store), computed now with whatever reads it took.
    Done(Option<(usize, Value)>),
    /// Device numbers to read with the rest of the step's: the Cockpit reads every quantity's
    /// numbers in one batched read and hands these back, joined in this order, to
    /// [`Quantity::finish`]. Integer tensors (counts) are read exactly.
    Read(Vec<Readable>),
}

/// [`Quantity::compute`] for a quantity that implements [`Quantity::enqueue`] and
/// [`Quantity::finish`]: the same two halves with a read of its own in between (one code
/// path for the Cockpit's batched step and for direct use).
pub(crate) fn compute_now<Q: Quantity + ?Sized>(
    quantity: &mut Q,
    ctx: &StepContext<'_>,
) -> Result<Option<(usize, Value)>, QuantityError> {
    match quantity.enqueue(ctx)? {
        Enqueued::Done(value) => Ok(value),
        Enqueued::Read(tensors) => {
            let host = crate::readback::read_together(tensors)?.concat();
            quantity.finish(&host)
        }
    }
}

/// The step to store an enqueued read's value under, and the batch size it needs, kept from
/// [`Quantity::enqueue`] until [`Quantity::finish`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Awaiting(Option<(usize, usize)>);

impl Awaiting {
    /// Enqueues `tensor` for the value stored under `step` (with `batch` samples).
    pub(crate) fn read(&mut self, step: usize, batch: usize, tensors: Vec<Tensor<1>>) -> Enqueued {
        self.0 = Some((step, batch));
        Enqueued::Read(tensors.into_iter().map(Readable::from).collect())
    }

    /// `(step, batch)` of the read being finished.
    pub(crate) fn take(&mut self) -> Result<(usize, usize), QuantityError> {
        awaited(&mut self.0)
    }

    /// The read's numbers as a per-parameter list ([`Value::List`]) under the awaited step.
    pub(crate) fn finish_list(
        &mut self,
        host: &[f64],
    ) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, _) = self.take()?;
        Ok(Some((step, Value::List(host.to_vec()))))
    }

    /// A scalar from the read's `N` numbers and the batch size, under the awaited step.
    pub(crate) fn finish_scalar<const N: usize>(
        &mut self,
        host: &[f64],
        value: impl FnOnce(usize, [f64; N]) -> f64,
    ) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, batch, numbers) = self.take_numbers(host)?;
        Ok(Some((step, Value::Float(value(batch, numbers)))))
    }

    /// `(step, batch)` of the read being finished and its `N` numbers, in the order they were
    /// enqueued ([`QuantityError::ReadCount`] if the read gave another count).
    pub(crate) fn take_numbers<const N: usize>(
        &mut self,
        host: &[f64],
    ) -> Result<(usize, usize, [f64; N]), QuantityError> {
        let (step, batch) = self.take()?;
        let numbers = <[f64; N]>::try_from(host).map_err(|_| QuantityError::ReadCount {
            expected: N,
            got: host.len(),
        })?;
        Ok((step, batch, numbers))
    }
}

/// Enqueues `Σ_j ratio(g_j², Σ_n g_{n,j}², B)` per parameter, from the step's mean gradient
/// and the per-sample sums of squares (EarlyStopping's and MeanGSNR's signal-to-noise ratios);
/// also returns the number of parameter elements.
pub(crate) fn enqueue_ratio_sums(
    awaiting: &mut Awaiting,
    ctx: &StepContext<'_>,
    ratio: impl Fn(Tensor<1>, Tensor<1>, f64) -> Tensor<1>,
) -> Result<(Enqueued, usize), QuantityError> {
    let stats = ctx.per_sample_stats()?;
    let b = stats.batch_size as f64;
    let sum_sq = stats.get(Statistic::SumSq).unwrap_or_default();
    let parts = ctx
        .grads
        .entries()
        .iter()
        .zip(sum_sq)
        .map(|(entry, ss)| ratio(entry.value.clone().square(), ss.clone(), b).sum())
        .collect();
    let enqueued = awaiting.read(ctx.step, stats.batch_size, parts);
    Ok((enqueued, ctx.grads.numel()))
}

/// What a quantity kept from [`Quantity::enqueue`] for [`Quantity::finish`], taken; an error
/// for a `finish` without an enqueued read.
pub(crate) fn awaited<T>(slot: &mut Option<T>) -> Result<T, QuantityError> {
    slot.take()
        .ok_or_else(|| QuantityError::Unsupported("finish without an enqueued read".into()))
}

/// The per-sample gradients' absolute maxima per parameter at this step (what a histogram's
/// `GradAbsMax` adaptation reads).
pub(crate) fn grad_abs_max(ctx: &StepContext<'_>) -> Result<Vec<Tensor<1>>, QuantityError> {
    Ok(ctx
        .per_sample_stats()?
        .get(Statistic::AbsMax)
        .unwrap_or_default()
        .to_vec())
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
    /// The quantity's facts ([`QuantitySpec`]): its Cockpit name, the shape of its value, what
    /// it needs. A quantity stored under a key of its own keeps its kind's spec, so every
    /// reader knows what the value is without reading the key.
    fn spec(&self) -> &'static QuantitySpec;

    /// The key the value is stored under: Cockpit's class name (`"GradNorm"`, the default), or
    /// a variant key such as `"GradHist1d[bins=20]"`.
    fn name(&self) -> &str {
        self.spec().name
    }

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

    /// Computes at the context's step, on its own: [`Quantity::enqueue`], a read of what it
    /// enqueued, and [`Quantity::finish`] (the Cockpit runs the two halves itself, with one
    /// read for every quantity of the step). Returns the value and the step to store it under,
    /// or `None` when there is nothing to store (a two-step quantity at its start point).
    ///
    /// # Errors
    ///
    /// A [`QuantityError`] when this quantity cannot be computed; the Cockpit still runs the
    /// others.
    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        compute_now(self, ctx)
    }

    /// The first half of a step's work: either the value now ([`Enqueued::Done`]) or device
    /// numbers for the step's single batched read ([`Enqueued::Read`]), which come back
    /// through [`Quantity::finish`].
    ///
    /// # Errors
    ///
    /// A [`QuantityError`] when this quantity cannot be computed; the Cockpit still runs the
    /// others.
    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError>;

    /// The second half: the host values of the tensor [`Quantity::enqueue`] handed over, in
    /// its order; returns what `compute` would have.
    ///
    /// # Errors
    ///
    /// As [`Quantity::compute`]; [`QuantityError::Unsupported`] for a quantity that never
    /// enqueues a read.
    fn finish(&mut self, _host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        Err(QuantityError::Unsupported(format!(
            "{} enqueues no read to finish",
            self.name()
        )))
    }

    /// The per-sample statistics this quantity reads at `step` (through
    /// [`StepContext::per_sample_stats`]); the Cockpit computes the union in one pass.
    fn per_sample_needs(&self, _step: usize) -> PerSampleNeeds {
        self.spec().needs.statistics
    }

    /// The per-example record this quantity keeps across the run
    /// ([`Examples`](crate::quantity::Examples)); `None` for every other quantity. The
    /// Cockpit writes it beside the log and hands margins to steps where it is due.
    fn example_record(&self) -> Option<&crate::examples::ExampleRecord> {
        None
    }

    /// Warnings from the last `compute` (e.g. HessMaxEV not converging), handed to the
    /// Cockpit's warnings.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// The histogram hooks of a quantity that bins per-sample gradient elements
    /// ([`BinsElements`]); `None` (the default) for every other quantity.
    fn bins_elements(&mut self) -> Option<&mut dyn BinsElements> {
        None
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

    /// What the quantity carries to its next step (a reference point, the previous step's
    /// parameters, an adapted range), read to the host for a checkpoint
    /// ([`Cockpit::checkpoint`](crate::Cockpit::checkpoint)). The default, nothing, is right
    /// for a quantity whose values depend on the step alone.
    ///
    /// # Errors
    ///
    /// [`QuantityError`] if the device cannot be read.
    fn carry(&self) -> Result<super::Carried, QuantityError> {
        Ok(super::Carried::new())
    }

    /// Takes back what [`Quantity::carry`] saved, on the device and with the ids of `params`
    /// (the model's parameters at the resumed step).
    ///
    /// # Errors
    ///
    /// [`CarriedError`](super::CarriedError) if the state is not one this quantity saved or is
    /// of another model.
    fn restore(
        &mut self,
        _carried: &super::Carried,
        _params: &Snapshot,
    ) -> Result<(), super::CarriedError> {
        Ok(())
    }
}

/// A quantity type with its facts and its settings, as Cockpit's keyword arguments.
///
/// Implemented by each quantity in its own file; [`crate::QuantityKind`] reads it.
pub trait QuantityType: Quantity + Sized + 'static {
    /// The quantity's facts.
    const SPEC: QuantitySpec;

    /// Its settings, deserialised (serde) from Cockpit's keyword arguments (`{"bins": 20}`);
    /// the default is Cockpit's default. Unknown keys are refused.
    type Settings: DeserializeOwned + Default;

    /// The quantity on `schedule` with `settings`. The settings are checked when the quantity
    /// joins a [`Cockpit`](crate::Cockpit) ([`Quantity::check`]).
    fn with_settings(schedule: Schedule, settings: Self::Settings) -> Self;
}

/// Sums per-parameter `[B]` statistics over the parameters ([`sum_parts`]: two launches on a
/// CubeCL device, whatever burn's fusion folds).
pub(crate) fn sum_over_params(parts: &[Tensor<1>]) -> Result<Tensor<1>, QuantityError> {
    sum_parts(parts).ok_or_else(|| QuantityError::Shape("no parameter".into()))
}

/// `x` if the batch has at least two samples, NaN otherwise (the `1/(B−1)` quantities are
/// undefined for `B = 1`).
pub(crate) fn needs_two(batch: usize, x: impl FnOnce() -> f64) -> f64 {
    if batch < 2 { f64::NAN } else { x() }
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
        source: None,
    }
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
