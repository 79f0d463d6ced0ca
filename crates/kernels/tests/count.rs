//! The counting kernel against a host count written here (float64 thresholds, each value's
//! bin found by walking them), on wgpu (lavapipe where there is no GPU).
#![cfg(feature = "wgpu")]

use burn::tensor::{DType, Device, Int, Tensor, TensorCreationOptions, TensorData};
use cockpit_kernels::{Guess, SHARED_CELLS, Values, count_bins, count_cells, supports};

mod common;
use common::{device, floats};

/// `bins − 1` thresholds splitting `[lo, hi)` evenly, in float64.
fn thresholds(lo: f64, hi: f64, bins: usize) -> Vec<f64> {
    (1..bins)
        .map(|k| lo + (hi - lo) * k as f64 / bins as f64)
        .collect()
}

/// The host's bin: how many thresholds the value reaches (NaN reaches none).
fn host_bin(x: f32, thresholds: &[f64]) -> usize {
    thresholds.iter().filter(|&&t| f64::from(x) >= t).count()
}

/// The smallest float32 at or above `t`.
fn round_up(t: f64) -> f32 {
    let nearest = t as f32;
    if f64::from(nearest) < t {
        nearest.next_up()
    } else {
        nearest
    }
}

fn device_thresholds(thresholds: &[f64], device: &Device) -> Tensor<1> {
    let mut extended = vec![f32::NEG_INFINITY];
    extended.extend(thresholds.iter().map(|&t| round_up(t)));
    extended.push(f32::INFINITY);
    let n = extended.len();
    Tensor::from_data(TensorData::new(extended, [n]), f32s(device))
}

fn f32s(device: &Device) -> TensorCreationOptions {
    TensorCreationOptions::new(device.clone()).with_dtype(DType::F32)
}

fn tensor2(values: Vec<f32>, shape: [usize; 2], device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values, shape), f32s(device))
}

fn read(counts: Tensor<1, Int>) -> Vec<u64> {
    counts
        .cast(DType::I64)
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c as u64)
        .collect()
}

/// Values on and beside every threshold, ±0, ±∞, NaN, and far outside the range.
fn with_edges(mut values: Vec<f32>, thresholds: &[f64]) -> Vec<f32> {
    for &t in thresholds {
        let up = round_up(t);
        values.extend([up, up.next_down(), up.next_up(), t as f32]);
    }
    values.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e30,
        -1e30,
    ]);
    values
}

// One case of the test below counts without shared memory.
const _: () = assert!(5000 > SHARED_CELLS);

#[test]
fn dense_values_land_where_the_host_puts_them() {
    let device = device();
    assert!(supports(&device, DType::F32));
    assert!(supports(&device.clone().autodiff(), DType::F32));
    assert!(!supports(&Device::flex(), DType::F32));
    for (bins, lo, hi) in [
        (100, -2.0, 2.0),
        (7, -0.3, 0.7),
        (1, -1.0, 1.0),
        (5000, -1.0, 1.0),
    ] {
        let t = thresholds(lo, hi, bins);
        let values = with_edges(floats(bins as u64, 70_001, 1.5 * hi), &t);
        let mut expected = vec![0u64; bins];
        for &v in &values {
            expected[host_bin(v, &t)] += 1;
        }
        let n = values.len();
        // Searched, and guessed by the formula `⌊(clamp(x) − lo)·bins/(hi − lo)⌋` then
        // corrected (two rounds cover float32's rounding on these ranges).
        let formula = Guess {
            low: lo as f32,
            high: hi as f32,
            offset: lo as f32,
            mul: bins as f32,
            div: (hi - lo) as f32,
            rounds: 2,
        };
        for guess in [None, Some(formula)] {
            let counts = count_bins(
                Values::Dense(Tensor::from_data(
                    TensorData::new(values.clone(), [n]),
                    f32s(&device),
                )),
                device_thresholds(&t, &device),
                bins,
                guess,
            )
            .expect("wgpu float32 is counted by the kernel");
            assert_eq!(
                read(counts),
                expected,
                "{bins} bins over [{lo}, {hi}), {guess:?}"
            );
        }
    }
}

#[test]
fn rank_one_products_are_counted_without_forming_them() {
    let device = device();
    let (b, d_in, d_out) = (5, 33, 47);
    let t = thresholds(-1.0, 1.0, 40);
    let mut a = floats(1, b * d_in, 1.5);
    let mut e = floats(2, b * d_out, 1.5);
    // Some products exactly on a threshold.
    e[0] = round_up(t[3]);
    // Rows of zeros (a ReLU's), zero columns and a negative zero: the kernel's hot cell, a
    // zero factor's row counted at once.
    for k in (0..a.len()).step_by(3) {
        a[k] = 0.0;
    }
    a[1] = -0.0;
    e[5] = 0.0;
    e[6] = -0.0;
    let mut expected = vec![0u64; 40];
    for n in 0..b {
        for i in 0..d_in {
            for o in 0..d_out {
                // The product rounded to float32, as the kernel (and burn's product) forms it.
                let p = a[n * d_in + i] * e[n * d_out + o];
                expected[host_bin(p, &t)] += 1;
            }
        }
    }
    let counts = count_bins(
        Values::Outer {
            a: tensor2(a, [b, d_in], &device),
            e: tensor2(e, [b, d_out], &device),
        },
        device_thresholds(&t, &device),
        40,
        None,
    )
    .expect("counted");
    let counts = read(counts);
    assert_eq!(counts.iter().sum::<u64>(), (b * d_in * d_out) as u64);
    assert_eq!(counts, expected);
}

/// Small rank-one products, most rows within the two bins either side of zero, as a trained
/// net's are: thresholds as the histograms' rule places them (the one at zero is a tiny
/// negative number, not zero) and one exactly at zero; rows within one bin, rows split by the
/// signs, zero rows, zero columns and rows that span many bins, all as the host bins the
/// formed products.
#[test]
fn rows_near_zero_are_counted_by_their_signs() {
    let device = device();
    let (b, d_in, d_out) = (4, 300, 70);
    let bins = 100;
    let mut rule = thresholds(-2.0, 2.0, bins);
    let mut at_zero = rule.clone();
    at_zero[bins / 2 - 1] = 0.0;
    rule[bins / 2 - 1] = -2.2e-16;
    let mut a = floats(3, b * d_in, 0.05);
    let mut e = floats(4, b * d_out, 0.05);
    for k in (0..a.len()).step_by(4) {
        a[k] = 0.0;
    }
    // A few large factors: rows spanning many bins.
    a[7] = 30.0;
    a[d_in + 9] = -45.0;
    e[3] = 0.0;
    e[d_out + 4] = -0.0;
    // A sample with a NaN and one with an infinite column factor: their rows are formed.
    e[2 * d_out + 5] = f32::NAN;
    e[3 * d_out + 6] = f32::INFINITY;
    for t in [rule, at_zero] {
        let mut expected = vec![0u64; bins];
        for n in 0..b {
            for i in 0..d_in {
                for o in 0..d_out {
                    let p = a[n * d_in + i] * e[n * d_out + o];
                    expected[host_bin(p, &t)] += 1;
                }
            }
        }
        let counts = count_bins(
            Values::Outer {
                a: tensor2(a.clone(), [b, d_in], &device),
                e: tensor2(e.clone(), [b, d_out], &device),
            },
            device_thresholds(&t, &device),
            bins,
            None,
        )
        .expect("counted");
        assert_eq!(read(counts), expected);
    }
}

#[test]
fn pairs_are_counted_in_their_cells() {
    let device = device();
    let (x_bins, y_bins) = (6, 5);
    let t = thresholds(-1.0, 1.0, x_bins);
    let (b, d_in, d_out) = (3, 4, 6);
    let numel = d_in * d_out;
    let y: Vec<i64> = (0..numel).map(|j| ((j * 7 + 3) % y_bins) as i64).collect();
    let y_tensor = || Tensor::<1, Int>::from_data(TensorData::new(y.clone(), [numel]), &device);

    // Dense per-sample gradients `[b, numel]`.
    let g = floats(5, b * numel, 1.2);
    let mut expected = vec![0u64; x_bins * y_bins];
    for n in 0..b {
        for j in 0..numel {
            expected[host_bin(g[n * numel + j], &t) * y_bins + y[j] as usize] += 1;
        }
    }
    let counts = count_cells(
        Values::Dense(Tensor::from_data(
            TensorData::new(g, [b * numel]),
            f32s(&device),
        )),
        device_thresholds(&t, &device),
        x_bins,
        y_tensor(),
        y_bins,
        None,
    )
    .expect("counted");
    assert_eq!(read(counts), expected);

    // Rank-one: element `j = i·d_out + o` of sample n is `a_{n,i}·e_{n,o}`.
    let (a, e) = (floats(6, b * d_in, 1.2), floats(7, b * d_out, 1.2));
    let mut expected = vec![0u64; x_bins * y_bins];
    for n in 0..b {
        for i in 0..d_in {
            for o in 0..d_out {
                let p = a[n * d_in + i] * e[n * d_out + o];
                expected[host_bin(p, &t) * y_bins + y[i * d_out + o] as usize] += 1;
            }
        }
    }
    let counts = count_cells(
        Values::Outer {
            a: tensor2(a, [b, d_in], &device),
            e: tensor2(e, [b, d_out], &device),
        },
        device_thresholds(&t, &device),
        x_bins,
        y_tensor(),
        y_bins,
        None,
    )
    .expect("counted");
    assert_eq!(read(counts), expected);
}

#[test]
fn what_the_kernel_does_not_count_is_refused() {
    let device = device();
    let t = device_thresholds(&thresholds(-1.0, 1.0, 4), &device);
    let v = Tensor::<1>::from_data(TensorData::new(vec![0.5f32; 8], [8]), f32s(&device));
    // Thresholds of another number of bins.
    assert!(count_bins(Values::Dense(v.clone()), t.clone(), 5, None).is_none());
    // Float64 values (lavapipe has no usable float64) and CPU backends keep the other path.
    assert!(
        count_bins(
            Values::Dense(v.clone().cast(DType::F64)),
            t.clone(),
            4,
            None
        )
        .is_none()
    );
    let flex = Device::flex();
    let on_flex = Tensor::<1>::from_data(TensorData::new(vec![0.5f32; 8], [8]), f32s(&flex));
    let t_flex = device_thresholds(&thresholds(-1.0, 1.0, 4), &flex);
    assert!(count_bins(Values::Dense(on_flex), t_flex, 4, None).is_none());
    // A y that does not hold one bin per element of a sample.
    let y = Tensor::<1, Int>::from_data(TensorData::new(vec![0i64; 3], [3]), &device);
    assert!(count_cells(Values::Dense(v), t, 4, y, 2, None).is_none());
    // No values: zero counts.
    let empty = Tensor::<1>::from_data(TensorData::new(Vec::<f32>::new(), [0]), f32s(&device));
    let t = device_thresholds(&thresholds(-1.0, 1.0, 4), &device);
    assert_eq!(
        read(count_bins(Values::Dense(empty), t, 4, None).expect("counted")),
        vec![0; 4]
    );
}

/// Counting onto a running total equals the host's counts of all the values together (dense
/// and rank-one pieces, 1-d bins and 2-d cells); a total another tensor still holds keeps its
/// values (the kernel counts into a copy); a total of another type or length comes back
/// untouched.
#[test]
fn counts_onto_a_running_total() {
    use cockpit_kernels::count_onto;
    let device = device();
    let bins = 16;
    let t = thresholds(-1.0, 1.0, bins);
    let first = floats(3, 5_000, 1.2);
    let (a, e) = (floats(4, 3 * 40, 1.0), floats(5, 3 * 7, 1.0));
    let mut expected = vec![0u64; bins];
    for &v in &first {
        expected[host_bin(v, &t)] += 1;
    }
    for n in 0..3 {
        for i in 0..40 {
            for j in 0..7 {
                expected[host_bin(a[n * 40 + i] * e[n * 7 + j], &t)] += 1;
            }
        }
    }
    let dense = |v: &[f32]| {
        Values::Dense(Tensor::from_data(
            TensorData::new(v.to_vec(), [v.len()]),
            f32s(&device),
        ))
    };
    let total =
        count_bins(dense(&first), device_thresholds(&t, &device), bins, None).expect("counted");
    let held = total.clone();
    let held_before = read(held.clone());
    let outer = Values::Outer {
        a: tensor2(a.clone(), [3, 40], &device),
        e: tensor2(e.clone(), [3, 7], &device),
    };
    let total = count_onto(
        total,
        outer,
        device_thresholds(&t, &device),
        bins,
        None,
        None,
    )
    .unwrap_or_else(|_| panic!("the kernel counts onto a u32 total"));
    assert_eq!(read(total), expected);
    assert_eq!(
        read(held),
        held_before,
        "a total held elsewhere is not counted into"
    );

    // 2-d cells: the same values' x bins with a second axis of two bins by element parity.
    let y_bins = 2;
    let y: Vec<i64> = (0..first.len()).map(|k| (k % 2) as i64).collect();
    let y = Tensor::<1, Int>::from_data(TensorData::new(y, [first.len()]), &device);
    let mut cells = vec![0u64; bins * y_bins];
    for (k, &v) in first.iter().enumerate() {
        cells[host_bin(v, &t) * y_bins + k % 2] += 2;
    }
    let once = count_cells(
        dense(&first),
        device_thresholds(&t, &device),
        bins,
        y.clone(),
        y_bins,
        None,
    )
    .expect("counted");
    let twice = count_onto(
        once,
        dense(&first),
        device_thresholds(&t, &device),
        bins,
        Some((y, y_bins)),
        None,
    )
    .unwrap_or_else(|_| panic!("the kernel counts cells onto a u32 total"));
    assert_eq!(read(twice), cells);

    // Another type or length: handed back as it came.
    let wrong = Tensor::<1, Int>::from_data(TensorData::new(vec![7i64; bins], [bins]), &device);
    let back = count_onto(
        wrong,
        dense(&first),
        device_thresholds(&t, &device),
        bins,
        None,
        None,
    )
    .expect_err("an i64 total is refused");
    assert_eq!(read(*back), vec![7; bins]);
}

/// Rows whose products span more than the two bins around zero: counted from the sample's
/// sorted column factors, by a binary search per threshold crossed (a few bins) or by walking
/// the sorted products (many bins), for positive and negative row factors, products exactly
/// on a threshold, tied column factors, two cubes of rows per sample, column factors too many
/// to sort in shared memory (formed one by one), with the rule's formula and without, all as
/// the host bins the formed products.
#[test]
fn rows_spanning_bins_are_counted_from_sorted_columns() {
    let device = device();
    let bins = 100;
    let mut t = thresholds(-2.0, 2.0, bins);
    t[bins / 2 - 1] = -2.2e-16;
    let guess = Guess {
        low: -2.0,
        high: 2.0,
        offset: -2.0,
        mul: bins as f32,
        div: 4.0,
        rounds: 2,
    };
    let (b, d_in) = (3, 700);
    // Row scales from a zero row to rows spanning every bin, both signs.
    let scales = [
        0.0f32, 0.01, -0.01, 0.3, -0.3, 2.0, 3.0, -7.0, 40.0, -45.0, 1e-30,
    ];
    for d_out in [70, 256, 2100] {
        let mut a = floats(11, b * d_in, 1.0);
        for (k, v) in a.iter_mut().enumerate() {
            *v = scales[k % scales.len()] * (1.0 + v.abs());
        }
        // Rows of exactly 2 and −2: their products with half a threshold are the threshold.
        a[5] = 2.0;
        a[d_in + 6] = -2.0;
        let mut e = floats(12, b * d_out, 0.5);
        for (k, &threshold) in t.iter().enumerate().step_by(7) {
            let o = k % d_out;
            e[o] = round_up(threshold) / 2.0;
            e[d_out + o] = -round_up(threshold) / 2.0;
        }
        // Rows of ±0.25 over a few bins (searched): products exactly on the thresholds near
        // zero.
        a[8] = 0.25;
        a[d_in + 8] = -0.25;
        for (o, &threshold) in (15..).zip(&t[bins / 2 - 5..bins / 2 + 5]) {
            e[o] = 4.0 * round_up(threshold);
            e[d_out + o] = -4.0 * round_up(threshold);
        }
        // Ties and zeros among the column factors.
        for o in (0..d_out).step_by(9) {
            e[2 * d_out + o] = 0.125;
        }
        e[2 * d_out + 1] = 0.0;
        e[2 * d_out + 2] = -0.0;
        let mut expected = vec![0u64; bins];
        for n in 0..b {
            for i in 0..d_in {
                for o in 0..d_out {
                    let p = a[n * d_in + i] * e[n * d_out + o];
                    expected[host_bin(p, &t)] += 1;
                }
            }
        }
        for g in [None, Some(guess)] {
            let counts = count_bins(
                Values::Outer {
                    a: tensor2(a.clone(), [b, d_in], &device),
                    e: tensor2(e.clone(), [b, d_out], &device),
                },
                device_thresholds(&t, &device),
                bins,
                g,
            )
            .expect("counted");
            assert_eq!(read(counts), expected, "d_out {d_out}, guess {g:?}");
        }
    }
}
