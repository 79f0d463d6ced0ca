//! The per-sample engine's errors.

use std::sync::Arc;

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
    /// Reading a tensor back from the device failed: the backend's error, kept whole as the
    /// source.
    #[error("reading a tensor from the device failed")]
    Read(#[source] SharedError),
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
    /// The consumer of per-sample gradient elements (a histogram) failed: its own error,
    /// kept whole.
    #[error(transparent)]
    Consumer(SharedError),
}

/// An error kept whole (its type and its source chain) and shared, so that a
/// [`PerSampleError`] clones without `Clone` on its cause: a backend's error from reading
/// tensors back ([`PerSampleError::Read`]: burn's `ExecutionError` or `TensorReadError`; one
/// failed read fails every quantity that waited on it, each holding the same error), or the
/// error of a consumer of per-sample gradient elements ([`PerSampleError::Consumer`],
/// [`Request::elements`]), which reaches the consumer's caller unchanged.
///
/// [`Request::elements`]: crate::Request::elements
#[derive(Debug, Clone)]
pub struct SharedError(Arc<dyn std::error::Error + Send + Sync>);

impl SharedError {
    /// Wraps the error.
    pub fn new(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(err))
    }

    /// The error as its own type, if it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Transparent: the wrapped error's message, then its own sources.
impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The same error (one raised once and cloned), or errors that read the same.
impl PartialEq for SharedError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

/// An error with its causes on one line, `error: cause: root cause`, as a warning, a log line
/// or the command line shows it. Every error of this workspace prints itself alone and keeps
/// its cause as its [`source`](std::error::Error::source) (so a report prints each cause
/// once); this walks the chain.
///
/// ```
/// # use cockpit_persample::ErrorChain;
/// let io = std::io::Error::other("disk full");
/// assert_eq!(ErrorChain(&io).to_string(), "disk full");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(err) = cause {
            write!(f, ": {err}")?;
            cause = err.source();
        }
        Ok(())
    }
}
