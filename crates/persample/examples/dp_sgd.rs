//! DP-SGD's per-sample gradient clipping from the fast path, without forming a single
//! per-sample gradient ("ghost clipping"):
//!
//! 1. the step's forward and backward pass under a [`Recorder`] give every sample's gradient
//!    norm `‖g_n‖` in closed form, layer by layer ([`Request::sq_norms`]);
//! 2. with `w_n = min(1, C/‖g_n‖)` the clipped sum `Σ_n w_n g_n` is the gradient of
//!    `Σ_n w_n ℓ_n`: a second forward and backward pass, of the weighted loss;
//! 3. Gaussian noise `N(0, σ²C²)` is added, the sum divided by `B`, and SGD steps.
//!
//! The first step checks the clipped sum against per-sample gradients from single-sample
//! backward passes. (Privacy accounting is out of scope.)
//!
//! ```text
//! cargo run --release -p cockpit-persample --example dp_sgd
//! ```

use burn::module::{Module, Param};
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use cockpit_persample::{Linear, PerSampleSource, Recorder, Request, Snapshot, Statistic};

const BATCH: usize = 64;
const CLIP: f64 = 1.0;
const NOISE: f64 = 0.5;
const LR: f64 = 0.1;

#[derive(Module, Debug)]
struct Mlp {
    hidden: Linear,
    out: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(20, 32).init(device).into(),
            out: LinearConfig::new(32, 4).init(device).into(),
        }
    }

    /// Per-sample cross-entropy `[B]`.
    fn losses(&self, x: Tensor<2>, y: Tensor<1, Int>) -> Tensor<1> {
        let logits = self.out.forward(relu(self.hidden.forward(x)));
        let b = logits.dims()[0];
        log_softmax(logits, 1)
            .gather(1, y.reshape([b, 1]))
            .reshape([b])
            .neg()
    }
}

/// A batch of a linearly separable 4-class problem.
fn batch(device: &Device, seed: usize) -> (Tensor<2>, Tensor<1, Int>) {
    let x = Tensor::<2>::random([BATCH, 20], Distribution::Normal(0.0, 1.0), device);
    let labels: Vec<i64> = (0..BATCH).map(|n| ((n * 7 + seed) % 4) as i64).collect();
    let y = Tensor::<1, Int>::from_data(TensorData::new(labels.clone(), [BATCH]), device);
    let shift: Vec<f32> = labels
        .iter()
        .flat_map(|&c| (0..20).map(move |j| if j % 4 == c as usize { 1.5 } else { 0.0 }))
        .collect();
    (
        x + Tensor::from_data(TensorData::new(shift, [BATCH, 20]), device),
        y,
    )
}

/// The clipped sum `Σ_n min(1, C/‖g_n‖) g_n` and the per-sample norms, by ghost clipping.
fn clipped_sum(
    model: &Mlp,
    x: Tensor<2>,
    y: Tensor<1, Int>,
) -> Result<(GradientsParams, Vec<f64>), Box<dyn std::error::Error>> {
    let recorder = Recorder::start();
    let losses = model.losses(x.clone(), y.clone());
    let grads = losses.clone().mean().backward();
    let factors = recorder.finish(&grads)?;
    let request = Request::new().with(Statistic::SqNorm);
    let stats = factors.reduce(&Snapshot::of_params(model), request)?;
    // ‖g_n‖² summed over the parameters.
    let sq: Tensor<1> = stats
        .get(Statistic::SqNorm)
        .unwrap_or_default()
        .iter()
        .cloned()
        .reduce(|a, b| a + b)
        .ok_or("no parameter")?;
    let norms = sq.sqrt();
    let weights = norms
        .clone()
        .recip()
        .mul_scalar(CLIP)
        .clamp_max(1.0)
        .detach();
    // burn keeps no graph after a backward pass: the second one recomputes the forward pass.
    let weighted = (model.losses(x, y) * weights).sum();
    let grads = GradientsParams::from_grads(weighted.backward(), model);
    let norms = norms
        .into_data()
        .convert::<f64>()
        .try_to_vec::<f64>()
        .map_err(|e| format!("{e:?}"))?;
    Ok((grads, norms))
}

/// The same clipped sum from single-sample backward passes (the check).
fn clipped_sum_by_loops(
    model: &Mlp,
    x: Tensor<2>,
    y: Tensor<1, Int>,
) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let mut total: Option<Vec<f32>> = None;
    for n in 0..BATCH {
        let loss = model
            .losses(x.clone().slice(n..n + 1), y.clone().slice(n..n + 1))
            .sum();
        let grads = GradientsParams::from_grads(loss.backward(), model);
        let flat = flatten(model, &grads)?;
        let norm = flat.iter().map(|v| v * v).sum::<f32>().sqrt();
        let w = (CLIP as f32 / norm).min(1.0);
        let clipped: Vec<f32> = flat.iter().map(|v| v * w).collect();
        total = Some(match total {
            None => clipped,
            Some(t) => t.iter().zip(&clipped).map(|(a, b)| a + b).collect(),
        });
    }
    Ok(total.unwrap_or_default())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::default().autodiff();
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    for step in 0..200 {
        let (x, y) = batch(&device, step);
        let (clipped, norms) = clipped_sum(&model, x.clone(), y.clone())?;
        if step == 0 {
            let ghost = flatten(&model, &clipped)?;
            let looped = clipped_sum_by_loops(&model, x.clone(), y.clone())?;
            let diff = ghost
                .iter()
                .zip(&looped)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f32>()
                .sqrt();
            let scale = looped.iter().map(|b| b * b).sum::<f32>().sqrt();
            let clipped_count = norms.iter().filter(|n| **n > CLIP).count();
            println!(
                "step 0: {clipped_count} of {BATCH} samples clipped (median ‖g_n‖ {:.2}); ghost clipping vs {BATCH} single-sample passes: relative difference {:.1e}",
                median(&norms),
                diff / scale
            );
            if diff / scale > 1e-4 {
                return Err("ghost clipping disagrees with single-sample passes".into());
            }
        }
        // Noise N(0, σ²C²) on the clipped sum, then the mean.
        let noisy = add_noise(&model, clipped, &device);
        model = optim.step(LR, model, noisy);
        if step % 50 == 49 {
            let (x, y) = batch(&device, 10_000 + step);
            let loss = model.losses(x, y).mean().into_scalar::<f32>();
            println!("step {}: loss {loss:.3}", step + 1);
        }
    }
    Ok(())
}

/// `(Σ clipped + N(0, σ²C²)) / B`, parameter by parameter.
fn add_noise(model: &Mlp, grads: GradientsParams, device: &Device) -> GradientsParams {
    struct Noise<'a> {
        grads: &'a GradientsParams,
        out: GradientsParams,
        device: &'a Device,
    }
    impl burn::module::ModuleVisitor for Noise<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(g) = self.grads.get::<D>(param.id) {
                let noise = Tensor::<D>::random(
                    g.shape(),
                    Distribution::Normal(0.0, NOISE * CLIP),
                    self.device,
                );
                self.out
                    .register(param.id, (g + noise).div_scalar(BATCH as f64));
            }
        }
    }
    let mut noise = Noise {
        grads: &grads,
        out: GradientsParams::new(),
        device,
    };
    model.visit(&mut noise);
    noise.out
}

/// Every parameter's gradient in `grads`, flattened one after another.
fn flatten(model: &Mlp, grads: &GradientsParams) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let mut flat = Vec::new();
    for entry in Snapshot::of_grads(model, grads)?.entries() {
        let values = entry.value.clone().into_data().convert::<f32>();
        flat.extend(values.try_to_vec::<f32>().map_err(|e| format!("{e:?}"))?);
    }
    Ok(flat)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
