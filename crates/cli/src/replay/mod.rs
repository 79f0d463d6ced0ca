//! `cockpit replay`: re-runs a training run recorded from the real Cockpit, in burn, with every
//! quantity burn-cockpit computes, and returns Cockpit's output for it.

mod fixture;
mod model;
mod sgd;
mod variants;

use std::collections::BTreeMap;
use std::path::PathBuf;

use burn::optim::GradientsParams;
use burn::tensor::{DType, Device, Tensor};
use cockpit_quantities::curvature::{CurvatureSource, FiniteDifferenceHvp};
use cockpit_quantities::persample::{PerSampleError, Recorder};
use cockpit_quantities::quantity::{EigenMethod, HessMaxEV, Parameters};
use cockpit_quantities::{
    Cockpit, CockpitError, EpochLog, HostArray, OptimizerInfo, Output, Quantity, QuantityKind,
    Schedule, Snapshot, StepInfo,
};

pub use fixture::{
    ArraySpec, Fixture, LayerSpec, LossKind, ModelSpec, OptimizerSpec, ParamSpec, StepSpec,
};
pub use model::{FixtureNet, per_sample_loss};
pub use sgd::TorchSgd;

use model::tensor;

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The fixture file could not be read: unreadable, not UTF-8, or larger than the readers
    /// take ([`Reader::limit`](cockpit_quantities::log::Reader::limit)).
    #[error(transparent)]
    Input(#[from] cockpit_quantities::log::LogError),
    /// The fixture is malformed.
    #[error("malformed fixture: {0}")]
    Fixture(String),
    /// The fixture is not JSON of a fixture's shape: serde's error as the source.
    #[error(
        "malformed fixture{}: not a fixture",
        path.as_ref().map(|p| format!(" `{}`", p.display())).unwrap_or_default()
    )]
    NotAFixture {
        /// The file, where one was read.
        path: Option<std::path::PathBuf>,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// A quantity variant of the fixture cannot be built: the Cockpit's error as the source.
    #[error("malformed fixture: variant `{key}`")]
    Variant {
        /// The variant's key.
        key: String,
        /// Why it cannot be built.
        #[source]
        source: Box<cockpit_quantities::CockpitError>,
    },
    /// The replay itself failed (recording per-sample gradients, reading parameters back):
    /// what it was doing, and the engine's error as the source.
    #[error("replay failed: {what}")]
    Engine {
        /// What the replay was doing.
        what: String,
        /// The engine's error.
        #[source]
        source: PerSampleError,
    },
    /// The Cockpit refused a step.
    #[error(transparent)]
    Cockpit(#[from] CockpitError),
}

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The device to train on (autodiff is switched on).
    pub device: Device,
    /// The float type of every tensor: `F64` for exact parity with the fixtures.
    pub dtype: DType,
    /// The quantities to track at every step.
    pub quantities: Vec<QuantityKind>,
    /// A JSON-lines stream to write while replaying.
    pub stream: Option<PathBuf>,
    /// Also track the fixture's `variants` that this version computes, under the fixture's keys.
    pub variants: bool,
    /// Start HessMaxEV's power iteration from the fixture's recorded start vectors
    /// (`extras.HessMaxEV_replay.start_vector`) where present, for parity with the recorded
    /// values; otherwise from burn-cockpit's own seeded draws.
    pub recorded_start_vectors: bool,
}

impl ReplayOptions {
    /// Float64 on burn's flex CPU backend, with every quantity burn-cockpit implements.
    pub fn cpu_f64() -> Self {
        Self {
            device: Device::flex(),
            dtype: DType::F64,
            quantities: QuantityKind::ALL.into_iter().collect(),
            stream: None,
            variants: false,
            recorded_start_vectors: true,
        }
    }
}

/// The result of a replay.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// Cockpit's output, with per-parameter values in the fixture's parameter order and
    /// PyTorch shapes.
    pub output: Output,
    /// The parameters after the last step, PyTorch layout.
    pub final_params: Vec<HostArray>,
    /// Warnings the Cockpit recorded.
    pub warnings: Vec<String>,
    /// Quantities refused for this run (e.g. CABS for SGD with momentum), with the reason.
    pub refused: BTreeMap<String, String>,
    /// Variant keys of the fixture this version does not compute.
    pub skipped_variants: Vec<String>,
}

/// Replays `fixture`: builds its model, loss and SGD in burn, runs every step and tracks the
/// requested quantities at every step.
///
/// # Errors
///
/// [`ReplayError::Fixture`] for an invalid fixture, [`ReplayError::Cockpit`] if tracking fails
/// (e.g. the stream cannot be written).
pub fn replay(fixture: &Fixture, options: &ReplayOptions) -> Result<ReplayRun, ReplayError> {
    fixture.validate()?;
    let device = options.device.clone().autodiff();
    let dtype = options.dtype;
    let mut model = FixtureNet::new(fixture, &fixture.params, &device, dtype);
    let mut optimizer = TorchSgd::new(fixture.optimizer.clone());
    let mut quantities: Vec<Box<dyn Quantity>> = options
        .quantities
        .iter()
        .map(|&kind| match kind {
            // Per-parameter arrays in PyTorch's layout: FixtureNet's only 2-d parameters are
            // Linear weights, stored transposed in burn.
            QuantityKind::Parameters => Box::new(
                Parameters::new(Schedule::every_step()).with_view(|_, array| array.transposed()),
            ) as Box<dyn Quantity>,
            QuantityKind::HessMaxEV if options.recorded_start_vectors => Box::new(
                HessMaxEV::new(Schedule::every_step())
                    .with_method(EigenMethod::cockpit_power())
                    .with_start_vectors(recorded_start_vectors(fixture)),
            ),
            other => other.build(Schedule::every_step()),
        })
        .collect();
    let mut skipped_variants = Vec::new();
    if options.variants {
        let (built, skipped) = variants::build(&fixture.variants)?;
        quantities.extend(built);
        skipped_variants = skipped;
    }
    let mut cockpit = Cockpit::new(quantities)?.with_console(false);
    let mut refused = BTreeMap::new();
    if let Some(stream) = &options.stream {
        cockpit = cockpit.with_stream(stream)?;
    }
    let spec = &fixture.optimizer;
    let optimizer_info = OptimizerInfo::Sgd {
        lr: spec.lr,
        momentum: spec.momentum,
        dampening: spec.dampening,
        weight_decay: spec.weight_decay,
        nesterov: spec.nesterov,
    };
    let classes = fixture.linear_layers().last().map_or(0, |l| l.1);
    for step in &fixture.steps {
        let [batch, d_in] = [step.inputs.shape[0], step.inputs.shape[1]];
        let inputs = tensor(step.inputs.data.clone(), [batch, d_in], &device, dtype);
        let targets = match fixture.loss {
            LossKind::Mse => step.targets.data.clone(),
            LossKind::CrossEntropy => one_hot(&step.targets.data, classes),
        };
        let targets = tensor(targets, [batch, classes], &device, dtype);
        // Exact products and diagonals where the net is a chain of Linear layers and
        // activations; finite differences of gradients otherwise.
        let curvature = cockpit.needs_curvature(step.step).then(|| {
            let seed = 2001 + step.step as u64;
            match model.curvature(inputs.clone(), fixture.loss, targets.clone(), seed) {
                Some(exact) => Box::new(exact) as Box<dyn CurvatureSource>,
                None => {
                    let (loss_kind, x, y) = (fixture.loss, inputs.clone(), targets.clone());
                    Box::new(FiniteDifferenceHvp::new(&model, move |m: &FixtureNet| {
                        let loss =
                            per_sample_loss(loss_kind, m.forward(x.clone()), y.clone()).mean();
                        Ok(GradientsParams::from_grads(loss.backward(), m))
                    })) as Box<dyn CurvatureSource>
                }
            }
        });
        // Start recording only now: the curvature source's own forward passes are not the step's.
        let recorder = cockpit.needs_per_sample(step.step).then(Recorder::start);
        let per_sample = per_sample_loss(fixture.loss, model.forward(inputs), targets);
        let loss: Tensor<1> = per_sample.clone().mean();
        let grads = loss.backward();
        let factors = recorder
            .map(|r| r.finish(&grads))
            .transpose()
            .map_err(|source| ReplayError::Engine {
                what: format!("per-sample gradients at step {}", step.step),
                source,
            })?;
        let grads = GradientsParams::from_grads(grads, &model);
        let mut info = StepInfo::new(loss.detach())
            .with_batch_size(batch)
            .with_individual_losses(per_sample.detach())
            .with_optimizer(optimizer_info.clone());
        if let Some(factors) = factors {
            info = info.with_per_sample(factors);
        }
        if let Some(curvature) = curvature {
            info = info.with_curvature(curvature);
        }
        // A refused quantity (CABS with momentum, ...) does not stop the others.
        let report = cockpit.track(step.step, &model, &grads, info)?;
        for (name, err) in report.failures {
            refused
                .entry(name)
                .or_insert_with(|| cockpit_quantities::persample::ErrorChain(&err).to_string());
        }
        model = optimizer.step(model, grads);
    }
    // The recorded batches are one pass, logged as Cockpit's `log()` would at an epoch end
    // (the dashboard's hyperparameter and performance rows read it).
    if let Some(last) = fixture.steps.last() {
        let losses: Vec<f64> = QuantityKind::Loss
            .series(cockpit.output())
            .iter()
            .filter_map(|(_, v)| v.as_f64())
            .collect();
        let entry = EpochLog {
            epoch_count: 1,
            train_loss: (!losses.is_empty())
                .then(|| losses.iter().sum::<f64>() / losses.len() as f64),
            learning_rate: Some(spec.lr),
            ..EpochLog::default()
        };
        cockpit.log(last.step, &entry)?;
    }
    let final_params = to_torch_layout(&read_params(&model)?);
    let warnings = cockpit.warnings().to_vec();
    let output = cockpit.take_output();
    Ok(ReplayRun {
        output,
        final_params,
        warnings,
        refused,
        skipped_variants,
    })
}

/// The fixture's recorded HessMaxEV start vectors, converted from PyTorch's parameter layout
/// (`[out, in]` weights) to burn's.
fn recorded_start_vectors(fixture: &Fixture) -> BTreeMap<usize, Vec<f64>> {
    let mut vectors = BTreeMap::new();
    for step in &fixture.steps {
        let Some(raw) = step
            .extras
            .get("HessMaxEV_replay")
            .and_then(|r| r.get("start_vector"))
            .and_then(|v| v.as_array())
        else {
            continue;
        };
        let raw: Vec<f64> = raw.iter().filter_map(|x| x.as_f64()).collect();
        let mut converted = Vec::with_capacity(raw.len());
        let mut offset = 0;
        for param in &fixture.params {
            let n: usize = param.shape.iter().product();
            let Some(chunk) = raw.get(offset..offset + n) else {
                break;
            };
            match param.shape[..] {
                [rows, cols] => converted.extend(model::transpose(chunk, rows, cols)),
                _ => converted.extend_from_slice(chunk),
            }
            offset += n;
        }
        vectors.insert(step.step, converted);
    }
    vectors
}

/// burn's `[in, out]` Linear weights back to PyTorch's `[out, in]` (biases unchanged).
fn to_torch_layout(arrays: &[HostArray]) -> Vec<HostArray> {
    arrays.iter().map(HostArray::transposed).collect()
}

fn read_params(model: &FixtureNet) -> Result<Vec<HostArray>, ReplayError> {
    Snapshot::of_params(model)
        .entries()
        .iter()
        .map(|entry| {
            let data = cockpit_quantities::readback::read_values(entry.value.clone()).map_err(
                |source| ReplayError::Engine {
                    what: "reading the final parameters".into(),
                    source,
                },
            )?;
            Ok(HostArray {
                shape: entry.shape.clone(),
                data,
            })
        })
        .collect()
}

fn one_hot(classes_of: &[f64], classes: usize) -> Vec<f64> {
    let mut data = vec![0.0; classes_of.len() * classes];
    for (n, &class) in classes_of.iter().enumerate() {
        data[n * classes + class as usize] = 1.0;
    }
    data
}
