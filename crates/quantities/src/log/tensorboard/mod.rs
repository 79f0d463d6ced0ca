//! TensorBoard event files: where most people who debug training already look at curves and
//! histograms.
//!
//! An event file is a sequence of TFRecord records (length, masked CRC-32C of the length, a
//! serialised `Event` protobuf message, masked CRC-32C of the message). [`TensorBoardWriter`]
//! writes Cockpit's values into one; [`Cockpit::with_tensorboard`](crate::Cockpit::with_tensorboard)
//! writes each tracked step as it comes, and `cockpit export LOG --tensorboard DIR` converts
//! any Cockpit log.

mod proto;
mod record;
mod writer;

pub use proto::{Event, HistogramProto, Image, Payload, Summary, SummaryValue, What};
pub use record::{frame, masked_crc};
pub use writer::{TAG_PREFIX, TensorBoardWriter};
