//! The fixture's `variants`: quantities with non-default settings, built from their recorded
//! `{class, kwargs}` by the same code that reads config files
//! ([`QuantityConfig`](cockpit_quantities::QuantityConfig)), stored under the fixture's key.

use cockpit_quantities::{Quantity, QuantityConfig, QuantityKind, Schedule};

use super::ReplayError;

/// The variant quantities built, and the variant keys skipped.
type Variants = (Vec<Box<dyn Quantity>>, Vec<String>);

/// Keys of a recorded `kwargs` that annotate the fixture rather than configure the quantity.
const ANNOTATIONS: [&str; 1] = ["note"];

/// Builds the variants of a known class; variants of other classes are listed as skipped.
///
/// # Errors
///
/// [`ReplayError::Fixture`] for a variant whose settings are refused.
pub(crate) fn build(
    variants: &serde_json::Map<String, serde_json::Value>,
) -> Result<Variants, ReplayError> {
    let mut built: Vec<Box<dyn Quantity>> = Vec::new();
    let mut skipped = Vec::new();
    for (key, spec) in variants {
        let class = spec
            .get("class")
            .and_then(|c| c.as_str())
            .unwrap_or_default();
        let Ok(class) = class.parse::<QuantityKind>() else {
            skipped.push(key.clone());
            continue;
        };
        let mut kwargs = spec.get("kwargs").cloned().unwrap_or_default();
        if let Some(map) = kwargs.as_object_mut() {
            for annotation in ANNOTATIONS {
                map.remove(annotation);
            }
        }
        let quantity = QuantityConfig::new(class, kwargs)
            .with_key(key.clone())
            .build(&Schedule::every_step())
            .map_err(|source| ReplayError::Variant {
                key: key.clone(),
                source: Box::new(source),
            })?;
        built.push(quantity);
    }
    Ok((built, skipped))
}
