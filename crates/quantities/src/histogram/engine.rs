//! Where the histograms count.

use burn::tensor::Device;
use serde::Deserialize;

/// Where GradHist1d and GradHist2d count per-sample gradient elements.
///
/// - `Host`: elements (or the factors of rank-one gradients) are read back and counted on every
///   core. On a GPU each chunk is a synchronisation and a copy of `b·numel` values.
/// - `Device`: elements are binned on the device and only counts come back, in the step's one
///   batched read. On CubeCL devices float32 elements are counted by a kernel of our own, one
///   launch per chunk, rank-one gradients without being formed (`cockpit-kernels`).
/// - `Auto` (the default): the device on a graphics card (wgpu, cuda), the host everywhere
///   else: on CPU backends (flex, ndarray) and on wgpu over a software rasterizer (Mesa's
///   lavapipe), where host counting is still faster than the kernel (a GradHist1d step
///   1.3–1.8× faster on the benchmark MLP, measured: `BENCHMARKS.md`).
///
/// Both engines give identical counts for materialised elements. For rank-one gradients
/// `a_{n,i}·e_{n,o}` the host bins the exact product; the device bins the product rounded to
/// its float type, so in float32 a product within half a unit in the last place (2⁻²⁴
/// relative) of a bin edge may land in the neighbouring bin. In float64 both are the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HistogramEngine {
    /// Read elements back and count on the host.
    Host,
    /// Count on the device; read back only counts.
    Device,
    /// Host on CPU backends, device elsewhere.
    #[default]
    Auto,
}

impl HistogramEngine {
    /// Whether tensors on `device` are counted on the device.
    pub fn counts_on(self, device: &Device) -> bool {
        match self {
            HistogramEngine::Host => false,
            HistogramEngine::Device => true,
            HistogramEngine::Auto => crate::device::is_a_card(device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_counts_on_the_host_of_cpu_backends() {
        let device = Device::flex();
        assert!(!HistogramEngine::Auto.counts_on(&device));
        assert!(!HistogramEngine::Auto.counts_on(&device.clone().autodiff()));
        assert!(HistogramEngine::Device.counts_on(&device));
        assert!(!HistogramEngine::Host.counts_on(&device));
    }

    #[test]
    fn parses_as_written_in_configs() {
        let parse = |s: &str| serde_json::from_str::<HistogramEngine>(s).ok();
        assert_eq!(parse("\"device\""), Some(HistogramEngine::Device));
        assert_eq!(parse("\"host\""), Some(HistogramEngine::Host));
        assert_eq!(parse("\"auto\""), Some(HistogramEngine::Auto));
        assert_eq!(parse("\"gpu\""), None);
    }
}
