//! The [`PerSampleSource`] trait: what the quantities ask of per-sample gradients.

use std::fmt::Debug;

use burn::tensor::Tensor;

use crate::{PerSampleError, Snapshot};

/// Per-sample gradient elements of one parameter for some samples, as the engine has them.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // both variants hold tensor handles; moved, never copied
pub enum Elements {
    /// Materialised per-sample gradients `[b, numel]`.
    Dense(Tensor<2>),
    /// Rank-one per-sample gradients `g_n = a_n e_nᵀ` (burn layout `[d_in, d_out]`, flattened
    /// row-major), given by `a` `[b, d_in]` and `e` `[b, d_out]`: the elements are every
    /// product `a_{n,i}·e_{n,o}`. Consumers that only need the multiset of elements (a 1-d
    /// histogram) can avoid materialising `b·d_in·d_out` values.
    Outer {
        /// Left factors.
        a: Tensor<2>,
        /// Right factors.
        e: Tensor<2>,
    },
}

impl Elements {
    /// The per-sample gradients as a `[b, numel]` tensor (materialising outer products: a
    /// factored chunk may hold many samples, so this can be large).
    pub fn dense(self) -> Tensor<2> {
        match self {
            Elements::Dense(g) => g,
            Elements::Outer { a, e } => {
                let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
                (a.unsqueeze_dim::<3>(2) * e.unsqueeze_dim::<3>(1)).reshape([b, d_in * d_out])
            }
        }
    }
}

/// The per-sample statistics one step needs, gathered from every quantity's
/// [`PerSampleNeeds`] so that a source computes them in one go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerSampleNeeds {
    /// `‖g_{n,p}‖²` per sample and parameter.
    pub sq_norms: bool,
    /// `⟨g_{n,p}, ∇_p L⟩` per sample and parameter (dot with the mean gradient).
    pub dots_with_grad: bool,
    /// `⟨g_{n,p}, ∇_p L_{t−1}⟩` per sample and parameter: dot with the previous step's mean
    /// gradient (Alpha's end point on its SGD path, where the step was `−lr·∇L_{t−1}`). The
    /// Cockpit keeps that gradient from step `t − 1` when a quantity asks for it at `t`.
    pub dots_with_previous_grad: bool,
    /// `Σ_n g_{n,p}^{⊙2}` per parameter (elementwise).
    pub sum_sq: bool,
    /// `max_{n,j} |g_{n,p,j}|` per parameter.
    pub abs_max: bool,
    /// The per-sample gradient elements themselves (histograms), in chunks.
    pub elements: bool,
}

impl PerSampleNeeds {
    /// No per-sample statistic.
    pub const NONE: Self = Self {
        sq_norms: false,
        dots_with_grad: false,
        dots_with_previous_grad: false,
        sum_sq: false,
        abs_max: false,
        elements: false,
    };

    /// `‖g_{n,p}‖²` alone.
    pub const SQ_NORMS: Self = Self {
        sq_norms: true,
        ..Self::NONE
    };

    /// `⟨g_{n,p}, ∇_p L⟩` alone.
    pub const DOTS_WITH_GRAD: Self = Self {
        dots_with_grad: true,
        ..Self::NONE
    };

    /// `Σ_n g_{n,p}^{⊙2}` alone.
    pub const SUM_SQ: Self = Self {
        sum_sq: true,
        ..Self::NONE
    };

    /// Whether anything is needed.
    pub fn any(&self) -> bool {
        self.sq_norms
            || self.dots_with_grad
            || self.dots_with_previous_grad
            || self.sum_sq
            || self.abs_max
            || self.elements
    }

    /// The union of two needs.
    pub const fn union(self, other: Self) -> Self {
        Self {
            sq_norms: self.sq_norms || other.sq_norms,
            dots_with_grad: self.dots_with_grad || other.dots_with_grad,
            dots_with_previous_grad: self.dots_with_previous_grad || other.dots_with_previous_grad,
            sum_sq: self.sum_sq || other.sum_sq,
            abs_max: self.abs_max || other.abs_max,
            elements: self.elements || other.elements,
        }
    }
}

/// Reduced per-sample statistics of one step, one entry per parameter in snapshot order; each
/// field is filled when it was asked for. `g_{n,p}` is the true per-sample gradient
/// `∇_p ℓ_n` (not divided by `B`).
#[derive(Debug, Clone, Default)]
pub struct PerSampleStats {
    /// Batch size `B`.
    pub batch_size: usize,
    /// `‖g_{n,p}‖²`, `[B]` per parameter.
    pub sq_norms: Option<Vec<Tensor<1>>>,
    /// `⟨g_{n,p}, v_p⟩`, `[B]` per parameter, for each requested direction `v` (what a
    /// source returns for [`Request::directions`]).
    pub dots: Vec<Vec<Tensor<1>>>,
    /// `⟨g_{n,p}, ∇_p L⟩`, `[B]` per parameter ([`PerSampleNeeds::dots_with_grad`]; filled by
    /// the Cockpit from `dots`).
    pub dots_with_grad: Option<Vec<Tensor<1>>>,
    /// `⟨g_{n,p}, ∇_p L_{t−1}⟩`, `[B]` per parameter
    /// ([`PerSampleNeeds::dots_with_previous_grad`]; filled by the Cockpit from `dots`).
    pub dots_with_previous_grad: Option<Vec<Tensor<1>>>,
    /// `Σ_n g_{n,p}^{⊙2}`, `[numel]` per parameter (flattened in burn's layout).
    pub sum_sq: Option<Vec<Tensor<1>>>,
    /// `max |g_{n,p,j}|`, `[1]` per parameter.
    pub abs_max: Option<Vec<Tensor<1>>>,
    /// What the source wants the user to know about how it computed these (e.g. that
    /// [`PerSample::auto`](crate::PerSample::auto) fell back to single-sample passes, and
    /// why); the Cockpit turns each distinct note into one warning.
    pub notes: Vec<String>,
}

/// What one pass over the per-sample gradients computes.
pub struct Request<'a> {
    /// `‖g_{n,p}‖²`.
    pub sq_norms: bool,
    /// Directions `v` (aligned with the parameters) to take `⟨g_{n,p}, v_p⟩` with.
    pub directions: Vec<&'a Snapshot>,
    /// `Σ_n g_{n,p}^{⊙2}`.
    pub sum_sq: bool,
    /// `max |g_{n,p,j}|`.
    pub abs_max: bool,
    /// Receives the per-sample gradients `(parameter index, elements)`; dense chunks have at
    /// most `chunk_elements` elements, factored chunks ([`Elements::Outer`]) at most
    /// `chunk_elements` factor entries (at least one sample either way).
    pub elements: Option<&'a mut dyn FnMut(usize, Elements) -> Result<(), PerSampleError>>,
    /// Largest chunk handed to `elements`, in elements.
    pub chunk_elements: usize,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("sq_norms", &self.sq_norms)
            .field("directions", &self.directions.len())
            .field("sum_sq", &self.sum_sq)
            .field("abs_max", &self.abs_max)
            .field("elements", &self.elements.is_some())
            .finish()
    }
}

impl<'a> Request<'a> {
    /// A request for nothing; set the fields you need.
    pub fn new() -> Self {
        Self {
            sq_norms: false,
            directions: Vec::new(),
            sum_sq: false,
            abs_max: false,
            elements: None,
            chunk_elements: 1 << 22,
        }
    }
}

impl Default for Request<'_> {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-sample gradients of one step, as BackPACK provides them to Cockpit.
///
/// Two implementations ship: [`Recording`](super::Recording), the fast path that
/// instrumented layers record during the ordinary backward pass, and
/// [`ExactPerSample`](super::ExactPerSample), the exact fallback for any model, from
/// single-sample backward passes.
pub trait PerSampleSource: Send + Sync + Debug {
    /// The batch size `B`.
    fn batch_size(&self) -> usize;

    /// Computes what `request` asks for, for the parameters of `params` (in their order), in
    /// one pass over the samples.
    ///
    /// # Errors
    ///
    /// [`PerSampleError`] if a parameter is not covered, or a callback fails.
    fn reduce(
        &self,
        params: &Snapshot,
        request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError>;
}

/// A shared source is a source (the parts of an accumulated step, a source chosen at run
/// time).
impl<S: PerSampleSource + ?Sized> PerSampleSource for std::sync::Arc<S> {
    fn batch_size(&self) -> usize {
        (**self).batch_size()
    }

    fn reduce(
        &self,
        params: &Snapshot,
        request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        (**self).reduce(params, request)
    }
}
