//! The fixture format: a training run recorded from the real Cockpit (PyTorch, float64).

use std::path::Path;

use serde::Deserialize;

use cockpit_quantities::log::Reader;

use super::ReplayError;

/// A recorded run: model, loss, optimizer, initial parameters and every step's batch, plus the
/// values the real Cockpit computed (kept as JSON for comparison).
#[derive(Debug, Clone, Deserialize)]
pub struct Fixture {
    /// The fixture's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The layer stack.
    pub model: ModelSpec,
    /// `"mse"` or `"cross_entropy"` (mean reduction).
    pub loss: LossKind,
    /// The optimizer (PyTorch SGD).
    pub optimizer: OptimizerSpec,
    /// Initial parameters in PyTorch order and layout.
    pub params: Vec<ParamSpec>,
    /// Parameters after the last optimizer step, if recorded.
    #[serde(default)]
    pub final_params: Option<Vec<ParamSpec>>,
    /// The steps, in order.
    pub steps: Vec<StepSpec>,
    /// Non-default quantity settings recorded alongside (`variant_quantities` of each step),
    /// keyed like `GradHist1d[bins=20,adapt=GradAbsMax(padding=0.1)]`.
    #[serde(default)]
    pub variants: serde_json::Map<String, serde_json::Value>,
}

/// The model: a plain stack of layers.
#[derive(Debug, Clone, Deserialize)]
pub struct ModelSpec {
    /// Layers in order.
    pub layers: Vec<LayerSpec>,
}

/// One layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LayerSpec {
    /// `torch.nn.Linear(in, out, bias)`.
    Linear {
        /// Input features.
        #[serde(rename = "in")]
        d_in: usize,
        /// Output features.
        #[serde(rename = "out")]
        d_out: usize,
        /// Whether there is a bias.
        #[serde(default = "yes")]
        bias: bool,
    },
    /// ReLU.
    Relu,
    /// Logistic sigmoid.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
}

fn yes() -> bool {
    true
}

/// The loss function (mean reduction over the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// `MSELoss(mean)`: the per-sample loss is the mean over the outputs.
    Mse,
    /// `CrossEntropyLoss(mean)` with class-index targets.
    CrossEntropy,
}

/// PyTorch's `torch.optim.SGD` settings.
#[derive(Debug, Clone, Deserialize)]
pub struct OptimizerSpec {
    /// Only `"sgd"` is supported.
    pub kind: String,
    /// Learning rate.
    pub lr: f64,
    /// Momentum.
    #[serde(default)]
    pub momentum: f64,
    /// Dampening.
    #[serde(default)]
    pub dampening: f64,
    /// Weight decay.
    #[serde(default)]
    pub weight_decay: f64,
    /// Nesterov momentum.
    #[serde(default)]
    pub nesterov: bool,
}

/// One parameter in PyTorch layout (a Linear weight is `[out, in]`).
#[derive(Debug, Clone, Deserialize)]
pub struct ParamSpec {
    /// PyTorch name, e.g. `0.weight`.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f64>,
}

/// A shaped array.
#[derive(Debug, Clone, Deserialize)]
pub struct ArraySpec {
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f64>,
}

/// One recorded step.
#[derive(Debug, Clone, Deserialize)]
pub struct StepSpec {
    /// The step number.
    pub step: usize,
    /// Inputs `[B, in]`.
    pub inputs: ArraySpec,
    /// Targets: class indices `[B]` (cross-entropy) or `[B, C]` (MSE).
    pub targets: ArraySpec,
    /// The recorded per-sample losses.
    #[serde(default)]
    pub individual_losses: Option<Vec<f64>>,
    /// What the real Cockpit computed at this step.
    #[serde(default)]
    pub quantities: serde_json::Map<String, serde_json::Value>,
    /// Non-default settings, keyed like `GradHist1d[bins=20,...]`.
    #[serde(default)]
    pub variant_quantities: serde_json::Map<String, serde_json::Value>,
    /// Independent references (not Cockpit output).
    #[serde(default)]
    pub extras: serde_json::Map<String, serde_json::Value>,
}

impl Fixture {
    /// Reads and validates a fixture file.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Input`] if unreadable or too large, [`ReplayError::Fixture`] if it is not a valid
    /// fixture (the message names the field or the inconsistency).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        Self::load_with(&Reader::default(), path)
    }

    /// [`Fixture::load`] within `reader`'s limit.
    ///
    /// # Errors
    ///
    /// As [`Fixture::load`].
    pub fn load_with(reader: &Reader, path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref();
        let text = reader.read_text(path).map_err(ReplayError::from)?;
        Self::parse(&text).map_err(|err| match err {
            ReplayError::Fixture(message) => {
                ReplayError::Fixture(format!("{}: {message}", path.display()))
            }
            ReplayError::NotAFixture { source, .. } => ReplayError::NotAFixture {
                path: Some(path.to_path_buf()),
                source,
            },
            other => other,
        })
    }

    /// Parses and validates fixture text.
    ///
    /// # Errors
    ///
    /// [`ReplayError::NotAFixture`] for JSON that is not a fixture, [`ReplayError::Fixture`]
    /// naming what else is wrong.
    pub fn parse(text: &str) -> Result<Self, ReplayError> {
        let fixture: Fixture = serde_json::from_str(text)
            .map_err(|source| ReplayError::NotAFixture { path: None, source })?;
        fixture.validate()?;
        Ok(fixture)
    }

    /// The linear layers' `(in, out, bias)` in order.
    pub fn linear_layers(&self) -> Vec<(usize, usize, bool)> {
        self.model
            .layers
            .iter()
            .filter_map(|layer| match *layer {
                LayerSpec::Linear { d_in, d_out, bias } => Some((d_in, d_out, bias)),
                _ => None,
            })
            .collect()
    }

    /// Checks that the parts fit together, so that the replay cannot fail half-way.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Fixture`] naming the first inconsistency.
    pub fn validate(&self) -> Result<(), ReplayError> {
        let bad = |message: String| Err(ReplayError::Fixture(message));
        if self.optimizer.kind != "sgd" {
            return bad(format!(
                "optimizer `{}` is not supported (only `sgd`)",
                self.optimizer.kind
            ));
        }
        if !self.optimizer.lr.is_finite() {
            return bad("the learning rate is not finite".into());
        }
        let linears = self.linear_layers();
        let Some(&(d_input, _, _)) = linears.first() else {
            return bad("model.layers has no linear layer".into());
        };
        let mut width = d_input;
        for (index, layer) in self.model.layers.iter().enumerate() {
            if let LayerSpec::Linear { d_in, d_out, .. } = *layer {
                if d_in != width {
                    return bad(format!(
                        "layer {index} expects {d_in} inputs but receives {width}"
                    ));
                }
                if d_out == 0 {
                    return bad(format!("layer {index} has no outputs"));
                }
                width = d_out;
            }
        }
        let classes = width;
        let expected: Vec<Vec<usize>> = linears
            .iter()
            .flat_map(|&(d_in, d_out, bias)| {
                let mut shapes = vec![vec![d_out, d_in]];
                if bias {
                    shapes.push(vec![d_out]);
                }
                shapes
            })
            .collect();
        check_params(&self.params, &expected, "params")?;
        if let Some(final_params) = &self.final_params {
            check_params(final_params, &expected, "final_params")?;
        }
        if self.steps.is_empty() {
            return bad("the fixture has no steps".into());
        }
        let mut previous: Option<usize> = None;
        for (index, step) in self.steps.iter().enumerate() {
            let at = format!("steps[{index}] (step {})", step.step);
            if previous.is_some_and(|p| step.step <= p) {
                return bad(format!("{at}: step numbers must increase"));
            }
            previous = Some(step.step);
            check_array(&step.inputs, &format!("{at}.inputs"))?;
            check_array(&step.targets, &format!("{at}.targets"))?;
            let [batch, d] = step.inputs.shape[..] else {
                return bad(format!("{at}.inputs must be [batch, {d_input}]"));
            };
            if d != d_input || batch == 0 {
                return bad(format!(
                    "{at}.inputs has shape {:?}, expected [batch ≥ 1, {d_input}]",
                    step.inputs.shape
                ));
            }
            match self.loss {
                LossKind::Mse if step.targets.shape != [batch, classes] => {
                    return bad(format!(
                        "{at}.targets has shape {:?}, expected [{batch}, {classes}] for MSE",
                        step.targets.shape
                    ));
                }
                LossKind::CrossEntropy => {
                    if step.targets.shape != [batch] {
                        return bad(format!(
                            "{at}.targets has shape {:?}, expected [{batch}] class indices",
                            step.targets.shape
                        ));
                    }
                    if let Some(t) = step
                        .targets
                        .data
                        .iter()
                        .find(|&&t| t < 0.0 || t.fract() != 0.0 || t as usize >= classes)
                    {
                        return bad(format!(
                            "{at}.targets holds {t}, not a class index below {classes}"
                        ));
                    }
                }
                LossKind::Mse => {}
            }
        }
        Ok(())
    }
}

fn check_array(array: &ArraySpec, what: &str) -> Result<(), ReplayError> {
    let n: usize = array.shape.iter().product();
    if n != array.data.len() {
        return Err(ReplayError::Fixture(format!(
            "{what} has shape {:?} ({n} values) but {} values",
            array.shape,
            array.data.len()
        )));
    }
    Ok(())
}

fn check_params(
    params: &[ParamSpec],
    expected: &[Vec<usize>],
    what: &str,
) -> Result<(), ReplayError> {
    if params.len() != expected.len() {
        return Err(ReplayError::Fixture(format!(
            "{what} has {} tensors but the model has {}",
            params.len(),
            expected.len()
        )));
    }
    for (param, shape) in params.iter().zip(expected) {
        if &param.shape != shape {
            return Err(ReplayError::Fixture(format!(
                "{what}: `{}` has shape {:?}, the model needs {shape:?}",
                param.name, param.shape
            )));
        }
        check_array(
            &ArraySpec {
                shape: param.shape.clone(),
                data: param.data.clone(),
            },
            &format!("{what}: `{}`", param.name),
        )?;
    }
    Ok(())
}
