//! GateController.

use burn::module::Module;
use burn::tensor::Tensor;

use super::super::Linear;

/// `burn::nn::GateController` with per-sample statistics: `input_transform(x) +
/// hidden_transform(h)`, both per-sample [`Linear`]s.
#[derive(Module, Debug)]
pub struct GateController {
    /// `[d_input, d_output]`.
    pub input_transform: Linear,
    /// `[d_output, d_output]`.
    pub hidden_transform: Linear,
}

impl From<burn::nn::GateController> for GateController {
    fn from(gate: burn::nn::GateController) -> Self {
        Self {
            input_transform: gate.input_transform.into(),
            hidden_transform: gate.hidden_transform.into(),
        }
    }
}

impl GateController {
    /// burn's gate with these parameters.
    pub fn as_burn(&self) -> burn::nn::GateController {
        burn::nn::GateController {
            input_transform: self.input_transform.as_burn(),
            hidden_transform: self.hidden_transform.as_burn(),
        }
    }

    /// `input_transform(input) + hidden_transform(hidden)`, `[B, d_output]`.
    pub fn gate_product(&self, input: Tensor<2>, hidden: Tensor<2>) -> Tensor<2> {
        self.input_transform.forward(input) + self.hidden_transform.forward(hidden)
    }
}
