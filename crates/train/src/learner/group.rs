//! The data-parallel group the Cockpit watches under burn's DDP strategy: its workers, their
//! ranks and progress, and how they exchange statistics. The step algorithm is in `ddp`.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use burn::tensor::Device;
use cockpit_quantities::persample::{BurnCollective, Collective, LocalCollective};

use super::union::Part;
use crate::TrainError;
use crate::step::Pending;

/// How long a worker waits for the others before giving up on a step (the step is then not
/// tracked and a warning says why; training goes on).
pub(super) const PATIENCE: Duration = Duration::from_secs(300);

/// How the workers of a data-parallel group exchange their statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// burn's collective operations (`burn::tensor::distributed::all_reduce`), as burn's DDP
    /// strategy uses for the gradients. In burn 0.22 only the CUDA backend has them.
    BurnCollectives,
    /// Through the host, between the worker threads of this process: for backends without
    /// collective operations, and for custom strategies that run their workers as threads.
    InProcess,
}

/// The data-parallel group the Cockpit watches.
#[derive(Debug)]
pub(crate) struct Ddp {
    /// Whether burn's all-reduce sums the gradients (`ReduceOperation::Sum`) rather than
    /// averaging them.
    pub(super) summed: bool,
    pub(super) collectives: Vec<Arc<dyn Collective>>,
    /// Worker threads in the order they first ran a step: their ranks.
    ranks: HashMap<ThreadId, usize>,
    pub(super) workers: Vec<Worker>,
}

/// One worker's progress.
#[derive(Debug, Default)]
pub(super) struct Worker {
    /// Its next optimizer step.
    pub(super) step: usize,
    pub(super) pending: Vec<Pending>,
    /// What it hands to rank 0 for its latest tracked step.
    pub(super) deposit: Option<Deposit>,
}

/// A worker's part of a tracked step, for rank 0.
#[derive(Debug)]
pub(super) struct Deposit {
    pub(super) step: usize,
    /// Its micro-batches joined ([`Part::join`]): mean losses, ids, margins, its per-sample
    /// source (for the histograms' gradient elements) and curvature sources; its per-sample
    /// losses travel in the all-reduce instead.
    pub(super) part: Part,
}

impl Ddp {
    pub(crate) fn new(
        devices: &[Device],
        summed: bool,
        transport: Transport,
    ) -> Result<Self, TrainError> {
        let world = devices.len();
        if world == 0 {
            return Err(TrainError::NoDevices);
        }
        let collectives: Vec<Arc<dyn Collective>> = match transport {
            Transport::BurnCollectives => (0..world)
                .map(|rank| {
                    BurnCollective::new(devices.to_vec(), rank)
                        .map(|c| Arc::new(c) as Arc<dyn Collective>)
                        .map_err(TrainError::DataParallel)
                })
                .collect::<Result<_, _>>()?,
            Transport::InProcess => LocalCollective::group(world, PATIENCE)
                .into_iter()
                .map(|c| Arc::new(c) as Arc<dyn Collective>)
                .collect(),
        };
        Ok(Self {
            summed,
            collectives,
            ranks: HashMap::new(),
            workers: (0..world).map(|_| Worker::default()).collect(),
        })
    }

    /// The calling worker thread's rank (assigned on its first call).
    pub(super) fn rank(&mut self) -> Option<usize> {
        let thread = std::thread::current().id();
        let next = self.ranks.len();
        if next >= self.workers.len() && !self.ranks.contains_key(&thread) {
            return None;
        }
        Some(*self.ranks.entry(thread).or_insert(next))
    }
}
