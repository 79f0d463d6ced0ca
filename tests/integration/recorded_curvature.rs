//! `RecordedCurvature` against independent oracles on tiny models built from the drop-ins:
//! a CNN (Conv2d, ReLU, max pooling, Linear; cross-entropy), a transformer block (attention,
//! LayerNorm, Linear; MSE), an LSTM (cross-entropy) and an upsampler (grouped ConvTranspose2d,
//! Conv3d, ReLU, Linear; cross-entropy), in float64.
//!
//! - the Gauss–Newton diagonal equals `(1/B) Σ_n diag(J_nᵀ H_n J_n)` built from per-sample
//!   Jacobians, row by row from single backward passes of one output element;
//! - on the piecewise-linear CNN, `diag_h` equals the dense Hessian's diagonal, column by
//!   column from central differences of gradients;
//! - on the curved models, `diag_h` (exact GGN plus the residual's estimate) is within its
//!   stated statistical bound of the dense Hessian's diagonal, and a note says it is an
//!   estimate;
//! - `diag_ggn_mc` matches the exact GGN in expectation.

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::nn::attention::MultiHeadAttentionConfig;
use burn::nn::conv::{Conv2dConfig, Conv3dConfig, ConvTranspose2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{LayerNormConfig, LstmConfig, PaddingConfig2d};
use burn::optim::GradientsParams;
use burn::tensor::activation::relu;
use burn::tensor::{DType, Device, Tensor, TensorData};
use burn_cockpit::curvature::{
    CurvatureSource, DiagonalKind, FiniteDifferenceHvp, GgnPasses, HessianDiagonal,
    LinearityVerdicts, OutputLoss, ProbeBudget, RecordedCurvature, WIDENED_ROWS,
};
use burn_cockpit::persample::Snapshot;
use burn_cockpit::persample::{
    Conv2d, Conv3d, ConvTranspose2d, Elementwise, LayerNorm, Linear, Lstm, MhaInput,
    MultiHeadAttention, Sigmoid, elementwise,
};

use crate::common::{self, Backend, ToDType};

const BATCH: usize = 4;

#[derive(Module, Debug)]
struct Cnn {
    conv: Conv2d,
    pool: MaxPool2d,
    head: Linear,
}

impl Cnn {
    fn new(device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([1, 3], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
                .into(),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            head: LinearConfig::new(12, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = relu(self.conv.forward(x.reshape([b, 1, 4, 4])));
        let h = self.pool.forward(h);
        self.head.forward(h.reshape([b, 12]))
    }
}

#[derive(Module, Debug)]
struct Attention {
    mha: MultiHeadAttention,
    norm: LayerNorm,
    head: Linear,
}

impl Attention {
    fn new(device: &Device) -> Self {
        Self {
            mha: MultiHeadAttention::new(
                &MultiHeadAttentionConfig::new(4, 2).with_dropout(0.0),
                device,
            ),
            norm: LayerNorm::new(&LayerNormConfig::new(4), device),
            head: LinearConfig::new(4, 2).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let x = x.reshape([b, 3, 4]);
        let h = x.clone() + self.mha.forward(MhaInput::self_attn(x)).context;
        let h = self.norm.forward(h).mean_dim(1).reshape([b, 4]);
        self.head.forward(h)
    }
}

#[derive(Module, Debug)]
struct Recurrent {
    lstm: Lstm,
    head: Linear,
}

impl Recurrent {
    fn new(device: &Device) -> Self {
        Self {
            lstm: Lstm::new(&LstmConfig::new(2, 3, true), device),
            head: LinearConfig::new(3, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let (h, _) = self.lstm.forward(x.reshape([b, 3, 2]), None);
        self.head.forward(h.mean_dim(1).reshape([b, 3]))
    }
}

/// The transposed convolution and the 3-d convolution (issue 25's tap kinds): `[B, 8]` as
/// `[B, 2, 2, 2]`, ConvTranspose2d with two groups up to `[2, 4, 4]`, ReLU, that as a volume
/// `[2, 1, 4, 4]` through Conv3d to `[2, 1, 3, 3]`, ReLU, Linear head. Piecewise linear.
#[derive(Module, Debug)]
struct Upsampler {
    up: ConvTranspose2d,
    volume: Conv3d,
    head: Linear,
}

impl Upsampler {
    fn new(device: &Device) -> Self {
        Self {
            up: ConvTranspose2d::new(
                &ConvTranspose2dConfig::new([2, 2], [2, 2])
                    .with_stride([2, 2])
                    .with_groups(2),
                device,
            ),
            volume: Conv3d::new(&Conv3dConfig::new([2, 2], [1, 2, 2]), device),
            head: LinearConfig::new(18, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = relu(self.up.forward(x.reshape([b, 2, 2, 2])));
        let h = relu(self.volume.forward(h.reshape([b, 2, 1, 4, 4])));
        self.head.forward(h.reshape([b, 18]))
    }
}

/// The CNN with a sigmoid called as a function where the ReLU was: curved between its
/// drop-ins, which nothing recorded can see.
#[derive(Module, Debug)]
struct SigmoidCnn {
    inner: Cnn,
}

impl SigmoidCnn {
    fn new(device: &Device) -> Self {
        Self {
            inner: Cnn::new(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = burn::tensor::activation::sigmoid(self.inner.conv.forward(x.reshape([b, 1, 4, 4])));
        let h = self.inner.pool.forward(h);
        self.inner.head.forward(h.reshape([b, 12]))
    }
}

/// The CNN with the sigmoid drop-in where the ReLU was: curved, and recorded.
#[derive(Module, Debug)]
struct SigmoidDropInCnn {
    inner: Cnn,
    activation: Sigmoid,
}

impl SigmoidDropInCnn {
    fn new(device: &Device) -> Self {
        Self {
            inner: Cnn::new(device),
            activation: burn::nn::Sigmoid::new().into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let b = x.dims()[0];
        let h = self
            .activation
            .forward(self.inner.conv.forward(x.reshape([b, 1, 4, 4])));
        let h = self.inner.pool.forward(h);
        self.inner.head.forward(h.reshape([b, 12]))
    }
}

/// An MLP with tanh (the function form) and sigmoid (the drop-in) between its Linear layers,
/// and MSE.
#[derive(Module, Debug)]
struct SmoothMlp {
    first: Linear,
    second: Linear,
    sigmoid: Sigmoid,
    head: Linear,
}

impl SmoothMlp {
    fn new(device: &Device) -> Self {
        Self {
            first: LinearConfig::new(6, 5).init(device).into(),
            second: LinearConfig::new(5, 4).init(device).into(),
            sigmoid: Sigmoid,
            head: LinearConfig::new(4, 3).init(device).into(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let h = elementwise(Elementwise::Tanh, self.first.forward(x));
        let h = self.sigmoid.forward(self.second.forward(h));
        self.head.forward(h)
    }
}

/// A tiny model, its batch and loss.
trait Tiny: Module + Sync + 'static {
    const FEATURES: usize;
    const OUTPUTS: usize;
    const CROSS_ENTROPY: bool;
    fn new(device: &Device) -> Self;
    fn forward(&self, x: Tensor<2>) -> Tensor<2>;
}

macro_rules! tiny {
    ($ty:ty, $features:expr, $outputs:expr, $ce:expr) => {
        impl Tiny for $ty {
            const FEATURES: usize = $features;
            const OUTPUTS: usize = $outputs;
            const CROSS_ENTROPY: bool = $ce;
            fn new(device: &Device) -> Self {
                <$ty>::new(device)
            }
            fn forward(&self, x: Tensor<2>) -> Tensor<2> {
                <$ty>::forward(self, x)
            }
        }
    };
}

tiny!(Cnn, 16, 3, true);
tiny!(SigmoidCnn, 16, 3, true);
tiny!(SigmoidDropInCnn, 16, 3, true);
tiny!(SmoothMlp, 6, 3, false);
tiny!(Attention, 12, 2, false);
tiny!(Recurrent, 6, 3, true);
tiny!(Upsampler, 8, 3, true);

/// The model in the backend's float type on its autodiff device, a batch and targets.
struct Setup<M> {
    batch: usize,
    model: M,
    x: Tensor<2>,
    y: Tensor<2>,
}

fn setup<M: Tiny>(backend: &Backend) -> Setup<M> {
    setup_with_batch(backend, BATCH)
}

/// [`setup`] with a batch of `batch` samples.
fn setup_with_batch<M: Tiny>(backend: &Backend, batch: usize) -> Setup<M> {
    let device = backend.device.clone().autodiff();
    let model = M::new(&device).map(&mut ToDType(backend.dtype));
    let x: Vec<f64> = (0..batch * M::FEATURES)
        .map(|i| ((i * 37 + 5) % 23) as f64 / 11.5 - 1.0)
        .collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [batch, M::FEATURES]), &device)
        .cast(backend.dtype);
    let y: Vec<f64> = (0..batch * M::OUTPUTS)
        .map(|i| {
            let (n, c) = (i / M::OUTPUTS, i % M::OUTPUTS);
            if M::CROSS_ENTROPY {
                f64::from(u8::from((n + 1) % M::OUTPUTS == c))
            } else {
                ((i * 13 + 3) % 7) as f64 / 3.5 - 1.0
            }
        })
        .collect();
    let y = Tensor::<2>::from_data(TensorData::new(y, [batch, M::OUTPUTS]), &device)
        .cast(backend.dtype);
    Setup { batch, model, x, y }
}

fn loss_of<M: Tiny>(f: Tensor<2>, y: Tensor<2>) -> Tensor<1> {
    if M::CROSS_ENTROPY {
        // The float64 reciprocal: burn's backward of `div_scalar` rounds it to float32.
        let b = f.dims()[0] as f64;
        (burn::tensor::activation::log_softmax(f, 1) * y)
            .sum()
            .mul_scalar(-b.recip())
    } else {
        (f - y).square().mean()
    }
}

fn source<M: Tiny>(s: &Setup<M>, seed: u64) -> RecordedCurvature<M> {
    let x = s.x.clone();
    let loss = if M::CROSS_ENTROPY {
        OutputLoss::CrossEntropy(s.y.clone())
    } else {
        OutputLoss::Mse(s.y.clone())
    };
    RecordedCurvature::new(&s.model, move |m: &M| m.forward(x.clone()), loss, seed)
}

fn host(t: Tensor<1>) -> Vec<f64> {
    t.cast(DType::F64).into_data().try_to_vec::<f64>().unwrap()
}

fn flat(diagonal: Vec<Tensor<1>>) -> Vec<f64> {
    diagonal.into_iter().flat_map(host).collect()
}

/// The gradient of `scalar` with respect to every parameter, flattened in snapshot order.
fn gradient<M: Tiny>(model: &M, scalar: Tensor<1>) -> Vec<f64> {
    let grads = GradientsParams::from_grads(scalar.backward(), model);
    host(Snapshot::of_grads(model, &grads).unwrap().flatten())
}

/// The loss Hessian with respect to sample `n`'s output, `[C, C]` row-major.
fn output_hessian<M: Tiny>(f: &[f64], n: usize) -> Vec<f64> {
    let c = M::OUTPUTS;
    let mut h = vec![0.0; c * c];
    if M::CROSS_ENTROPY {
        let row = &f[n * c..(n + 1) * c];
        let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = row.iter().map(|v| (v - max).exp()).sum();
        let p: Vec<f64> = row.iter().map(|v| (v - max).exp() / z).collect();
        for k in 0..c {
            for l in 0..c {
                h[k * c + l] = f64::from(u8::from(k == l)) * p[k] - p[k] * p[l];
            }
        }
    } else {
        for k in 0..c {
            h[k * c + k] = 2.0 / c as f64;
        }
    }
    h
}

/// The dense GGN `(1/B) Σ_n J_nᵀ H_n J_n`, `[D, D]`, from per-sample Jacobians: row `k` of
/// `J_n` is the gradient of the single output element `f_{n,k}`.
fn dense_ggn<M: Tiny>(s: &Setup<M>) -> (usize, Vec<f64>) {
    let f = host(
        s.model
            .forward(s.x.clone())
            .detach()
            .reshape([s.batch * M::OUTPUTS]),
    );
    let c = M::OUTPUTS;
    let mut ggn: Vec<f64> = Vec::new();
    let mut d = 0;
    for n in 0..s.batch {
        let rows: Vec<Vec<f64>> = (0..c)
            .map(|k| {
                let out = s.model.forward(s.x.clone());
                gradient(&s.model, out.slice([n..n + 1, k..k + 1]).sum())
            })
            .collect();
        d = rows[0].len();
        if ggn.is_empty() {
            ggn = vec![0.0; d * d];
        }
        let h = output_hessian::<M>(&f, n);
        for k in 0..c {
            for l in 0..c {
                let w = h[k * c + l] / s.batch as f64;
                if w == 0.0 {
                    continue;
                }
                for i in 0..d {
                    let a = w * rows[k][i];
                    if a == 0.0 {
                        continue;
                    }
                    for j in 0..d {
                        ggn[i * d + j] += a * rows[l][j];
                    }
                }
            }
        }
    }
    (d, ggn)
}

/// The dense Hessian of the mean loss, column by column: `H e_i` from central differences of
/// float64 gradients.
fn dense_hessian<M: Tiny>(s: &Setup<M>) -> (usize, Vec<f64>) {
    let (x, y) = (s.x.clone(), s.y.clone());
    let products = FiniteDifferenceHvp::new(&s.model, move |m: &M| {
        let loss = loss_of::<M>(m.forward(x.clone()), y.clone());
        Ok(GradientsParams::from_grads(loss.backward(), m))
    });
    let params = Snapshot::of_params(&s.model);
    let d = params.numel();
    let mut hessian = vec![0.0; d * d];
    for j in 0..d {
        let mut unit = vec![0.0; d];
        unit[j] = 1.0;
        let options = (&params.device(), DType::F64);
        let v = params
            .with_flat(Tensor::<1>::from_data(TensorData::new(unit, [d]), options))
            .unwrap();
        let column = host(products.hvp(&params, &v).unwrap().flatten());
        for i in 0..d {
            hessian[i * d + j] = column[i];
        }
    }
    (d, hessian)
}

fn diag(d: usize, dense: &[f64]) -> Vec<f64> {
    (0..d).map(|i| dense[i * d + i]).collect()
}

/// `diag_ggn_exact` of `M` at a batch of `batch` samples, and the Jacobian oracle's diagonal.
fn ggn_exact_and_oracle<M: Tiny>(backend: &Backend, batch: usize) -> (Vec<f64>, Vec<f64>) {
    let s = setup_with_batch::<M>(backend, batch);
    let params = Snapshot::of_params(&s.model);
    let ours = flat(
        source(&s, 1)
            .diagonal(&params, DiagonalKind::GgnExact)
            .unwrap(),
    );
    let (d, ggn) = dense_ggn(&s);
    (ours, diag(d, &ggn))
}

fn ggn_exact_equals_jacobian_oracle<M: Tiny>(backend: &Backend) {
    let (ours, oracle) = ggn_exact_and_oracle::<M>(backend, BATCH);
    // float64: rounding only; float32 (wgpu): the oracle is float32 too.
    let rel = if backend.dtype == DType::F64 {
        1e-10
    } else {
        1e-4
    };
    common::assert_max_close(
        &format!("{} diag_ggn_exact", std::any::type_name::<M>()),
        &ours,
        &oracle,
        rel,
    );
}

fn cnn_ggn_exact(backend: &Backend) {
    ggn_exact_equals_jacobian_oracle::<Cnn>(backend);
}

fn attention_ggn_exact(backend: &Backend) {
    ggn_exact_equals_jacobian_oracle::<Attention>(backend);
}

fn lstm_ggn_exact(backend: &Backend) {
    ggn_exact_equals_jacobian_oracle::<Recurrent>(backend);
}

fn upsampler_ggn_exact(backend: &Backend) {
    ggn_exact_equals_jacobian_oracle::<Upsampler>(backend);
}

/// The exact GGN's `C` recorded passes run as one pass over the batch repeated `C` times
/// (`GgnPasses::Widened`) give the same diagonal as `C` separate passes, on every model and
/// backend (float64: to rounding; float32: to its precision).
fn widened_ggn_equals_separate_passes(backend: &Backend) {
    fn compare<M: Tiny>(backend: &Backend) {
        let s = setup::<M>(backend);
        let params = Snapshot::of_params(&s.model);
        let x = s.x.clone();
        // `rows`: the most rows a widened pass holds (two copies: several passes, the last
        // with fewer copies where the outputs are odd).
        let ggn = |passes: GgnPasses, rows: usize| {
            let x = x.clone();
            flat(
                source(&s, 1)
                    .with_widened_output(move |m: &M, copies| {
                        m.forward(x.clone().repeat_dim(0, copies))
                    })
                    .with_ggn_passes(passes)
                    .with_widened_rows(rows)
                    .diagonal(&params, DiagonalKind::GgnExact)
                    .unwrap(),
            )
        };
        let rel = if backend.dtype == DType::F64 {
            1e-12
        } else {
            1e-5
        };
        let separate = ggn(GgnPasses::Separate, WIDENED_ROWS);
        for rows in [WIDENED_ROWS, 2 * BATCH] {
            common::assert_max_close(
                &format!(
                    "{} widened diag_ggn_exact, {rows} rows a pass",
                    std::any::type_name::<M>()
                ),
                &ggn(GgnPasses::Widened, rows),
                &separate,
                rel,
            );
        }
    }
    compare::<Cnn>(backend);
    compare::<Attention>(backend);
    compare::<Recurrent>(backend);
    compare::<Upsampler>(backend);
    // A widened output that does not repeat the batch is a typed error, not a wrong diagonal.
    let s = setup::<Cnn>(backend);
    let params = Snapshot::of_params(&s.model);
    let x = s.x.clone();
    let err = source(&s, 1)
        .with_widened_output(move |m: &Cnn, _copies| m.forward(x.clone()))
        .with_ggn_passes(GgnPasses::Widened)
        .diagonal(&params, DiagonalKind::GgnExact)
        .unwrap_err();
    assert!(
        matches!(err, burn_cockpit::QuantityError::Shape(ref m) if m.contains("repeated")),
        "{err}"
    );
}

/// Batch sizes that are not powers of two: the pseudo-losses' `1/B` must be exact in their
/// backward too (burn's `div_scalar` backward rounds `1/B` to float32: `(6·f32(1/6))² − 1`
/// is 6e-8), so float64 diagonals equal the oracle to 1e-12 at B 5, 6 and 7; the attention
/// block's head size is 2, whose square root is not a power of two either.
#[test]
fn exact_diagonals_at_odd_batch_sizes() {
    let flex = common::flex();
    for batch in [5, 6, 7] {
        for (what, (ours, oracle)) in [
            ("cnn", ggn_exact_and_oracle::<Cnn>(&flex, batch)),
            ("attention", ggn_exact_and_oracle::<Attention>(&flex, batch)),
            ("lstm", ggn_exact_and_oracle::<Recurrent>(&flex, batch)),
        ] {
            common::assert_max_close(
                &format!("{what} diag_ggn_exact at B {batch}"),
                &ours,
                &oracle,
                1e-12,
            );
        }
    }
}

on_every_backend!(
    activation_diag_h_agrees_with_float64,
    widened_ggn_equals_separate_passes,
    cnn_ggn_exact,
    attention_ggn_exact,
    lstm_ggn_exact,
    upsampler_ggn_exact,
);

/// Transposed and 3-d convolutions with ReLU are piecewise linear: declared so, `diag_h` is
/// the GGN diagonal and equals the dense Hessian's diagonal, for a draw of weights where every
/// parameter has curvature on this batch (burn's initialisation is random; a draw where a ReLU
/// layer is dead for every sample, which happens now and then, compares zeros with zeros
/// there and is drawn again).
#[test]
fn piecewise_linear_upsampler_diag_h_equals_dense_hessian() {
    for _draw in 0..20 {
        let s = setup::<Upsampler>(&common::flex());
        let params = Snapshot::of_params(&s.model);
        let (d, hessian) = dense_hessian(&s);
        let oracle = diag(d, &hessian);
        let mut offset = 0;
        let mut alive = true;
        for entry in params.entries() {
            let part = &oracle[offset..offset + entry.numel()];
            alive &= part.iter().any(|v| v.abs() > 1e-12);
            offset += entry.numel();
        }
        if !alive {
            continue;
        }
        let source = source(&s, 1).piecewise_linear();
        let ours = flat(source.diagonal(&params, DiagonalKind::Hessian).unwrap());
        common::assert_max_close("upsampler diag_h", &ours, &oracle, 1e-8);
        assert!(source.notes().is_empty(), "{:?}", source.notes());
        return;
    }
    panic!("20 draws of the upsampler each had a parameter without curvature on this batch");
}

/// ReLU, max pooling and Linear/Conv layers: declared piecewise linear, `diag_h` is the GGN
/// diagonal and equals the dense Hessian's diagonal; no note (nothing estimated).
#[test]
fn piecewise_linear_cnn_diag_h_equals_dense_hessian() {
    let s = setup::<Cnn>(&common::flex());
    let params = Snapshot::of_params(&s.model);
    let source = source(&s, 1).piecewise_linear();
    let ours = flat(source.diagonal(&params, DiagonalKind::Hessian).unwrap());
    let (d, hessian) = dense_hessian(&s);
    common::assert_max_close("cnn diag_h", &ours, &diag(d, &hessian), 1e-8);
    assert!(source.notes().is_empty(), "{:?}", source.notes());
    // Not declared: the exact GGN plus an estimated residual, said to be an estimate.
    let undeclared = self::source(&s, 1);
    undeclared.diagonal(&params, DiagonalKind::Hessian).unwrap();
    assert!(
        undeclared.notes().iter().any(|n| n.contains("estimate")),
        "{:?}",
        undeclared.notes()
    );
}

/// Sigmoid and tanh through the activation drop-ins (and the function form): declared
/// piecewise linear between the drop-ins, `diag_h` is the exact GGN diagonal plus the
/// activations' residual computed unit by unit, and equals the dense Hessian's diagonal
/// (central differences of float64 gradients, Richardson-extrapolated) on a CNN and an MLP;
/// the declaration's check passes, and nothing is labelled an estimate. At B 5, a batch size
/// that is not a power of two.
#[test]
fn curved_activation_drop_ins_give_the_exact_hessian_diagonal() {
    let flex = common::flex();
    for (what, ours, oracle, notes) in [
        exact_with_activations::<SigmoidDropInCnn>(&flex, "sigmoid cnn"),
        exact_with_activations::<SmoothMlp>(&flex, "tanh/sigmoid mlp"),
    ] {
        common::assert_max_close(&format!("{what} diag_h"), &ours, &oracle, 1e-10);
        assert!(notes.is_empty(), "{what}: {notes:?}");
    }
    // Beyond its budget of passes (96 here: 48 sigmoid units), the residual is estimated,
    // and the note says so and why.
    let s = setup_with_batch::<SigmoidDropInCnn>(&flex, 5);
    let params = Snapshot::of_params(&s.model);
    let over = source(&s, 7).piecewise_linear().with_activation_passes(95);
    over.diagonal(&params, DiagonalKind::Hessian).unwrap();
    assert!(
        over.notes()
            .iter()
            .any(|n| n.contains("takes 96 backward passes") && n.contains("an estimate")),
        "{:?}",
        over.notes()
    );
}

/// The activations' exact residual on every backend: `diag_h` (declared piecewise linear) of
/// the sigmoid CNN and the tanh/sigmoid MLP, with the float64 reference's weights moved to the
/// backend, equals the float64 reference's to the backend's precision.
fn activation_diag_h_agrees_with_float64(backend: &Backend) {
    fn compare<M: Tiny>(backend: &Backend) {
        let reference = setup_with_batch::<M>(&common::flex(), 5);
        let params = Snapshot::of_params(&reference.model);
        let expected = flat(
            source(&reference, 7)
                .piecewise_linear()
                .diagonal(&params, DiagonalKind::Hessian)
                .unwrap(),
        );
        let device = backend.device.clone().autodiff();
        let moved = Setup {
            batch: reference.batch,
            model: reference
                .model
                .clone()
                .map(&mut common::Moved(device.clone(), backend.dtype)),
            x: reference.x.clone().to_device(&device).cast(backend.dtype),
            y: reference.y.clone().to_device(&device).cast(backend.dtype),
        };
        let params = Snapshot::of_params(&moved.model);
        let ours = flat(
            source(&moved, 7)
                .piecewise_linear()
                .diagonal(&params, DiagonalKind::Hessian)
                .unwrap(),
        );
        let rel = if backend.dtype == DType::F64 {
            1e-12
        } else {
            1e-4
        };
        common::assert_max_close(
            &format!("{} diag_h on {}", std::any::type_name::<M>(), backend.name),
            &ours,
            &expected,
            rel,
        );
    }
    compare::<SigmoidDropInCnn>(backend);
    compare::<SmoothMlp>(backend);
}

fn exact_with_activations<M: Tiny>(
    backend: &Backend,
    what: &'static str,
) -> (&'static str, Vec<f64>, Vec<f64>, Vec<String>) {
    // A draw of weights where a step of the differences moves a max-pooling winner has no
    // smooth oracle there (the two extrapolations disagree): drawn again, as the upsampler's.
    let (s, oracle) = (0..20)
        .find_map(|_| {
            let s = setup_with_batch::<M>(backend, 5);
            dense_hessian_diagonal(&s).map(|oracle| (s, oracle))
        })
        .unwrap_or_else(|| panic!("{what}: 20 draws each crossed a kink"));
    let params = Snapshot::of_params(&s.model);
    let source = source(&s, 7).piecewise_linear();
    let ours = flat(source.diagonal(&params, DiagonalKind::Hessian).unwrap());
    let ggn = flat(source.diagonal(&params, DiagonalKind::GgnExact).unwrap());
    // The activations' part is not small: the GGN alone misses the diagonal.
    let scale = oracle.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let gap = ggn
        .iter()
        .zip(&oracle)
        .fold(0.0f64, |m, (g, h)| m.max((g - h).abs()));
    assert!(
        gap > 1e-3 * scale,
        "{what}: the GGN alone is within {gap:e}"
    );
    (what, ours, oracle, source.notes())
}

/// The dense Hessian's diagonal `e_iᵀ H e_i`, each from central differences of float64
/// gradients at steps `h/2` and `h/4`, Richardson-extrapolated (`(4 D(h/4) − D(h/2))/3`, error
/// `O(h⁴)`); `None` where the extrapolations from `(h, h/2)` and `(h/2, h/4)` disagree
/// (a kink, such as a max-pooling winner changing, inside the steps).
fn dense_hessian_diagonal<M: Tiny>(s: &Setup<M>) -> Option<Vec<f64>> {
    let params = Snapshot::of_params(&s.model);
    let d = params.numel();
    let options = (&params.device(), DType::F64);
    let theta = host(params.flatten());
    let at = |shift: &[f64]| -> Vec<f64> {
        let moved: Vec<f64> = theta.iter().zip(shift).map(|(t, v)| t + v).collect();
        let values = params
            .with_flat(Tensor::<1>::from_data(TensorData::new(moved, [d]), options))
            .unwrap();
        let model = common::with_params(&s.model, &values);
        gradient(
            &model,
            loss_of::<M>(model.forward(s.x.clone()), s.y.clone()),
        )
    };
    (0..d)
        .map(|i| {
            let difference = |h: f64| {
                let mut shift = vec![0.0; d];
                shift[i] = h;
                let plus = at(&shift)[i];
                shift[i] = -h;
                let minus = at(&shift)[i];
                (plus - minus) / (2.0 * h)
            };
            let h = 1e-3;
            let (d1, d2, d4) = (difference(h), difference(h / 2.0), difference(h / 4.0));
            let (coarse, fine) = ((4.0 * d2 - d1) / 3.0, (4.0 * d4 - d2) / 3.0);
            // Smooth within the steps: both extrapolations agree to their O(h⁴) error.
            ((coarse - fine).abs() <= 1e-8 * (1.0 + fine.abs())).then_some(fine)
        })
        .collect()
}

/// Each parameter's trace of the dense Hessian's diagonal.
fn dense_traces<M: Tiny>(s: &Setup<M>, params: &Snapshot) -> Vec<f64> {
    let (d, hessian) = dense_hessian(s);
    let truth = diag(d, &hessian);
    let mut offset = 0;
    params
        .entries()
        .iter()
        .map(|entry| {
            let trace = truth[offset..offset + entry.numel()].iter().sum::<f64>();
            offset += entry.numel();
            trace
        })
        .collect()
}

/// The standard errors an estimated `diag_h` reports are honest: over 20 seeds, each
/// parameter's estimated trace (exact GGN plus the residual's estimate, 10 probes) is within 3
/// reported standard errors of the dense Hessian's trace for at least 95 % of parameters
/// (measured: attention 232 of 240, LSTM 351 of 360: below the 99.7 % a normal error would
/// give, as ten probes give a t-distributed, heavy-tailed error).
fn standard_errors_cover_the_true_error<M: Tiny>(what: &str) {
    let s = setup::<M>(&common::flex());
    let params = Snapshot::of_params(&s.model);
    let true_traces = dense_traces(&s, &params);
    let (mut covered, mut total) = (0, 0);
    for seed in 0..20 {
        let source = source(&s, 100 + seed);
        let diagonal = source.diagonal(&params, DiagonalKind::Hessian).unwrap();
        let errors = source
            .diagonal_errors(&params, DiagonalKind::Hessian)
            .unwrap_or_else(|| panic!("{what}: an estimate without standard errors"));
        for ((estimate, error), truth) in diagonal.into_iter().zip(errors).zip(&true_traces) {
            let estimate: f64 = host(estimate).iter().sum();
            let error = host(error)[0];
            total += 1;
            // The oracle's own accuracy (central differences, ~1e-8) where an entry's residual
            // is exactly zero and so is its reported error.
            if (estimate - truth).abs() <= 3.0 * error + 1e-7 * truth.abs().max(1.0) {
                covered += 1;
            }
        }
    }
    let share = covered as f64 / total as f64;
    eprintln!("{what}: {covered} of {total} traces within 3 reported standard errors");
    assert!(
        share >= 0.95,
        "{what}: {covered} of {total} traces within 3 SE"
    );
}

#[test]
fn attention_standard_errors_are_honest() {
    standard_errors_cover_the_true_error::<Attention>("attention");
}

#[test]
fn lstm_standard_errors_are_honest() {
    standard_errors_cover_the_true_error::<Recurrent>("lstm");
}

/// With a probe budget the residual's estimate draws as many probes as each parameter's
/// trace needs for a standard error of 25 % of its magnitude (GGN included), within 200: on
/// the attention block every trace reaches it (or the budget is spent), and the errors stay
/// honest (its pilot sizes a fresh estimate, so stopping does not bias them).
#[test]
fn a_probe_budget_reaches_its_error_and_stays_honest() {
    let budget = ProbeBudget {
        pilot: 10,
        relative: 0.25,
        max_probes: 200,
    };
    let s = setup::<Attention>(&common::flex());
    let params = Snapshot::of_params(&s.model);
    let true_traces = dense_traces(&s, &params);
    let (mut covered, mut total, mut reached, mut drawn) = (0, 0, 0, Vec::new());
    for seed in 0..10 {
        let source = source(&s, 300 + seed).with_probe_budget(budget);
        let diagonal = source.diagonal(&params, DiagonalKind::Hessian).unwrap();
        let errors = source
            .diagonal_errors(&params, DiagonalKind::Hessian)
            .expect("an estimate with standard errors");
        let note = source
            .notes()
            .into_iter()
            .find(|n| n.contains("of the residual with"))
            .expect("the note says how many probes were drawn");
        assert_eq!(source.notes().len(), 1, "{:?}", source.notes());
        let probes: usize = note
            .split("residual with ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{note}"));
        assert!(
            (budget.pilot..=budget.max_probes).contains(&probes),
            "{note}"
        );
        drawn.push(probes);
        for ((estimate, error), truth) in diagonal.into_iter().zip(errors).zip(&true_traces) {
            let estimate: f64 = host(estimate).iter().sum();
            let error = host(error)[0];
            total += 1;
            if error <= budget.relative * estimate.abs() + 1e-9 {
                reached += 1;
            }
            // The pilot sizes the estimate from its own noisy spread: within half again.
            assert!(
                error <= 1.5 * budget.relative * estimate.abs() + 1e-9
                    || probes == budget.max_probes,
                "seed {seed}: {estimate} ± {error} after {probes} probes"
            );
            if (estimate - truth).abs() <= 3.0 * error + 1e-7 * truth.abs().max(1.0) {
                covered += 1;
            }
        }
    }
    eprintln!(
        "attention with a budget: probes drawn {drawn:?}; {reached} of {total} traces with an \
         error below {} of their value; {covered} of {total} within 3 reported standard errors",
        budget.relative
    );
    assert!(
        covered as f64 / total as f64 >= 0.95,
        "{covered} of {total}"
    );
}

/// The verdict of the piecewise-linear check belongs to the sources that share it, not to
/// the process: the ReLU CNN passes through its own forward, and the same parameters through
/// a forward with a sigmoid between the drop-ins are refused (a process-wide verdict kept by
/// the parameters once answered the second with the first's).
#[test]
fn the_linearity_verdict_is_the_forwards_not_the_parameters() {
    let backend = &common::flex();
    let relu = setup::<Cnn>(backend);
    let params = Snapshot::of_params(&relu.model);
    let verdicts = LinearityVerdicts::default();
    source(&relu, 5)
        .piecewise_linear()
        .with_linearity_verdicts(verdicts.clone())
        .diagonal(&params, DiagonalKind::Hessian)
        .unwrap();
    // A later step's source of the same forward reads the verdict.
    source(&relu, 6)
        .piecewise_linear()
        .with_linearity_verdicts(verdicts)
        .diagonal(&params, DiagonalKind::Hessian)
        .unwrap();
    let x = relu.x.clone();
    let sigmoid_between = move |m: &Cnn| {
        let b = x.dims()[0];
        let h = burn::tensor::activation::sigmoid(m.conv.forward(x.clone().reshape([b, 1, 4, 4])));
        m.head.forward(m.pool.forward(h).reshape([b, 12]))
    };
    let err = RecordedCurvature::new(
        &relu.model,
        sigmoid_between,
        OutputLoss::CrossEntropy(relu.y.clone()),
        5,
    )
    .piecewise_linear()
    .diagonal(&params, DiagonalKind::Hessian)
    .unwrap_err();
    assert!(
        matches!(err, burn_cockpit::QuantityError::CurvedModel { .. }),
        "{err}"
    );
}

/// A piecewise-linear declaration is checked against a float64 model: the ReLU/max-pool CNN
/// passes, the same CNN with a sigmoid called as a function between its drop-ins is refused
/// with the parameter named. A float32 model is believed, and a note says so.
#[test]
fn the_piecewise_linear_declaration_is_checked() {
    let backend = &common::flex();
    let relu = setup::<Cnn>(backend);
    let params = Snapshot::of_params(&relu.model);
    source(&relu, 5)
        .piecewise_linear()
        .diagonal(&params, DiagonalKind::Hessian)
        .unwrap();
    let curved = setup::<SigmoidCnn>(backend);
    let params = Snapshot::of_params(&curved.model);
    let err = source(&curved, 5)
        .piecewise_linear()
        .diagonal(&params, DiagonalKind::Hessian)
        .unwrap_err();
    let burn_cockpit::QuantityError::CurvedModel {
        parameter,
        relative,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert!(parameter.starts_with("inner.conv"), "{err}");
    assert!(*relative > 0.3, "{err}");
    assert!(
        err.to_string().contains("declared piecewise linear"),
        "{err}"
    );
    // Undeclared, the same model gets the GGN plus the residual's estimate, said so.
    let undeclared = source(&curved, 5);
    undeclared.diagonal(&params, DiagonalKind::Hessian).unwrap();
    assert!(undeclared.notes().iter().any(|n| n.contains("estimate")));
    // Float32: not checked, said so.
    let f32_backend = Backend {
        dtype: DType::F32,
        ..common::flex()
    };
    let curved = setup::<SigmoidCnn>(&f32_backend);
    let params = Snapshot::of_params(&curved.model);
    let believed = source(&curved, 5).piecewise_linear();
    believed.diagonal(&params, DiagonalKind::Hessian).unwrap();
    assert!(
        believed
            .notes()
            .iter()
            .any(|n| n.contains("believed, not checked")),
        "{:?}",
        believed.notes()
    );
}

/// Curved models: declared piecewise linear, the source finds the curved layers it recorded
/// and estimates the residual; with `m` probes each entry of the estimate is within
/// `6·√(Σ_{j≠i} R_ij² / m)` of the dense Hessian's diagonal (`R = H − G`, the residual the
/// probes see; Rademacher probes), and the residual's products it is built from equal
/// `(H − G) v` from the dense matrices.
fn curved_diag_h_within_the_estimate_bound<M: Tiny>(curved: &str) {
    let s = setup::<M>(&common::flex());
    let params = Snapshot::of_params(&s.model);
    let probes = 64;
    let source = source(&s, 3)
        .piecewise_linear()
        .with_fallback_probes(probes);
    let ours = flat(source.diagonal(&params, DiagonalKind::Hessian).unwrap());
    let notes = source.notes().join("\n");
    assert!(
        notes.contains(curved) && notes.contains("estimate"),
        "{notes}"
    );
    let (d, hessian) = dense_hessian(&s);
    let (_, ggn) = dense_ggn(&s);
    let mut checked_residual = false;
    for i in 0..d {
        let spread: f64 = (0..d)
            .filter(|&j| j != i)
            .map(|j| (hessian[i * d + j] - ggn[i * d + j]).powi(2))
            .sum::<f64>()
            / probes as f64;
        let bound = 6.0 * spread.sqrt() + 1e-8 * hessian[i * d + i].abs().max(1e-6);
        let deviation = (ours[i] - hessian[i * d + i]).abs();
        assert!(
            deviation <= bound,
            "entry {i}: diag_h {} vs dense {}, deviation {deviation:e} > bound {bound:e}",
            ours[i],
            hessian[i * d + i]
        );
        checked_residual |= (hessian[i * d + i] - ggn[i * d + i]).abs() > 1e-6;
    }
    assert!(checked_residual, "the model has no residual to estimate");
    // The products the estimate is built from are exact: R v = (H − G) v for random v.
    for seed in 0..3u64 {
        let v: Vec<f64> = (0..d)
            .map(|i| (((i as u64 * 7919 + seed * 104_729) % 1000) as f64 / 500.0) - 1.0)
            .collect();
        let oracle: Vec<f64> = (0..d)
            .map(|i| {
                (0..d)
                    .map(|j| (hessian[i * d + j] - ggn[i * d + j]) * v[j])
                    .sum()
            })
            .collect();
        let options = (&params.device(), DType::F64);
        let v = params
            .with_flat(Tensor::<1>::from_data(TensorData::new(v, [d]), options))
            .unwrap();
        let ours = host(source.residual_product(&params, &v).unwrap().flatten());
        common::assert_max_close(&format!("{curved}: R v"), &ours, &oracle, 1e-7);
    }
}

#[test]
fn attention_diag_h_within_the_estimate_bound() {
    curved_diag_h_within_the_estimate_bound::<Attention>("attention softmax");
}

#[test]
fn lstm_diag_h_within_the_estimate_bound() {
    curved_diag_h_within_the_estimate_bound::<Recurrent>("recurrent gates");
}

/// `diag_ggn_mc` is unbiased: the mean of `N` independent one-sample draws is within
/// `6·σ̂_i/√N` of the exact GGN diagonal in every entry (`σ̂_i` the draws' standard deviation).
#[test]
fn ggn_mc_matches_the_exact_ggn_in_expectation() {
    fn check<M: Tiny>() {
        let s = setup::<M>(&common::flex());
        let params = Snapshot::of_params(&s.model);
        let exact = flat(
            source(&s, 0)
                .diagonal(&params, DiagonalKind::GgnExact)
                .unwrap(),
        );
        let draws = 300;
        let samples: Vec<Vec<f64>> = (0..draws)
            .map(|seed| {
                flat(
                    source(&s, seed + 1)
                        .diagonal(&params, DiagonalKind::GgnMc)
                        .unwrap(),
                )
            })
            .collect();
        let n = draws as f64;
        for i in 0..exact.len() {
            let mean = samples.iter().map(|d| d[i]).sum::<f64>() / n;
            let var = samples.iter().map(|d| (d[i] - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let bound = 6.0 * (var / n).sqrt() + 1e-12;
            assert!(
                (mean - exact[i]).abs() <= bound,
                "{} entry {i}: MC mean {mean} vs exact {} (bound {bound:e})",
                std::any::type_name::<M>(),
                exact[i]
            );
        }
    }
    check::<Cnn>();
    check::<Attention>();
}

/// Probabilities only enter cross-entropy's columns through the softmax, so a model whose
/// outputs are huge still gets a finite diagonal (and `diag_h`'s notes name no curved layer
/// for the CNN).
#[test]
fn extreme_logits_give_finite_diagonals() {
    let s = setup::<Cnn>(&common::flex());
    let params = Snapshot::of_params(&s.model);
    let x = s.x.clone().mul_scalar(1e6);
    let source = RecordedCurvature::new(
        &s.model,
        move |m: &Cnn| m.forward(x.clone()),
        OutputLoss::CrossEntropy(s.y.clone()),
        1,
    )
    .with_hessian(HessianDiagonal::PiecewiseLinear);
    let diagonal = flat(source.diagonal(&params, DiagonalKind::Hessian).unwrap());
    assert!(
        diagonal.iter().all(|v| v.is_finite() && *v >= -1e-9),
        "{diagonal:?}"
    );
}
