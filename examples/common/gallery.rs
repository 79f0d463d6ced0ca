//! A gallery of real training runs, each made sick in one way: a small teacher–student
//! classification problem (a fixed random tanh teacher labels Gaussian inputs into 4 classes)
//! learned by an MLP student with plain SGD, watched by a Cockpit with `economy` at every step
//! plus HessMaxEV every 8th step and the learning rate logged every epoch — the instruments an
//! expert reads the dashboard from. Shared by `examples/pathologies.rs` and the diagnose tests.

use burn::module::{Module, Param};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::activation::{log_softmax, relu, sigmoid};
use burn::tensor::{Device, Tensor, TensorData};
use burn_cockpit::curvature::FiniteDifferenceHvp;
use burn_cockpit::persample::{Linear, Recorder};
use burn_cockpit::quantity::{EigenMethod, HessMaxEV};
use burn_cockpit::{
    Cockpit, Configuration, EpochLog, OptimizerInfo, Output, QuantityError, Schedule, StepInfo,
};

/// Input features.
const INPUTS: usize = 8;
/// Classes.
pub const CLASSES: usize = 4;
/// Training samples (one epoch).
const SAMPLES: usize = 512;

/// One way a run can go wrong (or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pathology {
    /// lr 0.1, batch 32, standardised inputs, default-scale initialisation.
    Healthy,
    /// lr 8: steps jump across the valley and the loss blows up.
    LearningRateTooLarge,
    /// lr 1e-4: steps too short to make progress.
    LearningRateTooSmall,
    /// The second hidden layer's bias starts at −20: every unit is dead from step 0.
    DeadRelus,
    /// Eight sigmoid layers: the gradient vanishes on its way down (the Cockpit paper's case).
    DeepSigmoid,
    /// Inputs left on a 0–255 pixel scale instead of standardised.
    UnscaledInputs,
    /// Inputs on a 0–255 pixel scale, a first hidden layer of 8 units and lr 0.5: the first step
    /// pushes every first-layer unit below zero on every (positive) input, and the first layer
    /// has no gradient from step 1 on.
    UnscaledInputsDeadLayer,
    /// Batches of two samples.
    BatchOfTwo,
    /// Every weight initialised 30× too large.
    LargeInitialisation,
}

impl Pathology {
    /// Every run of the gallery.
    pub const ALL: [Pathology; 9] = [
        Self::Healthy,
        Self::LearningRateTooLarge,
        Self::LearningRateTooSmall,
        Self::DeadRelus,
        Self::DeepSigmoid,
        Self::UnscaledInputs,
        Self::UnscaledInputsDeadLayer,
        Self::BatchOfTwo,
        Self::LargeInitialisation,
    ];

    /// A file-name friendly name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::LearningRateTooLarge => "lr-too-large",
            Self::LearningRateTooSmall => "lr-too-small",
            Self::DeadRelus => "dead-relus",
            Self::DeepSigmoid => "deep-sigmoid",
            Self::UnscaledInputs => "unscaled-inputs",
            Self::UnscaledInputsDeadLayer => "unscaled-inputs-dead-layer",
            Self::BatchOfTwo => "batch-of-two",
            Self::LargeInitialisation => "large-init",
        }
    }

    fn learning_rate(self) -> f64 {
        match self {
            Self::LearningRateTooLarge => 8.0,
            Self::LearningRateTooSmall => 1e-4,
            Self::DeepSigmoid | Self::UnscaledInputsDeadLayer => 0.5,
            _ => 0.1,
        }
    }

    fn batch_size(self) -> usize {
        if self == Self::BatchOfTwo { 2 } else { 32 }
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
use splitmix::Rng;

/// The student: Linear layers with ReLU (or sigmoid) between them.
#[derive(Module, Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
    #[module(skip)]
    sigmoid: bool,
}

impl Mlp {
    /// PyTorch's default initialisation (uniform ±1/√fan_in), scaled by `gain`.
    /// `bias_shift` moves one layer's initial bias (`(layer, shift)`).
    fn new(
        widths: &[usize],
        sigmoid: bool,
        gain: f64,
        bias_shift: Option<(usize, f64)>,
        rng: &mut Rng,
        device: &Device,
    ) -> Self {
        let layers = widths
            .windows(2)
            .enumerate()
            .map(|(l, w)| {
                let bound = gain / (w[0] as f64).sqrt();
                let shift = bias_shift
                    .filter(|(at, _)| *at == l)
                    .map_or(0.0, |(_, s)| s);
                let weight: Vec<f32> = (0..w[0] * w[1])
                    .map(|_| rng.uniform(bound) as f32)
                    .collect();
                let bias: Vec<f32> = (0..w[1])
                    .map(|_| (rng.uniform(bound) + shift) as f32)
                    .collect();
                Linear {
                    weight: Param::from_tensor(Tensor::from_data(
                        TensorData::new(weight, [w[0], w[1]]),
                        device,
                    )),
                    bias: Some(Param::from_tensor(Tensor::from_data(
                        TensorData::new(bias, [w[1]]),
                        device,
                    ))),
                }
            })
            .collect();
        Self { layers, sigmoid }
    }

    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = if self.sigmoid { sigmoid(x) } else { relu(x) };
            }
        }
        x
    }

    /// Per-sample cross-entropy `[B]` against one-hot targets.
    fn losses(&self, inputs: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
        let batch = targets.dims()[0];
        (log_softmax(self.forward(inputs), 1) * targets)
            .sum_dim(1)
            .neg()
            .reshape([batch])
    }
}

/// The data set: Gaussian inputs labelled by a fixed random tanh teacher.
fn data(rng: &mut Rng, pixel_scale: bool) -> (Vec<f32>, Vec<f32>) {
    let teacher: Vec<f64> = (0..INPUTS * 16 + 16 * CLASSES)
        .map(|_| rng.normal())
        .collect();
    let (w1, w2) = teacher.split_at(INPUTS * 16);
    let mut inputs = Vec::with_capacity(SAMPLES * INPUTS);
    let mut one_hot = vec![0f32; SAMPLES * CLASSES];
    for n in 0..SAMPLES {
        let x: Vec<f64> = (0..INPUTS).map(|_| rng.normal()).collect();
        let hidden: Vec<f64> = (0..16)
            .map(|j| {
                (0..INPUTS)
                    .map(|i| x[i] * w1[i * 16 + j])
                    .sum::<f64>()
                    .tanh()
            })
            .collect();
        let label = (0..CLASSES)
            .map(|c| {
                (0..16)
                    .map(|j| hidden[j] * w2[j * CLASSES + c])
                    .sum::<f64>()
            })
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(0, |(c, _)| c);
        one_hot[n * CLASSES + label] = 1.0;
        // Pixel scale: what an image loader hands over before normalisation.
        inputs.extend(x.iter().map(|v| {
            if pixel_scale {
                (127.5 + 40.0 * v).clamp(0.0, 255.0).round() as f32
            } else {
                *v as f32
            }
        }));
    }
    (inputs, one_hot)
}

/// Trains one run of the gallery for `steps` optimizer steps on `device`, calling `progress`
/// after each step.
///
/// # Errors
///
/// Whatever the Cockpit reports (a run that diverges gives NaN values, not errors).
pub fn train(
    pathology: Pathology,
    steps: usize,
    device: &Device,
    mut progress: impl FnMut(usize),
) -> Result<Run, Box<dyn std::error::Error>> {
    let device = device.clone().autodiff();
    let mut rng = Rng(0x00C0_FFEE);
    let (inputs, targets) = data(
        &mut rng,
        matches!(
            pathology,
            Pathology::UnscaledInputs | Pathology::UnscaledInputsDeadLayer
        ),
    );
    let (widths, sigmoid): (Vec<usize>, bool) = match pathology {
        Pathology::DeepSigmoid => (
            std::iter::once(INPUTS)
                .chain([16; 8])
                .chain([CLASSES])
                .collect(),
            true,
        ),
        // A narrow first layer: the first step leaves none of its units alive.
        Pathology::UnscaledInputsDeadLayer => (vec![INPUTS, 8, 32, CLASSES], false),
        _ => (vec![INPUTS, 8, 32, CLASSES], false),
    };
    let gain = if pathology == Pathology::LargeInitialisation {
        30.0
    } else {
        1.0
    };
    let dead = (pathology == Pathology::DeadRelus).then_some((1, -20.0));
    let mut model = Mlp::new(&widths, sigmoid, gain, dead, &mut rng, &device);
    let lr = pathology.learning_rate();
    let batch = pathology.batch_size();
    let mut optimizer = SgdConfig::new().init();
    let mut cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())?;
    cockpit.add(Box::new(
        HessMaxEV::new(Schedule::linear(8, 0)?).with_method(EigenMethod::Lanczos {
            tol: 1e-3,
            max_products: 30,
            target: burn_cockpit::curvature::Target::LargestMagnitude,
        }),
    ))?;
    let batches_per_epoch = SAMPLES / batch;
    let mut epoch_loss = Vec::new();
    for step in 0..steps {
        let start = (step % batches_per_epoch) * batch;
        let x = Tensor::<2>::from_data(
            TensorData::new(
                inputs[start * INPUTS..(start + batch) * INPUTS].to_vec(),
                [batch, INPUTS],
            ),
            &device,
        );
        let y = Tensor::<2>::from_data(
            TensorData::new(
                targets[start * CLASSES..(start + batch) * CLASSES].to_vec(),
                [batch, CLASSES],
            ),
            &device,
        );
        let recorder = cockpit.needs_per_sample(step).then(Recorder::start);
        let losses = model.losses(x.clone(), y.clone());
        let loss = losses.clone().mean();
        let grads = loss.backward();
        let factors = recorder.map(|r| r.finish(&grads)).transpose()?;
        let grads = GradientsParams::from_grads(grads, &model);
        let mut info = StepInfo::new(loss.clone().detach())
            .with_individual_losses(losses.detach())
            .with_optimizer(OptimizerInfo::sgd(lr));
        if let Some(factors) = factors {
            info = info.with_per_sample(factors);
        }
        if cockpit.needs_curvature(step) {
            info = info.with_curvature(FiniteDifferenceHvp::new(&model, move |m: &Mlp| {
                let loss = m.losses(x.clone(), y.clone()).mean();
                Ok::<_, QuantityError>(GradientsParams::from_grads(loss.backward(), m))
            }));
        }
        // A run that diverges makes some quantities fail (NaN in, NaN out): keep going, as
        // training would, with what the Cockpit stored.
        if let Err(err) = cockpit.track(step, &model, &grads, info) {
            let _ = err;
        }
        model = optimizer.step(lr, model, grads);
        epoch_loss.push(loss.into_scalar::<f64>());
        if (step + 1) % batches_per_epoch == 0 || step + 1 == steps {
            let mean = epoch_loss.iter().sum::<f64>() / epoch_loss.len() as f64;
            epoch_loss.clear();
            cockpit.log(
                step,
                &EpochLog {
                    epoch_count: (step + 1).div_ceil(batches_per_epoch),
                    train_loss: Some(mean),
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
