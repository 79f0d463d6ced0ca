//! The [`CurvatureSource`] trait: Hessian-vector products and curvature diagonals of the
//! step's mean mini-batch loss.

use std::fmt::Debug;

use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Int, Tensor, TensorCreationOptions, TensorData};

use super::positions::{ClassAxis, PositionLoss};
use super::random::SplitMix;
use crate::{QuantityError, Snapshot};

/// Which diagonal curvature HessTrace and TIC use (Cockpit's `curvature` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
pub enum DiagonalKind {
    /// The exact Hessian diagonal (`diag_h`, Cockpit's default), including the terms curved
    /// activations add.
    #[default]
    #[serde(rename = "diag_h")]
    Hessian,
    /// The exact diagonal of the generalised Gauss–Newton matrix (`diag_ggn_exact`).
    #[serde(rename = "diag_ggn_exact")]
    GgnExact,
    /// A one-sample Monte-Carlo estimate of the GGN diagonal (`diag_ggn_mc`).
    #[serde(rename = "diag_ggn_mc")]
    GgnMc,
}

impl DiagonalKind {
    /// Cockpit's name: `diag_h`, `diag_ggn_exact`, `diag_ggn_mc`.
    pub fn cockpit_name(self) -> &'static str {
        match self {
            Self::Hessian => "diag_h",
            Self::GgnExact => "diag_ggn_exact",
            Self::GgnMc => "diag_ggn_mc",
        }
    }
}

impl std::str::FromStr for DiagonalKind {
    type Err = crate::CockpitError;

    /// Reads Cockpit's name (`diag_h`, `diag_ggn_exact`, `diag_ggn_mc`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Hessian, Self::GgnExact, Self::GgnMc]
            .into_iter()
            .find(|k| k.cockpit_name() == s)
            .ok_or_else(|| crate::CockpitError::Unknown {
                what: "curvature",
                name: crate::error::excerpt(s),
                expected: "diag_h, diag_ggn_exact, diag_ggn_mc".into(),
            })
    }
}

/// A network's output as the Cockpit takes it: any `[B, …]` tensor, flattened to `[B, K]`
/// row-major (`K` the product of the other axes). Implemented for every rank, so
/// [`Cockpit::step`](crate::Cockpit::step) takes classifiers' `[B, C]`, language models'
/// `[B, T, V]` and segmenters' `[B, C, H, W]` alike; the [`OutputLoss`] says how to read it.
pub trait NetworkOutput {
    /// The output as `[B, K]`.
    fn into_rows(self) -> Tensor<2>;
}

impl<const D: usize> NetworkOutput for Tensor<D> {
    fn into_rows(self) -> Tensor<2> {
        let dims = self.dims();
        let batch = dims.first().copied().unwrap_or(1);
        let width = dims.iter().skip(1).product::<usize>();
        self.reshape([batch, width])
    }
}

/// The loss on the network's output `f` (flattened to `[B, K]`, [`NetworkOutput`]), the mean
/// of each example's loss over the batch: what the per-sample losses, the margins and the
/// curvature sources with exact diagonals need to know of it (its Hessian with respect to `f`).
///
/// | output | loss | constructor |
/// |---|---|---|
/// | `[B, C]` logits | cross-entropy against classes `[B]` | [`OutputLoss::classes`] |
/// | `[B, C]` logits | cross-entropy against probabilities `[B, C]` | [`OutputLoss::CrossEntropy`] |
/// | `[B, T, V]` token logits | per-token cross-entropy against `[B, T]`, padding ignored | [`OutputLoss::tokens`], [`OutputLoss::tokens_with_padding`] |
/// | `[B, C, H, W]` class maps | per-pixel cross-entropy against `[B, H, W]` | [`OutputLoss::class_maps`], [`OutputLoss::class_maps_with_ignore`] |
/// | `[B, …]` | mean squared error against `[B, …]` | [`OutputLoss::Mse`], [`OutputLoss::mse`] |
#[derive(Debug, Clone)]
pub enum OutputLoss {
    /// `MSELoss(mean)`: `(1/(B·C)) Σ ‖f_n − y_n‖²`, targets `[B, C]`.
    Mse(Tensor<2>),
    /// `CrossEntropyLoss(mean)` with one-hot targets `[B, C]`.
    CrossEntropy(Tensor<2>),
    /// Cross-entropy at every position (token, pixel) of each example, the example's loss the
    /// mean over its counted positions ([`PositionLoss`]).
    Positions(Box<PositionLoss>),
}

impl OutputLoss {
    /// Cross-entropy against class indices `[B]` (burn's `CrossEntropyLoss` targets), among
    /// `classes` classes.
    pub fn classes(targets: Tensor<1, burn::tensor::Int>, classes: usize) -> Self {
        Self::CrossEntropy(super::positions::one_hot_rows(targets, classes, None))
    }

    /// Mean squared error against targets of any shape `[B, …]` (the output's): each
    /// example's loss is the mean over its outputs.
    pub fn mse<const D: usize>(targets: Tensor<D>) -> Self {
        Self::Mse(targets.into_rows())
    }

    /// A language model's or tagger's per-token cross-entropy: logits `[B, T, V]` (classes
    /// on the last axis), targets `[B, T]` (next tokens, tags) among `vocabulary` classes.
    /// Each sequence's loss is the mean over its `T` tokens ([`PositionLoss`]).
    pub fn tokens(targets: Tensor<2, burn::tensor::Int>, vocabulary: usize) -> Self {
        Self::Positions(Box::new(PositionLoss::new(
            targets,
            vocabulary,
            ClassAxis::Last,
            None,
        )))
    }

    /// [`OutputLoss::tokens`] where tokens whose target is `pad` count for nothing (burn's
    /// `CrossEntropyLossConfig::with_pad_tokens`): each sequence's loss is the mean over its
    /// other tokens; a sequence of padding alone has loss 0 and no gradient.
    pub fn tokens_with_padding(
        targets: Tensor<2, burn::tensor::Int>,
        vocabulary: usize,
        pad: i64,
    ) -> Self {
        Self::Positions(Box::new(PositionLoss::new(
            targets,
            vocabulary,
            ClassAxis::Last,
            Some(pad),
        )))
    }

    /// A segmenter's per-pixel cross-entropy: class maps `[B, C, …]` (classes on the second
    /// axis, burn's convolution layout), targets `[B, …]` (`[B, H, W]` for images) among
    /// `classes` classes. Each image's loss is the mean over its pixels.
    pub fn class_maps<const D: usize>(
        targets: Tensor<D, burn::tensor::Int>,
        classes: usize,
    ) -> Self {
        Self::Positions(Box::new(PositionLoss::new(
            positions_of(targets),
            classes,
            ClassAxis::Second,
            None,
        )))
    }

    /// [`OutputLoss::class_maps`] where pixels whose target is `ignore` (often 255: unlabelled)
    /// count for nothing.
    pub fn class_maps_with_ignore<const D: usize>(
        targets: Tensor<D, burn::tensor::Int>,
        classes: usize,
        ignore: i64,
    ) -> Self {
        Self::Positions(Box::new(PositionLoss::new(
            positions_of(targets),
            classes,
            ClassAxis::Second,
            Some(ignore),
        )))
    }

    /// The same loss with its targets in float type `dtype` (the network output's: class
    /// indices become one-hot rows in burn's default float type).
    pub fn with_dtype(self, dtype: burn::tensor::DType) -> Self {
        let cast = |y: Tensor<2>| if y.dtype() == dtype { y } else { y.cast(dtype) };
        match self {
            Self::Mse(y) => Self::Mse(cast(y)),
            Self::CrossEntropy(y) => Self::CrossEntropy(cast(y)),
            // Its weights are formed in the output's float type where they are used.
            Self::Positions(loss) => Self::Positions(loss),
        }
    }

    /// The float targets `[B, C]` (one-hot for cross-entropy); `None` for
    /// [`OutputLoss::Positions`], whose targets are class indices.
    pub fn targets(&self) -> Option<&Tensor<2>> {
        match self {
            OutputLoss::Mse(y) | OutputLoss::CrossEntropy(y) => Some(y),
            OutputLoss::Positions(_) => None,
        }
    }

    /// `[B, K]`: the examples, and the width of the flattened output the loss expects (also
    /// the number of columns of its Hessian's square root, one recorded pass each for the
    /// exact GGN).
    pub fn dims(&self) -> [usize; 2] {
        match self {
            OutputLoss::Mse(y) | OutputLoss::CrossEntropy(y) => y.dims(),
            OutputLoss::Positions(loss) => loss.dims(),
        }
    }

    /// Each example's loss `ℓ_n` on the output `f` (`[B, …]`, flattened to `[B, K]`),
    /// `[B]`; its mean is the loss ([`persample::loss`](crate::persample::loss)).
    pub fn per_sample(&self, f: impl NetworkOutput) -> Tensor<1> {
        let f = f.into_rows();
        let dtype = f.dtype();
        match self.clone().with_dtype(dtype) {
            Self::Mse(y) => crate::persample::loss::mse(f, y),
            Self::CrossEntropy(y) => crate::persample::loss::cross_entropy_with_probabilities(f, y),
            Self::Positions(loss) => loss.per_sample(f),
        }
    }

    /// Each example's classification margin on the logits `f`, `[B]`: the logit of its
    /// labelled class (the target's largest entry) minus the largest other logit; for
    /// [`OutputLoss::Positions`] the mean of that margin over the example's counted positions.
    /// `None` for a regression loss. −∞ with a single class.
    ///
    /// # Cost
    ///
    /// A few element-wise kernels and two reductions over the logits; no read.
    pub fn margins(&self, f: impl NetworkOutput) -> Option<Tensor<1>> {
        let f = f.into_rows();
        let y = match self.clone().with_dtype(f.dtype()) {
            Self::Mse(_) => return None,
            Self::Positions(loss) => return Some(loss.margins(f)),
            Self::CrossEntropy(y) => y,
        };
        let batch = f.dims()[0];
        let label = y.clone().argmax(1);
        let labelled = f.clone().gather(1, label);
        let is_label = y.clone().equal(y.max_dim(1));
        let other = f.mask_fill(is_label, f64::NEG_INFINITY).max_dim(1);
        Some((labelled - other).reshape([batch]))
    }

    /// Each example's worst counted position on the output `f`, for
    /// [`OutputLoss::Positions`]: that position's loss `[B]` and its index `[B]` (for
    /// [`ClassAxis::Second`](super::ClassAxis::Second) maps, `h·W + w`). An example with no
    /// counted position gets loss −1. `None` for one-position losses.
    ///
    /// # Cost
    ///
    /// A log-softmax, a gather and one reduction over the positions; no read.
    pub fn worst_positions(&self, f: impl NetworkOutput) -> Option<(Tensor<1>, Tensor<1, Int>)> {
        match self {
            Self::Positions(loss) => Some(loss.worst_positions(f.into_rows())),
            Self::Mse(_) | Self::CrossEntropy(_) => None,
        }
    }

    /// The mean loss at the flattened output `f` `[B, K]`.
    pub(crate) fn value(&self, f: Tensor<2>) -> Tensor<1> {
        match self {
            OutputLoss::Mse(y) => (f - y.clone()).square().mean(),
            OutputLoss::CrossEntropy(y) => {
                // The float64 reciprocal: burn-autodiff's backward of `div_scalar` rounds it.
                let batch = f.dims()[0] as f64;
                (log_softmax(f, 1) * y.clone())
                    .sum()
                    .mul_scalar(-batch.recip())
            }
            OutputLoss::Positions(loss) => {
                let batch = f.dims()[0] as f64;
                loss.per_sample(f).sum().mul_scalar(batch.recip())
            }
        }
    }

    /// `∂L/∂f` of the mean loss at `f` `[B, K]` (detached targets).
    pub(crate) fn gradient(&self, f: Tensor<2>) -> Tensor<2> {
        let [batch, classes] = f.dims();
        match self {
            OutputLoss::Mse(y) => {
                (f - y.clone().detach()).mul_scalar(2.0 / (batch * classes) as f64)
            }
            OutputLoss::CrossEntropy(y) => {
                (softmax(f, 1) - y.clone().detach()).mul_scalar((batch as f64).recip())
            }
            OutputLoss::Positions(loss) => loss.gradient(f),
        }
    }

    /// The columns `columns` of the loss Hessian's square root (`∇²_f ℓ_n = S_n S_nᵀ`)
    /// stacked copy-major, `[k·B, K]` (rows `j·B..(j + 1)·B` the column `s_{·,c₀+j}`), built
    /// in a fixed number of operations whatever `k`: the one-hot rows `E` compare each row's
    /// column with `0..K` (only the `k·B` row indices are uploaded); for cross-entropy
    /// `S = (E − P) ⊙ √(Σ_c P ⊙ E)` with `P` the probabilities repeated `k` times; for MSE
    /// `√(2/C)·E`; per position, [`PositionLoss`]'s block columns.
    pub(crate) fn stacked_columns(
        &self,
        f: &Tensor<2>,
        columns: std::ops::Range<usize>,
    ) -> Tensor<2> {
        if let OutputLoss::Positions(loss) = self {
            return loss.stacked_columns(f, columns);
        }
        let [batch, classes] = f.dims();
        let (copies, device) = (columns.len(), f.device());
        let rows = copies * batch;
        let column_of_row: Vec<i64> = (0..rows)
            .map(|row| (columns.start + row / batch) as i64)
            .collect();
        let column_of_row =
            Tensor::<2, Int>::from_data(TensorData::new(column_of_row, [rows, 1]), &device);
        let all = Tensor::<1, Int>::arange(0..classes as i64, &device).reshape([1, classes]);
        let e = column_of_row
            .expand([rows, classes])
            .equal(all.expand([rows, classes]))
            .float()
            .cast(f.dtype());
        match self {
            OutputLoss::CrossEntropy(_) => {
                let p = softmax(f.clone(), 1).repeat_dim(0, copies);
                let root = (p.clone() * e.clone()).sum_dim(1).sqrt();
                (e - p) * root
            }
            _ => e.mul_scalar((2.0 / classes as f64).sqrt()),
        }
    }

    /// One sampled column `[B, K]` (Cockpit's `diag_ggn_mc`), drawn on the host and uploaded
    /// (no read): cross-entropy `p_n − e_ŷ` with `ŷ` by inverse CDF of `p_n` against a
    /// uniform (per position for [`OutputLoss::Positions`], scaled by `√w`); MSE
    /// `√(2/C)·ξ_n`, `ξ_n ~ N(0, I)`. Its outer product's expectation is the loss Hessian.
    pub(crate) fn sampled_column(&self, f: &Tensor<2>, rng: &SplitMix) -> Tensor<2> {
        let [batch, classes] = f.dims();
        let options = TensorCreationOptions::new(f.device()).with_dtype(f.dtype());
        match self {
            OutputLoss::Positions(loss) => loss.sampled_column(f, rng),
            OutputLoss::Mse(_) => {
                let xi: Vec<f64> = (0..batch * classes).map(|_| rng.gaussian()).collect();
                let xi = Tensor::<2>::from_data(TensorData::new(xi, [batch, classes]), options);
                xi.mul_scalar((2.0 / classes as f64).sqrt())
            }
            OutputLoss::CrossEntropy(_) => {
                let u: Vec<f64> = (0..batch).map(|_| rng.uniform()).collect();
                let u = Tensor::<3>::from_data(TensorData::new(u, [batch, 1, 1]), options)
                    .expand([batch, 1, classes]);
                let p = softmax(f.clone(), 1);
                let drawn =
                    super::positions::drawn_classes(p.clone().reshape([batch, 1, classes]), u);
                p - drawn.reshape([batch, classes])
            }
        }
    }
}

/// Class targets `[B, …]` as `[B, P]`.
fn positions_of<const D: usize>(
    targets: Tensor<D, burn::tensor::Int>,
) -> Tensor<2, burn::tensor::Int> {
    let dims = targets.dims();
    let batch = dims.first().copied().unwrap_or(1);
    let positions = dims.iter().skip(1).product::<usize>();
    targets.reshape([batch, positions])
}

/// Second-order information about the step's mean mini-batch loss `L(θ_t)`, on the batch of the
/// step (BackPACK's second-order extensions and autograd's double backward, which burn lacks).
pub trait CurvatureSource: Send + Sync + Debug {
    /// The Hessian-vector product `H v`, aligned with `params`.
    ///
    /// # Errors
    ///
    /// [`QuantityError`] if the product cannot be formed.
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError>;

    /// The curvature diagonal of `kind`, one flattened tensor per parameter of `params` (burn
    /// layout), carrying the `1/B` of the mean loss.
    ///
    /// # Errors
    ///
    /// [`QuantityError::Unsupported`] where the source has no such diagonal.
    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        let _ = params;
        Err(QuantityError::Unsupported(format!(
            "this curvature source has no `{}` diagonal",
            kind.cockpit_name()
        )))
    }

    /// The standard error of each parameter's trace of the diagonal of `kind` (one-element
    /// tensors, in `params` order), where the diagonal computed by [`CurvatureSource::diagonal`]
    /// is an estimate whose spread the source knows (Hutchinson's probes); `None` where it is
    /// exact or the spread is unknown. Call it after `diagonal`.
    fn diagonal_errors(&self, params: &Snapshot, kind: DiagonalKind) -> Option<Vec<Tensor<1>>> {
        let _ = (params, kind);
        None
    }

    /// What the user should know about how the diagonals computed so far were obtained:
    /// where one is an estimate rather than exact, and why. The Cockpit turns each distinct
    /// note into one warning. None by default.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A boxed source is a source, so a choice made at run time (exact diagonals or not) can be
/// handed to [`StepInfo::with_curvature`](crate::StepInfo::with_curvature).
impl CurvatureSource for Box<dyn CurvatureSource> {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        self.as_ref().hvp(params, v)
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        self.as_ref().diagonal(params, kind)
    }

    fn diagonal_errors(&self, params: &Snapshot, kind: DiagonalKind) -> Option<Vec<Tensor<1>>> {
        self.as_ref().diagonal_errors(params, kind)
    }

    fn notes(&self) -> Vec<String> {
        self.as_ref().notes()
    }
}

/// A shared source is a source, so one source can serve two consumers (a diagonal's estimate
/// and the quantities' products).
impl<S: CurvatureSource + ?Sized> CurvatureSource for std::sync::Arc<S> {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        self.as_ref().hvp(params, v)
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        self.as_ref().diagonal(params, kind)
    }

    fn notes(&self) -> Vec<String> {
        self.as_ref().notes()
    }
}
