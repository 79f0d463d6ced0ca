//! [`StreamTail`]: a growing JSON-lines stream read by what was appended since the last look.

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::LogError;
use super::limit::Reader;
use super::stream::decode_line;
use crate::Output;

/// How many of the file's first bytes identify it: a stream rewritten from the start (a new
/// run on the same path) begins with other bytes, or is shorter than what was read.
const HEAD_BYTES: usize = 256;

/// Reads a JSON-lines stream ([`JsonLinesWriter`](super::JsonLinesWriter)) as it grows: each
/// [`StreamTail::poll_into`] reads only the bytes appended since the last one and merges their
/// complete lines into an [`Output`], so following a long run costs what was appended, not the
/// whole file. A file that was truncated or rewritten (shorter than what was read, or its first
/// bytes changed) is read again from the start. A line still being written (no newline yet) is
/// left for the next look; a bad complete line stops the read before it and is reported, and is
/// looked at again next time.
#[derive(Debug)]
pub struct StreamTail {
    path: PathBuf,
    /// The end of the last complete line merged.
    offset: u64,
    /// Complete lines merged (for line numbers in errors).
    lines: usize,
    /// The file's first bytes as they were read.
    head: Vec<u8>,
    /// The largest file taken.
    reader: Reader,
}

/// What one [`StreamTail::poll_into`] found.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Tailed {
    /// The file was truncated or rewritten: the output was cleared and read from the start.
    pub restarted: bool,
    /// The steps that received values from the lines read (a two-step quantity's line also
    /// fills the step before).
    pub steps: BTreeSet<usize>,
    /// Complete lines merged by this look.
    pub lines: usize,
    /// Bytes read by this look.
    pub bytes: u64,
    /// The first bad complete line, if any: nothing after it was merged.
    pub problem: Option<LogError>,
}

impl StreamTail {
    /// A tail of the stream at `path`, nothing read yet, within the
    /// [`DEFAULT_READ_LIMIT`](super::DEFAULT_READ_LIMIT).
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self::with_reader(&Reader::default(), path)
    }

    /// [`StreamTail::new`] within `reader`'s limit.
    pub fn with_reader(reader: &Reader, path: impl AsRef<Path>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            offset: 0,
            lines: 0,
            head: Vec::new(),
            reader: *reader,
        }
    }

    /// The stream's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the file read and merged so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Merges the complete lines appended since the last look into `output` (cleared first
    /// when the file was truncated or rewritten).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file cannot be read, [`LogError::TooLarge`] if it is larger
    /// than its [`Reader`]'s limit (nothing is merged). A bad line is not an
    /// error of the call but [`Tailed::problem`].
    pub fn poll_into(&mut self, output: &mut Output) -> Result<Tailed, LogError> {
        let (mut file, len) = self.open()?;
        let limit = self.reader.limit();
        if len > limit {
            return Err(LogError::TooLarge {
                path: self.path.clone(),
                limit,
            });
        }
        let mut tailed = Tailed::default();
        if self.moved_on(&mut file, len)? {
            *output = Output::new();
            self.offset = 0;
            self.lines = 0;
            self.head.clear();
            tailed.restarted = true;
        }
        if len == self.offset {
            return Ok(tailed);
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| self.io(e))?;
        let mut bytes = Vec::new();
        file.take(len - self.offset)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(e))?;
        tailed.bytes = bytes.len() as u64;
        if self.offset == 0 {
            self.head = bytes[..bytes.len().min(HEAD_BYTES)].to_vec();
        }
        // Only complete lines: the rest is still being written.
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Ok(tailed);
        };
        let mut consumed = 0;
        for line in bytes[..=end].split_inclusive(|&b| b == b'\n') {
            let number = self.lines + 1;
            let decoded = std::str::from_utf8(line)
                .map_err(|_| LogError::Format {
                    path: self.path.clone(),
                    message: format!("line {number}: not UTF-8"),
                })
                .and_then(|text| decode_line(&self.path, number, text.trim_end()));
            match decoded {
                Ok(values) => {
                    if let Some(values) = values {
                        tailed.steps.extend(values.steps());
                        output.merge(values);
                    }
                    consumed += line.len();
                    self.lines += 1;
                    tailed.lines += 1;
                }
                Err(problem) => {
                    tailed.problem = Some(problem);
                    break;
                }
            }
        }
        self.offset += consumed as u64;
        Ok(tailed)
    }

    /// Whether the file was truncated or rewritten since the last look (the next
    /// [`StreamTail::poll_into`] reads it from the start).
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] if the file cannot be read.
    pub fn rewritten(&self) -> Result<bool, LogError> {
        if self.offset == 0 && self.head.is_empty() {
            return Ok(false);
        }
        let (mut file, len) = self.open()?;
        self.moved_on(&mut file, len)
    }

    /// The file, opened at its start, and its length.
    fn open(&self) -> Result<(std::fs::File, u64), LogError> {
        let file = std::fs::File::open(&self.path).map_err(|e| self.io(e))?;
        let len = file.metadata().map_err(|e| self.io(e))?.len();
        Ok((file, len))
    }

    /// Whether the file of length `len` (opened at its start) is not the one read so far:
    /// shorter than what was read, or beginning with other bytes.
    fn moved_on(&self, file: &mut std::fs::File, len: u64) -> Result<bool, LogError> {
        Ok(len < self.offset || !self.same_head(file, len)?)
    }

    fn io(&self, source: std::io::Error) -> LogError {
        LogError::Io {
            action: "read",
            path: self.path.clone(),
            source,
        }
    }

    /// Whether the file still begins with the bytes read from it before.
    fn same_head(&self, file: &mut std::fs::File, len: u64) -> Result<bool, LogError> {
        if self.head.is_empty() {
            return Ok(true);
        }
        if len < self.head.len() as u64 {
            return Ok(false);
        }
        let mut head = vec![0; self.head.len()];
        file.read_exact(&mut head).map_err(|e| self.io(e))?;
        Ok(head == self.head)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::Value;
    use crate::log::{JsonLinesWriter, read_stream};

    fn line(step: usize, loss: f64) -> Output {
        let mut values = Output::new();
        values.insert(step, "Loss", Value::Float(loss));
        values
    }

    /// Appended steps are read alone and the result equals a full read, at every look; a line
    /// being written waits; a rewritten file is read from the start; garbage is reported and
    /// the good lines before it kept.
    #[test]
    fn a_tail_reads_what_was_appended_and_equals_a_full_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut writer = JsonLinesWriter::create(&path).unwrap();
        let mut tail = StreamTail::new(&path);
        let mut output = Output::new();
        let mut previous = 0;
        for step in 0..20 {
            writer.append(step, &line(step, step as f64)).unwrap();
            let tailed = tail.poll_into(&mut output).unwrap();
            assert!(!tailed.restarted && tailed.problem.is_none());
            assert_eq!(tailed.steps, BTreeSet::from([step]));
            assert_eq!(tailed.lines, 1);
            let len = std::fs::metadata(&path).unwrap().len();
            assert_eq!(
                tailed.bytes,
                len - previous,
                "only the appended bytes are read"
            );
            previous = len;
            assert_eq!(output, read_stream(&path).unwrap());
        }
        // Nothing new: nothing read.
        let idle = tail.poll_into(&mut output).unwrap();
        assert_eq!((idle.lines, idle.bytes), (0, 0));
        drop(writer);

        // Half a line (a write in progress) waits for its newline.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"{\"output\": {\"20\": {\"Lo").unwrap();
        let partial = tail.poll_into(&mut output).unwrap();
        assert_eq!(partial.lines, 0);
        assert!(partial.problem.is_none());
        file.write_all(b"ss\": 20.0}}, \"tracked_at\": 20}\n")
            .unwrap();
        let completed = tail.poll_into(&mut output).unwrap();
        assert_eq!(completed.steps, BTreeSet::from([20]));
        assert_eq!(output.get(20, "Loss"), Some(&Value::Float(20.0)));

        // Garbage after good lines: reported, nothing after it merged, looked at again.
        file.write_all(b"not json\n").unwrap();
        let bad = tail.poll_into(&mut output).unwrap();
        assert!(
            matches!(bad.problem, Some(LogError::Parse { line: Some(22), .. })),
            "{:?}",
            bad.problem
        );
        assert_eq!(output.steps().count(), 21);
        assert!(tail.poll_into(&mut output).unwrap().problem.is_some());

        // A new run on the same path (truncated and rewritten): read from the start.
        let mut writer = JsonLinesWriter::create(&path).unwrap();
        writer.append(0, &line(0, 7.0)).unwrap();
        let restarted = tail.poll_into(&mut output).unwrap();
        assert!(restarted.restarted);
        assert_eq!(output, read_stream(&path).unwrap());
        assert_eq!(output.get(0, "Loss"), Some(&Value::Float(7.0)));
    }
}
