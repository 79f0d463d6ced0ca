//! Work that spreads over a GPU: no reduction a tracked `economy` step issues on a CubeCL
//! device has one unit walk more than `persample::reduce::STAGE` (4 096) values, on the four
//! benchmark models (the MLP 784-256-128-10, DeepOBS cifar10_3c3d, the guide CNN and the text
//! transformer of `examples/architectures.rs`) at batch sizes 32 and 128, with the histograms
//! counted on the device. burn 0.22 with autotune off reduces an axis with one unit per
//! output walking all of it (`persample::reduce`'s documentation), so the measure is each
//! reduction's values per unit, noted where it is issued (`reduce::depth_of`,
//! `Cockpit::depth`). On CPU backends nothing is noted (their reductions split over threads
//! of their own).

use burn::tensor::{Device, Tensor, TensorData};
use burn_cockpit::persample::reduce::{self, Depth, STAGE, depth_of};

/// Inputs in `[-1, 1]` of shape `dims` (a fixed pattern).
fn inputs<const D: usize>(dims: [usize; D], device: &Device) -> Tensor<D> {
    let n: usize = dims.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 37) % 23) as f32 / 11.5 - 1.0)
        .collect();
    Tensor::from_data(TensorData::new(values, dims), device)
}

/// The tracked steps of the benchmark models, on the CubeCL device CI runs (lavapipe).
#[cfg(feature = "wgpu")]
mod models {
    use burn::module::Module;
    use burn::nn::LinearConfig;
    use burn::tensor::activation::relu;
    use burn::tensor::{Device, Int, Tensor, TensorData};
    use burn_cockpit::curvature::OutputLoss;
    use burn_cockpit::histogram::HistogramEngine;
    use burn_cockpit::persample::Linear;
    use burn_cockpit::persample::reduce::{Depth, STAGE};
    use burn_cockpit::{Cockpit, Configuration, Schedule};

    use super::inputs;
    use crate::architectures::{Cifar3c3d, GuideCnn, TextClassifier};

    /// The MLP of `overhead --model mlp` with the per-sample drop-ins.
    #[derive(Module, Debug)]
    struct Mlp {
        l1: Linear,
        l2: Linear,
        l3: Linear,
    }

    impl Mlp {
        fn new(device: &Device) -> Self {
            Self {
                l1: Linear::new(&LinearConfig::new(784, 256), device),
                l2: Linear::new(&LinearConfig::new(256, 128), device),
                l3: Linear::new(&LinearConfig::new(128, 10), device),
            }
        }

        fn forward(&self, x: Tensor<2>) -> Tensor<2> {
            self.l3
                .forward(relu(self.l2.forward(relu(self.l1.forward(x)))))
        }
    }

    /// Labels `0..classes` for `batch` examples.
    fn labels(batch: usize, classes: usize, device: &Device) -> Tensor<1, Int> {
        let values: Vec<i64> = (0..batch).map(|n| ((n * 3) % classes) as i64).collect();
        Tensor::from_data(TensorData::new(values, [batch]), device)
    }

    /// The `economy` configuration at every step, histograms counted on the device.
    fn economy() -> Cockpit {
        Cockpit::from_kinds(Configuration::Economy.kinds(), &Schedule::every_step())
            .unwrap()
            .with_histogram_engine(HistogramEngine::Device)
            .with_console(false)
    }

    /// The depth of one tracked `economy` step of `model` (every quantity computed).
    fn tracked_depth<M: Module + Sync + 'static>(
        model: &M,
        forward: impl Fn(&M) -> Tensor<2> + Send + Sync + 'static,
        loss: OutputLoss,
    ) -> Depth {
        let mut cockpit = economy();
        let stepped = cockpit.step(model, forward, loss).unwrap();
        assert!(
            stepped.report.is_complete(),
            "{:?}",
            stepped.report.failure_lines()
        );
        cockpit.depth()
    }

    /// Each benchmark model's tracked step at batch `b`, by name.
    fn depths(device: &Device, b: usize) -> Vec<(&'static str, Depth)> {
        let mlp = Mlp::new(device);
        let x = inputs([b, 784], device);
        let mlp_depth = tracked_depth(
            &mlp,
            move |m: &Mlp| m.forward(x.clone()),
            OutputLoss::classes(labels(b, 10, device), 10),
        );
        let cifar = Cifar3c3d::new(device);
        let x = inputs([b, 3, 32, 32], device);
        let cifar_depth = tracked_depth(
            &cifar,
            move |m: &Cifar3c3d| m.forward(x.clone()),
            OutputLoss::classes(labels(b, 10, device), 10),
        );
        let guide = GuideCnn::new(device, 10, 512, 0.0);
        let x = inputs([b, 28, 28], device);
        let guide_depth = tracked_depth(
            &guide,
            move |m: &GuideCnn| m.forward(x.clone()),
            OutputLoss::classes(labels(b, 10, device), 10),
        );
        let (length, vocabulary) = (64, 1000);
        let text = TextClassifier::new(device, vocabulary, length, 3, 128, 2, 4, 0.0);
        let tokens: Vec<i64> = (0..b * length)
            .map(|i| 1 + ((i * 7919) % (vocabulary - 1)) as i64)
            .collect();
        let tokens = Tensor::<2, Int>::from_data(TensorData::new(tokens, [b, length]), device);
        let text_depth = tracked_depth(
            &text,
            move |m: &TextClassifier| m.forward(tokens.clone()),
            OutputLoss::classes(labels(b, 3, device), 3),
        );
        vec![
            ("mlp", mlp_depth),
            ("cifar10_3c3d", cifar_depth),
            ("guide_cnn", guide_depth),
            ("text_transformer", text_depth),
        ]
    }

    /// On the CubeCL device CI runs (lavapipe), every tracked step's reductions are noted and
    /// none walks more than [`STAGE`] values a unit.
    #[test]
    fn economy_reductions_spread_on_the_benchmark_models() {
        let device = crate::common::wgpu().device.autodiff();
        for b in [32, 128] {
            for (model, depth) in depths(&device, b) {
                eprintln!("{model}, B {b}: {depth}");
                assert!(depth.reductions > 0, "{model}, B {b}: nothing noted");
                assert!(
                    depth.deepest <= STAGE as u64,
                    "{model}, B {b}: {depth} (more than {STAGE} values a unit)"
                );
            }
        }
    }
}

/// A reduction along an axis longer than [`STAGE`] is noted in stages on a CubeCL device
/// (one unit per output would walk 3·STAGE + 5 values), and not at all on a CPU backend.
#[test]
fn a_long_axis_is_noted_in_stages() {
    let long = 3 * STAGE + 5;
    let rows = |device: &Device| inputs([2, long], device);
    let (_, on_cpu) = depth_of(|| reduce::sum_dim(rows(&Device::flex()), 1));
    assert_eq!(on_cpu, Depth::default());
    #[cfg(feature = "wgpu")]
    {
        let device = crate::common::wgpu().device;
        let (sums, depth) = depth_of(|| reduce::sum_dim(rows(&device), 1));
        assert_eq!(sums.dims(), [2, 1]);
        // Four stages of ⌈long / 4⌉ values, then the four stages' sums.
        assert_eq!(
            depth,
            Depth {
                reductions: 2,
                deepest: long.div_ceil(4) as u64
            }
        );
        // Spans nest: the outer one sees the inner one's reductions.
        let ((_, inner), outer) = depth_of(|| {
            let _ = reduce::max_nonnegative(rows(&device).abs());
            depth_of(|| reduce::sum_dim(rows(&device), 1))
        });
        assert_eq!(inner.reductions, 2);
        assert_eq!(outer.reductions, 4, "{outer}");
        assert!(outer.deepest <= STAGE as u64, "{outer}");
    }
}
