//! Reductions along long axes, in stages where the device needs them.
//!
//! burn-cubecl 0.22.1's axis reductions (`sum_dim`, `max_dim`, `mean_dim`, on floats and
//! integers) lose values on Mesa's lavapipe when the reduced axis holds more than about 2¹⁶
//! elements: a row of 589 824 values sums to roughly what its first 262 144 sum to, and a
//! maximum in its last element is missed. Full reductions (`sum`, `max`) and matrix products
//! are right. (The burn test `tests/integration/backend_reductions.rs` holds the
//! reproduction.) This is Mesa's, not burn's: its shader compiler (gallivm) stops a loop after
//! 65 535 iterations, and burn's unit reduction reads four values an iteration. Every
//! reduction of this workspace along an axis whose length grows with the model or the batch
//! goes through here: on a device that is no card (a software rasterizer: lavapipe, llvmpipe,
//! [`stages`]) the axis is cut into stages of at most [`STAGE`] values, each stage reduced,
//! then the stages' results, until one value is left; everywhere else burn's reduction runs
//! as it is (a stage costs a padding copy and a launch, and keeps fusion from folding the
//! square into the reduction: cifar10_3c3d's `economy` step on flex went from 1.86× to 2.60×
//! a plain step with staging everywhere).
//!
//! # Cost
//!
//! On a software rasterizer, one reduction launch per stage level (two for axes up to 2²⁸
//! values) and a padding copy where the length is not a whole number of stages; elsewhere,
//! and for axes of at most [`STAGE`] values, burn's reduction unchanged.

use burn::tensor::kind::{Numeric, Ordered};
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Tensor};

/// The most values one reduction runs over.
pub const STAGE: usize = 1 << 14;

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
    cockpit_kernels::sums(summand, x, y)
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
    cockpit_kernels::row_sums(cockpit_kernels::Summand::Square, x, &[])
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
    cockpit_kernels::row_dots(x, directions)
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
    cockpit_kernels::row_norms_and_dots(x, directions)
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
    cockpit_kernels::row_sums(
        cockpit_kernels::Summand::Product,
        std::slice::from_ref(x),
        std::slice::from_ref(y),
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
/// CubeCL device that is no card (its identity names no physical device: Mesa's lavapipe or
/// llvmpipe, whose shader loops stop after 65 535 iterations), unless [`STAGED_VARIABLE`]
/// says otherwise. CPU backends and cards (CUDA, wgpu on a GPU) reduce in one pass.
pub fn stages(device: &Device) -> bool {
    match std::env::var(STAGED_VARIABLE)
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        Ok("always") => true,
        Ok("never") => false,
        _ => is_software_rasterizer(device),
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn is_software_rasterizer(device: &Device) -> bool {
    device
        .identity()
        .is_some_and(|identity| identity.physical.is_none())
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn is_software_rasterizer(_device: &Device) -> bool {
    false
}

/// The longest axis one reduction may run over on `device`.
fn stage_for(device: &Device) -> usize {
    if stages(device) { STAGE } else { usize::MAX }
}

/// `tensor.sum_dim(dim)`, in stages of at most [`STAGE`] values where [`stages`] says.
pub fn sum_dim<const D: usize, K: Numeric>(tensor: Tensor<D, K>, dim: usize) -> Tensor<D, K> {
    let most = stage_for(&tensor.device());
    staged(
        tensor,
        dim,
        most,
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
    let most = stage_for(&tensor.device());
    staged(
        tensor,
        dim,
        most,
        0.0,
        |t, d| t.max_dim(d),
        |t, d| t.max_dim(d),
    )
}

/// Reduces `tensor` along `dim` with `reduce` in stages of at most `most` values (`whole`
/// where the axis fits in one stage), padding the axis with `pad` to whole stages.
fn staged<const D: usize, K: Numeric>(
    tensor: Tensor<D, K>,
    dim: usize,
    most: usize,
    pad: f32,
    whole: impl Fn(Tensor<D, K>, usize) -> Tensor<D, K>,
    reduce: impl Fn(Tensor<4, K>, usize) -> Tensor<4, K>,
) -> Tensor<D, K> {
    let dims = tensor.dims();
    let Some(&length) = dims.get(dim) else {
        return whole(tensor, dim);
    };
    if length <= most {
        return whole(tensor, dim);
    }
    let outer: usize = dims[..dim].iter().product();
    let inner: usize = dims[dim + 1..].iter().product();
    let mut values: Tensor<3, K> = tensor.reshape([outer, length, inner]);
    let mut length = length;
    while length > 1 {
        let stage = length.min(most.max(2));
        let stages = length.div_ceil(stage);
        let padding = stages * stage - length;
        if padding > 0 {
            values = values.pad([(0, 0), (0, padding), (0, 0)], PadMode::Constant(pad));
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
            let sum =
                |t: Tensor<3>| staged(t, 1, most, 0.0, |t, d| t.sum_dim(d), |t, d| t.sum_dim(d));
            let max =
                |t: Tensor<3>| staged(t, 1, most, 0.0, |t, d| t.max_dim(d), |t, d| t.max_dim(d));
            let what = format!("{length} values in stages of {most}");
            assert_eq!(read(sum(t.clone())), sums, "sums of {what}");
            assert_eq!(read(max(t.clone())), maxima, "maxima of {what}");
            let ints: Tensor<3, Int> = t.int();
            let int_sums = staged(ints, 1, most, 0.0, |t, d| t.sum_dim(d), |t, d| t.sum_dim(d));
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
