//! GradHist1d.

use serde::Deserialize;

use super::base::{Enqueued, Quantity, QuantityType, StepContext, awaited, grad_abs_max};
use super::{Carried, CarriedError};
use crate::histogram::{BinAdaptation, StepScratch, linspace};
use super::spec::{Needs, QuantitySpec, ValueShape};
use crate::histogram::{BinsElements, HistogramEngine};
use crate::histogram::device::{DeviceAxis, RunningCounts, placement};
use crate::histogram::{Axis, Rule, add_into, check_axis, count_in_parallel, outer_histogram};
use crate::persample::{Elements, PerSampleNeeds, Statistic};
use crate::readback::{Readable, read_into};
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
/// Where the counting runs is the [`HistogramEngine`] (`Auto`: the device on a graphics
/// card, the host on CPU backends and software rasterizers).
///
/// On the device (CubeCL backends, float32), each chunk's elements get their bin from the
/// rule's formula, corrected in registers against the exact thresholds, and are counted in one
/// launch of `cockpit-kernels`' counting kernel (shared-memory counts merged with atomic
/// adds); rank-one gradients are never formed: a row within one bin or split at zero is counted
/// whole, a row spanning more bins as runs along its sample's column factors sorted in shared
/// memory (a search per bin edge, or a walk), as on the host. Other devices and
/// types use the tensor-operation path (the same formula and correction, a scatter-add). `bins`
/// integers per step join the step's one batched read, and nothing else is read.
///
/// On the host, linear layers on the fast path hand over rank-one per-sample gradients
/// `a_n e_nᵀ`, read to the host once (`B·(d_in + d_out)` numbers per layer) and binned there without forming
/// their `d_in·d_out` elements: a row `a_{n,i}·e_n` whose products all lie either side of
/// zero in the two bins around it (small gradients) costs `O(1)`, a row spanning more bins a
/// binary search per bin edge over the sorted factors, on every core (the histogram module's
/// `outer_histogram`). Other parameters are materialised chunk by chunk, read to a reused host
/// buffer (one chunk, at most `Request::chunk_elements` numbers) and binned on every core.
#[derive(Debug, Clone)]
pub struct GradHist1d {
    schedule: Schedule,
    bins: usize,
    range: (f64, f64),
    adapt: Option<BinAdaptation>,
    engine: HistogramEngine,
    /// This step's counts, once a chunk was binned.
    counts: StepScratch<Counts>,
    /// The step whose device counts are being read, with its host part.
    awaiting: Option<Awaiting>,
    axis: Option<Axis>,
    device_axis: Option<DeviceAxis>,
    /// Host copies of the factors, reused across layers and steps.
    host: (Vec<f64>, Vec<f64>),
    /// Whether the "every value in one bin" warning was given (it is given once).
    warned_one_bin: bool,
    warnings: Vec<String>,
}

impl GradHist1d {
    /// GradHist1d with Cockpit's defaults on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            bins: 100,
            range: (-2.0, 2.0),
            adapt: None,
            engine: HistogramEngine::default(),
            counts: StepScratch::default(),
            awaiting: None,
            axis: None,
            device_axis: None,
            host: (Vec::new(), Vec::new()),
            warned_one_bin: false,
            warnings: Vec::new(),
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

    /// Where the elements are counted (default [`HistogramEngine::Auto`]).
    pub fn with_engine(mut self, engine: HistogramEngine) -> Self {
        self.engine = engine;
        self
    }

    /// The histogram of a step from its host counts and the device's counts (read back).
    fn value(&mut self, awaiting: Awaiting, device: &[f64]) -> (usize, Value) {
        let Awaiting {
            step,
            range: (lo, hi),
            mut host,
            ..
        } = awaiting;
        for (total, count) in host.iter_mut().zip(device) {
            *total += *count as u64;
        }
        let hist: Vec<f64> = host.into_iter().map(|c| c as f64).collect();
        if let Some(message) = one_bin_warning(&hist, (lo, hi)).filter(|_| !self.warned_one_bin) {
            self.warned_one_bin = true;
            self.warnings
                .push(format!("step {step}: GradHist1d: {message}"));
        }
        let edges = linspace(lo, hi, hist.len() + 1);
        (step, Value::Hist1d(Histogram1d { hist, edges }))
    }
}

/// One step's counts: binned on the host, and on the device.
#[derive(Debug, Clone, Default)]
struct Counts {
    host: Option<Vec<u64>>,
    device: RunningCounts,
}

/// A step waiting for its device counts (where it has any) and its adaptation's maxima.
#[derive(Debug, Clone)]
struct Awaiting {
    step: usize,
    range: (f64, f64),
    host: Vec<u64>,
    /// Whether the read starts with the device's `bins` counts.
    device_counts: bool,
}

/// Elements per task when a dense chunk is binned on the host.
const DENSE_BLOCK: usize = 1 << 16;

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
    /// Where the elements are counted: `"auto"` (default), `"host"` or `"device"`.
    pub engine: HistogramEngine,
}

impl Default for GradHist1dSettings {
    fn default() -> Self {
        Self {
            bins: 100,
            range: (-2.0, 2.0),
            adapt: None,
            engine: HistogramEngine::default(),
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
                .with_engine(settings.engine)
        }
    }
}

impl Quantity for GradHist1d {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_axis(Self::SPEC.name, "", self.bins, self.range)
    }

    fn carry(&self) -> Result<Carried, QuantityError> {
        Ok(Carried::new().with_numbers("range", vec![self.range.0, self.range.1]))
    }

    fn restore(&mut self, carried: &Carried, _params: &crate::Snapshot) -> Result<(), CarriedError> {
        let &[lo, hi] = carried.numbers(self.name(), "range")? else {
            return Err(CarriedError::Missing {
                owner: self.name().into(),
                part: "range".into(),
            });
        };
        self.range = (lo, hi);
        self.axis = None;
        self.device_axis = None;
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn bins_elements(&mut self) -> Option<&mut dyn BinsElements> {
        Some(self)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        match &self.adapt {
            Some(a) if a.needs_grad_abs_max(step) => {
                PerSampleNeeds::ELEMENTS.with(Statistic::AbsMax)
            }
            _ => PerSampleNeeds::ELEMENTS,
        }
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        // Taken first: a failed per-sample pass must not leave partial counts behind.
        let counts = self.counts.take(ctx.step);
        self.awaiting = None;
        ctx.per_sample_stats()?;
        // The adaptation's maxima join the step's batched read: the new range is for the
        // steps after this one.
        let maxima = match &self.adapt {
            Some(adapt) => adapt.maxima(ctx.step, ctx.params, || grad_abs_max(ctx))?,
            None => None,
        };
        let awaiting = Awaiting {
            step: ctx.step,
            range: self.range,
            host: counts.host.unwrap_or_else(|| vec![0; self.bins]),
            device_counts: !counts.device.is_empty(),
        };
        let reads: Vec<Readable> = counts
            .device
            .total()
            .map(Readable::from)
            .into_iter()
            .chain(maxima.map(Readable::from))
            .collect();
        if reads.is_empty() {
            return Ok(Enqueued::Done(Some(self.value(awaiting, &[]))));
        }
        self.awaiting = Some(awaiting);
        Ok(Enqueued::Read(reads))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let awaiting = awaited(&mut self.awaiting)?;
        let counted = if awaiting.device_counts {
            self.bins.min(host.len())
        } else {
            0
        };
        let (device, maxima) = host.split_at(counted);
        if let Some(adapt) = &self.adapt
            && !maxima.is_empty()
        {
            self.range = adapt.range(maxima);
        }
        Ok(Some(self.value(awaiting, device)))
    }
}

impl BinsElements for GradHist1d {
    fn use_histogram_engine(&mut self, engine: HistogramEngine) {
        self.engine = engine;
    }

    fn counts_elements_on(&self, device: &burn::tensor::Device) -> bool {
        self.engine.counts_on(device)
    }

    fn accept_chunk(
        &mut self,
        step: usize,
        _index: usize,
        _entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError> {
        let bins = self.bins;
        let axis = Axis::cached(&mut self.axis, Rule::Histc, self.range, bins);
        let (device, dtype) = placement(&elements);
        if self.engine.counts_on(&device) {
            let axis = DeviceAxis::cached(&mut self.device_axis, axis, &device, dtype);
            let counts = self.counts.at(step);
            counts.device.add_elements(axis, elements);
            return Ok(());
        }
        let binned = match elements {
            Elements::Outer { a, e } => {
                let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
                let (host_a, host_e) = &mut self.host;
                read_into(a.reshape([b * d_in]), host_a)?;
                read_into(e.reshape([b * d_out]), host_e)?;
                outer_histogram(host_a, host_e, b, axis)?
            }
            // Dense chunks are read once into a reused host buffer and binned on rayon's pool.
            Elements::Dense(chunk) => {
                let n = chunk.shape().num_elements();
                let (values, _) = &mut self.host;
                read_into(chunk.reshape([n]), values)?;
                let values = &values[..];
                count_in_parallel(n.div_ceil(DENSE_BLOCK), bins, |k, counts| {
                    let end = ((k + 1) * DENSE_BLOCK).min(values.len());
                    for v in &values[k * DENSE_BLOCK..end] {
                        counts[axis.bin(*v)] += 1;
                    }
                })?
            }
        };
        let counts = self
            .counts
            .at(step)
            .host
            .get_or_insert_with(|| vec![0; bins]);
        add_into(counts, &binned);
        Ok(())
    }
}

/// A warning when every value fell into one bin of several: the histogram then shows
/// nothing of the distribution (a range far too wide, or values all outside it).
pub(crate) fn one_bin_warning(hist: &[f64], (lo, hi): (f64, f64)) -> Option<String> {
    let total: f64 = hist.iter().sum();
    let (index, top) = hist.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    if hist.len() < 2 || total < 2.0 || *top < total {
        return None;
    }
    let width = (hi - lo) / hist.len() as f64;
    let (a, b) = (lo + width * index as f64, lo + width * (index + 1) as f64);
    let why = if index == 0 || index + 1 == hist.len() {
        "values outside the range are piled into the edge bins; the range may be too narrow"
    } else {
        "the range may be far too wide for these gradients"
    };
    Some(format!(
        "all {total} values fell into one bin, [{a:e}, {b:e}] of ({lo:e}, {hi:e}): {why} \
         (set `range`, or `adapt` it to the gradients). Said once."
    ))
}

#[cfg(test)]
mod regressions {
    use burn::nn::LinearConfig;
    use burn::tensor::{Device, Tensor};

    use super::*;
    use crate::persample::PerSampleStats;
    use crate::{Snapshot, StepInfo};

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
        let failure = QuantityError::ReadCount {
            expected: 1,
            got: 0,
        };
        let failed = StepContext {
            step: 0,
            params: &params,
            grads: &params,
            info: &info,
            loss: 1.0.into(),
            grad_sq_norms: Default::default(),
            grad_sq_norm: Default::default(),
            sample_sq_norms: Default::default(),
            sample_grad_dots: Default::default(),
            per_sample: Err(&failure),
            sgd_contradicted: None,
        };
        assert!(hist.compute(&failed).is_err());

        // Step 1: one element.
        hist.accept_chunk(1, 0, entry, chunk(&[0.5])).unwrap();
        let stats = PerSampleStats::default();
        let ok = StepContext {
            step: 1,
            per_sample: Ok(Some(&stats)),
            sgd_contradicted: None,
            ..failed
        };
        let Some((1, Value::Hist1d(h))) = hist.compute(&ok).unwrap() else {
            panic!("a histogram at step 1");
        };
        assert_eq!(h.hist, vec![0.0, 0.0, 1.0, 0.0]);
    }
}

#[cfg(test)]
mod one_bin {
    use super::one_bin_warning;

    #[test]
    fn warns_only_when_one_bin_holds_everything() {
        let wide = one_bin_warning(&[0.0, 7.0, 0.0, 0.0], (-1e300, 1e300)).unwrap();
        assert!(
            wide.contains("all 7 values") && wide.contains("too wide"),
            "{wide}"
        );
        let narrow = one_bin_warning(&[0.0, 0.0, 0.0, 9.0], (-1.0, 1.0)).unwrap();
        assert!(narrow.contains("too narrow"), "{narrow}");
        assert!(one_bin_warning(&[1.0, 6.0, 0.0, 0.0], (-1.0, 1.0)).is_none());
        assert!(one_bin_warning(&[9.0], (-1.0, 1.0)).is_none());
        assert!(one_bin_warning(&[0.0, 1.0], (-1.0, 1.0)).is_none());
    }
}
