//! Counting on the device: each value is compared with every bin threshold of its axis, and
//! only the sums come back.
//!
//! The bin of `x` is the number of thresholds `T_k` it reaches, so summing `[x ≥ T_k]` over a
//! chunk's values gives, per `k`, how many values lie in bin `k` or above; the bin counts are
//! the differences ([`counts_from_reached`], on the host, after the step's one read). A 2-d
//! histogram turns the comparisons into 0/1 rows (one-hot bins) and counts pairs with one
//! matrix product per chunk. No scatter is involved, so the counts are exact on every backend
//! (burn's scatter-add is not atomic on all of them).
//!
//! Float32 values are compared with each threshold rounded *up* to float32: for a float32
//! `x`, `x ≥ ⌈T⌉₃₂` exactly when `x ≥ T` in float64, so a value lands where the host's
//! float64 rule puts it (narrower floats are widened to float32 first, exactly). Float64
//! values are compared with the thresholds themselves.

use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorCreationOptions, TensorData};

use super::host::Axis;
use crate::persample::Elements;

/// The most comparisons (values × thresholds) one device operation holds: bounds the memory
/// of a chunk's 0/1 matrix (`LIMIT` bytes as booleans, a few times that as integers).
const LIMIT: usize = 1 << 22;

/// Counts below this stay exact in a float32 matrix product.
const EXACT_F32: usize = 1 << 24;

/// An axis's thresholds on a device, in the float type values are compared in.
#[derive(Debug, Clone)]
pub(crate) struct DeviceAxis {
    /// The host thresholds these were made from (the cache key with device and type).
    host: Vec<f64>,
    device: Device,
    dtype: DType,
    /// `[1, bins − 1]`; `None` for a single bin.
    thresholds: Option<Tensor<2>>,
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

impl DeviceAxis {
    /// The device thresholds of `axis` for values of type `dtype` on `device`, kept in `slot`
    /// while the axis, device and type stay the same.
    pub(crate) fn cached<'a>(
        slot: &'a mut Option<DeviceAxis>,
        axis: &Axis,
        device: &Device,
        dtype: DType,
    ) -> &'a DeviceAxis {
        let dtype = compare_dtype(dtype);
        let fits = |d: &DeviceAxis| {
            d.dtype == dtype && d.device == *device && d.host.as_slice() == axis.thresholds()
        };
        if !slot.as_ref().is_some_and(fits) {
            *slot = Some(DeviceAxis::new(axis, device, dtype));
        }
        slot.get_or_insert_with(|| DeviceAxis::new(axis, device, dtype))
    }

    fn new(axis: &Axis, device: &Device, dtype: DType) -> Self {
        let host = axis.thresholds().to_vec();
        let k = host.len();
        let thresholds = (k > 0).then(|| {
            let options = TensorCreationOptions::new(device.clone()).with_dtype(dtype);
            let data = if dtype == DType::F64 {
                TensorData::new(host.clone(), [1, k])
            } else {
                TensorData::new(host.iter().map(|&t| round_up_f32(t)).collect(), [1, k])
            };
            Tensor::<2>::from_data(data, options)
        });
        Self {
            host,
            device: device.clone(),
            dtype,
            thresholds,
        }
    }

    /// The number of bins.
    fn bins(&self) -> usize {
        self.host.len() + 1
    }

    /// `[n, bins − 1]`: whether each value reaches each threshold (`None` for one bin).
    fn reached(&self, values: Tensor<1>) -> Option<Tensor<2, Bool>> {
        let thresholds = self.thresholds.clone()?;
        let n = values.dims()[0];
        Some(
            values
                .cast(self.dtype)
                .reshape([n, 1])
                .greater_equal(thresholds),
        )
    }

    /// How many of `values` reach each threshold: `[bins − 1]` (`None` for one bin), in
    /// pieces of at most [`LIMIT`] comparisons.
    pub(crate) fn count_reached(&self, values: Tensor<1>) -> Option<Tensor<1, Int>> {
        let edges = self.bins() - 1;
        if edges == 0 {
            return None;
        }
        let n = values.dims()[0];
        let rows = (LIMIT / edges).max(1);
        (0..n.div_ceil(rows))
            .filter_map(|piece| {
                let start = piece * rows;
                let part = values.clone().narrow(0, start, rows.min(n - start));
                Some(self.reached(part)?.int().sum_dim(0).reshape([edges]))
            })
            .reduce(|a, b| a + b)
    }

    /// `[n, bins]` 0/1 rows: the bin of each value, one-hot, in the comparison type.
    fn one_hot(&self, values: Tensor<1>) -> Tensor<2> {
        let n = values.dims()[0];
        let options = TensorCreationOptions::new(self.device.clone()).with_dtype(self.dtype);
        let ones = Tensor::<2>::ones([n, 1], options.clone());
        match self.reached(values) {
            None => ones,
            Some(reached) => {
                let reached = reached.float().cast(self.dtype);
                let zeros = Tensor::<2>::zeros([n, 1], options);
                Tensor::cat(vec![ones, reached.clone()], 1) - Tensor::cat(vec![reached, zeros], 1)
            }
        }
    }
}

/// A chunk's per-sample gradients `[b, numel]`, materialised a few samples at a time: the
/// samples of each piece hold at most `per_piece` elements (at least one sample).
pub(crate) fn dense_pieces(elements: Elements, per_piece: usize) -> Vec<Tensor<2>> {
    match elements {
        Elements::Dense(g) => vec![g],
        Elements::Outer { a, e } => {
            let ([b, d_in], d_out) = (a.dims(), e.dims()[1]);
            let rows = (per_piece / (d_in * d_out).max(1)).max(1);
            (0..b.div_ceil(rows))
                .map(|piece| {
                    let (start, len) = (piece * rows, rows.min(b - piece * rows));
                    Elements::Outer {
                        a: a.clone().narrow(0, start, len),
                        e: e.clone().narrow(0, start, len),
                    }
                    .dense()
                })
                .collect()
        }
    }
}

/// GradHist1d's device counts of one chunk: how many elements reach each threshold
/// (`[bins − 1]`, `None` for one bin), and how many elements there were.
pub(crate) fn count_elements(
    axis: &DeviceAxis,
    elements: Elements,
) -> (Option<Tensor<1, Int>>, u64) {
    let edges = (axis.bins() - 1).max(1);
    let mut total = 0u64;
    let reached = dense_pieces(elements, (LIMIT / edges).max(1))
        .into_iter()
        .filter_map(|g| {
            let [b, numel] = g.dims();
            total += (b * numel) as u64;
            axis.count_reached(g.reshape([b * numel]))
        })
        .reduce(|a, b| a + b);
    (reached, total)
}

/// GradHist2d's device counts of one chunk: the pairs `(g_{n,j}, θ_j)` of per-sample gradient
/// elements and their parameter's value, `[x bins · y bins]` row-major. Each piece is one
/// exact 0/1 matrix product (at most 2²⁴ pairs per cell).
pub(crate) fn count_pairs(
    x: &DeviceAxis,
    y: &DeviceAxis,
    elements: Elements,
    theta: Tensor<1>,
) -> Tensor<1, Int> {
    let (xb, yb) = (x.bins(), y.bins());
    let per_piece = (LIMIT / xb.max(yb)).max(1);
    let mut total: Option<Tensor<2, Int>> = None;
    for g in dense_pieces(elements, per_piece) {
        let [b, numel] = g.dims();
        let columns = (per_piece / b).clamp(1, (EXACT_F32 / b).max(1));
        for piece in 0..numel.div_ceil(columns) {
            let (start, len) = (piece * columns, columns.min(numel - piece * columns));
            let gx = g.clone().narrow(1, start, len).reshape([b * len]);
            let per_element = x
                .one_hot(gx)
                .reshape([b, len, xb])
                .sum_dim(0)
                .reshape([len, xb]);
            let ty = y.one_hot(theta.clone().narrow(0, start, len)).cast(x.dtype);
            let counts = per_element.transpose().matmul(ty).int();
            total = Some(match total {
                Some(t) => t + counts,
                None => counts,
            });
        }
    }
    match total {
        Some(t) => t.reshape([xb * yb]),
        None => Tensor::zeros([xb * yb], &theta.device()),
    }
}

/// Bin counts from `total` values and how many reached each threshold (`reached`, `bins − 1`
/// numbers, read from the device): `hist[0] = total − r₁`, `hist[k] = r_k − r_{k+1}`,
/// `hist[bins − 1] = r_{bins−1}`.
pub(crate) fn counts_from_reached(total: u64, reached: &[f64]) -> Vec<u64> {
    let reached: Vec<u64> = reached.iter().map(|&r| r as u64).collect();
    let mut hist = Vec::with_capacity(reached.len() + 1);
    let mut above = total;
    for &r in &reached {
        hist.push(above.saturating_sub(r));
        above = r;
    }
    hist.push(above);
    hist
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;
    use crate::histogram::host::Rule;
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
        let (reached, total) = count_elements(device_axis, Elements::Dense(g));
        let host = match reached {
            Some(r) => read_together(vec![r]).unwrap().concat(),
            None => Vec::new(),
        };
        counts_from_reached(total, &host)
    }

    #[test]
    fn device_counts_equal_the_host_rule_on_edges_in_both_float_types() {
        for (rule, range, bins) in [
            (Rule::Histc, (-2.0, 2.0), 100),
            (Rule::Histc, (-0.3, 0.7), 7),
            (Rule::Centred, (-1.0, 1.0), 40),
            (Rule::Centred, (-2.0, 2.0), 1),
        ] {
            let axis = Axis::new(rule, range, bins);
            let mut all = edge_values(&axis);
            all.extend(values(7, 5000));
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
        );
        let got: Vec<u64> = read_together(vec![counts])
            .unwrap()
            .concat()
            .into_iter()
            .map(|c| c as u64)
            .collect();
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
        let (reached, total) = count_elements(
            DeviceAxis::cached(&mut slot, &axis, &device, DType::F32),
            Elements::Outer {
                a: Tensor::from_data(TensorData::new(a, [b, d_in]), f32s.clone()),
                e: Tensor::from_data(TensorData::new(e, [b, d_out]), f32s),
            },
        );
        let reached = read_together(reached.into_iter().collect())
            .unwrap()
            .concat();
        let on_device = counts_from_reached(total, &reached);
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
        assert_eq!(counts_from_reached(10, &[7.0, 3.0, 3.0]), vec![3, 4, 0, 3]);
        assert_eq!(counts_from_reached(4, &[]), vec![4]);
    }
}
