//! The one line a `TrainStep` changes: [`train_output`] instead of `TrainOutput::new`.
//!
//! burn turns the backward pass's `Gradients` into `GradientsParams` inside
//! `TrainOutput::new`, dropping the gradients of the zero-valued leaves the per-sample layers
//! add. [`train_output`] runs the backward pass itself, hands those leaves (and the loss) to
//! the [`Instrumented`](crate::Instrumented) model that called the step, then builds the same
//! `TrainOutput`.

use std::cell::RefCell;

use burn::module::Module;
use burn::tensor::{Int, Tensor};
use burn::train::TrainOutput;
use cockpit_quantities::curvature::{CurvatureSource, NetworkOutput, OutputLoss};
use std::sync::Arc;

use cockpit_quantities::persample::{
    ExactPerSample, PerSample, PerSampleError, PerSampleSource, Recorder, Recording,
};

/// The thread-local capture of one call of the user's `TrainStep::step`.
#[derive(Debug, Default)]
struct StepCapture {
    /// The recorder the wrapper started for this step, until `train_output` finishes it.
    recorder: Option<Recorder>,
    captured: Captured,
}

/// What one call of the user's `TrainStep::step` left for the wrapper.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    /// Whether `train_output` ran.
    pub(crate) seen: bool,
    /// The mean mini-batch loss (detached).
    pub(crate) loss: Option<Tensor<1>>,
    /// The per-sample losses `[B]` (detached), when given.
    pub(crate) losses: Option<Tensor<1>>,
    /// The per-sample factors of the instrumented layers.
    pub(crate) factors: Option<Result<Recording, PerSampleError>>,
    /// The batch's example ids, when given ([`train_output_with_ids`]).
    pub(crate) ids: Option<Vec<u64>>,
    /// The examples' margins `[B]` (detached), when given ([`train_output_with_margins`]).
    pub(crate) margins: Option<Tensor<1>>,
    /// The examples' worst positions (losses and indices, detached), when given
    /// ([`train_output_with_loss`] on per-position losses).
    pub(crate) worst: Option<(Tensor<1>, Tensor<1, Int>)>,
}

thread_local! {
    static CAPTURE: RefCell<Option<StepCapture>> = const { RefCell::new(None) };
}

/// Opens a capture on this thread (the wrapper, before delegating the step).
pub(crate) fn begin(recorder: Option<Recorder>) {
    CAPTURE.with(|c| {
        *c.borrow_mut() = Some(StepCapture {
            recorder,
            ..StepCapture::default()
        })
    });
}

/// Closes the capture and returns what the step left (the recorder, if never finished, is
/// dropped here, which stops recording).
pub(crate) fn end() -> Captured {
    CAPTURE
        .with(|c| c.borrow_mut().take())
        .map(|capture| capture.captured)
        .unwrap_or_default()
}

/// Builds the step's [`TrainOutput`] from its mean mini-batch `loss` (shape `[1]`): runs the
/// backward pass and lets an [`Instrumented`](crate::Instrumented) model see the loss and the
/// per-sample layers' records. Outside an instrumented step it is exactly
/// `TrainOutput::new(model, loss.backward(), item)`.
///
/// ```ignore
/// fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
///     let item = self.forward_classification(batch);
///     cockpit_train::train_output(self, item.loss.clone(), item) // was: TrainOutput::new(self, item.loss.backward(), item)
/// }
/// ```
pub fn train_output<M: Module, T>(model: &M, loss: Tensor<1>, item: T) -> TrainOutput<T> {
    capture(model, loss, None, item)
}

/// Like [`train_output`], from the per-sample losses `[B]` (the loss is their mean). Alpha,
/// which fits a parabola with the losses' variance, needs this form.
pub fn train_output_per_sample<M: Module, T>(
    model: &M,
    losses: Tensor<1>,
    item: T,
) -> TrainOutput<T> {
    let loss = losses.clone().mean();
    capture(model, loss, Some(losses), item)
}

/// Like [`train_output_per_sample`], with the batch's example ids (dataset indices, one per
/// sample in the batch's order): the [`Examples`](cockpit_quantities::quantity::Examples)
/// quantity keeps its per-example record under them. With gradient accumulation and on
/// several devices each micro-batch's ids are joined like its statistics.
///
/// ```ignore
/// fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
///     let (item, losses) = self.forward_with_losses(batch.images, batch.targets);
///     cockpit_train::train_output_with_ids(self, losses, batch.indices.clone(), item)
/// }
/// ```
pub fn train_output_with_ids<M: Module, T>(
    model: &M,
    losses: Tensor<1>,
    ids: impl Into<Vec<u64>>,
    item: T,
) -> TrainOutput<T> {
    let loss = losses.clone().mean();
    let ids = ids.into();
    with_examples(Some(ids), None, None);
    capture(model, loss, Some(losses), item)
}

/// Like [`train_output_with_ids`], with each example's classification margin `[B]` (the
/// labelled class's logit minus the largest other one;
/// [`OutputLoss::margins`](cockpit_quantities::curvature::OutputLoss::margins) computes it
/// from the logits), which the record uses to tell learned examples from unlearned ones.
pub fn train_output_with_margins<M: Module, T>(
    model: &M,
    losses: Tensor<1>,
    ids: impl Into<Vec<u64>>,
    margins: Tensor<1>,
    item: T,
) -> TrainOutput<T> {
    let loss = losses.clone().mean();
    with_examples(Some(ids.into()), Some(margins.detach()), None);
    capture(model, loss, Some(losses), item)
}

/// Like [`train_output_with_margins`], from the network's `output` and its [`OutputLoss`]:
/// the per-sample losses ([`OutputLoss::per_sample`]; the step's loss is their mean), the
/// margins ([`OutputLoss::margins`]) and, for per-position losses (a language model's tokens
/// `[B, T, V]`, a segmenter's pixels `[B, C, H, W]`), each example's worst position
/// ([`OutputLoss::worst_positions`]), which the Examples record keeps beside its mean loss.
/// The mean of the per-sample losses is the loss burn users write for these outputs (each
/// sequence's mean over its counted tokens, then the batch mean; see [`OutputLoss::tokens`]).
///
/// ```ignore
/// fn step(&self, batch: TextBatch) -> TrainOutput<ClassificationOutput> {
///     let logits = self.forward(batch.inputs);                 // [B, T, V]
///     let loss = OutputLoss::tokens_with_padding(batch.targets.clone(), VOCABULARY, PAD);
///     let item = /* burn's output item, from logits and targets flattened */;
///     cockpit_train::train_output_with_loss(self, &loss, logits, batch.ids.clone(), item)
/// }
/// ```
pub fn train_output_with_loss<M: Module, T, O: NetworkOutput>(
    model: &M,
    loss: &OutputLoss,
    output: O,
    ids: impl Into<Vec<u64>>,
    item: T,
) -> TrainOutput<T> {
    let output = output.into_rows();
    // The margins and worst positions on the detached output, and only for an open capture.
    if is_capturing() {
        let detached = output.clone().detach();
        let margins = loss.margins(detached.clone());
        let worst = loss.worst_positions(detached);
        with_examples(Some(ids.into()), margins, worst);
    }
    let losses = loss.per_sample(output);
    let mean = losses.clone().mean();
    capture(model, mean, Some(losses), item)
}

/// Keeps the step's ids, margins and worst positions in the open capture (outside an
/// instrumented step: nothing).
fn with_examples(
    ids: Option<Vec<u64>>,
    margins: Option<Tensor<1>>,
    worst: Option<(Tensor<1>, Tensor<1, Int>)>,
) {
    CAPTURE.with(|c| {
        if let Some(capture) = c.borrow_mut().as_mut() {
            capture.captured.ids = ids;
            capture.captured.margins = margins;
            capture.captured.worst = worst;
        }
    });
}

/// Whether an instrumented step's capture is open on this thread.
fn is_capturing() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

fn capture<M: Module, T>(
    model: &M,
    loss: Tensor<1>,
    losses: Option<Tensor<1>>,
    item: T,
) -> TrainOutput<T> {
    let grads = loss.backward();
    CAPTURE.with(|c| {
        if let Some(capture) = c.borrow_mut().as_mut() {
            let factors = capture.recorder.take().map(|r| r.finish(&grads));
            let captured = &mut capture.captured;
            captured.seen = true;
            captured.loss = Some(loss.detach());
            captured.losses = losses.map(Tensor::detach);
            captured.factors = factors;
        }
    });
    TrainOutput::new(model, grads, item)
}

/// What one step's `TrainStep::step` left, until the optimizer step consumes it.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) capture: Captured,
    pub(crate) curvature: Option<Box<dyn CurvatureSource>>,
    /// Single-sample passes over the step's batch, where the user allowed them
    /// ([`Instrumented::with_exact_fallback`](crate::Instrumented::with_exact_fallback)).
    pub(crate) fallback: Option<ExactPerSample>,
}

impl Pending {
    /// The step's per-sample source: the recording, or — where it does not cover the model and
    /// a fallback was allowed — single-sample passes ([`PerSample::auto`]).
    pub(crate) fn per_sample(
        factors: Recording,
        fallback: Option<ExactPerSample>,
    ) -> Arc<dyn PerSampleSource> {
        match fallback {
            Some(exact) => Arc::new(PerSample::auto(Some(factors), exact)),
            None => Arc::new(factors),
        }
    }
}
