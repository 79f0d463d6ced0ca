//! Overhead benchmark: the cost of a tracked step against a plain training step, measured in
//! the same process on the same data (run it in release):
//!
//! ```text
//! cargo run --release --example overhead [-- --steps 200 --repeats 5 --interval 1 --only economy]
//! ```
//!
//! `--interval N` tracks every N-th step (`Schedule::linear(N, 0)`); `--only a,b` keeps the
//! named configurations.
//!
//! The setup is the one of `PERFORMANCE_ANCHOR` (the real Cockpit's numbers on a 2-core
//! machine): an MLP 784-256-128-10 with ReLU, cross-entropy, batch 128, SGD lr 0.01, random
//! inputs, every configuration tracked at every step. Prints one line per configuration as
//! `overhead <name> <ratio>` plus absolute seconds per step.

use std::time::Instant;

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Distribution, Tensor};
use burn_cockpit::persample::{Linear, Recorder};
use burn_cockpit::{
    Cockpit, Configuration, OptimizerInfo, QuantityKind, Schedule, StepInfo, backend,
};

const BATCH: usize = 128;
const LR: f64 = 0.01;

#[derive(Module, Debug)]
struct Mlp {
    layers: Vec<Linear>,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        let widths = [784, 256, 128, 10];
        Self {
            layers: widths
                .windows(2)
                .map(|w| LinearConfig::new(w[0], w[1]).init(device).into())
                .collect(),
        }
    }

    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = relu(x);
            }
        }
        x
    }
}

/// Runs `steps` training steps, tracking with `cockpit` if given; returns seconds per step.
fn run(
    device: &Device,
    steps: usize,
    mut cockpit: Option<Cockpit>,
    data: &[(Tensor<2>, Tensor<2>)],
) -> f64 {
    let mut model = Mlp::new(device);
    let mut optim = SgdConfig::new().init();
    let start = Instant::now();
    for step in 0..steps {
        let (x, y) = &data[step % data.len()];
        let recorder = cockpit
            .as_ref()
            .is_some_and(|c| c.needs_per_sample(step))
            .then(Recorder::start);
        let per_sample = (log_softmax(model.forward(x.clone()), 1) * y.clone())
            .sum_dim(1)
            .neg()
            .reshape([BATCH]);
        let loss = per_sample.clone().mean();
        let grads = loss.backward();
        let factors = recorder.map(|r| r.finish(&grads));
        let grads = GradientsParams::from_grads(grads, &model);
        if let Some(cockpit) = cockpit.as_mut() {
            let mut info = StepInfo::new(loss.detach())
                .with_individual_losses(per_sample.detach())
                .with_optimizer(OptimizerInfo::sgd(LR));
            match factors {
                Some(Ok(factors)) => info = info.with_per_sample(factors),
                Some(Err(err)) => eprintln!("recording failed: {err}"),
                None => {}
            }
            if let Err(err) = cockpit.track(step, &model, &grads, info) {
                eprintln!("tracking failed: {err}");
            }
        }
        model = optim.step(LR, model, grads);
    }
    // Wait for the device: read one parameter.
    let _ = model.layers[0].weight.val().sum().into_scalar::<f32>();
    start.elapsed().as_secs_f64() / steps as f64
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (backend_name, device) = backend::device()?;
    let device = device.autodiff();
    let steps = arg("--steps", 100);
    let repeats = arg("--repeats", 5);
    let data: Vec<(Tensor<2>, Tensor<2>)> = (0..8)
        .map(|_| {
            let x = Tensor::<2>::random([BATCH, 784], Distribution::Normal(0.0, 1.0), &device);
            let labels = Tensor::<2>::random([BATCH, 10], Distribution::Uniform(0.0, 1.0), &device);
            let y = labels.clone().equal(labels.max_dim(1)).float();
            (x, y)
        })
        .collect();
    let interval = arg("--interval", 1);
    let every = Schedule::linear(interval, 0)?;
    let only: Option<String> = std::env::args().skip_while(|a| a != "--only").nth(1);
    let mut configs: Vec<(String, Vec<QuantityKind>)> = QuantityKind::implemented()
        .filter(|k| *k != QuantityKind::Parameters)
        .map(|k| (k.name().to_string(), vec![k]))
        .collect();
    configs.push((
        "parameter_level".into(),
        vec![
            QuantityKind::Loss,
            QuantityKind::GradNorm,
            QuantityKind::Distance,
            QuantityKind::UpdateSize,
            QuantityKind::Time,
        ],
    ));
    configs.push(("economy".into(), Configuration::Economy.kinds()));
    if let Some(only) = only {
        configs.retain(|(name, _)| {
            name.split(',').any(|n| n == only) || only.split(',').any(|o| o == name)
        });
    }
    run(&device, 5, None, &data); // warm-up
    println!(
        "backend {backend_name}, MLP 784-256-128-10, batch {BATCH}, {steps} steps x {repeats} repeats, median, tracking every {interval} step(s)"
    );
    let mut plain_times = Vec::new();
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for _ in 0..repeats {
        // Interleave plain and tracked runs so drifts in machine load hit both alike.
        plain_times.push(run(&device, steps, None, &data));
        for (i, (_, kinds)) in configs.iter().enumerate() {
            let cockpit = Cockpit::from_kinds(kinds.iter().copied(), &every)?;
            results[i].push(run(&device, steps, Some(cockpit), &data));
        }
    }
    let plain = median(plain_times);
    println!(
        "plain step: {:.3} ms (parameter_level = Loss, GradNorm, Distance, UpdateSize, Time)",
        plain * 1e3
    );
    for ((name, _), times) in configs.iter().zip(results) {
        let t = median(times);
        println!(
            "overhead {name} {:.3}   ({:.3} ms/step)",
            t / plain,
            t * 1e3
        );
    }
    Ok(())
}
