//! Helpers of the drop-ins' unit tests.

use burn::module::Module;
use burn::store::ModuleRecord;
use burn::tensor::Tensor;

use crate::Snapshot;

/// The values of a tensor, flattened, as `f32`.
pub(crate) fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    let n = t.shape().num_elements();
    t.reshape([n])
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap_or_default()
}

/// Asserts that two tensors hold the same values to 1e-5 (relative to 1 + |b|).
pub(crate) fn close<const D: usize>(a: Tensor<D>, b: Tensor<D>, what: &str) {
    let (a, b) = (values(a), values(b));
    assert_eq!(a.len(), b.len(), "{what}");
    assert!(
        a.iter()
            .zip(&b)
            .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs())),
        "{what}: {a:?} vs {b:?}"
    );
}

/// A module's record, through the bytes of a saved record.
pub(crate) fn saved<M: Module>(module: M) -> ModuleRecord {
    let bytes = module
        .into_record()
        .into_bytes()
        .unwrap_or_else(|e| panic!("{e}"));
    ModuleRecord::from_bytes(bytes).unwrap_or_else(|e| panic!("{e}"))
}

/// A module's parameters: dotted names and values.
pub(crate) fn params(module: &impl Module) -> (Vec<String>, Vec<Vec<f32>>) {
    let snapshot = Snapshot::of_params(module);
    let values = snapshot
        .entries()
        .iter()
        .map(|e| values(e.value.clone()))
        .collect();
    (snapshot.names(), values)
}

/// A float tensor of `shape` from `values`, on the default device.
pub(crate) fn tensor<const D: usize>(values: &[f64], shape: [usize; D]) -> Tensor<D> {
    Tensor::from_data(
        burn::tensor::TensorData::new(values.to_vec(), shape),
        &burn::tensor::Device::default(),
    )
}

/// The values of a vector, as `f64` (empty if it cannot be read).
pub(crate) fn values64(t: Tensor<1>) -> Vec<f64> {
    crate::readback::read_values(t).unwrap_or_default()
}

/// A Linear layer `[2, 3]` (no bias) of parameter `id` with per-sample inputs `a` (two per
/// sample) and output gradients `e` (three per sample), one position each.
pub(crate) fn linear_source(id: burn::module::ParamId, a: &[f64], e: &[f64]) -> crate::Recording {
    let b = a.len() / 2;
    crate::Recording::new(
        b,
        vec![crate::factors::LayerFactors {
            weight: id,
            bias: None,
            layout: crate::factors::Layout::InOut,
            a: tensor(a, [b, 1, 2]),
            e: tensor(e, [b, 1, 3]),
        }],
    )
}
