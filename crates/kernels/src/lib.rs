//! burn-cockpit's own CubeCL kernels, reached through burn's backend-extension route.
//!
//! One kernel counts histogram bins on a CubeCL device (wgpu, CUDA) in **one launch per chunk**:
//! each unit takes values with a grid stride, finds each value's bin by a binary search over
//! the bin thresholds, and adds one to a histogram in the cube's shared memory; each cube then
//! adds its histogram to the output counts with atomic adds. Rank-one per-sample gradients
//! `g_n = a_n e_nᵀ` are counted **without forming them**: a unit computes each product
//! `a_{n,i}·e_{n,o}` it counts (one float multiplication in the values' type, rounded as burn's
//! element-wise product rounds it) and never writes it. Pairs of a per-sample gradient element
//! and its parameter's bin (GradHist2d's cells) are counted the same way.
//!
//! Bins are exactly the host's: the thresholds handed in are the smallest value of each bin
//! (the caller rounds them up to float32 for float32 values, so that `x ≥ ⌈T⌉₃₂` in float32
//! exactly when `x ≥ T` in float64); a value's bin is the number of thresholds it reaches, so
//! NaN lands in bin 0, `−∞` in the first bin and `+∞` in the last, as on the host. Counts are
//! integer atomic adds: exact and independent of their order.
//!
//! Only CubeCL devices run the kernel, and only float32 values ([`supports`]); everything
//! else (flex, ndarray, other float types) keeps the caller's tensor-operation path.

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod count;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod kernel;

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

/// Whether the kernels are on (read once per process).
fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::env::var(DISABLE_VARIABLE)
            .map(|v| {
                !matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "off" | "0" | "false"
                )
            })
            .unwrap_or(true)
    })
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn is_cube(device: &Device) -> bool {
    count::is_cube(device.as_dispatch())
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn is_cube(_device: &Device) -> bool {
    false
}

/// The counts `[bins]` (unsigned 32-bit integers) of `values` in the bins whose thresholds are
/// `thresholds` `[bins + 1]` (`−∞`, `T_1 … T_{bins−1}`, `+∞`, in the values' type): one launch,
/// plus the zeroed output; `guess` (the rule's formula) saves most threshold reads. `None` where [`supports`] is false, the values' factors differ in
/// type or device, there are more than [`LAUNCH_VALUES`] values, or `thresholds` has another
/// length.
pub fn count_bins(
    values: Values,
    thresholds: Tensor<1>,
    bins: usize,
    guess: Option<Guess>,
) -> Option<Tensor<1, Int>> {
    check(&values, &thresholds, bins)?;
    imp::count(values, thresholds, None, bins, 1, guess)
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
    let period = match &values {
        Values::Dense(_) => y.dims()[0],
        Values::Outer { a, e } => a.dims()[1] * e.dims()[1],
    };
    if period == 0 || y.dims()[0] != period || !values.len().is_multiple_of(period) || y_bins == 0 {
        return None;
    }
    imp::count(values, thresholds, Some(y), bins, y_bins, guess)
}

fn check(values: &Values, thresholds: &Tensor<1>, bins: usize) -> Option<()> {
    let (device, dtype) = (values.device(), values.dtype()?);
    let fits = supports(&device, dtype)
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
use count as imp;

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
mod imp {
    use burn::tensor::{Int, Tensor};

    pub(super) fn count(
        _values: super::Values,
        _thresholds: Tensor<1>,
        _y: Option<Tensor<1, Int>>,
        _bins: usize,
        _y_bins: usize,
        _guess: Option<super::Guess>,
    ) -> Option<Tensor<1, Int>> {
        None
    }
}
