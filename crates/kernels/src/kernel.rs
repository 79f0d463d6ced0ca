//! The counting kernel, in CubeCL's language.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;

/// The bin of `x`: the number of thresholds `thresholds[1..bins]` it reaches (a binary search;
/// NaN reaches none).
#[cube]
fn bin_of<F: Float>(x: F, thresholds: &Tensor<F>, bins: usize) -> usize {
    let mut lo = 0usize;
    let mut hi = bins - 1;
    while lo < hi {
        let mid = (lo + hi + 1) / 2;
        if x >= thresholds[mid] {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Value `k`: `a[k]`, or the product `a_{n,i}·e_{n,o}` for `k = (n·d_in + i)·d_out + o`.
#[cube]
fn value_at<F: Float>(
    a: &Tensor<F>,
    e: &Tensor<F>,
    k: usize,
    d_in: usize,
    d_out: usize,
    #[comptime] outer: bool,
) -> F {
    if outer {
        let per_sample = d_in * d_out;
        let n = k / per_sample;
        let r = k % per_sample;
        a[n * d_in + r / d_out] * e[n * d_out + r % d_out]
    } else {
        a[k]
    }
}

/// Each unit counts values `k ≡ ABSOLUTE_POS` (mod units launched) into its cube's shared
/// histogram (or straight into `counts` when the cells do not fit); each cube then adds its
/// histogram to `counts`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_kernel<F: Float>(
    a: &Tensor<F>,
    e: &Tensor<F>,
    thresholds: &Tensor<F>,
    y: &Tensor<u32>,
    counts: &mut Tensor<Atomic<u32>>,
    total: usize,
    d_in: usize,
    d_out: usize,
    bins: usize,
    y_bins: usize,
    period: usize,
    #[comptime] outer: bool,
    #[comptime] local_cells: usize,
    #[comptime] shared: bool,
    #[define(F)] _dtype: ElemType,
) {
    let cells = bins * y_bins;
    let units = CUBE_DIM as usize;
    let local = Shared::<[Atomic<u32>]>::new_slice(local_cells);
    if shared {
        let mut c = UNIT_POS as usize;
        while c < cells {
            local[c].store(0u32);
            c += units;
        }
        sync_cube();
    }
    let stride = CUBE_COUNT * units;
    let mut k = ABSOLUTE_POS;
    while k < total {
        let x = value_at::<F>(a, e, k, d_in, d_out, outer);
        let mut cell = bin_of::<F>(x, thresholds, bins);
        if y_bins > 1 {
            cell = cell * y_bins + (y[k % period] as usize);
        }
        if shared {
            local[cell].fetch_add(1u32);
        } else {
            counts[cell].fetch_add(1u32);
        }
        k += stride;
    }
    if shared {
        sync_cube();
        let mut c = UNIT_POS as usize;
        while c < cells {
            let v = local[c].load();
            if v > 0u32 {
                counts[c].fetch_add(v);
            }
            c += units;
        }
    }
}

