//! Reductions along long axes, spread where the device walks an axis with one unit.
//!
//! burn-cubecl 0.22.1 with autotune off (this workspace builds burn without its `autotune`
//! feature, for lavapipe's sake) reduces an axis (`sum_dim`, `max_dim`, fused or not) with
//! cubek's *Unit* routine: one unit per output walks the whole reduced axis, and a full
//! `max`/`mean` is a chain of such reductions ending in one unit that walks what is left. On
//! a card that is a few hundred busy threads walking 10⁵ values each while the device idles
//! (cifar10_3c3d's per-sample rows are 110 592 values long); on Mesa's lavapipe it is also
//! wrong past 2¹⁸ values (its shader compiler stops a loop after 65 535 iterations, and the
//! routine reads four values an iteration: a row of 589 824 values sums to roughly what its
//! first 262 144 sum to; `tests/integration/backend_reductions.rs` holds the reproduction).
//!
//! Every reduction of this workspace along an axis whose length grows with the model or the
//! batch goes through here. On a CubeCL device ([`stages`]) the axis is cut into stages of at
//! most [`STAGE`] values, each stage reduced by its own units, then the stages' results,
//! until one value is left: no unit walks more than [`STAGE`] values. CPU backends (flex,
//! ndarray) reduce in one pass: their reductions split over threads of their own, and a
//! stage there costs a padding copy and keeps fusion from folding the square into the
//! reduction (cifar10_3c3d's `economy` step on flex went from 1.86× to 2.60× a plain step
//! with staging everywhere).
//!
//! What a span of work asked of one unit is measured by [`depth_of`]: the reductions issued
//! here on a CubeCL device and the most values one unit of them walks (the serial depth),
//! burn's and those of `cockpit-kernels`' sums and row statistics (which spread a row over
//! many cubes, 16 values a unit, and add up at most 1 024 partial sums a row:
//! `cockpit_kernels::serial_depth`). burn's CubeCL 0.11 reports a launch by its name only, so
//! the depth is noted where a reduction is issued, from its shape and the routine burn runs
//! (with autotune off), not observed at the launch; the histograms' counting kernels and
//! burn's own reductions in a model's forward and backward pass are not in it.
//!
//! # Cost
//!
//! On a CubeCL device, one reduction launch per stage level (two for axes up to 2²⁴ values)
//! and a padding copy where the length is not a whole number of stages; on CPU backends,
//! and for axes of at most [`STAGE`] values, burn's reduction unchanged.

use burn::tensor::kind::{Numeric, Ordered};
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Tensor};

use crate::readback::{note_reduction, swap_depth};

/// The most values one unit of a reduction walks on a CubeCL device.
pub const STAGE: usize = 1 << 12;

/// The reductions a stretch of work issued on a CubeCL device through this module: how many,
/// and the most values one unit of any of them walks (its serial depth: on a card, the time
/// of a reduction grows with it, not with the values reduced).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    /// Axis reductions issued (each one launch of burn's reduction).
    pub reductions: u64,
    /// The most values one unit walks in any of them (a stage's length, or the axis's where
    /// it fits in one).
    pub deepest: u64,
}

impl std::ops::Add for Depth {
    type Output = Depth;

    /// Two spans of work one after the other: their reductions, and the deeper of the two.
    fn add(self, later: Depth) -> Depth {
        Depth {
            reductions: self.reductions + later.reductions,
            deepest: self.deepest.max(later.deepest),
        }
    }
}

impl std::fmt::Display for Depth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reductions, at most {} values per unit",
            self.reductions, self.deepest
        )
    }
}

/// Runs `work` and returns what it returned with the [`Depth`] of the reductions it issued on
/// this thread (spans nest: an outer span also sees an inner one's reductions).
///
/// ```
/// # use burn::tensor::{Device, Tensor};
/// use cockpit_persample::reduce::{depth_of, sum_dim};
/// let rows = Tensor::<2>::ones([2, 10], &Device::flex());
/// let (sums, depth) = depth_of(|| sum_dim(rows, 1));
/// assert_eq!(sums.dims(), [2, 1]);
/// assert_eq!(depth.reductions, 0); // a CPU backend: no unit walks an axis alone
/// ```
pub fn depth_of<R>(work: impl FnOnce() -> R) -> (R, Depth) {
    let depth = |(reductions, deepest)| Depth {
        reductions,
        deepest,
    };
    let outer = depth(swap_depth((0, 0)));
    let result = work();
    let inner = depth(swap_depth((0, 0)));
    // The enclosing span, if any, counts these reductions too.
    let total = outer + inner;
    swap_depth((total.reductions, total.deepest));
    (result, inner)
}

/// Each tensor's `Σ (x − scale·y)²` (`Σ x²` without `scale`) in one launch per eight tensors
/// where `cockpit-kernels` runs (a CubeCL device, float32); `None` elsewhere, and the caller
/// reduces with burn's operations.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn kernel_sums(
    scale: Option<f32>,
    x: &[Tensor<1>],
    y: &[Tensor<1>],
) -> Option<Tensor<1>> {
    use cockpit_kernels::Summand;
    let summand = scale.map_or(Summand::Square, |scale| Summand::Distance { scale });
    let longest = x.iter().map(|t| t.dims()[0]).max().unwrap_or(0);
    noted(cockpit_kernels::sums(summand, x, y), longest)
}

/// `result`, with the kernel's one reduction of rows of at most `longest` values noted for
/// [`depth_of`] where it ran (its serial depth: `cockpit_kernels::serial_depth`).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn noted<T>(result: Option<T>, longest: usize) -> Option<T> {
    if result.is_some() {
        note_reduction(cockpit_kernels::serial_depth(longest));
    }
    result
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn kernel_sums(
    _scale: Option<f32>,
    _x: &[Tensor<1>],
    _y: &[Tensor<1>],
) -> Option<Tensor<1>> {
    None
}

/// Each row's sum of squares of each `x_p` `[B, d_p]`, `[P, B]`, in one launch per eight
/// tensors where `cockpit-kernels` runs (a CubeCL device, float32, rows of any length: the
/// kernel's partial sums are its own, and the last reduction runs over at most 1 024 of them,
/// far below lavapipe's limit above); `None` elsewhere, and the caller reduces with
/// [`sum_dim`].
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn kernel_row_sq_sums(x: &[Tensor<2>]) -> Option<Tensor<2>> {
    let longest = x.iter().map(|t| t.dims()[1]).max().unwrap_or(0);
    noted(
        cockpit_kernels::row_sums(cockpit_kernels::Summand::Square, x, &[]),
        longest,
    )
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn kernel_row_sq_sums(_x: &[Tensor<2>]) -> Option<Tensor<2>> {
    None
}

/// The longest row one unit of burn's reductions and one-column products may walk alone
/// (their serial depth without autotune): rows of per-sample gradients longer than this go
/// through the kernels where they run (`cockpit_kernels::row_dots` and `row_sums`), which
/// spread a row over many cubes; shorter rows keep burn's operations, whose fewer launches
/// cost less there.
pub const LONG_ROW: usize = 4096;

/// Each row of `x` `[B, d]` times each direction `[d]`, `[K, B]`, in one launch per eight
/// directions where `cockpit-kernels` runs (each row spread over many cubes, where a matrix
/// product with one column puts one unit on each long row); `None` elsewhere, and the caller
/// multiplies with burn's `matmul`.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn kernel_row_dots(x: &Tensor<2>, directions: &[Tensor<1>]) -> Option<Tensor<2>> {
    noted(cockpit_kernels::row_dots(x, directions), x.dims()[1])
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn kernel_row_dots(_x: &Tensor<2>, _directions: &[Tensor<1>]) -> Option<Tensor<2>> {
    None
}

/// Each row's squared norm, then its product with each direction `[d]`, `[1 + K, B]`, of `x`
/// `[B, d]` in one pass over the rows (each value read once, one launch) where
/// `cockpit-kernels` runs and there are at most three directions; `None` elsewhere, and the
/// caller takes [`row_squares`] and [`kernel_row_dots`] or burn's `matmul`.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn kernel_row_norms_and_dots(
    x: &Tensor<2>,
    directions: &[Tensor<1>],
) -> Option<Tensor<2>> {
    noted(
        cockpit_kernels::row_norms_and_dots(x, directions),
        x.dims()[1],
    )
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn kernel_row_norms_and_dots(
    _x: &Tensor<2>,
    _directions: &[Tensor<1>],
) -> Option<Tensor<2>> {
    None
}

/// Each row's `Σ_k x_{n,k}·y_{n,k}` of `x` and `y` `[B, d]`, `[B]`: a projection kept in
/// factored form (`Σ_k (A_n V)_k·(E_n)_k`) or a Gram product. Rows longer than [`LONG_ROW`]
/// go through `cockpit-kernels` where it runs (the product and the sum in one launch, each row
/// spread over many cubes: no unit walks the row alone); elsewhere, and for shorter rows, the
/// product and [`sum_dim`].
pub(crate) fn row_products(x: Tensor<2>, y: Tensor<2>) -> Tensor<1> {
    let [rows, d] = x.dims();
    if d > LONG_ROW
        && let Some(sums) = kernel_row_products(&x, &y)
    {
        return sums.reshape([rows]);
    }
    sum_dim(x * y, 1).reshape([rows])
}

/// Each row's `Σ_k x_{n,k}²` of `x` `[B, d]`, `[B]`, as [`row_products`] takes its rows.
pub(crate) fn row_squares(x: Tensor<2>) -> Tensor<1> {
    let [rows, d] = x.dims();
    if d > LONG_ROW
        && let Some(sums) = kernel_row_sq_sums(std::slice::from_ref(&x))
    {
        return sums.reshape([rows]);
    }
    sum_dim(x.square(), 1).reshape([rows])
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn kernel_row_products(x: &Tensor<2>, y: &Tensor<2>) -> Option<Tensor<2>> {
    noted(
        cockpit_kernels::row_sums(
            cockpit_kernels::Summand::Product,
            std::slice::from_ref(x),
            std::slice::from_ref(y),
        ),
        x.dims()[1],
    )
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn kernel_row_products(_x: &Tensor<2>, _y: &Tensor<2>) -> Option<Tensor<2>> {
    None
}

/// The environment variable that sets where long reductions run in stages:
/// `BURN_COCKPIT_STAGED_REDUCTIONS=always` stages them on every device (for comparing the two
/// in one build, or should another driver lose values as lavapipe does), `never` on none;
/// unset (or `auto`), where [`stages`] says.
pub const STAGED_VARIABLE: &str = "BURN_COCKPIT_STAGED_REDUCTIONS";

/// Whether long axis reductions on `device` run in stages of at most [`STAGE`] values: on a
/// CubeCL device (a card, or Mesa's lavapipe or llvmpipe, whose shader loops also stop after
/// 65 535 iterations), unless [`STAGED_VARIABLE`] says otherwise. CPU backends reduce in one
/// pass.
pub fn stages(device: &Device) -> bool {
    stages_where(is_cube(device))
}

/// [`stages`] on a device that is a CubeCL device or not (`cube`).
fn stages_where(cube: bool) -> bool {
    match std::env::var(STAGED_VARIABLE)
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        Ok("always") => true,
        Ok("never") => false,
        _ => cube,
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn is_cube(device: &Device) -> bool {
    cockpit_kernels::is_cube(device)
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn is_cube(_device: &Device) -> bool {
    false
}

/// How `device` reduces an axis: the longest axis one reduction may run over, and whether
/// its units walk the axis alone (a CubeCL device: then the reductions are noted for
/// [`depth_of`]).
fn plan_for(device: &Device) -> (usize, bool) {
    let cube = is_cube(device);
    let most = if stages_where(cube) {
        STAGE
    } else {
        usize::MAX
    };
    (most, cube)
}

/// The element-wise sum of equal-length vectors `parts` (`None` for none). Where
/// `cockpit-kernels` runs: the parts packed into `[P, n]` (one launch per sixteen) and summed
/// over `P` in one reduction ([`sum_dim`]), two launches whatever burn's fusion does; elsewhere
/// burn's additions (one fused kernel where fusion folds them, else `P − 1`).
pub fn sum_parts(parts: &[Tensor<1>]) -> Option<Tensor<1>> {
    let first = parts.first()?;
    let n = first.dims()[0];
    let packed = (parts.len() > 1 && parts.iter().all(|p| p.dims()[0] == n))
        .then(|| crate::readback::kernel_pack(parts))
        .flatten();
    if let Some(mut groups) = packed {
        let stacked = match groups.len() {
            1 => groups.remove(0),
            _ => Tensor::cat(groups, 0),
        };
        return Some(sum_dim(stacked.reshape([parts.len(), n]), 0).reshape([n]));
    }
    parts.iter().cloned().reduce(|a, b| a + b)
}

/// `tensor.sum_dim(dim)`, in stages of at most [`STAGE`] values where [`stages`] says.
pub fn sum_dim<const D: usize, K: Numeric>(tensor: Tensor<D, K>, dim: usize) -> Tensor<D, K> {
    let (most, noted) = plan_for(&tensor.device());
    staged(
        tensor,
        dim,
        most,
        noted,
        0.0,
        |t, d| t.sum_dim(d),
        |t, d| t.sum_dim(d),
    )
}

/// `tensor.max_dim(dim)` of non-negative values (absolute values, squares), in stages of at
/// most [`STAGE`] values where [`stages`] says (padding with zeros, which no non-negative
/// maximum is below).
pub fn max_dim_nonnegative<const D: usize, K: Ordered>(
    tensor: Tensor<D, K>,
    dim: usize,
) -> Tensor<D, K> {
    let (most, noted) = plan_for(&tensor.device());
    staged(
        tensor,
        dim,
        most,
        noted,
        0.0,
        |t, d| t.max_dim(d),
        |t, d| t.max_dim(d),
    )
}

/// The sum of all values of `tensor`, `[1]`: [`sum_dim`] over the values laid out as one axis
/// (staged where [`stages`] says). Meant for the short vectors of a step's numbers (a value
/// per parameter or per sample): on a CubeCL device it is one launch, which fusion can join
/// to the element-wise work before it, where burn's `sum()` zeroes an output and adds into it
/// atomically (two launches, neither fused).
pub fn sum_all<const D: usize, K: Numeric>(tensor: Tensor<D, K>) -> Tensor<1, K> {
    let n = tensor.shape().num_elements();
    sum_dim(tensor.reshape([n]), 0)
}

/// The largest of all values of `tensor` (non-negative: absolute values, squares), `[1]`:
/// burn's `max()` with the values laid out as one axis, so that it is staged where
/// [`stages`] says (burn's own `max()` reduces axis after axis, the last by a single unit).
pub fn max_nonnegative<const D: usize, K: Ordered>(tensor: Tensor<D, K>) -> Tensor<1, K> {
    let n = tensor.shape().num_elements();
    max_dim_nonnegative(tensor.reshape([n]), 0)
}

/// Reduces `tensor` along `dim` with `reduce` in stages of at most `most` values (`whole`
/// where the axis fits in one stage), padding the axis with `pad` to whole stages; each
/// reduction noted for [`depth_of`] where `noted`.
fn staged<const D: usize, K: Numeric>(
    tensor: Tensor<D, K>,
    dim: usize,
    most: usize,
    noted: bool,
    pad: f32,
    whole: impl Fn(Tensor<D, K>, usize) -> Tensor<D, K>,
    reduce: impl Fn(Tensor<4, K>, usize) -> Tensor<4, K>,
) -> Tensor<D, K> {
    let dims = tensor.dims();
    let Some(&length) = dims.get(dim) else {
        return whole(tensor, dim);
    };
    if length <= most {
        if noted && length > 1 {
            note_reduction(length);
        }
        return whole(tensor, dim);
    }
    let outer: usize = dims[..dim].iter().product();
    let inner: usize = dims[dim + 1..].iter().product();
    let mut values: Tensor<3, K> = tensor.reshape([outer, length, inner]);
    let mut length = length;
    while length > 1 {
        // Stages of equal length (the padding is less than one value per stage).
        let stages = length.div_ceil(most.max(2));
        let stage = length.div_ceil(stages);
        let padding = stages * stage - length;
        if padding > 0 {
            values = values.pad([(0, 0), (0, padding), (0, 0)], PadMode::Constant(pad));
        }
        if noted {
            note_reduction(stage);
        }
        values = reduce(values.reshape([outer, stages, stage, inner]), 2)
            .reshape([outer, stages, inner]);
        length = stages;
    }
    let mut kept = dims;
    kept[dim] = 1;
    values.reshape(kept)
}

#[cfg(test)]
mod tests {
    use burn::tensor::Int;

    use super::*;
    use crate::testing::tensor;

    /// Axes of one stage, of several stages not a whole number of them, and of several levels
    /// of stages sum and maximise as a host loop does, the kept axes in place, floats and
    /// integers (stages of 4 and of [`STAGE`]).
    #[test]
    fn staged_reductions_equal_host_loops() {
        for (most, (outer, length, inner)) in [
            (4, (2, 3, 3)),
            (4, (2, 4 * 4 * 4 + 5, 3)),
            (4, (1, 17, 1)),
            (STAGE, (2, 3 * STAGE + 7, 2)),
        ] {
            let n = outer * length * inner;
            let values: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64).collect();
            let t = tensor(&values, [outer, length, inner]);
            let at = |o: usize, l: usize, i: usize| values[(o * length + l) * inner + i];
            let cells: Vec<(usize, usize)> = (0..outer)
                .flat_map(|o| (0..inner).map(move |i| (o, i)))
                .collect();
            let sums: Vec<f64> = cells
                .iter()
                .map(|&(o, i)| (0..length).map(|l| at(o, l, i)).sum())
                .collect();
            let maxima: Vec<f64> = cells
                .iter()
                .map(|&(o, i)| (0..length).map(|l| at(o, l, i)).fold(0.0, f64::max))
                .collect();
            let read = |t: Tensor<3>| -> Vec<f64> {
                assert_eq!(t.dims(), [outer, 1, inner]);
                crate::testing::values(t)
                    .into_iter()
                    .map(f64::from)
                    .collect()
            };
            let sum = |t: Tensor<3>| {
                staged(
                    t,
                    1,
                    most,
                    false,
                    0.0,
                    |t, d| t.sum_dim(d),
                    |t, d| t.sum_dim(d),
                )
            };
            let max = |t: Tensor<3>| {
                staged(
                    t,
                    1,
                    most,
                    false,
                    0.0,
                    |t, d| t.max_dim(d),
                    |t, d| t.max_dim(d),
                )
            };
            let what = format!("{length} values in stages of {most}");
            assert_eq!(read(sum(t.clone())), sums, "sums of {what}");
            assert_eq!(read(max(t.clone())), maxima, "maxima of {what}");
            let ints: Tensor<3, Int> = t.int();
            let int_sums = staged(
                ints,
                1,
                most,
                false,
                0.0,
                |t, d| t.sum_dim(d),
                |t, d| t.sum_dim(d),
            );
            assert_eq!(read(int_sums.float()), sums, "integer sums of {what}");
        }
        let long = tensor(&vec![1.0; 2 * (STAGE + 1)], [2, STAGE + 1]);
        assert_eq!(
            crate::testing::values(sum_dim(long.clone(), 1)),
            vec![(STAGE + 1) as f32; 2]
        );
        assert_eq!(
            crate::testing::values(max_dim_nonnegative(long, 1)),
            vec![1.0; 2]
        );
    }
}
