//! Counting on the device, so that only counts come back.
//!
//! **On CubeCL devices (wgpu, CUDA), float32:** one launch of our own kernel per chunk
//! (`cockpit-kernels`): each value's bin is the rule's formula corrected against the
//! thresholds below, as on the tensor-operation path, but in registers (a binary search over
//! the thresholds where the corrections would take more than a few rounds), counted in the
//! cube's shared memory and merged with atomic adds; rank-one chunks
//! (Linear layers, one-position taps) are binned without being formed (whole rows where the
//! signs decide, else runs along the sample's sorted column factors).
//! Launches per chunk: the kernel, its zeroed counts and a cast; no piece is materialised.
//!
//! **Elsewhere** (CPU backends, other float types, builds without a CubeCL backend): tensor
//! operations. Each value's bin is computed by the rule's arithmetic and corrected against the
//! exact thresholds, and the bins are counted by one scatter-add into per-row counts.
//!
//! Both paths bin exactly alike. The bin of `x` is the number of thresholds `T_k` (the smallest
//! value whose bin is at least `k`) that `x` reaches. Both take the rule's formula, which
//! float32 rounding may put a bin or more off (the kernel searches the thresholds instead
//! where the rounds below would exceed `cockpit_kernels::MAX_ROUNDS`), and each correction
//! round moves it up where `x ≥ T_{i+1}` and down where `x < T_i`
//! (two gathers and two comparisons), the rounds needed bounded beforehand from the range and
//! the float type (one or two for sensible ranges; at most `bins`), so every value lands exactly
//! where the host's float64 rule puts it.
//! Float32 values are compared with each threshold rounded *up* to float32: for a float32 `x`,
//! `x ≥ ⌈T⌉₃₂` exactly when `x ≥ T` in float64 (narrower floats are widened to float32 first,
//! exactly). Float64 values use the thresholds themselves. A rank-one product is rounded to
//! float32 once, as burn's element-wise product rounds it, on both paths.
//!
//! The tensor-operation path counts with one scatter-add of ones into per-row counts
//! `[rows, bins + 1]`, summed over the rows: each row holds a few hundred values, so where the
//! device adds atomically the adds spread over many counters, and where it does not (CPU
//! devices: one unit per row) the rows run in parallel. Integer adds are exact and their order
//! does not matter, so the counts are deterministic. Launches per piece: a fixed handful,
//! whatever the number of values or samples.
//!
//! Pieces (tensor-operation path only): a chunk's per-sample gradients are materialised at
//! most [`PIECE_VALUES`] values at a time (half the largest buffer wgpu binds by default), so a
//! layer's count takes the same launches at any batch size until its per-sample gradients
//! outgrow that.

use burn::tensor::{
    DType, Device, IndexingUpdateOp, Int, Tensor, TensorCreationOptions, TensorData,
};

use super::axis::Axis;
use crate::persample::Elements;
use crate::persample::reduce::{self, sum_dim};

/// Values one row of the per-row counts holds at least (on a device without atomic adds one
/// unit walks a row); rows are at most [`reduce::STAGE`], so that summing them is one
/// reduction whatever the number of values.
const ROW: usize = 256;

/// The most entries of the per-row counts `[rows, bins + 1]`.
const ROW_COUNTS: usize = 1 << 24;

/// The most values a piece holds: 2²⁴, a float32 buffer of 64 MiB. wgpu binds storage
/// buffers of at most 128 MiB without raised limits (`max_storage_buffer_binding_size`, 2²⁷
/// bytes; lavapipe refuses a larger allocation outright), and a piece of 2²⁵ values plus its
/// padding row already exceeds it; half of it leaves room for the padding and the per-row
/// counts. A chunk of fewer values is one piece whatever the batch size.
pub(crate) const PIECE_VALUES: usize = 1 << 24;

/// An axis on a device: its formula, its thresholds in the type values are compared in, and
/// how many correction rounds that type needs.
#[derive(Debug, Clone)]
pub(crate) struct DeviceAxis {
    /// The host thresholds these were made from (the cache key with device and type).
    host: Vec<f64>,
    device: Device,
    dtype: DType,
    formula: ((f64, f64), f64, f64, f64),
    /// `[bins + 1]`: `−∞`, `T_1 … T_{bins−1}`, `+∞`.
    thresholds: Tensor<1>,
    rounds: usize,
}

/// The float type values of type `dtype` are compared in.
fn compare_dtype(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// The smallest float32 `x` with `x ≥ t` in float64 (`+∞` above float32's range).
fn round_up_f32(t: f64) -> f32 {
    let nearest = t as f32;
    if f64::from(nearest) < t {
        nearest.next_up()
    } else {
        nearest
    }
}

/// Correction rounds that bring the formula's index, evaluated in `dtype`, to the exact bin:
/// the index is off by at most the rounding of `lo`, of the clamp bounds and of the difference
/// (a few units in the last place of the largest of them) times `mul/div`, plus the relative
/// rounding of the product and quotient times `bins`, plus one for the floor.
fn correction_rounds(formula: ((f64, f64), f64, f64, f64), bins: usize, dtype: DType) -> usize {
    let ((c0, c1), offset, mul, div) = formula;
    let unit = if dtype == DType::F64 {
        f64::EPSILON
    } else {
        f64::from(f32::EPSILON)
    };
    let magnitude = [c0, c1, offset].iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let error = 4.0 * unit * magnitude * (mul / div).abs() + 8.0 * unit * bins as f64;
    if error.is_finite() {
        ((error.ceil() as usize) + 1).min(bins)
    } else {
        bins
    }
}

impl DeviceAxis {
    /// The device form of `axis` for values of type `dtype` on `device`, kept in `slot` while
    /// the axis, device and type stay the same.
    pub(crate) fn cached<'a>(
        slot: &'a mut Option<DeviceAxis>,
        axis: &Axis,
        device: &Device,
        dtype: DType,
    ) -> &'a DeviceAxis {
        let dtype = compare_dtype(dtype);
        let fits = |d: &DeviceAxis| {
            d.dtype == dtype
                && d.device == *device
                && d.formula == axis.formula()
                && d.host.as_slice() == axis.thresholds()
        };
        if !slot.as_ref().is_some_and(fits) {
            *slot = Some(DeviceAxis::new(axis, device, dtype));
        }
        slot.get_or_insert_with(|| DeviceAxis::new(axis, device, dtype))
    }

    fn new(axis: &Axis, device: &Device, dtype: DType) -> Self {
        let host = axis.thresholds().to_vec();
        let bins = host.len() + 1;
        let mut extended = Vec::with_capacity(bins + 1);
        extended.push(f64::NEG_INFINITY);
        extended.extend(&host);
        extended.push(f64::INFINITY);
        let options = TensorCreationOptions::new(device.clone()).with_dtype(dtype);
        let data = if dtype == DType::F64 {
            TensorData::new(extended, [bins + 1])
        } else {
            TensorData::new(
                extended.iter().map(|&t| round_up_f32(t)).collect(),
                [bins + 1],
            )
        };
        let formula = axis.formula();
        Self {
            host,
            device: device.clone(),
            dtype,
            formula,
            thresholds: Tensor::<1>::from_data(data, options),
            rounds: correction_rounds(formula, bins, dtype),
        }
    }

    /// The number of bins.
    fn bins(&self) -> usize {
        self.host.len() + 1
    }

    /// The exact bin of each value (`[n]`), as the host's rule gives it.
    fn bins_of(&self, values: Tensor<1>) -> Tensor<1, Int> {
        let bins = self.bins();
        let values = values.cast(self.dtype);
        if bins == 1 {
            return values.zeros_like().int();
        }
        let ((c0, c1), offset, mul, div) = self.formula;
        let t = values
            .clone()
            .clamp(c0, c1)
            .sub_scalar(offset)
            .mul_scalar(mul)
            .div_scalar(div)
            .floor();
        // A NaN's bin is 0, as on the host.
        let t = t.clone().mask_fill(t.is_nan(), 0.0);
        let mut index = t.int().clamp(0, bins as i64 - 1);
        for _ in 0..self.rounds {
            let above = self
                .thresholds
                .clone()
                .select(0, index.clone().add_scalar(1));
            let below = self.thresholds.clone().select(0, index.clone());
            // `+∞` reaches the `+∞` past the last bin: the clamp keeps it in the last.
            index = (index + values.clone().greater_equal(above).int()
                - values.clone().lower(below).int())
            .clamp(0, bins as i64 - 1);
        }
        index
    }
}

/// The device and float type a chunk's elements live in.
pub(crate) fn placement(elements: &Elements) -> (Device, DType) {
    match elements {
        Elements::Dense(g) => (g.device(), g.dtype()),
        Elements::Outer { a, .. } => (a.device(), a.dtype()),
    }
}

/// `counts` added to a running `total` (`counts` itself for the first).
pub(crate) fn add_counts<const D: usize>(
    total: Option<Tensor<D, Int>>,
    counts: Tensor<D, Int>,
) -> Tensor<D, Int> {
    match total {
        Some(total) => total + counts,
        None => counts,
    }
}

/// The counts of `index` (values in `0..bins`) as `[bins]` integers: one scatter-add of ones
/// into per-row counts, summed over the rows. The index is padded to whole rows (by at least
/// one value) with the extra bin `bins`, dropped at the end.
fn count_indices(index: Tensor<1, Int>, bins: usize) -> Tensor<1, Int> {
    let n = index.dims()[0];
    let device = index.device();
    if n == 0 {
        return Tensor::zeros([bins], &device);
    }
    // At least one padding value, so that every count takes the same launches.
    let most_rows = (ROW_COUNTS / (bins + 1)).clamp(1, reduce::STAGE);
    let rows = (n + 1).div_ceil(ROW).clamp(1, most_rows);
    let per_row = (n + 1).div_ceil(rows);
    let pad = Tensor::<1, Int>::full([rows * per_row - n], bins as i64, &device);
    let index = Tensor::cat(vec![index, pad], 0).reshape([rows, per_row]);
    let ones = index.ones_like();
    let per_row = Tensor::<2, Int>::zeros([rows, bins + 1], &device).scatter(
        1,
        index,
        ones,
        IndexingUpdateOp::Add,
    );
    sum_dim(per_row, 0).reshape([bins + 1]).narrow(0, 0, bins)
}

/// Rank-one factors `a` `[b, d_in]`, `e` `[b, d_out]` split by samples into pieces of at most
/// `per_piece` products each (at least one sample a piece).
fn outer_pieces(a: Tensor<2>, e: Tensor<2>, per_piece: usize) -> Vec<(Tensor<2>, Tensor<2>)> {
    let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
    let rows = (per_piece / (d_in * d_out).max(1)).max(1);
    (0..b.div_ceil(rows))
        .map(|piece| {
            let (start, len) = (piece * rows, rows.min(b - piece * rows));
            (
                a.clone().narrow(0, start, len),
                e.clone().narrow(0, start, len),
            )
        })
        .collect()
}

/// A chunk's per-sample gradients `[b, numel]`, materialised a few samples at a time: the
/// samples of each piece hold at most `per_piece` elements (at least one sample).
pub(crate) fn dense_pieces(elements: Elements, per_piece: usize) -> Vec<Tensor<2>> {
    match elements {
        Elements::Dense(g) => vec![g],
        Elements::Outer { a, e } => outer_pieces(a, e, per_piece)
            .into_iter()
            .map(|(a, e)| Elements::Outer { a, e }.dense())
            .collect(),
    }
}

/// A histogram's device counts over a step's chunks: a running total our kernel counts onto
/// (unsigned 32-bit, [`count_elements`], [`count_pairs`]), folded into the device's integer
/// type before it could hold 2³² values, so no bin overflows however many values a step has.
#[derive(Debug, Clone)]
pub(crate) struct RunningCounts {
    /// The total counted onto, and how many values it holds.
    narrow: Option<(Tensor<1, Int>, u64)>,
    /// What earlier totals held, in the device's integer type.
    wide: Option<Tensor<1, Int>>,
    /// The most values one total holds (2³² − 1).
    most: u64,
}

impl Default for RunningCounts {
    fn default() -> Self {
        Self {
            narrow: None,
            wide: None,
            most: u64::from(u32::MAX),
        }
    }
}

impl RunningCounts {
    /// Whether nothing was counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.narrow.is_none() && self.wide.is_none()
    }

    /// The running total to count `values` more values onto and the values it holds (`None`
    /// and 0: start a fresh one), a total that could not take them folded into `wide` first.
    fn onto_for(&mut self, values: u64) -> (Option<Tensor<1, Int>>, u64) {
        match self.narrow.take() {
            Some((total, held)) if held.saturating_add(values) <= self.most => (Some(total), held),
            Some((total, _)) => {
                self.wide = Some(add_counts(self.wide.take(), counts_for_reading(total)));
                (None, 0)
            }
            None => (None, 0),
        }
    }

    /// GradHist1d: one chunk's elements counted ([`count_elements`]).
    pub(crate) fn add_elements(&mut self, axis: &DeviceAxis, elements: Elements) {
        let values = element_count(&elements);
        let (onto, held) = self.onto_for(values);
        self.narrow = Some((count_elements(axis, elements, onto), held + values));
    }

    /// GradHist2d: one chunk's pairs counted ([`count_pairs`]).
    pub(crate) fn add_pairs(
        &mut self,
        x: &DeviceAxis,
        y: &DeviceAxis,
        elements: Elements,
        theta: Tensor<1>,
    ) {
        let values = element_count(&elements);
        let (onto, held) = self.onto_for(values);
        self.narrow = Some((count_pairs(x, y, elements, theta, onto), held + values));
    }

    /// The values the running total holds.
    #[cfg(test)]
    fn held(&self) -> u64 {
        self.narrow.as_ref().map_or(0, |(_, held)| *held)
    }

    /// The counts, in the device's integer type, for the step's read (`None` if nothing was
    /// counted).
    pub(crate) fn total(self) -> Option<Tensor<1, Int>> {
        match (self.wide, self.narrow) {
            (wide, Some((narrow, _))) => Some(add_counts(wide, counts_for_reading(narrow))),
            (wide, None) => wide,
        }
    }
}

/// How many gradient elements a chunk holds.
fn element_count(elements: &Elements) -> u64 {
    let n = match elements {
        Elements::Dense(g) => g.shape().num_elements(),
        Elements::Outer { a, e } => a.dims()[0] * a.dims()[1] * e.dims()[1],
    };
    n as u64
}

/// GradHist1d's device counts of one chunk's elements added to a running total `onto`
/// (what an earlier call returned): `[bins]` integers. Our kernel counts into the total in
/// place (one launch a chunk: no zeroed output, cast or addition; unsigned 32-bit, so at most
/// 2³² − 1 values of a step in one bin); read it through [`counts_for_reading`].
pub(crate) fn count_elements(
    axis: &DeviceAxis,
    elements: Elements,
    onto: Option<Tensor<1, Int>>,
) -> Tensor<1, Int> {
    let bins = axis.bins();
    let mut onto = onto;
    if let Some(counts) = kernel_counts(axis, &elements, None, &mut onto) {
        return counts;
    }
    let counted = dense_pieces(elements, PIECE_VALUES)
        .into_iter()
        .map(|g| {
            let [b, numel] = g.dims();
            count_indices(axis.bins_of(g.reshape([b * numel])), bins)
        })
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| Tensor::zeros([bins], &axis.device));
    add_counts(onto.map(counts_for_reading), counted)
}

/// A running total of device counts in the device's integer type, for the step's read (our
/// kernel counts in unsigned 32-bit integers).
pub(crate) fn counts_for_reading(counts: Tensor<1, Int>) -> Tensor<1, Int> {
    let dtype = counts.device().settings().int_dtype;
    if counts.dtype() == DType::from(dtype) {
        counts
    } else {
        counts.cast(dtype)
    }
}

/// GradHist2d's device counts of one chunk added to a running total `onto`: the pairs
/// `(g_{n,j}, θ_j)` of per-sample gradient elements and their parameter's value,
/// `[x bins · y bins]` row-major. The parameter's y bins are computed once; each pair's cell
/// `x·(y bins) + y` is counted like GradHist1d's bins (read through [`counts_for_reading`]).
pub(crate) fn count_pairs(
    x: &DeviceAxis,
    y: &DeviceAxis,
    elements: Elements,
    theta: Tensor<1>,
    onto: Option<Tensor<1, Int>>,
) -> Tensor<1, Int> {
    let (xb, yb) = (x.bins(), y.bins());
    let numel = theta.dims()[0];
    let theta_bins = y.bins_of(theta);
    let mut onto = onto;
    if let Some(counts) = kernel_counts(x, &elements, Some((theta_bins.clone(), yb)), &mut onto) {
        return counts;
    }
    let theta_bins = theta_bins.reshape([1, numel]);
    let counted = dense_pieces(elements, PIECE_VALUES)
        .into_iter()
        .map(|g| {
            let [b, numel] = g.dims();
            let cells = x
                .bins_of(g.reshape([b * numel]))
                .reshape([b, numel])
                .mul_scalar(yb as i64)
                + theta_bins.clone();
            count_indices(cells.reshape([b * numel]), xb * yb)
        })
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| Tensor::zeros([xb * yb], &x.device));
    add_counts(onto.map(counts_for_reading), counted)
}

/// The counts from our own kernel ([`cockpit_kernels`]) added onto `onto`: float32 elements
/// on a CubeCL device, one launch per [`cockpit_kernels::LAUNCH_VALUES`] values (rank-one
/// chunks split by samples, never formed), each counted into the running total (u32), each
/// value binned against the same rounded-up thresholds as [`DeviceAxis::bins_of`] compares
/// with, so the counts are the same. `None`, with `onto` untouched, elsewhere (CPU backends,
/// other float types, no CubeCL backend in this build, a total in another integer type): the
/// tensor-operation path counts instead.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn kernel_counts(
    axis: &DeviceAxis,
    elements: &Elements,
    cells: Option<(Tensor<1, Int>, usize)>,
    onto: &mut Option<Tensor<1, Int>>,
) -> Option<Tensor<1, Int>> {
    use cockpit_kernels::{Guess, LAUNCH_VALUES, Values, count_bins, count_cells, count_onto};
    let (device, dtype) = placement(elements);
    if dtype != DType::F32
        || axis.dtype != DType::F32
        || !cockpit_kernels::supports(&device, dtype)
        || onto.as_ref().is_some_and(|t| t.dtype() != DType::U32)
    {
        return None;
    }
    let pieces: Vec<Values> = match elements.clone() {
        Elements::Dense(g) => {
            let [b, numel] = g.dims();
            vec![Values::Dense(g.reshape([b * numel]))]
        }
        Elements::Outer { a, e } => outer_pieces(a, e, LAUNCH_VALUES)
            .into_iter()
            .map(|(a, e)| Values::Outer { a, e })
            .collect(),
    };
    // Every piece is checked before any is counted onto the total, so a refusal hands the
    // total back as it came.
    if !pieces
        .iter()
        .all(|values| cockpit_kernels::takes(values, &axis.thresholds, axis.bins()))
    {
        return None;
    }
    let ((low, high), offset, mul, div) = axis.formula;
    let guess = Some(Guess {
        low: low as f32,
        high: high as f32,
        offset: offset as f32,
        mul: mul as f32,
        div: div as f32,
        rounds: axis.rounds,
    });
    let (thresholds, bins) = (&axis.thresholds, axis.bins());
    // The checks above are the launches' own, so none is refused from here on (were one, the
    // total counted so far goes back to the caller rather than being lost).
    let mut total = onto.take();
    for values in pieces {
        let counted = match (total.take(), &cells) {
            (Some(running), cells) => count_onto(
                running,
                values,
                thresholds.clone(),
                bins,
                cells.clone(),
                guess,
            )
            .map_err(|running| Some(*running)),
            (None, None) => count_bins(values, thresholds.clone(), bins, guess).ok_or(None),
            (None, Some((y, y_bins))) => {
                count_cells(values, thresholds.clone(), bins, y.clone(), *y_bins, guess).ok_or(None)
            }
        };
        match counted {
            Ok(counted) => total = Some(counted),
            Err(running) => {
                *onto = running;
                return None;
            }
        }
    }
    total
}

/// Without a CubeCL backend in this build there is no kernel of our own.
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn kernel_counts(
    _axis: &DeviceAxis,
    _elements: &Elements,
    _cells: Option<(Tensor<1, Int>, usize)>,
    _onto: &mut Option<Tensor<1, Int>>,
) -> Option<Tensor<1, Int>> {
    None
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;

    /// A running total that would pass its most values is folded into the wide counts first:
    /// the counts over many chunks are the host's, on flex (burn's operations) and, with the
    /// `wgpu` feature, on lavapipe (the kernel counting onto the total).
    #[test]
    fn running_counts_fold_before_they_overflow() {
        let axis = Axis::new(Rule::Histc, (-1.0, 1.0), 8);
        let devices = vec![
            Device::flex(),
            #[cfg(feature = "wgpu")]
            Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        ];
        for device in devices {
            let mut slot = None;
            let device_axis = DeviceAxis::cached(&mut slot, &axis, &device, DType::F32);
            let mut running = RunningCounts {
                most: 10,
                ..RunningCounts::default()
            };
            let mut expected = vec![0u64; 8];
            for chunk in 0..5 {
                let g: Vec<f32> = (0..6)
                    .map(|k| ((chunk * 6 + k) as f32 * 0.61).sin())
                    .collect();
                for &v in &g {
                    expected[axis.bin(f64::from(v))] += 1;
                }
                let g = Tensor::<2>::from_data(
                    TensorData::new(g, [2, 3]),
                    TensorCreationOptions::new(device.clone()).with_dtype(DType::F32),
                );
                running.add_elements(device_axis, Elements::Dense(g));
                // 6 values a chunk, at most 10 a total: every second chunk starts a new one.
                assert!(running.held() <= 10);
            }
            assert!(running.wide.is_some(), "totals were folded");
            let total = running.total().expect("counted");
            assert_eq!(read_counts(total), expected, "on {device:?}");
        }
    }
    use crate::histogram::Rule;
    use crate::readback::read_together;

    fn values(seed: u64, n: usize) -> Vec<f64> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 5.0
            })
            .collect()
    }

    /// Values on and next to every threshold, outside the range, ±0, ±∞ and NaN.
    fn edge_values(axis: &Axis) -> Vec<f64> {
        let mut out = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e30,
            -1e30,
        ];
        for &t in axis.thresholds() {
            out.extend([t, t.next_down(), t.next_up()]);
        }
        out
    }

    fn read_counts(counts: Tensor<1, Int>) -> Vec<u64> {
        let host = read_together(vec![counts]).unwrap().concat();
        host.into_iter().map(|c| c as u64).collect()
    }

    fn host_counts(axis: &Axis, values: &[f64]) -> Vec<u64> {
        let mut counts = vec![0; axis.bins()];
        for &v in values {
            counts[axis.bin(v)] += 1;
        }
        counts
    }

    fn device_counts(axis: &Axis, values: &[f64], dtype: DType) -> Vec<u64> {
        let device = Device::flex();
        let mut slot = None;
        let device_axis = DeviceAxis::cached(&mut slot, axis, &device, dtype);
        let tensor = Tensor::<1>::from_data(
            TensorData::new(values.to_vec(), [values.len()]),
            TensorCreationOptions::new(device.clone()).with_dtype(DType::F64),
        )
        .cast(dtype);
        let g = tensor.reshape([1, values.len()]);
        let counts = count_elements(device_axis, Elements::Dense(g), None);
        read_counts(counts)
    }

    #[test]
    fn device_counts_equal_the_host_rule_on_edges_in_both_float_types() {
        for (rule, range, bins) in [
            (Rule::Histc, (-2.0, 2.0), 100),
            (Rule::Histc, (-0.3, 0.7), 7),
            (Rule::Centred, (-1.0, 1.0), 40),
            (Rule::Centred, (-2.0, 2.0), 1),
            // Ranges float32 resolves poorly: the index is corrected over several bins.
            (Rule::Histc, (1e6 + 0.003, 1e6 + 1.0), 100),
            (Rule::Centred, (-1e-30, 3e-30), 64),
        ] {
            let axis = Axis::new(rule, range, bins);
            let mut all = edge_values(&axis);
            let (lo, width) = (range.0, range.1 - range.0);
            all.extend(values(7, 5000).iter().map(|v| lo + (v / 5.0 + 0.5) * width));
            all.extend(values(8, 500));
            assert_eq!(
                device_counts(&axis, &all, DType::F64),
                host_counts(&axis, &all),
                "{rule:?} {range:?} {bins} in float64"
            );
            // In float32 the host bins the float32 values widened to float64.
            let narrowed: Vec<f64> = all.iter().map(|&v| f64::from(v as f32)).collect();
            assert_eq!(
                device_counts(&axis, &narrowed, DType::F32),
                host_counts(&axis, &narrowed),
                "{rule:?} {range:?} {bins} in float32"
            );
        }
    }

    #[test]
    fn pairs_are_counted_as_the_host_pairs_them() {
        let device = Device::flex();
        let (x, y) = (
            Axis::new(Rule::Centred, (-1.0, 1.0), 6),
            Axis::new(Rule::Centred, (-2.0, 2.0), 5),
        );
        let (b, numel) = (3, 50);
        let mut g = values(3, b * numel);
        g[..x.thresholds().len()].copy_from_slice(x.thresholds());
        let theta = values(4, numel);
        let mut expected = vec![0u64; 30];
        for n in 0..b {
            for j in 0..numel {
                expected[x.bin(g[n * numel + j]) * 5 + y.bin(theta[j])] += 1;
            }
        }
        let f64s = TensorCreationOptions::new(device.clone()).with_dtype(DType::F64);
        let (mut sx, mut sy) = (None, None);
        let counts = count_pairs(
            DeviceAxis::cached(&mut sx, &x, &device, DType::F64),
            DeviceAxis::cached(&mut sy, &y, &device, DType::F64),
            Elements::Dense(Tensor::from_data(
                TensorData::new(g, [b, numel]),
                f64s.clone(),
            )),
            Tensor::from_data(TensorData::new(theta, [numel]), f64s),
            None,
        );
        let got = read_counts(counts);
        assert_eq!(got, expected);
    }

    /// Rank-one products in float32: the device bins `a·e` rounded to float32, the host the
    /// exact product (two float32 factors multiply exactly in float64). The counts differ by at
    /// most the products that lie within rounding (`2⁻²⁴·|p|`, plus float32's smallest step
    /// below its normal range) of a bin edge; factors are drawn to put many of them there.
    #[test]
    fn float32_products_move_only_near_edges() {
        let axis = Axis::new(Rule::Histc, (-2.0, 2.0), 100);
        let (b, d_in, d_out) = (4, 30, 40);
        let a: Vec<f32> = values(11, b * d_in).iter().map(|&v| v as f32).collect();
        let mut e: Vec<f32> = values(12, b * d_out).iter().map(|&v| v as f32).collect();
        // Half of each sample's e put an edge's quotient by that sample's first a.
        for n in 0..b {
            for o in 0..d_out / 2 {
                let t = axis.thresholds()[(o * 7 + n) % axis.thresholds().len()];
                e[n * d_out + o] = (t / f64::from(a[n * d_in])) as f32;
            }
        }
        let mut exact = Vec::new();
        for n in 0..b {
            for i in 0..d_in {
                for o in 0..d_out {
                    exact.push(f64::from(a[n * d_in + i]) * f64::from(e[n * d_out + o]));
                }
            }
        }
        let near_edge = exact
            .iter()
            .filter(|&&p| {
                let slack = p.abs() * 2f64.powi(-24) + 2f64.powi(-149);
                axis.thresholds().iter().any(|&t| (p - t).abs() <= slack)
            })
            .count();
        let device = Device::flex();
        let f32s = TensorCreationOptions::new(device.clone()).with_dtype(DType::F32);
        let mut slot = None;
        let counts = count_elements(
            DeviceAxis::cached(&mut slot, &axis, &device, DType::F32),
            Elements::Outer {
                a: Tensor::from_data(TensorData::new(a, [b, d_in]), f32s.clone()),
                e: Tensor::from_data(TensorData::new(e, [b, d_out]), f32s),
            },
            None,
        );
        let on_device = read_counts(counts);
        let on_host = host_counts(&axis, &exact);
        let moved: u64 = on_device
            .iter()
            .zip(&on_host)
            .map(|(x, y)| x.abs_diff(*y))
            .sum::<u64>()
            / 2;
        assert!(
            near_edge >= 40,
            "the test puts products on edges: {near_edge}"
        );
        println!("{moved} of {near_edge} products near an edge moved");
        assert!(
            moved <= near_edge as u64,
            "{moved} moved, {near_edge} near an edge"
        );
        assert_eq!(on_device.iter().sum::<u64>(), (b * d_in * d_out) as u64);
    }

    #[test]
    fn thresholds_round_up_to_float32() {
        for t in [0.1, -0.1, 1e-40, 3.0, f64::MAX, -f64::MAX] {
            let up = round_up_f32(t);
            assert!(f64::from(up) >= t, "{t}");
            assert!(f64::from(up.next_down()) < t, "{t}");
        }
        // Sensible ranges need one or two rounds; an ill-conditioned one up to its bins.
        let rounds = |range, bins, dtype| {
            correction_rounds(Axis::new(Rule::Histc, range, bins).formula(), bins, dtype)
        };
        assert!(rounds((-2.0, 2.0), 100, DType::F32) <= 2);
        assert!(rounds((-2.0, 2.0), 100, DType::F64) <= 2);
        assert!(rounds((1e6, 1e6 + 1.0), 100, DType::F32) > 5);
        assert_eq!(rounds((1e30, 1e30 + 1e16), 100, DType::F32), 100);
    }
}
