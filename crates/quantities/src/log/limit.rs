//! The bound on what a reader takes in: every log, stream, config file and fixture is read
//! through [`read_bounded`], which refuses an input larger than the limit before holding more
//! than the limit in memory (an endless input such as `/dev/zero` included).

use std::io::Read;
use std::path::Path;

use super::LogError;

/// The default limit on a log or stream file: 1 GiB (a 10 000-step `economy` log is about
/// 70 MB; logs that keep every parameter value grow faster: raise it with
/// [`Reader::with_limit`] or `cockpit --max-input-bytes`).
pub const DEFAULT_READ_LIMIT: u64 = 1 << 30;

/// How the readers take a file in: the largest file they read. A value handed to each
/// reader (`read_log_with`, `read_stream_with`, `read_any_with`, `StreamTail::with_reader`,
/// `examples::read_table_with`), not a setting of the process: two readers in one program
/// keep their own limits. The readers without `_with` use [`Reader::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reader {
    limit: u64,
}

impl Reader {
    /// The smallest limit taken (a smaller one is raised to it).
    pub const MIN_LIMIT: u64 = 1024;

    /// Files of at most `bytes` bytes (at least [`Reader::MIN_LIMIT`]).
    pub fn with_limit(bytes: u64) -> Self {
        Self {
            limit: bytes.max(Self::MIN_LIMIT),
        }
    }

    /// The largest file taken, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Reads `path` as UTF-8 text within the limit ([`read_bounded`]).
    ///
    /// # Errors
    ///
    /// As [`read_bounded`].
    pub fn read_text(&self, path: &Path) -> Result<String, LogError> {
        read_bounded(path, self.limit)
    }
}

/// [`DEFAULT_READ_LIMIT`].
impl Default for Reader {
    fn default() -> Self {
        Self {
            limit: DEFAULT_READ_LIMIT,
        }
    }
}

/// Reads `path` as UTF-8 text of at most `limit` bytes.
///
/// # Errors
///
/// [`LogError::TooLarge`] past `limit` (read no further than one byte beyond it),
/// [`LogError::Io`] if unreadable or not UTF-8.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, LogError> {
    let io = |source| LogError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    if let Ok(metadata) = file.metadata()
        && metadata.is_file()
        && metadata.len() > limit
    {
        return Err(too_large(path, limit));
    }
    let mut text = String::new();
    file.take(limit.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > limit {
        return Err(too_large(path, limit));
    }
    Ok(text)
}

fn too_large(path: &Path, limit: u64) -> LogError {
    LogError::TooLarge {
        path: path.to_path_buf(),
        limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_input_is_refused_at_the_limit() {
        #[cfg(unix)]
        {
            let err = read_bounded(Path::new("/dev/zero"), 4096).unwrap_err();
            assert!(
                matches!(err, LogError::TooLarge { limit: 4096, .. }),
                "{err}"
            );
        }
        let dir = std::env::temp_dir().join(format!("cockpit-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.json");
        std::fs::write(&path, vec![b' '; 5000]).unwrap();
        assert!(matches!(
            read_bounded(&path, 4096),
            Err(LogError::TooLarge { .. })
        ));
        assert_eq!(read_bounded(&path, 5000).unwrap().len(), 5000);
        std::fs::write(&path, "a\nb\r\nc").unwrap();
        let lines: Vec<String> = read_bounded(&path, 100)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(lines, ["a", "b", "c"]);
        std::fs::remove_dir_all(&dir).ok();
    }
}
