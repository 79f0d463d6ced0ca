//! The counting kernel, in CubeCL's language.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;

/// The bin of `x`: the number of thresholds `thresholds[1..bins]` it reaches (NaN reaches
/// none), by a binary search whose `levels` steps (`top`, `top/2`, …, 1: `top` the largest
/// power of two below `bins`) are the same for every value, so units never diverge.
///
/// The steps are unrolled, as is every loop inside a unit's walk over its values: lavapipe
/// (Mesa's gallivm) counts the iterations of nested loops together from each entry into the
/// outermost one and leaves them all after 65 535, so a loop per value would cut a unit's
/// count short (the launches bound each unit's values for the same reason).
#[cube]
fn bin_of<F: Float>(
    x: F,
    thresholds: &Tensor<F>,
    bins: usize,
    top: usize,
    #[comptime] levels: u32,
) -> usize {
    let mut lo = 0usize;
    let mut step = top;
    #[unroll]
    for _ in 0..levels {
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
        // Unrolled to `MAX_ROUNDS` (see `bin_of`).
        #[unroll]
        for round in 0..4u32 {
            // `T_bins = +∞` and `T_0 = −∞`: both reads stay in bounds.
            if round < rounds {
                if x >= thresholds[index + 1] {
                    if index + 1 < bins {
                        index += 1;
                    }
                } else if x < thresholds[index] {
                    index -= 1;
                }
            }
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
/// atomic contends there; an exact zero skips the bin search. (1-d rank-one products go to
/// [`count_rank_one_kernel`], which classifies whole rows.)
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
    #[comptime] levels: u32,
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
        bin_of::<F>(zero, thresholds, bins, top, levels)
    };
    let mut hot = 0u32;
    if outer {
        // A unit takes a whole row `(n, i)`: one division per row, not per product.
        let rows = total / d_out;
        let mut row = ABSOLUTE_POS;
        while row < rows {
            let n = row / d_in;
            let factor = a[row];
            let e_row = n * d_out;
            let y_row = (row - n * d_in) * d_out;
            let mut o = 0usize;
            while o < d_out {
                let x = factor * e[e_row + o];
                let mut cell = if guessed {
                    guessed_bin::<F>(x, thresholds, bins, low, high, offset, mul, div, rounds)
                } else {
                    bin_of::<F>(x, thresholds, bins, top, levels)
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
                    bin_of::<F>(x, thresholds, bins, top, levels)
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

/// The bin of `x` by the rule's formula (`guessed`) or by search.
#[cube]
#[allow(clippy::too_many_arguments)]
fn bin<F: Float>(
    x: F,
    thresholds: &Tensor<F>,
    bins: usize,
    top: usize,
    low: f32,
    high: f32,
    offset: f32,
    mul: f32,
    div: f32,
    rounds: u32,
    #[comptime] guessed: bool,
    #[comptime] levels: u32,
) -> usize {
    if guessed {
        guessed_bin::<F>(x, thresholds, bins, low, high, offset, mul, div, rounds)
    } else {
        bin_of::<F>(x, thresholds, bins, top, levels)
    }
}

/// Adds `count` values to `cell`: in the cube's shared counts (`shared`) or the output's,
/// except the hot cell's, which the caller keeps in a register: returned for it to add.
#[cube]
fn file(
    local: &Shared<[Atomic<u32>]>,
    counts: &mut Tensor<Atomic<u32>>,
    cell: usize,
    count: u32,
    hot_cell: usize,
    #[comptime] shared: bool,
) -> u32 {
    let mut hot = 0u32;
    if cell == hot_cell {
        hot = count;
    } else if shared {
        local[cell].fetch_add(count);
    } else {
        counts[cell].fetch_add(count);
    }
    hot
}

/// The bins of a row's lowest and highest products `factor·e_lo`, `factor·e_hi` (rounding is
/// monotonic: every product of the row lies between them).
#[cube]
#[allow(clippy::too_many_arguments)]
fn row_bins<F: Float>(
    factor: F,
    e_lo: F,
    e_hi: F,
    thresholds: &Tensor<F>,
    bins: usize,
    top: usize,
    low: f32,
    high: f32,
    offset: f32,
    mul: f32,
    div: f32,
    rounds: u32,
    #[comptime] guessed: bool,
    #[comptime] levels: u32,
) -> (usize, usize) {
    let p = factor * e_lo;
    let q = factor * e_hi;
    let first = bin::<F>(
        F::min(p, q),
        thresholds,
        bins,
        top,
        low,
        high,
        offset,
        mul,
        div,
        rounds,
        guessed,
        levels,
    );
    let last = bin::<F>(
        F::max(p, q),
        thresholds,
        bins,
        top,
        low,
        high,
        offset,
        mul,
        div,
        rounds,
        guessed,
        levels,
    );
    (first, last)
}

/// A 1-d histogram of the rank-one products `a_{n,i}·e_{n,o}`, one sample per row of cubes
/// (cube `(c, n)` takes the rows `i ≡ c·units + unit` of sample `n`). The cube first finds its
/// sample's column factors' extremes, sign counts and smallest nonzero magnitude (as the host's
/// rank-one binning does); then most rows need no product formed: a zero factor's row is
/// `d_out` zeros; a row whose extreme products fall in one bin lands there whole; a row
/// spanning two bins whose threshold lies nearer zero than every nonzero product of the row
/// splits by the signs. Rows spanning more bins are counted from the sample's column factors
/// sorted in shared memory (where they fit beside the histogram: `sorted_len`, a power of two,
/// above 1): runs of equal bins by a binary search per threshold crossed, or by walking the
/// sorted products beside the thresholds, whichever reads less; elsewhere (too many column
/// factors, a NaN or an infinity among them) such rows are formed one product at a time.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_rank_one_kernel<F: Float>(
    a: &Tensor<F>,
    e: &Tensor<F>,
    thresholds: &Tensor<F>,
    counts: &mut Tensor<Atomic<u32>>,
    d_in: usize,
    d_out: usize,
    bins: usize,
    top: usize,
    low: f32,
    high: f32,
    offset: f32,
    mul: f32,
    div: f32,
    rounds: u32,
    search_steps: usize,
    #[comptime] guessed: bool,
    #[comptime] levels: u32,
    #[comptime] local_cells: usize,
    #[comptime] shared: bool,
    #[comptime] units: usize,
    #[comptime] sorted_len: usize,
    #[define(F)] _dtype: ElemType,
) {
    let n = CUBE_POS_Y as usize;
    let unit = UNIT_POS as usize;
    let local = Shared::<[Atomic<u32>]>::new_slice(local_cells);
    if shared {
        let mut c = unit;
        while c < bins {
            local[c].store(0u32);
            c += units;
        }
    }
    // Whether any unit left rows for the sorted pass (set before the first barrier below).
    let deferring = Shared::<[Atomic<u32>]>::new_slice(1usize);
    if unit == 0 {
        deferring[0].store(0u32);
    }
    // The sample's column factors, reduced over the cube in shared memory.
    let zero = F::new(0.0);
    let base = n * d_out;
    let mut lo = F::max_value();
    let mut hi = F::min_value();
    let mut small = F::max_value();
    let mut negatives = 0u32;
    let mut positives = 0u32;
    // Values neither finite nor zero-comparable (NaN, ±∞): their rows are formed.
    let mut bad = 0u32;
    let infinity = F::max_value();
    let mut o = unit;
    while o < d_out {
        let v = e[base + o];
        if !(v >= -infinity && v <= infinity) {
            bad += 1u32;
        }
        lo = F::min(lo, v);
        hi = F::max(hi, v);
        if v < zero {
            negatives += 1u32;
            small = F::min(small, -v);
        }
        if v > zero {
            positives += 1u32;
            small = F::min(small, v);
        }
        o += units;
    }
    let mut s_lo = Shared::<[F]>::new_slice(units);
    let mut s_hi = Shared::<[F]>::new_slice(units);
    let mut s_small = Shared::<[F]>::new_slice(units);
    let mut s_neg = Shared::<[u32]>::new_slice(units);
    let mut s_pos = Shared::<[u32]>::new_slice(units);
    let mut s_bad = Shared::<[u32]>::new_slice(units);
    s_lo[unit] = lo;
    s_hi[unit] = hi;
    s_small[unit] = small;
    s_neg[unit] = negatives;
    s_pos[unit] = positives;
    s_bad[unit] = bad;
    sync_cube();
    let mut half = (CUBE_DIM as usize) / 2;
    while half > 0 {
        if unit < half {
            let other = unit + half;
            let mine_lo = s_lo[unit];
            let their_lo = s_lo[other];
            s_lo[unit] = F::min(mine_lo, their_lo);
            let mine_hi = s_hi[unit];
            let their_hi = s_hi[other];
            s_hi[unit] = F::max(mine_hi, their_hi);
            let mine_small = s_small[unit];
            let their_small = s_small[other];
            s_small[unit] = F::min(mine_small, their_small);
            let negatives = s_neg[unit] + s_neg[other];
            s_neg[unit] = negatives;
            let positives = s_pos[unit] + s_pos[other];
            s_pos[unit] = positives;
            let bad = s_bad[unit] + s_bad[other];
            s_bad[unit] = bad;
        }
        sync_cube();
        half /= 2;
    }
    let e_lo = s_lo[0];
    let e_hi = s_hi[0];
    let e_small = s_small[0];
    let e_neg = s_neg[0];
    let e_pos = s_pos[0];
    let all = u32::cast_from(d_out);
    let finite = s_bad[0] == 0u32;
    let hot_cell = bin::<F>(
        zero, thresholds, bins, top, low, high, offset, mul, div, rounds, guessed, levels,
    );
    let mut hot = 0u32;
    let mut deferred = 0u32;
    let mut i = CUBE_POS_X as usize * units + unit;
    let stride = CUBE_COUNT_X as usize * units;
    while i < d_in {
        let factor = a[n * d_in + i];
        if finite && factor == zero {
            // (With a NaN or an infinite column factor, `0·e` is NaN: formed below.)
            hot += all;
        } else {
            let (first, last) = row_bins::<F>(
                factor, e_lo, e_hi, thresholds, bins, top, low, high, offset, mul, div, rounds,
                guessed, levels,
            );
            // Two bins whose threshold `t` lies nearer zero than every nonzero product (a
            // rule's threshold at zero is a tiny number, not zero; rounding is monotonic, so
            // the smallest magnitude's product bounds them all): a product is below `t`
            // exactly when it is negative (`t ≤ 0`) or not positive (`t > 0`).
            let mut split = false;
            let mut t_positive = false;
            if last == first + 1 {
                let t = thresholds[last];
                split = F::abs(factor) * e_small > F::abs(t);
                t_positive = t > zero;
            }
            let row_finite = finite && factor >= -infinity && factor <= infinity;
            if row_finite && first == last {
                hot += file(&local, counts, first, all, hot_cell, shared);
            } else if row_finite && split {
                // Negative products: the factor's sign times the column's; zeros join them
                // below a positive threshold.
                let mut below = e_pos;
                if factor > zero {
                    below = e_neg;
                }
                if t_positive {
                    below += all - e_neg - e_pos;
                }
                hot += file(&local, counts, first, below, hot_cell, shared);
                let above = all - below;
                hot += file(&local, counts, last, above, hot_cell, shared);
            } else if sorted_len > 1 && row_finite {
                // Counted in the sorted pass below.
                deferred += 1u32;
            } else {
                let mut o = 0usize;
                while o < d_out {
                    let x = factor * e[base + o];
                    let cell = bin::<F>(
                        x, thresholds, bins, top, low, high, offset, mul, div, rounds, guessed,
                        levels,
                    );
                    hot += file(&local, counts, cell, 1u32, hot_cell, shared);
                    o += 1;
                }
            }
        }
        i += stride;
    }
    if sorted_len > 1 {
        // Rows spanning more bins: the sample's column factors sorted once in shared memory
        // (a bitonic sort, only where some unit of the cube needs it), then each such row's
        // products split into runs of equal bins by a binary search per threshold crossed
        // (as the host's `rank_one.rs` does), or by walking them in order where that takes
        // fewer reads: no bin formula and one atomic add per run, not per product.
        if deferred > 0u32 {
            deferring[0].fetch_add(1u32);
        }
        sync_cube();
        // The same for every unit of the cube: the barriers below stay uniform.
        if deferring[0].load() > 0u32 {
            let mut sorted = Shared::<[F]>::new_slice(sorted_len);
            let mut k = unit;
            while k < sorted_len {
                // Padding sorts last (every column factor is finite here).
                let mut v = F::max_value();
                if k < d_out {
                    v = e[base + k];
                }
                sorted[k] = v;
                k += units;
            }
            sync_cube();
            let mut size = 2usize;
            while size <= sorted_len {
                let mut gap = size / 2;
                while gap > 0 {
                    let mut k = unit;
                    while k < sorted_len {
                        let partner = k ^ gap;
                        if partner > k {
                            let x = sorted[k];
                            let y = sorted[partner];
                            let ascending = (k & size) == 0;
                            let mut swap = x < y;
                            if ascending {
                                swap = x > y;
                            }
                            if swap {
                                sorted[k] = y;
                                sorted[partner] = x;
                            }
                        }
                        k += units;
                    }
                    sync_cube();
                    gap /= 2;
                }
                size *= 2;
            }
            // Only the units that left rows walk theirs again.
            let mut i = CUBE_POS_X as usize * units + unit;
            if deferred == 0u32 {
                i = d_in;
            }
            while i < d_in {
                let factor = a[n * d_in + i];
                let row_finite = finite && factor >= -infinity && factor <= infinity;
                if row_finite && factor != zero {
                    let (first, last) = row_bins::<F>(
                        factor, e_lo, e_hi, thresholds, bins, top, low, high, offset, mul, div,
                        rounds, guessed, levels,
                    );
                    let mut split = false;
                    if last == first + 1 {
                        split = F::abs(factor) * e_small > F::abs(thresholds[last]);
                    }
                    if first != last && !split {
                        if (last - first) * search_steps < d_out {
                            // `r·sorted[o]` is monotone in `o` (rounding is monotone): the
                            // products at or above `T_b` are a suffix (`r > 0`) or a prefix.
                            let rising = factor > zero;
                            // Products at or above `T_first`: all of them.
                            let mut above = d_out;
                            let mut b = first + 1;
                            while b <= last {
                                let t = thresholds[b];
                                let mut lo = 0usize;
                                let mut hi = d_out;
                                while lo < hi {
                                    let mid = (lo + hi) / 2;
                                    let reached = factor * sorted[mid] >= t;
                                    // The first index past the boundary.
                                    let mut past = !reached;
                                    if rising {
                                        past = reached;
                                    }
                                    if past {
                                        hi = mid;
                                    } else {
                                        lo = mid + 1;
                                    }
                                }
                                let mut reach = lo;
                                if rising {
                                    reach = d_out - lo;
                                }
                                let here = u32::cast_from(above - reach);
                                let cell = b - 1;
                                if here > 0u32 {
                                    hot += file(&local, counts, cell, here, hot_cell, shared);
                                }
                                above = reach;
                                b += 1;
                            }
                            let here = u32::cast_from(above);
                            if here > 0u32 {
                                hot += file(&local, counts, last, here, hot_cell, shared);
                            }
                        } else {
                            // Many bins: the products walked in order beside the thresholds,
                            // a run counted per bin (`d_out + last − first` comparisons).
                            let mut cell = first;
                            let mut next = thresholds[first + 1];
                            let mut run = 0u32;
                            let mut o = 0usize;
                            while o < d_out {
                                let mut k = o;
                                if factor < zero {
                                    k = d_out - 1 - o;
                                }
                                let x = factor * sorted[k];
                                while cell < last && x >= next {
                                    if run > 0u32 {
                                        hot += file(&local, counts, cell, run, hot_cell, shared);
                                    }
                                    run = 0u32;
                                    cell += 1;
                                    next = thresholds[cell + 1];
                                }
                                run += 1u32;
                                o += 1;
                            }
                            hot += file(&local, counts, cell, run, hot_cell, shared);
                        }
                    }
                }
                i += stride;
            }
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
        let mut c = unit;
        while c < bins {
            let v = local[c].load();
            if v > 0u32 {
                counts[c].fetch_add(v);
            }
            c += units;
        }
    }
}
