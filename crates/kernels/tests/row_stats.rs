//! The one-pass row statistics (each row's squared norm and its products with up to three
//! directions) against float64 loops written here, on wgpu (lavapipe where there is no GPU):
//! rows shorter than a cube, longer than a stride of cubes, zero to three directions.
#![cfg(feature = "wgpu")]

use burn::tensor::{DType, Device, Tensor, TensorCreationOptions, TensorData};
use cockpit_kernels::{MAX_DIRECTIONS, row_norms_and_dots};

mod common;
use common::{device, floats};

fn tensor(values: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(
        TensorData::new(values.to_vec(), [values.len()]),
        TensorCreationOptions::new(device.clone()).with_dtype(DType::F32),
    )
}

/// `Σ_k a_k·b_k` in float64, and `Σ_k |a_k·b_k|` (the scale of its rounding error).
fn dot(a: &[f32], b: &[f32]) -> (f64, f64) {
    a.iter()
        .zip(b)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .fold((0.0, 0.0), |(s, m), p| (s + p, m + p.abs()))
}

#[test]
fn norms_and_projections_match_float64_loops() {
    let device = device();
    for (rows, width) in [(1, 3), (4, 257), (16, 40_000), (3, 300_000), (2, 5_000_000)] {
        for count in 0..=MAX_DIRECTIONS {
            let x = floats(11 + count as u64, rows * width, 1.5);
            let vs: Vec<Vec<f32>> = (0..count)
                .map(|k| floats(k as u64 + 40, width, 0.5))
                .collect();
            let xt = tensor(&x, &device).reshape([rows, width]);
            let vt: Vec<Tensor<1>> = vs.iter().map(|v| tensor(v, &device)).collect();
            let got = row_norms_and_dots(&xt, &vt).expect("the kernel runs on wgpu");
            assert_eq!(got.dims(), [1 + count, rows]);
            let got: Vec<f32> = got
                .reshape([(1 + count) * rows])
                .into_data()
                .iter::<f32>()
                .collect();
            for n in 0..rows {
                let row = &x[n * width..(n + 1) * width];
                let mut wants = vec![dot(row, row)];
                wants.extend(vs.iter().map(|v| dot(row, v)));
                for (j, (want, scale)) in wants.into_iter().enumerate() {
                    let value = f64::from(got[j * rows + n]);
                    assert!(
                        (value - want).abs() <= 1e-5 * scale + 1e-30,
                        "{count} directions, row {n} of {rows} ({width} values), statistic {j}: {value} against {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn operands_that_do_not_fit_are_refused() {
    let device = device();
    let x = tensor(&floats(1, 12, 1.0), &device).reshape([3, 4]);
    let v = tensor(&floats(2, 4, 1.0), &device);
    let short = tensor(&floats(3, 3, 1.0), &device);
    assert!(row_norms_and_dots(&x, std::slice::from_ref(&short)).is_none());
    let four = vec![v.clone(); MAX_DIRECTIONS + 1];
    assert!(row_norms_and_dots(&x, &four).is_none());
    let empty = tensor(&[], &device).reshape([0, 4]);
    assert!(row_norms_and_dots(&empty, std::slice::from_ref(&v)).is_none());
}
