//! [`StepScratch`]: state a quantity accumulates while one step's per-sample chunks arrive.

/// Values accumulated for one step (e.g. histogram counts from the per-sample chunks), scoped to
/// that step: a chunk of another step starts afresh, and taking the value for a step returns
/// nothing that another step left behind. A step whose per-sample pass failed half-way thus
/// leaks no partial counts into the next tracked step.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepScratch<T> {
    step: Option<usize>,
    value: T,
}

impl<T: Default> StepScratch<T> {
    /// The value being accumulated for `step` (reset if it belonged to another step).
    pub(crate) fn at(&mut self, step: usize) -> &mut T {
        if self.step != Some(step) {
            self.value = T::default();
            self.step = Some(step);
        }
        &mut self.value
    }

    /// Takes what was accumulated for `step` (the default if nothing was, or if what is there
    /// belongs to another step), leaving the scratch empty.
    pub(crate) fn take(&mut self, step: usize) -> T {
        let value = std::mem::take(&mut self.value);
        let mine = self.step.take() == Some(step);
        if mine { value } else { T::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::StepScratch;

    #[test]
    fn values_stay_with_their_step() {
        let mut scratch = StepScratch::<Vec<u32>>::default();
        scratch.at(3).push(1);
        scratch.at(3).push(2);
        // Step 3 never took its value (its pass failed): step 4 starts empty.
        scratch.at(4).push(7);
        assert_eq!(scratch.take(4), vec![7]);
        scratch.at(5).push(9);
        assert_eq!(scratch.take(6), Vec::<u32>::new());
        assert_eq!(
            scratch.take(5),
            Vec::<u32>::new(),
            "taken once, even by the wrong step"
        );
    }
}
