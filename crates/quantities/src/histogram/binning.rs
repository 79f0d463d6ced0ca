//! [`BinsElements`]: what a quantity that bins per-sample gradient elements adds to
//! [`Quantity`](crate::Quantity).

use cockpit_persample::{Elements, ParamEntry};

use super::HistogramEngine;
use crate::QuantityError;

/// The hooks of a quantity that counts per-sample gradient elements into histograms
/// (GradHist1d, GradHist2d), reached through
/// [`Quantity::bins_elements`](crate::Quantity::bins_elements). Every other quantity has none,
/// so the [`Quantity`](crate::Quantity) trait itself stays about computing a value.
pub trait BinsElements {
    /// Where to count ([`Cockpit::with_histogram_engine`](crate::Cockpit::with_histogram_engine)).
    fn use_histogram_engine(&mut self, engine: HistogramEngine);

    /// Whether the elements are counted on `device` itself (then the Cockpit hands them over
    /// in pieces sized for the device, not for host buffers).
    fn counts_elements_on(&self, device: &burn::tensor::Device) -> bool;

    /// Receives per-sample gradient elements `[b, numel]` of parameter `index` (snapshot
    /// order), before the quantity's `enqueue`, when
    /// [`PerSampleNeeds::elements`](crate::persample::PerSampleNeeds::elements) was asked for.
    ///
    /// # Errors
    ///
    /// A [`QuantityError`] stops the step's per-sample pass.
    fn accept_chunk(
        &mut self,
        step: usize,
        index: usize,
        entry: &ParamEntry,
        elements: Elements,
    ) -> Result<(), QuantityError>;
}
