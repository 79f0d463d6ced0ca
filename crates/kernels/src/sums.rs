//! The per-tensor sums kernel and its backend extension (CubeCL backends only).
//!
//! One launch reduces up to [`GROUP`] tensors, each as `rows` rows: cube `(c, s, n)` takes
//! the values `k ≡ c·units + unit (mod chunks·units)` of row `n` of tensor `s`, adds their
//! summands in a register, sums its units in shared memory and writes one partial; the
//! partials `[tensors, rows, chunks]` are then summed along their last axis by one of burn's
//! axis reductions. Every cube of every tensor runs at once: no
//! reduction walks a tensor on one cube.

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::tensor::{DType, Shape, Tensor};
use burn_cubecl::cubecl::prelude::{CubeCount, CubeDim};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use super::{GROUP, Summand};

/// Units per cube (a power of two: the cube's sum halves it).
const UNITS: u32 = super::REDUCE_UNITS as u32;

/// The kernel, in CubeCL's language.
mod device {
    use burn_cubecl::cubecl;
    use burn_cubecl::cubecl::prelude::*;

    /// `Σ_k` of the summand over `base + k` for `k = start, start + stride, … < len`.
    #[cube]
    #[allow(clippy::too_many_arguments)]
    fn partial<F: Float>(
        x: &Tensor<F>,
        y: &Tensor<F>,
        len: usize,
        base: usize,
        start: usize,
        stride: usize,
        scale: f32,
        #[comptime] with_y: bool,
        #[comptime] product: bool,
        #[comptime] broadcast: bool,
    ) -> F {
        let mut acc = F::new(0.0);
        let mut k = start;
        while k < len {
            let v = x[base + k];
            if broadcast {
                // One row of `y` for every row of `x`.
                acc += v * y[k];
            } else if product {
                acc += v * y[base + k];
            } else if with_y {
                let d = v - F::cast_from(scale) * y[base + k];
                acc += d * d;
            } else {
                acc += v * v;
            }
            k += stride;
        }
        acc
    }

    /// Partial sums `[slots · rows · chunks]` (tensor `s`, its row `n`, column `c`) of tensors
    /// `x_s` (and `y_s`) of `rows` rows of `l_s` values, launched on `(chunks, slots, rows)`
    /// cubes of a power-of-two number of units.
    #[cube(launch)]
    #[allow(clippy::too_many_arguments, unused_assignments)]
    pub(crate) fn sums_kernel<F: Float>(
        x0: &Tensor<F>,
        x1: &Tensor<F>,
        x2: &Tensor<F>,
        x3: &Tensor<F>,
        x4: &Tensor<F>,
        x5: &Tensor<F>,
        x6: &Tensor<F>,
        x7: &Tensor<F>,
        y0: &Tensor<F>,
        y1: &Tensor<F>,
        y2: &Tensor<F>,
        y3: &Tensor<F>,
        y4: &Tensor<F>,
        y5: &Tensor<F>,
        y6: &Tensor<F>,
        y7: &Tensor<F>,
        out: &mut Tensor<F>,
        l0: usize,
        l1: usize,
        l2: usize,
        l3: usize,
        l4: usize,
        l5: usize,
        l6: usize,
        l7: usize,
        scale: f32,
        #[comptime] units: usize,
        #[comptime] with_y: bool,
        #[comptime] product: bool,
        #[comptime] broadcast: bool,
        #[define(F)] _dtype: ElemType,
    ) {
        let slot = CUBE_POS_Y as usize;
        let row = CUBE_POS_Z as usize;
        let rows = CUBE_COUNT_Z as usize;
        let chunk = CUBE_POS_X as usize;
        let chunks = CUBE_COUNT_X as usize;
        let unit = UNIT_POS as usize;
        let start = chunk * units + unit;
        let stride = chunks * units;
        let mut acc = F::new(0.0);
        if slot == 0 {
            acc = partial::<F>(
                x0,
                y0,
                l0,
                row * l0,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else if slot == 1 {
            acc = partial::<F>(
                x1,
                y1,
                l1,
                row * l1,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else if slot == 2 {
            acc = partial::<F>(
                x2,
                y2,
                l2,
                row * l2,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else if slot == 3 {
            acc = partial::<F>(
                x3,
                y3,
                l3,
                row * l3,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else if slot == 4 {
            acc = partial::<F>(
                x4,
                y4,
                l4,
                row * l4,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else if slot == 5 {
            acc = partial::<F>(
                x5,
                y5,
                l5,
                row * l5,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else if slot == 6 {
            acc = partial::<F>(
                x6,
                y6,
                l6,
                row * l6,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        } else {
            acc = partial::<F>(
                x7,
                y7,
                l7,
                row * l7,
                start,
                stride,
                scale,
                with_y,
                product,
                broadcast,
            );
        }
        let mut shared = Shared::<[F]>::new_slice(units);
        shared[unit] = acc;
        sync_cube();
        let mut half = (CUBE_DIM as usize) / 2;
        while half > 0 {
            if unit < half {
                let sum = shared[unit] + shared[unit + half];
                shared[unit] = sum;
            }
            sync_cube();
            half /= 2;
        }
        if unit == 0 {
            let total = shared[0];
            out[(slot * rows + row) * chunks + chunk] = total;
        }
    }
}

/// Per-tensor sums as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait SumOps: Backend {
    /// The partial sums `[slots · rows · chunks]` of the first `slots` (at most [`GROUP`])
    /// tensors `x_s` (with `y_s` for the two-operand summands) of `rows` rows of `lens[s]`
    /// values: the sum of `(s, n, ·)` is row `n` of tensor `s`'s sum (the other slots are
    /// placeholders, never read). `summand` is 0 (`x²`), 1 (`(x − scale·y)²`), 2 (`x·y`) or 3
    /// (`x·y` with `y_s` one row, the same for every row of `x_s`).
    #[fusion(dtype = burn::tensor::DType::F32, shape = burn::tensor::Shape::new([*slots * *rows * *chunks]))]
    #[allow(clippy::too_many_arguments)]
    fn partial_sums(
        x0: FloatTensor<Self>,
        x1: FloatTensor<Self>,
        x2: FloatTensor<Self>,
        x3: FloatTensor<Self>,
        x4: FloatTensor<Self>,
        x5: FloatTensor<Self>,
        x6: FloatTensor<Self>,
        x7: FloatTensor<Self>,
        y0: FloatTensor<Self>,
        y1: FloatTensor<Self>,
        y2: FloatTensor<Self>,
        y3: FloatTensor<Self>,
        y4: FloatTensor<Self>,
        y5: FloatTensor<Self>,
        y6: FloatTensor<Self>,
        y7: FloatTensor<Self>,
        lens: [usize; 8],
        slots: usize,
        rows: usize,
        chunks: usize,
        summand: u32,
        scale: f32,
    ) -> FloatTensor<Self>;
}

impl SumOps for CubeBackend {
    fn partial_sums(
        x0: CubeTensor,
        x1: CubeTensor,
        x2: CubeTensor,
        x3: CubeTensor,
        x4: CubeTensor,
        x5: CubeTensor,
        x6: CubeTensor,
        x7: CubeTensor,
        y0: CubeTensor,
        y1: CubeTensor,
        y2: CubeTensor,
        y3: CubeTensor,
        y4: CubeTensor,
        y5: CubeTensor,
        y6: CubeTensor,
        y7: CubeTensor,
        lens: [usize; 8],
        slots: usize,
        rows: usize,
        chunks: usize,
        summand: u32,
        scale: f32,
    ) -> CubeTensor {
        let [x0, x1, x2, x3, x4, x5, x6, x7] =
            [x0, x1, x2, x3, x4, x5, x6, x7].map(into_contiguous);
        let [y0, y1, y2, y3, y4, y5, y6, y7] =
            [y0, y1, y2, y3, y4, y5, y6, y7].map(into_contiguous);
        let client = x0.client.clone();
        let dtype = x0.dtype;
        let out = empty_device_dtype(
            client.clone(),
            x0.device.clone(),
            Shape::new([slots * rows * chunks]),
            dtype,
        );
        let max_units = client.properties().hardware.max_units_per_cube;
        // The largest power of two within the cube's limit.
        let units = UNITS.min(1 << (u32::BITS - 1 - max_units.max(1).leading_zeros()));
        device::sums_kernel::launch(
            &client,
            CubeCount::Static(chunks as u32, slots as u32, rows as u32),
            CubeDim::new_1d(units),
            x0.into_tensor_arg(),
            x1.into_tensor_arg(),
            x2.into_tensor_arg(),
            x3.into_tensor_arg(),
            x4.into_tensor_arg(),
            x5.into_tensor_arg(),
            x6.into_tensor_arg(),
            x7.into_tensor_arg(),
            y0.into_tensor_arg(),
            y1.into_tensor_arg(),
            y2.into_tensor_arg(),
            y3.into_tensor_arg(),
            y4.into_tensor_arg(),
            y5.into_tensor_arg(),
            y6.into_tensor_arg(),
            y7.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            lens[0],
            lens[1],
            lens[2],
            lens[3],
            lens[4],
            lens[5],
            lens[6],
            lens[7],
            scale,
            units as usize,
            summand != 0,
            summand >= 2,
            summand == 3,
            dtype_to_storage_type(dtype),
        );
        out
    }
}

/// The row sums `[P, rows]` of `P` tensors of `rows` rows each, row `n` of tensor `p` the
/// values `n·len_p … (n + 1)·len_p` (the caller checked the operands: float32 on one CubeCL
/// device, equal lengths, none empty, at least one tensor, `rows` within a launch's cubes).
pub(crate) fn row_sums(
    summand: Summand,
    x: &[Tensor<1>],
    y: &[Tensor<1>],
    rows: usize,
) -> Option<Tensor<2>> {
    let code = match summand {
        Summand::Square => 0,
        Summand::Distance { .. } => 1,
        Summand::Product => 2,
    };
    launch_row_sums(code, summand, x, y, rows)
}

/// Each row `[d]` of `x` `[rows · d]` times each of `directions` (`[d]` each): `[K, rows]`
/// (the caller checked the operands as for [`row_sums`], every direction `d` long).
pub(crate) fn row_dots(x: &Tensor<1>, directions: &[Tensor<1>], rows: usize) -> Option<Tensor<2>> {
    let xs = vec![x.clone(); directions.len()];
    launch_row_sums(3, Summand::Product, &xs, directions, rows)
}

/// [`row_sums`] with the kernel's summand code (3: `y` broadcast over the rows).
fn launch_row_sums(
    code: u32,
    summand: Summand,
    x: &[Tensor<1>],
    y: &[Tensor<1>],
    rows: usize,
) -> Option<Tensor<2>> {
    let count = x.len();
    let longest = x.iter().map(|t| t.dims()[0] / rows).max()?;
    let chunks = super::chunks_for(longest);
    let scale = match summand {
        Summand::Distance { scale } => scale,
        Summand::Square | Summand::Product => 0.0,
    };
    let operand = |tensors: &[Tensor<1>], s: usize| -> FloatTensor<Dispatch> {
        // An unused slot repeats the first tensor: never read.
        let tensor = tensors.get(s).unwrap_or(&x[0]);
        tensor.clone().inner().into_dispatch()
    };
    let mut partials = Vec::with_capacity(count.div_ceil(GROUP));
    for first in (0..count).step_by(GROUP) {
        let group = &x[first..(first + GROUP).min(count)];
        let paired = if y.is_empty() {
            group
        } else {
            &y[first..first + group.len()]
        };
        let mut lens = [0usize; GROUP];
        for (len, t) in lens.iter_mut().zip(group) {
            *len = t.dims()[0] / rows;
        }
        let [x0, x1, x2, x3, x4, x5, x6, x7] = std::array::from_fn(|s| operand(group, s));
        let [y0, y1, y2, y3, y4, y5, y6, y7] = std::array::from_fn(|s| operand(paired, s));
        let out = <Dispatch as SumOps>::partial_sums(
            x0,
            x1,
            x2,
            x3,
            x4,
            x5,
            x6,
            x7,
            y0,
            y1,
            y2,
            y3,
            y4,
            y5,
            y6,
            y7,
            lens,
            group.len(),
            rows,
            chunks,
            code,
            scale,
        );
        partials.push(Tensor::<1>::from_dispatch(out));
    }
    let partials = match partials.len() {
        1 => partials.pop()?,
        _ => Tensor::cat(partials, 0),
    };
    debug_assert_eq!(partials.dtype(), DType::F32);
    Some(
        partials
            .reshape([count * rows, chunks])
            .sum_dim(1)
            .reshape([count, rows]),
    )
}
