//! Per-sample statistics of a data-parallel batch: every worker reduces its own shard, one
//! all-reduce joins the partial statistics.

use std::fmt::Debug;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use burn::tensor::distributed::{ReduceOperation, all_reduce};
use burn::tensor::{Device, Tensor, TensorCreationOptions, TensorData};

use super::base::{PerSampleSource, PerSampleStats, Request};
use crate::readback::read_values;
use crate::{PerSampleError, Snapshot};

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

    fn all_reduce_sum(&self, values: Tensor<1>) -> Result<Tensor<1>, PerSampleError> {
        Ok(all_reduce(values, ReduceOperation::Sum, self.devices.clone()).resolve())
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

/// The statistics of a data-parallel batch, the same on every worker of the group: what
/// [`all_reduce_stats`] returns.
#[derive(Debug, Clone)]
pub struct GroupStats {
    /// The whole batch's statistics (`batch_size` is the group's `B = Σ_r b_r`); samples are
    /// numbered worker after worker, in rank order.
    pub stats: PerSampleStats,
    /// The per-sample losses `[B]` in the same order, when every worker gave its own.
    pub losses: Option<Tensor<1>>,
    /// Each worker's number of samples `b_r`, in rank order.
    pub sizes: Vec<usize>,
}

/// Per-worker slots of the first all-reduce: batch size, failure flag, and the layout of the
/// statistics (how many per-sample vectors, sums of squares and maxima), which must agree.
const HEADER: usize = 5;

/// Joins every worker's partial statistics: this worker passes its own shard's `local`
/// statistics (`None` when it could not compute them: then every worker gets the error) and
/// per-sample `losses`, and gets the whole batch's, exactly:
/// - per-sample vectors (`‖g_n‖²`, `⟨g_n, v⟩`, losses): each worker writes its `b_r` values at
///   its offset in a zero vector of length `B`; the sum is their concatenation (adding zeros is
///   exact);
/// - `Σ_n g_n^{⊙2}`: summed;
/// - `max |g_{n,j}|`: each worker writes its maximum in its slot of a zero vector of length
///   `R`; the maximum of the sum's slots.
///
/// Projections are two-phase: every worker projects its samples on the same directions — the
/// batch's mean gradient after the gradient all-reduce, and the previous step's — before
/// calling this.
///
/// # Cost
///
/// Two all-reduces: `5R` numbers (sizes and layout), then, per parameter, `B` numbers per
/// per-sample statistic, `numel` for `Σ_n g_n^{⊙2}` and `R` for the maximum (`B` more for the
/// losses). Every worker calls it with statistics of the same request.
///
/// # Errors
///
/// [`PerSampleError::Unsupported`] when a worker could not compute its statistics,
/// [`PerSampleError::Shape`] when the workers' statistics differ in layout, or the
/// collective's error.
pub fn all_reduce_stats(
    local: Option<&PerSampleStats>,
    losses: Option<Tensor<1>>,
    device: &Device,
    collective: &dyn Collective,
) -> Result<GroupStats, PerSampleError> {
    let (rank, world) = (collective.rank(), collective.world_size());
    let vectors: Vec<Tensor<1>> = local
        .map(|s| {
            s.sq_norms
                .iter()
                .flatten()
                .chain(s.dots.iter().flatten())
                .cloned()
                .chain(losses.clone())
                .collect()
        })
        .unwrap_or_default();
    let sums: Vec<Tensor<1>> = local.and_then(|s| s.sum_sq.clone()).unwrap_or_default();
    let maxima: Vec<Tensor<1>> = local.and_then(|s| s.abs_max.clone()).unwrap_or_default();
    let first = vectors.iter().chain(&sums).chain(&maxima).next();
    let options = TensorCreationOptions::new(device.clone())
        .with_dtype(first.map_or_else(|| burn::tensor::DType::F32, Tensor::dtype));
    let b = local.map_or(0, |s| s.batch_size);
    let mut header = vec![0.0; HEADER * world];
    header[HEADER * rank..HEADER * (rank + 1)].copy_from_slice(&[
        b as f64,
        if local.is_some() { 0.0 } else { 1.0 },
        vectors.len() as f64,
        sums.len() as f64,
        maxima.len() as f64,
    ]);
    let header = collective.all_reduce_sum(Tensor::from_data(
        TensorData::new(header, [HEADER * world]),
        options.clone(),
    ))?;
    let header = read_values(header)?;
    let slot = |r: usize, i: usize| header[HEADER * r + i];
    if (0..world).any(|r| slot(r, 1) != 0.0) {
        return Err(PerSampleError::Unsupported(
            "a worker of the data-parallel group has no per-sample statistics for this step".into(),
        ));
    }
    if (0..world).any(|r| (2..HEADER).any(|i| slot(r, i) != slot(0, i))) {
        return Err(PerSampleError::Shape(
            "the workers of the data-parallel group reduced different statistics".into(),
        ));
    }
    let sizes: Vec<usize> = (0..world).map(|r| slot(r, 0) as usize).collect();
    let total: usize = sizes.iter().sum();
    let offset: usize = sizes[..rank].iter().sum();
    let zeros = |n: usize| Tensor::<1>::zeros([n], options.clone());
    let padded = |v: Tensor<1>, before: usize, after: usize| {
        let mut pieces = Vec::with_capacity(3);
        if before > 0 {
            pieces.push(zeros(before));
        }
        pieces.push(v.to_device(device));
        if after > 0 {
            pieces.push(zeros(after));
        }
        Tensor::cat(pieces, 0)
    };
    let mut packed = Vec::new();
    for v in &vectors {
        if v.dims()[0] != b {
            return Err(PerSampleError::Shape(format!(
                "a per-sample statistic has {} entries for {b} samples",
                v.dims()[0]
            )));
        }
        packed.push(padded(v.clone(), offset, total - offset - b));
    }
    packed.extend(sums.iter().map(|s| s.clone().to_device(device)));
    packed.extend(
        maxima
            .iter()
            .map(|m| padded(m.clone().reshape([1]), rank, world - rank - 1)),
    );
    if packed.is_empty() {
        return Ok(GroupStats {
            stats: PerSampleStats {
                batch_size: total,
                ..PerSampleStats::default()
            },
            losses: None,
            sizes,
        });
    }
    let summed = collective.all_reduce_sum(Tensor::cat(packed, 0))?;
    let mut at = 0;
    let mut take = |n: usize| {
        let piece = summed.clone().slice(at..at + n);
        at += n;
        piece
    };
    let local = local.ok_or_else(|| PerSampleError::Shape("no local statistics".into()))?;
    let mut vector = || take(total);
    let sq_norms = local
        .sq_norms
        .as_ref()
        .map(|v| v.iter().map(|_| vector()).collect::<Vec<_>>());
    let dots = local
        .dots
        .iter()
        .map(|d| d.iter().map(|_| vector()).collect::<Vec<_>>())
        .collect();
    let losses = losses.map(|_| vector());
    let sum_sq = local
        .sum_sq
        .as_ref()
        .map(|v| v.iter().map(|s| take(s.dims()[0])).collect::<Vec<_>>());
    let abs_max = local
        .abs_max
        .as_ref()
        .map(|v| v.iter().map(|_| take(world).max()).collect::<Vec<_>>());
    Ok(GroupStats {
        stats: PerSampleStats {
            batch_size: total,
            sq_norms,
            dots,
            sum_sq,
            abs_max,
            ..PerSampleStats::default()
        },
        losses,
        sizes,
    })
}

/// A [`PerSampleSource`] whose statistics were reduced beforehand ([`all_reduce_stats`]) and
/// whose gradient elements (for histograms) come from another source: on a data-parallel
/// group, the node's workers' own sources, streamed one after another.
///
/// A request must ask for statistics that were reduced: projections are those the workers
/// computed, in their order (the Cockpit asks for the mean gradient's, then the previous
/// step's).
///
/// # Cost
///
/// None beyond cloning tensor handles, and the element source's pass for histograms.
#[derive(Debug, Clone)]
pub struct ReducedPerSample {
    stats: PerSampleStats,
    elements: Option<Arc<dyn PerSampleSource>>,
}

impl ReducedPerSample {
    /// Reduced `stats`; gradient elements, when asked for, from `elements`.
    pub fn new(stats: PerSampleStats, elements: Option<Arc<dyn PerSampleSource>>) -> Self {
        Self { stats, elements }
    }
}

impl PerSampleSource for ReducedPerSample {
    fn batch_size(&self) -> usize {
        self.stats.batch_size
    }

    fn reduce(
        &self,
        params: &Snapshot,
        request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        let missing = |what: &str| {
            PerSampleError::Unsupported(format!("{what} was not reduced for this step"))
        };
        let wanted = |asked: bool, have: &Option<Vec<Tensor<1>>>, what: &str| match (asked, have) {
            (false, _) => Ok(None),
            (true, Some(v)) if v.len() == params.len() => Ok(Some(v.clone())),
            (true, Some(_)) => Err(PerSampleError::Shape(format!(
                "{what} was reduced for another parameter set"
            ))),
            (true, None) => Err(missing(what)),
        };
        if request.directions.len() > self.stats.dots.len() {
            return Err(missing("a projection"));
        }
        let stats = PerSampleStats {
            batch_size: self.stats.batch_size,
            sq_norms: wanted(request.sq_norms, &self.stats.sq_norms, "‖g_n‖²")?,
            dots: self.stats.dots[..request.directions.len()].to_vec(),
            sum_sq: wanted(request.sum_sq, &self.stats.sum_sq, "Σ_n g_n²")?,
            abs_max: wanted(request.abs_max, &self.stats.abs_max, "max |g|")?,
            ..PerSampleStats::default()
        };
        if let Some(sink) = request.elements {
            let source = self
                .elements
                .as_ref()
                .ok_or_else(|| missing("the gradient elements"))?;
            let mut only = Request::new();
            only.elements = Some(sink);
            only.chunk_elements = request.chunk_elements;
            source.reduce(params, only)?;
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
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
        let mut request = Request::new();
        request.sq_norms = true;
        request.sum_sq = true;
        request.abs_max = true;
        request.directions = vec![direction];
        request
    }

    /// Flattened statistics: ‖g_n‖², ⟨g_n, v⟩, Σ g², max |g|.
    fn flat(stats: &PerSampleStats) -> [Vec<f64>; 4] {
        let first = |v: &Option<Vec<Tensor<1>>>| {
            values(
                v.as_ref()
                    .map(|v| v[0].clone())
                    .unwrap_or_else(|| tensor(&[], [0])),
            )
        };
        [
            first(&stats.sq_norms),
            values(stats.dots[0][0].clone()),
            first(&stats.sum_sq),
            first(&stats.abs_max),
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
        stats.sum_sq = None;
        let reduced = ReducedPerSample::new(stats.clone(), Some(Arc::new(part)));
        let mut seen = 0;
        let mut sink = |_: usize, chunk: Elements| -> Result<(), PerSampleError> {
            seen += chunk.dense().dims()[0];
            Ok(())
        };
        let mut asked = Request::new();
        asked.sq_norms = true;
        asked.directions = vec![&direction];
        asked.elements = Some(&mut sink);
        let got = reduced
            .reduce(&theta, asked)
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(flat_sq(&got), flat_sq(&stats));
        assert_eq!(seen, 2, "both samples' elements streamed");
        let mut asked = Request::new();
        asked.sum_sq = true;
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
                .sq_norms
                .as_ref()
                .map(|v| v[0].clone())
                .unwrap_or_else(|| tensor(&[], [0])),
        )
    }
}
