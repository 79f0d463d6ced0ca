//! Collecting per-parameter statistics over sample chunks.

use burn::tensor::{Device, Tensor};

use crate::base::{Elements, PerSampleStats, Request};
use crate::reduce::{LONG_ROW, kernel_row_dots, kernel_row_sq_sums, sum_dim};
use crate::{ParamEntry, PerSampleError, Snapshot};

/// Collects per-parameter statistics, from factored formulas or from materialised per-sample
/// gradients `[b, numel]`, possibly arriving in several sample chunks.
pub(crate) struct Accumulator {
    batch: usize,
    sq_norms: Vec<Vec<Tensor<1>>>,
    dots: Vec<Vec<Vec<Tensor<1>>>>,
    sum_sq: Vec<Option<Tensor<1>>>,
    abs_max: Vec<Vec<Tensor<1>>>,
    want: (bool, bool, bool),
}

impl Accumulator {
    pub(crate) fn new(batch: usize, request: &Request<'_>) -> Self {
        Self {
            batch,
            sq_norms: Vec::new(),
            dots: vec![Vec::new(); request.directions.len()],
            sum_sq: Vec::new(),
            abs_max: Vec::new(),
            want: (request.sq_norms, request.sum_sq, request.abs_max),
        }
    }

    /// Makes room for parameter `index`.
    pub(crate) fn slot(&mut self, index: usize) {
        if self.sq_norms.len() <= index {
            self.sq_norms.resize(index + 1, Vec::new());
            self.sum_sq.resize(index + 1, None);
            self.abs_max.resize(index + 1, Vec::new());
            for d in &mut self.dots {
                d.resize(index + 1, Vec::new());
            }
        }
    }

    pub(crate) fn push_sq_norms(&mut self, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.sq_norms[index].push(part);
    }

    pub(crate) fn push_dots(&mut self, direction: usize, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.dots[direction][index].push(part);
    }

    pub(crate) fn add_sum_sq(&mut self, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.sum_sq[index] = Some(match self.sum_sq[index].take() {
            Some(acc) => acc + part,
            None => part,
        });
    }

    pub(crate) fn push_abs_max(&mut self, index: usize, part: Tensor<1>) {
        self.slot(index);
        self.abs_max[index].push(part);
    }

    /// Statistics of one parameter from per-sample gradients `g` `[b, numel]` of some of the
    /// samples (chunks arrive in sample order); `sq_norms`, the rows' squared norms where the
    /// caller already has them.
    pub(crate) fn add_partial(
        &mut self,
        index: usize,
        entry: &ParamEntry,
        g: Tensor<2>,
        sq_norms: Option<Tensor<1>>,
        request: &mut Request<'_>,
    ) -> Result<(), PerSampleError> {
        self.slot(index);
        let numel = entry.numel();
        let b = g.dims()[0];
        let (want_sq, want_sum_sq, want_max) = self.want;
        // Rows longer than LONG_ROW: where `cockpit-kernels` runs, their squares and
        // projections spread each row over many cubes; elsewhere (and for short rows) burn's
        // reduction and matrix product.
        let long = numel > LONG_ROW;
        if want_sq {
            let sq = sq_norms
                .or_else(|| {
                    long.then(|| kernel_row_sq_sums(std::slice::from_ref(&g)))
                        .flatten()
                        .map(|s| s.reshape([b]))
                })
                .unwrap_or_else(|| sum_dim(g.clone().square(), 1).reshape([b]));
            self.push_sq_norms(index, sq);
        }
        let directions = request
            .directions
            .iter()
            .map(|direction| Ok(direction_of(direction, entry, &g.device())?.reshape([numel])))
            .collect::<Result<Vec<Tensor<1>>, PerSampleError>>()?;
        match long.then(|| kernel_row_dots(&g, &directions)).flatten() {
            Some(dots) => {
                for k in 0..directions.len() {
                    self.dots[k][index].push(dots.clone().slice(k..k + 1).reshape([b]));
                }
            }
            None => {
                for (k, v) in directions.into_iter().enumerate() {
                    let v = v.reshape([numel, 1]);
                    self.dots[k][index].push(g.clone().matmul(v).reshape([b]));
                }
            }
        }
        if want_sum_sq {
            self.add_sum_sq(index, sum_dim(g.clone().square(), 0).reshape([numel]));
        }
        if want_max {
            self.push_abs_max(index, g.clone().abs().max());
        }
        if let Some(sink) = request.elements.as_mut() {
            sink(index, Elements::Dense(g))?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<PerSampleStats, PerSampleError> {
        let (want_sq, want_sum_sq, want_max) = self.want;
        let cat = |v: Vec<Vec<Tensor<1>>>| -> Result<Vec<Tensor<1>>, PerSampleError> {
            v.into_iter()
                .map(|parts| {
                    if parts.is_empty() {
                        Err(PerSampleError::Shape("a parameter has no statistic".into()))
                    } else {
                        Ok(Tensor::cat(parts, 0))
                    }
                })
                .collect()
        };
        let sum_sq = if want_sum_sq {
            Some(
                self.sum_sq
                    .into_iter()
                    .map(|t| {
                        t.ok_or_else(|| {
                            PerSampleError::Shape("a parameter has no statistic".into())
                        })
                    })
                    .collect::<Result<_, _>>()?,
            )
        } else {
            None
        };
        Ok(PerSampleStats {
            batch_size: self.batch,
            sq_norms: if want_sq {
                Some(cat(self.sq_norms)?)
            } else {
                None
            },
            dots: self.dots.into_iter().map(cat).collect::<Result<_, _>>()?,
            dots_with_grad: None,
            dots_with_previous_grad: None,
            notes: Vec::new(),
            sum_sq,
            abs_max: if want_max {
                Some(cat(self.abs_max)?.into_iter().map(|m| m.max()).collect())
            } else {
                None
            },
        })
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
