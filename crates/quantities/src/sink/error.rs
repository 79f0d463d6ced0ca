//! Why a [`Sink`](super::Sink) could not take a record.

use crate::log::LogError;

/// Why a [`Sink`](super::Sink) could not write a record. The Cockpit reports it as
/// [`CockpitError::Sink`](crate::CockpitError::Sink) after feeding every other sink.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// One of this crate's files (the JSON-lines stream) could not be written.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Another sink's own error (TensorBoard's, a user's), kept whole as the source.
    #[error("the {sink} sink could not write the values")]
    Other {
        /// Which sink, in words ("TensorBoard").
        sink: &'static str,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl SinkError {
    /// A sink's own error, named by the sink.
    pub fn other(
        sink: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Other {
            sink,
            source: Box::new(source),
        }
    }
}
