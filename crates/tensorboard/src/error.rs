//! Errors of writing TensorBoard event files.

use std::path::PathBuf;

/// Why an event file could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TensorBoardError {
    /// A folder or event file could not be created, read or written.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// "read", "write" or "create".
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// An export into a folder that already holds TensorBoard event files (TensorBoard would
    /// show each step twice).
    #[error(
        "`{}` already holds {files} TensorBoard event file(s); export into a new folder, or \
         pass --replace to replace them",
        dir.display()
    )]
    AlreadyExported {
        /// The folder.
        dir: PathBuf,
        /// How many event files it holds.
        files: usize,
    },
}
