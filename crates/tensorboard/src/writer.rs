//! [`TensorBoardWriter`]: Cockpit's values as a TensorBoard event file.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;

use cockpit_quantities::sink::{Record, Sink, SinkError};
use cockpit_quantities::{Histogram1d, Histogram2d, Output, QuantityKind, Value};

use crate::error::TensorBoardError;
use crate::proto::{Event, HistogramProto, Image, Payload, Summary, SummaryValue, What};
use crate::record::frame;

/// The prefix of every tag the writer writes.
pub const TAG_PREFIX: &str = "cockpit";

/// Writes Cockpit's values to one TensorBoard event file, flushed after every step so that
/// TensorBoard shows a run in progress and a crash loses nothing written.
///
/// - a number (Loss, Alpha, NormTest, …) becomes the scalar `cockpit/<Quantity>`;
/// - a per-parameter list (GradNorm, Distance, HessTrace, …) becomes one scalar per parameter,
///   `cockpit/<Quantity>/<parameter name>` (the parameter's index where names are unknown,
///   e.g. in a log), and the network-wide scalar `cockpit/<Quantity>` by the reduction the
///   quantity's spec states ([`QuantityKind::reduction`]);
/// - GradHist1d becomes a TensorBoard histogram with Cockpit's own edges and counts (bucket
///   `k + 1` is `[e_k, e_{k+1})`'s count; the first bucket, up to `e_0`, is empty), not
///   re-binned; GradHist2d its gradient marginal (`cockpit/<Quantity>/gradients`);
/// - an estimate (HessTrace on an estimated diagonal) is written as its list is, and its
///   standard errors as `cockpit/<Quantity>/stderr` (network-wide, in quadrature) and
///   `cockpit/<Quantity>/<parameter name>/stderr`;
/// - the per-parameter arrays of `Parameters` and values of other tools are skipped.
///
/// A histogram's `sum` and `sum_squares` are not in Cockpit's values; they are taken at the
/// bins' centres, and `min`/`max` are the outer edges of the first and last non-empty bins.
#[derive(Debug)]
pub struct TensorBoardWriter {
    path: PathBuf,
    file: File,
}

impl TensorBoardWriter {
    /// Creates `dir` if needed and a new event file in it
    /// (`events.out.tfevents.<seconds>.<host>.<pid>.<n>.cockpit`, `n` the first number whose
    /// file does not exist yet: two Cockpits of one run may share a folder), and writes the
    /// file's version.
    ///
    /// # Errors
    ///
    /// [`TensorBoardError::Io`] if the directory or the file cannot be created or written.
    pub fn create(dir: impl AsRef<Path>) -> Result<Self, TensorBoardError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| TensorBoardError::Io {
            action: "create",
            path: dir.to_path_buf(),
            source,
        })?;
        for n in 0..MAX_FILES_PER_SECOND {
            match Self::create_file(event_file_name(dir, n)) {
                Err(TensorBoardError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => return other,
            }
        }
        Err(TensorBoardError::Io {
            action: "create",
            path: event_file_name(dir, MAX_FILES_PER_SECOND),
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        })
    }

    /// A new event file at exactly `path`, with the file's version written.
    fn create_file(path: PathBuf) -> Result<Self, TensorBoardError> {
        let file = File::options()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|source| TensorBoardError::Io {
                action: "create",
                path: path.clone(),
                source,
            })?;
        let mut writer = Self { path, file };
        writer.write_event(Event {
            wall_time: now(),
            step: 0,
            what: Some(What::FileVersion("brain.Event:2".into())),
        })?;
        Ok(writer)
    }

    /// Exports a whole log into `dir` as one event file, all or nothing: the events are
    /// written to a temporary file (a name TensorBoard does not read), synced and renamed, so
    /// a failed export (a full disk) leaves no event file. A folder that already holds event
    /// files is refused unless `replace`, which removes them once the new one is in place
    /// (TensorBoard would otherwise show every step twice). Returns the event file.
    ///
    /// # Errors
    ///
    /// [`TensorBoardError::AlreadyExported`] for a folder with event files and no `replace`,
    /// [`TensorBoardError::Io`] if the folder or the file cannot be written.
    pub fn export(
        dir: impl AsRef<Path>,
        output: &Output,
        names: &[String],
        replace: bool,
    ) -> Result<PathBuf, TensorBoardError> {
        Self::export_with(dir, replace, |writer| writer.write_output(output, names))
    }

    /// [`TensorBoardWriter::export`] with the events written by `write`, for values that are
    /// not in memory at once (a run record read one step at a time: `write` calls
    /// [`TensorBoardWriter::write_output`] with each step). The file appears under its final
    /// name only once `write` succeeded.
    ///
    /// # Errors
    ///
    /// As [`TensorBoardWriter::export`], and `write`'s own error (the partial file removed).
    pub fn export_with<E: From<TensorBoardError>>(
        dir: impl AsRef<Path>,
        replace: bool,
        write: impl FnOnce(&mut Self) -> Result<(), E>,
    ) -> Result<PathBuf, E> {
        let dir = dir.as_ref();
        let io = |action: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| TensorBoardError::Io {
                action,
                path,
                source,
            }
        };
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        let existing: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io("read", dir))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("events.out.tfevents."))
            })
            .collect();
        if !existing.is_empty() && !replace {
            return Err(TensorBoardError::AlreadyExported {
                dir: dir.to_path_buf(),
                files: existing.len(),
            }
            .into());
        }
        let final_path = (0..MAX_FILES_PER_SECOND)
            .map(|n| event_file_name(dir, n))
            .find(|path| !path.exists())
            .unwrap_or_else(|| event_file_name(dir, MAX_FILES_PER_SECOND));
        let temp = dir.join(format!(
            ".cockpit-export.{}.partial",
            final_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
                .replace("tfevents", "events")
        ));
        let written = (|| {
            let mut writer = Self::create_file(temp.clone())?;
            write(&mut writer)?;
            writer.file.flush().map_err(|source| writer.io(source))?;
            writer.file.sync_all().map_err(|source| writer.io(source))?;
            std::fs::rename(&temp, &final_path).map_err(io("write", &final_path))?;
            Ok::<(), E>(())
        })();
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(err);
        }
        for old in existing {
            std::fs::remove_file(&old).map_err(io("remove", &old))?;
        }
        Ok(final_path)
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes every value of `output`, one event per step, and flushes. `names` are the
    /// parameters' names in the order of per-parameter lists (empty where unknown: the
    /// parameters' indices are used).
    ///
    /// # Errors
    ///
    /// [`TensorBoardError::Io`] if the file cannot be written.
    pub fn write_output(
        &mut self,
        output: &Output,
        names: &[String],
    ) -> Result<(), TensorBoardError> {
        for step in output.steps() {
            let Some(values) = output.at(step) else {
                continue;
            };
            let summary: Vec<SummaryValue> = values
                .iter()
                .flat_map(|(name, value)| {
                    summary_values(name, QuantityKind::of_key(output, name), value, names)
                })
                .collect();
            if summary.is_empty() {
                continue;
            }
            self.write_event(Event {
                wall_time: now(),
                step: i64::try_from(step).unwrap_or(i64::MAX),
                what: Some(What::Summary(Summary { value: summary })),
            })?;
        }
        self.file.flush().map_err(|source| self.io(source))
    }

    /// Writes a PNG image (e.g. the dashboard) under `tag` at `step`, and flushes.
    ///
    /// # Errors
    ///
    /// [`TensorBoardError::Io`] if the file cannot be written.
    pub fn write_png(
        &mut self,
        tag: &str,
        step: usize,
        png: Vec<u8>,
        (width, height): (u32, u32),
    ) -> Result<(), TensorBoardError> {
        let image = Image {
            height: i32::try_from(height).unwrap_or(i32::MAX),
            width: i32::try_from(width).unwrap_or(i32::MAX),
            colorspace: 3,
            encoded_image_string: png,
        };
        self.write_event(Event {
            wall_time: now(),
            step: i64::try_from(step).unwrap_or(i64::MAX),
            what: Some(What::Summary(Summary {
                value: vec![SummaryValue {
                    tag: tag.to_string(),
                    payload: Some(Payload::Image(image)),
                }],
            })),
        })?;
        self.file.flush().map_err(|source| self.io(source))
    }

    fn write_event(&mut self, event: Event) -> Result<(), TensorBoardError> {
        let record = frame(&event.encode_to_vec());
        self.file
            .write_all(&record)
            .map_err(|source| self.io(source))
    }

    fn io(&self, source: std::io::Error) -> TensorBoardError {
        TensorBoardError::Io {
            action: "write",
            path: self.path.clone(),
            source,
        }
    }
}

/// Seconds since the Unix epoch.
/// The writer as a Cockpit's sink: each tracked step's values and each epoch entry, as
/// [`TensorBoardWriter::write_output`] writes them, flushed at once. Share it as
/// `Arc<Mutex<TensorBoardWriter>>` to add images ([`TensorBoardWriter::write_png`]) to the same
/// file.
impl Sink for TensorBoardWriter {
    fn write(&mut self, record: &Record<'_>) -> Result<(), SinkError> {
        self.write_output(record.values, record.parameter_names)
            .map_err(|err| SinkError::other("TensorBoard", err))
    }
}

/// How many event files one process names in one folder within one second before giving up.
const MAX_FILES_PER_SECOND: usize = 10_000;

/// An event file's name in `dir`: `events.out.tfevents.<seconds>.<host>.<pid>.<n>.cockpit`
/// (the caller tries `n` upwards until a name is free).
fn event_file_name(dir: &Path, n: usize) -> PathBuf {
    let seconds = now().floor() as u64;
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or_else(|| "localhost".to_string());
    dir.join(format!(
        "events.out.tfevents.{seconds}.{host}.{}.{}.cockpit",
        std::process::id(),
        n
    ))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The tagged values one of Cockpit's values becomes.
fn summary_values(
    name: &str,
    kind: Option<QuantityKind>,
    value: &Value,
    names: &[String],
) -> Vec<SummaryValue> {
    let tag = format!("{TAG_PREFIX}/{name}");
    let scalar = |tag: String, v: f64| SummaryValue {
        tag,
        payload: Some(Payload::SimpleValue(v as f32)),
    };
    match value {
        Value::Int(v) => vec![scalar(tag, *v as f64)],
        Value::Float(v) => vec![scalar(tag, *v)],
        Value::List(values) => {
            let mut out = Vec::with_capacity(values.len() + 1);
            if let Some(reduction) = kind.and_then(QuantityKind::reduction) {
                out.push(scalar(tag.clone(), reduction.apply(values)));
            }
            for (i, v) in values.iter().enumerate() {
                let layer = names.get(i).cloned().unwrap_or_else(|| i.to_string());
                out.push(scalar(format!("{tag}/{layer}"), *v));
            }
            out
        }
        Value::Estimate(estimate) => {
            // The values as a list's, then their standard errors under `…/stderr`.
            let mut out = summary_values(name, kind, &Value::List(estimate.values.clone()), names);
            out.push(scalar(format!("{tag}/stderr"), estimate.stderr_of_sum()));
            for (i, e) in estimate.stderr.iter().enumerate() {
                let layer = names.get(i).cloned().unwrap_or_else(|| i.to_string());
                out.push(scalar(format!("{tag}/{layer}/stderr"), *e));
            }
            out
        }
        Value::Hist1d(h) => histogram(tag, h).into_iter().collect(),
        Value::Hist2d(h) => histogram(format!("{tag}/gradients"), &gradient_marginal(h))
            .into_iter()
            .collect(),
        Value::Examples(e) => vec![
            scalar(format!("{tag}/half_fraction"), e.half_fraction()),
            scalar(format!("{tag}/half_count"), e.half as f64),
            scalar(format!("{tag}/top_share"), e.top_share()),
        ],
        _ => Vec::new(),
    }
}

/// A 2-d histogram's counts summed over the parameter-value axis.
fn gradient_marginal(h: &Histogram2d) -> Histogram1d {
    let (x_bins, y_bins) = h.bins;
    let hist = (0..x_bins)
        .map(|x| {
            (0..y_bins)
                .map(|y| h.hist.get(x * y_bins + y).copied().unwrap_or(0) as f64)
                .sum()
        })
        .collect();
    Histogram1d {
        hist,
        edges: h.x_edges.clone(),
    }
}

/// Cockpit's bins as TensorBoard buckets, exact: limits `e_0, …, e_K`, counts `0, c_0, …`
/// (`None` for a histogram without a bin).
fn histogram(tag: String, h: &Histogram1d) -> Option<SummaryValue> {
    let counts = &h.hist;
    let edges = &h.edges;
    let bins = counts.len().min(edges.len().saturating_sub(1));
    if bins == 0 {
        return None;
    }
    let centre = |k: usize| 0.5 * (edges[k] + edges[k + 1]);
    let occupied: Vec<usize> = (0..bins).filter(|&k| counts[k] != 0.0).collect();
    let (min, max) = match (occupied.first(), occupied.last()) {
        (Some(&first), Some(&last)) => (edges[first], edges[last + 1]),
        _ => (0.0, 0.0),
    };
    let sum = (0..bins).map(|k| counts[k] * centre(k)).sum();
    let sum_squares = (0..bins).map(|k| counts[k] * centre(k) * centre(k)).sum();
    let mut bucket = Vec::with_capacity(bins + 1);
    bucket.push(0.0);
    bucket.extend_from_slice(&counts[..bins]);
    Some(SummaryValue {
        tag,
        payload: Some(Payload::Histo(HistogramProto {
            min,
            max,
            num: counts[..bins].iter().sum(),
            sum,
            sum_squares,
            bucket_limit: edges[..=bins].to_vec(),
            bucket,
        })),
    })
}
