//! The all-reduce of the workers' partial statistics.

use std::fmt::Debug;

use burn::tensor::{Device, Tensor, TensorCreationOptions, TensorData};

use crate::PerSampleError;
use crate::base::PerSampleStats;
use crate::readback::read_values;

use super::Collective;

/// The statistics of a data-parallel batch, the same on every worker of the group: what
/// [`all_reduce_stats`](crate::all_reduce_stats) returns.
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
