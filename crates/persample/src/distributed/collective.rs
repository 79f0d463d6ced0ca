//! How the workers of a data-parallel group exchange numbers: burn's collectives, or the
//! host between threads.

use std::fmt::Debug;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use burn::tensor::distributed::{ReduceOperation, all_reduce};
use burn::tensor::{Device, Tensor, TensorCreationOptions, TensorData};

use crate::PerSampleError;
use crate::readback::read_values;

/// One worker's end of an all-reduce over a data-parallel group.
///
/// Every worker of the group calls [`Collective::all_reduce_sum`] with a tensor of the same
/// shape, in the same order of calls; each gets the element-wise sum over the workers.
pub trait Collective: Send + Sync + Debug {
    /// This worker's index in the group, `0..world_size`.
    fn rank(&self) -> usize;

    /// The number of workers in the group.
    fn world_size(&self) -> usize;

    /// The element-wise sum of `values` over the group, on `values`' device.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::HostWorker`] when the group does not complete the reduction.
    fn all_reduce_sum(&self, values: Tensor<1>) -> Result<Tensor<1>, PerSampleError>;
}

/// [`Collective`] on burn's collective operations
/// ([`burn::tensor::distributed::all_reduce`]): the all-reduce burn's DDP strategy runs on the
/// gradients. In burn 0.22 only the CUDA backend implements it.
#[derive(Debug, Clone)]
pub struct BurnCollective {
    devices: Vec<Device>,
    rank: usize,
}

impl BurnCollective {
    /// Worker `rank` of the group of `devices` (one worker per device, the devices of burn's
    /// `ExecutionStrategy::ddp`).
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if `rank` is not below the number of devices.
    pub fn new(devices: Vec<Device>, rank: usize) -> Result<Self, PerSampleError> {
        if rank >= devices.len() {
            return Err(PerSampleError::Shape(format!(
                "rank {rank} in a group of {} devices",
                devices.len()
            )));
        }
        Ok(Self { devices, rank })
    }
}

impl Collective for BurnCollective {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.devices.len()
    }

    /// burn's `all_reduce`, resolved: the wait is a synchronisation, counted by the read
    /// ledger as a read of no values.
    fn all_reduce_sum(&self, values: Tensor<1>) -> Result<Tensor<1>, PerSampleError> {
        let summed = all_reduce(values, ReduceOperation::Sum, self.devices.clone()).resolve();
        crate::readback::record_wait();
        Ok(summed)
    }
}

/// [`Collective`] between threads of one process, through the host: for backends without
/// collective operations (every CPU backend) and for tests. The sum is taken in rank order in
/// float64, so every worker gets the same bits.
#[derive(Debug, Clone)]
pub struct LocalCollective {
    rank: usize,
    shared: Arc<LocalGroup>,
}

#[derive(Debug)]
struct LocalGroup {
    size: usize,
    timeout: Duration,
    round: Mutex<Round>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Round {
    /// Increases when a reduction completes.
    generation: u64,
    contributions: Vec<Option<Vec<f64>>>,
    /// The completed reduction (or why it failed), until every worker has taken it.
    result: Option<Result<Arc<Vec<f64>>, String>>,
    /// Workers yet to take `result`.
    to_take: usize,
}

impl LocalCollective {
    /// The `size` ends of one group, rank `0..size` in order. A worker that waits longer than
    /// `timeout` for the others gets an error instead of blocking forever.
    pub fn group(size: usize, timeout: Duration) -> Vec<LocalCollective> {
        let shared = Arc::new(LocalGroup {
            size,
            timeout,
            round: Mutex::new(Round {
                contributions: vec![None; size],
                ..Round::default()
            }),
            changed: Condvar::new(),
        });
        (0..size)
            .map(|rank| LocalCollective {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Collective for LocalCollective {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.shared.size
    }

    fn all_reduce_sum(&self, values: Tensor<1>) -> Result<Tensor<1>, PerSampleError> {
        let options = TensorCreationOptions::new(values.device()).with_dtype(values.dtype());
        let host = read_values(values)?;
        let group = &self.shared;
        let stalled = || {
            PerSampleError::HostWorker(format!(
                "all-reduce: worker {} of {} waited {:?} for the others",
                self.rank, group.size, group.timeout
            ))
        };
        let wait = |round| {
            group
                .changed
                .wait_timeout(round, group.timeout)
                .unwrap_or_else(|poison| poison.into_inner())
        };
        let mut round = group
            .round
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        // A worker a round ahead waits until the previous result is collected.
        while round.result.is_some() || round.contributions[self.rank].is_some() {
            let (next, timeout) = wait(round);
            round = next;
            if timeout.timed_out() {
                return Err(stalled());
            }
        }
        round.contributions[self.rank] = Some(host);
        let generation = round.generation;
        if round.contributions.iter().all(Option::is_some) {
            let parts: Vec<Vec<f64>> = round
                .contributions
                .iter_mut()
                .filter_map(Option::take)
                .collect();
            let n = parts.first().map_or(0, Vec::len);
            round.result = Some(if parts.iter().all(|p| p.len() == n) {
                let mut sum = vec![0.0; n];
                for part in &parts {
                    sum.iter_mut().zip(part).for_each(|(s, x)| *s += x);
                }
                Ok(Arc::new(sum))
            } else {
                Err("all-reduce: the workers sent tensors of different lengths".to_string())
            });
            round.to_take = group.size;
            round.generation += 1;
            group.changed.notify_all();
        }
        while round.generation == generation {
            let (next, timeout) = wait(round);
            round = next;
            if timeout.timed_out() && round.generation == generation {
                round.contributions[self.rank] = None;
                return Err(stalled());
            }
        }
        let result = round.result.clone();
        round.to_take = round.to_take.saturating_sub(1);
        if round.to_take == 0 {
            round.result = None;
            group.changed.notify_all();
        }
        drop(round);
        let sum = match result {
            Some(Ok(sum)) => sum,
            Some(Err(message)) => return Err(PerSampleError::Shape(message)),
            None => return Err(PerSampleError::HostWorker("all-reduce: no result".into())),
        };
        let n = sum.len();
        Ok(Tensor::from_data(
            TensorData::new(sum.as_ref().clone(), [n]),
            options,
        ))
    }
}
