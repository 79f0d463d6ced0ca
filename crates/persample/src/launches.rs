//! The launch ledger: kernels launched on the device while a [`LaunchLedger`] lives.
//!
//! A GPU pays for the work queued between reads and for each launch of it, not only for the
//! reads the [read ledger](crate::readback) counts. On CubeCL backends (wgpu, CUDA: features
//! `wgpu`/`cuda`, which turn on this crate's `launches` feature) every kernel issued is
//! counted through CubeCL's launch observer. The count is the process's: burn's fusion
//! launches from its own stream threads, so no launch can be told apart by the thread that
//! asked for it — count in a process (or a stretch of it) where nothing else uses the device.
//! Fused element-wise chains count as the one kernel they launch, and a chain launches when
//! it is flushed (at a read, or when its queue is full): count over whole steps, not around
//! one call. Other backends launch no kernels: [`LaunchLedger::start`] is `None` there.
//!
//! ```no_run
//! use cockpit_persample::launches::LaunchLedger;
//!
//! if let Some(ledger) = LaunchLedger::start() {
//!     let before = ledger.launches();
//!     // … a training step …
//!     let per_step = ledger.launches() - before;
//! }
//! ```
//!
//! The ledger is a value, not a setting of the process: its counts live in it and counting
//! stops when it is dropped. CubeCL has one observer slot per process, so a second ledger
//! started while one lives counts in its place until it is dropped (ledgers dropped in the
//! order they were started leave the process as they found it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counts the kernels launched while it lives (see the module's documentation).
#[derive(Debug)]
pub struct LaunchLedger {
    counts: Arc<Counts>,
    _observation: imp::Observation,
}

/// What a ledger counted: launches in all, and by kernel name.
#[derive(Debug, Default)]
struct Counts {
    launched: AtomicU64,
    by_kernel: Mutex<HashMap<&'static str, u64>>,
}

impl Counts {
    #[cfg_attr(not(feature = "launches"), allow(dead_code))]
    fn launched(&self, kernel: &'static str) {
        self.launched.fetch_add(1, Ordering::Relaxed);
        // A poisoned map (a panic elsewhere while it was held) keeps counting.
        let mut names = self.by_kernel.lock().unwrap_or_else(|e| e.into_inner());
        *names.entry(kernel).or_default() += 1;
    }
}

impl LaunchLedger {
    /// Starts counting launches; `None` where launches cannot be counted (no CubeCL backend
    /// in this build).
    pub fn start() -> Option<Self> {
        let counts = Arc::new(Counts::default());
        let observation = imp::observe(counts.clone())?;
        Some(Self {
            counts,
            _observation: observation,
        })
    }

    /// Kernels launched in this process since the ledger started.
    pub fn launches(&self) -> u64 {
        self.counts.launched.load(Ordering::Relaxed)
    }

    /// Kernels launched since the ledger started, by kernel name (CubeCL's name for the
    /// kernel, such as a fused chain's or a matmul's), most launched first. For finding which
    /// operations a step's launches come from.
    pub fn by_kernel(&self) -> Vec<(&'static str, u64)> {
        let names = self
            .counts
            .by_kernel
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<_> = names.iter().map(|(k, v)| (*k, *v)).collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        list
    }
}

#[cfg(feature = "launches")]
mod imp {
    use std::sync::Arc;

    use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

    use super::Counts;

    /// CubeCL's observation, installed while the ledger lives.
    pub(super) struct Observation(#[allow(dead_code)] LaunchObservation);

    impl std::fmt::Debug for Observation {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Observation")
        }
    }

    /// Hands each launch to the ledger's counts.
    struct Counter(Arc<Counts>);

    impl LaunchObserver for Counter {
        fn launched(&self, kernel: &'static str) {
            self.0.launched(kernel);
        }
    }

    pub(super) fn observe(counts: Arc<Counts>) -> Option<Observation> {
        Some(Observation(LaunchObservation::new(Arc::new(Counter(
            counts,
        )))))
    }
}

#[cfg(not(feature = "launches"))]
mod imp {
    use std::sync::Arc;

    use super::Counts;

    /// Nothing to observe without a CubeCL backend.
    #[derive(Debug)]
    pub(super) enum Observation {}

    pub(super) fn observe(_counts: Arc<Counts>) -> Option<Observation> {
        None
    }
}
