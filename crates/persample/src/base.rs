//! The [`PerSampleSource`] trait: what the quantities ask of per-sample gradients.

use std::fmt::Debug;

use burn::tensor::Tensor;

use crate::statistic::{Direction, PerSampleStats, Statistic, Statistics};
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

/// What one pass over the per-sample gradients computes: statistics, the directions their
/// projections take, and where the gradient elements go.
pub struct Request<'a> {
    statistics: Statistics,
    directions: Vec<(Direction, &'a Snapshot)>,
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
            .field("statistics", &self.statistics)
            .field("elements", &self.elements.is_some())
            .field("chunk_elements", &self.chunk_elements)
            .finish()
    }
}

impl<'a> Request<'a> {
    /// A request for nothing; add what you need.
    pub fn new() -> Self {
        Self {
            statistics: Statistics::NONE,
            directions: Vec::new(),
            elements: None,
            chunk_elements: 1 << 22,
        }
    }

    /// The request and `statistic`. A projection ([`Statistic::Dot`]) needs its direction:
    /// ask for it with [`Request::project_on`] (without one the source answers
    /// [`PerSampleError::Shape`]).
    pub fn with(mut self, statistic: Statistic) -> Self {
        self.statistics = self.statistics.with(statistic);
        self
    }

    /// The request and every statistic of `statistics` (projections as for
    /// [`Request::with`]).
    pub fn with_all(mut self, statistics: Statistics) -> Self {
        self.statistics = self.statistics.union(statistics);
        self
    }

    /// The request and the projections `⟨g_{n,p}, v_p⟩` on `v`, under
    /// [`Statistic::Dot`]`(direction)` (`v` aligned with the parameters by id).
    pub fn project_on(mut self, direction: Direction, v: &'a Snapshot) -> Self {
        self.statistics = self.statistics.with(Statistic::Dot(direction));
        self.directions.retain(|(d, _)| *d != direction);
        self.directions.push((direction, v));
        self
    }

    /// The statistics asked for.
    pub fn statistics(&self) -> Statistics {
        self.statistics
    }

    /// Whether `statistic` is asked for.
    pub fn wants(&self, statistic: Statistic) -> bool {
        self.statistics.contains(statistic)
    }

    /// Whether nothing is asked for (no statistic, no elements).
    pub fn is_empty(&self) -> bool {
        self.statistics.is_empty() && self.elements.is_none()
    }

    /// The projections asked for and their directions, in [`Statistic::ALL`]'s order.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if a projection was asked for without its direction.
    pub fn projections(&self) -> Result<Vec<(Direction, &'a Snapshot)>, PerSampleError> {
        self.statistics
            .iter()
            .filter_map(|s| match s {
                Statistic::Dot(direction) => Some(direction),
                _ => None,
            })
            .map(|direction| {
                self.directions
                    .iter()
                    .find(|(d, _)| *d == direction)
                    .copied()
                    .ok_or_else(|| {
                        PerSampleError::Shape(format!(
                            "{} asked for without its direction",
                            Statistic::Dot(direction).formula()
                        ))
                    })
            })
            .collect()
    }

    /// The same request, borrowed (the element sink included): what a source hands each of
    /// its parts.
    pub fn reborrow(&mut self) -> Request<'_> {
        Request {
            statistics: self.statistics,
            directions: self.directions.clone(),
            elements: match self.elements.as_mut() {
                Some(sink) => Some(&mut **sink),
                None => None,
            },
            chunk_elements: self.chunk_elements,
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
