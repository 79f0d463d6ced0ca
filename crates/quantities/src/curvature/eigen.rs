//! The largest-magnitude Hessian eigenvalue from Hessian-vector products: Cockpit's power
//! iteration, and Lanczos.

use burn::tensor::Tensor;

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

fn scaled(v: &Snapshot, s: f64) -> Snapshot {
    Snapshot::from_entries(
        v.entries()
            .iter()
            .map(|e| ParamEntry {
                value: e.value.clone().mul_scalar(s),
                ..e.clone()
            })
            .collect(),
    )
}

fn dot(a: &Snapshot, b: &Snapshot) -> Result<Tensor<1>, QuantityError> {
    let mut total: Option<Tensor<1>> = None;
    for entry in a.entries() {
        let other = b
            .get(entry.id)
            .ok_or_else(|| QuantityError::Shape(format!("`{}` missing", entry.name)))?;
        let d = (entry.value.clone() * other.value.clone()).sum();
        total = Some(match total {
            Some(t) => t + d,
            None => d,
        });
    }
    total.ok_or_else(|| QuantityError::Shape("no parameter".into()))
}

fn combine(a: &Snapshot, b: &Snapshot, s: f64) -> Result<Snapshot, QuantityError> {
    // a + s·b
    a.entries()
        .iter()
        .map(|e| {
            let other = b
                .get(e.id)
                .ok_or_else(|| QuantityError::Shape(format!("`{}` missing", e.name)))?;
            Ok(ParamEntry {
                value: e.value.clone() + other.value.clone().mul_scalar(s),
                ..e.clone()
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Snapshot::from_entries)
}

fn norm(v: &Snapshot) -> Result<f64, QuantityError> {
    Ok(read_values(v.sq_norms().sum())?[0].sqrt())
}

/// `start/‖start‖`; [`QuantityError::Shape`] for a zero or non-finite start vector.
fn unit_start(start: &Snapshot) -> Result<Snapshot, QuantityError> {
    let start_norm = norm(start)?;
    if start_norm == 0.0 || !start_norm.is_finite() {
        return Err(QuantityError::Shape(
            "the start vector is zero or not finite".into(),
        ));
    }
    Ok(scaled(start, 1.0 / start_norm))
}

/// Cockpit's power iteration (`HessMaxEV`, `use_power=True`): `v ← start/‖start‖`; repeat
/// `w = Hv`, `λ = vᵀw`, `v = w/‖w‖` until `|λ_old − λ| ≤ atol + rtol·|λ|` (the first comparison is
/// against +∞), at most `max_products` times; converges to the largest-**magnitude** eigenvalue.
/// Without convergence it returns the last `λ` with `converged = false`.
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
    let mut v = unit_start(start)?;
    let mut previous = f64::INFINITY;
    let mut last = f64::NAN;
    for k in 1..=max_products {
        let w = source.hvp(params, &v)?;
        let values = read_values(Tensor::cat(vec![dot(&v, &w)?, w.sq_norms().sum()], 0))?;
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
        v = scaled(&w, 1.0 / w_norm);
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
    lanczos_for(
        source,
        params,
        start,
        tol,
        max_products,
        Target::LargestMagnitude,
    )
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

/// [`lanczos`] converging the Ritz value chosen by `target`.
///
/// # Errors
///
/// As [`lanczos`].
pub fn lanczos_for(
    source: &dyn CurvatureSource,
    params: &Snapshot,
    start: &Snapshot,
    tol: f64,
    max_products: usize,
    target: Target,
) -> Result<EigenEstimate, QuantityError> {
    lanczos_with_vector(source, params, start, tol, max_products, target).map(|(e, _)| e)
}

/// [`lanczos_for`], also returning the Ritz vector (unit norm, aligned with `params`) of the
/// returned value: the start of the next step's run (a warm start, as the dominant eigenvector
/// drifts slowly between steps).
///
/// Each iteration reads three small batches of numbers from the device (the Rayleigh quotient,
/// the reorthogonalisation coefficients against the whole basis at once, the residual norm).
///
/// # Errors
///
/// As [`lanczos`].
pub fn lanczos_with_vector(
    source: &dyn CurvatureSource,
    params: &Snapshot,
    start: &Snapshot,
    tol: f64,
    max_products: usize,
    target: Target,
) -> Result<(EigenEstimate, Snapshot), QuantityError> {
    let mut basis = vec![unit_start(start)?];
    let (mut alpha, mut beta): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut estimate = EigenEstimate {
        value: f64::NAN,
        products: 0,
        converged: false,
    };
    let mut ritz = Vec::new();
    for k in 0..max_products {
        let q = &basis[k];
        let mut w = source.hvp(params, q)?;
        let a = read_values(dot(q, &w)?)?[0];
        alpha.push(a);
        w = combine(&w, q, -a)?;
        if k > 0 {
            w = combine(&w, &basis[k - 1], -beta[k - 1])?;
        }
        // Full reorthogonalisation against the whole basis (classical Gram–Schmidt after the
        // three-term recurrence, one read for all coefficients).
        let dots = basis
            .iter()
            .map(|b| dot(b, &w))
            .collect::<Result<Vec<_>, _>>()?;
        let coefficients = read_values(Tensor::cat(dots, 0))?;
        for (b, c) in basis.iter().zip(coefficients) {
            w = combine(&w, b, -c)?;
        }
        let b = norm(&w)?;
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
        basis.push(scaled(&w, 1.0 / b));
    }
    // The Ritz vector Σ_k s_k q_k over the basis the tridiagonal matrix saw.
    let mut vector = scaled(&basis[0], ritz.first().copied().unwrap_or(1.0));
    for (q, s) in basis.iter().zip(&ritz).skip(1) {
        vector = combine(&vector, q, *s)?;
    }
    Ok((estimate, vector))
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
