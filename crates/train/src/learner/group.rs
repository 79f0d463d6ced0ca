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
    summed: bool,
    collectives: Vec<Arc<dyn Collective>>,
    /// Worker threads in the order they first ran a step: their ranks.
    ranks: HashMap<ThreadId, usize>,
    workers: Vec<Worker>,
}

/// One worker's progress.
#[derive(Debug, Default)]
struct Worker {
    /// Its next optimizer step.
    step: usize,
    pending: Vec<Pending>,
    /// What it hands to rank 0 for its latest tracked step.
    deposit: Option<Deposit>,
}

/// What a worker takes from the group to run its optimizer step ([`Ddp::begin_step`]).
pub(super) struct WorkerStep {
    pub(super) rank: usize,
    pub(super) step: usize,
    /// What its training steps since the last optimizer step left.
    pub(super) pending: Vec<Pending>,
    pub(super) collective: Arc<dyn Collective>,
    /// `k`: burn's gradient is `k` times the union's mean gradient.
    pub(super) k: usize,
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

    /// The calling worker's optimizer step begins: its step is counted and what its training
    /// steps left is handed over. `None` for a thread beyond the group's devices.
    pub(super) fn begin_step(&mut self) -> Option<WorkerStep> {
        let rank = self.rank()?;
        let world = self.workers.len();
        let worker = &mut self.workers[rank];
        let step = worker.step;
        worker.step += 1;
        let pending = std::mem::take(&mut worker.pending);
        let k = pending.len().max(1) * if self.summed { world } else { 1 };
        Some(WorkerStep {
            rank,
            step,
            pending,
            collective: self.collectives[rank].clone(),
            k,
        })
    }

    /// The step the calling worker runs next, `None` for a thread beyond the group's devices.
    pub(super) fn next_step(&mut self) -> Option<usize> {
        let rank = self.rank()?;
        Some(self.workers[rank].step)
    }

    /// Keeps what the calling worker's training step left until its optimizer step; the
    /// worker's rank, or `Err(world)` for a thread beyond the group's devices.
    pub(super) fn push(&mut self, pending: Pending) -> Result<usize, usize> {
        let world = self.workers.len();
        let rank = self.rank().ok_or(world)?;
        self.workers[rank].pending.push(pending);
        Ok(rank)
    }

    /// Worker `rank` hands over its part of `deposit.step`.
    pub(super) fn deposit(&mut self, rank: usize, deposit: Deposit) {
        if let Some(worker) = self.workers.get_mut(rank) {
            worker.deposit = Some(deposit);
        }
    }

    /// Whether every worker has handed over its part of `step`.
    pub(super) fn all_deposited(&self, step: usize) -> bool {
        self.workers
            .iter()
            .all(|w| w.deposit.as_ref().is_some_and(|d| d.step == step))
    }

    /// The workers' parts, in rank order (taken).
    pub(super) fn take_deposits(&mut self) -> Vec<Deposit> {
        self.workers
            .iter_mut()
            .filter_map(|w| w.deposit.take())
            .collect()
    }

    /// The calling worker thread's rank (assigned on its first call).
    fn rank(&mut self) -> Option<usize> {
        let thread = std::thread::current().id();
        let next = self.ranks.len();
        if next >= self.workers.len() && !self.ranks.contains_key(&thread) {
            return None;
        }
        Some(*self.ranks.entry(thread).or_insert(next))
    }
}
