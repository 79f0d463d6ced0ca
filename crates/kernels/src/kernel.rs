//! The counting kernel, in CubeCL's language.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;

/// The bin of `x`: the number of thresholds `thresholds[1..bins]` it reaches (NaN reaches
/// none), by a binary search whose steps (`top`, `top/2`, …, 1: `top` the largest power of two
/// below `bins`) are the same for every value, so units never diverge.
#[cube]
fn bin_of<F: Float>(x: F, thresholds: &Tensor<F>, bins: usize, top: usize) -> usize {
    let mut lo = 0usize;
    let mut step = top;
    while step > 0 {
        let probe = lo + step;
        if probe < bins && x >= thresholds[probe] {
            lo = probe;
        }
        step /= 2;
    }
    lo
}

/// The bin of `x` from the rule's formula `⌊(clamp(x) − offset)·mul/div⌋`, evaluated in `F`
/// and then moved `rounds` times up where `x ≥ T_{i+1}` and down where `x < T_i`: the caller
/// bounds beforehand how far `F`'s rounding can put the formula off, so the corrected bin is
/// the exact one, in two threshold reads a round instead of a search's `log₂ bins`. NaN: 0.
#[cube]
#[allow(clippy::too_many_arguments, clippy::eq_op)]
fn guessed_bin<F: Float>(
    x: F,
    thresholds: &Tensor<F>,
    bins: usize,
    low: f32,
    high: f32,
    offset: f32,
    mul: f32,
    div: f32,
    rounds: u32,
) -> usize {
    let mut index = 0usize;
    // False only for NaN (ordered comparison).
    if x == x {
        let mut t = x;
        let (low, high) = (F::cast_from(low), F::cast_from(high));
        if t < low {
            t = low;
        }
        if t > high {
            t = high;
        }
        let mut guess =
            ((t - F::cast_from(offset)) * F::cast_from(mul) / F::cast_from(div)).floor();
        let last = F::cast_from((bins - 1) as u32);
        if guess < F::new(0.0) {
            guess = F::new(0.0);
        }
        if guess > last {
            guess = last;
        }
        index = usize::cast_from(guess);
        let mut round = 0u32;
        while round < rounds {
            // `T_bins = +∞` and `T_0 = −∞`: both reads stay in bounds.
            if x >= thresholds[index + 1] {
                if index + 1 < bins {
                    index += 1;
                }
            } else if x < thresholds[index] {
                index -= 1;
            }
            round += 1;
        }
    }
    index
}

/// Each unit counts values `k ≡ ABSOLUTE_POS` (mod units launched) — rank-one products a row
/// `(n, i)` at a time, `a_{n,i}·e_{n,o}` for every `o`, formed in a register and never stored —
/// into its cube's shared histogram (or straight into `counts` when the cells do not fit);
/// each cube then adds its histogram to `counts`.
///
/// A 1-d histogram's hot cell, the bin of zero (a trained ReLU net's exact zeros, whole warps
/// of them, and most small values), is counted in a register per unit and added once: no
/// atomic contends there. An exact zero skips the bin search, and a rank-one row whose factor
/// `a_{n,i}` is zero counts its `d_out` zeros at once (as the host counts a row of zeros).
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
    top: usize,
    low: f32,
    high: f32,
    offset: f32,
    mul: f32,
    div: f32,
    rounds: u32,
    #[comptime] guessed: bool,
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
    let zero = F::new(0.0);
    // The hot cell (1-d histograms only: a 2-d cell also depends on the parameter's bin).
    let one_dim = y_bins == 1;
    let hot_cell = if guessed {
        guessed_bin::<F>(zero, thresholds, bins, low, high, offset, mul, div, rounds)
    } else {
        bin_of::<F>(zero, thresholds, bins, top)
    };
    let mut hot = 0u32;
    if outer {
        // A unit takes a whole row `(n, i)`: one division per row, not per product.
        let rows = total / d_out;
        let mut row = ABSOLUTE_POS;
        while row < rows {
            let n = row / d_in;
            let factor = a[row];
            if one_dim && factor == zero {
                hot += u32::cast_from(d_out);
            } else {
                let e_row = n * d_out;
                let y_row = (row - n * d_in) * d_out;
                let mut o = 0usize;
                while o < d_out {
                    let x = factor * e[e_row + o];
                    let mut cell = if guessed {
                        guessed_bin::<F>(x, thresholds, bins, low, high, offset, mul, div, rounds)
                    } else {
                        bin_of::<F>(x, thresholds, bins, top)
                    };
                    if y_bins > 1 {
                        cell = cell * y_bins + (y[y_row + o] as usize);
                    }
                    if one_dim && cell == hot_cell {
                        hot += 1u32;
                    } else if shared {
                        local[cell].fetch_add(1u32);
                    } else {
                        counts[cell].fetch_add(1u32);
                    }
                    o += 1;
                }
            }
            row += stride;
        }
    } else {
        let mut k = ABSOLUTE_POS;
        while k < total {
            let x = a[k];
            if one_dim && x == zero {
                hot += 1u32;
            } else {
                let mut cell = if guessed {
                    guessed_bin::<F>(x, thresholds, bins, low, high, offset, mul, div, rounds)
                } else {
                    bin_of::<F>(x, thresholds, bins, top)
                };
                if y_bins > 1 {
                    cell = cell * y_bins + (y[k % period] as usize);
                }
                if one_dim && cell == hot_cell {
                    hot += 1u32;
                } else if shared {
                    local[cell].fetch_add(1u32);
                } else {
                    counts[cell].fetch_add(1u32);
                }
            }
            k += stride;
        }
    }
    if hot > 0u32 {
        if shared {
            local[hot_cell].fetch_add(hot);
        } else {
            counts[hot_cell].fetch_add(hot);
        }
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
