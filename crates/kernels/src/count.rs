//! The counting kernel and its backend extension (CubeCL backends only).

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, DispatchDevice, backend_extension};
use burn::tensor::{DType, Int, Tensor, TensorCreationOptions};
use burn_cubecl::cubecl::prelude::{CubeCount, CubeDim};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use super::kernel::{count_kernel, count_rank_one_kernel};
use super::{Guess, MAX_ROUNDS, SHARED_CELLS, Values};

/// Units per cube.
const UNITS: u32 = 256;

/// The most cubes one launch uses: units stride over the values, so more cubes would only add
/// shared histograms to merge.
const MAX_CUBES: usize = 1024;

/// Units per cube of the rank-one kernel.
const RANK_ONE_UNITS: u32 = 64;

/// Rows each unit of the rank-one kernel takes, about.
const ROWS_PER_UNIT: usize = 8;

/// The most samples the rank-one kernel takes (its grid's second axis), and the most cubes a
/// grid axis holds.
const MAX_SAMPLE_CUBES: usize = 65_535;

/// Loop iterations a unit may take in one walk (its values, or rows of products): lavapipe
/// stops a shader's nested loops after 65 535 iterations counted together (see the kernels'
/// `bin_of`), so launches spread a count over enough cubes to stay well below that.
const LOOP_BUDGET: usize = 1 << 14;

/// Histogram counting as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait CountOps: Backend {
    /// `counts` `[bins · y_bins]` (u32) plus the counts of the values (`a` `[n]` viewed as
    /// `[1, n]` with `outer` false, or the products of `a` `[b, d_in]` and `e` `[b, d_out]`),
    /// each in cell `bin·y_bins + y[k mod period]` (`y` is read only when `y_bins > 1`). The
    /// values are added into `counts` itself where no other tensor shares it, else into a copy.
    #[fusion(dtype = burn::tensor::DType::U32, shape = burn::tensor::Shape::new([*bins * *y_bins]))]
    #[allow(clippy::too_many_arguments)]
    fn count_histogram(
        counts: IntTensor<Self>,
        a: FloatTensor<Self>,
        e: FloatTensor<Self>,
        thresholds: FloatTensor<Self>,
        y: IntTensor<Self>,
        outer: bool,
        bins: usize,
        y_bins: usize,
        period: usize,
        guess: [f32; 5],
        rounds: usize,
    ) -> IntTensor<Self>;
}

impl CountOps for CubeBackend {
    fn count_histogram(
        counts: CubeTensor,
        a: CubeTensor,
        e: CubeTensor,
        thresholds: CubeTensor,
        y: CubeTensor,
        outer: bool,
        bins: usize,
        y_bins: usize,
        period: usize,
        guess: [f32; 5],
        rounds: usize,
    ) -> CubeTensor {
        let (a, e) = (into_contiguous(a), into_contiguous(e));
        let (thresholds, y) = (into_contiguous(thresholds), into_contiguous(y));
        let cells = bins * y_bins;
        // Counted in place where nothing else holds the running counts (burn's fusion hands a
        // tensor's last use over with its handle), else into a copy.
        let counts = into_contiguous(counts);
        let counts = if counts.can_mut() {
            counts
        } else {
            counts.copy()
        };
        let (a_dims, e_dims) = (a.meta.shape().clone(), e.meta.shape().clone());
        let (total, d_in, d_out) = if outer {
            (a_dims[0] * a_dims[1] * e_dims[1], a_dims[1], e_dims[1])
        } else {
            (a.meta.num_elements(), 1, 1)
        };
        if total == 0 {
            return counts;
        }
        let client = a.client.clone();
        let units = UNITS.min(client.properties().hardware.max_units_per_cube);
        let shared = cells <= SHARED_CELLS;
        let dtype = a.dtype;
        let samples = a_dims[0];
        if outer && y_bins == 1 && samples <= MAX_SAMPLE_CUBES {
            // One sample per row of cubes: most rows are classified, not formed.
            // The largest power of two within the cube's limit (the extremes' tree halves it),
            // at most RANK_ONE_UNITS: the cube's sample statistics cost a barrier per halving,
            // and each unit takes about ROWS_PER_UNIT rows.
            let units = 1u32 << (u32::BITS - 1 - units.clamp(1, RANK_ONE_UNITS).leading_zeros());
            // A row costs at most `2·d_out + bins` iterations (its products walked beside the
            // thresholds, or searched for each threshold crossed when that takes fewer).
            let rows_per_unit = (LOOP_BUDGET / (2 * d_out + bins)).clamp(1, ROWS_PER_UNIT);
            let chunks = d_in
                .div_ceil(units as usize * rows_per_unit)
                .clamp(1, MAX_SAMPLE_CUBES);
            count_rank_one_kernel::launch(
                &client,
                CubeCount::Static(chunks as u32, samples as u32, 1),
                CubeDim::new_1d(units),
                a.into_tensor_arg(),
                e.into_tensor_arg(),
                thresholds.into_tensor_arg(),
                counts.clone().into_tensor_arg(),
                d_in,
                d_out,
                bins,
                search_top(bins),
                guess[0],
                guess[1],
                guess[2],
                guess[3],
                guess[4],
                rounds.min(MAX_ROUNDS) as u32,
                // Probes of a binary search over the `d_out` sorted values: `⌈log₂(d_out + 1)⌉`.
                search_levels(d_out + 1) as usize,
                rounds <= MAX_ROUNDS,
                search_levels(bins),
                if shared { cells } else { 1 },
                shared,
                units as usize,
                sorted_len(d_out, if shared { cells } else { 0 }),
                dtype_to_storage_type(dtype),
            );
            return counts;
        }
        // Units take values (or rank-one rows of `d_out` values) with a stride.
        let work = if outer { total / d_out } else { total };
        let per_item = if outer { d_out } else { 1 };
        let within_budget = (work * per_item).div_ceil(units as usize * LOOP_BUDGET);
        let cubes = work
            .div_ceil(units as usize)
            .clamp(1, MAX_CUBES)
            .max(within_budget)
            .min(MAX_SAMPLE_CUBES);
        count_kernel::launch(
            &client,
            CubeCount::Static(cubes as u32, 1, 1),
            CubeDim::new_1d(units),
            a.into_tensor_arg(),
            e.into_tensor_arg(),
            thresholds.into_tensor_arg(),
            y.into_tensor_arg(),
            counts.clone().into_tensor_arg(),
            total,
            d_in,
            d_out,
            bins,
            y_bins,
            period.max(1),
            search_top(bins),
            guess[0],
            guess[1],
            guess[2],
            guess[3],
            guess[4],
            rounds.min(MAX_ROUNDS) as u32,
            rounds <= MAX_ROUNDS,
            search_levels(bins),
            outer,
            if shared { cells } else { 1 },
            shared,
            dtype_to_storage_type(dtype),
        );
        counts
    }
}

/// Whether `device` is a CubeCL device (or an autodiff device over one).
pub(crate) fn is_cube(device: &DispatchDevice) -> bool {
    #[allow(unreachable_patterns)]
    match device {
        DispatchDevice::Cube(_) => true,
        DispatchDevice::Autodiff(inner) => is_cube(inner),
        _ => false,
    }
}

/// How many storage buffers one launch on `device` may bind (CubeCL's `max_bindings`, which on
/// wgpu already leaves out the buffer wgpu keeps for itself); `None` off a CubeCL device.
pub(crate) fn max_bindings(device: &DispatchDevice) -> Option<u32> {
    #[allow(unreachable_patterns)]
    match device {
        DispatchDevice::Cube(device) => Some(device.client().properties().hardware.max_bindings),
        DispatchDevice::Autodiff(inner) => max_bindings(inner),
        _ => None,
    }
}

/// Launches the kernel, counting onto `onto` (u32 `[bins · y_bins]`; the caller checked the
/// operands).
pub(crate) fn count(
    onto: Tensor<1, Int>,
    values: Values,
    thresholds: Tensor<1>,
    y: Option<Tensor<1, Int>>,
    bins: usize,
    y_bins: usize,
    guess: Option<Guess>,
) -> Result<Tensor<1, Int>, Box<Tensor<1, Int>>> {
    if values.is_empty() {
        return Ok(onto);
    }
    let (a, e, outer) = match values {
        Values::Dense(v) => {
            let n = v.dims()[0];
            let v = v.reshape([1, n]);
            (v.clone(), v, false)
        }
        Values::Outer { a, e } => (a, e, true),
    };
    let device = a.device();
    let (y, period) = match y {
        Some(y) => {
            let period = y.dims()[0];
            (y.inner().cast(DType::U32), period)
        }
        // Never read: an allocated placeholder, no upload and no launch.
        None => (
            Tensor::<1, Int>::empty(
                [1],
                TensorCreationOptions::new(device.clone()).with_dtype(DType::U32),
            ),
            1,
        ),
    };
    let counts = <Dispatch as CountOps>::count_histogram(
        onto.inner().into_dispatch(),
        a.inner().into_dispatch(),
        e.inner().into_dispatch(),
        thresholds.inner().into_dispatch(),
        y.inner().into_dispatch(),
        outer,
        bins,
        y_bins,
        period,
        guess.map_or([0.0; 5], |g| [g.low, g.high, g.offset, g.mul, g.div]),
        // More rounds than a search is worth: search.
        guess.map_or(usize::MAX, |g| g.rounds),
    );
    Ok(Tensor::<1, Int>::from_dispatch(counts))
}

/// Shared memory the rank-one kernel's sorted column factors may take, in values, next to its
/// histogram's cells: with the cells and the sample statistics it stays within the 16 KiB of
/// workgroup memory every wgpu device offers.
const SORTED_BUDGET: usize = 2048;

/// The length of the rank-one kernel's sorted column factors (`d_out` rounded up to a power of
/// two), or 1 where they do not fit next to `cells` shared counters: those rows are formed.
fn sorted_len(d_out: usize, cells: usize) -> usize {
    let len = d_out.next_power_of_two();
    if len >= 2 && len + cells <= SORTED_BUDGET {
        len
    } else {
        1
    }
}

/// The binary search's steps over `bins` bins: `⌈log₂ bins⌉`.
fn search_levels(bins: usize) -> u32 {
    if bins <= 1 {
        0
    } else {
        usize::BITS - (bins - 1).leading_zeros()
    }
}

// The kernels unroll the formula's correction rounds to this many.
const _: () = assert!(MAX_ROUNDS == 4);

/// The binary search's first step: the largest power of two below `bins` (0 for one bin).
fn search_top(bins: usize) -> usize {
    match search_levels(bins) {
        0 => 0,
        levels => 1 << (levels - 1),
    }
}
