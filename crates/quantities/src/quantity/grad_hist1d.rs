//! GradHist1d.

use burn::tensor::IndexingUpdateOp;
use burn::tensor::{Int, Tensor};

use rayon::prelude::*;
use serde::Deserialize;

use super::base::{Quantity, StepContext, check_axis};
use super::bin_adaptation::{BinAdaptation, linspace};
use super::scratch::StepScratch;
use super::spec::{Needs, QuantitySpec, QuantityType, ValueShape};
use crate::persample::{Elements, PerSampleNeeds};
use crate::snapshot::read_values;
use crate::{CockpitError, Histogram1d, ParamEntry, QuantityError, Schedule, Value};

/// Histogram of the individual gradient elements `g_{n,j}` (true per-sample gradients),
/// Cockpit's `GradHist1d`: per parameter `torch.histc(clamp(g, lo, hi), bins, lo, hi)` (equal
/// widths, `hi` in the last bin, outliers piled into the edge bins), counts summed over the
/// parameters (`B·D` in total); `edges = linspace(lo, hi, bins + 1)`.
///
/// Defaults: 100 bins on `(−2, 2)`, no adaptation.
///
/// # Cost
///
/// Linear layers on the fast path hand over rank-one per-sample gradients `a_n e_nᵀ`: their
/// `d_in·d_out` elements are binned on the host without materialising them, by sorting `e_n`
/// and locating the bin boundaries of each row `a_{n,i}·e_n` by binary search (the bin is
/// monotone along a row): `O(B·d_out·log d_out + B·d_in·k·log d_out)` for rows touching `k`
/// bins, instead of `B·d_in·d_out`, on every core. Other parameters are materialised chunk by
/// chunk and binned on the device (integer scatter-add). One host read of `bins` counts.
#[derive(Debug, Clone)]
pub struct GradHist1d {
    schedule: Schedule,
    bins: usize,
    range: (f64, f64),
    adapt: Option<BinAdaptation>,
    counts: StepScratch<Counts>,
}

/// One step's counts: binned on the device and on the host.
#[derive(Debug, Clone, Default)]
struct Counts {
    device: Option<Tensor<1, Int>>,
    host: Option<Vec<u64>>,
}

impl GradHist1d {
    /// GradHist1d with Cockpit's defaults on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            bins: 100,
            range: (-2.0, 2.0),
            adapt: None,
            counts: StepScratch::default(),
        }
    }

    /// Number of bins (at least 1: [`Quantity::check`] refuses 0).
    pub fn with_bins(mut self, bins: usize) -> Self {
        self.bins = bins;
        self
    }

    /// Initial range `(lo, hi)`, finite with `lo < hi` ([`Quantity::check`]).
    pub fn with_range(mut self, lo: f64, hi: f64) -> Self {
        self.range = (lo, hi);
        self
    }

    /// Bin adaptation.
    pub fn with_adaptation(mut self, adapt: BinAdaptation) -> Self {
        self.adapt = Some(adapt);
        self
    }
}

/// Bin indices of `x` on `bins` equal bins over `[lo, hi]` after clamping, as `torch.histc`.
pub(crate) fn bin_index(x: Tensor<1>, lo: f64, hi: f64, bins: usize) -> Tensor<1, Int> {
    x.clamp(lo, hi)
        .sub_scalar(lo)
        .mul_scalar(bins as f64)
        .div_scalar(hi - lo)
        .floor()
        .int()
        .clamp(0, bins as i64 - 1)
}

/// Dense chunks up to this many elements are binned on the host.
const HOST_BINNING_MAX: usize = 1 << 16;

/// The bin of `x` exactly as [`bin_index`] computes it (in `f64`); NaN goes to bin 0.
fn host_bin(x: f64, lo: f64, hi: f64, bins: usize) -> usize {
    if x.is_nan() {
        return 0;
    }
    let k = ((x.clamp(lo, hi) - lo) * bins as f64 / (hi - lo)).floor();
    (k.max(0.0) as usize).min(bins - 1)
}

/// Histogram of every product `a[n·d_in + i]·e[n·d_out + o]` of `b` samples, without forming
/// the products one by one: along a row `a_{n,i}·e_n` with `e_n` sorted, the bin is monotone,
/// so each bin's run is found by binary search.
///
/// # Errors
///
/// As [`count_in_parallel`].
pub(crate) fn outer_histogram(
    a: &[f64],
    e: &[f64],
    b: usize,
    lo: f64,
    hi: f64,
    bins: usize,
) -> Result<Vec<u64>, QuantityError> {
    let (d_in, d_out) = (a.len() / b.max(1), e.len() / b.max(1));
    let sample = |n: usize, counts: &mut [u64]| {
        let mut sorted = e[n * d_out..(n + 1) * d_out].to_vec();
        sorted.sort_by(f64::total_cmp);
        let finite = sorted.iter().all(|v| v.is_finite());
        // Where the products change sign: on a symmetric range with an even number of bins, 0
        // is a bin edge, and most rows of small gradients split there. Trying that split first
        // (and verifying it exactly) saves the binary search for them.
        let negatives = sorted.iter().filter(|v| **v < 0.0).count();
        let positives = sorted.iter().filter(|v| **v > 0.0).count();
        for &ai in &a[n * d_in..(n + 1) * d_in] {
            if !finite || !ai.is_finite() {
                for v in &sorted {
                    counts[host_bin(ai * v, lo, hi, bins)] += 1;
                }
                continue;
            }
            // Make the row non-decreasing: reverse the order for a negative factor.
            let at = |k: usize| {
                let v = if ai < 0.0 {
                    sorted[d_out - 1 - k]
                } else {
                    sorted[k]
                };
                host_bin(ai * v, lo, hi, bins)
            };
            let mut p = 0;
            while p < d_out {
                let bin = at(p);
                if at(d_out - 1) == bin {
                    counts[bin] += (d_out - p) as u64;
                    break;
                }
                let split = if ai < 0.0 { positives } else { negatives };
                if p < split && split < d_out && at(split - 1) == bin && at(split) != bin {
                    counts[bin] += (split - p) as u64;
                    p = split;
                    continue;
                }
                // The last position of this bin's run: at(l) == bin, at(h) != bin.
                let (mut l, mut h) = (p, d_out - 1);
                while h - l > 1 {
                    let m = (l + h) / 2;
                    if at(m) == bin { l = m } else { h = m }
                }
                counts[bin] += (l - p + 1) as u64;
                p = h;
            }
        }
    };
    count_in_parallel(b, bins, sample)
}

/// Runs `sample(n, counts)` for every sample `n < samples` on rayon's pool, each task into its
/// own `bins` counts, and adds them up.
///
/// # Errors
///
/// [`QuantityError::HostWorker`] if a worker panicked: never a silently short histogram.
pub(crate) fn count_in_parallel(
    samples: usize,
    bins: usize,
    sample: impl Fn(usize, &mut [u64]) + Sync,
) -> Result<Vec<u64>, QuantityError> {
    let count = || {
        (0..samples)
            .into_par_iter()
            .fold(
                || vec![0u64; bins],
                |mut counts, n| {
                    sample(n, &mut counts);
                    counts
                },
            )
            .reduce(
                || vec![0u64; bins],
                |mut total, part| {
                    for (t, c) in total.iter_mut().zip(part) {
                        *t += c;
                    }
                    total
                },
            )
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(count)).map_err(|payload| {
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".into());
        QuantityError::HostWorker(format!("histogram counting: {reason}"))
    })
}

/// Adds one count per index to `counts` (`[n]` zeros when `None`).
pub(crate) fn count_into(
    counts: Option<Tensor<1, Int>>,
    index: Tensor<1, Int>,
    n: usize,
) -> Tensor<1, Int> {
    let counts = counts.unwrap_or_else(|| Tensor::zeros([n], &index.device()));
    let ones = index.ones_like();
    counts.scatter(0, index, ones, IndexingUpdateOp::Add)
}

/// GradHist1d's settings (Cockpit's keyword arguments).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GradHist1dSettings {
    /// Number of bins (Cockpit: 100).
    pub bins: usize,
    /// Initial range `[lo, hi]` (Cockpit: `[-2, 2]`).
    pub range: (f64, f64),
    /// Bin adaptation, as Cockpit writes it: `"GradAbsMax(linear(1), padding=0.1)"`.
    pub adapt: Option<BinAdaptation>,
}

impl Default for GradHist1dSettings {
    fn default() -> Self {
        Self {
            bins: 100,
            range: (-2.0, 2.0),
            adapt: None,
        }
    }
}

impl QuantityType for GradHist1d {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "GradHist1d",
        shape: ValueShape::Histogram1d,
        needs: Needs {
            per_sample: true,
            ..Needs::NOTHING
        },
    };
    type Settings = GradHist1dSettings;

    fn with_settings(schedule: Schedule, settings: GradHist1dSettings) -> Self {
        let (lo, hi) = settings.range;
        Self {
            adapt: settings.adapt,
            ..Self::new(schedule)
                .with_bins(settings.bins)
                .with_range(lo, hi)
        }
    }
}

impl Quantity for GradHist1d {
    fn name(&self) -> &str {
        Self::SPEC.name
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_axis(Self::SPEC.name, "", self.bins, self.range)
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        PerSampleNeeds {
            elements: true,
            abs_max: self
                .adapt
                .as_ref()
                .is_some_and(|a| a.needs_grad_abs_max(step)),
            ..PerSampleNeeds::NONE
        }
    }

    fn accept_chunk(
        &mut self,
        step: usize,
        _index: usize,
        _entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError> {
        let (lo, hi) = self.range;
        let bins = self.bins;
        let counts = self.counts.at(step);
        match elements {
            Elements::Outer { a, e } => {
                let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
                let a = read_values(a.reshape([b * d_in]))?;
                let e = read_values(e.reshape([b * d_out]))?;
                let outer = outer_histogram(&a, &e, b, lo, hi, bins)?;
                let host = counts.host.get_or_insert_with(|| vec![0; bins]);
                for (total, c) in host.iter_mut().zip(outer) {
                    *total += c;
                }
            }
            // Small chunks (biases) are binned on the host: one read instead of a scatter.
            Elements::Dense(chunk) if chunk.shape().num_elements() <= HOST_BINNING_MAX => {
                let n = chunk.shape().num_elements();
                let values = read_values(chunk.reshape([n]))?;
                let host = counts.host.get_or_insert_with(|| vec![0; bins]);
                for v in values {
                    host[host_bin(v, lo, hi, bins)] += 1;
                }
            }
            Elements::Dense(chunk) => {
                let n = chunk.shape().num_elements();
                let index = bin_index(chunk.reshape([n]), lo, hi, bins);
                counts.device = Some(count_into(counts.device.take(), index, bins));
            }
        }
        Ok(())
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        // Taken first: a failed per-sample pass must not leave partial counts behind.
        let counts = self.counts.take(ctx.step);
        ctx.per_sample_stats()?;
        let mut hist = match counts.device {
            Some(counts) => read_values(counts.float())?,
            None => vec![0.0; self.bins],
        };
        if let Some(host) = counts.host {
            for (h, c) in hist.iter_mut().zip(host) {
                *h += c as f64;
            }
        }
        let (lo, hi) = self.range;
        let value = Value::Hist1d(Histogram1d {
            hist,
            edges: linspace(lo, hi, self.bins + 1),
        });
        if let Some(adapt) = &self.adapt
            && let Some(range) = adapt.adapt(ctx)?
        {
            self.range = range;
        }
        Ok(Some((ctx.step, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The factored histogram equals binning every product one by one, for rows of both signs,
    /// zeros, values on bin edges and outside the range.
    #[test]
    fn outer_histogram_equals_brute_force() {
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 6.0 - 3.0
        };
        let (b, d_in, d_out) = (5, 7, 33);
        let mut a: Vec<f64> = (0..b * d_in).map(|_| next()).collect();
        let mut e: Vec<f64> = (0..b * d_out).map(|_| next() * 0.3).collect();
        a[3] = 0.0;
        e[4] = 0.0;
        e[5] = 0.04 / a[0]; // a product exactly on an edge
        for (lo, hi, bins) in [(-2.0, 2.0, 100), (-1.0456, 1.0456, 20), (-0.5, 1.5, 7)] {
            let mut expected = vec![0u64; bins];
            for n in 0..b {
                for i in 0..d_in {
                    for o in 0..d_out {
                        expected[host_bin(a[n * d_in + i] * e[n * d_out + o], lo, hi, bins)] += 1;
                    }
                }
            }
            assert_eq!(
                outer_histogram(&a, &e, b, lo, hi, bins).ok(),
                Some(expected),
                "range ({lo}, {hi}), {bins} bins"
            );
        }
    }
}

#[cfg(test)]
mod regressions {
    use burn::nn::LinearConfig;
    use burn::tensor::{Device, Tensor};

    use super::*;
    use crate::persample::PerSampleStats;
    use crate::{Snapshot, StepInfo};

    /// A worker that panics makes the count an error, not a histogram short of its samples.
    #[test]
    fn a_panicking_worker_is_an_error() {
        let counted = count_in_parallel(64, 4, |n, counts: &mut [u64]| {
            assert!(n != 37, "sample 37 is broken");
            counts[n % 4] += 1;
        });
        let Err(QuantityError::HostWorker(reason)) = counted else {
            panic!("expected an error, got {counted:?}");
        };
        assert!(reason.contains("sample 37 is broken"), "{reason}");
        assert_eq!(
            count_in_parallel(64, 4, |n, counts: &mut [u64]| counts[n % 4] += 1).ok(),
            Some(vec![16; 4])
        );
    }

    /// Chunks binned at a step whose per-sample pass then failed do not show up in the next
    /// tracked step's histogram.
    #[test]
    fn a_failed_step_leaks_no_counts() {
        let device = Device::flex().autodiff();
        let model = LinearConfig::new(2, 1).init(&device);
        let params = Snapshot::of_params(&model);
        let info = StepInfo::new(Tensor::<1>::from_floats([1.0], &device));
        let entry = &params.entries()[0];
        let chunk = |values: &[f32]| {
            Elements::Dense(Tensor::<1>::from_floats(values, &device).reshape([1, values.len()]))
        };
        let mut hist = GradHist1d::new(Schedule::every_step()).with_bins(4);

        // Step 0: two elements binned, then the per-sample pass fails.
        hist.accept_chunk(0, 0, entry, chunk(&[-1.5, 1.5])).unwrap();
        let failure = QuantityError::Read("device lost".into());
        let failed = StepContext {
            step: 0,
            params: &params,
            grads: &params,
            info: &info,
            loss: 1.0,
            per_sample: Err(&failure),
        };
        assert!(hist.compute(&failed).is_err());

        // Step 1: one element.
        hist.accept_chunk(1, 0, entry, chunk(&[0.5])).unwrap();
        let stats = PerSampleStats::default();
        let ok = StepContext {
            step: 1,
            per_sample: Ok(Some(&stats)),
            ..failed
        };
        let Some((1, Value::Hist1d(h))) = hist.compute(&ok).unwrap() else {
            panic!("a histogram at step 1");
        };
        assert_eq!(h.hist, vec![0.0, 0.0, 1.0, 0.0]);
    }
}

#[cfg(test)]
mod timing {
    /// `cargo test --release -p cockpit-quantities -- --ignored --nocapture outer_histogram_timing`
    #[test]
    #[ignore = "timing probe"]
    fn outer_histogram_timing() {
        let (b, d_in, d_out) = (128, 784, 256);
        let a: Vec<f64> = (0..b * d_in)
            .map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5)
            .collect();
        let e: Vec<f64> = (0..b * d_out)
            .map(|i| (((i * 104729) % 1000) as f64 / 1000.0 - 0.5) * 0.01)
            .collect();
        let start = std::time::Instant::now();
        let counts = super::outer_histogram(&a, &e, b, -2.0, 2.0, 100).unwrap_or_default();
        println!(
            "outer_histogram {b}x{d_in}x{d_out}: {:?}, total {}",
            start.elapsed(),
            counts.iter().sum::<u64>()
        );
    }
}
