//! Collecting per-parameter statistics over sample chunks.

use std::collections::BTreeMap;

use burn::tensor::{Device, Tensor};

use crate::base::{Elements, Request};
use crate::reduce::{
    LONG_ROW, kernel_row_dots, kernel_row_norms_and_dots, max_nonnegative, row_squares, sum_dim,
};
use crate::statistic::{Combine, PerSampleStats, Statistic, Statistics, combine_parts};
use crate::{ParamEntry, PerSampleError, Snapshot};

/// Collects per-parameter statistics, from factored formulas or from materialised per-sample
/// gradients `[b, numel]`, possibly arriving in several sample chunks: each statistic's parts
/// per parameter, combined at the end as [`Statistic::combine`] says.
pub(crate) struct Accumulator {
    batch: usize,
    wanted: Statistics,
    parts: BTreeMap<Statistic, Vec<Vec<Tensor<1>>>>,
}

impl Accumulator {
    pub(crate) fn new(batch: usize, request: &Request<'_>) -> Self {
        Self {
            batch,
            wanted: request.statistics(),
            parts: BTreeMap::new(),
        }
    }

    /// Adds `part`, `statistic` of parameter `index` over some samples (in sample order).
    /// Sums and maxima over samples are folded as they arrive, so a parameter holds one
    /// running tensor (its `[numel]` sums of squares once, not once per chunk); per-sample
    /// values are kept in order and concatenated by [`Accumulator::finish`].
    pub(crate) fn push(&mut self, statistic: Statistic, index: usize, part: Tensor<1>) {
        let per_param = self.parts.entry(statistic).or_default();
        if per_param.len() <= index {
            per_param.resize(index + 1, Vec::new());
        }
        let parts = &mut per_param[index];
        let combine = statistic.combine();
        match parts.pop() {
            Some(running) if combine != Combine::Concatenate => {
                parts.extend(combine_parts(combine, vec![running, part]));
            }
            last => {
                parts.extend(last);
                parts.push(part);
            }
        }
    }

    /// Statistics of one parameter from per-sample gradients `g` `[b, numel]` of some of the
    /// samples (chunks arrive in sample order); `sq_norms`, the rows' squared norms where the
    /// caller already has them. Every statistic is computable here: a new [`Statistic`]
    /// gets its formula from the rows in this function.
    pub(crate) fn add_partial(
        &mut self,
        index: usize,
        entry: &ParamEntry,
        g: Tensor<2>,
        mut sq_norms: Option<Tensor<1>>,
        request: &mut Request<'_>,
    ) -> Result<(), PerSampleError> {
        let numel = entry.numel();
        let b = g.dims()[0];
        // Rows longer than LONG_ROW: where `cockpit-kernels` runs, their squares and
        // projections spread each row over many cubes; elsewhere (and for short rows) burn's
        // reduction and matrix product.
        let long = numel > LONG_ROW;
        let projections = request.projections()?;
        let directions = projections
            .iter()
            .map(|(_, v)| Ok(direction_of(v, entry, &g.device())?.reshape([numel])))
            .collect::<Result<Vec<Tensor<1>>, PerSampleError>>()?;
        let rows = |t: &Tensor<2>, first: usize| -> Vec<Tensor<1>> {
            (first..first + directions.len())
                .map(|k| t.clone().slice(k..k + 1).reshape([b]))
                .collect()
        };
        // The squared norms with the projections in one pass over the rows where the kernel
        // runs: each value read once instead of once per statistic.
        let one_pass = long && sq_norms.is_none() && self.wanted.contains(Statistic::SqNorm);
        let mut dots = match one_pass
            .then(|| kernel_row_norms_and_dots(&g, &directions))
            .flatten()
        {
            Some(both) => {
                sq_norms = Some(both.clone().slice(0..1).reshape([b]));
                rows(&both, 1)
            }
            None => match long.then(|| kernel_row_dots(&g, &directions)).flatten() {
                Some(dots) => rows(&dots, 0),
                None => directions
                    .iter()
                    .map(|v| g.clone().matmul(v.clone().reshape([numel, 1])).reshape([b]))
                    .collect(),
            },
        }
        .into_iter();
        for statistic in self.wanted.iter() {
            let part = match statistic {
                Statistic::SqNorm => sq_norms.take().unwrap_or_else(|| row_squares(g.clone())),
                Statistic::Dot(_) => dots.next().ok_or_else(|| {
                    PerSampleError::Shape("a projection without its direction".into())
                })?,
                Statistic::SumSq => sum_dim(g.clone().square(), 0).reshape([numel]),
                Statistic::AbsMax => max_nonnegative(g.clone().abs()),
                #[cfg(test)]
                Statistic::SumCubes => sum_dim(g.clone().powi_scalar(3), 1).reshape([b]),
            };
            self.push(statistic, index, part);
        }
        if let Some(sink) = request.elements.as_mut() {
            sink(index, Elements::Dense(g))?;
        }
        Ok(())
    }

    /// The statistics of `params`' parameters (every one must have each statistic asked for).
    pub(crate) fn finish(mut self, params: usize) -> Result<PerSampleStats, PerSampleError> {
        let mut stats = PerSampleStats::new(self.batch);
        for statistic in self.wanted.iter() {
            let mut per_param = self.parts.remove(&statistic).unwrap_or_default();
            per_param.resize(params, Vec::new());
            let values = per_param
                .into_iter()
                .map(|parts| {
                    combine_parts(statistic.combine(), parts).ok_or_else(|| {
                        PerSampleError::Shape(format!("a parameter has no {}", statistic.formula()))
                    })
                })
                .collect::<Result<_, _>>()?;
            stats.insert(statistic, values);
        }
        Ok(stats)
    }
}

/// The direction's values for `entry`, on `device` (the per-sample gradients' device: with
/// several devices the direction may live on another one).
pub(super) fn direction_of(
    direction: &Snapshot,
    entry: &ParamEntry,
    device: &Device,
) -> Result<Tensor<1>, PerSampleError> {
    direction
        .get(entry.id)
        .map(|d| d.value.clone().to_device(device))
        .ok_or_else(|| {
            PerSampleError::Shape(format!("no direction for parameter `{}`", entry.name))
        })
}
