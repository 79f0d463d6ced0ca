//! One call per training step: [`Cockpit::step`] runs the forward and backward pass with the
//! per-sample recording and the curvature replay the step's quantities need, and tracks it.

use std::sync::Arc;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::base::Cockpit;
use super::report::StepReport;
use crate::curvature::{GgnPasses, NetworkOutput, OutputLoss, ProbeBudget, RecordedCurvature};
use crate::persample::reduce::depth_of;
use crate::persample::{ExactPerSample, PerSample, Recorder};
use crate::{CockpitError, StepInfo};

/// How [`Cockpit::step`] builds a step's per-sample and curvature sources.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct StepOptions {
    /// Where the drop-in layers do not cover every parameter (plain burn-nn layers), compute
    /// the per-sample statistics from single-sample backward passes instead of reporting the
    /// per-sample quantities as failed. # Cost: `B` extra forward and backward passes of the
    /// whole batch per tracked step (each keeps one sample's loss); off by default.
    pub exact_fallback: bool,
    /// The network is piecewise linear between its drop-ins (ReLU, max-pool, no curved
    /// function called between layers), so `diag_h` is the exact GGN diagonal
    /// ([`RecordedCurvature::piecewise_linear`]). Off by default: `diag_h` is the GGN plus
    /// Hutchinson's estimate of the residual, and says so in the warnings.
    pub piecewise_linear: bool,
    /// Where `diag_h` is estimated, draw as many probes as each parameter's trace needs for
    /// the budget's relative standard error, within its ceiling
    /// ([`RecordedCurvature::with_probe_budget`]); `None` (default): a fixed 10 probes.
    pub probe_budget: Option<ProbeBudget>,
    /// How the exact GGN's recorded passes run where the forward can widen its batch
    /// ([`OnBatch`]); [`GgnPasses::Auto`] (default): one widened pass on wgpu and cuda.
    pub ggn_passes: GgnPasses,
    /// The most columns of the loss Hessian's square root (the flattened output's width: a
    /// language model's `T·V`) the exact GGN may take, one recorded pass each
    /// ([`RecordedCurvature::with_exact_columns`]); beyond it a Monte-Carlo estimate with its
    /// standard error. `None` (default): [`EXACT_COLUMNS`](crate::curvature::EXACT_COLUMNS).
    pub exact_columns: Option<usize>,
    /// Sampled columns (recorded passes) of every Monte-Carlo GGN diagonal
    /// ([`RecordedCurvature::with_mc_samples`]). `None` (default): 1 for `diag_ggn_mc`,
    /// [`MC_SAMPLES`](crate::curvature::MC_SAMPLES) beyond the exact budget.
    pub mc_samples: Option<usize>,
}

/// The forward pass [`Cockpit::step`] runs (and replays for the curvature and the exact
/// fallback): any `Fn(&M) -> Tensor<D>` closure over the step's batch (a classifier's
/// `[B, C]`, a language model's `[B, T, V]`, a segmenter's `[B, C, H, W]`:
/// [`NetworkOutput`]), or an [`OnBatch`], which also runs the network on the batch repeated,
/// so that the exact GGN's recorded passes can run as one
/// ([`GgnPasses`](crate::curvature::GgnPasses)).
pub trait StepForward<M>: Send + Sync + 'static {
    /// The network's output on the step's batch, flattened to `[B, K]`
    /// ([`NetworkOutput::into_rows`]).
    fn output(&self, model: &M) -> Tensor<2>;

    /// Whether [`StepForward::widened`] runs.
    fn widens(&self) -> bool {
        false
    }

    /// The output `[k·B, K]` on the batch repeated `copies` times along its first axis
    /// (copy-major), where this forward can widen its batch; [`StepForward::output`] (one
    /// copy) otherwise.
    fn widened(&self, model: &M, copies: usize) -> Tensor<2> {
        let _ = copies;
        self.output(model)
    }
}

impl<M, F, O> StepForward<M> for F
where
    F: Fn(&M) -> O + Send + Sync + 'static,
    O: NetworkOutput,
{
    fn output(&self, model: &M) -> Tensor<2> {
        self(model).into_rows()
    }
}

/// A forward pass on an input the Cockpit holds, `forward(model, input)`: as a closure over
/// the batch, and the exact GGN (`business`, `full`) can then run its `C` recorded passes as
/// one pass over the batch repeated `C` times where that is faster (wgpu and cuda).
///
/// ```no_run
/// # use burn::tensor::{Int, Tensor};
/// # use cockpit_quantities::{Cockpit, OnBatch, curvature::OutputLoss};
/// # fn demo<M: burn::module::Module + Sync + 'static>(cockpit: &mut Cockpit, model: &M, forward: fn(&M, Tensor<4>) -> Tensor<2>, images: Tensor<4>, labels: Tensor<1, Int>) -> Result<(), Box<dyn std::error::Error>> {
/// let step = cockpit.step(model, OnBatch::new(images, forward), OutputLoss::classes(labels, 10))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OnBatch<const D: usize, F> {
    input: Tensor<D>,
    forward: F,
}

impl<const D: usize, F> OnBatch<D, F> {
    /// `forward(model, input)` on this batch.
    pub fn new(input: Tensor<D>, forward: F) -> Self {
        Self { input, forward }
    }
}

impl<M, const D: usize, F, O> StepForward<M> for OnBatch<D, F>
where
    F: Fn(&M, Tensor<D>) -> O + Send + Sync + 'static,
    O: NetworkOutput,
{
    fn output(&self, model: &M) -> Tensor<2> {
        (self.forward)(model, self.input.clone()).into_rows()
    }

    fn widens(&self) -> bool {
        true
    }

    fn widened(&self, model: &M, copies: usize) -> Tensor<2> {
        (self.forward)(model, self.input.clone().repeat_dim(0, copies)).into_rows()
    }
}

impl StepOptions {
    /// The defaults: no exact fallback, no piecewise-linear declaration.
    pub fn new() -> Self {
        Self::default()
    }

    /// See [`StepOptions::exact_fallback`].
    pub fn with_exact_fallback(mut self, allow: bool) -> Self {
        self.exact_fallback = allow;
        self
    }

    /// See [`StepOptions::piecewise_linear`].
    pub fn with_piecewise_linear(mut self, declared: bool) -> Self {
        self.piecewise_linear = declared;
        self
    }

    /// See [`StepOptions::probe_budget`].
    pub fn with_probe_budget(mut self, budget: ProbeBudget) -> Self {
        self.probe_budget = Some(budget);
        self
    }

    /// See [`StepOptions::ggn_passes`].
    pub fn with_ggn_passes(mut self, passes: GgnPasses) -> Self {
        self.ggn_passes = passes;
        self
    }

    /// See [`StepOptions::exact_columns`].
    pub fn with_exact_columns(mut self, columns: usize) -> Self {
        self.exact_columns = Some(columns);
        self
    }

    /// See [`StepOptions::mc_samples`] (at least 1).
    pub fn with_mc_samples(mut self, samples: usize) -> Self {
        self.mc_samples = Some(samples.max(1));
        self
    }
}

/// What [`Cockpit::step`] hands back: the gradients for the optimizer and what was tracked.
#[derive(Debug)]
#[non_exhaustive]
pub struct Stepped {
    /// The gradients of the mean loss, for `optimizer.step(lr, model, grads)`.
    pub grads: GradientsParams,
    /// The mean loss of the batch (detached, on the device).
    pub loss: Tensor<1>,
    /// Each example's loss, `[B]` (detached, on the device).
    pub losses: Tensor<1>,
    /// The step's number and the quantities that could not be computed.
    pub report: StepReport,
}

impl Cockpit {
    /// How [`Cockpit::step`] builds the step's sources ([`StepOptions`]).
    pub fn with_step_options(mut self, options: StepOptions) -> Self {
        self.step_options = options;
        self
    }

    /// One training step in one call, numbered [`Cockpit::next_step`]: starts the per-sample
    /// recording when a quantity needs it, runs `forward` on `model` (the network's output
    /// `[B, C]` on the step's batch, on an autodiff device), takes each example's `loss`, runs
    /// the backward pass of their mean, and tracks the step with the optimizer of
    /// [`Cockpit::with_optimizer`], the per-sample losses, the recording and, where a
    /// curvature quantity is due, a [`RecordedCurvature`] that replays `forward`. Hand
    /// [`Stepped::grads`] to the optimizer afterwards.
    ///
    /// ```no_run
    /// # use burn::{module::Module, optim::{GradientsParams, Optimizer, SgdConfig}, tensor::{Int, Tensor}};
    /// # use cockpit_quantities::{Cockpit, Configuration, OptimizerInfo, Schedule, curvature::OutputLoss};
    /// # fn demo<M: burn::module::Module + Sync + 'static>(mut model: M, forward: fn(&M, Tensor<4>) -> Tensor<2>, batches: Vec<(Tensor<4>, Tensor<1, Int>)>) -> Result<(), Box<dyn std::error::Error>> {
    /// let sgd = SgdConfig::new();
    /// let mut optimizer = sgd.init();
    /// let mut cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())?
    ///     .with_optimizer(OptimizerInfo::from_sgd(&sgd, 0.05));
    /// for (images, labels) in batches {
    ///     let step = cockpit.step(&model, move |m: &M| forward(m, images.clone()), OutputLoss::classes(labels, 10))?;
    ///     model = optimizer.step(0.05, model, step.grads);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Dropout draws new masks in every replay (the curvature's and the exact fallback's).
    ///
    /// # Errors
    ///
    /// As [`Cockpit::track`]: errors of the call (parameters changed, a batch mismatch, a log
    /// that cannot be written). Quantities that fail are in [`Stepped::report`] and printed.
    ///
    /// # Cost
    ///
    /// One forward and backward pass, as a plain step, plus what the due quantities cost
    /// (the curvature quantities replay `forward`; [`StepOptions::exact_fallback`] adds `B`
    /// passes on models the drop-ins do not cover).
    pub fn step<M, F>(
        &mut self,
        model: &M,
        forward: F,
        loss: OutputLoss,
    ) -> Result<Stepped, CockpitError>
    where
        M: Module + Sync + 'static,
        F: StepForward<M>,
    {
        self.measured(|cockpit| cockpit.step_inner(model, forward, loss, None))
    }

    /// [`Cockpit::step`] on a batch whose examples are named by `ids` (dataset indices, one
    /// per sample in the batch's order; [`StepInfo::with_sample_ids`]): the
    /// [`Examples`](crate::quantity::Examples) quantity keeps its per-example record under
    /// them, with the margins of a cross-entropy loss.
    ///
    /// ```no_run
    /// # use burn::tensor::{Int, Tensor};
    /// # use cockpit_quantities::{Cockpit, curvature::OutputLoss};
    /// # fn demo<M: burn::module::Module + Sync + 'static>(cockpit: &mut Cockpit, model: &M, forward: fn(&M, Tensor<2>) -> Tensor<2>, x: Tensor<2>, labels: Tensor<1, Int>, indices: Vec<u64>) -> Result<(), Box<dyn std::error::Error>> {
    /// let step = cockpit.step_with_ids(model, move |m: &M| forward(m, x.clone()), OutputLoss::classes(labels, 10), indices)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Cockpit::step`]; [`CockpitError::BatchMismatch`] if there are not as many ids
    /// as samples.
    pub fn step_with_ids<M, F>(
        &mut self,
        model: &M,
        forward: F,
        loss: OutputLoss,
        ids: impl Into<Vec<u64>>,
    ) -> Result<Stepped, CockpitError>
    where
        M: Module + Sync + 'static,
        F: StepForward<M>,
    {
        let ids = Some(ids.into());
        self.measured(|cockpit| cockpit.step_inner(model, forward, loss, ids))
    }

    /// A step's `work`, its reductions measured from the recording on ([`Cockpit::depth`]:
    /// the recorder's own come before `track`).
    fn measured<R>(&mut self, work: impl FnOnce(&mut Self) -> R) -> R {
        let (result, depth) = depth_of(|| work(self));
        self.depth = depth;
        result
    }

    fn step_inner<M, F>(
        &mut self,
        model: &M,
        forward: F,
        loss: OutputLoss,
        ids: Option<Vec<u64>>,
    ) -> Result<Stepped, CockpitError>
    where
        M: Module + Sync + 'static,
        F: StepForward<M>,
    {
        let step = self.next_step();
        let forward = Arc::new(forward);
        let recorder = self.needs_per_sample(step).then(Recorder::start);
        let output = forward.output(model);
        if output.dims() != loss.dims() {
            return Err(CockpitError::BatchMismatch {
                step,
                reason: format!(
                    "the network's output flattens to {:?} but the loss expects {:?} \
                     (examples, and positions × classes: a language model's [B, T, V] logits \
                     take OutputLoss::tokens with targets [B, T] and the vocabulary V)",
                    output.dims(),
                    loss.dims()
                ),
            });
        }
        let loss = loss.with_dtype(output.dtype());
        let records = self.records_examples(step);
        let margins = records
            .then(|| loss.margins(output.clone().detach()))
            .flatten();
        let worst = records
            .then(|| loss.worst_positions(output.clone().detach()))
            .flatten();
        let losses = loss.per_sample(output);
        let mean = losses.clone().mean();
        let grads = mean.backward();
        let recording = recorder.map(|r| r.finish(&grads));
        let grads = GradientsParams::from_grads(grads, model);
        let batch = losses.dims()[0];
        let mut info =
            StepInfo::new(mean.clone().detach()).with_individual_losses(losses.clone().detach());
        if let Some(ids) = ids {
            info = info.with_sample_ids(ids);
        }
        if let Some(margins) = margins {
            info = info.with_margins(margins);
        }
        if let Some((losses, positions)) = worst {
            info = info.with_worst_positions(losses, positions);
        }
        match recording {
            Some(Ok(recording)) if self.step_options.exact_fallback => {
                let (model, forward, loss) = (model.clone(), forward.clone(), loss.clone());
                let exact = ExactPerSample::new(batch, move |n| {
                    let own = loss
                        .per_sample(forward.output(&model))
                        .narrow(0, n, 1)
                        .sum();
                    Ok(GradientsParams::from_grads(own.backward(), &model))
                });
                info = info.with_per_sample(PerSample::auto(Some(recording), exact));
            }
            Some(Ok(recording)) => info = info.with_per_sample(recording),
            Some(Err(err)) => {
                self.print(format!(
                    "step {step}: the per-sample recording failed: {}",
                    cockpit_persample::ErrorChain(&err)
                ));
            }
            None => {}
        }
        if self.needs_curvature(step) {
            let replay = forward.clone();
            let mut curvature = RecordedCurvature::new(
                model,
                move |m: &M| replay.output(m),
                loss.clone(),
                step as u64,
            )
            .with_linearity_verdicts(self.linearity.clone())
            .declared_by("StepOptions::with_piecewise_linear(true)");
            if forward.widens() {
                let widened = forward.clone();
                curvature = curvature
                    .with_widened_output(move |m: &M, copies| widened.widened(m, copies))
                    .with_ggn_passes(self.step_options.ggn_passes);
            }
            if let Some(budget) = self.step_options.probe_budget {
                curvature = curvature.with_probe_budget(budget);
            }
            if let Some(columns) = self.step_options.exact_columns {
                curvature = curvature.with_exact_columns(columns);
            }
            if let Some(samples) = self.step_options.mc_samples {
                curvature = curvature.with_mc_samples(samples);
            }
            info = info.with_curvature(if self.step_options.piecewise_linear {
                curvature.piecewise_linear()
            } else {
                curvature
            });
        }
        let report = self.track(step, model, &grads, info)?;
        Ok(Stepped {
            grads,
            loss: mean.detach(),
            losses: losses.detach(),
            report,
        })
    }
}
