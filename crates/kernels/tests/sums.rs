//! The sums kernel against sums written here in float64, on wgpu (lavapipe where there is no
//! GPU): every summand, groups of one to three launches, tensors from one value to more than
//! a launch's cubes cover in one stride.
#![cfg(feature = "wgpu")]

use burn::tensor::{DType, Device, Tensor, TensorCreationOptions, TensorData};
use cockpit_kernels::{GROUP, MAX_ROWS, Summand, row_dots, row_sums, sums, supports};

mod common;
use common::{device, floats};

fn tensor(values: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(
        TensorData::new(values.to_vec(), [values.len()]),
        TensorCreationOptions::new(device.clone()).with_dtype(DType::F32),
    )
}

/// The host's sum of the summand, in float64 over float32 operands (`scale·y` rounded to
/// float32 first, as the kernel and burn round it).
fn host(summand: Summand, x: &[f32], y: &[f32]) -> f64 {
    match summand {
        Summand::Square => x.iter().map(|&v| f64::from(v).powi(2)).sum(),
        Summand::Distance { scale } => x
            .iter()
            .zip(y)
            .map(|(&a, &b)| f64::from(a - scale * b).powi(2))
            .sum(),
        Summand::Product => x
            .iter()
            .zip(y)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum(),
    }
}

fn read(t: Tensor<1>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn every_summand_matches_float64_sums() {
    let device = device();
    assert!(supports(&device, DType::F32));
    // Lengths around a cube (256 units), a cube's stride, and beyond the most cubes a tensor
    // takes in one stride (1 024 cubes of 256 units × 16 values).
    let lengths = [
        1, 7, 255, 256, 257, 4_096, 4_097, 70_001, 300_000, 5_000_000,
    ];
    for count in [1, GROUP - 2, GROUP, GROUP + 1, 2 * GROUP + 3] {
        let xs: Vec<Vec<f32>> = (0..count)
            .map(|p| floats(p as u64 + 1, lengths[p % lengths.len()], 1.0 + p as f64))
            .collect();
        let ys: Vec<Vec<f32>> = (0..count)
            .map(|p| floats(p as u64 + 101, lengths[p % lengths.len()], 0.5))
            .collect();
        let x: Vec<Tensor<1>> = xs.iter().map(|v| tensor(v, &device)).collect();
        let y: Vec<Tensor<1>> = ys.iter().map(|v| tensor(v, &device)).collect();
        for summand in [
            Summand::Square,
            Summand::Distance { scale: -0.3 },
            Summand::Product,
        ] {
            let got = read(sums(summand, &x, &y).expect("the kernel runs on wgpu"));
            assert_eq!(got.len(), count);
            for (p, &value) in got.iter().enumerate() {
                let want = host(summand, &xs[p], &ys[p]);
                let scale = xs[p]
                    .iter()
                    .zip(&ys[p])
                    .map(|(&a, &b)| f64::from(a).abs() * (f64::from(a).abs() + f64::from(b).abs()))
                    .sum::<f64>();
                assert!(
                    (f64::from(value) - want).abs() <= 1e-5 * scale + 1e-30,
                    "{summand:?}, {count} tensors, tensor {p} ({} values): {value} against {want}",
                    xs[p].len()
                );
            }
        }
    }
}

#[test]
fn every_row_sum_matches_float64_sums() {
    let device = device();
    let widths = [1, 3, 256, 257, 5_000, 40_000];
    for rows in [1, 3, 32] {
        for count in [1, GROUP + 1] {
            let xs: Vec<Vec<f32>> = (0..count)
                .map(|p| floats(p as u64 + 7, rows * widths[p % widths.len()], 2.0))
                .collect();
            let ys: Vec<Vec<f32>> = (0..count)
                .map(|p| floats(p as u64 + 70, rows * widths[p % widths.len()], 1.0))
                .collect();
            let matrix = |v: &Vec<f32>| tensor(v, &device).reshape([rows, v.len() / rows]);
            let x: Vec<Tensor<2>> = xs.iter().map(matrix).collect();
            let y: Vec<Tensor<2>> = ys.iter().map(matrix).collect();
            for summand in [
                Summand::Square,
                Summand::Distance { scale: 2.5 },
                Summand::Product,
            ] {
                let got = row_sums(summand, &x, &y).expect("the kernel runs on wgpu");
                assert_eq!(got.dims(), [count, rows]);
                let got = read(got.reshape([count * rows]));
                for p in 0..count {
                    let width = xs[p].len() / rows;
                    for n in 0..rows {
                        let span = n * width..(n + 1) * width;
                        let (xr, yr) = (&xs[p][span.clone()], &ys[p][span]);
                        let want = host(summand, xr, yr);
                        let scale = xr
                            .iter()
                            .zip(yr)
                            .map(|(&a, &b)| {
                                f64::from(a).abs() * (f64::from(a).abs() + 2.5 * f64::from(b).abs())
                                    + f64::from(b).powi(2) * 6.25
                            })
                            .sum::<f64>();
                        let value = f64::from(got[p * rows + n]);
                        assert!(
                            (value - want).abs() <= 1e-5 * scale + 1e-30,
                            "{summand:?}, {count} tensors of {rows} rows, tensor {p} row {n} ({width} values): {value} against {want}"
                        );
                    }
                }
            }
        }
    }
}

/// Per-sample projections: each row of `x` times each direction, against float64 loops, for
/// rows shorter than a cube and longer than a stride of cubes, one to more than a launch's
/// group of directions.
#[test]
fn every_row_dot_matches_float64_sums() {
    let device = device();
    for (rows, width) in [(1, 3), (4, 257), (16, 40_000), (3, 300_000)] {
        for count in [1, 3, GROUP + 2] {
            let x = floats(11, rows * width, 1.5);
            let vs: Vec<Vec<f32>> = (0..count)
                .map(|k| floats(k as u64 + 40, width, 0.5))
                .collect();
            let xt = tensor(&x, &device).reshape([rows, width]);
            let vt: Vec<Tensor<1>> = vs.iter().map(|v| tensor(v, &device)).collect();
            let got = row_dots(&xt, &vt).expect("the kernel runs on wgpu");
            assert_eq!(got.dims(), [count, rows]);
            let got = read(got.reshape([count * rows]));
            for (k, v) in vs.iter().enumerate() {
                for n in 0..rows {
                    let row = &x[n * width..(n + 1) * width];
                    let want = host(Summand::Product, row, v);
                    let scale: f64 = row
                        .iter()
                        .zip(v)
                        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                        .sum();
                    let value = f64::from(got[k * rows + n]);
                    assert!(
                        (value - want).abs() <= 1e-5 * scale + 1e-30,
                        "{count} directions, row {n} of {rows}, direction {k} ({width} values): {value} against {want}"
                    );
                }
            }
        }
    }
    // A direction of another length, or none, is refused.
    let x = tensor(&floats(1, 12, 1.0), &device).reshape([3, 4]);
    let short = tensor(&floats(2, 3, 1.0), &device);
    assert!(row_dots(&x, &[short]).is_none());
    assert!(row_dots(&x, &[]).is_none());
}

#[test]
fn operands_that_do_not_pair_are_refused() {
    let device = device();
    let a = tensor(&floats(1, 10, 1.0), &device);
    let b = tensor(&floats(2, 11, 1.0), &device);
    let empty = tensor(&[], &device);
    let one = std::slice::from_ref;
    assert!(sums(Summand::Square, &[], &[]).is_none());
    assert!(sums(Summand::Product, one(&a), one(&b)).is_none());
    assert!(sums(Summand::Product, &[a.clone(), a.clone()], one(&a)).is_none());
    assert!(sums(Summand::Square, &[a.clone(), empty], &[]).is_none());
    // Square ignores `y`.
    assert!(sums(Summand::Square, one(&a), one(&b)).is_some());
    let flex = Device::flex();
    let on_flex = tensor(&floats(1, 10, 1.0), &flex);
    assert!(sums(Summand::Square, one(&on_flex), &[]).is_none());
    assert!(sums(Summand::Product, one(&a), one(&on_flex)).is_none());
    // Row sums: the tensors' row counts must agree and fit a launch.
    let m3 = a.clone().reshape([2, 5]);
    let m5 = a.reshape([5, 2]);
    assert!(row_sums(Summand::Square, &[m3.clone(), m5.clone()], &[]).is_none());
    assert!(row_sums(Summand::Product, std::slice::from_ref(&m3), &[m5]).is_none());
    assert!(row_sums(Summand::Square, &[m3], &[]).is_some());
    let tall = tensor(&floats(3, MAX_ROWS + 1, 1.0), &device).reshape([MAX_ROWS + 1, 1]);
    assert!(row_sums(Summand::Square, &[tall], &[]).is_none());
}
