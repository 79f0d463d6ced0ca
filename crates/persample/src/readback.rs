//! The read ledger: every device→host read of the tracking path goes through here.
//!
//! On a GPU each read is a synchronisation: the host waits until the queue has run up to the
//! tensor, then copies it. What a tracked step pays for that is counted here, per thread:
//! [`reads_on_this_thread`] is the running total of reads and of values read, and the Cockpit
//! reports the difference over one `track` call (`Cockpit::reads`). A test keeps device reads
//! out of every other file of the workspace's libraries, so the count is the whole story.
//!
//! ```
//! # use burn::tensor::{Device, Tensor};
//! use cockpit_persample::readback::{read_values, reads_on_this_thread};
//! let before = reads_on_this_thread();
//! let values = read_values(Tensor::<1>::from_floats([1.0, 2.0], &Device::flex()))?;
//! let spent = reads_on_this_thread() - before;
//! assert_eq!((spent.reads, spent.values), (1, 2));
//! # Ok::<(), cockpit_persample::PerSampleError>(())
//! ```

use std::cell::Cell;

use burn::tensor::{DType, Int, Tensor, TensorData, Transaction};

use crate::{PerSampleError, SharedError};

/// Device→host reads, the values they brought back, and the times the host waited for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCount {
    /// Reads (each a synchronisation on a GPU backend, unless it is [`started`](start_read)
    /// and its values are there when they are asked for).
    pub reads: u64,
    /// Values read back, over all reads.
    pub values: u64,
    /// Times the host stopped until the device had run up to a read: every immediate read
    /// ([`read_values`], [`read_into`], [`read_together`]), a collective's wait, and a
    /// [`PendingRead`] whose values were not there when [`PendingRead::finish`] asked.
    pub waits: u64,
}

impl std::ops::Sub for ReadCount {
    type Output = ReadCount;

    fn sub(self, earlier: ReadCount) -> ReadCount {
        ReadCount {
            reads: self.reads.saturating_sub(earlier.reads),
            values: self.values.saturating_sub(earlier.values),
            waits: self.waits.saturating_sub(earlier.waits),
        }
    }
}

impl std::ops::Add for ReadCount {
    type Output = ReadCount;

    fn add(self, other: ReadCount) -> ReadCount {
        ReadCount {
            reads: self.reads + other.reads,
            values: self.values + other.values,
            waits: self.waits + other.waits,
        }
    }
}

impl std::fmt::Display for ReadCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reads, {} values, {} waits",
            self.reads, self.values, self.waits
        )
    }
}

/// This thread's ledger: its reads, and the reductions of the span that
/// [`depth_of`](crate::reduce::depth_of) is measuring, if one is: how many, and the most
/// values one unit walks in any of them.
#[derive(Clone, Copy)]
struct Ledger {
    reads: ReadCount,
    depth: (u64, u64),
}

thread_local! {
    static LEDGER: Cell<Ledger> = const {
        Cell::new(Ledger {
            reads: ReadCount {
                reads: 0,
                values: 0,
                waits: 0,
            },
            depth: (0, 0),
        })
    };
}

/// The reads made on this thread so far (a running total: subtract an earlier value to
/// count a span of work).
pub fn reads_on_this_thread() -> ReadCount {
    LEDGER.with(Cell::get).reads
}

/// Changes this thread's ledger of reads.
fn update(change: impl FnOnce(&mut ReadCount)) {
    LEDGER.with(|ledger| {
        let mut now = ledger.get();
        change(&mut now.reads);
        ledger.set(now);
    });
}

/// Notes a reduction of `per_unit` values per unit in this thread's depth ledger.
pub(crate) fn note_reduction(per_unit: usize) {
    LEDGER.with(|ledger| {
        let mut now = ledger.get();
        now.depth = (now.depth.0 + 1, now.depth.1.max(per_unit as u64));
        ledger.set(now);
    });
}

/// Replaces this thread's depth ledger (reductions, deepest) with `depth`, returning what it
/// held.
pub(crate) fn swap_depth(depth: (u64, u64)) -> (u64, u64) {
    LEDGER.with(|ledger| {
        let mut now = ledger.get();
        let held = std::mem::replace(&mut now.depth, depth);
        ledger.set(now);
        held
    })
}

/// Counts a blocking wait on the device that brings no values back (a collective's
/// `resolve`): a synchronisation like a read, of zero values.
pub(crate) fn record_wait() {
    record(0);
}

/// Counts an immediate read of `values` values: a read and a wait.
fn record(values: usize) {
    record_started(values);
    record_waited();
}

/// Counts a read of `values` values (started; the wait, if any, is counted apart).
fn record_started(values: usize) {
    update(|count| {
        count.reads += 1;
        count.values += values as u64;
    });
}

/// Counts a wait of the host for the device.
fn record_waited() {
    update(|count| count.waits += 1);
}

/// Reads a device tensor back to the host as `f64`: one read of `numel` values.
///
/// # Errors
///
/// [`PerSampleError::Read`] if the backend cannot read the tensor.
pub fn read_values(tensor: Tensor<1>) -> Result<Vec<f64>, PerSampleError> {
    record(tensor.shape().num_elements());
    tensor
        .try_into_vec_as::<f64>()
        .map_err(|err| PerSampleError::Read(SharedError::new(err)))
}

/// Reads a device tensor into `buffer` as `f64`, reusing its allocation (the histograms read
/// their factors every step): one read of `numel` values.
///
/// # Errors
///
/// [`PerSampleError::Read`] if the backend cannot read the tensor.
pub fn read_into(tensor: Tensor<1>, buffer: &mut Vec<f64>) -> Result<(), PerSampleError> {
    record(tensor.shape().num_elements());
    let data = tensor
        .try_into_data()
        .map_err(|err| PerSampleError::Read(SharedError::new(err)))?;
    buffer.clear();
    host_values(data, buffer);
    Ok(())
}

/// A device tensor to read with others in [`read_together`]: floats, or integers (counts,
/// read exactly: `i32`/`i64` values become `f64` without rounding below 2⁵³).
#[derive(Debug, Clone)]
pub enum Readable {
    /// A float tensor.
    Float(Tensor<1>),
    /// An integer tensor.
    Int(Tensor<1, Int>),
}

impl Readable {
    fn len(&self) -> usize {
        match self {
            Readable::Float(t) => t.shape().num_elements(),
            Readable::Int(t) => t.shape().num_elements(),
        }
    }
}

impl From<Tensor<1>> for Readable {
    fn from(tensor: Tensor<1>) -> Self {
        Readable::Float(tensor)
    }
}

impl From<Tensor<1, Int>> for Readable {
    fn from(tensor: Tensor<1, Int>) -> Self {
        Readable::Int(tensor)
    }
}

fn host_values(data: TensorData, out: &mut Vec<f64>) {
    if let Ok(values) = data.as_slice::<f32>() {
        out.extend(values.iter().map(|&v| f64::from(v)));
    } else if let Ok(values) = data.as_slice::<f64>() {
        out.extend_from_slice(values);
    } else if let Ok(values) = data.as_slice::<i32>() {
        out.extend(values.iter().map(|&v| f64::from(v)));
    } else if let Ok(values) = data.as_slice::<i64>() {
        out.extend(values.iter().map(|&v| v as f64));
    } else {
        out.extend(data.iter::<f64>());
    }
}

/// Reads several device tensors in **one** read: the floats are joined on the first tensor's
/// device (without autodiff; in float64 if any of them is, else in the first one's float
/// type), the integers likewise, and both are read in one burn [`Transaction`] (a single
/// synchronisation); the values come back split as they went in. One read of `Σ numel`
/// values.
///
/// # Errors
///
/// [`PerSampleError::Read`] if the backend cannot read the joined tensors.
pub fn read_together<R: Into<Readable>>(parts: Vec<R>) -> Result<Vec<Vec<f64>>, PerSampleError> {
    let mut read = PendingRead::start(parts);
    if read.float_tensors > 0 || read.has_ints {
        read.waited = true;
        record_waited();
    }
    read.finish()
}

/// Starts a read of `parts` (as [`read_together`]: one transaction, floats and exact integer
/// counts) without waiting for it: the device copies the values back while the host goes on
/// (launching the next step's work), and [`PendingRead::finish`] takes them. Counted as one
/// read now; as a wait only if the values are not there when they are asked for.
///
/// On a CPU backend the values are there at once (the host computes them here).
pub fn start_read<R: Into<Readable>>(parts: Vec<R>) -> PendingRead {
    PendingRead::start(parts)
}

/// The floats of a read (non-empty, on one device, of one type) as the few tensors the
/// transaction reads, their values one after the other in order: one tensor per sixteen parts
/// where `cockpit-kernels` packs them (one launch each), else burn's `cat` of all of them (one
/// slice assignment per part on a CubeCL device; a copy on a CPU backend).
pub(crate) fn gathered(floats: Vec<Tensor<1>>) -> Vec<Tensor<1>> {
    match kernel_pack(&floats) {
        Some(packed) => packed,
        None => vec![Tensor::cat(floats, 0)],
    }
}

/// `parts` packed by `cockpit-kernels` ([`cockpit_kernels::pack`]; `None` where it does not
/// run).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn kernel_pack(parts: &[Tensor<1>]) -> Option<Vec<Tensor<1>>> {
    cockpit_kernels::pack(parts)
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub(crate) fn kernel_pack(_parts: &[Tensor<1>]) -> Option<Vec<Tensor<1>>> {
    None
}

type Transfer = std::pin::Pin<
    Box<dyn Future<Output = Result<Vec<TensorData>, burn::tensor::ExecutionError>> + Send>,
>;

/// A read under way ([`start_read`]): the transfer and where each part's values lie in it.
pub struct PendingRead {
    /// The transaction, until it has given its data.
    transfer: Option<Transfer>,
    /// What the transaction gave, once it has.
    data: Option<Result<Vec<TensorData>, PerSampleError>>,
    lengths: Vec<usize>,
    is_int: Vec<bool>,
    /// How many float tensors the transaction reads (the floats gathered, in order).
    float_tensors: usize,
    has_ints: bool,
    /// Whether a wait was already counted (an immediate read).
    waited: bool,
}

impl std::fmt::Debug for PendingRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRead")
            .field("parts", &self.lengths.len())
            .field("values", &self.lengths.iter().sum::<usize>())
            .field("arrived", &self.data.is_some())
            .finish()
    }
}

impl PendingRead {
    fn start<R: Into<Readable>>(parts: Vec<R>) -> Self {
        let parts: Vec<Readable> = parts.into_iter().map(Into::into).collect();
        let lengths: Vec<usize> = parts.iter().map(Readable::len).collect();
        let device = parts.iter().find_map(|p| match p {
            Readable::Float(t) => Some((t.clone().without_autodiff().device(), t.dtype())),
            Readable::Int(_) => None,
        });
        let int_device = parts.iter().find_map(|p| match p {
            Readable::Int(t) => Some(t.device()),
            Readable::Float(_) => None,
        });
        let float_dtype = if parts
            .iter()
            .any(|p| matches!(p, Readable::Float(t) if t.dtype() == DType::F64))
        {
            Some(DType::F64)
        } else {
            device.as_ref().map(|(_, dtype)| *dtype)
        };
        let (mut floats, mut ints) = (Vec::new(), Vec::new());
        let mut is_int = Vec::with_capacity(parts.len());
        for part in parts {
            is_int.push(matches!(part, Readable::Int(_)));
            match part {
                Readable::Float(t) if t.shape().num_elements() > 0 => {
                    if let (Some((device, _)), Some(dtype)) = (&device, float_dtype) {
                        floats.push(t.without_autodiff().to_device(device).cast(dtype));
                    }
                }
                Readable::Int(t) if t.shape().num_elements() > 0 => {
                    if let Some(device) = &int_device {
                        ints.push(t.to_device(device));
                    }
                }
                _ => {}
            }
        }
        let floats = if floats.is_empty() {
            floats
        } else {
            gathered(floats)
        };
        let (float_tensors, has_ints) = (floats.len(), !ints.is_empty());
        let mut read = Self {
            transfer: None,
            data: None,
            lengths,
            is_int,
            float_tensors,
            has_ints,
            waited: false,
        };
        if float_tensors > 0 || has_ints {
            let mut transaction = Transaction::default();
            for packed in floats {
                transaction = transaction.register(packed);
            }
            if has_ints {
                transaction = transaction.register(Tensor::cat(ints, 0));
            }
            record_started(read.lengths.iter().sum());
            read.transfer = Some(Box::pin(transaction.execute_async()));
            // One poll starts the copy (an async function runs nothing until polled).
            read.poll();
        }
        read
    }

    /// Polls the transfer once without blocking; whether the values are there.
    fn poll(&mut self) -> bool {
        if let Some(transfer) = self.transfer.as_mut() {
            let mut context = std::task::Context::from_waker(std::task::Waker::noop());
            if let std::task::Poll::Ready(data) = transfer.as_mut().poll(&mut context) {
                self.data = Some(data.map_err(|err| PerSampleError::Read(SharedError::new(err))));
                self.transfer = None;
            }
        }
        self.transfer.is_none()
    }

    /// Whether the values are there (polls the transfer once, without blocking).
    pub fn is_ready(&mut self) -> bool {
        self.poll()
    }

    /// The values of each part, in order; waits for the device (a counted wait) only if they
    /// are not there yet.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Read`] if the backend cannot read the tensors.
    pub fn finish(mut self) -> Result<Vec<Vec<f64>>, PerSampleError> {
        if !self.poll()
            && let Some(transfer) = self.transfer.take()
        {
            if !self.waited {
                record_waited();
            }
            self.data = Some(
                futures_lite::future::block_on(transfer)
                    .map_err(|err| PerSampleError::Read(SharedError::new(err))),
            );
        }
        let (mut float_values, mut int_values) = (Vec::new(), Vec::new());
        if let Some(data) = self.data.take() {
            let mut data = data?.into_iter();
            for floats in data.by_ref().take(self.float_tensors) {
                host_values(floats, &mut float_values);
            }
            if self.has_ints
                && let Some(ints) = data.next()
            {
                host_values(ints, &mut int_values);
            }
        }
        let (mut float_rest, mut int_rest) = (float_values.as_slice(), int_values.as_slice());
        let mut out = Vec::with_capacity(self.lengths.len());
        for (length, is_int) in self.lengths.iter().zip(&self.is_int) {
            let rest = if *is_int {
                &mut int_rest
            } else {
                &mut float_rest
            };
            let (head, tail) = rest.split_at((*length).min(rest.len()));
            out.push(head.to_vec());
            *rest = tail;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;

    #[test]
    fn each_read_and_its_values_are_counted_on_its_thread() {
        let device = Device::flex();
        let before = reads_on_this_thread();
        let mut buffer = Vec::new();
        read_into(
            Tensor::<1>::from_floats([1.0, 2.0, 3.0], &device),
            &mut buffer,
        )
        .unwrap();
        read_values(Tensor::<1>::from_floats([4.0], &device)).unwrap();
        let here = reads_on_this_thread() - before;
        assert_eq!(
            here,
            ReadCount {
                reads: 2,
                values: 4,
                waits: 2
            }
        );
        let elsewhere = std::thread::spawn(reads_on_this_thread).join().unwrap();
        assert_eq!(
            elsewhere,
            ReadCount::default(),
            "another thread's ledger is its own"
        );
        assert_eq!(buffer, vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn tensors_read_together_cost_one_read_and_come_back_apart() {
        let device = Device::flex();
        let before = reads_on_this_thread();
        let parts = read_together(vec![
            Tensor::<1>::from_floats([1.0, 2.0], &device),
            Tensor::<1>::from_floats([0.0; 0], &device),
            Tensor::<1>::from_floats([3.0], &device).cast(burn::tensor::DType::F64),
        ])
        .unwrap();
        assert_eq!(parts, vec![vec![1.0, 2.0], vec![], vec![3.0]]);
        assert_eq!(
            reads_on_this_thread() - before,
            ReadCount {
                reads: 1,
                values: 3,
                waits: 1
            }
        );
        assert!(read_together(Vec::<Tensor<1>>::new()).unwrap().is_empty());

        // Floats and exact integer counts in one transaction.
        let before = reads_on_this_thread();
        // Above float32's exact integers, within every backend's integer type.
        let big = (1i64 << 24) + 1;
        let parts = read_together(vec![
            Readable::from(Tensor::<1, Int>::from_ints([3, 4], &device)),
            Readable::from(Tensor::<1>::from_floats([0.5], &device)),
            Readable::from(Tensor::<1, Int>::from_data([big], &device)),
        ])
        .unwrap();
        assert_eq!(parts, vec![vec![3.0, 4.0], vec![0.5], vec![big as f64]]);
        assert_eq!(
            reads_on_this_thread() - before,
            ReadCount {
                reads: 1,
                values: 4,
                waits: 1
            }
        );
    }

    #[test]
    fn a_started_read_comes_back_apart_and_waits_only_if_not_there() {
        let device = Device::flex();
        let before = reads_on_this_thread();
        let mut read = start_read(vec![
            Readable::from(Tensor::<1>::from_floats([1.0, 2.0], &device)),
            Readable::from(Tensor::<1, Int>::from_ints([7], &device)),
            Readable::from(Tensor::<1>::from_floats([0.0; 0], &device)),
            Readable::from(Tensor::<1>::from_floats([3.0], &device)),
        ]);
        let started = reads_on_this_thread() - before;
        assert_eq!((started.reads, started.values), (1, 4));
        // A CPU backend computes the values as the read starts: they are there, no wait.
        assert!(read.is_ready());
        let parts = read.finish().unwrap();
        assert_eq!(parts, vec![vec![1.0, 2.0], vec![7.0], vec![], vec![3.0]]);
        assert_eq!(
            reads_on_this_thread() - before,
            ReadCount {
                reads: 1,
                values: 4,
                waits: 0
            }
        );
        // Nothing to read: no read, no wait.
        let before = reads_on_this_thread();
        assert!(
            start_read(Vec::<Tensor<1>>::new())
                .finish()
                .unwrap()
                .is_empty()
        );
        assert_eq!(reads_on_this_thread() - before, ReadCount::default());
    }
}
