//! Choosing the burn device from the enabled cargo features.

use burn::tensor::Device;

/// The backends this build was compiled with, in order of preference.
pub fn available() -> Vec<&'static str> {
    let mut names = Vec::new();
    if cfg!(feature = "cuda") {
        names.push("cuda");
    }
    if cfg!(feature = "wgpu") {
        names.push("wgpu");
    }
    if cfg!(feature = "ndarray") {
        names.push("ndarray");
    }
    if cfg!(feature = "flex") {
        names.push("flex");
    }
    names
}

/// Why no device could be chosen.
#[derive(Debug, thiserror::Error)]
#[error("backend `{requested}` is not compiled in; this build has: [{}] (enable it with `--features {requested}`)", available.join(", "))]
pub struct BackendError {
    /// The backend asked for.
    pub requested: String,
    /// The backends compiled in.
    pub available: Vec<&'static str>,
}

/// The device of a backend by name: `flex`, `ndarray`, `wgpu` or `cuda` (its first device).
///
/// # Errors
///
/// [`BackendError`] if that backend's feature is not enabled.
pub fn device_named(name: &str) -> Result<Device, BackendError> {
    let device = match name {
        #[cfg(feature = "flex")]
        "flex" => Some(Device::flex()),
        #[cfg(feature = "ndarray")]
        #[allow(deprecated)]
        "ndarray" => Some(Device::ndarray()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Some(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)),
        #[cfg(feature = "cuda")]
        "cuda" => Some(Device::cuda(0)),
        _ => None,
    };
    device.ok_or_else(|| BackendError {
        requested: name.to_string(),
        available: available(),
    })
}

/// The device to train on: the backend named by `BURN_COCKPIT_DEVICE` if set, otherwise the
/// first enabled of `cuda`, `wgpu`, `ndarray`, `flex` (so `--features wgpu` switches to the GPU).
/// Returns the backend's name with the device.
///
/// # Errors
///
/// [`BackendError`] if the requested backend is not compiled in, or none is.
pub fn device() -> Result<(&'static str, Device), BackendError> {
    let requested = std::env::var("BURN_COCKPIT_DEVICE").ok();
    let name = match requested.as_deref() {
        Some(name) => available()
            .into_iter()
            .find(|n| *n == name)
            .ok_or_else(|| BackendError {
                requested: name.to_string(),
                available: available(),
            })?,
        None => available().first().copied().ok_or_else(|| BackendError {
            requested: "any".into(),
            available: vec![],
        })?,
    };
    Ok((name, device_named(name)?))
}
