//! [`Instrumented`]: the user's model, watched by a Cockpit through burn-train's own hooks.

use std::any::Any;
use std::sync::Arc;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::lr_scheduler::module_lr_scheduler::ModuleLearningRate;
use burn::optim::{GradientsParams, ModuleOptimizer, MultiGradientsParams};
use burn::tensor::Tensor;
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use cockpit_quantities::curvature::CurvatureSource;
use cockpit_quantities::persample::{ExactPerSample, Recorder};

use super::tracker::Tracker;
use crate::step;
use crate::step::Pending;

/// Builds the step's curvature source from the model and a copy of its batch.
pub(crate) type Replay<M> =
    Arc<dyn Fn(&M, &<M as TrainStep>::Input) -> Box<dyn CurvatureSource> + Send + Sync>;

/// Takes copies of the model and the step's batch, and builds the single-sample passes once
/// the batch's size is known.
type Fallback<M> = Arc<
    dyn Fn(&M, &<M as TrainStep>::Input) -> Box<dyn FnOnce(usize) -> ExactPerSample + Send>
        + Send
        + Sync,
>;

/// The user's model with a Cockpit attached: a [`Module`] with the same parameters (and the
/// same record), whose [`TrainStep`] and [`InferenceStep`] delegate to the model's own, with
/// the same input and output types, so the user's `Adaptor` impls and metrics keep working.
///
/// - `step` starts the per-sample recorder when a quantity needs it, then runs the model's
///   step, whose [`train_output`](crate::train_output) call hands over the loss and the
///   per-sample layers' records;
/// - `optimize` tracks the step on θ_t and the gradient the optimizer applies, then runs the
///   optimizer.
///
/// Made by [`CockpitLearner::instrument`](crate::CockpitLearner::instrument); [`Instrumented::into_inner`] gives the model back.
#[derive(Module, Debug)]
pub struct Instrumented<M: Module> {
    inner: M,
    #[module(skip)]
    watch: Watch,
}

/// The non-module part of [`Instrumented`]: the Cockpit's handle and, type-erased (a module's
/// skipped field cannot name the module's generic), the curvature replay.
#[derive(Clone)]
pub struct Watch {
    tracker: Tracker,
    replay: Option<Arc<dyn Any + Send + Sync>>,
    fallback: Option<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cockpit")
            .field("quantities", &self.tracker.kinds())
            .field("curvature", &self.replay.is_some())
            .field("exact_fallback", &self.fallback.is_some())
            .finish()
    }
}

impl<M: Module + TrainStep + 'static> Instrumented<M> {
    pub(crate) fn new(inner: M, tracker: Tracker, replay: Option<Replay<M>>) -> Self {
        Self {
            inner,
            watch: Watch {
                tracker,
                replay: replay.map(|r| Arc::new(r) as Arc<dyn Any + Send + Sync>),
                fallback: None,
            },
        }
    }

    /// Lets the per-sample quantities fall back to single-sample backward passes where the
    /// drop-ins do not cover the model (plain burn-nn layers, a custom layer):
    /// `losses(model, item)` runs the step's forward pass on its batch and returns each
    /// example's loss `[B]` (e.g. `persample::loss::cross_entropy(output, targets)`; dropout
    /// off or the same masks). Without it such a model's per-sample quantities fail, with the
    /// coverage report printed once. Not under DDP.
    ///
    /// # Cost
    ///
    /// Where the fallback runs: `B` extra forward and backward passes of the whole batch per
    /// tracked step (each keeps one example's loss), said once on stderr and in burn's
    /// dashboard. Nothing where the drop-ins cover the model.
    pub fn with_exact_fallback(
        mut self,
        losses: impl Fn(&M, &M::Input) -> Tensor<1> + Send + Sync + 'static,
    ) -> Self
    where
        M: Sync,
        M::Input: Clone + Send + Sync + 'static,
    {
        let losses = Arc::new(losses);
        let fallback: Fallback<M> = Arc::new(move |model: &M, item: &M::Input| {
            let (model, item, losses) = (model.clone(), item.clone(), losses.clone());
            Box::new(move |batch: usize| {
                ExactPerSample::new(batch, move |n| {
                    let own = losses(&model, &item).narrow(0, n, 1).sum();
                    Ok(GradientsParams::from_grads(own.backward(), &model))
                })
            })
        });
        self.watch.fallback = Some(Arc::new(fallback) as Arc<dyn Any + Send + Sync>);
        self
    }

    fn fallback(&self) -> Option<&Fallback<M>> {
        self.watch.fallback.as_ref()?.downcast_ref::<Fallback<M>>()
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, for inference or saving after training.
    pub fn into_inner(self) -> M {
        self.inner
    }

    fn replay(&self) -> Option<&Replay<M>> {
        self.watch.replay.as_ref()?.downcast_ref::<Replay<M>>()
    }
}

impl<M> TrainStep for Instrumented<M>
where
    M: Module + TrainStep + 'static,
{
    type Input = M::Input;
    type Output = M::Output;

    fn step(&self, item: Self::Input) -> TrainOutput<Self::Output> {
        let tracker = &self.watch.tracker;
        let recorder = tracker.wants_per_sample().then(Recorder::start);
        let curvature = match self.replay() {
            Some(replay) if tracker.wants_curvature() => Some(replay(&self.inner, &item)),
            _ => None,
        };
        // A copy of the batch for single-sample passes, only where they may be needed.
        let fallback = self
            .fallback()
            .filter(|_| tracker.wants_per_sample())
            .map(|prepare| prepare(&self.inner, &item));
        step::begin(recorder);
        let output = self.inner.step(item);
        let capture = step::end();
        let fallback = fallback.and_then(|build| {
            let batch = capture.losses.as_ref().map(|l| l.dims()[0])?;
            Some(build(batch))
        });
        tracker.push_step(Pending {
            capture,
            curvature,
            fallback,
        });
        output
    }

    fn optimize(
        self,
        optim: &mut ModuleOptimizer,
        lr: ModuleLearningRate,
        grads: GradientsParams,
    ) -> Self {
        self.watch.tracker.track(&self.inner, &grads, lr.base());
        let Self { inner, watch } = self;
        Self {
            inner: inner.optimize(optim, lr, grads),
            watch,
        }
    }

    fn optimize_multi(
        self,
        optim: &mut ModuleOptimizer,
        lr: ModuleLearningRate,
        grads: MultiGradientsParams,
    ) -> Self {
        let summed = sum_gradients(&self.inner, &grads);
        self.watch.tracker.track(&self.inner, &summed, lr.base());
        let Self { inner, watch } = self;
        Self {
            inner: inner.optimize_multi(optim, lr, grads),
            watch,
        }
    }
}

impl<M> InferenceStep for Instrumented<M>
where
    M: Module + InferenceStep,
{
    type Input = M::Input;
    type Output = M::Output;

    fn step(&self, item: Self::Input) -> Self::Output {
        self.inner.step(item)
    }
}

/// The gradient a multi-device optimizer step applies: per parameter, the sum of every
/// device's gradient, on the parameter's device.
pub(crate) fn sum_gradients<M: Module>(model: &M, grads: &MultiGradientsParams) -> GradientsParams {
    struct Sum<'a> {
        grads: &'a MultiGradientsParams,
        out: GradientsParams,
    }
    impl ModuleVisitor for Sum<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let device = param.val().device();
            let total = self
                .grads
                .grads
                .iter()
                .filter_map(|(g, _)| g.get::<D>(param.id))
                .map(|g| g.to_device(&device))
                .reduce(|a, b| a + b);
            if let Some(total) = total {
                self.out.register(param.id, total);
            }
        }
    }
    let mut sum = Sum {
        grads,
        out: GradientsParams::new(),
    };
    model.visit(&mut sum);
    sum.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;
    use burn::tensor::{Device, TensorData};

    #[test]
    fn multi_device_gradients_are_summed_per_parameter() {
        let device = Device::flex();
        let linear = LinearConfig::new(2, 1).init(&device);
        let bias = linear.bias.as_ref().map(|b| b.id);
        let grads_on = |w: [f32; 2], b: f32| {
            let mut g = GradientsParams::new();
            g.register(
                linear.weight.id,
                Tensor::<2>::from_data(TensorData::new(w.to_vec(), [2, 1]), &device),
            );
            if let Some(id) = bias {
                g.register(
                    id,
                    Tensor::<1>::from_data(TensorData::new(vec![b], [1]), &device),
                );
            }
            (g, device.clone())
        };
        let multi = MultiGradientsParams {
            grads: vec![grads_on([1.0, 2.0], 0.5), grads_on([10.0, 20.0], -2.0)],
        };
        let summed = sum_gradients(&linear, &multi);
        let w = summed
            .get::<2>(linear.weight.id)
            .map(|t| t.into_data().try_to_vec::<f32>());
        assert_eq!(w.and_then(Result::ok), Some(vec![11.0, 22.0]));
        let b = bias
            .and_then(|id| summed.get::<1>(id))
            .map(|t| t.into_data().try_to_vec::<f32>());
        assert_eq!(b.and_then(Result::ok), Some(vec![-1.5]));
    }
}
