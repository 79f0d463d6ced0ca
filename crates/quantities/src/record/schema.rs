//! The record's tables.
//!
//! - `meta(name, value)`: `format` (this module's [`FORMAT`]), `parameter_names` (a JSON list);
//! - `keys(id, name, kind)`: one row per quantity key, with its Cockpit class where the key is
//!   not the class's own name (`HessTrace[ggn]` → `HessTrace`);
//! - `vals(step, key, value)`: one row per value, the value in the codec's bytes; the primary
//!   key `(step, key)` is the index a step range reads through;
//! - `states(step, data)`: the Cockpit's state saved for a resume at `step`.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use super::error::{NotARecord, RecordError};

/// The format version this build writes and reads.
pub(crate) const FORMAT: u32 = 1;

pub(crate) const CREATE: &str = "
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS keys (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT);
CREATE TABLE IF NOT EXISTS vals (
    step INTEGER NOT NULL, key INTEGER NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (step, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS states (step INTEGER PRIMARY KEY, data BLOB NOT NULL);
";

/// Refuses a database that is not a run record of this format.
pub(crate) fn check(conn: &Connection, path: &Path) -> Result<(), RecordError> {
    let not = |reason| RecordError::NotARecord {
        path: path.to_path_buf(),
        reason,
    };
    for table in ["meta", "keys", "vals", "states"] {
        let found = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |_| Ok(()),
            )
            .optional()
            .map_err(RecordError::sqlite("read", path))?;
        if found.is_none() {
            return Err(not(NotARecord::MissingTable(table)));
        }
    }
    let format: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE name = 'format'", [], |row| {
            row.get(0)
        })
        .optional()
        .map_err(RecordError::sqlite("read", path))?;
    match format {
        Some(v) if v == FORMAT.to_string() => Ok(()),
        found => Err(not(NotARecord::Version {
            found: found.unwrap_or_else(|| "none".into()),
            expected: FORMAT,
        })),
    }
}
