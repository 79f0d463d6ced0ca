//! The largest-magnitude Hessian eigenvalue from Hessian-vector products: Cockpit's power
//! iteration, and Lanczos.

use burn::tensor::{Tensor, TensorCreationOptions, TensorData};

use super::base::CurvatureSource;
use crate::readback::read_values;
use crate::{ParamEntry, QuantityError, Snapshot};

/// An eigenvalue estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EigenEstimate {
    /// The eigenvalue.
    pub value: f64,
    /// Hessian-vector products used.
    pub products: usize,
    /// Whether the stopping rule was met within the product budget.
    pub converged: bool,
}

/// `H v` for a flat direction `v` (`[D]`, the parameters concatenated in snapshot order), as a
/// flat vector aligned with `params`.
fn product(
    source: &dyn CurvatureSource,
    params: &Snapshot,
    v: Tensor<1>,
) -> Result<Tensor<1>, QuantityError> {
    let w = source.hvp(params, &params.with_flat(v)?)?;
    if w.ids() == params.ids() {
        return Ok(w.flatten());
    }
    let aligned = params
        .entries()
        .iter()
        .map(|p| {
            w.get(p.id)
                .cloned()
                .ok_or_else(|| QuantityError::Shape(format!("`{}` missing", p.name)))
        })
        .collect::<Result<Vec<ParamEntry>, _>>()?;
    Ok(Snapshot::from_entries(aligned).flatten())
}

/// `‖v‖²` as a one-element device tensor.
fn sq_norm(v: &Tensor<1>) -> Tensor<1> {
    v.clone().square().sum()
}

/// The start vector's error when its squared norm (read with the first product) is zero or
/// not finite.
fn check_start(sq_norm: f64) -> Result<(), QuantityError> {
    if sq_norm == 0.0 || !sq_norm.is_finite() {
        return Err(QuantityError::Shape(
            "the start vector is zero or not finite".into(),
        ));
    }
    Ok(())
}

/// Cockpit's power iteration (`HessMaxEV`, `use_power=True`): `v ← start/‖start‖`; repeat
/// `w = Hv`, `λ = vᵀw`, `v = w/‖w‖` until `|λ_old − λ| ≤ atol + rtol·|λ|` (the first comparison is
/// against +∞), at most `max_products` times; converges to the largest-**magnitude** eigenvalue.
/// Without convergence it returns the last `λ` with `converged = false`.
///
/// # Cost
///
/// Per product: one read of two numbers (`vᵀw`, `‖w‖²`; the start's norm with the first), and
/// a fixed number of device operations on the flattened parameters.
///
/// # Errors
///
/// The source's errors; [`QuantityError::Shape`] for a zero start vector.
pub fn power_iteration(
    source: &dyn CurvatureSource,
    params: &Snapshot,
    start: &Snapshot,
    rtol: f64,
    atol: f64,
    max_products: usize,
) -> Result<EigenEstimate, QuantityError> {
    let start = start.flatten();
    let start_sq = sq_norm(&start);
    let mut v = start / start_sq.clone().sqrt();
    let mut start_sq = Some(start_sq);
    let mut previous = f64::INFINITY;
    let mut last = f64::NAN;
    for k in 1..=max_products {
        let w = product(source, params, v.clone())?;
        let mut numbers = vec![(v.clone() * w.clone()).sum(), sq_norm(&w)];
        numbers.extend(start_sq.take());
        let values = read_values(Tensor::cat(numbers, 0))?;
        if let Some(&start_sq) = values.get(2) {
            check_start(start_sq)?;
        }
        let (lambda, w_norm) = (values[0], values[1].sqrt());
        last = lambda;
        if (previous - lambda).abs() <= atol + rtol * lambda.abs() {
            return Ok(EigenEstimate {
                value: lambda,
                products: k,
                converged: true,
            });
        }
        if w_norm == 0.0 || !w_norm.is_finite() {
            return Ok(EigenEstimate {
                value: lambda,
                products: k,
                converged: false,
            });
        }
        v = w.mul_scalar(1.0 / w_norm);
        previous = lambda;
    }
    Ok(EigenEstimate {
        value: last,
        products: max_products,
        converged: false,
    })
}

/// Lanczos with full reorthogonalisation: the Ritz value of largest magnitude, stopped when its
/// residual `β_k·|s_k|` falls below `tol·|θ|`. Needs far fewer products than power iteration
/// for the same accuracy (a median of 9 against 48 for 1e-6 on the fixtures), and returns the
/// converged eigenvalue rather than power iteration's loosely stopped one.
///
/// # Errors
///
/// The source's errors; [`QuantityError::Shape`] for a zero start vector.
pub fn lanczos(
    source: &dyn CurvatureSource,
    params: &Snapshot,
    start: &Snapshot,
    tol: f64,
    max_products: usize,
) -> Result<EigenEstimate, QuantityError> {
    lanczos_with_vector(
        source,
        params,
        start,
        tol,
        max_products,
        Target::LargestMagnitude,
    )
    .map(|(estimate, _)| estimate)
}

/// Which Ritz value Lanczos converges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The eigenvalue of largest magnitude (what power iteration finds).
    LargestMagnitude,
    /// The largest (algebraic) eigenvalue (scipy's `eigsh(which="LA")`, Cockpit's
    /// `HessMaxEV(use_power=False)`).
    LargestAlgebraic,
}

/// [`lanczos`] converging the Ritz value chosen by `target`, also returning the Ritz vector
/// (unit norm, aligned with `params`) of the returned value: the start of the next step's run (a warm start, as the dominant eigenvector
/// drifts slowly between steps).
///
/// # Cost
///
/// The basis is one matrix `Q` `[k, D]` over the flattened parameters. Per product: the
/// three-term recurrence with `α` left on the device, full reorthogonalisation by two matrix
/// products (`w ← w − Qᵀ(Q w)`), and **one** read of two numbers (`α`, `‖w‖²`; the start's
/// norm with the first). The number of device operations per product depends on neither the
/// number of parameter tensors nor the iteration; memory `k·D` numbers.
///
/// # Errors
///
/// As [`lanczos`].
pub(crate) fn lanczos_with_vector(
    source: &dyn CurvatureSource,
    params: &Snapshot,
    start: &Snapshot,
    tol: f64,
    max_products: usize,
    target: Target,
) -> Result<(EigenEstimate, Snapshot), QuantityError> {
    let start = start.flatten();
    let numel = start.dims()[0];
    let start_sq = sq_norm(&start);
    let mut q = start / start_sq.clone().sqrt();
    let mut start_sq = Some(start_sq);
    let mut basis = q.clone().reshape([1, numel]);
    let mut previous: Option<Tensor<1>> = None;
    let (mut alpha, mut beta): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut estimate = EigenEstimate {
        value: f64::NAN,
        products: 0,
        converged: false,
    };
    let mut ritz = Vec::new();
    for k in 0..max_products {
        let mut w = product(source, params, q.clone())?;
        let a = (q.clone() * w.clone()).sum();
        w = w - q.clone() * a.clone();
        if let (Some(previous), Some(&b)) = (&previous, beta.last()) {
            w = w - previous.clone().mul_scalar(b);
        }
        // Full reorthogonalisation against the whole basis (classical Gram–Schmidt after the
        // three-term recurrence): two matrix products.
        let coefficients = basis.clone().matmul(w.clone().reshape([numel, 1]));
        w = w - basis
            .clone()
            .transpose()
            .matmul(coefficients)
            .reshape([numel]);
        let mut numbers = vec![a, sq_norm(&w)];
        numbers.extend(start_sq.take());
        let values = read_values(Tensor::cat(numbers, 0))?;
        if let Some(&start_sq) = values.get(2) {
            check_start(start_sq)?;
        }
        alpha.push(values[0]);
        let b = values[1].sqrt();
        let (theta, vector) = extreme_ritz(&alpha, &beta, target);
        let last_component = vector.last().copied().unwrap_or(0.0);
        ritz = vector;
        estimate = EigenEstimate {
            value: theta,
            products: k + 1,
            converged: false,
        };
        if (b * last_component).abs() <= tol * theta.abs() || b == 0.0 {
            estimate.converged = true;
            break;
        }
        beta.push(b);
        previous = Some(q);
        q = w.mul_scalar(1.0 / b);
        basis = Tensor::cat(vec![basis, q.clone().reshape([1, numel])], 0);
    }
    // The Ritz vector Σ_k s_k q_k over the basis the tridiagonal matrix saw: one product.
    let m = ritz.len().max(1);
    let s = if ritz.is_empty() { vec![1.0] } else { ritz };
    let options = TensorCreationOptions::new(basis.device()).with_dtype(basis.dtype());
    let s = Tensor::<2>::from_data(TensorData::new(s, [1, m]), options);
    let vector = s.matmul(basis.narrow(0, 0, m)).reshape([numel]);
    Ok((estimate, params.with_flat(vector)?))
}

// Jacobi rotations update rows and columns `p`, `q` together: plainer by index.
#[allow(clippy::needless_range_loop)]
/// The eigenvalue `target` picks of the symmetric tridiagonal matrix (diagonal `alpha`,
/// off-diagonal `beta`) and its unit eigenvector (Jacobi rotations).
fn extreme_ritz(alpha: &[f64], beta: &[f64], target: Target) -> (f64, Vec<f64>) {
    let n = alpha.len();
    let mut a = vec![vec![0.0; n]; n];
    let mut vecs = vec![vec![0.0; n]; n];
    for i in 0..n {
        a[i][i] = alpha[i];
        vecs[i][i] = 1.0;
        if i + 1 < n {
            a[i][i + 1] = beta[i];
            a[i + 1][i] = beta[i];
        }
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum();
        if off < 1e-30 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[p][q].abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k][p], a[k][q]);
                    a[k][p] = c * akp - s * akq;
                    a[k][q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p][k], a[q][k]);
                    a[p][k] = c * apk - s * aqk;
                    a[q][k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (vecs[k][p], vecs[k][q]);
                    vecs[k][p] = c * vkp - s * vkq;
                    vecs[k][q] = s * vkp + c * vkq;
                }
            }
        }
    }
    let key = |i: usize| match target {
        Target::LargestMagnitude => a[i][i].abs(),
        Target::LargestAlgebraic => a[i][i],
    };
    let best = (0..n)
        .max_by(|&i, &j| key(i).total_cmp(&key(j)))
        .unwrap_or(0);
    (a[best][best], (0..n).map(|k| vecs[k][best]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ritz_values_of_a_small_tridiagonal() {
        // [[2, 1], [1, 2]]: eigenvalues 1 and 3.
        let (theta, _) = extreme_ritz(&[2.0, 2.0], &[1.0], Target::LargestMagnitude);
        assert!((theta - 3.0).abs() < 1e-12);
        // diag(1, −5, 2): largest magnitude −5.
        let (theta, vector) =
            extreme_ritz(&[1.0, -5.0, 2.0], &[0.0, 0.0], Target::LargestMagnitude);
        assert!((theta + 5.0).abs() < 1e-12 && vector[2].abs() < 1e-12);
        assert!((vector[1].abs() - 1.0).abs() < 1e-12);
        let (theta, _) = extreme_ritz(&[1.0, -5.0, 2.0], &[0.0, 0.0], Target::LargestAlgebraic);
        assert!((theta - 2.0).abs() < 1e-12);
    }
}
