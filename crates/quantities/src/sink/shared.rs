//! A sink shared with its owner: `Arc<Mutex<S>>`.

use std::sync::{Arc, Mutex};

use super::base::{Record, Sink};
use super::error::SinkError;

/// A sink that its owner keeps a handle to (to write an image into the same TensorBoard file,
/// or to read what a test sink collected). A poisoned lock is taken over: a sink's state is
/// the file it writes, not the panicking caller's.
impl<S: Sink> Sink for Arc<Mutex<S>> {
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError> {
        self.lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .write(record)
    }
}
