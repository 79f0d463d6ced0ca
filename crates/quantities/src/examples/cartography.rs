//! Dataset cartography (Swayamdipta et al., 2020): each example placed by its *confidence*
//! (the mean probability of its labelled class across visits) and its *variability* (that
//! probability's spread), and the three regions of the resulting map.

use std::fmt;

use super::record::ExampleStats;

/// A region of the data map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Region {
    /// Confident and steady: learned early and kept.
    EasyToLearn,
    /// Variable: the model keeps changing its mind (often the examples that help
    /// generalisation most).
    Ambiguous,
    /// Steadily unconfident: the label the model keeps disagreeing with (mislabeled examples
    /// land here).
    HardToLearn,
}

impl Region {
    /// The region's name as the map writes it.
    pub fn label(self) -> &'static str {
        match self {
            Self::EasyToLearn => "easy-to-learn",
            Self::Ambiguous => "ambiguous",
            Self::HardToLearn => "hard-to-learn",
        }
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Where the example lies on the map: `(variability, confidence)`; `None` without a
/// confidence (a loss that is not a cross-entropy). One visit counts as no variability.
pub fn coordinates(stats: &ExampleStats) -> Option<(f64, f64)> {
    if !stats.confidence_mean.is_finite() {
        return None;
    }
    let variability = if stats.confidence_std.is_finite() {
        stats.confidence_std
    } else {
        0.0
    };
    Some((variability, stats.confidence_mean))
}

/// The borders of a run's map, placed by the run's own examples as the paper reads its maps
/// (the most variable third are ambiguous; the others split by their confidence): an example
/// is [`Region::Ambiguous`] at or above the `variability` border, else
/// [`Region::HardToLearn`] below the `confidence` border and [`Region::EasyToLearn`] at or
/// above it. Relative borders keep the regions meaningful for a short run whose examples are
/// all still unsure, and for one with many classes (where 0.5 is a high probability).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapBorders {
    /// The variability at the top third of the run's examples.
    pub variability: f64,
    /// The median confidence of the examples below the variability border.
    pub confidence: f64,
}

impl MapBorders {
    /// The borders for `rows` (those with a confidence); `None` when none has one.
    pub fn of(rows: &[ExampleStats]) -> Option<Self> {
        let mut placed: Vec<(f64, f64)> = rows.iter().filter_map(coordinates).collect();
        if placed.is_empty() {
            return None;
        }
        placed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let variability = placed[(2 * placed.len()) / 3].0;
        let mut steady: Vec<f64> = placed
            .iter()
            .filter(|(v, _)| *v < variability)
            .map(|(_, c)| *c)
            .collect();
        steady.sort_by(f64::total_cmp);
        let confidence = steady.get(steady.len() / 2).copied().unwrap_or(0.5);
        Some(Self {
            variability,
            confidence,
        })
    }

    /// The example's region; `None` without a confidence.
    pub fn region(&self, stats: &ExampleStats) -> Option<Region> {
        let (variability, confidence) = coordinates(stats)?;
        Some(if variability >= self.variability {
            Region::Ambiguous
        } else if confidence >= self.confidence {
            Region::EasyToLearn
        } else {
            Region::HardToLearn
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ExampleRecord, Visit};
    use super::*;

    fn visits(id: u64, losses: &[f64], margins: bool) -> Vec<Visit> {
        losses
            .iter()
            .enumerate()
            .map(|(step, &loss)| Visit {
                id,
                step,
                loss,
                grad_norm: 1.0,
                relative_share: 1.0,
                margin: margins.then_some(0.0),
                worst: None,
            })
            .collect()
    }

    /// Confidence and variability against a direct computation of the labelled class's
    /// probabilities `exp(−ℓ)`, and the regions they put three examples in.
    #[test]
    fn confidence_variability_and_regions_match_a_direct_computation() {
        let mut record = ExampleRecord::new(8, std::f64::consts::LN_2);
        let easy = [0.05, 0.02, 0.01, 0.01];
        let ambiguous = [0.05, 3.0, 0.1, 2.5];
        let hard = [2.0, 2.2, 2.5, 2.4];
        for visit in [
            visits(1, &easy, true),
            visits(2, &ambiguous, true),
            visits(3, &hard, true),
            visits(4, &easy, false),
        ]
        .concat()
        .chunks(1)
        {
            record.fold(visit);
        }
        for (id, losses) in [(1, &easy), (2, &ambiguous), (3, &hard)] {
            let p: Vec<f64> = losses.iter().map(|l| (-l).exp()).collect();
            let mean = p.iter().sum::<f64>() / p.len() as f64;
            let var = p.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / p.len() as f64;
            let stats = record.get(id).unwrap();
            assert!((stats.confidence_mean - mean).abs() < 1e-12, "{id}");
            assert!((stats.confidence_std - var.sqrt()).abs() < 1e-12, "{id}");
        }
        // Borders from the run: the most variable third (the ambiguous example) above the
        // variability border; the others split at their median confidence.
        let rows: Vec<ExampleStats> = record.rows().into_iter().cloned().collect();
        let borders = MapBorders::of(&rows).unwrap();
        let region = |id| borders.region(record.get(id).unwrap());
        assert_eq!(region(1), Some(Region::EasyToLearn));
        assert_eq!(region(2), Some(Region::Ambiguous));
        assert_eq!(region(3), Some(Region::HardToLearn));
        // Without margins (not a cross-entropy) there is no probability to place.
        assert_eq!(region(4), None);
        assert_eq!(MapBorders::of(&rows[3..]), None);
    }
}
