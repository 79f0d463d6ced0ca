//! Per-sample losses `ℓ_n`, one per example, whose mean is burn's loss of the batch.
//!
//! burn's [`CrossEntropyLoss`](burn::nn::loss::CrossEntropyLoss) and
//! [`MseLoss`](burn::nn::loss::MseLoss) (with `Reduction::Mean`) return only the batch's mean;
//! Cockpit's Alpha, CABS, EarlyStopping, MeanGSNR and TIC need each example's loss as well.
//! These return `[B]`, and `.mean()` of the result is burn's value (tested against burn).

use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor};

/// Cross-entropy of each example: `ℓ_n = −log softmax(logits_n)[y_n]`, `[B]`, for logits
/// `[B, C]` and class indices `[B]`. `.mean()` equals burn's
/// `CrossEntropyLossConfig::new().init(&device).forward(logits, targets)` (no weights, no
/// smoothing, no padding).
pub fn cross_entropy(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    let [batch, _] = logits.dims();
    log_softmax(logits, 1)
        .gather(1, targets.reshape([batch, 1]))
        .reshape([batch])
        .neg()
}

/// Cross-entropy of each example against a distribution over the classes (one-hot or soft
/// labels) `[B, C]`: `ℓ_n = −Σ_c y_nc · log softmax(logits_n)_c`, `[B]`.
pub fn cross_entropy_with_probabilities(logits: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
    let [batch, _] = logits.dims();
    (log_softmax(logits, 1) * targets)
        .sum_dim(1)
        .reshape([batch])
        .neg()
}

/// Squared error of each example, averaged over its outputs: `ℓ_n = (1/C) ‖f_n − y_n‖²`,
/// `[B]`, for outputs and targets `[B, C]`. `.mean()` equals burn's
/// `MseLoss::new().forward(output, targets, Reduction::Mean)`.
pub fn mse(output: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
    let [batch, outputs] = output.dims();
    (output - targets)
        .square()
        .sum_dim(1)
        .reshape([batch])
        .mul_scalar((outputs as f64).recip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::loss::{CrossEntropyLossConfig, MseLoss, Reduction};
    use burn::tensor::{Device, TensorData};

    fn host(t: Tensor<1>) -> Vec<f64> {
        t.into_data()
            .convert::<f64>()
            .try_to_vec::<f64>()
            .unwrap_or_default()
    }

    fn logits(device: &Device) -> Tensor<2> {
        let values: Vec<f32> = (0..15).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
        Tensor::from_data(TensorData::new(values, [5, 3]), device)
    }

    #[test]
    fn cross_entropy_means_to_burns_loss_and_matches_a_hand_computation() {
        let device = Device::flex();
        let classes = [2i64, 0, 1, 1, 2];
        let targets = Tensor::<1, Int>::from_data(TensorData::new(classes.to_vec(), [5]), &device);
        let logits = logits(&device);
        let per_sample = cross_entropy(logits.clone(), targets.clone());
        let burn = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits.clone(), targets.clone());
        let (ours, theirs) = (host(per_sample.clone().mean()), host(burn));
        assert!((ours[0] - theirs[0]).abs() < 1e-6, "{ours:?} vs {theirs:?}");
        // By hand, sample by sample: log-sum-exp minus the target's logit.
        let rows: Vec<f64> = logits
            .into_data()
            .convert::<f64>()
            .try_to_vec::<f64>()
            .unwrap_or_default();
        for (n, (row, class)) in rows.chunks(3).zip(classes).enumerate() {
            let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
            let expected = lse - row[class as usize];
            let got = host(per_sample.clone())[n];
            assert!(
                (got - expected).abs() < 1e-5,
                "sample {n}: {got} vs {expected}"
            );
        }
        let one_hot = targets.one_hot::<2>(3).float();
        let soft = host(cross_entropy_with_probabilities(
            logits_again(&device),
            one_hot,
        ));
        for (a, b) in soft.iter().zip(host(per_sample)) {
            assert!((a - b).abs() < 1e-6);
        }
    }

    fn logits_again(device: &Device) -> Tensor<2> {
        logits(device)
    }

    #[test]
    fn mse_means_to_burns_loss() {
        let device = Device::flex();
        let output = logits(&device);
        let targets = logits(&device).mul_scalar(0.5).add_scalar(0.25);
        let per_sample = mse(output.clone(), targets.clone());
        assert_eq!(per_sample.dims(), [5]);
        let burn = MseLoss::new().forward(output, targets, Reduction::Mean);
        let (ours, theirs) = (host(per_sample.mean()), host(burn));
        assert!((ours[0] - theirs[0]).abs() < 1e-6, "{ours:?} vs {theirs:?}");
    }
}
