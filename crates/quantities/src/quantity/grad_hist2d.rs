//! GradHist2d.

use burn::tensor::{Int, Tensor};
use serde::Deserialize;

use super::base::{Quantity, StepContext, check_axis};
use super::bin_adaptation::{BinAdaptation, linspace};
use super::grad_hist1d::{count_in_parallel, count_into};
use super::scratch::StepScratch;
use super::spec::{Needs, QuantitySpec, QuantityType, ValueShape};
use crate::persample::{Elements, PerSampleNeeds};
use crate::snapshot::read_values;
use crate::{CockpitError, Histogram2d, ParamEntry, QuantityError, Schedule, Value};

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
    bins: (usize, usize),
    range: ((f64, f64), (f64, f64)),
    adapt: (Option<BinAdaptation>, Option<BinAdaptation>),
    keep_individual: bool,
    counts: StepScratch<Counts>,
}

/// One step's counts per parameter: binned on the device and on the host.
#[derive(Debug, Clone, Default)]
struct Counts {
    device: Vec<Option<Tensor<1, Int>>>,
    host: Vec<Option<Vec<u64>>>,
}

impl GradHist2d {
    /// GradHist2d with Cockpit's defaults on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            bins: (40, 50),
            range: ((-1.0, 1.0), (-2.0, 2.0)),
            adapt: (None, None),
            keep_individual: false,
            counts: StepScratch::default(),
        }
    }

    /// Bins along x (gradients) and y (parameters).
    pub fn with_bins(mut self, x: usize, y: usize) -> Self {
        self.bins = (x, y);
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
}

/// The bin of `v` as [`axis_index`] computes it (in `f64`); NaN goes to bin 0.
fn host_axis_bin(v: f64, (lo, hi): (f64, f64), bins: usize) -> usize {
    if v.is_nan() {
        return 0;
    }
    let width = (hi - lo) / bins as f64;
    let k = ((v.clamp(lo + width / 2.0, hi - width / 2.0) - lo) / width).floor();
    (k.max(0.0) as usize).min(bins - 1)
}

/// Joint histogram of the products `a_{n,i}·e_{n,o}` (x) and `θ[i·d_out + o]` (y) of `b`
/// samples, without forming the products one by one: along a row sorted by `e_n` the x-bin is
/// monotone, so its runs are found by binary search and only the y-bins are looked up.
pub(crate) fn outer_histogram2d(
    a: &[f64],
    e: &[f64],
    theta: &[f64],
    b: usize,
    range: ((f64, f64), (f64, f64)),
    (xb, yb): (usize, usize),
) -> Result<Vec<u64>, QuantityError> {
    let (d_in, d_out) = (a.len() / b.max(1), e.len() / b.max(1));
    let ybin: Vec<usize> = theta
        .iter()
        .map(|t| host_axis_bin(*t, range.1, yb))
        .collect();
    let sample = |n: usize, counts: &mut [u64]| {
        let row = &e[n * d_out..(n + 1) * d_out];
        let mut order: Vec<usize> = (0..d_out).collect();
        order.sort_by(|&p, &q| row[p].total_cmp(&row[q]));
        let finite = row.iter().all(|v| v.is_finite());
        for (i, &ai) in a[n * d_in..(n + 1) * d_in].iter().enumerate() {
            let ys = &ybin[i * d_out..(i + 1) * d_out];
            if !finite || !ai.is_finite() {
                for o in 0..d_out {
                    counts[host_axis_bin(ai * row[o], range.0, xb) * yb + ys[o]] += 1;
                }
                continue;
            }
            let pos = |k: usize| {
                if ai < 0.0 {
                    order[d_out - 1 - k]
                } else {
                    order[k]
                }
            };
            let at = |k: usize| host_axis_bin(ai * row[pos(k)], range.0, xb);
            let mut p = 0;
            while p < d_out {
                let bin = at(p);
                let end = if at(d_out - 1) == bin {
                    d_out
                } else {
                    let (mut l, mut h) = (p, d_out - 1);
                    while h - l > 1 {
                        let m = (l + h) / 2;
                        if at(m) == bin { l = m } else { h = m }
                    }
                    h
                };
                for k in p..end {
                    counts[bin * yb + ys[pos(k)]] += 1;
                }
                p = end;
            }
        }
    };
    count_in_parallel(b, xb * yb, sample)
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

/// GradHist2d's settings (Cockpit's keyword arguments).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GradHist2dSettings {
    /// Bins along x (gradient elements) and y (parameters) (Cockpit: `[40, 50]`).
    pub bins: (usize, usize),
    /// Initial ranges (Cockpit: `[[-1, 1], [-2, 2]]`).
    pub range: ((f64, f64), (f64, f64)),
    /// Bin adaptation per axis, as Cockpit writes it (`null` for none).
    pub adapt: Option<(Option<BinAdaptation>, Option<BinAdaptation>)>,
    /// Also keep one histogram per parameter.
    pub keep_individual: bool,
}

impl Default for GradHist2dSettings {
    fn default() -> Self {
        Self {
            bins: (40, 50),
            range: ((-1.0, 1.0), (-2.0, 2.0)),
            adapt: None,
            keep_individual: false,
        }
    }
}

impl QuantityType for GradHist2d {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "GradHist2d",
        shape: ValueShape::Histogram2d,
        needs: Needs {
            per_sample: true,
            ..Needs::NOTHING
        },
    };
    type Settings = GradHist2dSettings;

    fn with_settings(schedule: Schedule, settings: GradHist2dSettings) -> Self {
        let (x, y) = settings.adapt.unwrap_or_default();
        Self::new(schedule)
            .with_bins(settings.bins.0, settings.bins.1)
            .with_range(settings.range.0, settings.range.1)
            .with_adaptation(x, y)
            .keep_individual(settings.keep_individual)
    }
}

impl Quantity for GradHist2d {
    fn name(&self) -> &str {
        Self::SPEC.name
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_axis(Self::SPEC.name, "x axis: ", self.bins.0, self.range.0)?;
        check_axis(Self::SPEC.name, "y axis: ", self.bins.1, self.range.1)
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
        step: usize,
        index: usize,
        entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError> {
        let (xb, yb) = self.bins;
        let (range, bins) = (self.range, self.bins);
        let scratch = self.counts.at(step);
        if let Elements::Outer { a, e } = &elements {
            let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
            let a = read_values(a.clone().reshape([b * d_in]))?;
            let e = read_values(e.clone().reshape([b * d_out]))?;
            let theta = read_values(entry.value.clone())?;
            let counts = outer_histogram2d(&a, &e, &theta, b, range, bins)?;
            if scratch.host.len() <= index {
                scratch.host.resize(index + 1, None);
            }
            let host = scratch.host[index].get_or_insert_with(|| vec![0; xb * yb]);
            for (total, c) in host.iter_mut().zip(counts) {
                *total += c;
            }
            return Ok(());
        }
        let chunk = elements.dense();
        let [b, numel] = chunk.dims();
        let y = entry.value.clone().reshape([1, numel]).repeat_dim(0, b);
        let ix = axis_index(chunk, range.0, xb);
        let iy = axis_index(y, range.1, yb);
        let flat = (ix.mul_scalar(yb as i64) + iy).reshape([b * numel]);
        if scratch.device.len() <= index {
            scratch.device.resize(index + 1, None);
        }
        scratch.device[index] = Some(count_into(scratch.device[index].take(), flat, xb * yb));
        Ok(())
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        // Taken first: a failed per-sample pass must not leave partial counts behind.
        let Counts {
            device: device_counts,
            host: host_counts,
        } = self.counts.take(ctx.step);
        ctx.per_sample_stats()?;
        let (xb, yb) = self.bins;
        let ((xlo, xhi), (ylo, yhi)) = self.range;
        let (x_edges, y_edges) = (linspace(xlo, xhi, xb + 1), linspace(ylo, yhi, yb + 1));
        let params = device_counts.len().max(host_counts.len());
        let mut per_param: Vec<Vec<i64>> = vec![vec![0; xb * yb]; params];
        let on_device: Vec<(usize, Tensor<1, Int>)> = device_counts
            .into_iter()
            .enumerate()
            .filter_map(|(k, c)| c.map(|c| (k, c)))
            .collect();
        if !on_device.is_empty() {
            let indices: Vec<usize> = on_device.iter().map(|(k, _)| *k).collect();
            let all = read_values(
                Tensor::cat(on_device.into_iter().map(|(_, c)| c).collect(), 0).float(),
            )?;
            for (slot, k) in indices.into_iter().enumerate() {
                for (t, c) in per_param[k]
                    .iter_mut()
                    .zip(&all[slot * xb * yb..(slot + 1) * xb * yb])
                {
                    *t += *c as i64;
                }
            }
        }
        for (k, host) in host_counts.into_iter().enumerate() {
            if let Some(host) = host {
                for (t, c) in per_param[k].iter_mut().zip(host) {
                    *t += c as i64;
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The factored 2-d histogram equals pairing every product with its parameter one by one.
    #[test]
    fn outer_histogram2d_equals_brute_force() {
        let mut state = 11u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        };
        let (b, d_in, d_out) = (4, 6, 29);
        let mut a: Vec<f64> = (0..b * d_in).map(|_| next()).collect();
        let e: Vec<f64> = (0..b * d_out).map(|_| next() * 0.4).collect();
        let theta: Vec<f64> = (0..d_in * d_out).map(|_| next()).collect();
        a[2] = 0.0;
        for (range, bins) in [
            (((-1.0, 1.0), (-2.0, 2.0)), (40, 50)),
            (((-0.3, 0.7), (-1.0, 1.5)), (10, 12)),
        ] {
            let mut expected = vec![0u64; bins.0 * bins.1];
            for n in 0..b {
                for i in 0..d_in {
                    for o in 0..d_out {
                        let x = host_axis_bin(a[n * d_in + i] * e[n * d_out + o], range.0, bins.0);
                        let y = host_axis_bin(theta[i * d_out + o], range.1, bins.1);
                        expected[x * bins.1 + y] += 1;
                    }
                }
            }
            assert_eq!(
                outer_histogram2d(&a, &e, &theta, b, range, bins).ok(),
                Some(expected)
            );
        }
    }
}
