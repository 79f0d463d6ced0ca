//! [`Finding`]: one pattern a check recognised, with its evidence.

use serde::Serialize;

/// What a check recognised. Its string form (`step-too-large`, …) is stable: CI jobs and the
/// `--json` output use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// The inputs are not standardised: the first layer sees inputs of far too large a norm.
    MisscaledInputs,
    /// The run starts far off: loss or gradients start orders of magnitude above where the
    /// run settles (too-large initialisation).
    ExplodingStart,
    /// The step size is far too large: the loss spikes or rises while α > 1.
    StepTooLarge,
    /// The step size is far too small: α ≈ −1 and the loss does not fall.
    StepTooSmall,
    /// Gradient norms spread over many decades across depth.
    GradientImbalance,
    /// A parameter stopped moving.
    FrozenLayer,
    /// The gradient tests say the batch is too small.
    SmallBatch,
    /// The curvature rose sharply.
    RisingCurvature,
    /// A parameter's gradient norm grew by orders of magnitude over the run.
    ExplodingGradient,
    /// A parameter's gradient norm collapsed over the run.
    VanishingGradient,
    /// The loss does not fall, for no reason another check names.
    LossNotDecreasing,
    /// NaN or infinite values.
    NonFinite,
    /// Late in training, a handful of examples carry most of the gradient (Examples).
    FewExamples,
}

impl Code {
    /// The stable kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StepTooLarge => "step-too-large",
            Self::ExplodingStart => "exploding-start",
            Self::MisscaledInputs => "misscaled-inputs",
            Self::StepTooSmall => "step-too-small",
            Self::GradientImbalance => "gradient-imbalance",
            Self::FrozenLayer => "frozen-layer",
            Self::SmallBatch => "small-batch",
            Self::RisingCurvature => "rising-curvature",
            Self::ExplodingGradient => "exploding-gradient",
            Self::VanishingGradient => "vanishing-gradient",
            Self::LossNotDecreasing => "loss-not-decreasing",
            Self::NonFinite => "non-finite",
            Self::FewExamples => "few-examples",
        }
    }

    /// Whether the pattern is a cause a user acts on (a setting to change), rather than a
    /// symptom that follows from one.
    pub fn is_cause(self) -> bool {
        !matches!(
            self,
            Self::NonFinite
                | Self::LossNotDecreasing
                | Self::FrozenLayer
                | Self::ExplodingGradient
                | Self::VanishingGradient
                | Self::RisingCurvature
        )
    }

    /// Whether a finding of this code explains one of `other` that shows at or after it:
    /// a blow-up explains dead units, NaNs and a flat loss; inputs or weights off by orders of
    /// magnitude make any learning rate too large at the start.
    pub fn explains(self, other: Code) -> bool {
        use Code::*;
        match self {
            MisscaledInputs | ExplodingStart | StepTooLarge => matches!(
                (self, other),
                (MisscaledInputs, ExplodingStart | StepTooLarge)
                    | (ExplodingStart, StepTooLarge)
                    | (
                        _,
                        NonFinite
                            | FrozenLayer
                            | VanishingGradient
                            | ExplodingGradient
                            | LossNotDecreasing
                            | RisingCurvature
                    )
            ),
            StepTooSmall | SmallBatch => other == LossNotDecreasing,
            GradientImbalance => {
                matches!(other, LossNotDecreasing | VanishingGradient | FrozenLayer)
            }
            _ => false,
        }
    }

    /// What to do about it, in a few words.
    pub fn advice(self) -> &'static str {
        match self {
            Self::StepTooLarge => "lower the learning rate",
            Self::ExplodingStart => "initialise the weights smaller (e.g. Kaiming/Xavier scale)",
            Self::MisscaledInputs => "standardise the inputs (zero mean, unit variance)",
            Self::StepTooSmall => "raise the learning rate",
            Self::GradientImbalance => {
                "use activations/normalisation that keep gradients alive through depth (ReLU, residuals, LayerNorm), or per-layer step sizes"
            }
            Self::FrozenLayer => "check for dead units, a detached layer or a zero learning rate",
            Self::SmallBatch => "use a larger batch (or a smaller learning rate)",
            Self::RisingCurvature => "lower the learning rate or add warm-up",
            Self::ExplodingGradient => "clip gradients or lower the learning rate",
            Self::VanishingGradient => "check for saturated or dead units",
            Self::LossNotDecreasing => "check the data, labels and loss",
            Self::NonFinite => "find the first non-finite step; lower the learning rate",
            Self::FewExamples => {
                "look at those examples (`cockpit examples LOG`): wrong labels, duplicates or outliers the network is memorising"
            }
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One flagged pattern with the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What was recognised.
    pub code: Code,
    /// What it means, in one sentence.
    pub message: String,
    /// The numbers behind it.
    pub evidence: String,
    /// The step where it first shows.
    pub first_step: usize,
    /// Steps concerned (the first ones).
    pub steps: Vec<usize>,
    /// Parameters concerned, by dotted name where known.
    pub parameters: Vec<String>,
    /// Findings explained by this one (e.g. units that died after the step size blew up).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<Finding>,
}

impl Finding {
    /// A finding without parameters or consequences.
    pub fn new(
        code: Code,
        message: impl Into<String>,
        evidence: impl Into<String>,
        steps: Vec<usize>,
    ) -> Self {
        Self {
            code,
            message: message.into(),
            evidence: evidence.into(),
            first_step: steps.first().copied().unwrap_or(0),
            steps: steps.into_iter().take(10).collect(),
            parameters: Vec::new(),
            consequences: Vec::new(),
        }
    }

    /// The same finding naming `parameters`.
    pub fn with_parameters(mut self, parameters: Vec<String>) -> Self {
        self.parameters = parameters;
        self
    }

    /// The same finding, first showing at `step`.
    pub fn starting_at(mut self, step: usize) -> Self {
        self.first_step = step;
        self
    }
}
