//! Parameters.

use std::sync::Arc;

use super::base::{QuantityType, Awaiting, Enqueued, Quantity, StepContext};
use super::spec::{Needs, NoSettings, QuantitySpec, ValueShape};
use crate::{HostArray, ParamEntry, QuantityError, Schedule, Value};

/// A function that presents a parameter's host array in another layout.
pub type ParamView = Arc<dyn Fn(&ParamEntry, HostArray) -> HostArray + Send + Sync>;

/// The parameter values θ_t themselves, one array per parameter (Cockpit's `Parameters`).
///
/// Arrays have burn's shapes (a `Linear` weight is `[d_input, d_output]`, the transpose of
/// PyTorch's) unless a view is set with [`Parameters::with_view`].
///
/// # Cost
///
/// One host read of all `D` parameter elements per tracked step: meant for small models.
#[derive(Clone)]
pub struct Parameters {
    schedule: Schedule,
    view: Option<ParamView>,
    awaiting: Awaiting,
    /// The enqueued step's parameters (handles), for their names and shapes.
    entries: Vec<ParamEntry>,
}

impl std::fmt::Debug for Parameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parameters")
            .field("schedule", &self.schedule)
            .field("view", &self.view.is_some())
            .finish()
    }
}

impl Parameters {
    /// Parameters on the given schedule.
    pub fn new(schedule: Schedule) -> Self {
        Self {
            schedule,
            view: None,
            awaiting: Awaiting::default(),
            entries: Vec::new(),
        }
    }

    /// Presents each parameter through `view` (e.g. PyTorch's `[out, in]` layout for Linear
    /// weights: `|_, array| array.transposed()`).
    pub fn with_view(
        mut self,
        view: impl Fn(&ParamEntry, HostArray) -> HostArray + Send + Sync + 'static,
    ) -> Self {
        self.view = Some(Arc::new(view));
        self
    }
}

impl QuantityType for Parameters {
    const SPEC: QuantitySpec = QuantitySpec {
        name: "Parameters",
        shape: ValueShape::Arrays,
        needs: Needs::NOTHING,
    };
    type Settings = NoSettings;

    fn with_settings(schedule: Schedule, _: NoSettings) -> Self {
        Self::new(schedule)
    }
}

impl Quantity for Parameters {
    fn spec(&self) -> &'static QuantitySpec {
        &Self::SPEC
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        self.entries = ctx.params.entries().to_vec();
        let values = self.entries.iter().map(|e| e.value.clone()).collect();
        Ok(self.awaiting.read(ctx.step, 0, values))
    }

    fn finish(&mut self, values: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        let (step, _) = self.awaiting.take()?;
        let entries = std::mem::take(&mut self.entries);
        let mut arrays = Vec::with_capacity(entries.len());
        let mut offset = 0;
        for entry in &entries {
            let n = entry.numel();
            let data = values
                .get(offset..offset + n)
                .ok_or(QuantityError::ReadCount {
                    expected: offset + n,
                    got: values.len(),
                })?;
            let array = HostArray {
                shape: entry.shape.clone(),
                data: data.to_vec(),
            };
            arrays.push(match &self.view {
                Some(view) => view(entry, array),
                None => array,
            });
            offset += n;
        }
        Ok(Some((step, Value::Arrays(arrays))))
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::TinyStep;

    #[test]
    fn arrays_are_the_parameters_in_their_shapes() {
        let ids = [ParamId::new(), ParamId::new()];
        let step = TinyStep::new(
            0,
            &ids,
            &[&[0.5, -1.0], &[2.0]],
            &[vec![vec![0.0, 0.0], vec![0.0]]],
            1.0,
        );
        let mut q = Parameters::new(Schedule::every_step());
        let Some((0, Value::Arrays(arrays))) = q.compute(&step.ctx()).unwrap() else {
            panic!("no value")
        };
        assert_eq!(arrays.len(), 2);
        assert_eq!(arrays[0].data, vec![0.5, -1.0]);
        assert_eq!(arrays[1].shape, vec![1]);
    }
}
