//! The [`Sink`] trait and the [`Record`] it is fed.

use super::error::SinkError;
use crate::Output;

/// What produced a [`Record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// One [`Cockpit::track`](crate::Cockpit::track) call (or
    /// [`Cockpit::step`](crate::Cockpit::step)): its quantities' values.
    Tracked,
    /// One [`Cockpit::log`](crate::Cockpit::log) call: the epoch entry (`epoch_count`,
    /// `train_loss`, `learning_rate`, …).
    Epoch,
}

/// The values one Cockpit call produced, as a [`Sink`] receives them.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// What produced them.
    pub origin: Origin,
    /// The step of the call (a two-step quantity's value may be stored under the step
    /// before: `values` has each under its own).
    pub step: usize,
    /// The values, `values[step][key]`, with the kinds of keyed variants
    /// ([`QuantityKind::of_key`](crate::QuantityKind::of_key)).
    pub values: &'a Output,
    /// The tracked parameters' dotted names, in the order of the per-parameter lists; empty
    /// when unknown (no step tracked yet).
    pub parameter_names: &'a [String],
    /// Everything tracked so far, `values` included ([`Cockpit::output`](crate::Cockpit::output)):
    /// for a sink that rewrites the whole run ([`LogFile`](super::LogFile)).
    pub run: &'a Output,
    /// The per-example record of an [`Examples`](crate::quantity::Examples) quantity, where
    /// the Cockpit runs one.
    pub examples: Option<&'a crate::examples::ExampleRecord>,
}

/// A destination for a Cockpit's values, fed each tracked step's output and each epoch entry
/// as they come ([`Cockpit::with_sink`](crate::Cockpit::with_sink)). Computing does not know
/// who reads: a new destination is a type that implements this, in its own file.
///
/// A sink that must also be reached from outside (TensorBoard, to add an image) is shared as
/// `Arc<Mutex<S>>`, which is a sink too.
pub trait Sink: Send {
    /// Receives one call's values. Empty records are not sent.
    ///
    /// # Errors
    ///
    /// A [`SinkError`] where the values cannot be written (a sink's own error goes in
    /// [`SinkError::other`]). The Cockpit still feeds every other sink and keeps the values in
    /// memory, then reports the first error.
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError>;
}
