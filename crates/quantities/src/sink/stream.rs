//! The JSON-lines stream ([`JsonLinesWriter`]) as a sink.

use super::base::{Record, Sink};
use super::error::SinkError;
use crate::log::JsonLinesWriter;

/// The stream as a Cockpit's sink ([`Cockpit::with_stream`](crate::Cockpit::with_stream)):
/// one line per record, flushed at once.
impl Sink for JsonLinesWriter {
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError> {
        Ok(self.append(record.step, record.values)?)
    }
}
