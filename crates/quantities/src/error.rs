//! The errors of the quantities crate.

use cockpit_persample::{PerSampleError, SharedError};

/// Everything that can go wrong while configuring or running a [`Cockpit`](crate::Cockpit).
///
/// Whatever the error, the values tracked before it stay in the Cockpit's output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CockpitError {
    /// A name that is not one of the quantities ([`QuantityKind::ALL`](crate::QuantityKind::ALL)) or of Cockpit's 3 configurations.
    #[error("unknown {what} `{name}`; expected one of: {expected}")]
    Unknown {
        /// "quantity" or "configuration".
        what: &'static str,
        /// The name that was given.
        name: String,
        /// The accepted names.
        expected: String,
    },
    /// Two quantities would write to the same output key.
    #[error("two quantities write to the same output key `{0}`")]
    DuplicateQuantity(String),
    /// A schedule with impossible settings.
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),
    /// A quantity's settings that cannot work (zero bins, an empty range, an unknown curvature,
    /// an unknown keyword); found when the Cockpit is built, before training.
    #[error("invalid settings for {quantity}: {reason}")]
    InvalidSettings {
        /// The quantity's output key (or what was being parsed).
        quantity: String,
        /// What is wrong.
        reason: String,
        /// The parser's error, where the settings did not deserialise.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// A Cockpit config file that cannot be read or parsed.
    #[error("config file {path}")]
    ConfigFile {
        /// The file (empty for a text parsed by `from_toml` / `from_json`).
        path: std::path::PathBuf,
        /// Why it was refused: the read's, the TOML or the JSON parser's error.
        #[source]
        source: ConfigFileError,
    },
    /// The model has no parameter that requires a gradient.
    #[error("the model has no parameter that requires a gradient; Cockpit has nothing to track")]
    EmptyModel,
    /// The set of trainable parameters differs from the one seen at the first tracked step.
    #[error(
        "the model's parameters changed since the first tracked step (step {first_step}): \
         added [{added}], removed [{removed}]"
    )]
    ParametersChanged {
        /// The step at which the reference parameter set was recorded.
        first_step: usize,
        /// Dotted names of parameters that were not there before.
        added: String,
        /// Dotted names of parameters that disappeared.
        removed: String,
    },
    /// A parameter that requires a gradient has none in the gradients handed to `track`.
    #[error(
        "no gradient for parameter `{name}`; call `track` after `backward` with the gradients of every parameter"
    )]
    MissingGradient {
        /// Dotted name of the parameter.
        name: String,
    },
    /// `track` was called with a step number that is not larger than the previous one.
    #[error("step numbers must increase: step {step} was tracked after step {previous}")]
    StepNotIncreasing {
        /// The last tracked step.
        previous: usize,
        /// The step that was handed in.
        step: usize,
    },
    /// The step's info disagrees with itself about the batch (per-sample losses of another
    /// length than the batch, an empty batch); nothing was computed for the step.
    #[error("at step {step}: {reason}")]
    BatchMismatch {
        /// The step that was handed in.
        step: usize,
        /// What disagrees.
        reason: String,
    },
    /// One or more quantities could not be computed at a step; the others were stored.
    #[error("at step {step}: {}", format_failures(.failures))]
    QuantitiesFailed {
        /// The step that was being tracked.
        step: usize,
        /// Which quantity failed, and why.
        failures: Vec<(String, QuantityError)>,
    },
    /// A log file could not be read, parsed or written.
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    /// A [`Sink`](crate::sink::Sink) could not write a record (every other sink was still fed
    /// and the values are kept).
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    /// The run record could not be written or read (the values of the call are kept in
    /// [`Cockpit::latest`](crate::Cockpit::latest)).
    #[error(transparent)]
    Record(#[from] crate::record::RecordError),
    /// [`Cockpit::checkpoint`](crate::Cockpit::checkpoint) needs a record to save into
    /// ([`Cockpit::with_record`](crate::Cockpit::with_record)).
    #[error("a checkpoint is saved into the run's record: give the Cockpit one with `with_record`")]
    NoRecord,
    /// A run record cannot be exported (`Cockpit::write` with a record).
    #[error(transparent)]
    Export(#[from] crate::record::ExportError),
    /// A saved Cockpit state does not fit this Cockpit or this model ([`Cockpit::resume`](crate::Cockpit::resume)).
    #[error("the run cannot resume from step {step} of its record: {reason}")]
    Resume {
        /// The step the resume asked for.
        step: usize,
        /// What does not fit.
        #[source]
        reason: crate::quantity::CarriedError,
    },
}

/// Why a config file was refused ([`CockpitError::ConfigFile`]), with the cause as its source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// It could not be read (missing, unreadable, longer than the limit).
    #[error(transparent)]
    Read(#[from] crate::log::LogError),
    /// TOML that does not parse or does not describe a config (an unknown field included).
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// JSON that does not parse or does not describe a config (a key said twice included).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Neither `.toml` nor `.json`.
    #[error("expected a .toml or .json file")]
    Extension,
}

/// A user's value as an error message quotes it: whole when short, else its first 48
/// characters and its length (a refused 100 MB string makes a short message).
pub(crate) fn excerpt(value: &str) -> String {
    const SHOWN: usize = 48;
    match value.char_indices().nth(SHOWN) {
        None => value.to_string(),
        Some((end, _)) => format!("{}… ({} bytes)", &value[..end], value.len()),
    }
}

/// `A, B: why; C: other` — quantities that failed for the same reason share it.
fn format_failures(failures: &[(String, QuantityError)]) -> String {
    group_failures(failures)
        .into_iter()
        .map(|(names, message)| format!("{}: {message}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The failed quantities grouped by their reason, in first-seen order: `(names, reason)`.
pub(crate) fn group_failures(failures: &[(String, QuantityError)]) -> Vec<(Vec<&str>, String)> {
    let mut groups: Vec<(Vec<&str>, String)> = Vec::new();
    for (name, err) in failures {
        let message = cockpit_persample::ErrorChain(err).to_string();
        match groups.iter_mut().find(|(_, m)| *m == message) {
            Some((names, _)) => names.push(name),
            None => groups.push((vec![name], message)),
        }
    }
    groups
}

/// Why a single quantity could not be computed at a step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// The step's [`StepInfo`](crate::StepInfo) lacks something this quantity needs.
    #[error("needs `{0}` in the step info")]
    MissingInfo(&'static str),
    /// A two-step quantity found no reference for its end point.
    #[error("{0}")]
    MissingReference(String),
    /// The quantity does not support this training setup (e.g. an optimizer).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Shapes that do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The network was declared piecewise linear between its drop-ins
    /// ([`RecordedCurvature::piecewise_linear`](crate::curvature::RecordedCurvature::piecewise_linear)),
    /// but its output is curved in a parameter: the Hessian's block of that parameter is not
    /// the Gauss–Newton block, so `diag_h` would be wrong.
    #[error(
        "the network was declared piecewise linear, but it is curved in `{parameter}`: the \
         Hessian's block of that parameter differs from the Gauss–Newton block by {relative:.3} \
         of its size (tolerance {tolerance:e}); a smooth function (sigmoid, tanh, GELU, softplus, \
         …) runs between the drop-ins at or after that layer. Drop the declaration (diag_h is \
         then the GGN plus an estimate of the residual) or use drop-ins for the curved part"
    )]
    CurvedModel {
        /// The parameter whose block is furthest from the Gauss–Newton block.
        parameter: String,
        /// `‖(H − G)_pp v‖ / ‖H_pp v‖` for random `v` on that parameter alone (the median of
        /// the probes).
        relative: f64,
        /// The tolerance it exceeded.
        tolerance: f64,
    },
    /// The step's read gave a quantity other numbers than it enqueued (an internal mismatch;
    /// a read that failed on the device is [`QuantityError::PerSample`]'s
    /// [`PerSampleError::Read`], with the backend's error as its source).
    #[error("the step's read gave {got} numbers where {expected} were enqueued")]
    ReadCount {
        /// How many numbers were enqueued (the least, where more may come).
        expected: usize,
        /// How many came back.
        got: usize,
    },
    /// A host worker (histogram counting) panicked; its part of the result is missing.
    #[error("a host worker failed: {0}")]
    HostWorker(String),
    /// The per-sample engine (or a parameter snapshot) failed: its error, typed (e.g.
    /// [`PerSampleError::SamplesCoupled`] naming the layer, or
    /// [`PerSampleError::MissingGradient`]).
    #[error(transparent)]
    PerSample(PerSampleError),
}

/// The engine's error as it is, or — where it carries a quantity's own error back from a
/// consumer of per-sample elements — that error unchanged.
impl From<PerSampleError> for QuantityError {
    fn from(err: PerSampleError) -> Self {
        match err {
            PerSampleError::Consumer(consumer) => match consumer.downcast_ref::<QuantityError>() {
                Some(own) => own.clone(),
                None => QuantityError::PerSample(PerSampleError::Consumer(consumer)),
            },
            other => QuantityError::PerSample(other),
        }
    }
}

/// A quantity's failure while it consumes per-sample gradient elements, handed back through
/// the per-sample engine whole ([`SharedError`]); an engine error comes back as itself.
impl From<QuantityError> for PerSampleError {
    fn from(err: QuantityError) -> Self {
        match err {
            QuantityError::PerSample(inner) => inner,
            other => PerSampleError::Consumer(SharedError::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_quoted_short() {
        assert_eq!(excerpt("linear(3)"), "linear(3)");
        let long = "é".repeat(10_000);
        let quoted = excerpt(&long);
        assert!(
            quoted.len() < 120 && quoted.ends_with("(20000 bytes)"),
            "{quoted}"
        );
        let err = format!("linear({})", "9".repeat(1_000_000))
            .parse::<crate::Schedule>()
            .unwrap_err();
        assert!(err.to_string().len() < 400, "{}", err.to_string().len());
        let err = "x"
            .repeat(1_000_000)
            .parse::<crate::Schedule>()
            .unwrap_err();
        assert!(err.to_string().len() < 400, "{}", err.to_string().len());
    }

    /// A quantity's own error handed through the engine (a histogram's consumer failing)
    /// comes back as itself: same variant, same message, no string in between.
    #[test]
    fn a_quantity_error_survives_the_engine() {
        for own in [
            QuantityError::HostWorker("worker 1 panicked".into()),
            QuantityError::ReadCount {
                expected: 2,
                got: 1,
            },
            QuantityError::Unsupported("Adam".into()),
        ] {
            let through: PerSampleError = own.clone().into();
            assert!(
                matches!(through, PerSampleError::Consumer(_)),
                "{through:?}"
            );
            assert_eq!(through.to_string(), own.to_string());
            assert_eq!(QuantityError::from(through), own);
        }
    }

    /// The engine's errors stay typed inside `QuantityError::PerSample`, with their message
    /// and their source chain; and go back out as themselves.
    #[test]
    fn engine_errors_stay_typed() {
        let coupled = PerSampleError::SamplesCoupled {
            layer: "norm.gamma".into(),
            reason: "training-mode BatchNorm".into(),
        };
        let quantity = QuantityError::from(coupled.clone());
        assert!(
            matches!(&quantity, QuantityError::PerSample(PerSampleError::SamplesCoupled { layer, .. }) if layer == "norm.gamma")
        );
        assert_eq!(quantity.to_string(), coupled.to_string());
        assert_eq!(PerSampleError::from(quantity), coupled);
        let missing = QuantityError::from(PerSampleError::MissingGradient {
            name: "fc.weight".into(),
        });
        assert!(matches!(
            missing,
            QuantityError::PerSample(PerSampleError::MissingGradient { .. })
        ));

        // A foreign consumer error keeps its chain: the I/O error's own source is reachable.
        #[derive(Debug, thiserror::Error)]
        #[error("writing the histogram failed")]
        struct Outer(#[source] std::io::Error);
        let foreign =
            PerSampleError::Consumer(SharedError::new(Outer(std::io::Error::other("disk full"))));
        let quantity = QuantityError::from(foreign);
        assert_eq!(quantity.to_string(), "writing the histogram failed");
        let source = std::error::Error::source(&quantity).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk full"));
    }
}
