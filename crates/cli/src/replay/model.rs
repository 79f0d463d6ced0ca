//! The fixture's model in burn: a stack of `Linear` layers and elementwise activations.

use burn::module::{Module, Param};
use burn::tensor::activation::{log_softmax, relu, sigmoid, tanh};
use burn::tensor::{DType, Device, Tensor, TensorCreationOptions, TensorData};
use cockpit_quantities::curvature::{Activation, MlpCurvature, MlpLayer, OutputLoss};
use cockpit_quantities::persample::Linear;

use super::fixture::{Fixture, LayerSpec, LossKind, ParamSpec};

#[derive(Debug, Clone, Copy)]
enum Op {
    Linear(usize),
    Relu,
    Sigmoid,
    Tanh,
}

/// A feed-forward net built from a fixture's `model.layers`, with instrumented Linear layers
/// (the per-sample fast path). Parameters are named `linears.<k>.weight` / `linears.<k>.bias`
/// and visited in PyTorch's order.
#[derive(Module, Debug)]
pub struct FixtureNet {
    /// The linear layers (burn layout: weight `[in, out]`).
    pub linears: Vec<Linear>,
    #[module(skip)]
    ops: Vec<Op>,
}

pub(crate) fn tensor<const D: usize>(
    data: Vec<f64>,
    shape: [usize; D],
    device: &Device,
    dtype: DType,
) -> Tensor<D> {
    Tensor::from_data(
        TensorData::new(data, shape),
        TensorCreationOptions::new(device.clone()).with_dtype(dtype),
    )
}

impl FixtureNet {
    /// Builds the net with the fixture's initial parameters (PyTorch `[out, in]` weights are
    /// transposed to burn's `[in, out]`), as tensors of `dtype` on `device`.
    pub fn new(fixture: &Fixture, params: &[ParamSpec], device: &Device, dtype: DType) -> Self {
        let mut params = params.iter();
        let mut linears = Vec::new();
        let mut ops = Vec::new();
        for layer in &fixture.model.layers {
            match *layer {
                LayerSpec::Linear { d_in, d_out, bias } => {
                    let weight = params
                        .next()
                        .map(|p| transpose(&p.data, d_out, d_in))
                        .unwrap_or_default();
                    let weight = Param::from_tensor(tensor(weight, [d_in, d_out], device, dtype));
                    let bias = bias.then(|| {
                        let data = params.next().map(|p| p.data.clone()).unwrap_or_default();
                        Param::from_tensor(tensor(data, [d_out], device, dtype))
                    });
                    ops.push(Op::Linear(linears.len()));
                    linears.push(Linear { weight, bias });
                }
                LayerSpec::Relu => ops.push(Op::Relu),
                LayerSpec::Sigmoid => ops.push(Op::Sigmoid),
                LayerSpec::Tanh => ops.push(Op::Tanh),
            }
        }
        Self { linears, ops }
    }

    /// The forward pass, `[B, in] → [B, C]`.
    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for op in &self.ops {
            x = match *op {
                Op::Linear(k) => self.linears[k].forward(x),
                Op::Relu => relu(x),
                Op::Sigmoid => sigmoid(x),
                Op::Tanh => tanh(x),
            };
        }
        x
    }
}

impl FixtureNet {
    /// The net's exact curvature diagonals on `inputs` (its Linear inputs and pre-activations,
    /// recomputed without autodiff), for the loss `kind` with `targets` (one-hot for
    /// cross-entropy). `None` when the layer stack is not Linear layers each followed by at
    /// most one activation.
    pub fn curvature(
        &self,
        inputs: Tensor<2>,
        kind: LossKind,
        targets: Tensor<2>,
        seed: u64,
    ) -> Option<MlpCurvature> {
        let mut layers: Vec<MlpLayer> = Vec::new();
        let mut x = inputs.detach();
        let mut pending: Option<MlpLayer> = None;
        for op in &self.ops {
            match *op {
                Op::Linear(k) => {
                    if let Some(layer) = pending.take() {
                        layers.push(layer);
                    }
                    let linear = &self.linears[k];
                    // Detached parameters: a forward pass through the tracked ones would leave
                    // autodiff nodes behind that no backward pass consumes.
                    let weight = linear.weight.val().detach();
                    let bias = linear.bias.as_ref().map(|b| b.val().detach());
                    let z = burn::tensor::module::linear(x.clone(), weight.clone(), bias);
                    pending = Some(MlpLayer {
                        weight_id: linear.weight.id,
                        bias_id: linear.bias.as_ref().map(|b| b.id),
                        weight,
                        input: x.clone(),
                        pre_activation: z.clone(),
                        activation: Activation::Identity,
                    });
                    x = z;
                }
                act => {
                    let layer = pending
                        .as_mut()
                        .filter(|l| l.activation == Activation::Identity)?;
                    layer.activation = match act {
                        Op::Relu => Activation::Relu,
                        Op::Sigmoid => Activation::Sigmoid,
                        _ => Activation::Tanh,
                    };
                    x = match act {
                        Op::Relu => relu(x),
                        Op::Sigmoid => sigmoid(x),
                        _ => tanh(x),
                    };
                }
            }
        }
        layers.extend(pending);
        let loss = match kind {
            LossKind::Mse => OutputLoss::Mse(targets.detach()),
            LossKind::CrossEntropy => OutputLoss::CrossEntropy(targets.detach()),
        };
        Some(MlpCurvature::new(layers, loss, seed))
    }
}

/// Per-sample losses `[B]` of the outputs `[B, C]`: the mean squared error over the outputs,
/// or the cross-entropy with `targets` given as one-hot rows.
pub fn per_sample_loss(kind: LossKind, outputs: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
    let [batch, _] = outputs.dims();
    let per_sample = match kind {
        LossKind::Mse => (outputs - targets).square().mean_dim(1),
        LossKind::CrossEntropy => (log_softmax(outputs, 1) * targets).sum_dim(1).neg(),
    };
    per_sample.reshape([batch])
}

/// Row-major `[rows, cols]` → `[cols, rows]`.
pub(crate) fn transpose(data: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(data.len());
    for c in 0..cols {
        for r in 0..rows {
            out.push(data.get(r * cols + c).copied().unwrap_or(f64::NAN));
        }
    }
    out
}
