//! The per-sample engine's errors.

/// Why per-sample statistics could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PerSampleError {
    /// Something the computation needs was not given (e.g. no per-sample source at all).
    #[error("needs `{0}`")]
    MissingInfo(&'static str),
    /// The model, layer or setting is not supported (parameters outside every instrumented
    /// layer, with the coverage report).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Shapes that do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// Reading a tensor back from the device failed.
    #[error("reading a tensor from the device failed: {0}")]
    Read(String),
    /// A host worker or a data-parallel peer failed; its part of the result is missing.
    #[error("a host worker failed: {0}")]
    HostWorker(String),
    /// A layer couples the samples of the batch (training-mode BatchNorm), so per-sample
    /// gradients of the layers below it are not defined; the layer is named.
    #[error("per-sample gradients are not defined: `{layer}`: {reason}")]
    SamplesCoupled {
        /// The dotted names of the coupling layers' first parameters, comma-separated (every
        /// such layer of the model, each once).
        layer: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A parameter that requires a gradient has none.
    #[error("parameter `{name}` has no gradient")]
    MissingGradient {
        /// Its dotted name.
        name: String,
    },
    /// The consumer of per-sample gradient elements (a histogram) failed.
    #[error("{0}")]
    Consumer(String),
}
