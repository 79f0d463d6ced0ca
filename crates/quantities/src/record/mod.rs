//! The run record: a run written to an embedded database (SQLite) as it goes, read by the
//! viewers while it grows, exported to the Cockpit JSON log and the JSON-lines stream, and
//! the place a resumed run continues from.
//!
//! - [`RunRecord`]: the writer, a [`Sink`](crate::sink::Sink) the Cockpit feeds
//!   ([`Cockpit::with_record`](crate::Cockpit::with_record)); one writer per record (a lock).
//! - [`RecordReader`]: reads a record whole, by step range, or as an overview bounded in size
//!   whatever the run's length ([`RecordReader::read_overview`]).
//! - [`export_log`], [`export_stream`]: the record as today's files, one step in memory at a
//!   time.
//!
//! Why SQLite, and what the tables hold: `docs/internals.md` and the `schema` notes below.

mod codec;
mod error;
mod export;
mod reader;
mod schema;
mod writer;

pub use codec::CodecError;
pub(crate) use codec::{Reader as BytesReader, put_floats, put_u64};
pub use error::{NotARecord, RecordError};
pub use export::{ExportError, export_log, export_stream};
pub use reader::{DEFAULT_OVERVIEW_STEPS, Extent, RecordReader, is_record};
pub use writer::{DEFAULT_COMMIT_INTERVAL, DEFAULT_KEPT_STATES, RunRecord};
