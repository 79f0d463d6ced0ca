//! Hutchinson's estimate of the Hessian diagonal, for any model.

use std::sync::Arc;

use burn::tensor::{Tensor, TensorCreationOptions, TensorData};

use super::base::{CurvatureSource, DiagonalKind};
use super::random::SplitMix;
use crate::{ParamEntry, QuantityError, Snapshot};

/// `diag(H) ≈ (1/m) Σ_k v_k ⊙ H v_k` with Rademacher probes `v_k` (Bekas et al., 2007), from
/// the products of any [`CurvatureSource`] (e.g. [`FiniteDifferenceHvp`](super::FiniteDifferenceHvp)),
/// so HessTrace and TIC work for models without an exact diagonal.
///
/// The estimate is unbiased. Entry `i` has variance `Σ_{j≠i} H_ij² / m`; a parameter block's
/// trace `Σ_{i∈P}` has variance `(2(‖H_PP‖_F² − Σ_{i∈P} H_ii²) + ‖H_{P,P^c}‖_F²)/m`. On the
/// fixtures one probe's relative standard deviation is 0.6–2.6, so matching `diag_h` to 1e-6
/// would take 10¹¹ probes: this is a fallback, not a parity path. Only the Hessian diagonal is
/// estimated (GGN kinds are refused).
///
/// With a [`ProbeBudget`] the number of probes adapts to the spread it meets
/// ([`Hutchinson::with_budget`]).
///
/// # Cost
///
/// `m` Hessian-vector products per diagonal (the diagonal is computed once per step and
/// shared by HessTrace and TIC); with a budget, the pilot's products, one read of `2P`
/// numbers, then the estimate's `m ≤ max_probes`.
#[derive(Debug)]
pub struct Hutchinson {
    inner: Arc<dyn CurvatureSource>,
    probes: usize,
    budget: Option<ProbeBudget>,
    /// Per-parameter traces of an exact part the estimate is added to (the GGN, for the
    /// residual): the budget's relative error is taken of the sum.
    exact: Option<Vec<Tensor<1>>>,
    /// The probes the last diagonal drew for its estimate.
    used: std::sync::atomic::AtomicUsize,
    rng: SplitMix,
    cache: std::sync::Mutex<Option<Vec<Tensor<1>>>>,
    /// The standard error of each parameter's trace, from the probes' spread.
    errors: std::sync::Mutex<Option<Vec<Tensor<1>>>>,
}

/// How many probes an estimate draws: enough that each parameter's trace has a standard error
/// of at most `relative` times its magnitude, within `max_probes`.
///
/// Two stages, so that stopping does not bias the reported error: a pilot of `pilot` probes
/// measures each trace's mean `t_p` and its standard error `s_p`; the estimate then draws
/// `m = max_p ⌈pilot · (s_p / (relative·(|t_p| − s_p)))²⌉` fresh probes (at least `pilot`, at
/// most `max_probes`), and its value and standard error come from those alone. The magnitude
/// is taken one pilot standard error below the pilot's mean: a pilot that overestimates a
/// trace by chance would otherwise size the estimate for a larger value than it meets, and a
/// trace found near zero ended far above the relative error asked. A trace whose pilot
/// mean is within one standard error of zero asks for `max_probes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeBudget {
    /// Probes of the pilot, which sizes the estimate (≥ 2).
    pub pilot: usize,
    /// The largest standard error wanted, as a fraction of each trace's magnitude.
    pub relative: f64,
    /// The most probes the estimate draws.
    pub max_probes: usize,
}

impl ProbeBudget {
    /// The most probes any budget draws (a larger `max_probes` or `pilot` is taken as this):
    /// each probe is a Hessian-vector product, and an absurd budget must not stall a run.
    pub const MAX_PROBES: usize = 10_000;

    /// A relative standard error of 10 % within 200 probes, after a pilot of 10.
    pub const DEFAULT: Self = Self {
        pilot: 10,
        relative: 0.1,
        max_probes: 200,
    };

    /// The probes that bring every trace's standard error below `relative` of its
    /// magnitude, from the pilot's traces' means and standard errors (within the budget).
    pub fn probes_for(&self, means: &[f64], errors: &[f64]) -> usize {
        let pilot = self.pilot.max(2);
        let wanted = means
            .iter()
            .zip(errors)
            .map(|(mean, error)| {
                if *error <= 0.0 || !error.is_finite() {
                    return pilot;
                }
                // The magnitude's lower bound: one pilot standard error below its mean.
                let allowed = self.relative * (mean.abs() - error);
                if allowed <= 0.0 || !allowed.is_finite() {
                    return self.max_probes;
                }
                // The standard error shrinks as 1/√m: m = pilot·(error/allowed)².
                let m = pilot as f64 * (error / allowed).powi(2);
                if m.is_finite() {
                    m.ceil() as usize
                } else {
                    self.max_probes
                }
            })
            .max()
            .unwrap_or(pilot);
        wanted.clamp(pilot, self.max_probes.max(pilot))
    }
}

/// The mean of each parameter's probe traces (`traces[k][p]`) and its standard error, on the
/// device; the errors are `None` with fewer than two probes.
fn trace_statistics(traces: &[Vec<Tensor<1>>]) -> (Vec<Tensor<1>>, Option<Vec<Tensor<1>>>) {
    let m = traces.len();
    let params = traces.first().map_or(0, Vec::len);
    let columns: Vec<Tensor<1>> = (0..params)
        .map(|p| Tensor::cat(traces.iter().map(|t| t[p].clone()).collect(), 0))
        .collect();
    let means: Vec<Tensor<1>> = columns.iter().map(|c| c.clone().mean()).collect();
    let errors = (m >= 2).then(|| {
        columns
            .into_iter()
            .zip(&means)
            .map(|(column, mean)| {
                (column - mean.clone())
                    .square()
                    .sum()
                    .mul_scalar(((m * (m - 1)) as f64).recip())
                    .sqrt()
            })
            .collect()
    });
    (means, errors)
}

impl Hutchinson {
    /// `probes` Rademacher probes of `inner`'s products, drawn from `seed`.
    pub fn new(inner: impl CurvatureSource + 'static, probes: usize, seed: u64) -> Self {
        Self {
            inner: Arc::new(inner),
            probes: probes.max(1),
            budget: None,
            exact: None,
            used: std::sync::atomic::AtomicUsize::new(0),
            rng: SplitMix::new(seed),
            cache: std::sync::Mutex::new(None),
            errors: std::sync::Mutex::new(None),
        }
    }

    /// Draws as many probes as `budget` asks for (a pilot, then a fresh estimate) instead of a
    /// fixed number.
    pub fn with_budget(mut self, budget: ProbeBudget) -> Self {
        self.budget = Some(ProbeBudget {
            pilot: budget.pilot.clamp(2, ProbeBudget::MAX_PROBES),
            max_probes: budget.max_probes.min(ProbeBudget::MAX_PROBES),
            ..budget
        });
        self
    }

    /// The estimate is added to an exact part whose per-parameter traces are `traces` (`[1]`
    /// each; the GGN's, for the residual): a [`ProbeBudget`]'s relative error is then taken of
    /// each parameter's whole trace, exact part included.
    pub fn with_exact_part(mut self, traces: Vec<Tensor<1>>) -> Self {
        self.exact = Some(traces);
        self
    }

    /// The probes the last diagonal's estimate drew (0 before any).
    pub fn probes_used(&self) -> usize {
        self.used.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `m` probes' estimate: the mean of `v ⊙ Hv` per entry, and each probe's trace per
    /// parameter.
    fn draw(
        &self,
        params: &Snapshot,
        m: usize,
    ) -> Result<(Vec<Tensor<1>>, Vec<Vec<Tensor<1>>>), QuantityError> {
        let mut sums: Option<Vec<Tensor<1>>> = None;
        let mut traces: Vec<Vec<Tensor<1>>> = Vec::with_capacity(m);
        for _ in 0..m {
            let probe = Snapshot::from_entries(
                params
                    .entries()
                    .iter()
                    .map(|e| {
                        let signs: Vec<f64> = (0..e.numel()).map(|_| self.rng.sign()).collect();
                        let options = TensorCreationOptions::new(e.value.device())
                            .with_dtype(e.value.dtype());
                        let value =
                            Tensor::<1>::from_data(TensorData::new(signs, [e.numel()]), options);
                        ParamEntry { value, ..e.clone() }
                    })
                    .collect(),
            );
            let hv = self.inner.hvp(params, &probe)?;
            let terms: Vec<Tensor<1>> = probe
                .entries()
                .iter()
                .zip(hv.entries())
                .map(|(v, h)| v.value.clone() * h.value.clone())
                .collect();
            traces.push(terms.iter().map(|t| t.clone().sum()).collect());
            sums = Some(match sums {
                None => terms,
                Some(acc) => acc.into_iter().zip(terms).map(|(a, t)| a + t).collect(),
            });
        }
        let estimate = sums
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.div_scalar(m as f64))
            .collect();
        Ok((estimate, traces))
    }

    /// How many probes the estimate draws: the fixed number, or what the budget's pilot asks
    /// for (one read of each parameter's pilot mean and standard error).
    fn probes_for(&self, params: &Snapshot) -> Result<usize, QuantityError> {
        let Some(budget) = self.budget else {
            return Ok(self.probes);
        };
        let (_, traces) = self.draw(params, budget.pilot)?;
        let count = traces.first().map_or(0, Vec::len);
        let (means, errors) = trace_statistics(&traces);
        let errors = errors.unwrap_or_default();
        let exact = self
            .exact
            .clone()
            .filter(|exact| exact.len() == count)
            .unwrap_or_default();
        let known = exact.len();
        let host = crate::readback::read_together(
            means
                .into_iter()
                .chain(errors)
                .chain(exact)
                .map(crate::readback::Readable::from)
                .collect(),
        )?
        .concat();
        let (means, rest) = host.split_at(count.min(host.len()));
        let (errors, exact) = rest.split_at(count.min(rest.len()));
        let totals: Vec<f64> = if known == count {
            means.iter().zip(exact).map(|(m, e)| m + e).collect()
        } else {
            means.to_vec()
        };
        Ok(budget.probes_for(&totals, errors))
    }
}

impl CurvatureSource for Hutchinson {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        self.inner.hvp(params, v)
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        if kind != DiagonalKind::Hessian {
            return Err(QuantityError::Unsupported(format!(
                "Hutchinson estimates the Hessian diagonal only, not `{}`",
                kind.cockpit_name()
            )));
        }
        if let Some(cached) = self.cache.lock().ok().and_then(|c| c.clone()) {
            return Ok(cached);
        }
        // Each probe's trace per parameter, for the estimate's standard error.
        let m = self.probes_for(params)?;
        let (estimate, traces) = self.draw(params, m)?;
        self.used.store(m, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut cache) = self.cache.lock() {
            *cache = Some(estimate.clone());
        }
        if let Ok(mut errors) = self.errors.lock() {
            *errors = trace_statistics(&traces).1;
        }
        Ok(estimate)
    }

    /// The standard error of each parameter's trace: `√(Σ_k (t_k − t̄)² / (m(m − 1)))` over
    /// the probes' traces `t_k` (none with a single probe).
    fn diagonal_errors(&self, _params: &Snapshot, kind: DiagonalKind) -> Option<Vec<Tensor<1>>> {
        if kind != DiagonalKind::Hessian {
            return None;
        }
        self.errors.lock().ok()?.clone()
    }

    fn notes(&self) -> Vec<String> {
        // An estimate was given this step: the cached diagonal.
        if self.cache.lock().is_ok_and(|cache| cache.is_some()) {
            vec![format!(
                "diag_h is Hutchinson's estimate with {} probes (not exact)",
                self.probes_used()
            )]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::module::ParamId;

    use super::*;
    use crate::quantity::testing::{snapshot, tensor};
    use crate::readback::read_values;

    /// One parameter of two entries with the dense Hessian `[[a, b], [b, c]]`.
    #[derive(Debug)]
    struct Dense([f64; 3]);

    impl CurvatureSource for Dense {
        fn hvp(&self, _params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
            let [a, b, c] = self.0;
            let entry = &v.entries()[0];
            let x = read_values(entry.value.clone())?;
            let hv = [a * x[0] + b * x[1], b * x[0] + c * x[1]];
            Ok(Snapshot::from_entries(vec![ParamEntry {
                value: tensor(&hv),
                ..entry.clone()
            }]))
        }

        fn diagonal(
            &self,
            _params: &Snapshot,
            _kind: DiagonalKind,
        ) -> Result<Vec<Tensor<1>>, QuantityError> {
            Ok(vec![tensor(&[self.0[0], self.0[2]])])
        }
    }

    fn params() -> Snapshot {
        snapshot(&[ParamId::new()], &[&[0.0, 0.0]])
    }

    fn trace_and_error(estimate: &Hutchinson) -> (f64, f64) {
        let params = params();
        let diagonal = estimate.diagonal(&params, DiagonalKind::Hessian).unwrap();
        let trace: f64 = read_values(diagonal[0].clone()).unwrap().iter().sum();
        let errors = estimate
            .diagonal_errors(&params, DiagonalKind::Hessian)
            .unwrap();
        (trace, read_values(errors[0].clone()).unwrap()[0])
    }

    #[test]
    fn the_budget_asks_for_the_probes_each_trace_needs() {
        let budget = ProbeBudget {
            pilot: 10,
            relative: 0.1,
            max_probes: 200,
        };
        // Error 0.5 of a trace of 1 (at least 0.5, allowed 0.05) wants 10·10² = 1000
        // probes: the budget's 200.
        assert_eq!(budget.probes_for(&[1.0, 2.0], &[0.5, 0.0]), 200);
        // Error 0.1 of a trace of −2 (at least 1.9, allowed 0.19) wants ⌈10·0.277⌉ = 3: the
        // pilot's 10.
        assert_eq!(budget.probes_for(&[-2.0], &[0.1]), 10);
        // Error 0.25 of a trace of 2.25 (at least 2, allowed 0.2): ⌈10·1.5625⌉ = 16.
        assert_eq!(budget.probes_for(&[2.25], &[0.25]), 16);
        // A trace within one standard error of zero cannot be had to a relative error: the
        // most, however far its pilot mean happened to land from zero within that error.
        assert_eq!(budget.probes_for(&[0.0], &[0.1]), 200);
        assert_eq!(budget.probes_for(&[0.09], &[0.1]), 200);
        // No spread: the pilot suffices.
        assert_eq!(budget.probes_for(&[0.0, 3.0], &[0.0, 0.0]), 10);
    }

    #[test]
    fn adaptive_probes_reach_the_stated_error() {
        // One probe's trace is a + c + 2b·v₀v₁: mean 5, standard deviation 2|b| = 2. A
        // standard error of 10 % of 5 takes (2/0.5)² = 16 probes.
        let hessian = Dense([2.0, 1.0, 3.0]);
        let budget = ProbeBudget {
            pilot: 10,
            relative: 0.1,
            max_probes: 200,
        };
        let estimate = Hutchinson::new(hessian, 2, 7).with_budget(budget);
        let (trace, error) = trace_and_error(&estimate);
        let used = estimate.probes_used();
        assert!((10..=60).contains(&used), "{used} probes");
        assert!(error <= 0.15 * trace.abs(), "error {error} of {trace}");
        assert!((trace - 5.0).abs() <= 4.0 * error, "{trace} ± {error}");
        assert!(estimate.notes()[0].contains(&format!("{used} probes")));
        // An absurd ceiling is taken as the largest.
        let absurd = Hutchinson::new(Dense([2.0, 0.0, 3.0]), 2, 7).with_budget(ProbeBudget {
            pilot: usize::MAX,
            max_probes: usize::MAX,
            relative: f64::NAN,
        });
        assert_eq!(
            absurd.budget.map(|b| (b.pilot, b.max_probes)),
            Some((ProbeBudget::MAX_PROBES, ProbeBudget::MAX_PROBES))
        );
        // The budget's ceiling holds.
        let capped = Hutchinson::new(Dense([2.0, 1.0, 3.0]), 2, 7).with_budget(ProbeBudget {
            max_probes: 11,
            ..budget
        });
        trace_and_error(&capped);
        assert!(capped.probes_used() <= 11);
        // A diagonal Hessian has no spread: the pilot's count, and an exact trace.
        let exact = Hutchinson::new(Dense([2.0, 0.0, 3.0]), 2, 7).with_budget(budget);
        let (trace, error) = trace_and_error(&exact);
        assert_eq!(exact.probes_used(), 10);
        assert_eq!((trace, error), (5.0, 0.0));
        // Without a budget, the fixed number.
        let fixed = Hutchinson::new(Dense([2.0, 1.0, 3.0]), 4, 7);
        trace_and_error(&fixed);
        assert_eq!(fixed.probes_used(), 4);
    }
}
