//! [`RecordReader`]: a run record read while it is written, whole, by step range, or as an
//! overview whose size does not grow with the run.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use super::codec::decode;
use super::error::RecordError;
use super::schema;
use crate::{Output, Value};

/// The first bytes of every SQLite database.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The tracked steps an overview keeps by default: up to this many a record is read whole.
pub const DEFAULT_OVERVIEW_STEPS: usize = 4_000;

/// Whether `path` is an SQLite database (a run record, or another one the reader refuses by
/// name), judged from its first bytes.
pub fn is_record(path: impl AsRef<Path>) -> bool {
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == MAGIC)
}

/// Reads a run record ([`RunRecord`](super::RunRecord)), also while a run writes it: each read
/// sees the steps committed when it starts.
pub struct RecordReader {
    path: PathBuf,
    conn: Connection,
    /// `id → (key, kind)`.
    keys: HashMap<i64, (String, Option<String>)>,
}

impl std::fmt::Debug for RecordReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A record's extent ([`RecordReader::summary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Distinct steps with a value.
    pub steps: u64,
    /// The first step with a value.
    pub first: Option<u64>,
    /// The last step with a value.
    pub last: Option<u64>,
    /// Values stored.
    pub values: u64,
}

impl RecordReader {
    /// Opens the record at `path` for reading.
    ///
    /// # Errors
    ///
    /// [`RecordError::Io`] if it cannot be opened, [`RecordError::NotARecord`] for a file that
    /// is not a run record of this version, [`RecordError::Sqlite`] for a damaged database.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref().to_path_buf();
        std::fs::metadata(&path).map_err(|source| RecordError::Io {
            action: "open",
            path: path.clone(),
            source,
        })?;
        if !is_record(&path) {
            return Err(RecordError::NotARecord {
                path,
                reason: super::NotARecord::MissingTable("meta"),
            });
        }
        let sql = RecordError::sqlite("opened", &path);
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(&sql)?;
        conn.execute_batch("PRAGMA busy_timeout = 5000;")
            .map_err(&sql)?;
        schema::check(&conn, &path)?;
        let mut reader = Self {
            path,
            conn,
            keys: HashMap::new(),
        };
        reader.refresh_keys()?;
        Ok(reader)
    }

    /// The record's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, source: rusqlite::Error) -> RecordError {
        RecordError::sqlite("read", &self.path)(source)
    }

    fn refresh_keys(&mut self) -> Result<(), RecordError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, name, kind FROM keys")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get(2)?))
            })
            .map_err(|e| self.sql(e))?;
        let mut keys = HashMap::new();
        for row in rows {
            let (id, name, kind) = row.map_err(|e| self.sql(e))?;
            keys.insert(id, (name, kind));
        }
        drop(stmt);
        self.keys = keys;
        Ok(())
    }

    /// The parameters' dotted names, as the run wrote them (empty before its first step).
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the record cannot be read.
    pub fn parameter_names(&self) -> Result<Vec<String>, RecordError> {
        let names: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE name = 'parameter_names'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(names
            .and_then(|n| serde_json::from_str(&n).ok())
            .unwrap_or_default())
    }

    /// How many steps and values the record holds, and its first and last step.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the record cannot be read.
    pub fn summary(&self) -> Result<Extent, RecordError> {
        self.conn
            .query_row(
                "SELECT COUNT(DISTINCT step), MIN(step), MAX(step), COUNT(*) FROM vals",
                [],
                |row| {
                    Ok(Extent {
                        steps: row.get::<_, i64>(0)? as u64,
                        first: row.get::<_, Option<i64>>(1)?.map(|s| s as u64),
                        last: row.get::<_, Option<i64>>(2)?.map(|s| s as u64),
                        values: row.get::<_, i64>(3)? as u64,
                    })
                },
            )
            .map_err(|e| self.sql(e))
    }

    /// An empty output with the record's names and kinds, the keys read again first (a key
    /// written since they were read, the run going on, has its kind).
    fn frame(&mut self) -> Result<Output, RecordError> {
        self.refresh_keys()?;
        let mut output = Output::new();
        output.set_parameter_names(self.parameter_names()?);
        for (name, kind) in self.keys.values() {
            if let Some(kind) = kind {
                output.set_kind(name, kind);
            }
        }
        Ok(output)
    }

    /// Calls `each(step, key, value)` for every value of steps `from..to`, in step order, one
    /// value in memory at a time.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the record cannot be read, [`RecordError::Damaged`] for a
    /// value that cannot be decoded; `each`'s own error stops the walk.
    pub fn for_each<E: From<RecordError>>(
        &mut self,
        from: u64,
        to: u64,
        mut each: impl FnMut(u64, &str, Value) -> Result<(), E>,
    ) -> Result<(), E> {
        let path = self.path.clone();
        let sql = RecordError::sqlite("read", &path);
        let to = to.min(i64::MAX as u64) as i64;
        let from = from.min(i64::MAX as u64) as i64;
        // A key first written after the keys were read (the run goes on): read them again.
        let count: i64 = self
            .conn
            .prepare_cached("SELECT COUNT(*) FROM keys")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
            .map_err(&sql)?;
        let unknown = count as usize != self.keys.len();
        if unknown {
            self.refresh_keys()?;
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT step, key, value FROM vals WHERE step >= ?1 AND step < ?2 ORDER BY step, key",
            )
            .map_err(&sql)?;
        let mut rows = stmt.query(params![from, to]).map_err(&sql)?;
        while let Some(row) = rows.next().map_err(&sql)? {
            let step = row.get::<_, i64>(0).map_err(&sql)? as u64;
            let key_id: i64 = row.get(1).map_err(&sql)?;
            let bytes = row
                .get_ref(2)
                .map_err(&sql)?
                .as_blob()
                .map_err(|e| sql(e.into()))?;
            let key = self
                .keys
                .get(&key_id)
                .map_or("?", |(name, _)| name.as_str());
            let value = decode(bytes).map_err(|source| RecordError::Damaged {
                path: path.clone(),
                step,
                key: key.to_string(),
                source,
            })?;
            each(step, key, value)?;
        }
        Ok(())
    }

    /// Calls `each(step)` for every step with a value, in increasing order.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the record cannot be read.
    pub fn for_each_step_number(&mut self, mut each: impl FnMut(u64)) -> Result<(), RecordError> {
        let path = self.path.clone();
        let sql = RecordError::sqlite("read", &path);
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT step FROM vals ORDER BY step")
            .map_err(&sql)?;
        let mut rows = stmt.query([]).map_err(&sql)?;
        while let Some(row) = rows.next().map_err(&sql)? {
            each(row.get::<_, i64>(0).map_err(&sql)? as u64);
        }
        Ok(())
    }

    /// Calls `each` with every step of `from..to` in order, each as an [`Output`] of that step
    /// alone with the record's names and kinds: one step in memory at a time (the exports and
    /// the TensorBoard writer read a record this way).
    ///
    /// # Errors
    ///
    /// As [`RecordReader::for_each`]; `each`'s own error stops the walk and is returned.
    pub fn for_each_step<E: From<RecordError>>(
        &mut self,
        from: u64,
        to: u64,
        mut each: impl FnMut(&Output) -> Result<(), E>,
    ) -> Result<(), E> {
        let frame = self.frame()?;
        let mut one = frame.clone();
        let mut current = None;
        self.for_each(from, to, |step, key, value| {
            if current.is_some_and(|c| c != step) {
                each(&std::mem::replace(&mut one, frame.clone()))?;
            }
            current = Some(step);
            one.insert(step as usize, key, value);
            Ok::<(), E>(())
        })?;
        if current.is_some() {
            each(&one)?;
        }
        Ok(())
    }

    /// Every value of steps `from..to`, with the record's names and kinds.
    ///
    /// # Errors
    ///
    /// As [`RecordReader::for_each`].
    pub fn read_range(&mut self, from: u64, to: u64) -> Result<Output, RecordError> {
        let mut output = self.frame()?;
        self.for_each(from, to, |step, key, value| {
            output.insert(step as usize, key, value);
            Ok(())
        })?;
        // Kinds of keys written between the frame and the walk (the run goes on).
        for (name, kind) in self.keys.values() {
            if let Some(kind) = kind {
                output.set_kind(name, kind);
            }
        }
        Ok(output)
    }

    /// The whole record in memory (its size grows with the run: prefer
    /// [`RecordReader::read_overview`] for a long one).
    ///
    /// # Errors
    ///
    /// As [`RecordReader::for_each`].
    pub fn read_all(&mut self) -> Result<Output, RecordError> {
        self.read_range(0, u64::MAX)
    }

    /// The record in at most about `3 · max_steps` steps per key, in one streaming pass: up to
    /// `max_steps` tracked steps it is read whole; beyond, the steps are cut into `max_steps`
    /// buckets of equal width and each bucket keeps, per key, the value with the smallest and
    /// the one with the largest magnitude (a number itself, a list its sum of squares) and its
    /// last value, so a one-step spike anywhere in the run stays in the overview. Histograms
    /// and other values keep the bucket's last.
    ///
    /// # Errors
    ///
    /// As [`RecordReader::for_each`].
    pub fn read_overview(&mut self, max_steps: usize) -> Result<Output, RecordError> {
        let extent = self.summary()?;
        let (Some(first), Some(last)) = (extent.first, extent.last) else {
            return self.frame();
        };
        let max_steps = max_steps.max(1) as u64;
        if extent.steps <= max_steps {
            return self.read_all();
        }
        let width = (last - first + 1).div_ceil(max_steps);
        let mut output = self.frame()?;
        let mut open: BTreeMap<String, Bucket> = BTreeMap::new();
        self.for_each(0, u64::MAX, |step, key, value| {
            let bucket = (step - first) / width;
            let entry = open
                .entry(key.to_string())
                .or_insert_with(|| Bucket::new(bucket));
            if entry.index != bucket {
                std::mem::replace(entry, Bucket::new(bucket)).file(key, &mut output);
            }
            entry.add(step, value);
            Ok(())
        })?;
        for (key, bucket) in open {
            bucket.file(&key, &mut output);
        }
        Ok(output)
    }
}

/// One key's values in one bucket of an overview.
struct Bucket {
    index: u64,
    smallest: Option<(f64, u64, Value)>,
    largest: Option<(f64, u64, Value)>,
    last: Option<(u64, Value)>,
}

impl Bucket {
    fn new(index: u64) -> Self {
        Self {
            index,
            smallest: None,
            largest: None,
            last: None,
        }
    }

    fn add(&mut self, step: u64, value: Value) {
        let magnitude = match &value {
            Value::List(v) => Some(v.iter().map(|x| x * x).sum::<f64>()),
            Value::Estimate(e) => Some(e.values.iter().map(|x| x * x).sum::<f64>()),
            other => other.as_f64(),
        };
        if let Some(m) = magnitude {
            // NaN and infinities are the most visible of all: they win both ends.
            let below = |known: &Option<(f64, u64, Value)>| {
                known
                    .as_ref()
                    .is_none_or(|(k, _, _)| !m.is_finite() || m < *k)
            };
            let above = |known: &Option<(f64, u64, Value)>| {
                known
                    .as_ref()
                    .is_none_or(|(k, _, _)| !m.is_finite() || m > *k)
            };
            if below(&self.smallest) {
                self.smallest = Some((m, step, value.clone()));
            }
            if above(&self.largest) {
                self.largest = Some((m, step, value.clone()));
            }
        }
        self.last = Some((step, value));
    }

    fn file(self, key: &str, output: &mut Output) {
        for (step, value) in [
            self.smallest.map(|(_, s, v)| (s, v)),
            self.largest.map(|(_, s, v)| (s, v)),
            self.last,
        ]
        .into_iter()
        .flatten()
        {
            output.insert(step as usize, key, value);
        }
    }
}
