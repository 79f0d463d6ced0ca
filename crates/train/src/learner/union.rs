//! The one place where the parts of an optimizer step become what the Cockpit tracks: one
//! micro-batch, the `k` micro-batches of gradient accumulation or of `MultiDevice`, or the
//! workers of a DDP group (each a [`Part`] that joined its own micro-batches first). Mean
//! losses, per-sample losses, example ids, margins, worst positions, per-sample sources and
//! curvature sources are joined here, in the parts' order, so the samples stay aligned across
//! all of them; a new per-sample input is one field here.

use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor};
use cockpit_quantities::StepInfo;
use cockpit_quantities::curvature::{CurvatureSource, MergedCurvature};
use cockpit_quantities::persample::ErrorChain;
use cockpit_quantities::persample::{
    GroupStats, MergedPerSample, PerSampleError, PerSampleSource, ReducedPerSample,
};

use crate::step::Pending;

/// The part of an optimizer step one micro-batch (or one DDP worker) contributes.
#[derive(Debug, Default)]
pub(super) struct Part {
    /// The mean loss of each of its micro-batches (detached).
    pub(super) means: Vec<Tensor<1>>,
    /// Its number of examples, when known (from its per-sample source or its losses).
    pub(super) size: Option<usize>,
    /// Its per-sample losses `[b]` (`None` if a micro-batch has none).
    pub(super) losses: Option<Tensor<1>>,
    /// Its examples' ids (`None` if a micro-batch has none).
    pub(super) ids: Option<Vec<u64>>,
    /// Its examples' margins `[b]` (`None` if a micro-batch has none).
    pub(super) margins: Option<Tensor<1>>,
    /// Its examples' worst positions: their losses `[b]` and indices `[b]` (`None` if a
    /// micro-batch has none).
    pub(super) worst: Option<(Tensor<1>, Tensor<1, Int>)>,
    /// Its per-sample sources, one per micro-batch (`None` if a micro-batch has none).
    pub(super) per_sample: Option<Vec<Arc<dyn PerSampleSource>>>,
    /// Its curvature sources with their batch sizes (`None` if a micro-batch has none).
    pub(super) curvature: Option<Vec<(usize, Box<dyn CurvatureSource>)>>,
}

impl Part {
    /// What one training step left, as a part; a per-sample recording that failed is a
    /// problem (and the part has no per-sample source).
    pub(super) fn of(pending: Pending, problems: &mut Vec<String>) -> Self {
        let Pending {
            capture,
            curvature,
            fallback,
        } = pending;
        let per_sample = match capture.factors {
            Some(Ok(factors)) => Some(Pending::per_sample(factors, fallback)),
            Some(Err(err)) => {
                problems.push(format!(
                    "per-sample gradients unavailable: {}",
                    ErrorChain(&err)
                ));
                None
            }
            None => None,
        };
        // A recording of no drop-in holds no sample: the size then comes from the losses.
        let size = per_sample
            .as_ref()
            .map(|source| source.batch_size())
            .filter(|size| *size > 0)
            .or_else(|| capture.losses.as_ref().map(|l| l.dims()[0]));
        Self {
            means: capture.loss.into_iter().collect(),
            size,
            losses: capture.losses,
            ids: capture.ids,
            margins: capture.margins,
            worst: capture.worst,
            per_sample: per_sample.map(|source| vec![source]),
            curvature: curvature.map(|c| vec![(size.unwrap_or(1), c)]),
        }
    }

    /// The parts joined in order, their tensors on `device`. Parts of different sizes are
    /// joined without per-sample or curvature sources (a problem says why): the summed
    /// gradient is then not the union's mean gradient times `k`.
    pub(super) fn join(parts: Vec<Part>, device: &Device, problems: &mut Vec<String>) -> Self {
        let sizes: Option<Vec<usize>> = parts.iter().map(|p| p.size).collect();
        let uneven = sizes
            .as_ref()
            .is_some_and(|sizes| sizes.iter().any(|b| *b != sizes[0]));
        if let Some(sizes) = sizes.as_ref().filter(|_| uneven) {
            problems.push(format!(
                "micro-batches (or data-parallel workers) of different sizes {sizes:?}: \
                 per-sample and curvature quantities are refused on this step (the summed \
                 gradient is not the union's mean gradient times k)"
            ));
        }
        let on = |t: Tensor<1>| t.to_device(device);
        let mut joined = Pieces {
            means: Vec::new(),
            size: sizes.map(|sizes| sizes.iter().sum()),
            losses: Some(Vec::new()),
            ids: Some(Vec::new()),
            margins: Some(Vec::new()),
            worst: Some(Vec::new()),
            per_sample: (!uneven).then(Vec::new),
            curvature: (!uneven).then(Vec::new),
        };
        for part in parts {
            joined.means.extend(part.means.into_iter().map(on));
            joined.losses = append(joined.losses, part.losses.map(|l| vec![on(l)]));
            joined.ids = append(joined.ids, part.ids);
            joined.margins = append(joined.margins, part.margins.map(|m| vec![on(m)]));
            let worst = part.worst.map(|(l, p)| vec![(on(l), p.to_device(device))]);
            joined.worst = append(joined.worst, worst);
            joined.per_sample = append(joined.per_sample, part.per_sample);
            joined.curvature = append(joined.curvature, part.curvature);
        }
        joined.whole()
    }

    /// The union of a data-parallel group's parts, in rank order, whose per-sample statistics
    /// the group reduced together (`group`, the all-reduce's answer): the parts joined as
    /// [`Part::join`] joins them, each part of the size the all-reduce knows, with the group's
    /// per-sample losses where every worker gave its own, and one per-sample source that
    /// answers with the group's statistics (the parts' own sources give the gradient elements,
    /// for histograms). A group that could not reduce, or whose parts differ in size, leaves
    /// the union without a per-sample source (a problem says why); one that could not reduce
    /// leaves it the parts' own losses.
    pub(super) fn join_reduced(
        parts: Vec<Part>,
        group: Result<GroupStats, PerSampleError>,
        device: &Device,
        problems: &mut Vec<String>,
    ) -> Self {
        let (stats, losses, sizes) = match group {
            Ok(group) => (Some(group.stats), group.losses, group.sizes),
            Err(err) => {
                problems.push(format!(
                    "per-sample statistics unavailable: {}",
                    ErrorChain(&err)
                ));
                (None, None, Vec::new())
            }
        };
        let parts = parts
            .into_iter()
            .enumerate()
            .map(|(rank, part)| Part {
                size: sizes.get(rank).copied().or(part.size),
                ..part
            })
            .collect();
        let union = Part::join(parts, device, problems);
        // `join` kept the sources only where the parts are of one size.
        let per_sample = match stats.filter(|s| s.batch_size > 0 && union.per_sample.is_some()) {
            Some(stats) => {
                let elements = union.per_sample_source(device, problems);
                Some(vec![
                    Arc::new(ReducedPerSample::new(stats, elements)) as Arc<dyn PerSampleSource>
                ])
            }
            None => None,
        };
        Part {
            losses: losses.or(union.losses),
            per_sample,
            ..union
        }
    }

    /// The step's info: `info` with this part's per-sample losses, ids, margins, batch size,
    /// per-sample source (merged on `device` where there are several) and curvature source
    /// (merged likewise).
    pub(super) fn into_info(
        self,
        mut info: StepInfo,
        device: &Device,
        problems: &mut Vec<String>,
    ) -> StepInfo {
        let source = self.per_sample_source(device, problems);
        if let Some(losses) = self.losses {
            info = info.with_individual_losses(losses);
        }
        if let Some(ids) = self.ids {
            info = info.with_sample_ids(ids);
        }
        if let Some(margins) = self.margins {
            info = info.with_margins(margins);
        }
        if let Some((losses, positions)) = self.worst {
            info = info.with_worst_positions(losses, positions);
        }
        if let Some(source) = source {
            if source.batch_size() > 0 {
                info = info.with_batch_size(source.batch_size());
            }
            info = info.with_per_sample(source);
        }
        match self.curvature {
            Some(mut parts) if parts.len() == 1 => {
                if let Some((_, source)) = parts.pop() {
                    info = info.with_curvature(source);
                }
            }
            Some(parts) if !parts.is_empty() => match MergedCurvature::new(parts) {
                Ok(merged) => info = info.with_curvature(merged),
                Err(err) => problems.push(format!("curvature unavailable: {}", ErrorChain(&err))),
            },
            _ => {}
        }
        info
    }

    /// The part's per-sample sources as one (merged on `device` where there are several).
    pub(super) fn per_sample_source(
        &self,
        device: &Device,
        problems: &mut Vec<String>,
    ) -> Option<Arc<dyn PerSampleSource>> {
        match self.per_sample.as_deref()? {
            [] => None,
            [one] => Some(one.clone()),
            many => match MergedPerSample::new(many.to_vec()) {
                Ok(merged) => Some(Arc::new(merged.on_device(device.clone()))),
                Err(err) => {
                    problems.push(format!(
                        "per-sample gradients unavailable: {}",
                        ErrorChain(&err)
                    ));
                    None
                }
            },
        }
    }

    /// The mean loss of the step: the mean of its micro-batches' mean losses (`None` without).
    pub(super) fn mean_loss(&self) -> Option<Tensor<1>> {
        (!self.means.is_empty()).then(|| Tensor::cat(self.means.clone(), 0).mean())
    }
}

/// A [`Part`] being joined: tensors gathered in lists, concatenated once at the end.
struct Pieces {
    means: Vec<Tensor<1>>,
    size: Option<usize>,
    losses: Option<Vec<Tensor<1>>>,
    ids: Option<Vec<u64>>,
    margins: Option<Vec<Tensor<1>>>,
    worst: Option<Vec<(Tensor<1>, Tensor<1, Int>)>>,
    per_sample: Option<Vec<Arc<dyn PerSampleSource>>>,
    curvature: Option<Vec<(usize, Box<dyn CurvatureSource>)>>,
}

impl Pieces {
    fn whole(self) -> Part {
        let cat = |parts: Vec<Tensor<1>>| (!parts.is_empty()).then(|| Tensor::cat(parts, 0));
        Part {
            means: self.means,
            size: self.size,
            losses: self.losses.and_then(cat),
            ids: self.ids,
            margins: self.margins.and_then(cat),
            worst: self.worst.filter(|w| !w.is_empty()).map(|worst| {
                let (losses, positions): (Vec<_>, Vec<_>) = worst.into_iter().unzip();
                (Tensor::cat(losses, 0), Tensor::cat(positions, 0))
            }),
            per_sample: self.per_sample,
            curvature: self.curvature,
        }
    }
}

/// `all` followed by `more`; `None` once either is (a part without the input leaves the
/// union without it).
fn append<T>(all: Option<Vec<T>>, more: Option<Vec<T>>) -> Option<Vec<T>> {
    all.zip(more).map(|(mut all, more)| {
        all.extend(more);
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    fn tensor(values: &[f32], device: &Device) -> Tensor<1> {
        Tensor::from_data(TensorData::new(values.to_vec(), [values.len()]), device)
    }

    fn part(ids: Option<Vec<u64>>, losses: &[f32], device: &Device) -> Part {
        let mean = losses.iter().sum::<f32>() / losses.len() as f32;
        Part {
            means: vec![tensor(&[mean], device)],
            size: Some(losses.len()),
            losses: Some(tensor(losses, device)),
            margins: Some(tensor(
                &losses.iter().map(|l| -l).collect::<Vec<_>>(),
                device,
            )),
            // Worst positions: twice the loss, at the example's place in its part.
            worst: Some((
                tensor(&losses.iter().map(|l| 2.0 * l).collect::<Vec<_>>(), device),
                Tensor::arange(0..losses.len() as i64, device),
            )),
            ids,
            per_sample: Some(Vec::new()),
            curvature: Some(Vec::new()),
        }
    }

    fn values(t: Option<Tensor<1>>) -> Vec<f32> {
        t.map(|t| t.into_data().try_to_vec::<f32>().unwrap())
            .unwrap_or_default()
    }

    #[test]
    fn parts_join_in_order_and_stay_aligned() {
        let device = Device::flex();
        let mut problems = Vec::new();
        let joined = Part::join(
            vec![
                part(Some(vec![7, 3]), &[1.0, 2.0], &device),
                part(Some(vec![9, 1]), &[3.0, 6.0], &device),
            ],
            &device,
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(joined.size, Some(4));
        assert_eq!(joined.ids, Some(vec![7, 3, 9, 1]));
        assert_eq!(values(joined.losses.clone()), [1.0, 2.0, 3.0, 6.0]);
        assert_eq!(values(joined.margins.clone()), [-1.0, -2.0, -3.0, -6.0]);
        let (worst, positions) = joined.worst.clone().unwrap();
        assert_eq!(values(Some(worst)), [2.0, 4.0, 6.0, 12.0]);
        let positions = positions
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap();
        assert_eq!(positions, [0, 1, 0, 1]);
        // The step's loss is the mean of the micro-batches' means: (1.5 + 4.5) / 2.
        assert_eq!(values(joined.mean_loss()), [3.0]);
        assert!(joined.per_sample.is_some() && joined.curvature.is_some());
    }

    #[test]
    fn a_part_without_an_input_leaves_the_union_without_it() {
        let device = Device::flex();
        let mut problems = Vec::new();
        let mut second = part(None, &[3.0, 4.0], &device);
        second.margins = None;
        second.worst = None;
        let joined = Part::join(
            vec![part(Some(vec![1, 2]), &[1.0, 2.0], &device), second],
            &device,
            &mut problems,
        );
        assert_eq!(joined.ids, None);
        assert!(joined.margins.is_none() && joined.worst.is_none());
        assert_eq!(values(joined.losses), [1.0, 2.0, 3.0, 4.0]);
    }

    /// A data-parallel group's union takes the group's statistics and losses where the
    /// all-reduce gave them, and keeps the parts' own losses (aligned with their ids) where it
    /// did not or the parts differ in size.
    #[test]
    fn a_group_joins_with_its_reduced_statistics() {
        use cockpit_quantities::persample::PerSampleStats;
        let device = Device::flex();
        let parts = || {
            vec![
                part(Some(vec![1, 2]), &[1.0, 2.0], &device),
                part(Some(vec![3, 4]), &[3.0, 4.0], &device),
            ]
        };
        let group = |losses: &[f32], sizes: Vec<usize>| GroupStats {
            stats: PerSampleStats::new(sizes.iter().sum()),
            losses: Some(tensor(losses, &device)),
            sizes,
        };

        let mut problems = Vec::new();
        let reduced = group(&[5.0, 6.0, 7.0, 8.0], vec![2, 2]);
        let union = Part::join_reduced(parts(), Ok(reduced), &device, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(values(union.losses.clone()), [5.0, 6.0, 7.0, 8.0]);
        assert_eq!(union.ids, Some(vec![1, 2, 3, 4]));
        let source = union.per_sample_source(&device, &mut problems).unwrap();
        assert_eq!(source.batch_size(), 4);

        // Workers of different sizes: per-sample sources refused, the group's losses kept.
        let mut problems = Vec::new();
        let uneven = group(&[5.0, 6.0, 7.0, 8.0], vec![1, 3]);
        let union = Part::join_reduced(parts(), Ok(uneven), &device, &mut problems);
        assert!(union.per_sample.is_none());
        assert!(problems[0].contains("[1, 3]"), "{problems:?}");
        assert_eq!(values(union.losses), [5.0, 6.0, 7.0, 8.0]);

        let mut problems = Vec::new();
        let failed = Err(PerSampleError::Unsupported("a worker's layer".into()));
        let union = Part::join_reduced(parts(), failed, &device, &mut problems);
        assert!(union.per_sample.is_none());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("a worker's layer"), "{problems:?}");
        assert_eq!(values(union.losses), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(union.size, Some(4));
    }

    #[test]
    fn parts_of_different_sizes_lose_their_sources_and_say_why() {
        let device = Device::flex();
        let mut problems = Vec::new();
        let joined = Part::join(
            vec![
                part(Some(vec![1, 2]), &[1.0, 2.0], &device),
                part(Some(vec![3, 4, 5]), &[3.0, 4.0, 5.0], &device),
            ],
            &device,
            &mut problems,
        );
        assert!(joined.per_sample.is_none() && joined.curvature.is_none());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("[2, 3]"), "{problems:?}");
        // The examples themselves are still joined: ids and losses stay aligned.
        assert_eq!(joined.ids, Some(vec![1, 2, 3, 4, 5]));
    }
}
