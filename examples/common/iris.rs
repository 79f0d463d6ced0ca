//! Iris (shipped inside the `linfa-datasets` crate, no download) and the classifier the
//! examples train on it.

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burn_cockpit::persample::Linear;

/// Iris as standardised features and one-hot labels, shuffled with a fixed seed and split
/// 120 / 30.
pub struct Data {
    pub train: (Vec<[f64; 4]>, Vec<usize>),
    pub test: (Vec<[f64; 4]>, Vec<usize>),
}

pub fn load_iris() -> Data {
    let iris = linfa_datasets::iris();
    let records: Vec<f64> = iris.records().iter().copied().collect();
    let labels: Vec<usize> = iris.targets().iter().copied().collect();
    let n = labels.len();
    let mut rows: Vec<[f64; 4]> = (0..n)
        .map(|i| {
            [
                records[4 * i],
                records[4 * i + 1],
                records[4 * i + 2],
                records[4 * i + 3],
            ]
        })
        .collect();
    for j in 0..4 {
        let mean = rows.iter().map(|r| r[j]).sum::<f64>() / n as f64;
        let sd = (rows.iter().map(|r| (r[j] - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        rows.iter_mut().for_each(|r| r[j] = (r[j] - mean) / sd);
    }
    // Fisher–Yates with a small LCG: the same split on every run and backend.
    let mut order: Vec<usize> = (0..n).collect();
    let mut state: u64 = 0x5eed;
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        order.swap(i, (state >> 33) as usize % (i + 1));
    }
    let pick = |idx: &[usize]| -> (Vec<[f64; 4]>, Vec<usize>) {
        (
            idx.iter().map(|&i| rows[i]).collect(),
            idx.iter().map(|&i| labels[i]).collect(),
        )
    };
    Data {
        train: pick(&order[..120]),
        test: pick(&order[120..]),
    }
}

/// The examples' classifier: 4 → 16 → 3 with ReLU, built from `persample::Linear` (a drop-in
/// for `burn::nn::Linear`) so the per-sample quantities come from the ordinary backward pass.
#[derive(Module, Debug)]
pub struct Classifier {
    hidden: Linear,
    out: Linear,
}

impl Classifier {
    /// A freshly initialised classifier on `device`.
    pub fn new(device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(4, 16).init(device).into(),
            out: LinearConfig::new(16, 3).init(device).into(),
        }
    }

    /// Logits `[B, 3]` of standardised features `[B, 4]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(relu(self.hidden.forward(x)))
    }
}
