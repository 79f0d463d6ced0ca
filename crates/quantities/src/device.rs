//! What kind of device a tensor lives on, where a choice depends on it (the histogram engine,
//! the exact GGN's passes).

use burn::tensor::Device;

/// Whether `device` is a graphics card: a cubecl device that reports a physical card (a CPU
/// runtime or a software rasterizer reports none).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn is_a_card(device: &Device) -> bool {
    device
        .as_dispatch()
        .identity()
        .is_some_and(|identity| identity.physical.is_some())
}

/// Without burn's GPU backends compiled in here, every backend but the CPU ones counts as a
/// card.
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn is_a_card(device: &Device) -> bool {
    !is_cpu_backend(device)
}

/// Whether `device` belongs to one of burn's CPU backends (flex, ndarray, or LibTorch's CPU).
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn is_cpu_backend(device: &Device) -> bool {
    // burn 0.22 names the backend in the device's variant; the variants exist only under
    // burn's backend features, so the name is matched rather than the variant.
    let name = format!("{:?}", device.as_dispatch().clone().inner());
    ["Flex", "NdArray", "LibTorch(Cpu"]
        .iter()
        .any(|cpu| name.starts_with(cpu))
}

/// Whether `device` runs CubeCL kernels (wgpu, software rasterizers included, and cuda), where
/// every operation is a launch: there, fewer and larger operations win.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn launches_kernels(device: &Device) -> bool {
    device.as_dispatch().identity().is_some()
}

/// Without burn's GPU backends compiled in here, every backend but the CPU ones launches
/// kernels.
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn launches_kernels(device: &Device) -> bool {
    !is_cpu_backend(device)
}
