//! Errors of the dashboard.

use std::path::PathBuf;

use cockpit_quantities::log::LogError;

/// Why a dashboard could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// The log could not be read or parsed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log holds no step.
    #[error("the log has no steps: nothing to draw")]
    Empty,
    /// The output file's extension is neither `.png` nor `.svg`.
    #[error("cannot tell the image format of `{}`: use a .png or .svg file name", .0.display())]
    Format(PathBuf),
    /// A size too small to lay the dashboard out, or larger than
    /// [`PlotOptions::MAX_SIDE`](crate::PlotOptions::MAX_SIDE) on a side.
    #[error("a dashboard needs between 600x300 and 16384x16384 pixels, not {width}x{height}")]
    Size {
        /// Requested width.
        width: u32,
        /// Requested height.
        height: u32,
    },
    /// `--watch` gave up: the log never appeared.
    #[error(
        "`{}` did not appear within {:.1} s of watching; nothing was drawn (is training writing to another path?)",
        path.display(),
        waited.as_secs_f64()
    )]
    NoLog {
        /// The log that was watched.
        path: PathBuf,
        /// How long it was waited for.
        waited: std::time::Duration,
    },
    /// The embedded font does not parse (a broken build: the font is part of the binary).
    #[error("the embedded DejaVu Sans font does not parse")]
    Font,
    /// Drawing failed: plotters' error (the drawing backend's) as the source.
    #[error("drawing failed")]
    Draw(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The image could not be written.
    #[error("cannot write `{}`{}", path.display(), io_hint(source))]
    Write {
        /// The output file.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

/// Maps any plotters error into [`PlotError::Draw`], kept whole as the source.
pub(crate) fn draw_err<E: std::error::Error + Send + Sync + 'static>(err: E) -> PlotError {
    PlotError::Draw(Box::new(err))
}

/// What a file system error means for the image, where the operating system's words do not say
/// it plainly (the error itself follows as the source).
pub(crate) fn io_hint(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::NotFound => ": its folder does not exist",
        std::io::ErrorKind::PermissionDenied => ": permission denied",
        std::io::ErrorKind::StorageFull => ": the disk is full",
        std::io::ErrorKind::ReadOnlyFilesystem => ": the file system is read-only",
        _ => "",
    }
}
