//! burn-cockpit's own CubeCL kernels, reached through burn's backend-extension route.
//!
//! One kernel counts histogram bins on a CubeCL device (wgpu, CUDA) in **one launch per chunk**:
//! each unit takes values with a grid stride, finds each value's bin by a binary search over
//! the bin thresholds, and adds one to a histogram in the cube's shared memory; each cube then
//! adds its histogram to the output counts with atomic adds (a fresh zeroed output, or a running
//! total the counts are added onto: [`count_onto`]). Rank-one per-sample gradients
//! `g_n = a_n e_nᵀ` are counted **without forming them**: a row `a_{n,i}·e_n` within one bin,
//! or split at zero by the signs, is counted whole; a row spanning more bins as runs along the
//! sample's column factors sorted in shared memory; any product it does compute (one float
//! multiplication in the values' type, rounded as burn's element-wise product rounds it) is
//! never written. Pairs of a per-sample gradient element
//! and its parameter's bin (GradHist2d's cells) are counted the same way.
//!
//! Bins are exactly the host's: the thresholds handed in are the smallest value of each bin
//! (the caller rounds them up to float32 for float32 values, so that `x ≥ ⌈T⌉₃₂` in float32
//! exactly when `x ≥ T` in float64); a value's bin is the number of thresholds it reaches, so
//! NaN lands in bin 0, `−∞` in the first bin and `+∞` in the last, as on the host. Counts are
//! integer atomic adds: exact and independent of their order.
//!
//! A second kernel reduces **many tensors in one launch** ([`sums`]): a model's per-parameter
//! squared norms, distances or inner products, `[P]`, in one launch per [`GROUP`] parameters
//! and one axis reduction, where burn's operations take a fill, a sum and an element-wise pass
//! per parameter.
//!
//! A third takes each formed per-sample gradient row's squared norm and its projections on up
//! to three directions in **one pass** over the rows ([`row_norms_and_dots`]); a fourth joins
//! up to sixteen small tensors in one launch ([`pack`]), for a step's one read.
//!
//! Only CubeCL devices run the kernels, and only float32 values ([`supports`]); everything
//! else (flex, ndarray, other float types) keeps the caller's tensor-operation path.

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod count;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod kernel;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod pack;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod row_stats;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod sums;

use burn::tensor::{DType, Device, Int, Tensor};

/// The most cells (bins, or bins × bins for pairs) a cube keeps in shared memory (16 KiB of
/// counters); histograms with more cells add straight to the output counts.
pub const SHARED_CELLS: usize = 4096;

/// The most values one launch counts: counters and positions are 32-bit on the device.
pub const LAUNCH_VALUES: usize = (1 << 31) - 1;

/// The rule's own formula for a value's bin, `⌊(clamp(x, low, high) − offset)·mul/div⌋` in
/// float32, and how many correction rounds bring it to the exact bin (the caller's bound on
/// float32's rounding): the kernel then reads two thresholds a round instead of searching
/// `log₂ bins` of them. Without one, or with more than [`MAX_ROUNDS`] rounds, it searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guess {
    /// The clamp bounds.
    pub low: f32,
    /// See [`Guess::low`].
    pub high: f32,
    /// Subtracted after clamping.
    pub offset: f32,
    /// Multiplied by.
    pub mul: f32,
    /// Divided by.
    pub div: f32,
    /// Correction rounds after the formula.
    pub rounds: usize,
}

/// The most correction rounds worth taking over a binary search.
pub const MAX_ROUNDS: usize = 4;

/// What one launch counts.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // tensor handles, moved, never copied
pub enum Values {
    /// Values `[n]`.
    Dense(Tensor<1>),
    /// Every product `a_{n,i}·e_{n,o}` of `a` `[b, d_in]` and `e` `[b, d_out]`, in the order
    /// `(n, i, o)` (burn's `[d_in, d_out]` weight layout, flattened row-major per sample).
    Outer {
        /// Left factors `[b, d_in]`.
        a: Tensor<2>,
        /// Right factors `[b, d_out]`.
        e: Tensor<2>,
    },
}

impl Values {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Dense(v) => v.dims()[0],
            Values::Outer { a, e } => a.dims()[0] * a.dims()[1] * e.dims()[1],
        }
    }

    /// Whether there is no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn device(&self) -> Device {
        match self {
            Values::Dense(v) => v.device(),
            Values::Outer { a, .. } => a.device(),
        }
    }

    /// The values' float type; `None` for factors of two different types.
    fn dtype(&self) -> Option<DType> {
        match self {
            Values::Dense(v) => Some(v.dtype()),
            Values::Outer { a, e } => (a.dtype() == e.dtype()).then(|| a.dtype()),
        }
    }
}

/// The environment variable that turns the kernels off (`BURN_COCKPIT_KERNELS=off`): the
/// callers' tensor-operation paths count instead. For comparing the two in one build, and as
/// a way out should a driver miscompile the kernel.
pub const DISABLE_VARIABLE: &str = "BURN_COCKPIT_KERNELS";

/// Whether values of type `dtype` on `device` are counted by the kernel: a CubeCL device
/// (with or without autodiff), float32, and the kernels not turned off by
/// [`DISABLE_VARIABLE`]. Where this is false, [`count_bins`] and [`count_cells`] return `None`.
pub fn supports(device: &Device, dtype: DType) -> bool {
    dtype == DType::F32 && enabled() && is_cube(device)
}

/// Whether the kernels are on: the environment as it is at the call (no process-wide cache;
/// reading one variable costs far less than the launch it decides).
fn enabled() -> bool {
    std::env::var(DISABLE_VARIABLE)
        .map(|v| {
            !matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "off" | "0" | "false"
            )
        })
        .unwrap_or(true)
}

/// Whether `device` is a CubeCL device (wgpu, CUDA; with or without autodiff), whatever the
/// dtype and [`DISABLE_VARIABLE`]: where burn's operations run CubeCL's kernels, whose axis
/// reductions (autotune off) walk each reduced axis with one unit per output. `false` in a
/// build without a CubeCL runtime.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn is_cube(device: &Device) -> bool {
    count::is_cube(device.as_dispatch())
}

/// Whether `device` is a CubeCL device: never, in a build without a CubeCL runtime.
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub fn is_cube(_device: &Device) -> bool {
    false
}

/// Units per cube of the sums and row-statistics kernels (fewer where the device's cubes
/// hold fewer).
const REDUCE_UNITS: usize = 256;

/// Values each unit of the sums and row-statistics kernels takes before a row takes another
/// cube.
const REDUCE_PER_UNIT: usize = 16;

/// The most cubes one row of the sums and row-statistics kernels takes.
const REDUCE_CHUNKS: usize = 1024;

/// The cubes a row of `len` values takes in the sums and row-statistics kernels (its partial
/// sums).
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
fn chunks_for(len: usize) -> usize {
    len.div_ceil(REDUCE_UNITS * REDUCE_PER_UNIT)
        .clamp(1, REDUCE_CHUNKS)
}

/// The most values one unit walks in [`sums`], [`row_sums`], [`row_dots`] and
/// [`row_norms_and_dots`] over rows (or tensors) of at most `longest` values, with cubes of
/// 256 units: its share of a row in the kernel (16 values until a row holds more than 2²²),
/// or the partial sums of a row (at most 1 024) that burn's axis reduction adds up after it,
/// whichever is more. The kernels' serial depth, as `persample::reduce::depth_of` counts it
/// for burn's reductions.
pub fn serial_depth(longest: usize) -> usize {
    let chunks = chunks_for(longest);
    longest.div_ceil(chunks * REDUCE_UNITS).max(chunks)
}

/// Storage buffers one launch of the sums kernel binds: its [`GROUP`] pairs of operands, the
/// output and the launch's metadata.
const SUMS_BINDINGS: u32 = 2 * GROUP as u32 + 2;

/// Storage buffers one launch of the counting kernel binds: the two factors, the thresholds,
/// the second axis's bins, the counts and the launch's metadata.
const COUNT_BINDINGS: u32 = 6;

/// Whether a launch on `device` may bind `bindings` storage buffers. Vulkan, CUDA and Metal
/// allow far more than the kernels take; wgpu's OpenGL fallback (a machine without a Vulkan
/// driver) allows 16 per stage, fewer than the sums kernel's 18, and there the callers keep
/// burn's operations instead of failing at the launch.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn binds(device: &Device, bindings: u32) -> bool {
    count::max_bindings(device.as_dispatch()).is_some_and(|most| most >= bindings)
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn binds(_device: &Device, _bindings: u32) -> bool {
    false
}

/// The counts `[bins]` (unsigned 32-bit integers) of `values` in the bins whose thresholds are
/// `thresholds` `[bins + 1]` (`−∞`, `T_1 … T_{bins−1}`, `+∞`, in the values' type): one launch,
/// plus the zeroed output; `guess` (the rule's formula) saves most threshold reads. `None`
/// where [`supports`] is false (or the device binds fewer than the kernel's six storage
/// buffers), the values' factors differ in type or device, there are more than
/// [`LAUNCH_VALUES`] values, or `thresholds` has another length.
pub fn count_bins(
    values: Values,
    thresholds: Tensor<1>,
    bins: usize,
    guess: Option<Guess>,
) -> Option<Tensor<1, Int>> {
    check(&values, &thresholds, bins)?;
    let onto = zeroed(&values, bins);
    imp::count(onto, values, thresholds, None, bins, 1, guess).ok()
}

/// The counts `[bins · y_bins]` (row-major, unsigned 32-bit integers) of the cells
/// `bin(x_k)·y_bins + y[k mod period]`, where `period` is the number of values per sample
/// (`y` `[period]` holds each parameter element's bin on the second axis): GradHist2d's
/// pairs of a per-sample gradient element and its parameter's value. One launch, plus the
/// zeroed output and a cast of `y`. `None` as for [`count_bins`], or if `y` does not hold one
/// bin per element of a sample.
pub fn count_cells(
    values: Values,
    thresholds: Tensor<1>,
    bins: usize,
    y: Tensor<1, Int>,
    y_bins: usize,
    guess: Option<Guess>,
) -> Option<Tensor<1, Int>> {
    check(&values, &thresholds, bins)?;
    if !cells_fit(&values, &y, y_bins) {
        return None;
    }
    let onto = zeroed(&values, bins * y_bins);
    imp::count(onto, values, thresholds, Some(y), bins, y_bins, guess).ok()
}

/// Zeroed counts (u32 `[cells]`) on the values' device.
fn zeroed(values: &Values, cells: usize) -> Tensor<1, Int> {
    Tensor::zeros(
        [cells],
        burn::tensor::TensorCreationOptions::new(values.device())
            .with_dtype(burn::tensor::DType::U32),
    )
}

/// Whether the kernel counts `values` against `thresholds` in `bins` bins (what
/// [`count_bins`] checks before it launches): a caller counting many pieces onto one running
/// total checks them all first.
pub fn takes(values: &Values, thresholds: &Tensor<1>, bins: usize) -> bool {
    check(values, thresholds, bins).is_some()
}

/// Whether `y` holds one second-axis bin per element of a sample of `values`.
fn cells_fit(values: &Values, y: &Tensor<1, Int>, y_bins: usize) -> bool {
    let period = match values {
        Values::Dense(_) => y.dims()[0],
        Values::Outer { a, e } => a.dims()[1] * e.dims()[1],
    };
    period > 0 && y.dims()[0] == period && values.len().is_multiple_of(period) && y_bins > 0
}

/// [`count_bins`] (`cells` `None`) or [`count_cells`] (`cells` the second axis's bins `y` and
/// their number), the counts added onto `onto` (u32 `[bins · y_bins]`, e.g. what an earlier
/// call returned) instead of a zeroed output: a running histogram over many tensors costs one
/// launch each, not a fill, a launch and an addition. `onto` is counted into in place where
/// nothing else holds it (a clone held elsewhere keeps its values: the kernel then counts
/// into a copy). The counts are unsigned 32-bit: a running total holds at most 2³² − 1
/// values in a cell.
///
/// # Errors
///
/// `onto`, untouched (boxed), where [`count_bins`] or [`count_cells`] would return `None`, or
/// where `onto` is not u32 `[bins · y_bins]` on the values' device.
pub fn count_onto(
    onto: Tensor<1, Int>,
    values: Values,
    thresholds: Tensor<1>,
    bins: usize,
    cells: Option<(Tensor<1, Int>, usize)>,
    guess: Option<Guess>,
) -> Result<Tensor<1, Int>, Box<Tensor<1, Int>>> {
    let y_bins = cells.as_ref().map_or(1, |(_, y_bins)| *y_bins);
    let fits = check(&values, &thresholds, bins).is_some()
        && cells
            .as_ref()
            .is_none_or(|(y, y_bins)| cells_fit(&values, y, *y_bins))
        && onto.dtype() == burn::tensor::DType::U32
        && onto.dims() == [bins * y_bins]
        && onto.device() == values.device();
    if !fits {
        return Err(Box::new(onto));
    }
    let y = cells.map(|(y, _)| y);
    imp::count(onto, values, thresholds, y, bins, y_bins, guess)
}

/// What [`sums`] adds up over each tensor's elements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Summand {
    /// `Σ_k x_k²`.
    Square,
    /// `Σ_k (x_k − scale·y_k)²`, `scale·y_k` rounded to float32 before the difference (as
    /// burn's `x − y·scale` rounds it).
    Distance {
        /// The factor on `y`.
        scale: f32,
    },
    /// `Σ_k x_k·y_k`.
    Product,
}

/// The most tensors one launch of [`sums`] reduces.
pub const GROUP: usize = 8;

/// Each tensor's sum of `summand`, `[P]` for `P` tensors `x` (and `y`, paired by position, for
/// [`Summand::Distance`] and [`Summand::Product`]; ignored for [`Summand::Square`]), on their
/// device: one launch per [`GROUP`] tensors, each tensor spread over as many cubes as its
/// length asks, then one axis reduction of the partial sums (and, beyond one group, one copy
/// per group). Sums are float32, each cube adding its units' registers in a tree.
///
/// `None` where [`supports`] is false, a launch on the device may bind fewer storage buffers
/// than the kernel's 18 (wgpu's OpenGL fallback), the tensors are on other devices or of other
/// types, `x` is empty, a tensor is empty or longer than [`LAUNCH_VALUES`], or `y` does not pair
/// with `x` (a length or a count that differs).
pub fn sums(summand: Summand, x: &[Tensor<1>], y: &[Tensor<1>]) -> Option<Tensor<1>> {
    checked(summand, x, y, 1)?;
    let paired = !matches!(summand, Summand::Square);
    Some(imp::row_sums(summand, x, if paired { y } else { &[] }, 1)?.reshape([x.len()]))
}

/// The most rows [`row_sums`] takes in one launch (a launch's third grid axis).
pub const MAX_ROWS: usize = 65_535;

/// Each row's sum of `summand`, `[P, B]`, for `P` tensors `x` of `B` rows each (`[B, d_p]`,
/// `d_p` free per tensor; `y` paired as for [`sums`]): per-sample statistics such as each
/// sample's `‖a_n‖²` over several layers' inputs and outputs in one launch per [`GROUP`]
/// tensors and one axis reduction. Each row is spread over as many cubes as its length asks.
///
/// `None` as for [`sums`], or if the tensors' row counts differ or exceed [`MAX_ROWS`].
pub fn row_sums(summand: Summand, x: &[Tensor<2>], y: &[Tensor<2>]) -> Option<Tensor<2>> {
    let rows = x.first()?.dims()[0];
    let same_rows = |t: &[Tensor<2>]| t.iter().all(|t| t.dims()[0] == rows);
    if !(1..=MAX_ROWS).contains(&rows) || !same_rows(x) || !same_rows(y) {
        return None;
    }
    let flat = |t: &[Tensor<2>]| -> Vec<Tensor<1>> {
        t.iter()
            .map(|t| {
                let [r, d] = t.dims();
                t.clone().reshape([r * d])
            })
            .collect()
    };
    let (x, y) = (flat(x), flat(y));
    checked(summand, &x, &y, rows)?;
    let paired = !matches!(summand, Summand::Square);
    imp::row_sums(summand, &x, if paired { &y } else { &[] }, rows)
}

/// Each row of `x` `[B, d]` times each of `directions` (`[d]` each), `[K, B]`: per-sample
/// projections `⟨g_n, v_k⟩` of materialised per-sample gradients, each row spread over as
/// many cubes as its length asks (no unit walks a long row alone, as a matrix product with
/// one column does without autotune), one launch per [`GROUP`] directions and one axis
/// reduction of the partial sums.
///
/// `None` as for [`row_sums`], or if a direction is not `d` long.
pub fn row_dots(x: &Tensor<2>, directions: &[Tensor<1>]) -> Option<Tensor<2>> {
    let [rows, d] = x.dims();
    let first = directions.first()?;
    if !(1..=MAX_ROWS).contains(&rows) || d == 0 {
        return None;
    }
    let flat = x.clone().reshape([rows * d]);
    checked(Summand::Square, std::slice::from_ref(&flat), &[], rows)?;
    let fits = |v: &Tensor<1>| {
        v.dims()[0] == d && v.device() == first.device() && v.dtype() == flat.dtype()
    };
    if first.device() != flat.device() || !directions.iter().all(fits) {
        return None;
    }
    let mut parts = Vec::with_capacity(directions.len().div_ceil(GROUP));
    for group in directions.chunks(GROUP) {
        parts.push(imp::row_dots(&flat, group, rows)?);
    }
    Some(match parts.len() {
        1 => parts.pop()?,
        _ => Tensor::cat(parts, 0),
    })
}

/// The most tensors one launch of [`pack`] joins (a step's values are 13 to 20 tensors on the
/// benchmark models).
pub const PACK_GROUP: usize = 16;

/// The most values one packed tensor holds, unless one part alone is longer: 64 MiB of
/// float32, half of the storage-buffer binding wgpu allows by default.
const PACK_VALUES: usize = 1 << 24;

/// Storage buffers one launch of the packing kernel binds: [`PACK_GROUP`] tensors, the output
/// and the launch's metadata.
const PACK_BINDINGS: u32 = PACK_GROUP as u32 + 2;

/// `parts` concatenated group by group: one tensor per [`PACK_GROUP`] non-empty parts (fewer
/// where they would hold more than 2²⁴ values), in order, each the concatenation of its
/// group, in **one launch per group** (a group of one part is that part, no launch), where
/// burn's `cat` launches one slice assignment per tensor. For a step's many small values
/// gathered for its one read: a transaction reads the groups' tensors together, and their
/// values one after the other are the parts' in order.
/// Empty parts are passed over.
///
/// `None` where [`supports`] is false, the parts are on other devices or of other types, every
/// part is empty, or there are more than [`LAUNCH_VALUES`] values.
pub fn pack(parts: &[Tensor<1>]) -> Option<Vec<Tensor<1>>> {
    let first = parts.first()?;
    let (device, dtype) = (first.device(), first.dtype());
    let same = parts
        .iter()
        .all(|t| t.device() == device && t.dtype() == dtype);
    let filled: Vec<Tensor<1>> = parts.iter().filter(|t| t.dims()[0] > 0).cloned().collect();
    let total: usize = filled.iter().map(|t| t.dims()[0]).sum();
    let usable = same
        && supports(&device, dtype)
        && binds(&device, PACK_BINDINGS)
        && (1..=LAUNCH_VALUES).contains(&total);
    if !usable {
        return None;
    }
    let mut groups: Vec<Vec<Tensor<1>>> = Vec::new();
    let mut values = 0;
    for part in filled {
        let len = part.dims()[0];
        match groups.last_mut() {
            Some(group) if group.len() < PACK_GROUP && values + len <= PACK_VALUES => {
                group.push(part);
                values += len;
            }
            _ => {
                groups.push(vec![part]);
                values = len;
            }
        }
    }
    groups
        .iter()
        .map(|group| match group.as_slice() {
            // Nothing to join: the part itself, no launch.
            [one] => Some(one.clone()),
            _ => imp::pack(group),
        })
        .collect()
}

/// The most directions [`row_norms_and_dots`] takes in one launch (the per-sample projections
/// a step asks for: on the gradient, the previous gradient and the update).
pub const MAX_DIRECTIONS: usize = 3;

/// Storage buffers one launch of the row-statistics kernel binds: the rows, three directions,
/// the output and the launch's metadata.
const ROW_STATS_BINDINGS: u32 = 6;

/// Each row's squared norm, then its product with each of `directions`, `[1 + K, B]`, of `x`
/// `[B, d]` (`K ≤` [`MAX_DIRECTIONS`] directions, `[d]` each): the per-sample `‖g_n‖²` and
/// projections `⟨g_n, v_k⟩` of materialised per-sample gradients in **one pass** over the rows
/// (each value read once, where [`row_sums`] and [`row_dots`] read a row once per statistic),
/// one launch and one axis reduction of the partial sums, each row spread over as many cubes
/// as its length asks.
///
/// `None` as for [`row_dots`], or with more than [`MAX_DIRECTIONS`] directions.
pub fn row_norms_and_dots(x: &Tensor<2>, directions: &[Tensor<1>]) -> Option<Tensor<2>> {
    let [rows, d] = x.dims();
    let (device, dtype) = (x.device(), x.dtype());
    let fits = |v: &Tensor<1>| v.dims()[0] == d && v.device() == device && v.dtype() == dtype;
    let usable = supports(&device, dtype)
        && binds(&device, ROW_STATS_BINDINGS)
        && (1..=MAX_ROWS).contains(&rows)
        && d > 0
        && rows.checked_mul(d).is_some_and(|n| n <= LAUNCH_VALUES)
        && directions.len() <= MAX_DIRECTIONS
        && directions.iter().all(fits);
    if !usable {
        return None;
    }
    imp::row_stats(&x.clone().reshape([rows * d]), directions, rows, d)
}

/// `Some` where the kernel takes these operands (see [`sums`]).
fn checked(summand: Summand, x: &[Tensor<1>], y: &[Tensor<1>], rows: usize) -> Option<()> {
    let first = x.first()?;
    let (device, dtype) = (first.device(), first.dtype());
    if !supports(&device, dtype) || !binds(&device, SUMS_BINDINGS) {
        return None;
    }
    let paired = !matches!(summand, Summand::Square);
    let fits = |t: &Tensor<1>| {
        t.device() == device && t.dtype() == dtype && (rows..=LAUNCH_VALUES).contains(&t.dims()[0])
    };
    let pairs_fit = !paired
        || (y.len() == x.len()
            && x.iter()
                .zip(y)
                .all(|(a, b)| fits(b) && a.dims() == b.dims()));
    (x.iter().all(fits) && pairs_fit).then_some(())
}

fn check(values: &Values, thresholds: &Tensor<1>, bins: usize) -> Option<()> {
    let (device, dtype) = (values.device(), values.dtype()?);
    let fits = supports(&device, dtype)
        && binds(&device, COUNT_BINDINGS)
        && thresholds.device() == device
        && thresholds.dtype() == dtype
        && thresholds.dims()[0] == bins + 1
        && bins >= 1
        && values.len() <= LAUNCH_VALUES
        && match values {
            Values::Outer { a, e } => e.device() == device && a.dims()[0] == e.dims()[0],
            Values::Dense(_) => true,
        };
    fits.then_some(())
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod imp {
    pub(super) use super::count::count;
    pub(super) use super::pack::pack;
    pub(super) use super::row_stats::row_stats;
    pub(super) use super::sums::{row_dots, row_sums};
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
mod imp {
    use burn::tensor::{Int, Tensor};

    pub(super) fn count(
        onto: Tensor<1, Int>,
        _values: super::Values,
        _thresholds: Tensor<1>,
        _y: Option<Tensor<1, Int>>,
        _bins: usize,
        _y_bins: usize,
        _guess: Option<super::Guess>,
    ) -> Result<Tensor<1, Int>, Box<Tensor<1, Int>>> {
        Err(Box::new(onto))
    }

    pub(super) fn row_sums(
        _summand: super::Summand,
        _x: &[Tensor<1>],
        _y: &[Tensor<1>],
        _rows: usize,
    ) -> Option<Tensor<2>> {
        None
    }

    pub(super) fn row_dots(
        _x: &Tensor<1>,
        _directions: &[Tensor<1>],
        _rows: usize,
    ) -> Option<Tensor<2>> {
        None
    }

    pub(super) fn pack(_parts: &[Tensor<1>]) -> Option<Tensor<1>> {
        None
    }

    pub(super) fn row_stats(
        _x: &Tensor<1>,
        _directions: &[Tensor<1>],
        _rows: usize,
        _len: usize,
    ) -> Option<Tensor<2>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a device that is not CubeCL's (and in a build without a CubeCL runtime) every entry
    /// point says so with `None`, and the callers keep burn's operations.
    #[test]
    fn off_a_cube_device_the_kernels_are_inert() {
        let device = Device::flex();
        assert!(!supports(&device, DType::F32));
        let x = Tensor::<1>::from_floats([1.0, 2.0, 3.0], &device);
        assert!(sums(Summand::Square, std::slice::from_ref(&x), &[]).is_none());
        let rows = Tensor::<2>::from_floats([[1.0, 2.0], [3.0, 4.0]], &device);
        assert!(row_sums(Summand::Square, std::slice::from_ref(&rows), &[]).is_none());
        let v = Tensor::<1>::from_floats([1.0, 1.0], &device);
        assert!(row_dots(&rows, std::slice::from_ref(&v)).is_none());
        assert!(row_norms_and_dots(&rows, &[v]).is_none());
        assert!(pack(std::slice::from_ref(&x)).is_none());
        let thresholds = Tensor::<1>::from_floats([f32::NEG_INFINITY, 0.0, f32::INFINITY], &device);
        assert!(count_bins(Values::Dense(x), thresholds, 2, None).is_none());
    }

    /// The kernels' serial depth from their plan, worked by hand: 16 values a unit until a
    /// row takes 1 024 cubes (2²² values), then more values a unit; the partial sums of a
    /// row, one a cube, when they are more.
    #[test]
    fn serial_depth_follows_the_plan() {
        assert_eq!(serial_depth(1), 1);
        assert_eq!(serial_depth(4096), 16); // one cube of 256 units, 16 values each
        assert_eq!(serial_depth(110_592), 27); // 27 cubes: 16 values a unit, 27 partials
        assert_eq!(serial_depth(1 << 22), 1024);
        assert_eq!(serial_depth(1 << 24), 1024); // 64 values a unit, 1 024 partials
        assert_eq!(serial_depth(1 << 30), 4096); // 4 096 values a unit
    }
}
