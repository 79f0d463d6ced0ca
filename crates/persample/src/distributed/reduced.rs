//! The per-sample source of statistics reduced beforehand.

use std::fmt::Debug;
use std::sync::Arc;

use crate::base::{PerSampleSource, Request};
use crate::statistic::PerSampleStats;
use crate::{PerSampleError, Snapshot};

/// A [`PerSampleSource`] whose statistics were reduced beforehand ([`all_reduce_stats`](crate::all_reduce_stats)) and
/// whose gradient elements (for histograms) come from another source: on a data-parallel
/// group, the node's workers' own sources, streamed one after another.
///
/// A request must ask for statistics that were reduced (projections on the directions the
/// workers projected on).
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
        let mut stats = PerSampleStats::new(self.stats.batch_size);
        for statistic in request.statistics().iter() {
            let values = self
                .stats
                .get(statistic)
                .ok_or_else(|| missing(statistic.formula()))?;
            if values.len() != params.len() {
                return Err(PerSampleError::Shape(format!(
                    "{} was reduced for another parameter set",
                    statistic.formula()
                )));
            }
            stats.insert(statistic, values.to_vec());
        }
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
