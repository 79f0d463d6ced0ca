//! The packing kernel against the parts' own values, on wgpu (lavapipe where there is no
//! GPU): one to more than two groups, parts of one value to more than a launch's cubes cover
//! in one stride, empty parts passed over.
#![cfg(feature = "wgpu")]

use burn::tensor::{DType, Device, Tensor, TensorCreationOptions, TensorData};
use cockpit_kernels::{PACK_GROUP, pack};

mod common;
use common::{device, floats};

fn tensor(values: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(
        TensorData::new(values.to_vec(), [values.len()]),
        TensorCreationOptions::new(device.clone()).with_dtype(DType::F32),
    )
}

#[test]
fn packed_groups_hold_every_part_in_order() {
    let device = device();
    let lengths = [1, 0, 7, 256, 257, 0, 3, 70_001, 5, 1, 20_000_000, 2];
    for count in [
        1,
        3,
        PACK_GROUP,
        PACK_GROUP + 1,
        lengths.len(),
        2 * PACK_GROUP + 3,
    ] {
        let parts: Vec<Vec<f32>> = (0..count)
            .map(|p| floats(p as u64 + 1, lengths[p % lengths.len()], 1.0 + p as f64))
            .collect();
        let tensors: Vec<Tensor<1>> = parts.iter().map(|v| tensor(v, &device)).collect();
        let groups = pack(&tensors).expect("the kernel runs on wgpu");
        // Groups of sixteen non-empty parts, cut before a part that would take a group past
        // 2²⁴ values.
        let mut want_groups = 0;
        let (mut in_group, mut values) = (0, 0);
        for part in parts.iter().filter(|p| !p.is_empty()) {
            if want_groups == 0 || in_group == PACK_GROUP || values + part.len() > 1 << 24 {
                want_groups += 1;
                (in_group, values) = (0, 0);
            }
            in_group += 1;
            values += part.len();
        }
        assert_eq!(groups.len(), want_groups, "{count} parts");
        let got: Vec<f32> = groups
            .into_iter()
            .flat_map(|g| g.into_data().iter::<f32>().collect::<Vec<_>>())
            .collect();
        let want: Vec<f32> = parts.concat();
        assert_eq!(got.len(), want.len(), "{count} parts");
        // Copies, so bit for bit (NaN-free values).
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{count} parts: a value moved"
        );
    }
}

#[test]
fn nothing_to_pack_is_refused() {
    let device = device();
    assert!(pack(&[]).is_none());
    assert!(pack(&[tensor(&[], &device), tensor(&[], &device)]).is_none());
}
