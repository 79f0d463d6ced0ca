//! Parameter snapshots: the model's trainable parameters (or their gradients) at one step.
//!
//! A [`Snapshot`] is taken with burn's [`ModuleVisitor`]: one [`ParamEntry`] per parameter that
//! requires a gradient, keyed by [`ParamId`] and named by its dotted module path
//! (`layers.0.weight`). Values are flattened, detached handles that stay on the device: taking a
//! snapshot copies nothing. Differences and norms are computed on the device too, and only the
//! final per-parameter numbers are read back, once ([`read_values`](crate::readback::read_values)).

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

use crate::PerSampleError;

/// One trainable parameter (or its gradient) at one step.
#[derive(Debug, Clone)]
pub struct ParamEntry {
    /// burn's identity of the parameter; stable across optimizer steps.
    pub id: ParamId,
    /// Dotted module path, e.g. `layers.0.weight`.
    pub name: String,
    /// The parameter's shape in burn's layout (a `Linear` weight is `[d_input, d_output]`).
    pub shape: Vec<usize>,
    /// The values, flattened in row-major order, detached and without autodiff, on the device.
    pub value: Tensor<1>,
}

impl ParamEntry {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The trainable parameters of a model (or their gradients) at one step, in the model's
/// visiting order.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    entries: Vec<ParamEntry>,
}

impl Snapshot {
    /// Snapshots every parameter of `model` that requires a gradient. Parameters that do not
    /// (BatchNorm running statistics, frozen layers) are left out, as Cockpit only sees
    /// `requires_grad` parameters.
    pub fn of_params<M: Module>(model: &M) -> Self {
        let mut visitor = Collector::new(None);
        model.visit(&mut visitor);
        Self {
            entries: visitor.entries,
        }
    }

    /// Snapshots the gradient of every parameter of `model` that requires one, aligned with
    /// [`Snapshot::of_params`] (same order, ids and names).
    ///
    /// # Errors
    ///
    /// [`PerSampleError::MissingGradient`] names the first parameter without a gradient.
    pub fn of_grads<M: Module>(model: &M, grads: &GradientsParams) -> Result<Self, PerSampleError> {
        let mut visitor = Collector::new(Some(grads));
        model.visit(&mut visitor);
        if let Some(name) = visitor.missing {
            return Err(PerSampleError::MissingGradient { name });
        }
        Ok(Self {
            entries: visitor.entries,
        })
    }

    /// [`Snapshot::of_grads`] of a backward pass that did not reach every parameter (one
    /// started inside the network): a parameter without a gradient gets zeros.
    pub fn of_reached_grads<M: Module>(model: &M, grads: &GradientsParams) -> Self {
        let mut visitor = Collector::new(Some(grads));
        visitor.zero_missing = true;
        model.visit(&mut visitor);
        Self {
            entries: visitor.entries,
        }
    }

    /// Builds a snapshot from entries (for tests and custom engines).
    pub fn from_entries(entries: Vec<ParamEntry>) -> Self {
        Self { entries }
    }

    /// The entries in visiting order.
    pub fn entries(&self) -> &[ParamEntry] {
        &self.entries
    }

    /// The device the values live on (the first parameter's; the default device for an empty
    /// snapshot).
    pub fn device(&self) -> Device {
        self.entries
            .first()
            .map(|e| e.value.device())
            .unwrap_or_default()
    }

    /// Number of parameters (tensors, not elements).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the snapshot holds no parameter.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total number of scalar elements.
    pub fn numel(&self) -> usize {
        self.entries.iter().map(ParamEntry::numel).sum()
    }

    /// The ids in order.
    pub fn ids(&self) -> Vec<ParamId> {
        self.entries.iter().map(|e| e.id).collect()
    }

    /// The dotted names in order.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name.clone()).collect()
    }

    /// Looks up an entry by id.
    pub fn get(&self, id: ParamId) -> Option<&ParamEntry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// Per-parameter squared L2 norms, `[P]`, on the device.
    ///
    /// # Cost
    ///
    /// On a CubeCL device (float32, feature `wgpu` or `cuda`): one launch per eight parameters and one
    /// axis reduction ([`cockpit_kernels::sums`]). Elsewhere a square, a sum and a copy per
    /// parameter.
    ///
    /// # Panics
    ///
    /// Never for a non-empty snapshot; an empty one is refused by the Cockpit before this.
    pub fn sq_norms(&self) -> Tensor<1> {
        let values: Vec<Tensor<1>> = self.entries.iter().map(|e| e.value.clone()).collect();
        if let Some(sums) = crate::reduce::kernel_sums(None, &values, &[]) {
            return sums;
        }
        Tensor::cat(values.into_iter().map(|v| v.square().sum()).collect(), 0)
    }

    /// All values in one vector `[numel]`, the parameters concatenated in visiting order (one
    /// device operation).
    pub fn flatten(&self) -> Tensor<1> {
        match self.entries.len() {
            0 => Tensor::zeros([0], &self.device()),
            _ => Tensor::cat(self.entries.iter().map(|e| e.value.clone()).collect(), 0),
        }
    }

    /// A snapshot with these parameters (ids, names, shapes) and values taken in order from
    /// `flat` (`[numel]`, as [`Snapshot::flatten`] gives it).
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if `flat` does not hold `numel` values.
    pub fn with_flat(&self, flat: Tensor<1>) -> Result<Snapshot, PerSampleError> {
        let numel = self.numel();
        if flat.dims()[0] != numel {
            return Err(PerSampleError::Shape(format!(
                "{} values for {numel} parameter elements",
                flat.dims()[0]
            )));
        }
        let mut offset = 0;
        let entries = self
            .entries
            .iter()
            .map(|e| {
                let n = e.numel();
                let value = flat.clone().narrow(0, offset, n);
                offset += n;
                ParamEntry { value, ..e.clone() }
            })
            .collect();
        Ok(Snapshot { entries })
    }

    /// Per-parameter squared L2 distances `‖self_p − other_p‖²`, `[P]`, on the device, matching
    /// parameters by [`ParamId`].
    ///
    /// # Cost
    ///
    /// As [`Snapshot::sq_norms`]: on a CubeCL device one launch per eight parameters (the
    /// difference formed in registers) and one axis reduction.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if a parameter is missing from `other` or has another shape.
    pub fn sq_distances(&self, other: &Snapshot) -> Result<Tensor<1>, PerSampleError> {
        self.scaled_sq_distances(other, 1.0)
    }

    /// Per-parameter `‖self_p − factor·other_p‖²`, `[P]`, on the device, matching parameters by
    /// [`ParamId`] (`factor·other_p` rounded to the values' type first, as
    /// `self.difference(&other.scaled(factor))` rounds it). Cost as [`Snapshot::sq_distances`].
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if a parameter is missing from `other` or has another shape.
    pub fn scaled_sq_distances(
        &self,
        other: &Snapshot,
        factor: f64,
    ) -> Result<Tensor<1>, PerSampleError> {
        let (mut values, mut references) = (Vec::new(), Vec::new());
        for entry in &self.entries {
            let Some(reference) = other.get(entry.id) else {
                return Err(PerSampleError::Shape(format!(
                    "parameter `{}` has no reference value",
                    entry.name
                )));
            };
            if reference.shape != entry.shape {
                return Err(PerSampleError::Shape(format!(
                    "parameter `{}` changed shape from {:?} to {:?}",
                    entry.name, reference.shape, entry.shape
                )));
            }
            values.push(entry.value.clone());
            references.push(reference.value.clone());
        }
        if let Some(sums) = crate::reduce::kernel_sums(Some(factor as f32), &values, &references) {
            return Ok(sums);
        }
        let parts = values
            .into_iter()
            .zip(references)
            .map(|(value, reference)| {
                let reference = if factor == 1.0 {
                    reference
                } else {
                    reference * factor
                };
                (value - reference).square().sum()
            })
            .collect();
        Ok(Tensor::cat(parts, 0))
    }
}

impl Snapshot {
    /// `factor · self`, parameter by parameter, on the device.
    pub fn scaled(&self, factor: f64) -> Snapshot {
        Snapshot {
            entries: self
                .entries
                .iter()
                .map(|entry| ParamEntry {
                    value: entry.value.clone() * factor,
                    ..entry.clone()
                })
                .collect(),
        }
    }

    /// `self − other`, parameter by parameter (matched by [`ParamId`]), on the device.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if a parameter is missing from `other` or has another shape.
    pub fn difference(&self, other: &Snapshot) -> Result<Snapshot, PerSampleError> {
        let mut entries = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            let reference = other
                .get(entry.id)
                .filter(|r| r.shape == entry.shape)
                .ok_or_else(|| {
                    PerSampleError::Shape(format!(
                        "parameter `{}` has no matching reference",
                        entry.name
                    ))
                })?;
            entries.push(ParamEntry {
                value: entry.value.clone() - reference.value.clone(),
                ..entry.clone()
            });
        }
        Ok(Snapshot { entries })
    }
}

/// The visitor behind [`Snapshot`]: tracks the module path through `enter_module` /
/// `exit_module` and collects every parameter that requires a gradient.
struct Collector<'a> {
    path: Vec<String>,
    grads: Option<&'a GradientsParams>,
    entries: Vec<ParamEntry>,
    missing: Option<String>,
    /// Whether a missing gradient is zero instead of missing.
    zero_missing: bool,
}

impl<'a> Collector<'a> {
    fn new(grads: Option<&'a GradientsParams>) -> Self {
        Self {
            path: Vec::new(),
            grads,
            entries: Vec::new(),
            missing: None,
            zero_missing: false,
        }
    }
}

impl ModuleVisitor for Collector<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let tensor = param.val();
        if !tensor.is_require_grad() {
            return;
        }
        let name = self.path.join(".");
        let shape = tensor.shape().to_vec();
        let value = match self.grads {
            None => tensor,
            Some(grads) => match grads.get::<D>(param.id) {
                Some(grad) => grad,
                None if self.zero_missing => tensor.zeros_like(),
                None => {
                    self.missing.get_or_insert(name);
                    return;
                }
            },
        };
        let value = value
            .detach()
            .without_autodiff()
            .reshape([shape.iter().product::<usize>()]);
        self.entries.push(ParamEntry {
            id: param.id,
            name,
            shape,
            value,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readback::read_values;
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;

    #[derive(Module, Debug)]
    struct Block {
        layers: Vec<Linear>,
        head: Option<Linear>,
    }

    #[derive(Module, Debug)]
    struct Nested {
        encoder: Block,
        out: Linear,
    }

    fn device() -> Device {
        Device::flex().autodiff()
    }

    #[test]
    fn names_follow_the_module_tree() {
        let device = device();
        let block = Block {
            layers: vec![
                LinearConfig::new(2, 3).init(&device),
                LinearConfig::new(3, 3).with_bias(false).init(&device),
            ],
            head: Some(LinearConfig::new(3, 1).init(&device)),
        };
        let model = Nested {
            encoder: block,
            out: LinearConfig::new(1, 1).init(&device),
        };
        let snapshot = Snapshot::of_params(&model);
        assert_eq!(
            snapshot.names(),
            vec![
                "encoder.layers.0.weight",
                "encoder.layers.0.bias",
                "encoder.layers.1.weight",
                "encoder.head.weight",
                "encoder.head.bias",
                "out.weight",
                "out.bias",
            ]
        );
        assert_eq!(snapshot.entries()[0].shape, vec![2, 3]);
        assert_eq!(snapshot.numel(), 6 + 3 + 9 + 3 + 1 + 1 + 1);
        assert_eq!(snapshot.ids(), burn::module::list_param_ids(&model));
    }

    #[test]
    fn frozen_parameters_are_left_out() {
        let device = device();
        let model = Block {
            layers: vec![LinearConfig::new(2, 2).init(&device).no_grad()],
            head: Some(LinearConfig::new(2, 1).init(&device)),
        };
        assert_eq!(
            Snapshot::of_params(&model).names(),
            vec!["head.weight", "head.bias"]
        );
    }

    #[test]
    fn norms_and_distances_of_literal_tensors() {
        let device = Device::flex();
        let entry = |id: ParamId, values: [f64; 2]| ParamEntry {
            id,
            name: "p".into(),
            shape: vec![2],
            value: Tensor::from_floats(values, &device),
        };
        let (a, b) = (ParamId::new(), ParamId::new());
        let now = Snapshot::from_entries(vec![entry(a, [3.0, 4.0]), entry(b, [1.0, 1.0])]);
        let before = Snapshot::from_entries(vec![entry(b, [1.0, 2.0]), entry(a, [0.0, 0.0])]);
        let norms = read_values(now.sq_norms()).unwrap();
        assert_eq!(norms, vec![25.0, 2.0]);
        let distances = read_values(now.sq_distances(&before).unwrap()).unwrap();
        assert_eq!(distances, vec![25.0, 1.0]);
        let other = Snapshot::from_entries(vec![entry(a, [0.0, 0.0])]);
        assert!(now.sq_distances(&other).is_err());
    }
}
