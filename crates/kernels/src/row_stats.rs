//! Each row's squared norm and its products with up to three directions, in one pass over the
//! rows (CubeCL backends only).
//!
//! Cube `(c, n)` takes the values `k ≡ c·units + unit (mod chunks·units)` of row `n`, reads
//! each once, and adds `x_k²` and `x_k·v_{j,k}` for every direction `v_j` in registers; the
//! cube then sums its units' registers in shared memory and writes one partial per statistic;
//! the partials `[1 + K, rows, chunks]` are summed along their last axis by one of burn's axis
//! reductions. Where [`row_sums`](super::row_sums) and [`row_dots`](super::row_dots) read each
//! row once per statistic, in two launches and two reductions, this reads it once.

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::tensor::{DType, Shape, Tensor};
use burn_cubecl::cubecl::prelude::{CubeCount, CubeDim};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use super::MAX_DIRECTIONS;

/// Units per cube (a power of two: the cube's sum halves it).
const UNITS: u32 = super::REDUCE_UNITS as u32;

/// The kernel, in CubeCL's language.
mod device {
    use burn_cubecl::cubecl;
    use burn_cubecl::cubecl::prelude::*;

    /// Partial sums `[(1 + K) · rows · chunks]` (statistic `j`, row `n`, column `c`; statistic
    /// 0 the squared norm, `j ≥ 1` the product with `v_{j−1}`) of `x` `[rows · len]`, launched
    /// on `(chunks, rows)` cubes of a power-of-two number of units. `K` is the number of the
    /// `with_*` flags set, in order; a direction without its flag is never read.
    #[cube(launch)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row_stats_kernel<F: Float>(
        x: &Tensor<F>,
        v0: &Tensor<F>,
        v1: &Tensor<F>,
        v2: &Tensor<F>,
        out: &mut Tensor<F>,
        len: usize,
        #[comptime] units: usize,
        #[comptime] with_v0: bool,
        #[comptime] with_v1: bool,
        #[comptime] with_v2: bool,
        #[define(F)] _dtype: ElemType,
    ) {
        let row = CUBE_POS_Y as usize;
        let rows = CUBE_COUNT_Y as usize;
        let chunk = CUBE_POS_X as usize;
        let chunks = CUBE_COUNT_X as usize;
        let unit = UNIT_POS as usize;
        let base = row * len;
        let stride = chunks * units;
        let mut sq = F::new(0.0);
        let mut d0 = F::new(0.0);
        let mut d1 = F::new(0.0);
        let mut d2 = F::new(0.0);
        let mut k = chunk * units + unit;
        while k < len {
            let value = x[base + k];
            sq += value * value;
            if with_v0 {
                d0 += value * v0[k];
            }
            if with_v1 {
                d1 += value * v1[k];
            }
            if with_v2 {
                d2 += value * v2[k];
            }
            k += stride;
        }
        let mut s_sq = Shared::<[F]>::new_slice(units);
        let mut s_d0 = Shared::<[F]>::new_slice(units);
        let mut s_d1 = Shared::<[F]>::new_slice(units);
        let mut s_d2 = Shared::<[F]>::new_slice(units);
        s_sq[unit] = sq;
        s_d0[unit] = d0;
        s_d1[unit] = d1;
        s_d2[unit] = d2;
        sync_cube();
        let mut half = (CUBE_DIM as usize) / 2;
        while half > 0 {
            if unit < half {
                let other = unit + half;
                let sum = s_sq[unit] + s_sq[other];
                s_sq[unit] = sum;
                if with_v0 {
                    let sum = s_d0[unit] + s_d0[other];
                    s_d0[unit] = sum;
                }
                if with_v1 {
                    let sum = s_d1[unit] + s_d1[other];
                    s_d1[unit] = sum;
                }
                if with_v2 {
                    let sum = s_d2[unit] + s_d2[other];
                    s_d2[unit] = sum;
                }
            }
            sync_cube();
            half /= 2;
        }
        if unit == 0 {
            let at = row * chunks + chunk;
            let plane = rows * chunks;
            out[at] = s_sq[0];
            if with_v0 {
                out[plane + at] = s_d0[0];
            }
            if with_v1 {
                out[2 * plane + at] = s_d1[0];
            }
            if with_v2 {
                out[3 * plane + at] = s_d2[0];
            }
        }
    }
}

/// Row norms and products as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait RowStatsOps: Backend {
    /// The partial sums `[(1 + directions) · rows · chunks]` of `x` `[rows · len]`: the sum of
    /// `(0, n, ·)` is row `n`'s squared norm, of `(j, n, ·)` its product with `v_{j−1}` `[len]`
    /// (`directions` of the three are read, in order; the others are placeholders).
    #[fusion(dtype = burn::tensor::DType::F32, shape = burn::tensor::Shape::new([(1 + *directions) * *rows * *chunks]))]
    #[allow(clippy::too_many_arguments)]
    fn row_stats_partials(
        x: FloatTensor<Self>,
        v0: FloatTensor<Self>,
        v1: FloatTensor<Self>,
        v2: FloatTensor<Self>,
        len: usize,
        rows: usize,
        chunks: usize,
        directions: usize,
    ) -> FloatTensor<Self>;
}

impl RowStatsOps for CubeBackend {
    fn row_stats_partials(
        x: CubeTensor,
        v0: CubeTensor,
        v1: CubeTensor,
        v2: CubeTensor,
        len: usize,
        rows: usize,
        chunks: usize,
        directions: usize,
    ) -> CubeTensor {
        let [x, v0, v1, v2] = [x, v0, v1, v2].map(into_contiguous);
        let client = x.client.clone();
        let dtype = x.dtype;
        let out = empty_device_dtype(
            client.clone(),
            x.device.clone(),
            Shape::new([(1 + directions) * rows * chunks]),
            dtype,
        );
        let max_units = client.properties().hardware.max_units_per_cube;
        // The largest power of two within the cube's limit.
        let units = UNITS.min(1 << (u32::BITS - 1 - max_units.max(1).leading_zeros()));
        device::row_stats_kernel::launch(
            &client,
            CubeCount::Static(chunks as u32, rows as u32, 1),
            CubeDim::new_1d(units),
            x.into_tensor_arg(),
            v0.into_tensor_arg(),
            v1.into_tensor_arg(),
            v2.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            len,
            units as usize,
            directions >= 1,
            directions >= 2,
            directions >= 3,
            dtype_to_storage_type(dtype),
        );
        out
    }
}

/// `[1 + K, rows]`: each row's squared norm, then its product with each of `directions`
/// (`K ≤ MAX_DIRECTIONS`, each `len` long), of `x` `[rows · len]` (the caller checked the
/// operands: float32 on one CubeCL device, `rows` within a launch's cubes, `len ≥ 1`).
pub(crate) fn row_stats(
    x: &Tensor<1>,
    directions: &[Tensor<1>],
    rows: usize,
    len: usize,
) -> Option<Tensor<2>> {
    let k = directions.len();
    if k > MAX_DIRECTIONS {
        return None;
    }
    let chunks = super::chunks_for(len);
    // A direction not asked for is a placeholder: `x` itself, never read.
    let operand = |j: usize| -> FloatTensor<Dispatch> {
        directions
            .get(j)
            .unwrap_or(x)
            .clone()
            .inner()
            .into_dispatch()
    };
    let partials = <Dispatch as RowStatsOps>::row_stats_partials(
        x.clone().inner().into_dispatch(),
        operand(0),
        operand(1),
        operand(2),
        len,
        rows,
        chunks,
        k,
    );
    let partials = Tensor::<1>::from_dispatch(partials);
    debug_assert_eq!(partials.dtype(), DType::F32);
    Some(
        partials
            .reshape([(1 + k) * rows, chunks])
            .sum_dim(1)
            .reshape([1 + k, rows]),
    )
}
