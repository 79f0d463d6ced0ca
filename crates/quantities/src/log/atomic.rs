//! Files replaced whole: written to a temporary file beside the target, then renamed over it.

use std::io::Write;
use std::path::Path;

/// Writes `path` atomically: `write` fills a new temporary file in the same directory (a
/// unique name per call, so concurrent writers never share one), which is flushed to disk and
/// then renamed over `path`. An interruption at any point leaves either the previous file or
/// the new one, never a cut one; on an error the temporary file is removed and `path` is
/// untouched.
///
/// # Errors
///
/// The I/O error of creating, writing, syncing or renaming the temporary file.
pub fn write_atomic(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let path = path.as_ref();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(&format!(".partial{suffix}"))
        .tempfile_in(dir)?;
    write(temp.as_file_mut())?;
    temp.as_file_mut().flush()?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_nothing_behind_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.json");
        write_atomic(&path, |f| f.write_all(b"first")).unwrap();
        write_atomic(&path, |f| f.write_all(b"second")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let failed = write_atomic(&path, |f| {
            f.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"second",
            "the old file stays"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        let missing = dir.path().join("no/such/dir/log.json");
        assert!(write_atomic(missing, |f| f.write_all(b"x")).is_err());
    }
}
