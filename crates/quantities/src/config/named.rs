//! [`Named`]: a quantity stored under another output key.

use crate::persample::PerSampleNeeds;
use crate::quantity::{Enqueued, Quantity, StepContext};
use crate::{CockpitError, QuantityError, Value};

/// A quantity whose values are stored under `key` instead of its own name (e.g. a variant
/// `GradHist1d[bins=20]` beside the default `GradHist1d`). Everything else is the quantity's.
pub struct Named {
    key: String,
    inner: Box<dyn Quantity>,
}

impl Named {
    /// `inner` under `key`.
    pub fn new(key: impl Into<String>, inner: Box<dyn Quantity>) -> Self {
        Self {
            key: key.into(),
            inner,
        }
    }
}

/// `err` naming the quantity by `key` when it is about the quantity's settings.
pub(crate) fn under_key(err: CockpitError, key: &str) -> CockpitError {
    match err {
        CockpitError::InvalidSettings { reason, source, .. } => CockpitError::InvalidSettings {
            quantity: key.to_string(),
            reason,
            source,
        },
        other => other,
    }
}

/// The keys Cockpit's `log(...)` writes beside the quantities ([`EpochLog`](crate::EpochLog)).
pub(crate) const EPOCH_KEYS: [&str; 8] = [
    "epoch_count",
    "train_loss",
    "valid_loss",
    "test_loss",
    "train_accuracy",
    "valid_accuracy",
    "test_accuracy",
    "learning_rate",
];

/// An output key for a quantity of class `class`: not blank, not another quantity's class
/// name (readers — the dashboard, `diagnose`, Cockpit's plotter — would take its values for
/// that quantity's), not a key of the epoch log.
fn check_key(key: &str, class: &str) -> Result<(), CockpitError> {
    let refuse = |reason: String| CockpitError::InvalidSettings {
        quantity: format!(
            "{} (key `{}`)",
            crate::error::excerpt(class),
            crate::error::excerpt(key)
        ),
        reason,
        source: None,
    };
    if key.trim().is_empty() {
        return Err(refuse("an output key must not be empty".into()));
    }
    if key != class
        && let Some(other) = crate::QuantityKind::ALL.iter().find(|k| k.name() == key)
    {
        return Err(refuse(format!(
            "the key is the name of the quantity {}: its readers would take these values for \
             that quantity's; choose another key (e.g. `{class}[…]`)",
            other.name()
        )));
    }
    if EPOCH_KEYS.contains(&key) {
        return Err(refuse(format!(
            "`{}` is a key of the epoch log (`Cockpit::log`)",
            crate::error::excerpt(key)
        )));
    }
    Ok(())
}

impl std::fmt::Debug for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Named")
            .field("key", &self.key)
            .field("quantity", &self.inner.name())
            .finish()
    }
}

impl Quantity for Named {
    fn spec(&self) -> &'static crate::quantity::QuantitySpec {
        self.inner.spec()
    }

    fn name(&self) -> &str {
        &self.key
    }

    fn check(&self) -> Result<(), CockpitError> {
        check_key(&self.key, self.inner.name())?;
        self.inner.check().map_err(|err| under_key(err, &self.key))
    }

    fn should_compute(&self, step: usize) -> bool {
        self.inner.should_compute(step)
    }

    fn enqueue(&mut self, ctx: &StepContext<'_>) -> Result<Enqueued, QuantityError> {
        self.inner.enqueue(ctx)
    }

    fn finish(&mut self, host: &[f64]) -> Result<Option<(usize, Value)>, QuantityError> {
        self.inner.finish(host)
    }

    fn per_sample_needs(&self, step: usize) -> PerSampleNeeds {
        self.inner.per_sample_needs(step)
    }

    fn take_warnings(&mut self) -> Vec<String> {
        self.inner.take_warnings()
    }

    fn uses_curvature(&self, step: usize) -> bool {
        self.inner.uses_curvature(step)
    }

    fn uses_per_sample(&self, step: usize) -> bool {
        self.inner.uses_per_sample(step)
    }

    fn bins_elements(&mut self) -> Option<&mut dyn crate::histogram::BinsElements> {
        self.inner.bins_elements()
    }

    fn compute(&mut self, ctx: &StepContext<'_>) -> Result<Option<(usize, Value)>, QuantityError> {
        self.inner.compute(ctx)
    }

    fn carry(&self) -> Result<crate::quantity::Carried, QuantityError> {
        self.inner.carry()
    }

    fn restore(
        &mut self,
        carried: &crate::quantity::Carried,
        params: &crate::Snapshot,
    ) -> Result<(), crate::quantity::CarriedError> {
        self.inner.restore(carried, params)
    }

    fn example_record(&self) -> Option<&crate::examples::ExampleRecord> {
        self.inner.example_record()
    }
}

#[cfg(test)]
mod tests {
    use super::EPOCH_KEYS;
    use crate::{Cockpit, EpochLog, QuantityKind, Schedule};

    /// An `Examples` quantity under a key of its own keeps its per-example record (it was lost
    /// without a word: `Named` did not forward `example_record`).
    #[test]
    fn a_named_examples_quantity_keeps_its_record() {
        let named = super::Named::new(
            "Examples[mine]",
            QuantityKind::Examples.build(Schedule::every_step()),
        );
        use crate::quantity::Quantity;
        assert!(named.example_record().is_some());
    }

    /// `Named` forwards every method of `Quantity` but `name` (its key) and `check` (which
    /// names the key): a method added to the trait and not forwarded fails here, by name.
    #[test]
    fn named_forwards_every_method_of_the_trait() {
        let methods = |source: &str, start: &str| -> Vec<String> {
            let body = &source[source.find(start).expect("the block")..];
            let mut depth = 0usize;
            let mut names = Vec::new();
            for line in body.lines() {
                let trimmed = line.trim_start();
                if depth == 1
                    && let Some(rest) = trimmed.strip_prefix("fn ")
                {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.push(name);
                }
                depth += line.matches('{').count();
                depth = depth.saturating_sub(line.matches('}').count());
                if depth == 0 && line.contains('}') {
                    break;
                }
            }
            names
        };
        let base = include_str!("../quantity/base.rs");
        let named = include_str!("named.rs");
        let trait_methods = methods(base, "pub trait Quantity:");
        let forwarded = methods(named, "impl Quantity for Named {");
        assert!(trait_methods.len() >= 10, "{trait_methods:?}");
        let missing: Vec<&String> = trait_methods
            .iter()
            .filter(|m| !forwarded.contains(m))
            .collect();
        assert!(missing.is_empty(), "Named does not forward {missing:?}");
    }

    /// The keys refused for a quantity are exactly the ones `Cockpit::log` writes.
    #[test]
    fn epoch_keys_are_the_ones_the_epoch_log_writes() {
        let mut cockpit = Cockpit::from_kinds([QuantityKind::Loss], &Schedule::every_step())
            .expect("one quantity");
        let full = EpochLog {
            epoch_count: 1,
            train_loss: Some(1.0),
            valid_loss: Some(1.0),
            test_loss: Some(1.0),
            train_accuracy: Some(0.5),
            valid_accuracy: Some(0.5),
            test_accuracy: Some(0.5),
            learning_rate: Some(0.1),
        };
        cockpit.log(3, &full).expect("no stream");
        let mut written: Vec<&str> = cockpit
            .output()
            .at(3)
            .expect("logged")
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = EPOCH_KEYS.to_vec();
        written.sort_unstable();
        expected.sort_unstable();
        assert_eq!(written, expected);
    }
}
