//! [`RunRecord`]: a run written to SQLite as it goes.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};

use super::codec::encode;
use super::error::RecordError;
use super::schema;
use crate::Output;
use crate::sink::{Record, Sink, SinkError};

/// How long written steps may wait for their commit by default: a kill loses at most this
/// much of the run, which a resume recomputes.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// The Cockpit states kept by default for resuming (the newest ones; older are deleted).
pub const DEFAULT_KEPT_STATES: usize = 4;

/// A run's record, written as the run goes: every tracked step's values and every epoch entry
/// in an SQLite database (`rusqlite` with its bundled library), committed at most
/// [`DEFAULT_COMMIT_INTERVAL`] apart, and the Cockpit's state saved at checkpoints for a resume
/// ([`Cockpit::checkpoint`](crate::Cockpit::checkpoint),
/// [`Cockpit::resume`](crate::Cockpit::resume)).
///
/// Hand it to [`Cockpit::with_record`](crate::Cockpit::with_record): the Cockpit then keeps no
/// history in memory. A viewer ([`RecordReader`](super::RecordReader), `cockpit plot`,
/// `diagnose`, `serve`, `export`) reads the file while it is written (SQLite's write-ahead
/// log). One writer at a time: a second is refused ([`RecordError::Busy`]).
///
/// # Cost
///
/// One `INSERT` per value, batched in one transaction per commit interval; values are stored
/// exactly and compactly (histogram counts as varints, uniform edges as their bounds): about
/// 0.5 KB a step for `economy` on the benchmark MLP.
pub struct RunRecord {
    path: PathBuf,
    conn: Connection,
    /// Held for the writer's lifetime (`<record>.lock`).
    _lock: File,
    keys: HashMap<String, i64>,
    names_written: bool,
    in_transaction: bool,
    last_commit: Instant,
    commit_interval: Duration,
    kept_states: usize,
    buffer: Vec<u8>,
    /// Time spent writing and committing ([`RunRecord::time_spent`]).
    spent: Duration,
}

impl std::fmt::Debug for RunRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRecord")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RunRecord {
    /// Creates a new record at `path`, replacing any record there (its `-wal` and `-shm`
    /// files too).
    ///
    /// # Errors
    ///
    /// [`RecordError::Busy`] if another writer holds the record (nothing is removed then),
    /// [`RecordError::Io`] or [`RecordError::Sqlite`] if it cannot be created.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref().to_path_buf();
        let lock = lock(&path)?;
        for suffix in ["", "-wal", "-shm"] {
            let file = with_suffix(&path, suffix);
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(RecordError::Io {
                        action: "replace",
                        path: file,
                        source,
                    });
                }
            }
        }
        Self::with_lock(path, lock, true)
    }

    /// Opens an existing record to continue it (a resumed run), or creates it where there is
    /// none.
    ///
    /// # Errors
    ///
    /// As [`RunRecord::create`], and [`RecordError::NotARecord`] for a database that is not a
    /// run record.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref().to_path_buf();
        let lock = lock(&path)?;
        let fresh = !path.exists();
        Self::with_lock(path, lock, fresh)
    }

    fn with_lock(path: PathBuf, lock: File, fresh: bool) -> Result<Self, RecordError> {
        let sql = |action| RecordError::sqlite(action, &path);
        let conn = Connection::open(&path).map_err(sql("opened"))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
        )
        .map_err(sql("opened"))?;
        if fresh {
            conn.execute_batch(schema::CREATE).map_err(sql("created"))?;
            conn.execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('format', ?1)",
                params![schema::FORMAT.to_string()],
            )
            .map_err(sql("created"))?;
        } else {
            schema::check(&conn, &path)?;
        }
        let mut keys = HashMap::new();
        {
            let mut stmt = conn
                .prepare("SELECT id, name FROM keys")
                .map_err(sql("read"))?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((row.get::<_, String>(1)?, row.get::<_, i64>(0)?))
                })
                .map_err(sql("read"))?;
            for row in rows {
                let (name, id) = row.map_err(sql("read"))?;
                keys.insert(name, id);
            }
        }
        let names_written = conn
            .query_row(
                "SELECT 1 FROM meta WHERE name = 'parameter_names'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map_err(sql("read"))?
            .is_some();
        Ok(Self {
            path,
            conn,
            _lock: lock,
            keys,
            names_written,
            in_transaction: false,
            last_commit: Instant::now(),
            commit_interval: DEFAULT_COMMIT_INTERVAL,
            kept_states: DEFAULT_KEPT_STATES,
            buffer: Vec::new(),
            spent: Duration::ZERO,
        })
    }

    /// Commits at most `interval` apart (a kill loses at most this much); `Duration::ZERO`
    /// commits every call.
    pub fn with_commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = interval;
        self
    }

    /// Keeps the newest `count` saved Cockpit states (at least one).
    pub fn with_kept_states(mut self, count: usize) -> Self {
        self.kept_states = count.max(1);
        self
    }

    /// The time spent encoding, writing and committing values and states so far: what the
    /// record costs a run.
    pub fn time_spent(&self) -> Duration {
        self.spent
    }

    /// The record's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, action: &'static str) -> impl Fn(rusqlite::Error) -> RecordError + use<> {
        RecordError::sqlite(action, &self.path)
    }

    fn begin(&mut self) -> Result<(), RecordError> {
        if !self.in_transaction {
            self.conn
                .execute_batch("BEGIN")
                .map_err(self.sql("written"))?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Commits what was written so far.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the disk refuses the commit.
    pub fn commit(&mut self) -> Result<(), RecordError> {
        let started = Instant::now();
        let committed = self.commit_now();
        self.spent += started.elapsed();
        committed
    }

    fn commit_now(&mut self) -> Result<(), RecordError> {
        if self.in_transaction {
            self.conn
                .execute_batch("COMMIT")
                .map_err(self.sql("written"))?;
            self.in_transaction = false;
        }
        self.last_commit = Instant::now();
        Ok(())
    }

    fn key_id(&mut self, key: &str, kind: &str) -> Result<i64, RecordError> {
        if let Some(&id) = self.keys.get(key) {
            return Ok(id);
        }
        let kind = (kind != key).then_some(kind);
        self.conn
            .execute(
                "INSERT INTO keys (name, kind) VALUES (?1, ?2)",
                params![key, kind],
            )
            .map_err(self.sql("written"))?;
        let id = self.conn.last_insert_rowid();
        self.keys.insert(key.to_string(), id);
        Ok(id)
    }

    /// Writes `values` (every step and key in it, replacing what the record held there) and
    /// the parameters' names where not yet written; commits when the interval is over.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the disk refuses the write.
    pub fn write_values(
        &mut self,
        values: &Output,
        parameter_names: &[String],
    ) -> Result<(), RecordError> {
        let started = Instant::now();
        let written = self.write_now(values, parameter_names);
        self.spent += started.elapsed();
        written
    }

    fn write_now(
        &mut self,
        values: &Output,
        parameter_names: &[String],
    ) -> Result<(), RecordError> {
        self.begin()?;
        if !self.names_written && !parameter_names.is_empty() {
            let names = serde_json::to_string(parameter_names).unwrap_or_default();
            self.conn
                .execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES ('parameter_names', ?1)",
                    params![names],
                )
                .map_err(self.sql("written"))?;
            self.names_written = true;
        }
        for (step, key, value) in values.iter() {
            let id = self.key_id(key, values.kind_name(key))?;
            self.buffer.clear();
            encode(value, &mut self.buffer);
            let mut stmt = self
                .conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO vals (step, key, value) VALUES (?1, ?2, ?3)",
                )
                .map_err(self.sql("written"))?;
            stmt.execute(params![step as i64, id, &self.buffer])
                .map_err(self.sql("written"))?;
        }
        if self.last_commit.elapsed() >= self.commit_interval {
            self.commit_now()?;
        }
        Ok(())
    }

    /// Saves a Cockpit state for a resume at `step` (the next step to track) and commits;
    /// older states beyond [`RunRecord::with_kept_states`] are deleted.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the disk refuses the write.
    pub(crate) fn save_state(&mut self, step: usize, state: &[u8]) -> Result<(), RecordError> {
        self.begin()?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO states (step, data) VALUES (?1, ?2)",
                params![step as i64, state],
            )
            .map_err(self.sql("written"))?;
        self.conn
            .execute(
                "DELETE FROM states WHERE step NOT IN \
                 (SELECT step FROM states ORDER BY step DESC LIMIT ?1)",
                params![self.kept_states as i64],
            )
            .map_err(self.sql("written"))?;
        self.commit()
    }

    /// The Cockpit state saved for `step`.
    ///
    /// # Errors
    ///
    /// [`RecordError::NoState`] naming the saved steps when there is none for `step`.
    pub(crate) fn load_state(&mut self, step: usize) -> Result<Vec<u8>, RecordError> {
        let found: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT data FROM states WHERE step = ?1",
                params![step as i64],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.sql("read"))?;
        if let Some(state) = found {
            return Ok(state);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT step FROM states ORDER BY step")
            .map_err(self.sql("read"))?;
        let saved = stmt
            .query_map([], |row| row.get::<_, i64>(0))
            .map_err(self.sql("read"))?
            .filter_map(Result::ok)
            .map(|s| s as u64)
            .collect();
        Err(RecordError::NoState {
            path: self.path.clone(),
            step: step as u64,
            saved,
        })
    }

    /// Notes that epoch `epoch` (counted from 1) ended before step `next` (the state of a
    /// checkpoint at that step resumes the epoch after it); committed.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the disk refuses the write.
    pub fn mark_epoch(&mut self, epoch: usize, next: usize) -> Result<(), RecordError> {
        self.begin()?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES (?1, ?2)",
                params![format!("epoch.{epoch}"), next.to_string()],
            )
            .map_err(self.sql("written"))?;
        self.commit()
    }

    /// The step epoch `epoch` ended before ([`RunRecord::mark_epoch`]), if noted.
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the record cannot be read.
    pub fn epoch_end(&self, epoch: usize) -> Result<Option<usize>, RecordError> {
        let found: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE name = ?1",
                params![format!("epoch.{epoch}")],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.sql("read"))?;
        Ok(found.and_then(|v| v.parse().ok()))
    }

    /// Deletes the values of steps from `step` on, and the states saved after it: a run resumed
    /// at `step` writes them again (superseded, never duplicated).
    ///
    /// # Errors
    ///
    /// [`RecordError::Sqlite`] if the disk refuses the write.
    pub(crate) fn truncate_from(&mut self, step: usize) -> Result<(), RecordError> {
        self.begin()?;
        for sql in [
            "DELETE FROM vals WHERE step >= ?1",
            "DELETE FROM states WHERE step > ?1",
        ] {
            self.conn
                .execute(sql, params![step as i64])
                .map_err(self.sql("written"))?;
        }
        self.commit()
    }
}

/// Commits what is left; an error here can only be logged.
impl Drop for RunRecord {
    fn drop(&mut self) {
        if let Err(e) = self.commit() {
            log::warn!("{e}");
        }
    }
}

impl Sink for RunRecord {
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError> {
        self.write_values(record.values, record.parameter_names)
            .map_err(|e| SinkError::other("run record", e))
    }
}

pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Takes `<record>.lock`, exclusively, for as long as the returned file lives.
fn lock(path: &Path) -> Result<File, RecordError> {
    let lock_path = with_suffix(path, ".lock");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|source| RecordError::Io {
            action: "lock",
            path: lock_path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(RecordError::Busy {
            path: path.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(RecordError::Io {
            action: "lock",
            path: lock_path,
            source,
        }),
    }
}
