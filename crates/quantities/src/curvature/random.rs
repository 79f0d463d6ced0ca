//! The one random-number generator of the curvature code: SplitMix64 (Steele, Lea & Flood,
//! 2014), seedable, shareable between threads.

use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64 with an atomic state, so sources behind `&self` can draw.
#[derive(Debug)]
pub(crate) struct SplitMix(AtomicU64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        Self(AtomicU64::new(seed))
    }

    /// The state, for a checkpoint (`SplitMix::new(state)` goes on with the same draws).
    pub(crate) fn state(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn next_u64(&self) -> u64 {
        let mut x = self
            .0
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn uniform(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// ±1 with equal probability (a Rademacher draw).
    pub(crate) fn sign(&self) -> f64 {
        if self.next_u64() & 1 == 0 { 1.0 } else { -1.0 }
    }

    /// Standard normal (Box–Muller).
    pub(crate) fn gaussian(&self) -> f64 {
        let (u1, u2) = (self.uniform().max(f64::MIN_POSITIVE), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

impl Clone for SplitMix {
    fn clone(&self) -> Self {
        Self(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }
}
