//! Per-sample statistics of a data-parallel batch: every worker reduces its own shard, one
//! all-reduce joins the partial statistics.

mod collective;
mod reduce;
mod reduced;

pub use collective::{BurnCollective, Collective, LocalCollective};
pub use reduce::{GroupStats, all_reduce_stats};
pub use reduced::ReducedPerSample;

#[cfg(test)]
mod tests {

    use std::sync::Arc;
    use std::time::Duration;

    use burn::tensor::Device;

    use crate::base::{PerSampleSource, Request};
    use crate::statistic::{Direction, PerSampleStats, Statistic};

    use crate::{PerSampleError, Snapshot};

    use burn::module::ParamId;

    use super::*;
    use crate::testing::{linear_source as source, tensor, values64 as values};
    use crate::{Elements, ParamEntry};

    const WAIT: Duration = Duration::from_secs(20);

    fn params(id: ParamId, value: &[f64]) -> Snapshot {
        Snapshot::from_entries(vec![ParamEntry {
            id,
            name: "w".into(),
            shape: vec![2, 3],
            value: tensor(value, [6]),
        }])
    }

    fn request(direction: &Snapshot) -> Request<'_> {
        Request::new()
            .with(Statistic::SqNorm)
            .with(Statistic::SumSq)
            .with(Statistic::AbsMax)
            .project_on(Direction::Gradient, direction)
    }

    /// Flattened statistics: ‖g_n‖², ⟨g_n, v⟩, Σ g², max |g|.
    fn flat(stats: &PerSampleStats) -> [Vec<f64>; 4] {
        let first = |s: Statistic| {
            values(
                stats
                    .get(s)
                    .map(|v| v[0].clone())
                    .unwrap_or_else(|| tensor(&[], [0])),
            )
        };
        [
            first(Statistic::SqNorm),
            first(Statistic::Dot(Direction::Gradient)),
            first(Statistic::SumSq),
            first(Statistic::AbsMax),
        ]
    }

    /// A batch of five samples split over 1, 2 and 3 workers (uneven shards), each reducing
    /// its own samples, gives on every worker the statistics of the whole batch, and the
    /// per-sample losses in sample order.
    #[test]
    fn shards_reduce_to_the_whole_batch_on_every_worker() {
        let id = ParamId::new();
        let a = [1.0, -2.0, 0.5, 3.0, -1.5, 0.25, 2.0, 1.0, -0.5, 0.75];
        let e = [
            0.1, 0.2, -0.3, 1.0, -1.0, 2.0, 0.0, 0.5, -0.25, 4.0, -3.0, 0.5, 0.2, 0.2, -0.1,
        ];
        let losses = [0.5, 1.5, 2.5, 3.5, 4.5];
        let theta = params(id, &[0.0; 6]);
        let v = [1.0, -1.0, 2.0, 0.5, 0.0, -3.0];
        let direction = params(id, &v);
        // Brute force from the outer products a_n e_nᵀ.
        let g = |n: usize| -> Vec<f64> {
            (0..2)
                .flat_map(|i| (0..3).map(move |o| a[2 * n + i] * e[3 * n + o]))
                .collect()
        };
        let expected = [
            (0..5)
                .map(|n| g(n).iter().map(|x| x * x).sum())
                .collect::<Vec<f64>>(),
            (0..5)
                .map(|n| g(n).iter().zip(v).map(|(x, y)| x * y).sum())
                .collect(),
            (0..6)
                .map(|j| (0..5).map(|n| g(n)[j] * g(n)[j]).sum())
                .collect(),
            vec![(0..5).flat_map(g).fold(0.0_f64, |m, x| m.max(x.abs()))],
        ];
        for shards in [
            vec![(0, 5)],
            vec![(0, 2), (2, 5)],
            vec![(0, 1), (1, 3), (3, 5)],
        ] {
            let group = LocalCollective::group(shards.len(), WAIT);
            let results: Vec<Result<GroupStats, PerSampleError>> = std::thread::scope(|s| {
                let handles: Vec<_> = shards
                    .iter()
                    .zip(group)
                    .map(|(range, collective)| {
                        let (theta, direction) = (&theta, &direction);
                        s.spawn(move || {
                            let (lo, hi) = *range;
                            let part = source(id, &a[2 * lo..2 * hi], &e[3 * lo..3 * hi]);
                            let local = part.reduce(theta, request(direction))?;
                            let losses = tensor(&losses[lo..hi], [hi - lo]);
                            all_reduce_stats(
                                Some(&local),
                                Some(losses),
                                &Device::default(),
                                &collective,
                            )
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| panic!("worker panicked")))
                    .collect()
            });
            for result in results {
                let group = result.unwrap_or_else(|err| panic!("{err}"));
                assert_eq!(group.stats.batch_size, 5);
                assert_eq!(
                    group.sizes,
                    shards.iter().map(|(lo, hi)| hi - lo).collect::<Vec<_>>()
                );
                let got = flat(&group.stats);
                for (got, expected) in got.iter().zip(&expected) {
                    assert_eq!(got.len(), expected.len(), "{got:?}");
                    for (x, y) in got.iter().zip(expected) {
                        assert!(
                            (x - y).abs() <= 1e-6 * (1.0 + y.abs()),
                            "{got:?} {expected:?}"
                        );
                    }
                }
                assert_eq!(group.losses.map(values), Some(losses.to_vec()));
            }
        }
    }

    /// A statistic added as a newcomer adds one (`Statistic::SumCubes`: a variant, its
    /// formula from formed rows, and this test that reads it) reaches every source unchanged:
    /// the fast path forms the rows of a rank-one layer for it, a merged batch and the
    /// data-parallel all-reduce combine it by its rule, and reduced statistics answer it.
    #[test]
    fn a_new_statistic_reaches_every_source() {
        let id = ParamId::new();
        let a = [1.0, -2.0, 0.5, 3.0, -1.5, 0.25, 2.0, 1.0];
        let e = [
            0.1, 0.2, -0.3, 1.0, -1.0, 2.0, 0.0, 0.5, -0.25, 4.0, -3.0, 0.5,
        ];
        let theta = params(id, &[0.0; 6]);
        // Brute force from the outer products a_n e_nᵀ.
        let g = |n: usize| -> Vec<f64> {
            (0..2)
                .flat_map(|i| (0..3).map(move |o| a[2 * n + i] * e[3 * n + o]))
                .collect()
        };
        let expected: Vec<f64> = (0..4)
            .map(|n| g(n).iter().map(|x| x.powi(3)).sum())
            .collect();
        let cubes = |stats: &PerSampleStats| {
            values(
                stats
                    .get(Statistic::SumCubes)
                    .map(|v| v[0].clone())
                    .unwrap_or_else(|| tensor(&[], [0])),
            )
        };
        let close = |got: &[f64]| {
            got.len() == expected.len()
                && got
                    .iter()
                    .zip(&expected)
                    .all(|(x, y)| (x - y).abs() <= 1e-6 * (1.0 + y.abs()))
        };
        let asked = || {
            Request::new()
                .with(Statistic::SumCubes)
                .with(Statistic::SqNorm)
        };
        // The fast path, whole and in two parts.
        let whole = source(id, &a, &e)
            .reduce(&theta, asked())
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(close(&cubes(&whole)), "{:?} {expected:?}", cubes(&whole));
        let parts = || {
            vec![
                Arc::new(source(id, &a[..2], &e[..3])) as Arc<dyn PerSampleSource>,
                Arc::new(source(id, &a[2..], &e[3..])),
            ]
        };
        let merged = crate::MergedPerSample::new(parts())
            .unwrap_or_else(|err| panic!("{err}"))
            .reduce(&theta, asked())
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(close(&cubes(&merged)), "{:?}", cubes(&merged));
        // Two workers, one sample and three.
        let group = LocalCollective::group(2, WAIT);
        let joined: Vec<PerSampleStats> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .into_iter()
                .zip([(0, 1), (1, 4)])
                .map(|(collective, (lo, hi))| {
                    let theta = &theta;
                    s.spawn(move || {
                        let local = source(id, &a[2 * lo..2 * hi], &e[3 * lo..3 * hi])
                            .reduce(theta, asked())?;
                        all_reduce_stats(Some(&local), None, &Device::default(), &collective)
                            .map(|group| group.stats)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| panic!("worker panicked"))
                        .unwrap_or_else(|err| panic!("{err}"))
                })
                .collect()
        });
        for stats in &joined {
            assert!(close(&cubes(stats)), "{:?}", cubes(stats));
        }
        let reduced = ReducedPerSample::new(joined[0].clone(), None)
            .reduce(&theta, Request::new().with(Statistic::SumCubes))
            .unwrap_or_else(|err| panic!("{err}"));
        assert!(close(&cubes(&reduced)), "{:?}", cubes(&reduced));
    }

    /// A worker without statistics makes the step fail on every worker, which all return.
    #[test]
    fn a_worker_without_statistics_fails_the_step_everywhere() {
        let id = ParamId::new();
        let theta = params(id, &[0.0; 6]);
        let direction = params(id, &[1.0; 6]);
        let group = LocalCollective::group(2, WAIT);
        let results: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .into_iter()
                .map(|collective| {
                    let (theta, direction) = (&theta, &direction);
                    s.spawn(move || {
                        let local = (collective.rank() == 0).then(|| {
                            source(id, &[1.0, 2.0], &[1.0, 2.0, 3.0])
                                .reduce(theta, request(direction))
                                .unwrap_or_else(|err| panic!("{err}"))
                        });
                        all_reduce_stats(local.as_ref(), None, &Device::default(), &collective)
                            .is_err()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(false))
                .collect()
        });
        assert_eq!(results, vec![true, true]);
    }

    /// A worker that never joins makes the others' all-reduce fail after the timeout.
    #[test]
    fn a_missing_worker_times_out() {
        let group = LocalCollective::group(2, Duration::from_millis(50));
        let result = group[0].all_reduce_sum(tensor(&[1.0], [1]));
        assert!(
            matches!(result, Err(PerSampleError::HostWorker(_))),
            "{result:?}"
        );
    }

    /// Reduced statistics answer what was reduced, stream elements from their element source,
    /// and refuse what was not reduced.
    #[test]
    fn reduced_statistics_answer_only_what_was_reduced() {
        let id = ParamId::new();
        let theta = params(id, &[0.0; 6]);
        let direction = params(id, &[1.0; 6]);
        let part = source(id, &[1.0, 2.0, -1.0, 0.5], &[1.0, 2.0, 3.0, 0.5, 0.5, -2.0]);
        let mut stats = part
            .reduce(&theta, request(&direction))
            .unwrap_or_else(|err| panic!("{err}"));
        stats.remove(Statistic::SumSq);
        let reduced = ReducedPerSample::new(stats.clone(), Some(Arc::new(part)));
        let mut seen = 0;
        let mut sink = |_: usize, chunk: Elements| -> Result<(), PerSampleError> {
            seen += chunk.dense().dims()[0];
            Ok(())
        };
        let mut asked = Request::new()
            .with(Statistic::SqNorm)
            .project_on(Direction::Gradient, &direction);
        asked.elements = Some(&mut sink);
        let got = reduced
            .reduce(&theta, asked)
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(flat_sq(&got), flat_sq(&stats));
        assert_eq!(seen, 2, "both samples' elements streamed");
        let asked = Request::new().with(Statistic::SumSq);
        assert!(reduced.reduce(&theta, asked).is_err());
        let no_elements = ReducedPerSample::new(stats, None);
        let mut sink = |_: usize, _: Elements| -> Result<(), PerSampleError> { Ok(()) };
        let mut asked = Request::new();
        asked.elements = Some(&mut sink);
        assert!(no_elements.reduce(&theta, asked).is_err());
    }

    fn flat_sq(stats: &PerSampleStats) -> Vec<f64> {
        values(
            stats
                .get(Statistic::SqNorm)
                .map(|v| v[0].clone())
                .unwrap_or_else(|| tensor(&[], [0])),
        )
    }
}
