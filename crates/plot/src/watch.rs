//! Live view: redraw the dashboard whenever the log grows.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use cockpit_quantities::Output;
use cockpit_quantities::log::{Reader, StreamTail, read_any_with};

use crate::{PlotError, PlotOptions, Rendered, save};

/// How [`watch`] polls.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchOptions {
    /// Time between checks of the log.
    pub interval: Duration,
    /// Stop once the log has not changed for this long (`None`: run until interrupted).
    pub idle_exit: Option<Duration>,
    /// How the log is read (the largest file taken).
    pub reader: Reader,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(500),
            idle_exit: None,
            reader: Reader::default(),
        }
    }
}

/// One redraw, reported to the caller.
#[derive(Debug)]
pub enum WatchEvent<'a> {
    /// The dashboard was redrawn from a log with `steps` steps.
    Drawn {
        /// Steps in the log.
        steps: usize,
        /// What was drawn.
        rendered: &'a Rendered,
    },
    /// The log could not be read or drawn this time (it may be mid-write); the last image
    /// stays, and the next change is tried again.
    Skipped(&'a PlotError),
}

/// Redraws `out` from `log` (a JSON-lines stream as training writes it, or a JSON log) each
/// time the file changes. A stream is followed by its tail ([`StreamTail`]: each change reads
/// the lines appended since the last, not the whole file); a JSON log, rewritten whole by each
/// write, is read whole. The image is replaced atomically ([`save`]), so a viewer never sees
/// half an image, and two watchers of one image never share a temporary file.
///
/// # Errors
///
/// [`PlotError::Write`] if the image cannot be written; [`PlotError::NoLog`] if the log never
/// appeared before `idle_exit` ran out. Read errors are reported through `on_event` and
/// retried.
pub fn watch(
    log: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: &PlotOptions,
    watch: &WatchOptions,
    mut on_event: impl FnMut(WatchEvent<'_>),
) -> Result<(), PlotError> {
    let (log, out) = (log.as_ref(), out.as_ref());
    let mut seen: Option<(u64, Option<SystemTime>)> = None;
    let mut last_change = Instant::now();
    let mut tail = log
        .extension()
        .is_some_and(|e| e == "jsonl")
        .then(|| (StreamTail::with_reader(&watch.reader, log), Output::new()));
    loop {
        let stamp = cockpit_quantities::log::change_stamp(log);
        if stamp.is_some() && stamp != seen {
            seen = stamp;
            last_change = Instant::now();
            let drawn = match &mut tail {
                Some((tail, output)) => match tail.poll_into(output) {
                    Ok(tailed) => match tailed.problem {
                        Some(problem) => Err(PlotError::from(problem)),
                        None => save(output, out, options).map(|r| (output.steps().count(), r)),
                    },
                    Err(err) => Err(PlotError::from(err)),
                },
                None => read_any_with(&watch.reader, log)
                    .map_err(PlotError::from)
                    .and_then(|output| {
                        let steps = output.steps().count();
                        save(&output, out, options).map(|r| (steps, r))
                    }),
            };
            match drawn {
                Ok((steps, rendered)) => {
                    on_event(WatchEvent::Drawn {
                        steps,
                        rendered: &rendered,
                    });
                }
                Err(err @ PlotError::Write { .. }) => return Err(err),
                Err(err) => on_event(WatchEvent::Skipped(&err)),
            }
        }
        if watch
            .idle_exit
            .is_some_and(|idle| last_change.elapsed() >= idle)
        {
            return match seen {
                Some(_) => Ok(()),
                None => Err(PlotError::NoLog {
                    path: log.to_path_buf(),
                    waited: last_change.elapsed(),
                }),
            };
        }
        std::thread::sleep(watch.interval);
    }
}
