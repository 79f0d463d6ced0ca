//! The curvature of a batch held in parts (micro-batches of gradient accumulation, device
//! shards): the weighted mean of the parts' curvature.

use burn::tensor::Tensor;

use super::base::{CurvatureSource, DiagonalKind};
use crate::{ParamEntry, QuantityError, Snapshot};

/// Curvature of the mean loss of a batch made of parts, from each part's own source: with
/// part `k` holding `b_k` of the `B` samples, `L = Σ_k (b_k/B)·L_k`, so
/// `H v = Σ_k (b_k/B)·H_k v` and every curvature diagonal is the same weighted sum.
///
/// Exact for products and exact diagonals. Estimated diagonals (Hutchinson, Monte-Carlo GGN)
/// stay unbiased estimates of the batch's diagonal, drawn with each part's own probes.
///
/// # Cost
///
/// One product (diagonal) per part for each product (diagonal) asked for, plus the weighted
/// sum of parameter-sized results.
#[derive(Debug)]
pub struct MergedCurvature {
    parts: Vec<(f64, Box<dyn CurvatureSource>)>,
}

impl MergedCurvature {
    /// The batch made of `parts`, each given with its number of samples.
    ///
    /// # Errors
    ///
    /// [`QuantityError::Shape`] if there is no part with a sample.
    pub fn new(parts: Vec<(usize, Box<dyn CurvatureSource>)>) -> Result<Self, QuantityError> {
        let total: usize = parts.iter().map(|(b, _)| b).sum();
        if total == 0 {
            return Err(QuantityError::Shape(
                "a merged batch needs at least one part with a sample".into(),
            ));
        }
        Ok(Self {
            parts: parts
                .into_iter()
                .filter(|(b, _)| *b > 0)
                .map(|(b, source)| (b as f64 / total as f64, source))
                .collect(),
        })
    }
}

/// `Σ_k w_k x_k` of per-parameter lists.
fn weighted_sum(
    parts: impl Iterator<Item = (f64, Vec<Tensor<1>>)>,
) -> Result<Vec<Tensor<1>>, QuantityError> {
    let mut total: Option<Vec<Tensor<1>>> = None;
    for (weight, part) in parts {
        let part: Vec<Tensor<1>> = part.into_iter().map(|t| t.mul_scalar(weight)).collect();
        total = Some(match total {
            None => part,
            Some(sum) if sum.len() == part.len() => {
                sum.into_iter().zip(part).map(|(a, b)| a + b).collect()
            }
            Some(_) => {
                return Err(QuantityError::Shape(
                    "the parts of a merged batch returned different parameters".into(),
                ));
            }
        });
    }
    total.ok_or_else(|| QuantityError::Shape("a merged batch has no part".into()))
}

impl CurvatureSource for MergedCurvature {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        let products = self
            .parts
            .iter()
            .map(|(w, source)| {
                let product = source.hvp(params, v)?;
                let values = params
                    .entries()
                    .iter()
                    .map(|entry| {
                        product
                            .get(entry.id)
                            .map(|p| p.value.clone())
                            .ok_or_else(|| {
                                QuantityError::Shape(format!(
                                    "no product for parameter `{}`",
                                    entry.name
                                ))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((*w, values))
            })
            .collect::<Result<Vec<_>, QuantityError>>()?;
        let values = weighted_sum(products.into_iter())?;
        Ok(Snapshot::from_entries(
            params
                .entries()
                .iter()
                .zip(values)
                .map(|(entry, value)| ParamEntry {
                    value,
                    ..entry.clone()
                })
                .collect(),
        ))
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        let diagonals = self
            .parts
            .iter()
            .map(|(w, source)| Ok((*w, source.diagonal(params, kind)?)))
            .collect::<Result<Vec<_>, QuantityError>>()?;
        weighted_sum(diagonals.into_iter())
    }

    /// Every part's notes (the Cockpit gives each distinct note once).
    fn notes(&self) -> Vec<String> {
        self.parts
            .iter()
            .flat_map(|(_, source)| source.notes())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{DiagonalHessian, snapshot};
    use crate::readback::read_values;

    /// Parts with Hessians diag(h₁) (1 sample) and diag(h₂) (3 samples): the batch's Hessian
    /// is diag(h₁/4 + 3h₂/4).
    #[test]
    fn products_and_diagonals_are_the_weighted_means() {
        let ids = [ParamId::new()];
        let (h1, h2) = (vec![2.0, -4.0, 8.0], vec![1.0, 0.0, -2.0]);
        let merged = MergedCurvature::new(vec![
            (1, Box::new(DiagonalHessian(vec![h1.clone()]))),
            (3, Box::new(DiagonalHessian(vec![h2.clone()]))),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<f64> = h1
            .iter()
            .zip(&h2)
            .map(|(a, b)| a / 4.0 + 3.0 * b / 4.0)
            .collect();
        let params = snapshot(&ids, &[&[0.0, 0.0, 0.0]]);
        let v = snapshot(&ids, &[&[1.0, 2.0, -1.0]]);
        let product = merged.hvp(&params, &v).unwrap_or_else(|e| panic!("{e}"));
        let got = read_values(product.entries()[0].value.clone()).unwrap_or_default();
        let want: Vec<f64> = expected
            .iter()
            .zip([1.0, 2.0, -1.0])
            .map(|(h, v)| h * v)
            .collect();
        assert_eq!(got, want);
        let diagonal = merged
            .diagonal(&params, DiagonalKind::Hessian)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read_values(diagonal[0].clone()).unwrap_or_default(),
            expected
        );
        assert!(MergedCurvature::new(Vec::new()).is_err());
    }
}
