//! A gallery of healthy training runs, the other half of the pathology gallery (`gallery.rs`):
//! networks that learn well — fast and slowly, under SGD and Adam, from 3 to 100 classes, with
//! smooth activations, a CNN, a small language model, a network that memorises its data and a
//! regression — each watched as a burn user watches a run: `Cockpit::step` with `economy` at
//! every step, HessMaxEV every 10th step and the learning rate logged. `cockpit diagnose` must
//! flag none of them. Shared by `examples/healthy.rs` and the diagnose tests.

use burn::module::Module;
use burn::nn::{EmbeddingConfig, LinearConfig, conv::Conv2dConfig};
use burn::optim::{AdamConfig, SgdConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::curvature::Target;
use burn_cockpit::persample::{Conv2d, Elementwise, Embedding, Linear, elementwise};
use burn_cockpit::prelude::*;
use burn_cockpit::quantity::{EigenMethod, HessMaxEV};
use burn_cockpit::{Output, StepForward};

/// One healthy run of the gallery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Healthy {
    /// A GELU MLP 20 → 64 → 64 → 3 on three Gaussian blobs, Adam at lr 1e-3, batch 32: the
    /// most common first model (from chance level to a loss near zero).
    GeluAdam,
    /// The same network under SGD at lr 0.5: fast convergence.
    GeluSgdFast,
    /// A ReLU MLP on ten blobs, SGD at lr 0.1 (start ≈ ln 10).
    TenClasses,
    /// A SiLU MLP on a hundred blobs, Adam at lr 3e-3.
    HundredClasses,
    /// A tanh MLP on four overlapping blobs, SGD at lr 0.02: slow, steady progress.
    TanhSlow,
    /// A ReLU MLP on 64 examples with random labels, Adam at lr 1e-2: it memorises them.
    Memorise,
    /// A small CNN on 8×8 images (is the top-left corner brighter than average?), SGD.
    Cnn,
    /// The same CNN under Adam.
    CnnAdam,
    /// A bigram language model (embedding, then a linear read-out) on a 16-token Markov
    /// chain, per-token cross-entropy, Adam.
    LanguageModel,
    /// A tanh MLP fitting a smooth function of its inputs, mean squared error, SGD: the loss
    /// falls by orders of magnitude.
    Regression,
    /// A ReLU MLP on three blobs at batch 128, SGD with momentum.
    LargeBatchMomentum,
    /// A softplus MLP on five blobs, Adam at lr 1e-2 with batch 16: fast and noisy.
    SoftplusAdamNoisy,
}

impl Healthy {
    /// Every run of the gallery.
    pub const ALL: [Healthy; 12] = [
        Self::GeluAdam,
        Self::GeluSgdFast,
        Self::TenClasses,
        Self::HundredClasses,
        Self::TanhSlow,
        Self::Memorise,
        Self::Cnn,
        Self::CnnAdam,
        Self::LanguageModel,
        Self::Regression,
        Self::LargeBatchMomentum,
        Self::SoftplusAdamNoisy,
    ];

    /// A file-name friendly name.
    pub fn name(self) -> &'static str {
        match self {
            Self::GeluAdam => "gelu-adam",
            Self::GeluSgdFast => "gelu-sgd-fast",
            Self::TenClasses => "ten-classes",
            Self::HundredClasses => "hundred-classes",
            Self::TanhSlow => "tanh-slow",
            Self::Memorise => "memorise",
            Self::Cnn => "cnn",
            Self::CnnAdam => "cnn-adam",
            Self::LanguageModel => "language-model",
            Self::Regression => "regression",
            Self::LargeBatchMomentum => "large-batch-momentum",
            Self::SoftplusAdamNoisy => "softplus-adam-noisy",
        }
    }

    /// The classes of its cross-entropy (the vocabulary of the language model); `None` for
    /// the regression.
    pub fn classes(self) -> Option<usize> {
        match self {
            Self::GeluAdam | Self::GeluSgdFast | Self::LargeBatchMomentum => Some(3),
            Self::TenClasses | Self::Memorise => Some(10),
            Self::HundredClasses => Some(100),
            Self::TanhSlow => Some(4),
            Self::SoftplusAdamNoisy => Some(5),
            Self::Cnn | Self::CnnAdam => Some(2),
            Self::LanguageModel => Some(VOCABULARY),
            Self::Regression => None,
        }
    }
}

/// A finished run: the Cockpit's output and the model's parameter names.
pub struct Run {
    /// Everything the Cockpit tracked.
    pub output: Output,
    /// Dotted parameter names, in the order of the per-parameter lists.
    pub names: Vec<String>,
}

#[path = "splitmix.rs"]
mod splitmix;
use splitmix::{Deterministic, Rng};

/// An MLP of drop-in Linear layers with one elementwise activation between them.
#[derive(Module, Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
    #[module(skip)]
    activation: Elementwise,
}

impl Mlp {
    fn new(widths: &[usize], activation: Elementwise, device: &Device) -> Self {
        let layers = widths
            .windows(2)
            .map(|w| Linear::new(&LinearConfig::new(w[0], w[1]), device))
            .collect();
        Self { layers, activation }
    }

    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = elementwise(self.activation, x);
            }
        }
        x
    }
}

/// A convolution, ReLU and a linear read-out (the README's minimal model).
#[derive(Module, Debug)]
pub struct Cnn {
    conv: Conv2d,
    fc: Linear,
}

impl Cnn {
    fn new(device: &Device) -> Self {
        Self {
            conv: Conv2d::new(&Conv2dConfig::new([1, 4], [3, 3]), device),
            fc: Linear::new(&LinearConfig::new(4 * 6 * 6, 2), device),
        }
    }

    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let hidden = burn::tensor::activation::relu(self.conv.forward(images));
        self.fc.forward(hidden.flatten(1, 3))
    }
}

/// The language model's vocabulary.
pub const VOCABULARY: usize = 16;
/// Its sequence length.
const TOKENS: usize = 8;

/// A bigram model: token embeddings read out by a linear layer, `[B, T] → [B, T, V]`.
#[derive(Module, Debug)]
pub struct Bigram {
    embedding: Embedding,
    head: Linear,
}

impl Bigram {
    fn new(device: &Device) -> Self {
        Self {
            embedding: Embedding::new(&EmbeddingConfig::new(VOCABULARY, 16), device),
            head: Linear::new(&LinearConfig::new(16, VOCABULARY), device),
        }
    }

    fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.head.forward(self.embedding.forward(tokens))
    }
}

/// Gaussian blobs: `classes` centres in `dims` dimensions at distance ~`spread·√(2·dims)`,
/// unit noise around them.
struct Blobs {
    centres: Vec<Vec<f64>>,
    dims: usize,
}

impl Blobs {
    fn new(classes: usize, dims: usize, spread: f64, rng: &mut Rng) -> Self {
        let centres = (0..classes)
            .map(|_| (0..dims).map(|_| spread * rng.normal()).collect())
            .collect();
        Self { centres, dims }
    }

    /// A batch: inputs `[B, dims]` and labels `[B]`.
    fn batch(&self, batch: usize, rng: &mut Rng, device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
        let mut x = Vec::with_capacity(batch * self.dims);
        let mut y = Vec::with_capacity(batch);
        for _ in 0..batch {
            let c = rng.below(self.centres.len());
            x.extend(self.centres[c].iter().map(|m| (m + rng.normal()) as f32));
            y.push(c as i64);
        }
        (
            Tensor::from_data(TensorData::new(x, [batch, self.dims]), device),
            Tensor::from_data(TensorData::new(y, [batch]), device),
        )
    }
}

/// A run on Gaussian blobs: `classes` of them in `dims` dimensions (centres drawn with
/// standard deviation `spread`), an MLP of `widths` with `activation`, batches of `batch` fresh
/// samples, stepped by `opt`.
struct BlobsSetting {
    classes: usize,
    dims: usize,
    spread: f64,
    widths: &'static [usize],
    activation: Elementwise,
    batch: usize,
    opt: Opt,
}

impl Healthy {
    /// The setting of a run on blobs; `None` for the others.
    fn blobs(self) -> Option<BlobsSetting> {
        use Elementwise::{Gelu, Relu, Silu, Tanh};
        let sgd = |lr| Opt::Sgd { lr, momentum: 0.0 };
        let softplus = Elementwise::Softplus {
            beta: 1.0,
            threshold: 20.0,
        };
        let momentum = Opt::Sgd {
            lr: 0.05,
            momentum: 0.9,
        };
        #[rustfmt::skip]
        let (classes, dims, spread, widths, activation, batch, opt): (_, _, _, &'static [usize], _, _, _) = match self {
            Self::GeluAdam => (3, 20, 1.0, &[20, 64, 64, 3], Gelu, 32, Opt::Adam { lr: 1e-3 }),
            Self::GeluSgdFast => (3, 20, 1.0, &[20, 64, 64, 3], Gelu, 32, sgd(0.5)),
            Self::TenClasses => (10, 20, 1.0, &[20, 64, 10], Relu, 32, sgd(0.1)),
            Self::HundredClasses => (100, 32, 1.0, &[32, 128, 100], Silu, 64, Opt::Adam { lr: 3e-3 }),
            Self::TanhSlow => (4, 8, 0.5, &[8, 32, 4], Tanh, 32, sgd(0.02)),
            Self::LargeBatchMomentum => (3, 16, 1.0, &[16, 32, 32, 3], Relu, 128, momentum),
            Self::SoftplusAdamNoisy => (5, 16, 0.7, &[16, 48, 5], softplus, 16, Opt::Adam { lr: 1e-2 }),
            _ => return None,
        };
        Some(BlobsSetting {
            classes,
            dims,
            spread,
            widths,
            activation,
            batch,
            opt,
        })
    }
}

/// Trains a run on blobs ([`Healthy::blobs`]).
fn blobs(
    run: Healthy,
    setting: BlobsSetting,
    steps: usize,
    device: &Device,
    progress: &mut dyn FnMut(usize),
) -> Result<Run, Box<dyn std::error::Error>> {
    let mut rng = Rng(0xB10B_0000 + run as u64);
    let data = Blobs::new(setting.classes, setting.dims, setting.spread, &mut rng);
    let model = Mlp::new(setting.widths, setting.activation, device);
    let device = device.clone();
    let (batch, classes) = (setting.batch, setting.classes);
    train_loop(
        model,
        setting.opt,
        steps,
        move |_| {
            let (x, y) = data.batch(batch, &mut rng, &device);
            (
                move |m: &Mlp| m.forward(x.clone()),
                OutputLoss::classes(y, classes),
            )
        },
        progress,
    )
}

/// How the run steps its parameters.
#[derive(Clone, Copy)]
enum Opt {
    Sgd { lr: f64, momentum: f64 },
    Adam { lr: f64 },
}

/// Steps a run's training: the Cockpit, an optimizer of `opt`'s kind and the learning rate
/// logged every 25 steps; `batch(step)` gives the step's forward pass and loss.
fn train_loop<M, F>(
    model: M,
    opt: Opt,
    steps: usize,
    mut batch: impl FnMut(usize) -> (F, OutputLoss),
    mut progress: impl FnMut(usize),
) -> Result<Run, Box<dyn std::error::Error>>
where
    M: Module + Sync + 'static,
    F: StepForward<M>,
{
    // The same initial weights on every run, whatever else draws from burn's generator.
    let mut model = model.map(&mut Deterministic::new(0x1417_0000));
    let mut cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())?;
    cockpit.add(Box::new(
        HessMaxEV::new(Schedule::linear(10, 0)?).with_method(EigenMethod::Lanczos {
            tol: 1e-3,
            max_products: 20,
            target: Target::LargestMagnitude,
        }),
    ))?;
    let (info, mut optimizer, lr) = match opt {
        Opt::Sgd { lr, momentum } => {
            let momentum = (momentum > 0.0)
                .then(|| burn::optim::momentum::MomentumConfig::new().with_momentum(momentum));
            let config = SgdConfig::new().with_momentum(momentum);
            (OptimizerInfo::from_sgd(&config, lr), config.init(), lr)
        }
        Opt::Adam { lr } => {
            let config = AdamConfig::new();
            (OptimizerInfo::from_adam(&config, lr), config.init(), lr)
        }
    };
    cockpit = cockpit.with_optimizer(info);
    for step in 0..steps {
        let (forward, loss) = batch(step);
        let stepped = cockpit.step(&model, forward, loss)?;
        model = optimizer.step(lr, model, stepped.grads);
        if step % 25 == 24 || step + 1 == steps {
            cockpit.log(
                step,
                &EpochLog {
                    epoch_count: step / 25 + 1,
                    learning_rate: Some(lr),
                    ..EpochLog::default()
                },
            )?;
        }
        progress(step);
    }
    Ok(Run {
        names: cockpit
            .parameter_names()
            .map(<[String]>::to_vec)
            .unwrap_or_default(),
        output: cockpit.take_output(),
    })
}

/// Trains one healthy run for `steps` optimizer steps on `device` (an autodiff device is
/// made of it), calling `progress` after each step.
///
/// # Errors
///
/// Whatever the Cockpit reports.
pub fn train(
    run: Healthy,
    steps: usize,
    device: &Device,
    mut progress: impl FnMut(usize),
) -> Result<Run, Box<dyn std::error::Error>> {
    let device = device.clone().autodiff();
    let mut rng = Rng(0x5EED_0000 + run as u64);
    if let Some(setting) = run.blobs() {
        return blobs(run, setting, steps, &device, &mut progress);
    }
    match run {
        Healthy::Memorise => {
            // 64 examples with labels drawn at random: nothing to learn but the examples.
            let (n, dims, classes, batch) = (64, 20, 10, 32);
            let x: Vec<f32> = (0..n * dims).map(|_| rng.normal() as f32).collect();
            let y: Vec<i64> = (0..n).map(|_| rng.below(classes) as i64).collect();
            let model = Mlp::new(&[dims, 128, classes], Elementwise::Relu, &device);
            train_loop(
                model,
                Opt::Adam { lr: 1e-2 },
                steps,
                |step| {
                    let start = (step % (n / batch)) * batch;
                    let x = Tensor::<2>::from_data(
                        TensorData::new(
                            x[start * dims..(start + batch) * dims].to_vec(),
                            [batch, dims],
                        ),
                        &device,
                    );
                    let y = Tensor::<1, Int>::from_data(
                        TensorData::new(y[start..start + batch].to_vec(), [batch]),
                        &device,
                    );
                    (
                        move |m: &Mlp| m.forward(x.clone()),
                        OutputLoss::classes(y, classes),
                    )
                },
                &mut progress,
            )
        }
        Healthy::Cnn | Healthy::CnnAdam => {
            let opt = if run == Healthy::Cnn {
                Opt::Sgd {
                    lr: 0.1,
                    momentum: 0.0,
                }
            } else {
                Opt::Adam { lr: 3e-3 }
            };
            let batch = 16;
            train_loop(
                Cnn::new(&device),
                opt,
                steps,
                |_| {
                    let pixels: Vec<f32> = (0..batch * 64).map(|_| rng.normal() as f32).collect();
                    let labels: Vec<i64> = pixels
                        .chunks(64)
                        .map(|image| {
                            let corner: f32 = (0..4)
                                .flat_map(|r| (0..4).map(move |c| image[r * 8 + c]))
                                .sum();
                            i64::from(corner > 0.0)
                        })
                        .collect();
                    let images =
                        Tensor::<4>::from_data(TensorData::new(pixels, [batch, 1, 8, 8]), &device);
                    let labels =
                        Tensor::<1, Int>::from_data(TensorData::new(labels, [batch]), &device);
                    (
                        move |m: &Cnn| m.forward(images.clone()),
                        OutputLoss::classes(labels, 2),
                    )
                },
                &mut progress,
            )
        }
        Healthy::LanguageModel => {
            // A Markov chain: the next token is (3t + 1) mod V nine times in ten.
            let batch = 16;
            train_loop(
                Bigram::new(&device),
                Opt::Adam { lr: 1e-2 },
                steps,
                |_| {
                    let mut sequences = Vec::with_capacity(batch * (TOKENS + 1));
                    for _ in 0..batch {
                        let mut t = rng.below(VOCABULARY);
                        for _ in 0..=TOKENS {
                            sequences.push(t as i64);
                            t = if rng.next() < 0.9 {
                                (3 * t + 1) % VOCABULARY
                            } else {
                                rng.below(VOCABULARY)
                            };
                        }
                    }
                    let all = Tensor::<2, Int>::from_data(
                        TensorData::new(sequences, [batch, TOKENS + 1]),
                        &device,
                    );
                    let inputs = all.clone().slice([0..batch, 0..TOKENS]);
                    let targets = all.slice([0..batch, 1..TOKENS + 1]);
                    (
                        move |m: &Bigram| m.forward(inputs.clone()),
                        OutputLoss::tokens(targets, VOCABULARY),
                    )
                },
                &mut progress,
            )
        }
        // Trained on blobs above.
        Healthy::GeluAdam
        | Healthy::GeluSgdFast
        | Healthy::TenClasses
        | Healthy::HundredClasses
        | Healthy::TanhSlow
        | Healthy::LargeBatchMomentum
        | Healthy::SoftplusAdamNoisy => Err("a run on blobs".into()),
        Healthy::Regression => {
            let (batch, dims) = (32, 8);
            let teacher: Vec<f64> = (0..dims)
                .map(|_| rng.normal() / (dims as f64).sqrt())
                .collect();
            train_loop(
                Mlp::new(&[dims, 32, 1], Elementwise::Tanh, &device),
                Opt::Sgd {
                    lr: 0.1,
                    momentum: 0.0,
                },
                steps,
                |_| {
                    let x: Vec<f64> = (0..batch * dims).map(|_| rng.normal()).collect();
                    let y: Vec<f32> = x
                        .chunks(dims)
                        .map(|row| {
                            let s: f64 = row.iter().zip(&teacher).map(|(a, w)| a * w).sum();
                            s.sin() as f32
                        })
                        .collect();
                    let x = Tensor::<2>::from_data(
                        TensorData::new(
                            x.iter().map(|v| *v as f32).collect::<Vec<_>>(),
                            [batch, dims],
                        ),
                        &device,
                    );
                    let y = Tensor::<2>::from_data(TensorData::new(y, [batch, 1]), &device);
                    (move |m: &Mlp| m.forward(x.clone()), OutputLoss::mse(y))
                },
                &mut progress,
            )
        }
    }
}
