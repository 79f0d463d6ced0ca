//! What the training loop tells the Cockpit about a step, beyond the model and the gradients.

use std::sync::Arc;

use burn::tensor::{Int, Tensor};

use crate::curvature::CurvatureSource;
use crate::persample::PerSampleSource;

/// The optimizer that takes the step, as far as the quantities need to know it.
///
/// Cockpit reads the optimizer from `info["optimizer"]`. Build it from burn's own optimizer
/// config so that nothing is said twice: [`OptimizerInfo::from_sgd`],
/// [`OptimizerInfo::from_adam`], [`OptimizerInfo::from_adamw`] (the learning rate is the one
/// handed to `optimizer.step`; the Learner adapter updates it from burn's scheduler).
///
/// What each optimizer gets:
///
/// | optimizer | Alpha | CABS, EarlyStopping | the rest |
/// |---|---|---|---|
/// | plain SGD | cheap path: the update is `−lr·g`, known at step t | computed | computed |
/// | SGD with momentum, dampening, weight decay or Nesterov | from the update actually taken, `θ_{t+1} − θ_t`, read at t+1 (Cockpit's general path) | refused with a typed error (Cockpit raises `ValueError`) | computed |
/// | Adam, AdamW, any other | as for momentum SGD | refused, as Cockpit does | computed |
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OptimizerInfo {
    /// SGD with PyTorch's semantics: `buf = momentum·buf + (1 − dampening)·g`,
    /// `θ ← θ − lr·buf` (or `g + momentum·buf` with Nesterov).
    Sgd {
        /// Learning rate.
        lr: f64,
        /// Momentum factor.
        momentum: f64,
        /// Dampening for momentum.
        dampening: f64,
        /// L2 penalty added to the gradient.
        weight_decay: f64,
        /// Nesterov momentum.
        nesterov: bool,
    },
    /// Adam (`decoupled_weight_decay: false`, burn's `AdamConfig`, L2 penalty added to the
    /// gradient) or AdamW (`true`, burn's `AdamWConfig`, decay applied to the parameters).
    Adam {
        /// Learning rate.
        lr: f64,
        /// Decay of the first moment.
        beta_1: f64,
        /// Decay of the second moment.
        beta_2: f64,
        /// Added to the square root of the second moment.
        epsilon: f64,
        /// The weight-decay factor (0 for none).
        weight_decay: f64,
        /// AdamW's decoupled decay rather than Adam's L2 penalty.
        decoupled_weight_decay: bool,
    },
    /// Any other optimizer, by name (RMSProp, Lion, …).
    Other {
        /// A display name such as `"Adam"`.
        name: String,
        /// The learning rate, if there is a single one.
        lr: Option<f64>,
    },
}

impl OptimizerInfo {
    /// Plain SGD (no momentum, no dampening, no weight decay).
    pub fn sgd(lr: f64) -> Self {
        Self::Sgd {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }

    /// SGD with momentum (PyTorch semantics, no dampening).
    pub fn sgd_momentum(lr: f64, momentum: f64) -> Self {
        Self::Sgd {
            lr,
            momentum,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }

    /// Adam with burn's defaults (`AdamConfig::new()`: β₁ 0.9, β₂ 0.999, ε 1e-5, no decay).
    pub fn adam(lr: f64) -> Self {
        Self::Adam {
            lr,
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-5,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
        }
    }

    /// The SGD that `config` builds (momentum, dampening, Nesterov and weight decay read from
    /// it), stepping with learning rate `lr`.
    pub fn from_sgd(config: &burn::optim::SgdConfig, lr: f64) -> Self {
        let fields = config_fields(config);
        let momentum = &fields["momentum"];
        Self::Sgd {
            lr,
            momentum: number(&momentum["momentum"], 0.0),
            dampening: number(&momentum["dampening"], 0.0),
            weight_decay: number32(&fields["weight_decay"]["penalty"], 0.0),
            nesterov: momentum["nesterov"].as_bool().unwrap_or(false),
        }
    }

    /// The Adam that `config` builds, stepping with learning rate `lr`.
    pub fn from_adam(config: &burn::optim::AdamConfig, lr: f64) -> Self {
        let fields = config_fields(config);
        let weight_decay = number32(&fields["weight_decay"]["penalty"], 0.0);
        Self::adam_from_fields(&fields, lr, weight_decay, false)
    }

    /// The AdamW that `config` builds, stepping with learning rate `lr`.
    pub fn from_adamw(config: &burn::optim::AdamWConfig, lr: f64) -> Self {
        let fields = config_fields(config);
        let weight_decay = number32(&fields["weight_decay"], 1e-4);
        Self::adam_from_fields(&fields, lr, weight_decay, true)
    }

    /// Adam's moments and ε from burn's config fields (the same in `AdamConfig` and
    /// `AdamWConfig`; burn's defaults where absent).
    fn adam_from_fields(
        fields: &serde_json::Value,
        lr: f64,
        weight_decay: f64,
        decoupled_weight_decay: bool,
    ) -> Self {
        Self::Adam {
            lr,
            beta_1: number32(&fields["beta_1"], 0.9),
            beta_2: number32(&fields["beta_2"], 0.999),
            epsilon: number32(&fields["epsilon"], 1e-5),
            weight_decay,
            decoupled_weight_decay,
        }
    }

    /// The optimizer's display name, as in Cockpit's plot title ("Cockpit for SGD").
    pub fn name(&self) -> &str {
        match self {
            Self::Sgd { .. } => "SGD",
            Self::Adam {
                decoupled_weight_decay: false,
                ..
            } => "Adam",
            Self::Adam { .. } => "AdamW",
            Self::Other { name, .. } => name,
        }
    }

    /// The learning rate, when there is one.
    pub fn lr(&self) -> Option<f64> {
        match self {
            Self::Sgd { lr, .. } | Self::Adam { lr, .. } => Some(*lr),
            Self::Other { lr, .. } => *lr,
        }
    }

    /// The same optimizer with the learning rate `lr` (e.g. a scheduler's value at this step).
    pub fn with_lr(&self, lr: f64) -> Self {
        match self.clone() {
            Self::Sgd {
                momentum,
                dampening,
                weight_decay,
                nesterov,
                ..
            } => Self::Sgd {
                lr,
                momentum,
                dampening,
                weight_decay,
                nesterov,
            },
            Self::Adam {
                beta_1,
                beta_2,
                epsilon,
                weight_decay,
                decoupled_weight_decay,
                ..
            } => Self::Adam {
                lr,
                beta_1,
                beta_2,
                epsilon,
                weight_decay,
                decoupled_weight_decay,
            },
            Self::Other { name, .. } => Self::Other { name, lr: Some(lr) },
        }
    }

    /// The step taken with `lr` on the sum of `k` mean gradients (gradient accumulation, or a
    /// data-parallel all-reduce that sums), seen as one step on the union of their batches,
    /// whose mean gradient is their sum over `k`: for SGD, learning rate `k·lr`.
    pub fn on_union(&self, lr: f64, k: usize) -> Self {
        match self.with_lr(lr) {
            Self::Sgd {
                lr,
                momentum,
                dampening,
                weight_decay,
                nesterov,
            } => Self::Sgd {
                lr: lr * k as f64,
                momentum,
                dampening,
                weight_decay,
                nesterov,
            },
            other => other,
        }
    }

    /// Whether this is SGD with default settings (zero momentum, dampening, weight decay and
    /// no Nesterov): the only optimizer for which Cockpit runs CABS and EarlyStopping, and
    /// Alpha's fast path.
    pub fn is_plain_sgd(&self) -> bool {
        matches!(
            self,
            Self::Sgd { momentum, dampening, weight_decay, nesterov: false, .. }
                if *momentum == 0.0 && *dampening == 0.0 && *weight_decay == 0.0
        )
    }
}

/// A burn optimizer config's fields as JSON (burn's configs are serde values whose fields are
/// private); `Null` if it cannot be serialised.
fn config_fields(config: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(config).unwrap_or(serde_json::Value::Null)
}

/// A JSON number, or `default` where it is absent (`null`: an option left unset).
fn number(value: &serde_json::Value, default: f64) -> f64 {
    value.as_f64().unwrap_or(default)
}

/// A float32 setting as the decimal it was written as (`0.999`, not `0.9990000128746033`), or
/// `default` where it is absent.
fn number32(value: &serde_json::Value, default: f64) -> f64 {
    value
        .as_f64()
        .and_then(|v| (v as f32).to_string().parse().ok())
        .unwrap_or(default)
}

/// Cockpit's `info` dictionary for one step.
///
/// `loss` is always needed. `batch_size`, `individual_losses` and `optimizer` are needed by some
/// quantities (Alpha, CABS, EarlyStopping, MeanGSNR, TIC); a quantity that lacks one reports
/// a [`QuantityError::MissingInfo`](crate::QuantityError::MissingInfo).
#[derive(Debug, Clone)]
pub struct StepInfo {
    pub(crate) loss: Tensor<1>,
    pub(crate) batch_size: Option<usize>,
    pub(crate) individual_losses: Option<Tensor<1>>,
    pub(crate) optimizer: Option<OptimizerInfo>,
    pub(crate) per_sample: Option<Arc<dyn PerSampleSource>>,
    pub(crate) curvature: Option<Arc<dyn CurvatureSource>>,
    pub(crate) sample_ids: Option<Arc<[u64]>>,
    pub(crate) margins: Option<Tensor<1>>,
    pub(crate) worst_positions: Option<(Tensor<1>, Tensor<1, Int>)>,
}

impl StepInfo {
    /// The step's mean mini-batch loss (a one-element tensor, as burn's losses return).
    pub fn new(loss: Tensor<1>) -> Self {
        Self {
            loss,
            batch_size: None,
            individual_losses: None,
            optimizer: None,
            per_sample: None,
            curvature: None,
            sample_ids: None,
            margins: None,
            worst_positions: None,
        }
    }

    /// The mini-batch size `B`.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = Some(batch_size);
        self
    }

    /// The per-sample losses `ℓ_n`, `[B]` (mean reduction: `loss = mean(ℓ_n)`).
    pub fn with_individual_losses(mut self, losses: Tensor<1>) -> Self {
        self.batch_size.get_or_insert(losses.dims()[0]);
        self.individual_losses = Some(losses);
        self
    }

    /// Whose examples the batch holds: one id per sample, in the batch's order (dataset
    /// indices, or any `u64` below 2⁶³ that names an example across the run). The
    /// [`Examples`](crate::quantity::Examples) quantity keeps its per-example record under
    /// these ids; without them it reports the batch's positions and keeps no record. The ids
    /// are host numbers: they add nothing to the step's read.
    pub fn with_sample_ids(mut self, ids: impl Into<Vec<u64>>) -> Self {
        let ids: Vec<u64> = ids.into();
        self.batch_size.get_or_insert(ids.len());
        self.sample_ids = Some(ids.into());
        self
    }

    /// Each example's classification margin, `[B]`: the logit of its labelled class minus the
    /// largest other logit (Pleiss et al.'s *area under the margin* averages it over training;
    /// negative while the network prefers another class). Optional: the
    /// [`Examples`](crate::quantity::Examples) record uses it, where given, to tell learned
    /// examples (margin > 0) from unlearned ones. [`Cockpit::step`](crate::Cockpit::step)
    /// hands it in for cross-entropy losses itself ([`OutputLoss::margins`](crate::curvature::OutputLoss::margins)).
    pub fn with_margins(mut self, margins: Tensor<1>) -> Self {
        self.batch_size.get_or_insert(margins.dims()[0]);
        self.margins = Some(margins);
        self
    }

    /// Each example's worst position, for outputs with many positions per example (a
    /// sequence's tokens, an image's pixels): the loss of its worst counted position `[B]`
    /// and that position's index `[B]` (negative loss: the example counts no position). The
    /// [`Examples`](crate::quantity::Examples) record keeps them beside each example's mean
    /// loss; [`Cockpit::step`](crate::Cockpit::step) hands them in for per-position losses
    /// itself ([`OutputLoss::worst_positions`](crate::curvature::OutputLoss::worst_positions)).
    pub fn with_worst_positions(mut self, losses: Tensor<1>, positions: Tensor<1, Int>) -> Self {
        self.batch_size.get_or_insert(losses.dims()[0]);
        self.worst_positions = Some((losses, positions));
        self
    }

    /// The worst positions, if given ([`StepInfo::with_worst_positions`]).
    pub fn worst_positions(&self) -> Option<&(Tensor<1>, Tensor<1, Int>)> {
        self.worst_positions.as_ref()
    }

    /// The sample ids, if given ([`StepInfo::with_sample_ids`]).
    pub fn sample_ids(&self) -> Option<&[u64]> {
        self.sample_ids.as_deref()
    }

    /// The margins, if given ([`StepInfo::with_margins`]).
    pub fn margins(&self) -> Option<&Tensor<1>> {
        self.margins.as_ref()
    }

    /// The optimizer that will take this step.
    pub fn with_optimizer(mut self, optimizer: OptimizerInfo) -> Self {
        self.optimizer = Some(optimizer);
        self
    }

    /// The step's per-sample gradients (BackPACK's role): a
    /// [`Recording`](crate::persample::Recording) from a
    /// [`Recorder`](crate::persample::Recorder), an
    /// [`ExactPerSample`](crate::persample::ExactPerSample), or a
    /// [`PerSample::auto`](crate::persample::PerSample::auto) of both. Needed by GradHist1d/2d,
    /// the gradient tests, Alpha, CABS, EarlyStopping, MeanGSNR and TIC.
    pub fn with_per_sample(mut self, source: impl PerSampleSource + 'static) -> Self {
        if self.batch_size.is_none() && source.batch_size() > 0 {
            self.batch_size = Some(source.batch_size());
        }
        self.per_sample = Some(Arc::new(source));
        self
    }

    /// The step's curvature (Hessian-vector products, curvature diagonals): a
    /// [`FiniteDifferenceHvp`](crate::curvature::FiniteDifferenceHvp) for any model, or an
    /// [`MlpCurvature`](crate::curvature::MlpCurvature) with exact diagonals. Needed by
    /// HessMaxEV, HessTrace, TICDiag and TICTrace.
    pub fn with_curvature(mut self, source: impl CurvatureSource + 'static) -> Self {
        self.curvature = Some(Arc::new(source));
        self
    }

    /// The curvature source, if given.
    pub fn curvature(&self) -> Option<&Arc<dyn CurvatureSource>> {
        self.curvature.as_ref()
    }

    /// The per-sample gradients, if given.
    pub fn per_sample(&self) -> Option<&Arc<dyn PerSampleSource>> {
        self.per_sample.as_ref()
    }

    /// The loss tensor.
    pub fn loss(&self) -> &Tensor<1> {
        &self.loss
    }

    /// The batch size, if given.
    pub fn batch_size(&self) -> Option<usize> {
        self.batch_size
    }

    /// The per-sample losses, if given.
    pub fn individual_losses(&self) -> Option<&Tensor<1>> {
        self.individual_losses.as_ref()
    }

    /// The optimizer, if given.
    pub fn optimizer(&self) -> Option<&OptimizerInfo> {
        self.optimizer.as_ref()
    }

    /// Checks that the batch sizes the info states agree: the given batch size, the number
    /// of per-sample losses and the per-sample source's batch, and that none is 0. `Err`
    /// says what disagrees.
    pub(crate) fn check_batch(&self) -> Result<(), String> {
        let mut sizes: Vec<(&str, usize)> = Vec::new();
        if let Some(b) = self.batch_size {
            sizes.push(("the batch size", b));
        }
        if let Some(losses) = &self.individual_losses {
            let dims = losses.dims();
            sizes.push(("the per-sample losses", dims[0]));
        }
        if let Some(ids) = &self.sample_ids {
            sizes.push(("the sample ids", ids.len()));
        }
        if let Some(margins) = &self.margins {
            sizes.push(("the margins", margins.dims()[0]));
        }
        if let Some((losses, positions)) = &self.worst_positions {
            sizes.push(("the worst positions' losses", losses.dims()[0]));
            sizes.push(("the worst positions", positions.dims()[0]));
        }
        // A source that recorded nothing reports 0 samples; its own error (a coverage
        // report) says more than a batch mismatch would.
        if let Some(source) = self.per_sample.as_ref().filter(|s| s.batch_size() > 0) {
            sizes.push(("the per-sample gradients", source.batch_size()));
        }
        if let Some((what, _)) = sizes.iter().find(|(_, b)| *b == 0) {
            return Err(format!("{what} hold no sample"));
        }
        let Some(&(first, b)) = sizes.first() else {
            return Ok(());
        };
        match sizes.iter().find(|(_, other)| *other != b) {
            Some((what, other)) => Err(format!(
                "{first} is {b} but {what} have {other} samples; hand in the losses of the \
                 batch the gradients were computed on, one per sample"
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_rate_and_union_rules() {
        let sgd = OptimizerInfo::sgd_momentum(0.1, 0.9);
        assert_eq!(sgd.with_lr(0.05).lr(), Some(0.05));
        assert_eq!(sgd.on_union(0.05, 4).lr(), Some(0.2));
        assert!(!sgd.on_union(0.05, 4).is_plain_sgd(), "momentum kept");
        let adam = OptimizerInfo::Other {
            name: "Adam".into(),
            lr: None,
        };
        assert_eq!(
            adam.on_union(1e-3, 4).lr(),
            Some(1e-3),
            "only SGD's step scales"
        );
        assert_eq!(adam.with_lr(1e-3).name(), "Adam");
    }

    #[test]
    fn optimizers_are_read_from_burns_configs() {
        use burn::optim::decay::WeightDecayConfig;
        use burn::optim::momentum::MomentumConfig;
        use burn::optim::{AdamConfig, AdamWConfig, SgdConfig};
        let plain = OptimizerInfo::from_sgd(&SgdConfig::new(), 0.1);
        assert_eq!(plain, OptimizerInfo::sgd(0.1));
        assert!(plain.is_plain_sgd());
        let momentum = SgdConfig::new()
            .with_momentum(Some(MomentumConfig {
                momentum: 0.9,
                dampening: 0.1,
                nesterov: true,
            }))
            .with_weight_decay(Some(WeightDecayConfig { penalty: 0.5 }));
        let OptimizerInfo::Sgd {
            momentum,
            dampening,
            weight_decay,
            nesterov,
            ..
        } = OptimizerInfo::from_sgd(&momentum, 0.1)
        else {
            panic!("SGD expected");
        };
        assert_eq!(
            (momentum, dampening, weight_decay, nesterov),
            (0.9, 0.1, 0.5, true)
        );
        let adam = OptimizerInfo::from_adam(&AdamConfig::new().with_beta_1(0.8), 1e-3);
        assert_eq!(adam.name(), "Adam");
        assert_eq!(adam.lr(), Some(1e-3));
        assert!(!adam.is_plain_sgd());
        let OptimizerInfo::Adam { beta_1, .. } = adam else {
            panic!("Adam expected");
        };
        assert!((beta_1 - 0.8).abs() < 1e-7);
        let adamw = OptimizerInfo::from_adamw(&AdamWConfig::new().with_weight_decay(0.01), 2e-3);
        assert_eq!(adamw.name(), "AdamW");
        let OptimizerInfo::Adam {
            weight_decay,
            decoupled_weight_decay,
            ..
        } = adamw.with_lr(1e-2)
        else {
            panic!("AdamW expected");
        };
        assert!((weight_decay - 0.01).abs() < 1e-7 && decoupled_weight_decay);
        assert_eq!(
            OptimizerInfo::adam(1e-3),
            OptimizerInfo::from_adam(&AdamConfig::new(), 1e-3)
        );
    }
}
