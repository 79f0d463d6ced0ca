//! GradHist2d.

use burn::tensor::{Int, Tensor};
use serde::Deserialize;

use super::base::{Enqueued, Quantity, QuantityType, StepContext, awaited, grad_abs_max, invalid};
use super::{Carried, CarriedError};
use crate::histogram::{BinAdaptation, StepScratch, linspace};
use super::spec::{Needs, QuantitySpec, ValueShape};
use crate::histogram::{BinsElements, HistogramEngine};
use crate::histogram::device::{DeviceAxis, RunningCounts, placement};
use crate::histogram::{
    Axis, MAX_BINS_2D, Rule, add_into, check_axis, count_in_parallel, device_matmul_tn,
    outer_histogram2d,
};
use crate::persample::{Elements, PerSampleNeeds, Statistic};
use crate::readback::{Readable, read_into};
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
/// Where the counting runs is the [`HistogramEngine`] (`Auto`: the device on a graphics
/// card, the host on CPU backends and software rasterizers).
///
/// On the device, each chunk's elements (rank-one gradients expanded in pieces of at most 2²⁴
/// values) and the parameter's values (binned once per chunk) get their bins from the rule's
/// formula, corrected against the exact thresholds, and one scatter-add per piece counts the
/// pairs' cells: `x·y` integers per step (per parameter with `keep_individual`) join the
/// step's one batched read.
///
/// On the host, linear layers on the fast path hand over rank-one per-sample gradients
/// `a_n e_nᵀ` (read to the host once, with the layer's parameters): rows whose products lie
/// either side of zero in the two x-bins around it (small gradients) are counted by one 0/1
/// matrix product `[d_in, 2B]×[2B, d_out]` on the device (as large as the weight gradient)
/// and one pass over the parameter's y-bins; the other rows pair each product with its
/// parameter's y-bin on the host, on every core. Other parameters are materialised chunk by
/// chunk, read with the parameter's values and counted on every core.
#[derive(Debug, Clone)]
pub struct GradHist2d {
    schedule: Schedule,
    bins: (usize, usize),
    range: ((f64, f64), (f64, f64)),
    adapt: (Option<BinAdaptation>, Option<BinAdaptation>),
    keep_individual: bool,
    engine: HistogramEngine,
    counts: StepScratch<Counts>,
    /// The step whose device counts are being read.
    awaiting: Option<Awaiting>,
    axes: (Option<Axis>, Option<Axis>),
    device_axes: (Option<DeviceAxis>, Option<DeviceAxis>),
    /// Host copies of the factors and the parameter, reused across layers and steps.
    host: [Vec<f64>; 3],
}

/// One step's counts per parameter: binned on the device and on the host.
#[derive(Debug, Clone, Default)]
struct Counts {
    device: Vec<Option<RunningCounts>>,
    host: Vec<Option<Vec<u64>>>,
}

/// A step waiting for its device counts: its host counts, ranges, and the parameters whose
/// device counts come back (all of them summed into one, without `keep_individual`).
#[derive(Debug, Clone)]
struct Awaiting {
    step: usize,
    range: ((f64, f64), (f64, f64)),
    host: Vec<Option<Vec<u64>>>,
    device: Vec<usize>,
    /// How many maxima of each axis's adaptation the read ends with (`None`: not adapting).
    maxima: (Option<usize>, Option<usize>),
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
            engine: HistogramEngine::default(),
            counts: StepScratch::default(),
            awaiting: None,
            axes: (None, None),
            device_axes: (None, None),
            host: Default::default(),
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

    /// Where the pairs are counted (default [`HistogramEngine::Auto`]).
    pub fn with_engine(mut self, engine: HistogramEngine) -> Self {
        self.engine = engine;
        self
    }

    /// The histogram of a step from its host counts and the device counts read back
    /// (`cells` numbers per entry of `awaiting.device`).
    fn value(&self, awaiting: Awaiting, device: &[f64]) -> (usize, Value) {
        let (xb, yb) = self.bins;
        let cells = xb * yb;
        let Awaiting {
            step,
            range: ((xlo, xhi), (ylo, yhi)),
            host,
            device: indices,
            ..
        } = awaiting;
        let params = host
            .len()
            .max(indices.iter().map(|k| k + 1).max().unwrap_or(0));
        let mut per_param: Vec<Vec<u64>> = vec![vec![0; cells]; params];
        for (slot, k) in indices.into_iter().enumerate() {
            let read = device.get(slot * cells..(slot + 1) * cells).unwrap_or(&[]);
            for (t, c) in per_param[k].iter_mut().zip(read) {
                *t += *c as u64;
            }
        }
        for (k, host) in host.into_iter().enumerate() {
            if let Some(host) = host {
                add_into(&mut per_param[k], &host);
            }
        }
        let mut total = vec![0u64; cells];
        for hist in &per_param {
            add_into(&mut total, hist);
        }
        let (x_edges, y_edges) = (linspace(xlo, xhi, xb + 1), linspace(ylo, yhi, yb + 1));
        let histogram = |hist: Vec<u64>| Histogram2d {
            hist: hist.into_iter().map(|c| c as i64).collect(),
            bins: (xb, yb),
            x_edges: x_edges.clone(),
            y_edges: y_edges.clone(),
            individual: Vec::new(),
        };
        let mut value = histogram(total);
        if self.keep_individual {
            value.individual = per_param.into_iter().map(histogram).collect();
        }
        (step, Value::Hist2d(value))
    }
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
    /// Where the pairs are counted: `"auto"` (default), `"host"` or `"device"`.
    pub engine: HistogramEngine,
}

impl Default for GradHist2dSettings {
    fn default() -> Self {
        Self {
            bins: (40, 50),
            range: ((-1.0, 1.0), (-2.0, 2.0)),
            adapt: None,
            keep_individual: false,
            engine: HistogramEngine::default(),
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
            .with_engine(settings.engine)
    }
}

impl Quantity for GradHist2d {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_axis(Self::SPEC.name, "x axis: ", self.bins.0, self.range.0)?;
        check_axis(Self::SPEC.name, "y axis: ", self.bins.1, self.range.1)?;
        match self.bins.0.checked_mul(self.bins.1) {
            Some(cells) if cells <= MAX_BINS_2D => Ok(()),
            _ => Err(invalid(
                Self::SPEC.name,
                format!(
                    "{} × {} bins is more than the {MAX_BINS_2D} cells allowed",
                    self.bins.0, self.bins.1
                ),
            )),
        }
    }

    fn carry(&self) -> Result<Carried, QuantityError> {
        let ((a, b), (c, d)) = self.range;
        Ok(Carried::new().with_numbers("range", vec![a, b, c, d]))
    }

    fn restore(&mut self, carried: &Carried, _params: &crate::Snapshot) -> Result<(), CarriedError> {
        let &[a, b, c, d] = carried.numbers(self.name(), "range")? else {
            return Err(CarriedError::Missing {
                owner: self.name().into(),
                part: "range".into(),
            });
        };
        self.range = ((a, b), (c, d));
        self.axes = (None, None);
        self.device_axes = (None, None);
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn bins_elements(&mut self) -> Option<&mut dyn BinsElements> {
        Some(self)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        let grad_max =
            |a: &Option<BinAdaptation>| a.as_ref().is_some_and(|a| a.needs_grad_abs_max(step));
        if grad_max(&self.adapt.0) || grad_max(&self.adapt.1) {
            PerSampleNeeds::ELEMENTS.with(Statistic::AbsMax)
        } else {
            PerSampleNeeds::ELEMENTS
        }
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        // Taken first: a failed per-sample pass must not leave partial counts behind.
        let Counts { device, host } = self.counts.take(ctx.step);
        self.awaiting = None;
        ctx.per_sample_stats()?;
        // The adaptations' maxima join the step's batched read: the new ranges are for the
        // steps after this one.
        let maxima_of = |adapt: &Option<BinAdaptation>| match adapt {
            Some(adapt) => adapt.maxima(ctx.step, ctx.params, || grad_abs_max(ctx)),
            None => Ok(None),
        };
        let maxima = (maxima_of(&self.adapt.0)?, maxima_of(&self.adapt.1)?);
        let on_device: Vec<(usize, Tensor<1, Int>)> = device
            .into_iter()
            .enumerate()
            .filter_map(|(k, c)| c.and_then(RunningCounts::total).map(|c| (k, c)))
            .collect();
        let mut awaiting = Awaiting {
            step: ctx.step,
            range: self.range,
            host,
            device: Vec::new(),
            maxima: (
                maxima.0.as_ref().map(|m| m.dims()[0]),
                maxima.1.as_ref().map(|m| m.dims()[0]),
            ),
        };
        let mut reads: Vec<Readable> = if on_device.is_empty() {
            Vec::new()
        } else if self.keep_individual {
            awaiting.device = on_device.iter().map(|(k, _)| *k).collect();
            on_device.into_iter().map(|(_, c)| c.into()).collect()
        } else {
            awaiting.device = vec![on_device[0].0];
            let sum = on_device.into_iter().map(|(_, c)| c).reduce(|a, b| a + b);
            sum.into_iter().map(Into::into).collect()
        };
        reads.extend(maxima.0.map(Readable::from));
        reads.extend(maxima.1.map(Readable::from));
        if reads.is_empty() {
            return Ok(Enqueued::Done(Some(self.value(awaiting, &[]))));
        }
        self.awaiting = Some(awaiting);
        Ok(Enqueued::Read(reads))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let awaiting = awaited(&mut self.awaiting)?;
        let counted = (awaiting.device.len() * self.bins.0 * self.bins.1).min(host.len());
        let (device, rest) = host.split_at(counted);
        let (x_len, y_len) = awaiting.maxima;
        let (x_maxima, rest) = rest.split_at(x_len.unwrap_or(0).min(rest.len()));
        let y_maxima = &rest[..y_len.unwrap_or(0).min(rest.len())];
        if let Some(adapt) = &self.adapt.0
            && x_len.is_some()
        {
            self.range.0 = adapt.range(x_maxima);
        }
        if let Some(adapt) = &self.adapt.1
            && y_len.is_some()
        {
            self.range.1 = adapt.range(y_maxima);
        }
        Ok(Some(self.value(awaiting, device)))
    }
}

impl BinsElements for GradHist2d {
    fn use_histogram_engine(&mut self, engine: HistogramEngine) {
        self.engine = engine;
    }

    fn counts_elements_on(&self, device: &burn::tensor::Device) -> bool {
        self.engine.counts_on(device)
    }

    fn accept_chunk(
        &mut self,
        step: usize,
        index: usize,
        entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError> {
        let (xb, yb) = self.bins;
        let range = self.range;
        let x = Axis::cached(&mut self.axes.0, Rule::Centred, range.0, xb);
        let y = Axis::cached(&mut self.axes.1, Rule::Centred, range.1, yb);
        let scratch = self.counts.at(step);
        let (device, dtype) = placement(&elements);
        if self.engine.counts_on(&device) {
            let dx = DeviceAxis::cached(&mut self.device_axes.0, x, &device, dtype);
            let dy = DeviceAxis::cached(&mut self.device_axes.1, y, &device, dtype);
            slot(&mut scratch.device, index)
                .get_or_insert_with(RunningCounts::default)
                .add_pairs(dx, dy, elements, entry.value.clone());
            return Ok(());
        }
        let [a_host, e_host, theta] = &mut self.host;
        let counts = match elements {
            Elements::Outer { a, e } => {
                let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
                read_into(a.reshape([b * d_in]), a_host)?;
                read_into(e.reshape([b * d_out]), e_host)?;
                read_into(entry.value.clone(), theta)?;
                let (a, e) = (&*a_host, &*e_host);
                outer_histogram2d(a, e, theta, b, (x, y), |r, c, k, m, n| {
                    device_matmul_tn(r, c, k, m, n, &device)
                })?
            }
            Elements::Dense(chunk) => {
                let [b, numel] = chunk.dims();
                read_into(chunk.reshape([b * numel]), a_host)?;
                read_into(entry.value.clone(), theta)?;
                let y_bins: Vec<usize> = theta.iter().map(|&t| y.bin(t)).collect();
                let g = &a_host[..];
                count_in_parallel(b, xb * yb, |n, counts| {
                    for (v, by) in g[n * numel..(n + 1) * numel].iter().zip(&y_bins) {
                        counts[x.bin(*v) * yb + by] += 1;
                    }
                })?
            }
        };
        add_into(
            slot(&mut scratch.host, index).get_or_insert_with(|| vec![0; xb * yb]),
            &counts,
        );
        Ok(())
    }
}

/// Parameter `index`'s entry of per-parameter counts, the list grown to hold it.
fn slot<T: Clone>(per_param: &mut Vec<Option<T>>, index: usize) -> &mut Option<T> {
    if per_param.len() <= index {
        per_param.resize(index + 1, None);
    }
    &mut per_param[index]
}

