//! The launch ledger: kernels launched on the device by this thread.
//!
//! A GPU pays for the work queued between reads and for each launch of it, not only for the
//! reads the [read ledger](crate::readback) counts. On CubeCL backends (wgpu, CUDA: features
//! `wgpu`/`cuda`, which turn on this crate's `launches` feature) every kernel issued is
//! counted through CubeCL's launch observer. The count is the process's: burn's fusion
//! launches from its own stream threads, so no launch can be told apart by the thread that
//! asked for it — count in a process (or a stretch of it) where nothing else uses the device.
//! Fused element-wise chains count as the one kernel they launch, and a chain launches when
//! it is flushed (at a read, or when its queue is full): count over whole steps, not around
//! one call. Other backends launch no kernels: [`launches`] is `None` there.
//!
//! ```no_run
//! use cockpit_persample::launches;
//!
//! launches::observe();
//! let before = launches::launches();
//! // … a training step …
//! let per_step = launches::launches().zip(before).map(|(after, before)| after - before);
//! ```

/// Starts counting launches (idempotent; counting lasts for the rest of the process). Returns
/// whether launches can be counted in this build.
pub fn observe() -> bool {
    imp::observe()
}

/// Kernels launched in this process since [`observe`] was first called, or `None` where
/// launches are not counted (no CubeCL backend in this build, or [`observe`] not called).
pub fn launches() -> Option<u64> {
    imp::launches()
}

/// Kernels launched since [`observe`] was first called, by kernel name (CubeCL's name for the
/// kernel, such as a fused chain's or a matmul's), most launched first; empty where launches
/// are not counted. For finding which operations a step's launches come from.
pub fn by_kernel() -> Vec<(&'static str, u64)> {
    imp::by_kernel()
}

#[cfg(feature = "launches")]
mod imp {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};

    use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

    static LAUNCHED: AtomicU64 = AtomicU64::new(0);
    static OBSERVING: AtomicBool = AtomicBool::new(false);

    /// The observation, kept for the process's life (a static is never dropped, so the
    /// observer stays installed).
    static OBSERVATION: OnceLock<LaunchObservation> = OnceLock::new();

    /// Launches by kernel name.
    static BY_KERNEL: Mutex<Option<HashMap<&'static str, u64>>> = Mutex::new(None);

    /// Counts each launch.
    struct Counter;

    impl LaunchObserver for Counter {
        fn launched(&self, kernel: &'static str) {
            LAUNCHED.fetch_add(1, Ordering::Relaxed);
            // A poisoned map (a panic elsewhere while it was held) keeps counting.
            let mut names = BY_KERNEL.lock().unwrap_or_else(|e| e.into_inner());
            *names
                .get_or_insert_with(HashMap::new)
                .entry(kernel)
                .or_default() += 1;
        }
    }

    pub(super) fn by_kernel() -> Vec<(&'static str, u64)> {
        let names = BY_KERNEL.lock().unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<_> = names
            .iter()
            .flat_map(|map| map.iter().map(|(k, v)| (*k, *v)))
            .collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        list
    }

    pub(super) fn observe() -> bool {
        OBSERVATION.get_or_init(|| LaunchObservation::new(Arc::new(Counter)));
        OBSERVING.store(true, Ordering::Relaxed);
        true
    }

    pub(super) fn launches() -> Option<u64> {
        OBSERVING
            .load(Ordering::Relaxed)
            .then(|| LAUNCHED.load(Ordering::Relaxed))
    }
}

#[cfg(not(feature = "launches"))]
mod imp {
    pub(super) fn observe() -> bool {
        false
    }

    pub(super) fn launches() -> Option<u64> {
        None
    }

    pub(super) fn by_kernel() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
