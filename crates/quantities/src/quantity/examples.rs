//! Examples: which examples carry a step's gradient, and each example's record across the run.

use serde::Deserialize;

use super::base::{Enqueued, Quantity, QuantityType, StepContext, awaited, invalid};
use super::spec::{Needs, QuantitySpec, ValueShape};
use super::{Carried, CarriedError};
use crate::examples::{ExampleRecord, Visit, WorstPosition};
use crate::persample::{PerSampleNeeds, Statistic};
use crate::readback::Readable;
use crate::record::CodecError;
use crate::{
    CockpitError, ExampleShare, ExampleShares, QuantityError, Schedule, Snapshot, Value,
};

/// Examples' settings.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExamplesSettings {
    /// How many of the largest shares each step's value keeps (default 10).
    pub top: usize,
    /// The loss below which an example counts as learned where the step has no margins
    /// (default `ln 2`: for cross-entropy, the labelled class has more than half the
    /// probability, so it is the network's answer).
    pub learned_loss: f64,
    /// The most examples the record keeps (default 10 000 000; a data set's size is the
    /// natural bound). Examples met after it is full are counted, not kept, and a warning says
    /// so.
    pub capacity: usize,
}

impl Default for ExamplesSettings {
    fn default() -> Self {
        Self {
            top: 10,
            learned_loss: std::f64::consts::LN_2,
            capacity: 10_000_000,
        }
    }
}

/// Which examples carry the gradient (beyond Cockpit): per tracked step, the examples with the
/// largest shares `‖g_n‖² / Σ_m ‖g_m‖²` of the batch's summed squared per-sample gradient
/// norms (`g_n = ∇ℓ_n` over every tracked parameter) with their ids and losses, and the
/// concentration: the fewest examples that carry half of `Σ_m ‖g_m‖²`
/// ([`ExampleShares`]).
///
/// Across the run it keeps each example's record ([`ExampleRecord`]): visits, loss (mean,
/// last, trend), gradient norm (mean and spread), forgetting events, the margin where the
/// step has one ([`StepInfo::with_margins`](crate::StepInfo::with_margins)), and for losses
/// that average over positions (a language model's tokens, a segmenter's pixels) the worst
/// position and its loss ([`StepInfo::with_worst_positions`](crate::StepInfo::with_worst_positions)):
/// a sequence is one example, its loss the mean over its tokens. The record is
/// keyed by the step's ids ([`StepInfo::with_sample_ids`](crate::StepInfo::with_sample_ids));
/// a step without ids still gets its shares, by batch position, but adds nothing to the
/// record (a warning says so once). [`Cockpit::write`](crate::Cockpit::write) writes the
/// record as a table beside the log; `cockpit examples` ranks it.
///
/// # Cost
///
/// No pass of its own: the per-sample squared norms the gradient tests use (`O(B·(d_in +
/// d_out))` per Linear layer on the fast path), one sum over the parameters, and `2B` numbers
/// (`B` more with margins, `2B` more with worst positions) in the step's batched read. The
/// record holds about 20 numbers per example seen, bounded by [`ExamplesSettings::capacity`].
#[derive(Debug, Clone)]
pub struct Examples {
    schedule: Schedule,
    settings: ExamplesSettings,
    record: ExampleRecord,
    /// What the enqueued read holds.
    awaiting: Option<Awaiting>,
    warnings: Vec<String>,
    warned_no_ids: bool,
    dropped_reported: u64,
}

/// The enqueued read: the step, its batch, its ids, and whether margins and worst positions
/// follow the losses and squared norms.
#[derive(Debug, Clone)]
struct Awaiting {
    step: usize,
    batch: usize,
    ids: Option<Vec<u64>>,
    margins: bool,
    worst: bool,
}

impl Examples {
    /// Examples on the given schedule with the default settings.
    pub fn new(schedule: Schedule) -> Self {
        Self::with_settings(schedule, ExamplesSettings::default())
    }
}

impl QuantityType for Examples {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "Examples",
        shape: ValueShape::Examples,
        needs: Needs::per_sample(PerSampleNeeds::of(Statistic::SqNorm)),
    };
    type Settings = ExamplesSettings;

    fn with_settings(schedule: Schedule, settings: ExamplesSettings) -> Self {
        Self {
            schedule,
            record: ExampleRecord::new(settings.capacity, settings.learned_loss),
            settings,
            awaiting: None,
            warnings: Vec::new(),
            warned_no_ids: false,
            dropped_reported: 0,
        }
    }
}

/// The fewest of `sq_norms` (sorted descending) that add up to at least half their sum.
fn half_count(sorted: &[f64], total: f64) -> usize {
    if total.is_nan() || total <= 0.0 {
        return 0;
    }
    let mut running = 0.0;
    for (k, v) in sorted.iter().enumerate() {
        running += v;
        if running >= total / 2.0 {
            return k + 1;
        }
    }
    sorted.len()
}

impl Quantity for Examples {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    /// The per-example record (26 numbers an example) and which warnings were given, so a
    /// resumed run goes on counting visits, means and forgetting events where it stopped.
    fn carry(&self) -> Result<Carried, QuantityError> {
        Ok(Carried::new()
            .with_numbers("record", self.record.to_numbers())
            .with_numbers(
                "warned",
                vec![
                    f64::from(u8::from(self.warned_no_ids)),
                    self.dropped_reported as f64,
                ],
            ))
    }

    fn restore(&mut self, carried: &Carried, _params: &Snapshot) -> Result<(), CarriedError> {
        let name = self.name().to_string();
        let &[warned_no_ids, dropped_reported] = carried.numbers(&name, "warned")? else {
            return Err(CarriedError::Missing {
                owner: name.clone(),
                part: "warned".into(),
            });
        };
        let mut record = ExampleRecord::new(self.settings.capacity, self.settings.learned_loss);
        let numbers = carried.numbers(&name, "record")?;
        record
            .restore_numbers(numbers)
            .ok_or(CarriedError::Damaged(CodecError::Length(numbers.len() as u64)))?;
        self.record = record;
        self.warned_no_ids = warned_no_ids != 0.0;
        self.dropped_reported = dropped_reported as u64;
        self.awaiting = None;
        Ok(())
    }

    fn check(&self) -> Result<(), CockpitError> {
        let s = &self.settings;
        if s.top == 0 {
            return Err(invalid("Examples", "top must be at least 1".into()));
        }
        if s.capacity == 0 {
            return Err(invalid("Examples", "capacity must be at least 1".into()));
        }
        if !s.learned_loss.is_finite() {
            return Err(invalid(
                "Examples",
                format!("learned_loss must be finite, got {}", s.learned_loss),
            ));
        }
        Ok(())
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let stats = ctx.per_sample_stats()?;
        let losses = ctx
            .info
            .individual_losses()
            .ok_or(QuantityError::MissingInfo("individual_losses"))?
            .clone();
        let sq_norms = ctx.sample_sq_norms()?;
        let batch = stats.batch_size;
        let mut parts = vec![Readable::from(losses), Readable::from(sq_norms)];
        let margins = ctx.info.margins().cloned();
        let with_margins = margins.is_some();
        parts.extend(margins.map(Readable::from));
        let worst = ctx.info.worst_positions().cloned();
        let with_worst = worst.is_some();
        if let Some((losses, positions)) = worst {
            parts.push(Readable::from(losses));
            parts.push(Readable::from(positions));
        }
        let ids = ctx.info.sample_ids().map(<[u64]>::to_vec);
        self.awaiting = Some(Awaiting {
            step: ctx.step,
            batch,
            ids,
            margins: with_margins,
            worst: with_worst,
        });
        Ok(Enqueued::Read(parts))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let Awaiting {
            step,
            batch,
            ids,
            margins: with_margins,
            worst: with_worst,
        } = awaited(&mut self.awaiting)?;
        let expected = batch * (2 + usize::from(with_margins) + 2 * usize::from(with_worst));
        if host.len() != expected {
            return Err(QuantityError::ReadCount {
                expected,
                got: host.len(),
            });
        }
        let (losses, rest) = host.split_at(batch);
        let (sq_norms, rest) = rest.split_at(batch);
        let (margins, worst) = rest.split_at(if with_margins { batch } else { 0 });
        let (worst_losses, worst_positions) = worst.split_at(worst.len() / 2);
        let total: f64 = sq_norms.iter().sum();
        let mut order: Vec<usize> = (0..batch).collect();
        order.sort_by(|&a, &b| sq_norms[b].total_cmp(&sq_norms[a]));
        let sorted: Vec<f64> = order.iter().map(|&n| sq_norms[n]).collect();
        let id_of = |n: usize| ids.as_ref().map_or(n as u64, |ids| ids[n]);
        let top = order
            .iter()
            .take(self.settings.top)
            .map(|&n| ExampleShare {
                id: id_of(n),
                // An all-zero gradient is carried by no one.
                share: if total > 0.0 {
                    sq_norms[n] / total
                } else {
                    0.0
                },
                loss: losses[n],
            })
            .collect();
        match &ids {
            Some(ids) => {
                let mean = total / batch as f64;
                let visits: Vec<Visit> = (0..batch)
                    .map(|n| Visit {
                        id: ids[n],
                        step,
                        loss: losses[n],
                        grad_norm: sq_norms[n].max(0.0).sqrt(),
                        // All equal (1) when the whole batch's gradient is zero.
                        relative_share: if mean > 0.0 { sq_norms[n] / mean } else { 1.0 },
                        margin: with_margins.then(|| margins[n]),
                        // A negative loss: the example counts no position.
                        worst: (with_worst && worst_losses[n] >= 0.0).then(|| WorstPosition {
                            position: worst_positions[n] as u64,
                            loss: worst_losses[n],
                        }),
                    })
                    .collect();
                let skipped = self.record.fold(&visits);
                if skipped > 0 {
                    self.warnings.push(format!(
                        "step {step}: Examples skipped {skipped} example(s) with a non-finite \
                         loss or gradient norm in its record"
                    ));
                }
                if self.record.dropped() > self.dropped_reported {
                    self.dropped_reported = self.record.dropped();
                    self.warnings.push(format!(
                        "step {step}: the Examples record is full ({} examples, the capacity \
                         setting); {} visit(s) of new examples were not kept",
                        self.settings.capacity,
                        self.record.dropped()
                    ));
                }
            }
            None if !self.warned_no_ids => {
                self.warned_no_ids = true;
                self.warnings.push(format!(
                    "step {step}: Examples has no sample ids (StepInfo::with_sample_ids); it \
                     reports batch positions and keeps no per-example record"
                ));
            }
            None => {}
        }
        Ok(Some((
            step,
            Value::Examples(ExampleShares {
                batch,
                half: half_count(&sorted, total),
                ids_known: ids.is_some(),
                top,
            }),
        )))
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn example_record(&self) -> Option<&ExampleRecord> {
        Some(&self.record)
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::TinyStep;

    /// Per-sample gradients (3, 4), (0, 1), (1, 0), (0, 0): squared norms 25, 1, 1, 0 (sum
    /// 27); the first carries 25/27 alone, so one example carries half. Without ids the shares
    /// are by position and nothing is recorded.
    #[test]
    fn shares_and_concentration_by_hand() {
        let ids = [ParamId::new(), ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.0], &[0.0]],
            &[
                vec![vec![3.0], vec![4.0]],
                vec![vec![0.0], vec![1.0]],
                vec![vec![1.0], vec![0.0]],
                vec![vec![0.0], vec![0.0]],
            ],
            1.0,
        );
        let mut step = step;
        step.info = step
            .info
            .clone()
            .with_individual_losses(crate::quantity::testing::tensor(&[3.0, 0.5, 0.4, 0.1]));
        let mut q = Examples::new(Schedule::every_step());
        let Some((0, Value::Examples(shares))) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert_eq!(shares.batch, 4);
        assert_eq!(shares.half, 1);
        assert!(!shares.ids_known);
        assert_eq!(shares.top[0].id, 0);
        assert!((shares.top[0].share - 25.0 / 27.0).abs() < 1e-12);
        assert!((shares.top.iter().map(|e| e.share).sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(shares.top[0].loss, 3.0);
        assert!(q.example_record().unwrap().is_empty());
        assert_eq!(q.take_warnings().len(), 1);

        // With ids, the same step fills the record: norms 5, 1, 1, 0 over a mean of 27/4.
        step.info = step.info.clone().with_sample_ids(vec![40, 41, 42, 43]);
        let Some((0, Value::Examples(shares))) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert!(shares.ids_known);
        assert_eq!(shares.top[0].id, 40);
        let record = q.example_record().unwrap();
        assert_eq!(record.len(), 4);
        let first = record.get(40).unwrap();
        assert_eq!((first.seen, first.loss_last), (1, 3.0));
        assert!((first.grad_norm_mean - 5.0).abs() < 1e-12);
        assert!((first.share_mean - 25.0 / (27.0 / 4.0)).abs() < 1e-12);
        assert!(!first.learned_now, "loss 3 is above ln 2");
        assert!(record.get(43).unwrap().learned_now);
        assert!(q.take_warnings().is_empty());
        // Ids that disagree with the batch are refused before any quantity runs.
        let wrong = step.info.clone().with_sample_ids(vec![1, 2, 3]);
        assert!(wrong.check_batch().is_err());
    }

    /// A zero gradient: shares 0, concentration 0, the record's shares 1 (not NaN); one
    /// sample: it carries everything.
    #[test]
    fn zero_gradients_and_one_sample() {
        let ids = [ParamId::new()];
        let mut zero = TinyStep::new(0, &ids, &[&[0.0]], &[vec![vec![0.0]], vec![vec![0.0]]], 1.0);
        zero.info = zero
            .info
            .clone()
            .with_individual_losses(crate::quantity::testing::tensor(&[0.5, 0.5]))
            .with_sample_ids(vec![1, 2]);
        let mut q = Examples::new(Schedule::every_step());
        let Some((0, Value::Examples(shares))) = q.compute(&zero.ctx()).unwrap() else {
            panic!("no value")
        };
        assert_eq!(shares.half, 0);
        assert!(shares.top.iter().all(|t| t.share == 0.0));
        assert!(Value::Examples(shares).is_finite());
        assert_eq!(q.example_record().unwrap().get(1).unwrap().share_mean, 1.0);
        let mut one = TinyStep::new(0, &ids, &[&[0.0]], &[vec![vec![2.0]]], 1.0);
        one.info = one
            .info
            .clone()
            .with_individual_losses(crate::quantity::testing::tensor(&[3.0]));
        let Some((0, Value::Examples(shares))) = q.compute(&one.ctx()).unwrap() else {
            panic!("no value")
        };
        assert_eq!((shares.batch, shares.half), (1, 1));
        assert_eq!(shares.top[0].share, 1.0);
    }

    #[test]
    fn half_count_edges() {
        assert_eq!(half_count(&[1.0, 1.0, 1.0, 1.0], 4.0), 2);
        assert_eq!(half_count(&[3.0, 1.0, 1.0, 1.0], 6.0), 1);
        assert_eq!(half_count(&[0.0, 0.0], 0.0), 0);
        assert_eq!(half_count(&[f64::NAN], f64::NAN), 0);
    }

    #[test]
    fn absurd_settings_are_refused() {
        for settings in [
            ExamplesSettings {
                top: 0,
                ..Default::default()
            },
            ExamplesSettings {
                capacity: 0,
                ..Default::default()
            },
            ExamplesSettings {
                learned_loss: f64::NAN,
                ..Default::default()
            },
        ] {
            assert!(Examples::with_settings(Schedule::every_step(), settings).check().is_err());
        }
    }
}
