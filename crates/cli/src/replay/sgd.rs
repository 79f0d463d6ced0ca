//! `torch.optim.SGD`, exactly: `g ← g + wd·θ`; `buf ← g` at the first step, then
//! `buf ← momentum·buf + (1 − dampening)·g`; `g ← g + momentum·buf` (Nesterov) or `g ← buf`;
//! `θ ← θ − lr·g`.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::fixture::OptimizerSpec;

/// PyTorch-semantics SGD with momentum buffers keyed by [`ParamId`].
#[derive(Debug)]
pub struct TorchSgd {
    spec: OptimizerSpec,
    buffers: HashMap<ParamId, Tensor<1>>,
}

impl TorchSgd {
    /// A fresh optimizer (no momentum buffers yet).
    pub fn new(spec: OptimizerSpec) -> Self {
        Self {
            spec,
            buffers: HashMap::new(),
        }
    }

    /// Applies one step to every parameter that has a gradient.
    pub fn step<M: Module>(&mut self, model: M, grads: GradientsParams) -> M {
        let mut mapper = SgdMapper { sgd: self, grads };
        model.map(&mut mapper)
    }
}

struct SgdMapper<'a> {
    sgd: &'a mut TorchSgd,
    grads: GradientsParams,
}

impl ModuleMapper for SgdMapper<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(grad) = self.grads.remove::<D>(param.id) else {
            return param;
        };
        let (id, tensor, mapper) = param.consume();
        let shape = tensor.shape();
        let numel = shape.num_elements();
        let theta = tensor.inner().reshape([numel]);
        let spec = &self.sgd.spec;
        let mut g = grad.reshape([numel]);
        if spec.weight_decay != 0.0 {
            g = g + theta.clone().mul_scalar(spec.weight_decay);
        }
        if spec.momentum != 0.0 {
            let buf = match self.sgd.buffers.remove(&id) {
                None => g.clone(),
                Some(buf) => {
                    buf.mul_scalar(spec.momentum) + g.clone().mul_scalar(1.0 - spec.dampening)
                }
            };
            g = if spec.nesterov {
                g + buf.clone().mul_scalar(spec.momentum)
            } else {
                buf.clone()
            };
            self.sgd.buffers.insert(id, buf);
        }
        let updated = (theta - g.mul_scalar(spec.lr)).reshape(shape);
        Param::from_mapped_value(id, Tensor::from_inner(updated).require_grad(), mapper)
    }
}
