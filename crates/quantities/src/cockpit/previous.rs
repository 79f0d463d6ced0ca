//! [`PreviousGradients`]: the mean gradient of a tracked step, kept while the next step's
//! quantities project on it (Cockpit's `dots_with_previous_grad`), one copy per device: the
//! Cockpit's own on one device, each data-parallel worker's on its own. The one cache every
//! path reads, single-device, accumulated and data-parallel alike.

use burn::tensor::Device;

use crate::Snapshot;

/// Mean gradients by `(step, device)`; those of steps no later step can project on are
/// dropped as steps are tracked.
#[derive(Debug, Default)]
pub(crate) struct PreviousGradients(Vec<(usize, Snapshot)>);

impl PreviousGradients {
    /// Keeps `grads`, the mean gradient of `step`, for `step + 1` (replacing one of the same
    /// step on the same device).
    pub(crate) fn keep(&mut self, step: usize, grads: Snapshot) {
        let device = grads.device();
        self.0
            .retain(|(at, kept)| !(*at == step && kept.device() == device));
        self.0.push((step, grads));
    }

    /// The mean gradient of the step before `step` on `device`, if kept.
    pub(crate) fn before(&self, step: usize, device: &Device) -> Option<&Snapshot> {
        self.0
            .iter()
            .find(|(at, kept)| *at + 1 == step && kept.device() == *device)
            .map(|(_, kept)| kept)
    }

    /// Drops what no step from `step` on projects on (the gradients of steps before
    /// `step`).
    pub(crate) fn drop_before(&mut self, step: usize) {
        self.0.retain(|(at, _)| *at >= step);
    }
}

impl PreviousGradients {
    /// The kept gradients for a checkpoint: their steps and values.
    pub(crate) fn carry(&self) -> Result<crate::quantity::Carried, crate::QuantityError> {
        let mut carried = crate::quantity::Carried::new()
            .with_numbers("steps", self.0.iter().map(|(s, _)| *s as f64).collect());
        for (i, (_, grads)) in self.0.iter().enumerate() {
            carried = carried.with_snapshot(&format!("grads.{i}"), grads)?;
        }
        Ok(carried)
    }

    /// Takes back [`PreviousGradients::carry`]'s state on the device of `params`.
    pub(crate) fn restore(
        &mut self,
        carried: &crate::quantity::Carried,
        params: &Snapshot,
    ) -> Result<(), crate::quantity::CarriedError> {
        const OWNER: &str = "Cockpit (previous gradients)";
        self.0 = carried
            .numbers(OWNER, "steps")?
            .iter()
            .enumerate()
            .map(|(i, &step)| {
                Ok((
                    step as usize,
                    carried.snapshot(OWNER, &format!("grads.{i}"), params)?,
                ))
            })
            .collect::<Result<_, crate::quantity::CarriedError>>()?;
        Ok(())
    }
}
