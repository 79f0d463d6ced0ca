//! GradHist1d.

use burn::tensor::IndexingUpdateOp;
use burn::tensor::{Int, Tensor};

use super::base::{Quantity, StepContext};
use super::bin_adaptation::{BinAdaptation, linspace};
use crate::persample::PerSampleNeeds;
use crate::snapshot::read_values;
use crate::{Histogram1d, ParamEntry, QuantityError, Schedule, Value};

/// Histogram of the individual gradient elements `g_{n,j}` (true per-sample gradients),
/// Cockpit's `GradHist1d`: per parameter `torch.histc(clamp(g, lo, hi), bins, lo, hi)` (equal
/// widths, `hi` in the last bin, outliers piled into the edge bins), counts summed over the
/// parameters (`B·D` in total); `edges = linspace(lo, hi, bins + 1)`.
///
/// Defaults: 100 bins on `(−2, 2)`, no adaptation.
///
/// # Cost
///
/// Materialises the per-sample gradients, one parameter and one chunk at a time, and bins
/// all `B·D` elements on the device (integer scatter-add); one host read of `bins` counts.
#[derive(Debug, Clone)]
pub struct GradHist1d {
    schedule: Schedule,
    name: String,
    bins: usize,
    range: (f64, f64),
    adapt: Option<BinAdaptation>,
    counts: Option<Tensor<1, Int>>,
}

impl GradHist1d {
    /// GradHist1d with Cockpit's defaults on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            name: "GradHist1d".into(),
            bins: 100,
            range: (-2.0, 2.0),
            adapt: None,
            counts: None,
        }
    }

    /// Number of bins.
    pub fn with_bins(mut self, bins: usize) -> Self {
        self.bins = bins.max(1);
        self
    }

    /// Initial range `(lo, hi)`.
    pub fn with_range(mut self, lo: f64, hi: f64) -> Self {
        self.range = (lo, hi);
        self
    }

    /// Bin adaptation.
    pub fn with_adaptation(mut self, adapt: BinAdaptation) -> Self {
        self.adapt = Some(adapt);
        self
    }

    /// The output key (e.g. a variant key such as `GradHist1d[bins=20]`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
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

impl Quantity for GradHist1d {
    fn name(&self) -> &str {
        &self.name
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
        _step: usize,
        _index: usize,
        _entry: &ParamEntry,
        chunk: Tensor<2>,
    ) -> Result<(), QuantityError> {
        let n = chunk.shape().num_elements();
        let (lo, hi) = self.range;
        let index = bin_index(chunk.reshape([n]), lo, hi, self.bins);
        self.counts = Some(count_into(self.counts.take(), index, self.bins));
        Ok(())
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        ctx.per_sample_stats()?;
        let hist = match self.counts.take() {
            Some(counts) => read_values(counts.float())?,
            None => vec![0.0; self.bins],
        };
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
