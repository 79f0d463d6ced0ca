//! What the kernels' tests share: the device and a reproducible stream of values.

use burn::tensor::{Device, DeviceKind};

/// The wgpu device (lavapipe where there is no GPU).
pub fn device() -> Device {
    Device::wgpu(DeviceKind::DefaultDevice)
}

/// A reproducible stream of floats in `[-scale, scale)`.
pub fn floats(seed: u64, n: usize, scale: f64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0 * scale) as f32
        })
        .collect()
}
