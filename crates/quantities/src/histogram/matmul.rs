//! `rᵀc` of 0/1 matrices, the count of GradHist2d's cells from their row and column
//! indicators: on the host, and on the device where its float type counts exactly.

use burn::tensor::{DType, Device, Tensor, TensorData};

use crate::QuantityError;
use crate::readback::read_values;

/// `rᵀc` for `r` `[k, m]` and `c` `[k, n]` (row-major) on the host: the fallback of
/// [`outer_histogram2d`]'s matrix product where the device cannot count exactly.
pub(crate) fn host_matmul_tn(
    r: &[f32],
    c: &[f32],
    k: usize,
    m: usize,
    n: usize,
) -> Result<Vec<f64>, QuantityError> {
    let mut out = vec![0.0f64; m * n];
    for s in 0..k {
        for (i, &rv) in r[s * m..(s + 1) * m].iter().enumerate() {
            if rv != 0.0 {
                for (o, &cv) in c[s * n..(s + 1) * n].iter().enumerate() {
                    out[i * n + o] += f64::from(rv * cv);
                }
            }
        }
    }
    Ok(out)
}

/// `rᵀc` of 0/1 matrices (`r` `[k, m]`, `c` `[k, n]`) on the device when its float type
/// counts exactly (`f32`/`f64`, counts below 2²⁴), else on the host.
pub(crate) fn device_matmul_tn(
    r: &[f32],
    c: &[f32],
    k: usize,
    m: usize,
    n: usize,
    device: &Device,
) -> Result<Vec<f64>, QuantityError> {
    let rt = Tensor::<2>::from_data(TensorData::new(r.to_vec(), [k, m]), device);
    if !matches!(rt.dtype(), DType::F32 | DType::F64) || k >= 1 << 24 {
        return host_matmul_tn(r, c, k, m, n);
    }
    let ct = Tensor::<2>::from_data(TensorData::new(c.to_vec(), [k, n]), device);
    Ok(read_values(rt.transpose().matmul(ct).reshape([m * n]))?)
}
