//! Parameters.

use std::sync::Arc;

use burn::tensor::Tensor;

use super::base::{Quantity, StepContext};
use crate::snapshot::read_values;
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

impl Quantity for Parameters {
    fn name(&self) -> &str {
        "Parameters"
    }

    fn should_compute(&self, step: usize) -> bool {
        self.schedule.is_active(step)
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        let entries = ctx.params.entries();
        let all = Tensor::cat(entries.iter().map(|e| e.value.clone()).collect(), 0);
        let values = read_values(all)?;
        let mut arrays = Vec::with_capacity(entries.len());
        let mut offset = 0;
        for entry in entries {
            let n = entry.numel();
            let array = HostArray {
                shape: entry.shape.clone(),
                data: values[offset..offset + n].to_vec(),
            };
            arrays.push(match &self.view {
                Some(view) => view(entry, array),
                None => array,
            });
            offset += n;
        }
        Ok(Some((ctx.step, Value::Arrays(arrays))))
    }
}
