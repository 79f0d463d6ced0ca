//! GradHist2d.

use burn::tensor::{Int, Tensor};

use super::base::{Quantity, StepContext};
use super::bin_adaptation::{BinAdaptation, linspace};
use super::grad_hist1d::count_into;
use crate::persample::{Elements, PerSampleNeeds};
use crate::snapshot::read_values;
use crate::{Histogram2d, ParamEntry, QuantityError, Schedule, Value};

/// Joint histogram of individual gradient elements `g_{n,j}` (x) and the value of the same
/// parameter element `θ_j` (y, broadcast over the batch), Cockpit's `GradHist2d`: both clamped
/// to `[lo + w/2, hi − w/2]` (`w` the bin width), bin `(⌊(x − x_lo)/w_x⌋, ⌊(y − y_lo)/w_y⌋)`,
/// integer counts `[x bins, y bins]` summed over the parameters; with `keep_individual`, one
/// histogram per parameter as well.
///
/// Defaults: bins `(40, 50)`, ranges `((−1, 1), (−2, 2))`, no adaptation.
///
/// # Cost
///
/// Materialises the per-sample gradients chunk by chunk and scatters `B·D` pairs on the
/// device; one host read of `x·y` counts (per parameter with `keep_individual`).
#[derive(Debug, Clone)]
pub struct GradHist2d {
    schedule: Schedule,
    name: String,
    bins: (usize, usize),
    range: ((f64, f64), (f64, f64)),
    adapt: (Option<BinAdaptation>, Option<BinAdaptation>),
    keep_individual: bool,
    counts: Vec<Option<Tensor<1, Int>>>,
}

impl GradHist2d {
    /// GradHist2d with Cockpit's defaults on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            name: "GradHist2d".into(),
            bins: (40, 50),
            range: ((-1.0, 1.0), (-2.0, 2.0)),
            adapt: (None, None),
            keep_individual: false,
            counts: Vec::new(),
        }
    }

    /// Bins along x (gradients) and y (parameters).
    pub fn with_bins(mut self, x: usize, y: usize) -> Self {
        self.bins = (x.max(1), y.max(1));
        self
    }

    /// Initial ranges.
    pub fn with_range(mut self, x: (f64, f64), y: (f64, f64)) -> Self {
        self.range = (x, y);
        self
    }

    /// Bin adaptation of each axis.
    pub fn with_adaptation(mut self, x: Option<BinAdaptation>, y: Option<BinAdaptation>) -> Self {
        self.adapt = (x, y);
        self
    }

    /// Also keep one histogram per parameter (`param_groups`, `param_k` in the log).
    pub fn keep_individual(mut self, keep: bool) -> Self {
        self.keep_individual = keep;
        self
    }

    /// The output key.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

fn axis_index(v: Tensor<2>, (lo, hi): (f64, f64), bins: usize) -> Tensor<2, Int> {
    let width = (hi - lo) / bins as f64;
    v.clamp(lo + width / 2.0, hi - width / 2.0)
        .sub_scalar(lo)
        .div_scalar(width)
        .floor()
        .int()
        .clamp(0, bins as i64 - 1)
}

impl Quantity for GradHist2d {
    fn name(&self) -> &str {
        &self.name
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        let grad_max =
            |a: &Option<BinAdaptation>| a.as_ref().is_some_and(|a| a.needs_grad_abs_max(step));
        PerSampleNeeds {
            elements: true,
            abs_max: grad_max(&self.adapt.0) || grad_max(&self.adapt.1),
            ..PerSampleNeeds::NONE
        }
    }

    fn accept_chunk(
        &mut self,
        _step: usize,
        index: usize,
        entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError> {
        let chunk = elements.dense();
        let [b, numel] = chunk.dims();
        let (xb, yb) = self.bins;
        let y = entry.value.clone().reshape([1, numel]).repeat_dim(0, b);
        let ix = axis_index(chunk, self.range.0, xb);
        let iy = axis_index(y, self.range.1, yb);
        let flat = (ix.mul_scalar(yb as i64) + iy).reshape([b * numel]);
        if self.counts.len() <= index {
            self.counts.resize(index + 1, None);
        }
        self.counts[index] = Some(count_into(self.counts[index].take(), flat, xb * yb));
        Ok(())
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        ctx.per_sample_stats()?;
        let (xb, yb) = self.bins;
        let ((xlo, xhi), (ylo, yhi)) = self.range;
        let (x_edges, y_edges) = (linspace(xlo, xhi, xb + 1), linspace(ylo, yhi, yb + 1));
        let counts: Vec<Tensor<1, Int>> = std::mem::take(&mut self.counts)
            .into_iter()
            .flatten()
            .collect();
        let per_param: Vec<Vec<i64>> = if counts.is_empty() {
            Vec::new()
        } else {
            let n = counts.len();
            let all = read_values(Tensor::cat(counts, 0).float())?;
            (0..n)
                .map(|k| {
                    all[k * xb * yb..(k + 1) * xb * yb]
                        .iter()
                        .map(|c| *c as i64)
                        .collect()
                })
                .collect()
        };
        let mut total = vec![0i64; xb * yb];
        for hist in &per_param {
            for (t, c) in total.iter_mut().zip(hist) {
                *t += c;
            }
        }
        let histogram = |hist: Vec<i64>| Histogram2d {
            hist,
            bins: (xb, yb),
            x_edges: x_edges.clone(),
            y_edges: y_edges.clone(),
            individual: Vec::new(),
        };
        let mut value = histogram(total);
        if self.keep_individual {
            value.individual = per_param.into_iter().map(histogram).collect();
        }
        let x_range = match &self.adapt.0 {
            Some(adapt) => adapt.adapt(ctx)?,
            None => None,
        };
        let y_range = match &self.adapt.1 {
            Some(adapt) => adapt.adapt(ctx)?,
            None => None,
        };
        if let Some(x) = x_range {
            self.range.0 = x;
        }
        if let Some(y) = y_range {
            self.range.1 = y;
        }
        Ok(Some((ctx.step, Value::Hist2d(value))))
    }
}
