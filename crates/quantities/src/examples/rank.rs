//! Suspicious examples, ranked from the record, and the measures that check a ranking
//! ([`auroc`], [`precision_at`]).

use std::cmp::Ordering;
use std::fmt;

use super::record::ExampleStats;

/// What an example's record suggests, the first that applies in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Suspicion {
    /// Never counted as learned over at least two visits: mislabeled, or beyond the model.
    NeverLearned,
    /// Learned at times but unlearned on average (a negative mean margin, or a mean loss above
    /// the learned threshold): the network mostly preferred another answer — the signature
    /// of a wrong label (Pleiss et al.'s area under the margin).
    MislabeledLike,
    /// Learned, then unlearned at its last visit (forgetting events, Toneva et al.).
    Forgotten,
    /// Learned only in the second half of its visits: hard, but learnable.
    Hard,
    /// None of the above.
    Unremarkable,
}

impl Suspicion {
    /// The word `cockpit examples` prints.
    pub fn label(self) -> &'static str {
        match self {
            Self::NeverLearned => "never-learned",
            Self::MislabeledLike => "likely-mislabeled",
            Self::Forgotten => "forgotten",
            Self::Hard => "hard",
            Self::Unremarkable => "unremarkable",
        }
    }
}

impl fmt::Display for Suspicion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One example in the ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// Its record.
    pub stats: ExampleStats,
    /// How suspicious, larger first ([`score`]: the mean loss).
    pub score: f64,
    /// What the record suggests.
    pub suspicion: Suspicion,
    /// The record's numbers behind it, in words.
    pub evidence: String,
}

/// The suspicion score of one record: its mean loss over every visit, so that an example the
/// network memorised late in training still scores by the many visits at which it was not
/// learned. Measured on the flipped-label benchmark (BENCHMARKS.md, "Which examples") it finds
/// wrong labels as well as minus the mean margin (Pleiss et al.'s area under the margin) where
/// the network does not memorise them, and better where it does (AUROC 0.984–0.990 against
/// 0.976–0.986 at 20 % flipped with Adam); it needs no logits, so it ranks regression runs
/// too. NaN for an example never seen.
pub fn score(stats: &ExampleStats) -> f64 {
    stats.loss_mean
}

/// What `stats` suggests; `learned_loss` is the threshold the record used where there are no
/// margins.
pub fn suspicion(stats: &ExampleStats, learned_loss: f64) -> Suspicion {
    let unlearned_on_average = if stats.margin_mean.is_finite() {
        stats.margin_mean < 0.0
    } else {
        stats.loss_mean >= learned_loss
    };
    match stats.learned_visit {
        None if stats.seen >= 2 => Suspicion::NeverLearned,
        _ if unlearned_on_average => Suspicion::MislabeledLike,
        _ if stats.forgetting > 0 && !stats.learned_now => Suspicion::Forgotten,
        Some(visit) if 2 * visit > stats.seen => Suspicion::Hard,
        _ => Suspicion::Unremarkable,
    }
}

fn evidence(stats: &ExampleStats) -> String {
    let mut words = vec![format!(
        "seen {}x (steps {}-{}), loss mean {:.3} last {:.3}",
        stats.seen, stats.first_step, stats.last_step, stats.loss_mean, stats.loss_last
    )];
    if stats.margin_mean.is_finite() {
        words.push(format!(
            "margin mean {:.3} last {:.3}",
            stats.margin_mean, stats.margin_last
        ));
    }
    words.push(match stats.learned_visit {
        Some(visit) => format!("learned at visit {visit}"),
        None => "never learned".into(),
    });
    if stats.forgetting > 0 {
        words.push(format!("{} forgetting event(s)", stats.forgetting));
    }
    words.push(format!(
        "gradient norm {:.3} ± {:.3}, {:.2}x an average example's share",
        stats.grad_norm_mean, stats.grad_norm_std, stats.share_mean
    ));
    words.join(", ")
}

/// Every example, most suspicious first ([`score`]; ties by id). `learned_loss` is the
/// record's learned threshold (for [`suspicion`]).
pub fn rank(rows: &[ExampleStats], learned_loss: f64) -> Vec<Ranked> {
    let mut ranked: Vec<Ranked> = rows
        .iter()
        .map(|stats| Ranked {
            score: score(stats),
            suspicion: suspicion(stats, learned_loss),
            evidence: evidence(stats),
            stats: stats.clone(),
        })
        .collect();
    ranked.sort_by(|a, b| descending(a.score, b.score).then_with(|| a.stats.id.cmp(&b.stats.id)));
    ranked
}

/// Larger first, NaN last.
fn descending(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => b.total_cmp(&a),
    }
}

/// The area under the ROC curve of `scores` (larger = more likely positive) against
/// `positive`: the probability that a random positive scores above a random negative, ties
/// counting one half (the Mann-Whitney statistic, ranks averaged over ties). NaN without both
/// a positive and a negative; NaN scores count as the lowest.
pub fn auroc(scores: &[f64], positive: &[bool]) -> f64 {
    let mut order: Vec<usize> = (0..scores.len().min(positive.len())).collect();
    let key = |i: usize| {
        if scores[i].is_nan() {
            f64::NEG_INFINITY
        } else {
            scores[i]
        }
    };
    order.sort_by(|&a, &b| key(a).total_cmp(&key(b)));
    let (mut rank_sum, mut positives) = (0.0, 0usize);
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && key(order[end + 1]) == key(order[start]) {
            end += 1;
        }
        // Ranks start..=end (1-based: +1), averaged over the tie.
        let mean_rank = (start + end) as f64 / 2.0 + 1.0;
        for &i in &order[start..=end] {
            if positive[i] {
                rank_sum += mean_rank;
                positives += 1;
            }
        }
        start = end + 1;
    }
    let negatives = order.len() - positives;
    if positives == 0 || negatives == 0 {
        return f64::NAN;
    }
    let p = positives as f64;
    (rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64)
}

/// The fraction of positives among the `k` highest `scores` (ties broken by position).
/// NaN for `k = 0`.
pub fn precision_at(scores: &[f64], positive: &[bool], k: usize) -> f64 {
    let mut order: Vec<usize> = (0..scores.len().min(positive.len())).collect();
    order.sort_by(|&a, &b| descending(scores[a], scores[b]));
    let k = k.min(order.len());
    if k == 0 {
        return f64::NAN;
    }
    order[..k].iter().filter(|&&i| positive[i]).count() as f64 / k as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AUROC by brute force over every (positive, negative) pair, ties one half.
    fn pairs(scores: &[f64], positive: &[bool]) -> f64 {
        let (mut wins, mut total) = (0.0, 0.0);
        for (i, &p) in positive.iter().enumerate() {
            for (j, &q) in positive.iter().enumerate() {
                if p && !q {
                    total += 1.0;
                    wins += match scores[i].partial_cmp(&scores[j]) {
                        Some(Ordering::Greater) => 1.0,
                        Some(Ordering::Equal) => 0.5,
                        _ => 0.0,
                    };
                }
            }
        }
        wins / total
    }

    #[test]
    fn auroc_matches_the_pairwise_count() {
        let scores = [0.3, 0.9, 0.3, 0.1, 0.5, 0.5, 0.7, 0.3];
        let positive = [true, true, false, false, true, false, false, true];
        let fast = auroc(&scores, &positive);
        assert!((fast - pairs(&scores, &positive)).abs() < 1e-12, "{fast}");
        assert!(auroc(&[1.0, 2.0], &[true, true]).is_nan());
        assert_eq!(auroc(&[1.0, 2.0], &[false, true]), 1.0);
        assert_eq!(precision_at(&scores, &positive, 2), 0.5);
        assert_eq!(precision_at(&scores, &positive, 1), 1.0);
        assert!(precision_at(&scores, &positive, 0).is_nan());
    }

    fn stats(id: u64, loss_mean: f64, learned: Option<u64>, forgetting: u64) -> ExampleStats {
        let mut record = super::super::ExampleRecord::new(1, 0.5);
        record.fold(&[super::super::Visit {
            id,
            step: 0,
            loss: loss_mean,
            grad_norm: 1.0,
            relative_share: 1.0,
            margin: None,
            worst: None,
        }]);
        let mut s = record.get(id).unwrap().clone();
        s.seen = 4;
        s.learned_visit = learned;
        s.forgetting = forgetting;
        s.learned_now = forgetting == 0 && learned.is_some();
        s
    }

    #[test]
    fn ranking_and_suspicions() {
        let rows = vec![
            stats(1, 0.1, Some(1), 0),
            stats(2, 2.0, None, 0),
            stats(3, 0.3, Some(1), 1),
            stats(4, 0.7, Some(2), 0),
            stats(5, 0.2, Some(3), 0),
        ];
        let ranked = rank(&rows, 0.5);
        let ids: Vec<u64> = ranked.iter().map(|r| r.stats.id).collect();
        assert_eq!(ids, [2, 4, 3, 5, 1]);
        let kinds: Vec<Suspicion> = ranked.iter().map(|r| r.suspicion).collect();
        assert_eq!(
            kinds,
            [
                Suspicion::NeverLearned,
                Suspicion::MislabeledLike,
                Suspicion::Forgotten,
                Suspicion::Hard,
                Suspicion::Unremarkable
            ]
        );
        assert!(
            ranked[0].evidence.contains("never learned"),
            "{}",
            ranked[0].evidence
        );
    }
}
