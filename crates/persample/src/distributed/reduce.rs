//! The all-reduce of the workers' partial statistics.

use std::fmt::Debug;

use burn::tensor::{Device, Tensor, TensorCreationOptions, TensorData};

use crate::PerSampleError;
use crate::readback::read_values;
use crate::statistic::{Combine, PerSampleStats};

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
/// statistics (which statistics, for how many parameters, with or without losses), which
/// must agree.
const HEADER: usize = 5;

/// Joins every worker's partial statistics: this worker passes its own shard's `local`
/// statistics (`None` when it could not compute them: then every worker gets the error) and
/// per-sample `losses`, and gets the whole batch's, exactly, each statistic as its
/// [`Statistic::combine`](crate::Statistic::combine) says:
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
    let statistics = local.map(PerSampleStats::statistics).unwrap_or_default();
    let params = local
        .and_then(|s| s.iter().next().map(|(_, v)| v.len()))
        .unwrap_or(0);
    let first = local.and_then(|s| s.iter().flat_map(|(_, v)| v).next());
    let options = TensorCreationOptions::new(device.clone()).with_dtype(
        first
            .or(losses.as_ref())
            .map_or_else(|| burn::tensor::DType::F32, Tensor::dtype),
    );
    let b = local.map_or(0, |s| s.batch_size);
    let mut header = vec![0.0; HEADER * world];
    header[HEADER * rank..HEADER * (rank + 1)].copy_from_slice(&[
        b as f64,
        if local.is_some() { 0.0 } else { 1.0 },
        f64::from(statistics.bits()),
        params as f64,
        if losses.is_some() { 1.0 } else { 0.0 },
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
    // Per-sample vectors at this worker's offset in `B` zeros, sums as they are, maxima in
    // this worker's slot of `R` zeros: the sum over workers is the whole batch's.
    let pack = |v: &Tensor<1>, combine: Combine| -> Result<Tensor<1>, PerSampleError> {
        Ok(match combine {
            Combine::Concatenate if v.dims()[0] != b => {
                return Err(PerSampleError::Shape(format!(
                    "a per-sample statistic has {} entries for {b} samples",
                    v.dims()[0]
                )));
            }
            Combine::Concatenate => padded(v.clone(), offset, total - offset - b),
            Combine::Add => v.clone().to_device(device),
            Combine::Max => padded(v.clone().reshape([1]), rank, world - rank - 1),
        })
    };
    let mut packed = Vec::new();
    for (statistic, values) in local.iter().flat_map(|s| s.iter()) {
        for v in values {
            packed.push(pack(v, statistic.combine())?);
        }
    }
    if let Some(losses) = &losses {
        packed.push(pack(losses, Combine::Concatenate)?);
    }
    if packed.is_empty() {
        return Ok(GroupStats {
            stats: PerSampleStats::new(total),
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
    let mut stats = PerSampleStats::new(total);
    for (statistic, values) in local.iter() {
        let joined = values
            .iter()
            .map(|v| match statistic.combine() {
                Combine::Concatenate => take(total),
                Combine::Add => take(v.dims()[0]),
                Combine::Max => take(world).max(),
            })
            .collect();
        stats.insert(statistic, joined);
    }
    let losses = losses.map(|_| take(total));
    Ok(GroupStats {
        stats,
        losses,
        sizes,
    })
}
