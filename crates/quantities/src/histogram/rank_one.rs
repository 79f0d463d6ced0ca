//! Host binning of rank-one per-sample gradients `g_n = a_n e_nᵀ` without forming their
//! `d_in·d_out` elements one by one (the histograms' fast path on the host).
//!
//! A row `a_i·e` of one sample splits into runs of equal bins along `e` sorted, and most rows
//! need no search at all: with small gradients a row's products lie in the two bins either
//! side of zero, negative products in one and the rest in the other, which only the signs
//! decide.

use rayon::prelude::*;

use super::axis::{Axis, from_order_key, order_key};
use super::parallel::{add_into, catch_worker, count_in_parallel};
use crate::QuantityError;

/// One sample's column factors and what the row classification needs of them.
struct Columns<'a> {
    values: &'a [f64],
    min: f64,
    max: f64,
    /// The negative value closest to 0 and the positive value closest to 0.
    max_negative: f64,
    min_positive: f64,
    negatives: usize,
    positives: usize,
    /// Ascending and descending copies, made when a row first needs them.
    sorted: Option<(Vec<f64>, Vec<f64>)>,
}

impl<'a> Columns<'a> {
    /// `None` when a value is not finite (such samples are binned one product at a time).
    fn new(values: &'a [f64]) -> Option<Self> {
        let mut columns = Self {
            values,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            max_negative: f64::NEG_INFINITY,
            min_positive: f64::INFINITY,
            negatives: 0,
            positives: 0,
            sorted: None,
        };
        for &v in values {
            if !v.is_finite() {
                return None;
            }
            columns.min = columns.min.min(v);
            columns.max = columns.max.max(v);
            if v < 0.0 {
                columns.negatives += 1;
                columns.max_negative = columns.max_negative.max(v);
            } else if v > 0.0 {
                columns.positives += 1;
                columns.min_positive = columns.min_positive.min(v);
            }
        }
        Some(columns)
    }

    /// How the products `r·values` of a finite row factor `r ≠ 0` fall: their lowest and
    /// highest bins, and whether they are *split at zero* (every negative product in the bin
    /// below zero's, every other one in the bin of zero), with the number of negative
    /// products.
    fn classify(&self, r: f64, axis: &Axis) -> Row {
        let d = self.values.len();
        let (lowest, highest, negative, closest_negative) = if r > 0.0 {
            (
                r * self.min,
                r * self.max,
                self.negatives,
                r * self.max_negative,
            )
        } else {
            (
                r * self.max,
                r * self.min,
                self.positives,
                r * self.min_positive,
            )
        };
        // The negative products are all in the bin below zero's when the lowest is and the one
        // closest to zero is below zero's threshold (a tiny or underflowing product is not);
        // the others are in zero's bin when the highest is below the next threshold.
        let (below_from, zero_to) = axis.split_window;
        let negatives_below_zero = negative == 0 || closest_negative < axis.zero_threshold;
        let negatives_below = negative == 0 || (negatives_below_zero && lowest >= below_from);
        let others_at_zero = negative == d || highest < zero_to;
        Row {
            lowest,
            highest,
            negative,
            split_at_zero: negatives_below && others_at_zero,
            negatives_below_zero,
        }
    }

    /// The values sorted so that `r·line[o]` is non-decreasing.
    fn line(&mut self, r: f64) -> &[f64] {
        let (ascending, descending) = self.sorted.get_or_insert_with(|| {
            let mut ascending = self.values.to_vec();
            ascending.sort_unstable_by(f64::total_cmp);
            let descending = ascending.iter().rev().copied().collect();
            (ascending, descending)
        });
        if r > 0.0 { ascending } else { descending }
    }
}

/// How one row's products fall on the axis.
struct Row {
    lowest: f64,
    highest: f64,
    negative: usize,
    split_at_zero: bool,
    /// Every negative product is below the bin of zero, every other one in it or above: the
    /// run boundary at zero's threshold is the number of negative products.
    negatives_below_zero: bool,
}

/// The first index in `start..` at which `r·line[i] ≥ t` (the products are non-decreasing),
/// galloping from `start`: cheap when few products lie below `t`.
fn first_at_least_from_start(line: &[f64], start: usize, r: f64, t: f64) -> usize {
    let (d, mut low, mut step) = (line.len(), start, 1);
    while low < d {
        let probe = (low + step - 1).min(d - 1);
        if r * line[probe] >= t {
            return low + line[low..probe].partition_point(|&c| r * c < t);
        }
        low = probe + 1;
        step *= 2;
    }
    d
}

/// As [`first_at_least_from_start`], galloping back from the end: cheap when few products
/// lie at or above `t`.
fn first_at_least_from_end(line: &[f64], start: usize, r: f64, t: f64) -> usize {
    let (mut high, mut step) = (line.len(), 1);
    while high > start {
        let probe = high.saturating_sub(step).max(start);
        if r * line[probe] < t {
            return probe + 1 + line[probe + 1..high].partition_point(|&c| r * c < t);
        }
        high = probe;
        step *= 2;
    }
    start
}

/// Adds the bins of every product `r·c`, `c` in `columns`, one at a time.
fn count_directly(r: f64, columns: &[f64], axis: &Axis, counts: &mut [u64]) {
    for &c in columns {
        counts[axis.bin(r * c)] += 1;
    }
}

/// The smallest order key in `low..=high` at which the monotone `pred` holds (`high + 1`
/// if none).
fn first_key(mut low: u64, mut high: u64, pred: impl Fn(f64) -> bool) -> u64 {
    if !pred(from_order_key(high)) {
        return high + 1;
    }
    while low < high {
        let mid = low + (high - low) / 2;
        if pred(from_order_key(mid)) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    low
}

impl Columns<'_> {
    /// The row factors `r > 0` and `r < 0` whose rows are split at zero, as closed intervals
    /// (empty when `lo > hi`). Both sets are intervals: the row is split when the product
    /// closest to zero on the negative side is below zero's threshold (true from some `|r|`
    /// on, as rounding is monotone) and the extreme products stay in the two bins around
    /// zero (true up to some `|r|`). Found by bisection over the floats with
    /// [`Columns::classify`] itself, so a row in an interval is exactly a row `classify`
    /// splits.
    fn split_intervals(&self, axis: &Axis) -> [(f64, f64); 2] {
        let split = |r: f64| self.classify(r, axis).split_at_zero;
        let below = |r: f64| self.classify(r, axis).negatives_below_zero;
        // Positive rows: `negatives_below_zero` holds from some r on, the rest up to some r.
        let (p_low, p_high) = (
            order_key(f64::MIN_POSITIVE * f64::EPSILON),
            order_key(f64::MAX),
        );
        let from = first_key(p_low, p_high, below);
        let positive = if from > p_high || !split(from_order_key(from)) {
            (f64::INFINITY, f64::NEG_INFINITY)
        } else {
            let beyond = first_key(from, p_high, |r| !split(r));
            (from_order_key(from), from_order_key(beyond - 1))
        };
        // Negative rows: mirrored (`negatives_below_zero` holds up to some r < 0).
        let (n_low, n_high) = (
            order_key(f64::MIN),
            order_key(-f64::MIN_POSITIVE * f64::EPSILON),
        );
        let until = first_key(n_low, n_high, |r| !below(r));
        let negative = if until == n_low || !split(from_order_key(until - 1)) {
            (f64::INFINITY, f64::NEG_INFINITY)
        } else {
            let first = first_key(n_low, until - 1, split);
            (from_order_key(first), from_order_key(until - 1))
        };
        [positive, negative]
    }
}

/// Below this many rows a sample's rows are classified one by one (finding the split
/// intervals takes a few hundred classifications).
const INTERVAL_ROWS: usize = 64;

/// Adds the bins of every product `rows[i]·columns[o]` of one sample to `counts`.
fn count_sample(rows: &[f64], columns: &[f64], axis: &Axis, counts: &mut [u64]) {
    // A zero column puts every finite row's product in zero's bin.
    let nonzero: Vec<f64> = columns.iter().copied().filter(|&c| c != 0.0).collect();
    let zeros = (columns.len() - nonzero.len()) as u64;
    let Some(mut cols) = Columns::new(&nonzero) else {
        for &r in rows {
            count_directly(r, columns, axis, counts);
        }
        return;
    };
    let d = nonzero.len();
    let log_d = (usize::BITS - d.leading_zeros()) as usize;
    let [positive, negative] = if rows.len() >= INTERVAL_ROWS && d > 0 {
        cols.split_intervals(axis)
    } else {
        [(f64::INFINITY, f64::NEG_INFINITY); 2]
    };
    // Rows in the split intervals are only counted; the others are gathered (branch-free,
    // as the two kinds interleave at random) and binned below.
    let (mut positive_split, mut negative_split) = (0u64, 0u64);
    let mut rest = vec![0.0; rows.len()];
    let mut kept = 0;
    for &r in rows {
        let in_positive = (positive.0 <= r) & (r <= positive.1);
        let in_negative = (negative.0 <= r) & (r <= negative.1);
        positive_split += u64::from(in_positive);
        negative_split += u64::from(in_negative);
        rest[kept] = r;
        kept += usize::from(!(in_positive | in_negative));
    }
    let mut finite = 0u64;
    for &r in &rest[..kept] {
        if !r.is_finite() {
            count_directly(r, columns, axis, counts);
            continue;
        }
        finite += 1;
        if r == 0.0 {
            counts[axis.zero] += d as u64;
            continue;
        }
        let row = cols.classify(r, axis);
        if row.split_at_zero {
            counts[axis.below_zero] += row.negative as u64;
            counts[axis.zero] += (d - row.negative) as u64;
            continue;
        }
        let (low, high) = (axis.bin(row.lowest), axis.bin(row.highest));
        if low == high {
            counts[low] += d as u64;
        } else if d <= 16 || (high - low) * log_d >= d {
            count_directly(r, &nonzero, axis, counts);
        } else {
            // The runs of equal bins along the sorted row, one search per bin edge from the
            // nearer end (the tails are short); the edge at zero from the signs.
            let line = cols.line(r);
            let mut start = 0;
            for k in low + 1..=high {
                let t = axis.thresholds[k];
                let end = if k == axis.zero && row.negatives_below_zero {
                    row.negative
                } else if k <= axis.zero {
                    first_at_least_from_start(line, start, r, t)
                } else {
                    first_at_least_from_end(line, start, r, t)
                };
                counts[k - 1] += (end - start) as u64;
                start = end;
            }
            counts[high] += (d - start) as u64;
        }
    }
    let (negatives, positives) = (cols.negatives as u64, cols.positives as u64);
    counts[axis.below_zero] += positive_split * negatives + negative_split * positives;
    counts[axis.zero] +=
        positive_split * (d as u64 - negatives) + negative_split * (d as u64 - positives);
    counts[axis.zero] += (positive_split + negative_split + finite) * zeros;
}

/// Histogram of every product `a[n·d_in + i]·e[n·d_out + o]` of `b` samples on `axis`, equal
/// to binning each product, without forming them one by one.
///
/// # Cost
///
/// Per sample `O(d_in + d_out)` when every row is split at zero (small gradients); a row that
/// spans more bins costs a binary search per bin edge over the sorted factors (sorted once per
/// sample), or `d_out` when that is cheaper. Samples run on rayon's pool.
///
/// # Errors
///
/// As [`count_in_parallel`].
pub(crate) fn outer_histogram(
    a: &[f64],
    e: &[f64],
    b: usize,
    axis: &Axis,
) -> Result<Vec<u64>, QuantityError> {
    let (d_in, d_out) = (a.len() / b.max(1), e.len() / b.max(1));
    count_in_parallel(b, axis.bins(), |n, counts| {
        let (a, e) = (&a[n * d_in..(n + 1) * d_in], &e[n * d_out..(n + 1) * d_out]);
        // The products are symmetric: sort (at most) the shorter factor, walk the longer.
        if d_in < d_out {
            count_sample(e, a, axis, counts);
        } else {
            count_sample(a, e, axis, counts);
        }
    })
}

/// Joint histogram of the products `a_{n,i}·e_{n,o}` (x) and `θ[i·d_out + o]` (y) of `b`
/// samples, equal to pairing each product with its parameter, without pairing them one by one.
///
/// Every product is first assumed to lie in one of the two x-bins around zero: negative
/// products in the bin below zero's, the others in zero's. Summed over the samples, the number
/// of samples whose element `(i, o)` is assumed below zero is `(rᵀc)[i, o]` for 0/1 matrices
/// `r` `[2b, d_in]` (row `n`: sample `n`'s rows with a positive factor; row `b + n`: those with
/// a negative one) and `c` `[2b, d_out]` (`[e_{n,o} < 0]`, then `[e_{n,o} > 0]`): one matrix
/// product (`matmul(r, c, 2b, d_in, d_out)`, exact in `f32`) and one pass over `θ`'s y-bins
/// count them all. Then the products that lie elsewhere (the tails beyond the two bins, and
/// negative products too small to leave zero's bin) are moved to their bins: on a row sorted
/// by `e_n` they sit at the ends, found by a galloping search. Rows with a non-finite factor
/// are binned element by element.
///
/// # Errors
///
/// What `matmul` returns, [`QuantityError::Shape`] if its counts are inconsistent, and as
/// [`count_in_parallel`].
pub(crate) fn outer_histogram2d(
    a: &[f64],
    e: &[f64],
    theta: &[f64],
    b: usize,
    (x, y): (&Axis, &Axis),
    matmul: impl FnOnce(&[f32], &[f32], usize, usize, usize) -> Result<Vec<f64>, QuantityError>,
) -> Result<Vec<u64>, QuantityError> {
    let (d_in, d_out) = (a.len() / b.max(1), e.len() / b.max(1));
    let yb = y.bins();
    let ybin: Vec<usize> = theta.par_iter().map(|t| y.bin(*t)).collect();
    let mut r = vec![0.0f32; 2 * b * d_in];
    let mut c = vec![0.0f32; 2 * b * d_out];
    let (r_positive, r_negative) = r.split_at_mut(b * d_in);
    let (c_negative, c_positive) = c.split_at_mut(b * d_out);
    type Chunks<'s> = (
        ((&'s mut [f32], &'s mut [f32]), &'s mut [f32]),
        &'s mut [f32],
    );
    let fold = |(mut counts, mut assumed): (Vec<i64>, Vec<u64>),
                (n, (((r_pos, r_neg), c_neg), c_pos)): (usize, Chunks<'_>)| {
        let (a, e) = (&a[n * d_in..(n + 1) * d_in], &e[n * d_out..(n + 1) * d_out]);
        let cols = Columns::new(e);
        if cols.is_some() {
            for (o, &v) in e.iter().enumerate() {
                c_neg[o] = f32::from(v < 0.0);
                c_pos[o] = f32::from(v > 0.0);
            }
        }
        // Column indices sorted by `e`, made when a row first has products off the two bins.
        let mut order: Option<(Vec<usize>, Vec<f64>, Vec<f64>)> = None;
        for (i, &ri) in a.iter().enumerate() {
            let ys = &ybin[i * d_out..(i + 1) * d_out];
            let Some(cols) = cols.as_ref().filter(|_| ri.is_finite()) else {
                for (o, &v) in e.iter().enumerate() {
                    counts[x.bin(ri * v) * yb + ys[o]] += 1;
                }
                continue;
            };
            assumed[i] += 1;
            if ri == 0.0 {
                continue;
            }
            if ri > 0.0 {
                r_pos[i] = 1.0;
            } else {
                r_neg[i] = 1.0;
            }
            let row = cols.classify(ri, x);
            if row.split_at_zero {
                continue;
            }
            let (order, ascending, descending) = order.get_or_insert_with(|| {
                let mut order: Vec<usize> = (0..d_out).collect();
                order.sort_unstable_by(|&p, &q| e[p].total_cmp(&e[q]));
                let ascending: Vec<f64> = order.iter().map(|&o| e[o]).collect();
                let descending = ascending.iter().rev().copied().collect();
                (order, ascending, descending)
            });
            // Position p on the row (products non-decreasing) is column `column(p)`.
            let line: &[f64] = if ri > 0.0 { ascending } else { descending };
            let column = |p: usize| {
                if ri > 0.0 {
                    order[p]
                } else {
                    order[d_out - 1 - p]
                }
            };
            let mut moved = |p: usize, from: usize| {
                let o = column(p);
                counts[x.bin(ri * e[o]) * yb + ys[o]] += 1;
                counts[from * yb + ys[o]] -= 1;
            };
            let below_end = if x.below_zero < x.zero {
                first_at_least_from_start(line, 0, ri, x.thresholds[x.below_zero])
            } else {
                0
            };
            for p in 0..below_end {
                moved(p, x.below_zero);
            }
            if !row.negatives_below_zero && x.below_zero < x.zero {
                let tiny = below_end
                    + line[below_end..row.negative].partition_point(|&v| ri * v < x.zero_threshold);
                for p in tiny..row.negative {
                    moved(p, x.below_zero);
                }
            }
            if x.zero + 1 < x.bins() {
                let above = first_at_least_from_end(
                    line,
                    row.negative.max(below_end),
                    ri,
                    x.thresholds[x.zero + 1],
                );
                for p in above..d_out {
                    moved(p, x.zero);
                }
            }
        }
        (counts, assumed)
    };
    let zeros = || (vec![0i64; x.bins() * yb], vec![0u64; d_in]);
    let add = |(mut counts, mut assumed): (Vec<i64>, Vec<u64>), (c2, a2): (Vec<i64>, Vec<u64>)| {
        for (t, v) in counts.iter_mut().zip(c2) {
            *t += v;
        }
        add_into(&mut assumed, &a2);
        (counts, assumed)
    };
    let (mut counts, assumed) = catch_worker(|| {
        r_positive
            .par_chunks_mut(d_in.max(1))
            .zip(r_negative.par_chunks_mut(d_in.max(1)))
            .zip(c_negative.par_chunks_mut(d_out.max(1)))
            .zip(c_positive.par_chunks_mut(d_out.max(1)))
            .enumerate()
            .fold(zeros, fold)
            .reduce(zeros, add)
    })?;
    if assumed.iter().any(|&s| s > 0) {
        let below = matmul(&r, &c, 2 * b, d_in, d_out)?;
        for (j, (&p, &yj)) in below.iter().zip(&ybin).enumerate() {
            let rows = assumed[j / d_out] as i64;
            // A count of samples: an integer in [0, rows], exactly.
            let below = p as i64;
            if below as f64 != p || !(0..=rows).contains(&below) {
                return Err(QuantityError::Shape(format!(
                    "the histogram's matrix product counted {p} of {rows} rows at element {j}"
                )));
            }
            counts[x.below_zero * yb + yj] += below;
            counts[x.zero * yb + yj] += rows - below;
        }
    }
    counts
        .into_iter()
        .map(u64::try_from)
        .collect::<Result<_, _>>()
        .map_err(|_| QuantityError::Shape("the histogram's tail corrections went negative".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::axis::Rule;
    use crate::histogram::axis::tests::generator;
    use crate::histogram::matmul::host_matmul_tn;

    fn brute_force_1d(a: &[f64], e: &[f64], b: usize, axis: &Axis) -> Vec<u64> {
        let (d_in, d_out) = (a.len() / b, e.len() / b);
        let mut counts = vec![0u64; axis.bins()];
        for n in 0..b {
            for i in 0..d_in {
                for o in 0..d_out {
                    counts[axis.bin(a[n * d_in + i] * e[n * d_out + o])] += 1;
                }
            }
        }
        counts
    }

    /// Factors of `b` samples with every kind of row: small (split at zero), large (many bins),
    /// zeros, products on bin edges, underflowing products, NaN and ∞.
    fn factors(seed: u64, b: usize, d_in: usize, d_out: usize, scale: f64) -> (Vec<f64>, Vec<f64>) {
        let mut next = generator(seed);
        let mut a: Vec<f64> = (0..b * d_in).map(|_| (next() - 0.5) * 6.0).collect();
        let mut e: Vec<f64> = (0..b * d_out)
            .map(|_| (next() - 0.5) * scale * if next() < 0.1 { 100.0 } else { 1.0 })
            .collect();
        let set = |v: &mut Vec<f64>, at: usize, value: f64| {
            if at < v.len() {
                v[at] = value;
            }
        };
        set(&mut a, 3, 0.0);
        set(&mut e, 4, 0.0);
        let on_edge = 0.04 / a[0]; // a product exactly on an edge
        set(&mut e, 5, on_edge);
        set(&mut e, d_out + 1, -1e-300); // products that underflow to −0
        set(&mut a, d_in + 2, 1e-300);
        if b > 3 {
            set(&mut e, 2 * d_out + 3, f64::NAN);
            set(&mut a, 3 * d_in + 1, f64::INFINITY);
        }
        (a, e)
    }

    #[test]
    fn outer_histogram_equals_brute_force() {
        for (b, d_in, d_out) in [
            (5, 7, 33),
            (6, 40, 9),
            (4, 3, 200),
            (3, 300, 120),
            (8, 150, 81),
            (1, 1, 1),
        ] {
            for scale in [0.001, 0.3, 3.0] {
                let (a, mut e) = factors(7 + d_out as u64, b, d_in, d_out, scale);
                if d_out == 81 {
                    // ReLU-like: many exact zeros among the columns, and a whole zero sample.
                    e.iter_mut().step_by(2).for_each(|v| *v = 0.0);
                    e[..d_out].iter_mut().for_each(|v| *v = 0.0);
                }
                for (range, bins) in [
                    ((-2.0, 2.0), 100),
                    ((-1.0456, 1.0456), 20),
                    ((-0.5, 1.5), 7),
                ] {
                    let axis = Axis::new(Rule::Histc, range, bins);
                    assert_eq!(
                        outer_histogram(&a, &e, b, &axis).ok(),
                        Some(brute_force_1d(&a, &e, b, &axis)),
                        "{b}x{d_in}x{d_out}, scale {scale}, range {range:?}, {bins} bins"
                    );
                }
            }
        }
    }

    #[test]
    fn outer_histogram2d_equals_brute_force() {
        for (b, d_in, d_out) in [(4, 6, 29), (5, 30, 8), (1, 2, 3)] {
            for scale in [0.001, 0.4, 3.0] {
                let (a, e) = factors(11 + d_in as u64, b, d_in, d_out, scale);
                let mut next = generator(5);
                let theta: Vec<f64> = (0..d_in * d_out).map(|_| (next() - 0.5) * 5.0).collect();
                for (xr, yr, bins) in [
                    ((-1.0, 1.0), (-2.0, 2.0), (40, 50)),
                    ((-0.3, 0.7), (-1.0, 1.5), (10, 12)),
                    ((-0.01, 0.01), (-1.0, 1.0), (3, 4)),
                ] {
                    let (x, y) = (
                        Axis::new(Rule::Centred, xr, bins.0),
                        Axis::new(Rule::Centred, yr, bins.1),
                    );
                    let mut expected = vec![0u64; bins.0 * bins.1];
                    for n in 0..b {
                        for i in 0..d_in {
                            for o in 0..d_out {
                                let xb = x.bin(a[n * d_in + i] * e[n * d_out + o]);
                                expected[xb * bins.1 + y.bin(theta[i * d_out + o])] += 1;
                            }
                        }
                    }
                    assert_eq!(
                        outer_histogram2d(&a, &e, &theta, b, (&x, &y), host_matmul_tn).ok(),
                        Some(expected),
                        "{b}x{d_in}x{d_out}, scale {scale}, {xr:?}"
                    );
                }
            }
        }
    }
}
