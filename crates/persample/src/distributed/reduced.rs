//! The per-sample source of statistics reduced beforehand.

use std::fmt::Debug;
use std::sync::Arc;

use burn::tensor::Tensor;

use crate::base::{PerSampleSource, PerSampleStats, Request};
use crate::{PerSampleError, Snapshot};

/// A [`PerSampleSource`] whose statistics were reduced beforehand ([`all_reduce_stats`](crate::all_reduce_stats)) and
/// whose gradient elements (for histograms) come from another source: on a data-parallel
/// group, the node's workers' own sources, streamed one after another.
///
/// A request must ask for statistics that were reduced: projections are those the workers
/// computed, in their order (the Cockpit asks for the mean gradient's, then the previous
/// step's).
///
/// # Cost
///
/// None beyond cloning tensor handles, and the element source's pass for histograms.
#[derive(Debug, Clone)]
pub struct ReducedPerSample {
    stats: PerSampleStats,
    elements: Option<Arc<dyn PerSampleSource>>,
}

impl ReducedPerSample {
    /// Reduced `stats`; gradient elements, when asked for, from `elements`.
    pub fn new(stats: PerSampleStats, elements: Option<Arc<dyn PerSampleSource>>) -> Self {
        Self { stats, elements }
    }
}

impl PerSampleSource for ReducedPerSample {
    fn batch_size(&self) -> usize {
        self.stats.batch_size
    }

    fn reduce(
        &self,
        params: &Snapshot,
        request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        let missing = |what: &str| {
            PerSampleError::Unsupported(format!("{what} was not reduced for this step"))
        };
        let wanted = |asked: bool, have: &Option<Vec<Tensor<1>>>, what: &str| match (asked, have) {
            (false, _) => Ok(None),
            (true, Some(v)) if v.len() == params.len() => Ok(Some(v.clone())),
            (true, Some(_)) => Err(PerSampleError::Shape(format!(
                "{what} was reduced for another parameter set"
            ))),
            (true, None) => Err(missing(what)),
        };
        if request.directions.len() > self.stats.dots.len() {
            return Err(missing("a projection"));
        }
        let stats = PerSampleStats {
            batch_size: self.stats.batch_size,
            sq_norms: wanted(request.sq_norms, &self.stats.sq_norms, "‖g_n‖²")?,
            dots: self.stats.dots[..request.directions.len()].to_vec(),
            sum_sq: wanted(request.sum_sq, &self.stats.sum_sq, "Σ_n g_n²")?,
            abs_max: wanted(request.abs_max, &self.stats.abs_max, "max |g|")?,
            ..PerSampleStats::default()
        };
        if let Some(sink) = request.elements {
            let source = self
                .elements
                .as_ref()
                .ok_or_else(|| missing("the gradient elements"))?;
            let mut only = Request::new();
            only.elements = Some(sink);
            only.chunk_elements = request.chunk_elements;
            source.reduce(params, only)?;
        }
        Ok(stats)
    }
}
