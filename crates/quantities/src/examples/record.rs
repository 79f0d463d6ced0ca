//! [`ExampleRecord`]: each example's statistics across the tracked steps that saw it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One example at one tracked step: what the step's per-sample pass already had.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Visit {
    /// The example's id.
    pub id: u64,
    /// The tracked step.
    pub step: usize,
    /// Its loss `ℓ_n`.
    pub loss: f64,
    /// Its gradient's norm `‖∇ℓ_n‖` (over every tracked parameter).
    pub grad_norm: f64,
    /// Its squared gradient norm over the batch's mean, `‖g_n‖² / ((1/B) Σ_m ‖g_m‖²)`: 1 for an
    /// average example, `B` for one that carries the whole gradient.
    pub relative_share: f64,
    /// Its margin (labelled logit minus the largest other), where the step had margins.
    pub margin: Option<f64>,
    /// Its worst counted position (a sequence's token, an image's pixel), where its loss is a
    /// mean over positions.
    pub worst: Option<WorstPosition>,
}

/// An example's worst position at one visit: where its loss, a mean over positions, is
/// highest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorstPosition {
    /// The position's index (a token's `t`; a map's `h·W + w`).
    pub position: u64,
    /// The loss at that position.
    pub loss: f64,
}

/// One example's statistics across the run: one row of the table
/// ([`write_table`](super::write_table)). Means are over the tracked steps that saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleStats {
    /// The example's id.
    pub id: u64,
    /// Tracked steps that saw it.
    pub seen: u64,
    /// The first of them.
    pub first_step: usize,
    /// The last of them.
    pub last_step: usize,
    /// Its mean loss.
    pub loss_mean: f64,
    /// Its loss at the last visit.
    pub loss_last: f64,
    /// The least-squares slope of its loss against the step (per step; negative while it is
    /// being learned, NaN before two visits at different steps).
    pub loss_trend: f64,
    /// The mean of its gradient norm `‖∇ℓ_n‖`.
    pub grad_norm_mean: f64,
    /// The standard deviation of its gradient norm across visits (NaN before two visits).
    pub grad_norm_std: f64,
    /// The mean of its squared gradient norm over its batch's mean (1 = an average example).
    pub share_mean: f64,
    /// The mean of its margin (the *area under the margin* per visit; NaN without margins).
    pub margin_mean: f64,
    /// Its margin at the last visit (NaN without margins).
    pub margin_last: f64,
    /// The first visit (1-based) at which it counted as learned, empty if never.
    pub learned_visit: Option<u64>,
    /// Whether it counted as learned at its last visit.
    pub learned_now: bool,
    /// Forgetting events: visits at which it was no longer learned after being learned at the
    /// visit before (Toneva et al., 2019).
    pub forgetting: u64,
    // Running sums behind the trend and the spread (steps relative to `first_step`), written
    // with the row so that the table holds the record's whole state.
    #[serde(rename = "sum_step")]
    pub(crate) sum_x: f64,
    #[serde(rename = "sum_step_sq")]
    pub(crate) sum_xx: f64,
    #[serde(rename = "sum_step_loss")]
    pub(crate) sum_xy: f64,
    #[serde(rename = "grad_norm_m2")]
    pub(crate) norm_m2: f64,
    #[serde(rename = "margins_seen")]
    pub(crate) margins: u64,
    /// Its worst position at the last visit that had positions (a language model's worst
    /// token: where in the sequence the example goes wrong; empty for one-position losses).
    #[serde(default)]
    pub worst_position: Option<u64>,
    /// The loss at that position (NaN without positions).
    #[serde(default = "nan")]
    pub worst_position_loss: f64,
    /// Dataset cartography's *confidence* (Swayamdipta et al., 2020): the mean over visits of
    /// the probability the model gives the labelled class, `p = exp(−ℓ_n)` for a
    /// cross-entropy loss (exactly: `ℓ_n = −log p_n(y_n)`; for a mean over positions, the
    /// geometric mean of the positions' probabilities). NaN without margins (a loss that is
    /// not a cross-entropy).
    #[serde(default = "nan")]
    pub confidence_mean: f64,
    /// Cartography's *variability*: the standard deviation of that probability across visits,
    /// over the visits as the paper takes it (`√(Σ (p − mean)² / visits)`; NaN before two
    /// visits with margins).
    #[serde(default = "nan")]
    pub confidence_std: f64,
    #[serde(rename = "confidence_m2", default)]
    pub(crate) confidence_m2: f64,
}

fn nan() -> f64 {
    f64::NAN
}

impl ExampleStats {
    fn first(visit: &Visit) -> Self {
        Self {
            id: visit.id,
            seen: 0,
            first_step: visit.step,
            last_step: visit.step,
            loss_mean: 0.0,
            loss_last: f64::NAN,
            loss_trend: f64::NAN,
            grad_norm_mean: 0.0,
            grad_norm_std: f64::NAN,
            share_mean: 0.0,
            margin_mean: f64::NAN,
            margin_last: f64::NAN,
            learned_visit: None,
            learned_now: false,
            forgetting: 0,
            sum_x: 0.0,
            sum_xx: 0.0,
            sum_xy: 0.0,
            norm_m2: 0.0,
            margins: 0,
            worst_position: None,
            worst_position_loss: f64::NAN,
            confidence_mean: f64::NAN,
            confidence_std: f64::NAN,
            confidence_m2: 0.0,
        }
    }

    /// Folds one more visit in (running means, Welford's spread, the trend's sums).
    fn visit(&mut self, visit: &Visit, learned: bool) {
        self.seen += 1;
        let n = self.seen as f64;
        self.last_step = visit.step;
        self.loss_mean += (visit.loss - self.loss_mean) / n;
        self.loss_last = visit.loss;
        let delta = visit.grad_norm - self.grad_norm_mean;
        self.grad_norm_mean += delta / n;
        self.norm_m2 += delta * (visit.grad_norm - self.grad_norm_mean);
        self.grad_norm_std = if self.seen > 1 {
            (self.norm_m2 / (n - 1.0)).sqrt()
        } else {
            f64::NAN
        };
        self.share_mean += (visit.relative_share - self.share_mean) / n;
        let x = visit.step.saturating_sub(self.first_step) as f64;
        self.sum_x += x;
        self.sum_xx += x * x;
        self.sum_xy += x * visit.loss;
        let sum_y = self.loss_mean * n;
        let denominator = n * self.sum_xx - self.sum_x * self.sum_x;
        self.loss_trend = if denominator > 0.0 {
            (n * self.sum_xy - self.sum_x * sum_y) / denominator
        } else {
            f64::NAN
        };
        if let Some(margin) = visit.margin {
            self.margins += 1;
            let previous = if self.margins == 1 {
                0.0
            } else {
                self.margin_mean
            };
            self.margin_mean = previous + (margin - previous) / self.margins as f64;
            self.margin_last = margin;
            // The labelled class's probability, and Welford's spread of it.
            let p = (-visit.loss).exp();
            let m = self.margins as f64;
            let previous = if self.margins == 1 {
                0.0
            } else {
                self.confidence_mean
            };
            self.confidence_mean = previous + (p - previous) / m;
            self.confidence_m2 += (p - previous) * (p - self.confidence_mean);
            self.confidence_std = if self.margins > 1 {
                (self.confidence_m2 / m).sqrt()
            } else {
                f64::NAN
            };
        }
        if let Some(worst) = visit.worst {
            self.worst_position = Some(worst.position);
            self.worst_position_loss = worst.loss;
        }
        if self.learned_now && !learned {
            self.forgetting += 1;
        }
        if learned && self.learned_visit.is_none() {
            self.learned_visit = Some(self.seen);
        }
        self.learned_now = learned;
    }
}

/// Numbers per example in [`ExampleRecord::to_numbers`].
const ROW: usize = 26;

/// An optional count as a number: `−1` for none.
fn or_minus_one(value: Option<u64>) -> f64 {
    value.map_or(-1.0, |v| v as f64)
}

/// The count of [`or_minus_one`] back.
fn from_minus_one(value: f64) -> Option<u64> {
    (value >= 0.0).then_some(value as u64)
}

impl ExampleStats {
    /// Every field as [`ROW`] numbers (the id as its two 32-bit halves, counts exact below
    /// 2⁵³).
    fn to_numbers(&self, out: &mut Vec<f64>) {
        out.extend([
            (self.id >> 32) as f64,
            (self.id & 0xffff_ffff) as f64,
            self.seen as f64,
            self.first_step as f64,
            self.last_step as f64,
            self.loss_mean,
            self.loss_last,
            self.loss_trend,
            self.grad_norm_mean,
            self.grad_norm_std,
            self.share_mean,
            self.margin_mean,
            self.margin_last,
            or_minus_one(self.learned_visit),
            f64::from(u8::from(self.learned_now)),
            self.forgetting as f64,
            self.sum_x,
            self.sum_xx,
            self.sum_xy,
            self.norm_m2,
            self.margins as f64,
            or_minus_one(self.worst_position),
            self.worst_position_loss,
            self.confidence_mean,
            self.confidence_std,
            self.confidence_m2,
        ]);
    }

    /// The stats of [`ExampleStats::to_numbers`] back.
    fn from_numbers(row: &[f64; ROW]) -> Self {
        Self {
            id: ((row[0] as u64) << 32) | row[1] as u64,
            seen: row[2] as u64,
            first_step: row[3] as usize,
            last_step: row[4] as usize,
            loss_mean: row[5],
            loss_last: row[6],
            loss_trend: row[7],
            grad_norm_mean: row[8],
            grad_norm_std: row[9],
            share_mean: row[10],
            margin_mean: row[11],
            margin_last: row[12],
            learned_visit: from_minus_one(row[13]),
            learned_now: row[14] != 0.0,
            forgetting: row[15] as u64,
            sum_x: row[16],
            sum_xx: row[17],
            sum_xy: row[18],
            norm_m2: row[19],
            margins: row[20] as u64,
            worst_position: from_minus_one(row[21]),
            worst_position_loss: row[22],
            confidence_mean: row[23],
            confidence_std: row[24],
            confidence_m2: row[25],
        }
    }
}

/// Every example's [`ExampleStats`], keyed by id, bounded by `capacity` examples (the data
/// set's size is the natural bound; ids beyond it are counted, not kept).
#[derive(Debug, Clone)]
pub struct ExampleRecord {
    stats: HashMap<u64, ExampleStats>,
    capacity: usize,
    learned_loss: f64,
    dropped: u64,
}

impl ExampleRecord {
    /// An empty record of at most `capacity` examples; an example counts as learned at a
    /// visit when its margin is positive (where margins are given), else when its loss is
    /// below `learned_loss`.
    pub fn new(capacity: usize, learned_loss: f64) -> Self {
        Self {
            stats: HashMap::new(),
            capacity,
            learned_loss,
            dropped: 0,
        }
    }

    /// Whether `visit` counts as learned.
    pub fn is_learned(&self, visit: &Visit) -> bool {
        match visit.margin {
            Some(margin) => margin > 0.0,
            None => visit.loss < self.learned_loss,
        }
    }

    /// Folds a step's visits in. Visits with a non-finite loss or norm are skipped (they would
    /// poison every mean after them). Returns how many were skipped.
    pub fn fold(&mut self, visits: &[Visit]) -> usize {
        let mut skipped = 0;
        for visit in visits {
            if !(visit.loss.is_finite()
                && visit.grad_norm.is_finite()
                && visit.relative_share.is_finite())
            {
                skipped += 1;
                continue;
            }
            let learned = self.is_learned(visit);
            let full = self.stats.len() >= self.capacity;
            match self.stats.get_mut(&visit.id) {
                Some(stats) => stats.visit(visit, learned),
                None if full => self.dropped += 1,
                None => {
                    let mut stats = ExampleStats::first(visit);
                    stats.visit(visit, learned);
                    self.stats.insert(visit.id, stats);
                }
            }
        }
        skipped
    }

    /// Visits of examples not kept because the record was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The number of examples recorded.
    pub fn len(&self) -> usize {
        self.stats.len()
    }

    /// Whether no example is recorded.
    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// One example's statistics.
    pub fn get(&self, id: u64) -> Option<&ExampleStats> {
        self.stats.get(&id)
    }

    /// Every example's statistics, by id.
    pub fn rows(&self) -> Vec<&ExampleStats> {
        let mut rows: Vec<&ExampleStats> = self.stats.values().collect();
        rows.sort_by_key(|s| s.id);
        rows
    }

    /// The record as numbers, to be saved at a checkpoint: the dropped visits, then each
    /// example's statistics in id order (26 numbers each: about 208 bytes an example).
    pub(crate) fn to_numbers(&self) -> Vec<f64> {
        let mut numbers = Vec::with_capacity(1 + ROW * self.stats.len());
        numbers.push(self.dropped as f64);
        for stats in self.rows() {
            stats.to_numbers(&mut numbers);
        }
        numbers
    }

    /// Takes back the examples of [`ExampleRecord::to_numbers`], in place of those recorded;
    /// `None` (nothing changed) for numbers that are not such a record.
    pub(crate) fn restore_numbers(&mut self, numbers: &[f64]) -> Option<()> {
        let (&dropped, rows) = numbers.split_first()?;
        if rows.len() % ROW != 0 || dropped.is_nan() || dropped < 0.0 {
            return None;
        }
        let stats = rows
            .chunks_exact(ROW)
            .map(|row| {
                let row: &[f64; ROW] = row.try_into().ok()?;
                let stats = ExampleStats::from_numbers(row);
                Some((stats.id, stats))
            })
            .collect::<Option<HashMap<u64, ExampleStats>>>()?;
        self.stats = stats;
        self.dropped = dropped as u64;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visit(id: u64, step: usize, loss: f64, norm: f64, margin: Option<f64>) -> Visit {
        Visit {
            id,
            step,
            loss,
            grad_norm: norm,
            relative_share: 1.0,
            margin,
            worst: None,
        }
    }

    /// Means, spread, trend and forgetting worked by hand: losses 2, 0.1, 1.5, 0.2 at steps
    /// 0, 10, 20, 30 with threshold ln 2: learned at visit 2, forgotten at 3, relearned at 4.
    #[test]
    fn a_record_survives_its_numbers() {
        let mut record = ExampleRecord::new(3, 0.5);
        record.fold(&[
            visit(u64::MAX - 1, 0, 1.0, 2.0, Some(0.5)),
            visit(7, 0, 0.2, 1.0, None),
        ]);
        record.fold(&[
            visit(u64::MAX - 1, 4, 0.8, 1.5, Some(-0.25)),
            visit(9, 4, 0.3, 0.5, None),
            visit(11, 4, 0.3, 0.5, None),
        ]);
        assert_eq!(record.dropped(), 1);
        let numbers = record.to_numbers();
        let mut back = ExampleRecord::new(3, 0.5);
        back.restore_numbers(&numbers).unwrap();
        assert_eq!(back.dropped(), 1);
        assert_eq!(back.len(), 3);
        for stats in record.rows() {
            let other = back.get(stats.id).unwrap();
            // NaN fields compare through their bits.
            assert_eq!(format!("{stats:?}"), format!("{other:?}"));
        }
        assert!(
            back.restore_numbers(&numbers[..numbers.len() - 1])
                .is_none()
        );
        assert!(back.restore_numbers(&[]).is_none());
    }

    #[test]
    fn statistics_by_hand() {
        let mut record = ExampleRecord::new(10, std::f64::consts::LN_2);
        let losses = [2.0, 0.1, 1.5, 0.2];
        let norms = [1.0, 3.0, 2.0, 6.0];
        for (k, (loss, norm)) in losses.iter().zip(norms).enumerate() {
            assert_eq!(record.fold(&[visit(7, 10 * k, *loss, norm, None)]), 0);
        }
        let s = record.get(7).unwrap();
        assert_eq!(s.seen, 4);
        assert!((s.loss_mean - 0.95).abs() < 1e-12);
        assert_eq!(s.loss_last, 0.2);
        // slope of (0, 2), (10, .1), (20, 1.5), (30, .2): Σx=60, Σxx=1400, Σxy=0+1+30+6=37, Σy=3.8.
        let slope = (4.0 * 37.0 - 60.0 * 3.8) / (4.0 * 1400.0 - 3600.0);
        assert!((s.loss_trend - slope).abs() < 1e-12, "{}", s.loss_trend);
        assert!((s.grad_norm_mean - 3.0).abs() < 1e-12);
        // sample variance of 1, 3, 2, 6: (4 + 0 + 1 + 9) / 3.
        assert!((s.grad_norm_std - (14.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.learned_visit, Some(2));
        assert_eq!(s.forgetting, 1);
        assert!(s.learned_now);
        assert!(s.margin_mean.is_nan());
    }

    /// Margins decide learning where given; the capacity bounds the record; non-finite
    /// visits are skipped.
    #[test]
    fn margins_capacity_and_bad_values() {
        let mut record = ExampleRecord::new(2, 0.5);
        record.fold(&[
            visit(1, 0, 5.0, 1.0, Some(0.3)),
            visit(2, 0, 0.1, 1.0, Some(-0.2)),
            visit(3, 0, 0.1, 1.0, None),
        ]);
        assert_eq!(record.len(), 2);
        assert_eq!(record.dropped(), 1);
        assert!(
            record.get(1).unwrap().learned_now,
            "margin > 0 despite a high loss"
        );
        assert!(
            !record.get(2).unwrap().learned_now,
            "margin < 0 despite a low loss"
        );
        assert_eq!(record.fold(&[visit(1, 1, f64::NAN, 1.0, None)]), 1);
        assert_eq!(record.get(1).unwrap().seen, 1);
        record.fold(&[visit(1, 2, 1.0, 1.0, Some(-0.7))]);
        let s = record.get(1).unwrap();
        assert!((s.margin_mean - (-0.2)).abs() < 1e-12);
        assert_eq!(s.forgetting, 1);
    }
}
