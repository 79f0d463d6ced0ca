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
    /// Drawing failed: the drawing backend's message (plotters' error is generic over a
    /// backend whose error type need not be `'static`, so its words are kept, not the value).
    #[error("drawing failed: {0}")]
    Draw(String),
    /// The image could not be written.
    #[error("cannot write `{}`: {reason}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The file system's error in words ("the disk is full").
        reason: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

/// Maps any plotters error into [`PlotError::Draw`]: its message and its sources' messages.
pub(crate) fn draw_err<E: std::error::Error>(err: E) -> PlotError {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    PlotError::Draw(message)
}
