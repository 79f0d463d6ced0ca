//! Which examples: a per-example record kept across the run from what each tracked step
//! already has (each example's loss and gradient norm, and its margin where given), the table
//! it is written as, and the ranking of suspicious examples read from it.
//!
//! The [`Examples`](crate::quantity::Examples) quantity keeps the record
//! ([`ExampleRecord`]); [`Cockpit::write`](crate::Cockpit::write) writes it beside the log
//! ([`table_path`]); `cockpit examples` ranks it ([`rank`]).

mod cartography;
mod rank;
mod record;
mod table;

pub use cartography::{MapBorders, Region, coordinates};
pub use rank::{Ranked, Suspicion, auroc, precision_at, rank, score, suspicion};
pub use record::{ExampleRecord, ExampleStats, Visit, WorstPosition};
pub use table::{read_table, read_table_with, table_path, write_table};
