//! Cross-entropy at every position of an output: a language model's or tagger's tokens
//! `[B, T, V]`, a segmenter's pixels `[B, C, H, W]`.
//!
//! The network's output reaches the curvature code flattened to `[B, K]` (`K = P·C`, `P` the
//! positions, `C` the classes; [`NetworkOutput`](super::NetworkOutput)); this file reads it
//! back as `[B, P, C]`, whichever axis holds the classes.

use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Bool, DType, Int, Tensor, TensorCreationOptions, TensorData};

use super::random::SplitMix;

/// Where an output's classes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassAxis {
    /// The last axis: `[B, T, V]` token logits (language models, taggers).
    Last,
    /// The second axis: `[B, C, H, W]` class maps (segmenters, burn's convolution layout).
    Second,
}

/// Cross-entropy at `P` positions of each example, each example's loss the mean over its
/// counted positions (positions whose target is the ignore index count for nothing):
/// `ℓ_n = (1/T_n) Σ_t m_{n,t} · (−log softmax(f_{n,t})[y_{n,t}])`, `T_n = Σ_t m_{n,t}`, and
/// the batch's loss `L = (1/B) Σ_n ℓ_n`. An example with no counted position has `ℓ_n = 0`.
///
/// This is burn's `CrossEntropyLoss` on the flattened `[B·T, V]` logits (with
/// `with_pad_tokens`) whenever every example counts the same number of positions; with
/// padding of unequal length burn's loss weighs every counted token alike, this one every
/// example alike (Cockpit's per-sample quantities need `L` to be the mean of the `ℓ_n`).
#[derive(Debug, Clone)]
pub struct PositionLoss {
    /// Class indices `[B, P]`, ignored positions set to class 0 (their weight is 0).
    targets: Tensor<2, Int>,
    /// Whether each position counts, `[B, P]` (its weight is `m_{n,t} / max(T_n, 1)`,
    /// formed in the output's float type).
    counted: Tensor<2, Bool>,
    classes: usize,
    axis: ClassAxis,
}

/// One-hot rows `[N, classes]` of class indices `[N]` in float type `dtype` (the device's
/// default float type for `None`), scattered on the
/// indices' device: burn's `one_hot` reads the indices back to the host first (a device wait
/// on a GPU, every call) and builds an integer one-hot on the way.
pub(crate) fn one_hot_rows(
    indices: Tensor<1, Int>,
    classes: usize,
    dtype: Option<DType>,
) -> Tensor<2> {
    let [rows] = indices.dims();
    let options = TensorCreationOptions::new(indices.device());
    let options = match dtype {
        Some(dtype) => options.with_dtype(dtype),
        None => options,
    };
    Tensor::<2>::zeros([rows, classes], options.clone()).scatter(
        1,
        indices.reshape([rows, 1]),
        Tensor::ones([rows, 1], options),
        burn::tensor::IndexingUpdateOp::Assign,
    )
}

/// One-hot rows `[B, P, C]` of classes drawn from the probabilities `p` `[B, P, C]` by
/// inverse CDF against the uniforms `u` (`[B, P, C]`, constant along the classes): the first
/// class whose cumulative probability passes `u`. The last class always passes, so rounding
/// in the CDF cannot leave a position without a class.
pub(crate) fn drawn_classes(p: Tensor<3>, u: Tensor<3>) -> Tensor<3> {
    let [batch, positions, classes] = p.dims();
    let dtype = p.dtype();
    let passed = p
        .cumsum(2)
        .greater(u)
        .float()
        .cast(dtype)
        .slice_fill([0..batch, 0..positions, classes - 1..classes], 1.0);
    let before = Tensor::cat(
        vec![
            passed
                .clone()
                .slice([0..batch, 0..positions, 0..1])
                .zeros_like(),
            passed
                .clone()
                .slice([0..batch, 0..positions, 0..classes - 1]),
        ],
        2,
    );
    passed - before
}

impl PositionLoss {
    /// Targets `[B, P]` among `classes` classes; positions whose target is `ignore` count
    /// for nothing.
    pub(crate) fn new(
        targets: Tensor<2, Int>,
        classes: usize,
        axis: ClassAxis,
        ignore: Option<i64>,
    ) -> Self {
        let (targets, counted) = match ignore {
            Some(ignore) => {
                let ignored = targets.clone().equal_elem(ignore);
                (targets.mask_fill(ignored.clone(), 0), ignored.bool_not())
            }
            None => (targets.clone(), targets.ones_like().equal_elem(1)),
        };
        Self {
            targets,
            counted,
            classes,
            axis,
        }
    }

    /// `[B, P]`: examples and positions per example.
    pub fn positions(&self) -> [usize; 2] {
        self.targets.dims()
    }

    /// `[B, K]`, `K = P·C`: the flattened output's shape.
    pub(crate) fn dims(&self) -> [usize; 2] {
        let [batch, positions] = self.positions();
        [batch, positions * self.classes]
    }

    /// The classes per position.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Where the classes are.
    pub fn axis(&self) -> ClassAxis {
        self.axis
    }

    /// The flattened output `[R, K]` read as `[R, P, C]`.
    fn classes_last(&self, f: Tensor<2>) -> Tensor<3> {
        let [rows, _] = f.dims();
        let [_, positions] = self.positions();
        match self.axis {
            ClassAxis::Last => f.reshape([rows, positions, self.classes]),
            ClassAxis::Second => f.reshape([rows, self.classes, positions]).swap_dims(1, 2),
        }
    }

    /// `[R, P, C]` back in the output's flattened layout `[R, K]`.
    fn flattened(&self, x: Tensor<3>) -> Tensor<2> {
        let [rows, positions, classes] = x.dims();
        match self.axis {
            ClassAxis::Last => x.reshape([rows, positions * classes]),
            ClassAxis::Second => x.swap_dims(1, 2).reshape([rows, positions * classes]),
        }
    }

    fn one_hot(&self, dtype: DType) -> Tensor<3> {
        let [batch, positions] = self.positions();
        one_hot_rows(
            self.targets.clone().reshape([batch * positions]),
            self.classes,
            Some(dtype),
        )
        .reshape([batch, positions, self.classes])
    }

    /// Each position's weight in its example's loss, `m_{n,t} / max(T_n, 1)`, `[B, P]`, in
    /// float type `dtype` (counted in it: a float64 output gets float64 weights).
    pub fn weights_as(&self, dtype: DType) -> Tensor<2> {
        let counted = self.counted.clone().float();
        let counted = if counted.dtype() == dtype {
            counted
        } else {
            counted.cast(dtype)
        };
        let count = counted.clone().sum_dim(1).clamp_min(1.0);
        counted / count
    }

    /// Each position's loss `−log softmax(f_{n,t})[y_{n,t}]`, `[B, P]` (ignored positions
    /// included).
    fn token_losses(&self, f: Tensor<2>) -> Tensor<2> {
        let [batch, positions] = self.positions();
        log_softmax(self.classes_last(f), 2)
            .gather(2, self.targets.clone().reshape([batch, positions, 1]))
            .reshape([batch, positions])
            .neg()
    }

    /// Each example's loss `ℓ_n`, `[B]`.
    pub(crate) fn per_sample(&self, f: Tensor<2>) -> Tensor<1> {
        let [batch, _] = self.positions();
        let w = self.weights_as(f.dtype());
        self.token_losses(f).mul(w).sum_dim(1).reshape([batch])
    }

    /// Each example's worst counted position: its loss `[B]` (−1 where none counts) and
    /// its index `[B]`.
    pub(crate) fn worst_positions(&self, f: Tensor<2>) -> (Tensor<1>, Tensor<1, Int>) {
        let [batch, _] = self.positions();
        let ignored = self.counted.clone().bool_not();
        let (loss, position) = self
            .token_losses(f)
            .mask_fill(ignored, -1.0)
            .max_dim_with_indices(1);
        (loss.reshape([batch]), position.reshape([batch]))
    }

    /// `∂L/∂f` of the mean loss, `[B, K]`.
    pub(crate) fn gradient(&self, f: Tensor<2>) -> Tensor<2> {
        let [batch, positions] = self.positions();
        let dtype = f.dtype();
        let w = self.weights_as(dtype).reshape([batch, positions, 1]);
        let p = softmax(self.classes_last(f), 2);
        self.flattened((p - self.one_hot(dtype)) * w)
            .mul_scalar((batch as f64).recip())
    }

    /// Each example's mean margin over its counted positions, `[B]`: at each position the
    /// labelled class's logit minus the largest other one.
    pub(crate) fn margins(&self, f: Tensor<2>) -> Tensor<1> {
        let [batch, positions] = self.positions();
        let dtype = f.dtype();
        let x = self.classes_last(f);
        let is_label: Tensor<3, Bool> = self.one_hot(dtype).equal_elem(1.0);
        let labelled = x
            .clone()
            .gather(2, self.targets.clone().reshape([batch, positions, 1]));
        let other = x.mask_fill(is_label, f64::NEG_INFINITY).max_dim(2);
        ((labelled - other).reshape([batch, positions]) * self.weights_as(dtype))
            .sum_dim(1)
            .reshape([batch])
    }

    /// The columns `columns` of the loss Hessian's square root stacked copy-major,
    /// `[k·B, K]`: column `j` is position `t = j / C`, class `c = j mod C`, and row `n` of
    /// its copy is `√w_{n,t} √p_{n,t,c} (e_{t,c} − p_{n,t,·})` (zero outside position `t`).
    pub(crate) fn stacked_columns(
        &self,
        f: &Tensor<2>,
        columns: std::ops::Range<usize>,
    ) -> Tensor<2> {
        let [batch, width] = f.dims();
        let [_, positions] = self.positions();
        let classes = self.classes;
        let (copies, device, dtype) = (columns.len(), f.device(), f.dtype());
        let rows = copies * batch;
        let column_of_row: Vec<i64> = (0..rows)
            .map(|row| (columns.start + row / batch) as i64)
            .collect();
        let column_of_row =
            Tensor::<2, Int>::from_data(TensorData::new(column_of_row, [rows, 1]), &device)
                .expand([rows, width]);
        let all = Tensor::<1, Int>::arange(0..width as i64, &device)
            .reshape([1, width])
            .expand([rows, width]);
        let e = column_of_row.clone().equal(all.clone()).float().cast(dtype);
        let same_position = column_of_row
            .div_scalar(classes as i64)
            .equal(all.div_scalar(classes as i64))
            .float()
            .cast(dtype);
        let p = softmax(self.classes_last(f.clone()), 2)
            .reshape([batch, width])
            .repeat_dim(0, copies);
        let w = self
            .weights_as(dtype)
            .reshape([batch, positions, 1])
            .expand([batch, positions, classes])
            .reshape([batch, width])
            .repeat_dim(0, copies);
        let root = ((p.clone() * e.clone()).sum_dim(1) * (w * e.clone()).sum_dim(1)).sqrt();
        let s = (e - p * same_position) * root;
        self.flattened(s.reshape([rows, positions, classes]))
    }

    /// One sampled column `[B, K]`: at every position `√w_{n,t} (p_{n,t} − e_ŷ)`, `ŷ ~ p_{n,t}`
    /// drawn independently by inverse CDF against a uniform from `rng` (uploaded; no read).
    /// Its outer product's expectation is the loss Hessian (the positions' draws are
    /// independent and each has mean zero, so no cross-position term survives).
    pub(crate) fn sampled_column(&self, f: &Tensor<2>, rng: &SplitMix) -> Tensor<2> {
        let [batch, positions] = self.positions();
        let classes = self.classes;
        if classes == 0 {
            return f.zeros_like();
        }
        let options = TensorCreationOptions::new(f.device()).with_dtype(f.dtype());
        let u: Vec<f64> = (0..batch * positions).map(|_| rng.uniform()).collect();
        let u = Tensor::<3>::from_data(TensorData::new(u, [batch, positions, 1]), options)
            .expand([batch, positions, classes]);
        let p = softmax(self.classes_last(f.clone()), 2);
        let drawn = drawn_classes(p.clone(), u);
        let w = self
            .weights_as(f.dtype())
            .sqrt()
            .reshape([batch, positions, 1]);
        self.flattened((p - drawn) * w)
    }
}
