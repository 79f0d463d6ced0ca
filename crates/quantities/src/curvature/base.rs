//! The [`CurvatureSource`] trait: Hessian-vector products and curvature diagonals of the
//! step's mean mini-batch loss.

use std::fmt::Debug;

use burn::tensor::Tensor;

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

/// The loss on the network's output `f` `[B, C]`, mean over the batch: what the curvature
/// sources with exact diagonals need to know of it (its Hessian with respect to `f`).
#[derive(Debug, Clone)]
pub enum OutputLoss {
    /// `MSELoss(mean)`: `(1/(B·C)) Σ ‖f_n − y_n‖²`, targets `[B, C]`.
    Mse(Tensor<2>),
    /// `CrossEntropyLoss(mean)` with one-hot targets `[B, C]`.
    CrossEntropy(Tensor<2>),
}

impl OutputLoss {
    /// Cross-entropy against class indices `[B]` (burn's `CrossEntropyLoss` targets), among
    /// `classes` classes.
    pub fn classes(targets: Tensor<1, burn::tensor::Int>, classes: usize) -> Self {
        Self::CrossEntropy(targets.one_hot::<2>(classes).float())
    }

    /// The same loss with its targets in float type `dtype` (the network output's: class
    /// indices become one-hot rows in burn's default float type).
    pub fn with_dtype(self, dtype: burn::tensor::DType) -> Self {
        let cast = |y: Tensor<2>| if y.dtype() == dtype { y } else { y.cast(dtype) };
        match self {
            Self::Mse(y) => Self::Mse(cast(y)),
            Self::CrossEntropy(y) => Self::CrossEntropy(cast(y)),
        }
    }

    /// The targets `[B, C]` (one-hot for cross-entropy).
    pub fn targets(&self) -> &Tensor<2> {
        match self {
            OutputLoss::Mse(y) | OutputLoss::CrossEntropy(y) => y,
        }
    }

    /// Each example's loss `ℓ_n` on the output `f` `[B, C]`, `[B]`; its mean is the loss
    /// ([`persample::loss`](crate::persample::loss)).
    pub fn per_sample(&self, f: Tensor<2>) -> Tensor<1> {
        let dtype = f.dtype();
        match self.clone().with_dtype(dtype) {
            Self::Mse(y) => crate::persample::loss::mse(f, y),
            Self::CrossEntropy(y) => crate::persample::loss::cross_entropy_with_probabilities(f, y),
        }
    }

    /// Each example's classification margin on the logits `f` `[B, C]`, `[B]`: the logit of
    /// its labelled class (the target's largest entry) minus the largest other logit;
    /// `None` for a regression loss. −∞ with a single class.
    ///
    /// # Cost
    ///
    /// A few element-wise kernels and two reductions over `[B, C]`; no read.
    pub fn margins(&self, f: Tensor<2>) -> Option<Tensor<1>> {
        let Self::CrossEntropy(y) = self.clone().with_dtype(f.dtype()) else {
            return None;
        };
        let batch = f.dims()[0];
        let label = y.clone().argmax(1);
        let labelled = f.clone().gather(1, label);
        let is_label = y.clone().equal(y.max_dim(1));
        let other = f.mask_fill(is_label, f64::NEG_INFINITY).max_dim(1);
        Some((labelled - other).reshape([batch]))
    }
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
