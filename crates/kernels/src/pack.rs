//! Up to [`PACK_GROUP`] tensors concatenated in one launch (CubeCL backends only): a step's values
//! gathered for its one read, where burn's `cat` launches one slice assignment per tensor.
//!
//! Unit `i` of the grid (with a grid stride) copies the output's value `i` from the tensor
//! whose span holds it: tensor `s` fills `ends[s − 1] .. ends[s]`.

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::tensor::{Shape, Tensor};
use burn_cubecl::cubecl::prelude::{CubeCount, CubeDim};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use super::PACK_GROUP;

/// Units per cube.
const UNITS: u32 = 256;

/// The most cubes of one launch (a grid stride covers the rest).
const MAX_CUBES: usize = 65_535;

/// The kernel, in CubeCL's language.
mod device {
    use burn_cubecl::cubecl;
    use burn_cubecl::cubecl::prelude::*;

    /// `out` `[e15]` is `x0`, then `x1`, … : tensor `s` lands at `e_{s−1} .. e_s` (`e_{−1} = 0`;
    /// an unused slot's span is empty).
    #[cube(launch)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pack_kernel<F: Float>(
        x0: &Tensor<F>,
        x1: &Tensor<F>,
        x2: &Tensor<F>,
        x3: &Tensor<F>,
        x4: &Tensor<F>,
        x5: &Tensor<F>,
        x6: &Tensor<F>,
        x7: &Tensor<F>,
        x8: &Tensor<F>,
        x9: &Tensor<F>,
        x10: &Tensor<F>,
        x11: &Tensor<F>,
        x12: &Tensor<F>,
        x13: &Tensor<F>,
        x14: &Tensor<F>,
        x15: &Tensor<F>,
        out: &mut Tensor<F>,
        e0: usize,
        e1: usize,
        e2: usize,
        e3: usize,
        e4: usize,
        e5: usize,
        e6: usize,
        e7: usize,
        e8: usize,
        e9: usize,
        e10: usize,
        e11: usize,
        e12: usize,
        e13: usize,
        e14: usize,
        e15: usize,
        #[define(F)] _dtype: ElemType,
    ) {
        let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
        let mut i = ABSOLUTE_POS_X as usize;
        while i < e15 {
            if i < e0 {
                out[i] = x0[i];
            } else if i < e1 {
                out[i] = x1[i - e0];
            } else if i < e2 {
                out[i] = x2[i - e1];
            } else if i < e3 {
                out[i] = x3[i - e2];
            } else if i < e4 {
                out[i] = x4[i - e3];
            } else if i < e5 {
                out[i] = x5[i - e4];
            } else if i < e6 {
                out[i] = x6[i - e5];
            } else if i < e7 {
                out[i] = x7[i - e6];
            } else if i < e8 {
                out[i] = x8[i - e7];
            } else if i < e9 {
                out[i] = x9[i - e8];
            } else if i < e10 {
                out[i] = x10[i - e9];
            } else if i < e11 {
                out[i] = x11[i - e10];
            } else if i < e12 {
                out[i] = x12[i - e11];
            } else if i < e13 {
                out[i] = x13[i - e12];
            } else if i < e14 {
                out[i] = x14[i - e13];
            } else {
                out[i] = x15[i - e14];
            }
            i += stride;
        }
    }
}

/// Concatenation as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait PackOps: Backend {
    /// `x0`, then `x1`, … concatenated, `[ends[7]]`: tensor `s` fills `ends[s − 1] .. ends[s]`
    /// (a placeholder's span is empty: it is never read).
    #[fusion(dtype = burn::tensor::DType::F32, shape = burn::tensor::Shape::new([ends[PACK_GROUP - 1]]))]
    #[allow(clippy::too_many_arguments)]
    fn pack_parts(
        x0: FloatTensor<Self>,
        x1: FloatTensor<Self>,
        x2: FloatTensor<Self>,
        x3: FloatTensor<Self>,
        x4: FloatTensor<Self>,
        x5: FloatTensor<Self>,
        x6: FloatTensor<Self>,
        x7: FloatTensor<Self>,
        x8: FloatTensor<Self>,
        x9: FloatTensor<Self>,
        x10: FloatTensor<Self>,
        x11: FloatTensor<Self>,
        x12: FloatTensor<Self>,
        x13: FloatTensor<Self>,
        x14: FloatTensor<Self>,
        x15: FloatTensor<Self>,
        ends: [usize; 16],
    ) -> FloatTensor<Self>;
}

impl PackOps for CubeBackend {
    fn pack_parts(
        x0: CubeTensor,
        x1: CubeTensor,
        x2: CubeTensor,
        x3: CubeTensor,
        x4: CubeTensor,
        x5: CubeTensor,
        x6: CubeTensor,
        x7: CubeTensor,
        x8: CubeTensor,
        x9: CubeTensor,
        x10: CubeTensor,
        x11: CubeTensor,
        x12: CubeTensor,
        x13: CubeTensor,
        x14: CubeTensor,
        x15: CubeTensor,
        ends: [usize; 16],
    ) -> CubeTensor {
        let [
            x0,
            x1,
            x2,
            x3,
            x4,
            x5,
            x6,
            x7,
            x8,
            x9,
            x10,
            x11,
            x12,
            x13,
            x14,
            x15,
        ] = [
            x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15,
        ]
        .map(into_contiguous);
        let client = x0.client.clone();
        let dtype = x0.dtype;
        let total = ends[PACK_GROUP - 1];
        let out = empty_device_dtype(
            client.clone(),
            x0.device.clone(),
            Shape::new([total]),
            dtype,
        );
        let max_units = client.properties().hardware.max_units_per_cube;
        let units = UNITS.min(max_units.max(1));
        let cubes = total.div_ceil(units as usize).clamp(1, MAX_CUBES);
        device::pack_kernel::launch(
            &client,
            CubeCount::Static(cubes as u32, 1, 1),
            CubeDim::new_1d(units),
            x0.into_tensor_arg(),
            x1.into_tensor_arg(),
            x2.into_tensor_arg(),
            x3.into_tensor_arg(),
            x4.into_tensor_arg(),
            x5.into_tensor_arg(),
            x6.into_tensor_arg(),
            x7.into_tensor_arg(),
            x8.into_tensor_arg(),
            x9.into_tensor_arg(),
            x10.into_tensor_arg(),
            x11.into_tensor_arg(),
            x12.into_tensor_arg(),
            x13.into_tensor_arg(),
            x14.into_tensor_arg(),
            x15.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            ends[0],
            ends[1],
            ends[2],
            ends[3],
            ends[4],
            ends[5],
            ends[6],
            ends[7],
            ends[8],
            ends[9],
            ends[10],
            ends[11],
            ends[12],
            ends[13],
            ends[14],
            ends[15],
            dtype_to_storage_type(dtype),
        );
        out
    }
}

/// `parts` (at most [`PACK_GROUP`], float32 on one CubeCL device, checked by the caller)
/// concatenated in one launch.
pub(crate) fn pack(parts: &[Tensor<1>]) -> Option<Tensor<1>> {
    let first = parts.first()?;
    let mut ends = [0usize; PACK_GROUP];
    let mut end = 0;
    for (s, slot) in ends.iter_mut().enumerate() {
        end += parts.get(s).map_or(0, |t| t.dims()[0]);
        *slot = end;
    }
    // An unused slot repeats the first tensor: its span is empty, it is never read.
    let [
        x0,
        x1,
        x2,
        x3,
        x4,
        x5,
        x6,
        x7,
        x8,
        x9,
        x10,
        x11,
        x12,
        x13,
        x14,
        x15,
    ] = std::array::from_fn(|s| {
        let tensor: FloatTensor<Dispatch> = parts
            .get(s)
            .unwrap_or(first)
            .clone()
            .inner()
            .into_dispatch();
        tensor
    });
    let out = <Dispatch as PackOps>::pack_parts(
        x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15, ends,
    );
    Some(Tensor::<1>::from_dispatch(out))
}
