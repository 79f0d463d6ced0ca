//! The fixture's `variants`: quantities with non-default settings, built from their recorded
//! keyword arguments and stored under exactly the fixture's key.

use cockpit_quantities::curvature::{DiagonalKind, Target};
use cockpit_quantities::quantity::{
    BinAdaptation, EigenMethod, GradHist1d, GradHist2d, HessMaxEV, HessTrace, TICDiag, TICTrace,
};
use cockpit_quantities::{Quantity, Schedule};

use super::ReplayError;

/// The variant quantities built, and the variant keys skipped.
type Variants = (Vec<Box<dyn Quantity>>, Vec<String>);

/// Builds the variants this version computes; others are listed as skipped.
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
        let kwargs = spec.get("kwargs").cloned().unwrap_or_default();
        let bad = |what: &str| ReplayError::Fixture(format!("variant `{key}`: {what}"));
        match class {
            "GradHist1d" => {
                let bins = kwargs
                    .get("bins")
                    .and_then(|b| b.as_u64())
                    .ok_or_else(|| bad("bins"))?;
                let (lo, hi) = pair(kwargs.get("range")).ok_or_else(|| bad("range"))?;
                let mut q = GradHist1d::new(Schedule::every_step())
                    .with_bins(bins as usize)
                    .with_range(lo, hi)
                    .with_name(key.clone());
                if let Some(adapt) = kwargs.get("adapt").and_then(|a| a.as_str()) {
                    q = q.with_adaptation(adaptation(adapt).ok_or_else(|| bad("adapt"))?);
                }
                built.push(Box::new(q));
            }
            "GradHist2d" => {
                let bins = kwargs
                    .get("bins")
                    .and_then(|b| b.as_array())
                    .ok_or_else(|| bad("bins"))?;
                let bin = |k: usize| bins.get(k).and_then(|b| b.as_u64()).map(|b| b as usize);
                let (xb, yb) = bin(0).zip(bin(1)).ok_or_else(|| bad("bins"))?;
                let ranges = kwargs
                    .get("range")
                    .and_then(|r| r.as_array())
                    .ok_or_else(|| bad("range"))?;
                let x = pair(ranges.first()).ok_or_else(|| bad("range"))?;
                let y = pair(ranges.get(1)).ok_or_else(|| bad("range"))?;
                let adapt = kwargs.get("adapt").and_then(|a| a.as_array());
                let axis = |k: usize| {
                    adapt
                        .and_then(|a| a.get(k))
                        .and_then(|a| a.as_str())
                        .and_then(adaptation)
                };
                let keep = kwargs
                    .get("keep_individual")
                    .and_then(|k| k.as_bool())
                    .unwrap_or(false);
                built.push(Box::new(
                    GradHist2d::new(Schedule::every_step())
                        .with_bins(xb, yb)
                        .with_range(x, y)
                        .with_adaptation(axis(0), axis(1))
                        .keep_individual(keep)
                        .with_name(key.clone()),
                ));
            }
            "HessTrace" | "TICDiag" | "TICTrace" => {
                let curvature = match kwargs.get("curvature").and_then(|c| c.as_str()) {
                    Some("diag_h") | None => DiagonalKind::Hessian,
                    Some("diag_ggn_exact") => DiagonalKind::GgnExact,
                    Some("diag_ggn_mc") => DiagonalKind::GgnMc,
                    Some(_) => return Err(bad("curvature")),
                };
                let schedule = Schedule::every_step();
                built.push(match class {
                    "HessTrace" => Box::new(
                        HessTrace::new(schedule)
                            .with_curvature(curvature)
                            .with_name(key.clone()),
                    ),
                    "TICDiag" => Box::new(
                        TICDiag::new(schedule)
                            .with_curvature(curvature)
                            .with_name(key.clone()),
                    ),
                    _ => Box::new(
                        TICTrace::new(schedule)
                            .with_curvature(curvature)
                            .with_name(key.clone()),
                    ),
                });
            }
            // scipy's eigsh(k=1, which="LA"): the largest algebraic eigenvalue, converged.
            "HessMaxEV" if kwargs.get("use_power").and_then(|p| p.as_bool()) == Some(false) => {
                built.push(Box::new(
                    HessMaxEV::new(Schedule::every_step())
                        .with_method(EigenMethod::Lanczos {
                            tol: 1e-9,
                            max_products: 200,
                            target: Target::LargestAlgebraic,
                        })
                        .with_name(key.clone()),
                ));
            }
            _ => skipped.push(key.clone()),
        }
    }
    Ok((built, skipped))
}

fn pair(value: Option<&serde_json::Value>) -> Option<(f64, f64)> {
    let array = value?.as_array()?;
    Some((array.first()?.as_f64()?, array.get(1)?.as_f64()?))
}

/// Parses `GradAbsMax(linear(1), padding=0.1, min_size=1e-6)` (schedule and min_size
/// optional).
fn adaptation(text: &str) -> Option<BinAdaptation> {
    let number_after = |label: &str| -> Option<f64> {
        let start = text.find(label)? + label.len();
        let rest = &text[start..];
        let end = rest.find([',', ')']).unwrap_or(rest.len());
        rest[..end].trim().parse().ok()
    };
    let padding = number_after("padding=").unwrap_or(0.0);
    let min_size = number_after("min_size=").unwrap_or(1e-6);
    let schedule = match number_after("linear(") {
        Some(interval) if interval >= 1.0 => Schedule::linear(interval as usize, 0).ok()?,
        _ => Schedule::every_step(),
    };
    if text.starts_with("GradAbsMax") {
        Some(BinAdaptation::GradAbsMax {
            schedule,
            padding,
            min_size,
        })
    } else if text.starts_with("ParamAbsMax") {
        Some(BinAdaptation::ParamAbsMax {
            schedule,
            padding,
            min_size,
        })
    } else {
        None
    }
}
