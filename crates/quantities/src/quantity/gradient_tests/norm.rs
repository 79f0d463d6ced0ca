//! NormTest.

use crate::persample::reduce::sum_all;
use crate::persample::{PerSampleNeeds, Statistic};
use crate::quantity::base::{Awaiting, Enqueued, Quantity, QuantityType, StepContext, needs_two};
use crate::quantity::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::{QuantityError, Schedule, Value};

/// The norm test (Byrd et al., 2012), Cockpit's `NormTest`:
///
/// `sqrt( Σ_n ‖g_n − g‖² / ((B−1)·B·‖g‖²) ) = sqrt( (Σ_n‖g_n‖²/‖g‖² − B) / (B(B−1)) )`,
///
/// with `g_n` the per-sample gradients and `g` the mini-batch gradient, summed over all
/// parameters. NaN for `B = 1` or a zero gradient.
///
/// # Cost
///
/// Per-sample squared norms: `O(B·(d_in + d_out))` per Linear layer on the fast path; two
/// numbers in the step's batched read.
#[derive(Debug, Clone)]
pub struct NormTest {
    schedule: Schedule,
    awaiting: Awaiting,
}

impl NormTest {
    /// NormTest on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            awaiting: Awaiting::default(),
        }
    }
}

impl QuantityType for NormTest {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "NormTest",
        shape: ValueShape::Scalar,
        needs: Needs::per_sample(PerSampleNeeds::of(Statistic::SqNorm)),
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for NormTest {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        let stats = ctx.per_sample_stats()?;
        let sum_sq = sum_all(ctx.sample_sq_norms()?);
        let numbers = vec![sum_sq, ctx.grad_sq_norm()];
        Ok(self.awaiting.read(ctx.step, stats.batch_size, numbers))
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        self.awaiting.finish_scalar(host, |batch, [sum_sq, g2]| {
            let b = batch as f64;
            needs_two(batch, || ((sum_sq - b * g2) / ((b - 1.0) * b * g2)).sqrt())
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{float_at_zero, TinyStep, close, two_samples};

    /// Σ_n ‖g_n − g‖² = 2 + 2, over (B−1)·B·‖g‖² = 10: √0.4.
    #[test]
    fn worked_example() {
        let step = two_samples(&[ParamId::new()]);
        let mut q = NormTest::new(Schedule::every_step());
        let v = float_at_zero(&mut q, &step);
        assert!(close(v, 0.4f64.sqrt(), 1e-12), "{v}");
    }

    /// Identical samples: no noise, the test is 0. One sample: undefined, NaN.
    #[test]
    fn identical_samples_and_a_single_sample() {
        let ids = [ParamId::new()];
        let same = TinyStep::new(0, &ids, &[&[0.0]], &[vec![vec![2.0]], vec![vec![2.0]]], 1.0);
        let mut q = NormTest::new(Schedule::every_step());
        assert_eq!(
            q.compute(&same.ctx()).unwrap(),
            Some((0, Value::Float(0.0)))
        );
        let one = TinyStep::new(0, &ids, &[&[0.0]], &[vec![vec![2.0]]], 1.0);
        let v = float_at_zero(&mut q, &one);
        assert!(v.is_nan());
    }
}
