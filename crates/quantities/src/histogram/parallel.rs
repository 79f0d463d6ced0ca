//! Counting on every core (rayon), a panicking worker an error rather than a short histogram.

use rayon::prelude::*;

use crate::QuantityError;

/// Adds `part`'s counts to `total`'s, bin by bin.
pub(crate) fn add_into(total: &mut [u64], part: &[u64]) {
    for (t, c) in total.iter_mut().zip(part) {
        *t += c;
    }
}

/// Runs `work` (which uses rayon's pool), turning a panicked worker into
/// [`QuantityError::HostWorker`]: never a silently short histogram.
pub(super) fn catch_worker<T>(work: impl FnOnce() -> T) -> Result<T, QuantityError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|payload| {
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".into());
        QuantityError::HostWorker(format!("histogram counting: {reason}"))
    })
}

/// Runs `sample(n, counts)` for every sample `n < samples` on rayon's pool, each task into its
/// own `bins` counts, and adds them up.
///
/// # Errors
///
/// [`QuantityError::HostWorker`] if a worker panicked: never a silently short histogram.
pub(crate) fn count_in_parallel(
    samples: usize,
    bins: usize,
    sample: impl Fn(usize, &mut [u64]) + Sync,
) -> Result<Vec<u64>, QuantityError> {
    catch_worker(|| {
        (0..samples)
            .into_par_iter()
            .fold(
                || vec![0u64; bins],
                |mut counts, n| {
                    sample(n, &mut counts);
                    counts
                },
            )
            .reduce(
                || vec![0u64; bins],
                |mut total, part| {
                    add_into(&mut total, &part);
                    total
                },
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that panics makes the count an error, not a histogram short of its samples.
    #[test]
    fn a_panicking_worker_is_an_error() {
        let counted = count_in_parallel(64, 4, |n, counts: &mut [u64]| {
            assert!(n != 37, "sample 37 is broken");
            counts[n % 4] += 1;
        });
        let Err(QuantityError::HostWorker(reason)) = counted else {
            panic!("expected an error, got {counted:?}");
        };
        assert!(reason.contains("sample 37 is broken"), "{reason}");
        assert_eq!(
            count_in_parallel(64, 4, |n, counts: &mut [u64]| counts[n % 4] += 1).ok(),
            Some(vec![16; 4])
        );
    }
}
