//! TensorBoard event files: where most people who debug training already look at curves and
//! histograms.
//!
//! An event file is a sequence of TFRecord records (length, masked CRC-32C of the length, a
//! serialised `Event` protobuf message, masked CRC-32C of the message). [`TensorBoardWriter`]
//! writes Cockpit's values into one. As a Cockpit's [`Sink`](cockpit_quantities::sink::Sink)
//! it writes each tracked step as it comes; `cockpit export LOG --tensorboard DIR` converts any
//! Cockpit log:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cockpit_quantities::{Cockpit, Configuration, Schedule};
//! use cockpit_tensorboard::TensorBoardWriter;
//!
//! let cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())?
//!     .with_sink(TensorBoardWriter::create("runs/cockpit")?);
//! # Ok(()) }
//! ```
//!
//! The core crate does not depend on this one (nor on protobuf): the Cockpit knows its sinks
//! only as sinks.

mod error;
mod proto;
mod record;
mod writer;

pub use error::TensorBoardError;
pub use proto::{Event, HistogramProto, Image, Payload, Summary, SummaryValue, What};
pub use record::{frame, masked_crc};
pub use writer::{TAG_PREFIX, TensorBoardWriter};
