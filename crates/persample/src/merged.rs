//! One batch's per-sample gradients held in parts: the micro-batches of gradient accumulation,
//! or the shards of a batch split across devices.

use std::sync::Arc;

use burn::tensor::Device;

use super::base::{PerSampleSource, Request};
use super::statistic::{PerSampleStats, combine_parts};
use crate::{PerSampleError, Snapshot};

/// Per-sample gradients of one batch whose samples are spread over several sources (parts),
/// merged exactly: every statistic Cockpit uses is per sample or a sum over samples, so each
/// part reduces its own samples and the results are combined, never the per-sample gradients
/// themselves.
///
/// The merge, per parameter, as each statistic's [`Statistic::combine`](crate::Statistic::combine)
/// says:
/// - `‖g_n‖²` and `⟨g_n, v⟩` (per sample): the parts' vectors concatenated in part order;
/// - `Σ_n g_n^{⊙2}`: the parts' sums added;
/// - `max |g_{n,j}|`: the largest of the parts' maxima;
/// - gradient elements (histograms): each part's chunks handed on in turn (counts add).
///
/// Projections need their direction before the parts reduce: the quantities project on the
/// *whole* batch's mean gradient (the Cockpit's `grads`), which each part receives as is — with
/// several devices that is the gradient after the all-reduce (a two-phase step: all-reduce,
/// then the local projections).
///
/// Samples are numbered part after part, so a part of `b_k` samples holds samples
/// `b_0 + … + b_{k−1}` onwards; per-sample losses given with the step must follow that order.
///
/// # Cost
///
/// Each part's own cost (see [`Recording`](super::Recording) and
/// [`ExactPerSample`](super::ExactPerSample)). What crosses between parts (devices): per
/// parameter `b_k` numbers per per-sample statistic, `numel` for `Σ_n g_n^{⊙2}`, one for the
/// maximum; the histograms' counts stay with the quantities. All merged tensors are moved to
/// one device ([`MergedPerSample::on_device`], else the first part's).
#[derive(Debug, Clone)]
pub struct MergedPerSample {
    parts: Vec<Arc<dyn PerSampleSource>>,
    device: Option<Device>,
}

impl MergedPerSample {
    /// The batch made of `parts`, in sample order.
    ///
    /// # Errors
    ///
    /// [`PerSampleError::Shape`] if there is no part with a sample.
    pub fn new(parts: Vec<Arc<dyn PerSampleSource>>) -> Result<Self, PerSampleError> {
        let parts: Vec<_> = parts.into_iter().filter(|p| p.batch_size() > 0).collect();
        if parts.is_empty() {
            return Err(PerSampleError::Shape(
                "a merged batch needs at least one part with a sample".into(),
            ));
        }
        Ok(Self {
            parts,
            device: None,
        })
    }

    /// Puts the merged statistics on `device` (the parameters' device, where the quantities
    /// combine them with the gradient), instead of the first part's.
    pub fn on_device(self, device: Device) -> Self {
        Self {
            device: Some(device),
            ..self
        }
    }

    /// The parts, in sample order.
    pub fn parts(&self) -> &[Arc<dyn PerSampleSource>] {
        &self.parts
    }
}

impl PerSampleSource for MergedPerSample {
    fn batch_size(&self) -> usize {
        self.parts.iter().map(|p| p.batch_size()).sum()
    }

    fn reduce(
        &self,
        params: &Snapshot,
        mut request: Request<'_>,
    ) -> Result<PerSampleStats, PerSampleError> {
        let mut merged: Option<PerSampleStats> = None;
        let mut device: Option<Device> = self.device.clone();
        for part in &self.parts {
            let stats = part.reduce(params, request.reborrow())?;
            let device = device.get_or_insert_with(|| stats.device().unwrap_or_default());
            let stats = stats.to_device(device);
            merged = Some(match merged {
                None => stats,
                Some(total) => merge(total, stats)?,
            });
        }
        merged.ok_or_else(|| PerSampleError::Shape("a merged batch has no part".into()))
    }
}

/// Merges the statistics of the samples of `a` followed by those of `b`.
fn merge(a: PerSampleStats, mut b: PerSampleStats) -> Result<PerSampleStats, PerSampleError> {
    if a.statistics() != b.statistics() {
        return Err(PerSampleError::Shape(
            "the parts of a merged batch returned different statistics".into(),
        ));
    }
    let mut merged = PerSampleStats::new(a.batch_size + b.batch_size);
    merged.notes = a.notes.clone();
    for note in std::mem::take(&mut b.notes) {
        if !merged.notes.contains(&note) {
            merged.notes.push(note);
        }
    }
    for (statistic, x) in a.iter() {
        let y = b.remove(statistic).unwrap_or_default();
        if x.len() != y.len() {
            return Err(PerSampleError::Shape(
                "the parts of a merged batch returned different statistics".into(),
            ));
        }
        let values = x
            .iter()
            .cloned()
            .zip(y)
            .map(|(x, y)| combine_parts(statistic.combine(), vec![x, y]))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| PerSampleError::Shape("an empty statistic".into()))?;
        merged.insert(statistic, values);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{linear_source as source, tensor, values64 as values};
    use crate::{Direction, Elements, ParamEntry, Recording, Statistic};
    use burn::module::ParamId;

    /// Three samples split 1 + 2 give the statistics of the three together, and the gradient
    /// elements of all three in sample order.
    #[test]
    fn parts_merge_into_the_whole_batch() {
        let id = ParamId::new();
        let a = [1.0, -2.0, 0.5, 3.0, -1.5, 0.25];
        let e = [0.1, 0.2, -0.3, 1.0, -1.0, 2.0, 0.0, 0.5, -0.25];
        let whole = source(id, &a, &e);
        let merged = MergedPerSample::new(vec![
            Arc::new(source(id, &a[..2], &e[..3])),
            Arc::new(source(id, &a[2..], &e[3..])),
        ])
        .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(merged.batch_size(), 3);
        let params = Snapshot::from_entries(vec![ParamEntry {
            id,
            name: "w".into(),
            shape: vec![2, 3],
            value: tensor(&[0.0; 6], [6]),
        }]);
        let direction = Snapshot::from_entries(vec![ParamEntry {
            value: tensor(&[1.0, -1.0, 2.0, 0.5, 0.0, -3.0], [6]),
            ..params.entries()[0].clone()
        }]);
        let reduce = |source: &dyn PerSampleSource| {
            let mut elements = Vec::new();
            let mut sink = |_: usize, chunk: Elements| -> Result<(), PerSampleError> {
                elements.extend(values(chunk.dense().reshape([-1])));
                Ok(())
            };
            let mut request = Request::new()
                .with(Statistic::SqNorm)
                .with(Statistic::SumSq)
                .with(Statistic::AbsMax)
                .project_on(Direction::Gradient, &direction);
            request.elements = Some(&mut sink);
            let stats = source
                .reduce(&params, request)
                .unwrap_or_else(|e| panic!("{e}"));
            let first = |s: Statistic| values(stats.get(s).unwrap_or_default()[0].clone());
            (
                first(Statistic::SqNorm),
                first(Statistic::Dot(Direction::Gradient)),
                first(Statistic::SumSq),
                first(Statistic::AbsMax),
                elements,
            )
        };
        // Brute force from the outer products a_n e_nᵀ.
        let g = |n: usize| -> Vec<f64> {
            (0..2)
                .flat_map(|i| (0..3).map(move |o| a[2 * n + i] * e[3 * n + o]))
                .collect()
        };
        let expected_sq: Vec<f64> = (0..3).map(|n| g(n).iter().map(|x| x * x).sum()).collect();
        let close = |x: &[f64], y: &[f64]| {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(x, y)| (x - y).abs() <= 1e-6 * (1.0 + y.abs()))
        };
        let (sq, dots, sum_sq, max, elements) = reduce(&merged);
        let whole = reduce(&whole);
        assert!(close(&sq, &whole.0) && close(&sq, &expected_sq), "{sq:?}");
        let v = [1.0, -1.0, 2.0, 0.5, 0.0, -3.0];
        let expected_dots: Vec<f64> = (0..3)
            .map(|n| g(n).iter().zip(v).map(|(x, y)| x * y).sum())
            .collect();
        assert!(
            close(&dots, &whole.1) && close(&dots, &expected_dots),
            "{dots:?}"
        );
        let expected_sum_sq: Vec<f64> = (0..6)
            .map(|j| (0..3).map(|n| g(n)[j] * g(n)[j]).sum())
            .collect();
        assert!(
            close(&sum_sq, &whole.2) && close(&sum_sq, &expected_sum_sq),
            "{sum_sq:?}"
        );
        assert_eq!((max.clone(), whole.3), (vec![6.0], vec![6.0]));
        let expected_elements: Vec<f64> = (0..3).flat_map(g).collect();
        assert!(close(&elements, &expected_elements), "{elements:?}");
        assert_eq!(elements, whole.4, "the same elements in the same order");
    }

    #[test]
    fn no_part_with_a_sample_is_an_error() {
        assert!(MergedPerSample::new(Vec::new()).is_err());
        let empty = Recording::new(0, Vec::new());
        assert!(MergedPerSample::new(vec![Arc::new(empty)]).is_err());
    }
}
