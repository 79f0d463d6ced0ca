//! The per-example table: [`ExampleRecord`]'s rows as CSV, replaced atomically beside the log.

use std::path::{Path, PathBuf};

use super::record::{ExampleRecord, ExampleStats};
use crate::log::{LogError, Reader, write_atomic};

/// Where the per-example table of the log at `log` lies: `run.json` → `run.examples.csv`
/// (the same folder, the log's stem).
pub fn table_path(log: impl AsRef<Path>) -> PathBuf {
    let log = log.as_ref();
    let stem = log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cockpit".into());
    log.with_file_name(format!("{stem}.examples.csv"))
}

/// Writes `record` as CSV at `path`, one row per example by id ([`ExampleStats`]'s fields
/// are the columns), replacing the file atomically: a reader sees the previous table or the
/// new one, never a cut one.
///
/// # Errors
///
/// [`LogError::Io`] if the file cannot be written (the previous table stays),
/// [`LogError::Table`] if a row cannot be encoded.
pub fn write_table(path: impl AsRef<Path>, record: &ExampleRecord) -> Result<(), LogError> {
    let path = path.as_ref();
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in record.rows() {
        writer.serialize(row).map_err(|source| LogError::Table {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let bytes = writer.into_inner().map_err(|err| LogError::Io {
        action: "write",
        path: path.to_path_buf(),
        source: err.into_error(),
    })?;
    write_atomic(path, |file| std::io::Write::write_all(file, &bytes)).map_err(|source| {
        LogError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Reads a table [`write_table`] wrote (at most
/// [`DEFAULT_READ_LIMIT`](crate::log::DEFAULT_READ_LIMIT) bytes; [`read_table_with`] for
/// another limit).
///
/// # Errors
///
/// [`LogError::Io`] or [`LogError::TooLarge`] as any log, [`LogError::Table`] for a file
/// that is not such a table (a missing column, a value of the wrong type).
pub fn read_table(path: impl AsRef<Path>) -> Result<Vec<ExampleStats>, LogError> {
    read_table_with(&Reader::default(), path)
}

/// [`read_table`] within `reader`'s limit.
///
/// # Errors
///
/// As [`read_table`].
pub fn read_table_with(
    reader: &Reader,
    path: impl AsRef<Path>,
) -> Result<Vec<ExampleStats>, LogError> {
    let path = path.as_ref();
    let text = reader.read_text(path)?;
    csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect::<Result<Vec<ExampleStats>, _>>()
        .map_err(|source| LogError::Table {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples::{Visit, WorstPosition};

    /// A record written and read back holds the same rows (NaN and empty cells included); a
    /// file that is not a table is refused with its reason.
    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = ExampleRecord::new(100, 0.5);
        for step in 0..3 {
            record.fold(&[
                Visit {
                    id: 3,
                    step,
                    loss: 1.0 / (step + 1) as f64,
                    grad_norm: 2.0,
                    relative_share: 1.5,
                    margin: None,
                    worst: Some(WorstPosition {
                        position: step as u64 + 4,
                        loss: 3.5,
                    }),
                },
                Visit {
                    id: 1 << 40,
                    step,
                    loss: 2.0,
                    grad_norm: 0.5,
                    relative_share: 0.5,
                    margin: Some(-1.0),
                    worst: None,
                },
            ]);
        }
        let path = table_path(dir.path().join("run.json"));
        assert_eq!(path, dir.path().join("run.examples.csv"));
        write_table(&path, &record).unwrap();
        let rows = read_table(&path).unwrap();
        assert_eq!(rows.len(), 2);
        let sequence = rows.iter().find(|r| r.id == 3).unwrap();
        assert_eq!(
            sequence.worst_position,
            Some(6),
            "the last visit's worst position"
        );
        assert_eq!(sequence.worst_position_loss, 3.5);
        for row in &rows {
            let kept = record.get(row.id).unwrap();
            assert_eq!(
                format!("{row:?}"),
                format!("{kept:?}"),
                "NaN-aware equality"
            );
        }
        std::fs::write(&path, "id,seen\n1,two\n").unwrap();
        let err = read_table(&path).unwrap_err();
        assert!(matches!(err, LogError::Table { .. }), "{err}");
        assert!(std::error::Error::source(&err).is_some());
        let missing = read_table(dir.path().join("absent.csv")).unwrap_err();
        assert!(matches!(missing, LogError::Io { .. }), "{missing}");
    }
}
