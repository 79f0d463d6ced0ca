//! Files replaced whole: written to a temporary file beside the target, then renamed over it.

use std::io::Write;
use std::path::Path;

/// Writes `path` atomically: `write` fills a new temporary file in the same directory (a
/// unique name per call, so concurrent writers never share one), which is flushed to disk and
/// then renamed over `path`. An interruption at any point leaves either the previous file or
/// the new one, never a cut one; on an error the temporary file is removed and `path` is
/// untouched.
///
/// The file keeps what a user set on it: a symlink is written through (its target is
/// replaced, the link stays), and an existing file's permissions carry over to the new one
/// (a new file gets `0644`, as most shells' `umask` gives).
///
/// # Errors
///
/// The I/O error of creating, writing, syncing or renaming the temporary file.
pub fn write_atomic(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let target = through_links(path.as_ref());
    let path = target.as_path();
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
    match std::fs::metadata(path) {
        Ok(existing) => temp.as_file().set_permissions(existing.permissions())?,
        Err(_) => {
            if let Some(permissions) = new_file_permissions() {
                temp.as_file().set_permissions(permissions)?;
            }
        }
    }
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// The file a chain of symlinks at `path` ends in (at most 40 links, as the kernel allows);
/// `path` itself when it is not a link.
fn through_links(path: &Path) -> std::path::PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        let is_link = std::fs::symlink_metadata(&current).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            break;
        }
        match std::fs::read_link(&current) {
            Ok(next) if next.is_absolute() => current = next,
            Ok(next) => {
                current = current
                    .parent()
                    .map_or_else(|| next.clone(), |dir| dir.join(&next));
            }
            Err(_) => break,
        }
    }
    current
}

/// What a new file is created with: `0644` on Unix (a temporary file is `0600`); elsewhere
/// the temporary file's own, an ordinary writable file.
#[cfg(unix)]
fn new_file_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn new_file_permissions() -> Option<std::fs::Permissions> {
    None
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

    /// A rewrite keeps the file's mode and writes through a symlink to its target.
    #[cfg(unix)]
    #[test]
    fn mode_and_symlinks_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.json");
        write_atomic(&path, |f| f.write_all(b"first")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode(&path),
            0o644,
            "a new file is 0644, not the temporary file's 0600"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&path, |f| f.write_all(b"second")).unwrap();
        assert_eq!(mode(&path), 0o640);
        let link = dir.path().join("latest.json");
        std::os::unix::fs::symlink("log.json", &link).unwrap();
        write_atomic(&link, |f| f.write_all(b"third")).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"third");
        assert_eq!(mode(&path), 0o640);
    }
}
