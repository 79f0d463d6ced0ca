//! Exact curvature diagonals of any model built from the per-sample drop-ins: the generalised
//! Gauss–Newton diagonal through recorded backward passes, and the Hessian diagonal where it
//! equals it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::module::{Module, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Tensor, TensorCreationOptions, TensorData};
use cockpit_persample::{PerSampleSource, Recorder, Recording, Request, Statistic};

use super::base::{CurvatureSource, DiagonalKind, NetworkOutput, OutputLoss};
use super::finite_difference::{FiniteDifferenceHvp, shifted, step_size};
use super::hutchinson::{Hutchinson, ProbeBudget};
use super::random::SplitMix;
use crate::{ParamEntry, QuantityError, Snapshot};

/// The piecewise-linear check's tolerance on `‖(H − G)_pp v‖ / ‖H_pp v‖` (float64 models).
pub const LINEARITY_TOLERANCE: f64 = 1e-4;
/// Backward passes the exact residual of the curved activation drop-ins may take by default
/// (two per curved unit: `2·Σ_l units_l`); beyond it, the residual is estimated and a note
/// says so ([`RecordedCurvature::with_activation_passes`]).
pub const ACTIVATION_PASSES: usize = 512;

/// The most rows (copies of the batch times its size) a widened GGN pass holds by default
/// ([`GgnPasses::Widened`], [`RecordedCurvature::with_widened_rows`]): the activations of
/// 2 048 samples. cifar10_3c3d's 10 classes at B 128 (1 280 rows) fit in one pass, which
/// peaked at 1.75 GB in float32 (flex, measured).
pub const WIDENED_ROWS: usize = 2048;

/// The most columns of the loss Hessian's square root the exact GGN diagonal takes by default
/// (one recorded pass each, or one widened pass's rows each): a classifier's `C`, a tagger's
/// `T·V` where it fits. Beyond it (a language model's `T·V`, a segmenter's `C·H·W`) the GGN
/// diagonal is a Monte-Carlo estimate from [`MC_SAMPLES`] sampled columns with its standard
/// error, and a note says so ([`RecordedCurvature::with_exact_columns`]).
pub const EXACT_COLUMNS: usize = 256;

/// Sampled columns of the Monte-Carlo GGN diagonal where the exact one is beyond
/// [`EXACT_COLUMNS`] (one recorded pass each; at least two, so the estimate carries its
/// standard error). `diag_ggn_mc` itself draws one, as Cockpit does, unless
/// [`RecordedCurvature::with_mc_samples`] says otherwise.
pub const MC_SAMPLES: usize = 4;

/// Probes per parameter tensor of the piecewise-linear check; the median ratio counts (a
/// ReLU unit crossing its kink within one probe's step is a rare, large outlier; curvature
/// is in every probe).
const LINEARITY_PROBES: usize = 3;

/// The piecewise-linear check's verdicts, shared by the [`RecordedCurvature`] sources of one
/// run's steps so that a model is checked once, at its first tracked step, and not at every
/// step (parameters keep their ids across steps; the verdicts are kept by the model's first
/// parameter). It belongs to whoever builds the step's sources with one forward — the
/// [`Cockpit`](crate::Cockpit) for [`Cockpit::step`](crate::Cockpit::step), the `Learner`'s
/// instrumented model — never to the process: another forward over the same parameters (a
/// fixed model, a clone with other activations) is another verdict, checked on its own.
#[derive(Debug, Clone, Default)]
pub struct LinearityVerdicts(Arc<Mutex<HashMap<ParamId, Result<(), QuantityError>>>>);

impl LinearityVerdicts {
    fn get(&self, key: &ParamId) -> Option<Result<(), QuantityError>> {
        self.0.lock().ok().and_then(|v| v.get(key).cloned())
    }

    fn set(&self, key: ParamId, verdict: Result<(), QuantityError>) {
        if let Ok(mut verdicts) = self.0.lock() {
            verdicts.insert(key, verdict);
        }
    }
}

type OutputFn<M> = dyn Fn(&M) -> Tensor<2> + Send + Sync;
type WidenedFn<M> = dyn Fn(&M, usize) -> Tensor<2> + Send + Sync;

/// How [`RecordedCurvature`] obtains the Hessian diagonal (`diag_h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HessianDiagonal {
    /// The caller states that what runs between the recorded drop-ins is piecewise linear
    /// (ReLU, leaky ReLU, max or average pooling, dropout, reshapes, sums such as residual
    /// connections) and that no two factors of a product depend on the same parameter. The
    /// network's output is then linear in each single parameter given the others, so the
    /// Hessian's diagonal is the Gauss–Newton diagonal, exactly, plus the residual of the
    /// curved activation drop-ins ([`Sigmoid`](cockpit_persample::Sigmoid),
    /// [`Tanh`](cockpit_persample::Tanh), [`elementwise`](cockpit_persample::elementwise), …),
    /// which is computed exactly: for each curved unit `i` of each activation, with
    /// `r = ∂L/∂a ⊙ σ''(z)`, the parameters' `Σ_n r_{n,i} (∂z_{n,i}/∂θ)²`, from two backward
    /// passes started at `z_i` (seeded `√r⁺` and `√r⁻`; BackPACK's signed square-root
    /// columns), within [`ACTIVATION_PASSES`]. The declaration is checked at the first
    /// tracked step ([`RecordedCurvature::check_piecewise_linear`]). The source holds the
    /// statement against what it recorded: when a curved drop-in ran (a normalisation,
    /// attention, a recurrent layer, a smooth activation inside a block; see
    /// [`Recording::curved_layers`](cockpit_persample::Recording::curved_layers)), it
    /// says so in a note and uses [`HessianDiagonal::GgnPlusResidual`] instead.
    PiecewiseLinear,
    /// The exact Gauss–Newton diagonal plus Hutchinson's estimate of the residual
    /// `diag(Σ_n Σ_k ∂ℓ_n/∂f_{n,k} ∇²f_{n,k})` with `probes` Rademacher probes: unbiased, and
    /// an estimate (the source's note says so).
    GgnPlusResidual {
        /// Probes of the residual's estimate.
        probes: usize,
    },
}

/// Curvature diagonals of any model whose parameters all belong to the per-sample drop-ins
/// (`cockpit_persample`), for every [`OutputLoss`] (a classifier's cross-entropy and MSE with
/// mean reduction, a language model's or tagger's per-token cross-entropy, a segmenter's
/// per-pixel one), with no double backward.
///
/// A per-position loss's output is flattened to `[B, K]` (`K = T·V`, `C·H·W`); its loss
/// Hessian is block diagonal over positions, so each column lives in one position.
///
/// The loss Hessian with respect to sample `n`'s output is factored as `∇²_f ℓ_n = S_n S_nᵀ`
/// (cross-entropy: the columns `√p_c (e_c − p)`; MSE `(1/C)‖f − y‖²`: `√(2/C)·I`). For each
/// column `c`, one backward pass of the pseudo-loss `(1/B) Σ_n s_{n,c}ᵀ f_n` (`s` held fixed),
/// recorded by the drop-ins, gives every per-sample `J_nᵀ s_{n,c}`, and the engine's per-sample
/// sums of squares give
///
/// - `diag_ggn_exact`: `(1/B) Σ_n Σ_c (J_nᵀ s_{n,c})²`, exact;
/// - `diag_ggn_mc`: the same with one sampled column, Cockpit's sampling
///   (`s_n = p_n − e_ŷ`, `ŷ ~ p_n`; MSE: `√(2/C)·ξ_n`, `ξ_n ~ N(0, I)`), an unbiased estimate;
/// - `diag_h`: by [`HessianDiagonal`]: the exact GGN diagonal where the network is linear in
///   each single parameter, else that plus an estimate of the residual, whose products
///   `R v = ∂/∂ε ∇_θ (ḡᵀ f(θ + εv))` (`ḡ = ∂L/∂f` fixed) come from central differences.
///
/// Where the drop-ins do not cover every parameter, `diag_h` is Hutchinson's estimate on
/// finite-difference products of the loss, and the GGN kinds are refused; a note says which.
/// Hessian-vector products (HessMaxEV) are central differences of the loss's gradient
/// ([`FiniteDifferenceHvp`]).
///
/// Notes ([`CurvatureSource::notes`]) say where `diag_h` was estimated rather than exact, and
/// why; the Cockpit turns each into one warning. An exact diagonal carries no note.
///
/// # Cost
///
/// `diag_ggn_exact`: `K` recorded forward and backward passes (`K` the flattened output's
/// width) while `K` is at most [`EXACT_COLUMNS`], or one over `K` copies of the batch where
/// [`GgnPasses`] widens (`K` times the activations' memory, one pass's launches); beyond it,
/// [`MC_SAMPLES`] passes of sampled columns (a language model's `T·V` would take 10⁵–10⁶),
/// and per pass the engine's per-sample sums of squares (for convolutions and sequence layers one
/// per-sample gradient chunk at a time). `diag_ggn_mc`: one such pass. `diag_h`: the GGN's
/// passes, plus two forward and backward passes per residual probe where the residual is
/// estimated; declared piecewise linear with curved activation drop-ins, one pass for
/// `∂L/∂a` and two recorded passes per curved unit (`2·Σ_l units_l`, at most
/// [`ACTIVATION_PASSES`] by default). One computation per kind and step, shared by HessTrace and TIC. No read.
pub struct RecordedCurvature<M: Module> {
    model: M,
    output_of: Arc<OutputFn<M>>,
    /// The output on the batch repeated `k` times, where given.
    widened: Option<Arc<WidenedFn<M>>>,
    ggn_passes: GgnPasses,
    /// The most rows a widened pass may hold.
    widened_rows: usize,
    loss: OutputLoss,
    hessian: HessianDiagonal,
    fallback_probes: usize,
    /// Adaptive probes for every Hutchinson estimate, where set.
    budget: Option<ProbeBudget>,
    /// Products of the loss (HessMaxEV, and Hutchinson where nothing exact applies).
    hvp: Arc<FiniteDifferenceHvp<M>>,
    rng: SplitMix,
    seed: u64,
    cache: Mutex<HashMap<DiagonalKind, Vec<Tensor<1>>>>,
    /// The standard errors of each estimated diagonal's per-parameter traces.
    errors: Mutex<HashMap<DiagonalKind, Vec<Tensor<1>>>>,
    /// The GGN diagonal (exact, or estimated beyond the exact budget) and the curved layers
    /// its passes saw (`None` inside where the drop-ins do not cover the model), shared by
    /// `diag_ggn_exact` and `diag_h`.
    ggn: Mutex<Option<Option<Ggn>>>,
    /// Passes the activations' exact residual may take.
    activation_passes: usize,
    /// The most columns the exact GGN takes.
    exact_columns: usize,
    /// Sampled columns of every Monte-Carlo GGN, where set.
    mc_samples: Option<usize>,
    /// Each curved activation's residual `r = ∂L/∂a ⊙ σ''(z)` `[B, units]` at the step.
    activation_residuals: Mutex<Option<Vec<Tensor<2>>>>,
    /// The piecewise-linear verdicts this source reads and adds to.
    verdicts: LinearityVerdicts,
    /// The call that declares the network piecewise linear in the API that built this source,
    /// as the notes name it.
    declared_by: &'static str,
    notes: Mutex<Vec<String>>,
}

/// A GGN diagonal, the curved layers its passes saw, and the standard errors of its
/// per-parameter traces where it is a Monte-Carlo estimate.
#[derive(Clone)]
struct Ggn {
    diagonal: Vec<Tensor<1>>,
    curved: Vec<String>,
    errors: Option<Vec<Tensor<1>>>,
}

impl<M: Module> std::fmt::Debug for RecordedCurvature<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedCurvature")
            .field("hessian", &self.hessian)
            .finish_non_exhaustive()
    }
}

impl<M: Module + Sync + 'static> RecordedCurvature<M> {
    /// Diagonals of `model` (cloned; cheap) under `loss`: `output_of(model)` must run the
    /// step's forward pass on the step's batch (same dropout masks, BatchNorm in eval mode)
    /// and return the network's output `f` `[B, C]` on the autodiff device. `seed` drives the
    /// Monte-Carlo draws and the probes. `diag_h` is [`HessianDiagonal::GgnPlusResidual`] with
    /// 10 probes until [`RecordedCurvature::piecewise_linear`] says otherwise.
    pub fn new<O: NetworkOutput>(
        model: &M,
        output_of: impl Fn(&M) -> O + Send + Sync + 'static,
        loss: OutputLoss,
        seed: u64,
    ) -> Self {
        let output_of: Arc<OutputFn<M>> = Arc::new(move |m: &M| output_of(m).into_rows());
        let hvp = {
            let (output_of, loss) = (output_of.clone(), loss.clone());
            Arc::new(FiniteDifferenceHvp::new(model, move |m: &M| {
                let value = loss.value(output_of(m));
                Ok(GradientsParams::from_grads(value.backward(), m))
            }))
        };
        Self {
            model: model.clone(),
            output_of,
            widened: None,
            ggn_passes: GgnPasses::Auto,
            widened_rows: WIDENED_ROWS,
            loss,
            hessian: HessianDiagonal::GgnPlusResidual { probes: 10 },
            fallback_probes: 10,
            budget: None,
            hvp,
            rng: SplitMix::new(seed),
            seed,
            cache: Mutex::new(HashMap::new()),
            errors: Mutex::new(HashMap::new()),
            ggn: Mutex::new(None),
            activation_passes: ACTIVATION_PASSES,
            exact_columns: EXACT_COLUMNS,
            mc_samples: None,
            activation_residuals: Mutex::new(None),
            verdicts: LinearityVerdicts::default(),
            declared_by: "RecordedCurvature::piecewise_linear()",
            notes: Mutex::new(Vec::new()),
        }
    }

    /// Reads and keeps the piecewise-linear check's verdict in `verdicts`, shared with the
    /// other steps' sources of the same forward, so the check runs once per model (without:
    /// this source's own, checked at its first use).
    pub fn with_linearity_verdicts(mut self, verdicts: LinearityVerdicts) -> Self {
        self.verdicts = verdicts;
        self
    }

    /// The network's output on the batch repeated `copies` times along the batch axis
    /// (`widened(model, k)` = `output_of` on `x.repeat_dim(0, k)`, `[k·B, C]`), so the exact
    /// GGN's `C` recorded passes can run as one ([`GgnPasses`]).
    pub fn with_widened_output<O: NetworkOutput>(
        mut self,
        widened: impl Fn(&M, usize) -> O + Send + Sync + 'static,
    ) -> Self {
        self.widened = Some(Arc::new(move |m: &M, copies| {
            widened(m, copies).into_rows()
        }));
        self
    }

    /// The most columns of the loss Hessian's square root (the flattened output's width `K`:
    /// `C` for a classifier, `T·V` for a language model) the exact GGN diagonal may take,
    /// one recorded pass each ([`EXACT_COLUMNS`] by default). Beyond it, `diag_ggn_exact` and
    /// the GGN part of `diag_h` are Monte-Carlo estimates with their standard errors
    /// ([`RecordedCurvature::with_mc_samples`]), and a note says so.
    pub fn with_exact_columns(mut self, columns: usize) -> Self {
        self.exact_columns = columns;
        self
    }

    /// Sampled columns of every Monte-Carlo GGN diagonal: `diag_ggn_mc` (1 by default, as
    /// Cockpit) and the GGN beyond [`RecordedCurvature::with_exact_columns`] ([`MC_SAMPLES`]
    /// by default). One recorded pass each; from two on, the estimate carries the standard
    /// error of each parameter's trace, from the samples' spread.
    pub fn with_mc_samples(mut self, samples: usize) -> Self {
        self.mc_samples = Some(samples.max(1));
        self
    }

    /// The most rows (copies times the batch) one widened pass may hold
    /// ([`WIDENED_ROWS`] by default): `C·B` beyond it runs as several widened passes of
    /// `⌊rows/B⌋` copies each, so the activations' memory stays within `rows` samples' worth.
    pub fn with_widened_rows(mut self, rows: usize) -> Self {
        self.widened_rows = rows.max(1);
        self
    }

    /// How the exact GGN's recorded passes run ([`GgnPasses::Auto`] by default).
    pub fn with_ggn_passes(mut self, passes: GgnPasses) -> Self {
        self.ggn_passes = passes;
        self
    }

    /// The backward passes the exact residual of the curved activation drop-ins may take
    /// (two per curved unit; [`ACTIVATION_PASSES`] by default). Beyond it, `diag_h` is the
    /// exact GGN plus Hutchinson's estimate of the residual, and a note says how many passes
    /// the exact one would take.
    pub fn with_activation_passes(mut self, passes: usize) -> Self {
        self.activation_passes = passes;
        self
    }

    /// Names `call` as the way to declare the network piecewise linear in the notes (the API
    /// that built this source: [`Cockpit::step`](crate::Cockpit::step) builds it for its
    /// users, who declare through `StepOptions`).
    pub(crate) fn declared_by(mut self, call: &'static str) -> Self {
        self.declared_by = call;
        self
    }

    /// States that the network is piecewise linear between its recorded drop-ins, so `diag_h`
    /// is the exact GGN diagonal ([`HessianDiagonal::PiecewiseLinear`]).
    pub fn piecewise_linear(self) -> Self {
        self.with_hessian(HessianDiagonal::PiecewiseLinear)
    }

    /// How `diag_h` is obtained.
    pub fn with_hessian(mut self, hessian: HessianDiagonal) -> Self {
        self.hessian = match hessian {
            HessianDiagonal::GgnPlusResidual { probes } => HessianDiagonal::GgnPlusResidual {
                probes: probes.max(1),
            },
            other => other,
        };
        self
    }

    /// Probes of Hutchinson's estimates where nothing declared applies: `diag_h` where the
    /// drop-ins do not cover the model, and the residual where a piecewise-linear declaration
    /// is overruled by a curved drop-in (10 by default).
    pub fn with_fallback_probes(mut self, probes: usize) -> Self {
        self.fallback_probes = probes.max(1);
        self
    }

    /// Lets every estimate of this source (the residual, and Hutchinson's `diag_h` where the
    /// drop-ins do not cover the model) draw as many probes as `budget` asks for — each
    /// parameter's trace to a standard error below `budget.relative` of its magnitude, within
    /// `budget.max_probes` — instead of a fixed number; the note states how many it drew.
    pub fn with_probe_budget(mut self, budget: ProbeBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Hutchinson's estimate from `products`, with the budget where one is set.
    fn estimator(
        &self,
        products: impl CurvatureSource + 'static,
        probes: usize,
        seed: u64,
    ) -> Hutchinson {
        let estimate = Hutchinson::new(products, probes, seed);
        match self.budget {
            Some(budget) => estimate.with_budget(budget),
            None => estimate,
        }
    }

    /// `probes` as a note gives it: the fixed number, or the budget's count.
    fn probes_said(&self, estimate: &Hutchinson, probes: usize) -> String {
        match self.budget {
            Some(budget) => format!(
                "{} probes (adaptive: to a standard error below {} of each trace, at most {})",
                estimate.probes_used(),
                budget.relative,
                budget.max_probes
            ),
            None => format!("{probes} probes"),
        }
    }

    fn note(&self, note: String) {
        if let Ok(mut notes) = self.notes.lock()
            && !notes.contains(&note)
        {
            notes.push(note);
        }
    }

    /// `Σ_c Σ_n (J_nᵀ s_{n,c})²` per parameter over the columns `columns(f)` gives, one
    /// recorded pass per column, or one pass over the batch widened to every column where
    /// [`Self::widens`] says so, and the curved layers the passes saw. `None` where the
    /// drop-ins do not cover `params` (with the coverage report).
    fn recorded_sum_sq(
        &self,
        params: &Snapshot,
        columns: &dyn Fn(&Tensor<2>) -> Vec<Tensor<2>>,
        widenable: bool,
    ) -> Result<Recorded, QuantityError> {
        if widenable && let Some(widened) = self.widens(params) {
            return self.widened_sum_sq(params, widened);
        }
        self.passes(params, columns, PassSums::default())
    }

    /// The mean over `samples` recorded passes of `Σ_n (J_nᵀ s_n)²`, one sampled column
    /// `s` each, with the standard error of each parameter's trace from the passes' spread
    /// (from two samples on).
    fn sampled_sum_sq(&self, params: &Snapshot, samples: usize) -> Result<Recorded, QuantityError> {
        let columns = |f: &Tensor<2>| -> Vec<Tensor<2>> {
            (0..samples)
                .map(|_| self.loss.sampled_column(f, &self.rng))
                .collect()
        };
        self.passes(params, &columns, PassSums::sampled())
    }

    /// One recorded pass per column of `columns(f)`, summed into `sums`.
    fn passes(
        &self,
        params: &Snapshot,
        columns: &dyn Fn(&Tensor<2>) -> Vec<Tensor<2>>,
        mut sums: PassSums,
    ) -> Result<Recorded, QuantityError> {
        let mut planned: Option<Vec<Tensor<2>>> = None;
        let (mut column, mut batch) = (0, 1);
        loop {
            let recorder = Recorder::start();
            let f = (self.output_of)(&self.model);
            let plan = planned.get_or_insert_with(|| columns(&f.clone().detach()));
            let Some(s) = plan.get(column).cloned() else {
                break;
            };
            batch = f.dims()[0];
            // `mul_scalar` by the float64 reciprocal: burn-autodiff's backward of `div_scalar`
            // rounds the reciprocal to float32, which puts every diagonal 6e-8 off at B 6.
            let pseudo = (f * s).sum().mul_scalar((batch as f64).recip());
            let grads = pseudo.backward();
            let factors = recorder.finish(&grads)?;
            if let Some(uncovered) = sums.add(&factors, params)? {
                return Ok(uncovered);
            }
            column += 1;
        }
        Ok(sums.into_recorded(batch))
    }

    /// [`Self::recorded_sum_sq`] in recorded passes over the batch repeated once per column
    /// (`widened(model, k)`, rows `j·B..(j + 1)·B` the `j`-th copy), as few as
    /// [`RecordedCurvature::with_widened_rows`] allows (one for `C·B` rows within it). A pass
    /// over columns `c₀..c₀ + k` has the pseudo-loss `(1/(k·B)) Σ_j Σ_n s_{n,c₀+j}ᵀ f_{j,n}`:
    /// every copy's per-sample gradient is one `J_nᵀ s_{n,c}`, so the sums of squares over its
    /// `k·B` rows are `k` separate passes' sums.
    ///
    /// The number of columns is the targets' width, known before the pass; the columns are
    /// taken from the first copy's output.
    fn widened_sum_sq(
        &self,
        params: &Snapshot,
        widened: Arc<WidenedFn<M>>,
    ) -> Result<Recorded, QuantityError> {
        let [batch, classes] = self.loss.dims();
        let per_pass = (self.widened_rows / batch.max(1)).clamp(1, classes.max(1));
        let mut sums = PassSums::default();
        for start in (0..classes).step_by(per_pass) {
            let copies = per_pass.min(classes - start);
            let recorder = Recorder::start();
            let wide = widened(&self.model, copies);
            if wide.dims() != [copies * batch, classes] {
                return Err(QuantityError::Shape(format!(
                    "the widened output is {:?}; the batch of {batch} repeated {copies} times \
                     gives [{}, {classes}]",
                    wide.dims(),
                    copies * batch
                )));
            }
            let first = wide.clone().slice([0..batch, 0..classes]).detach();
            let s = self.loss.stacked_columns(&first, start..start + copies);
            let pseudo = (wide * s)
                .sum()
                .mul_scalar(((copies * batch) as f64).recip());
            let grads = pseudo.backward();
            let factors = recorder.finish(&grads)?;
            if let Some(uncovered) = sums.add(&factors, params)? {
                return Ok(uncovered);
            }
        }
        Ok(sums.into_recorded(batch))
    }

    /// The widened output where the exact GGN's passes are widened here: a widened output is
    /// set, and [`GgnPasses`] asks for it (`Auto`: on a CubeCL device).
    fn widens(&self, params: &Snapshot) -> Option<Arc<WidenedFn<M>>> {
        let widened = self.widened.clone()?;
        let widen = match self.ggn_passes {
            GgnPasses::Separate => false,
            GgnPasses::Widened => true,
            GgnPasses::Auto => crate::device::launches_kernels(&params.device()),
        };
        widen.then_some(widened)
    }

    /// The columns `s_{·,c}` `[B, K]` of the loss Hessian's square root, one per output.
    fn exact_columns(&self, f: &Tensor<2>) -> Vec<Tensor<2>> {
        let [batch, width] = f.dims();
        let stacked = self.loss.stacked_columns(f, 0..width);
        (0..width)
            .map(|c| {
                stacked
                    .clone()
                    .slice([c * batch..(c + 1) * batch, 0..width])
            })
            .collect()
    }

    /// The samples of a Monte-Carlo GGN: as set, else `default`.
    fn samples(&self, default: usize) -> usize {
        self.mc_samples.unwrap_or(default)
    }

    /// The exact GGN diagonal (shared by `diag_ggn_exact` and `diag_h`), cached for the step.
    /// Beyond [`RecordedCurvature::with_exact_columns`], a Monte-Carlo estimate with its
    /// errors, and a note saying so.
    fn ggn(&self, params: &Snapshot) -> Result<Option<Ggn>, QuantityError> {
        if let Some(cached) = self.ggn.lock().ok().and_then(|g| g.clone()) {
            return Ok(cached);
        }
        let [_, columns] = self.loss.dims();
        let recorded = if columns <= self.exact_columns {
            self.recorded_sum_sq(params, &|f| self.exact_columns(f), true)?
        } else {
            let samples = self.samples(MC_SAMPLES);
            let recorded = self.sampled_sum_sq(params, samples)?;
            if matches!(recorded, Recorded::Covered { .. }) {
                self.note(format!(
                    "the exact GGN diagonal takes {columns} recorded passes (one per output \
                     column), beyond the budget of {} (RecordedCurvature::with_exact_columns): \
                     the GGN diagonal is a Monte-Carlo estimate from {samples} sampled \
                     column{} (diag_ggn_mc){}",
                    self.exact_columns,
                    if samples == 1 { "" } else { "s" },
                    if samples >= 2 {
                        ", with its standard error"
                    } else {
                        ", without a standard error (one sample)"
                    }
                ));
            }
            recorded
        };
        let ggn = match recorded {
            Recorded::Covered {
                diagonal,
                curved,
                errors,
            } => Some(Ggn {
                diagonal,
                curved,
                errors,
            }),
            Recorded::Uncovered(coverage) => {
                self.note(format!(
                    "the per-sample drop-ins do not cover every parameter, so no exact \
                     curvature diagonal exists for this model:\n{coverage}"
                ));
                None
            }
        };
        if let Ok(mut cache) = self.ggn.lock() {
            *cache = Some(ggn.clone());
        }
        Ok(ggn)
    }

    /// Hutchinson's estimate of `diag_h` from finite-difference products of the loss.
    fn hutchinson(&self, params: &Snapshot) -> Result<Vec<Tensor<1>>, QuantityError> {
        let estimate = self.estimator(
            self.hvp.clone(),
            self.fallback_probes,
            self.seed ^ 0x4855_5443,
        );
        let diagonal = estimate.diagonal(params, DiagonalKind::Hessian)?;
        self.note(format!(
            "diag_h is Hutchinson's estimate with {} on finite-difference products (not exact)",
            self.probes_said(&estimate, self.fallback_probes)
        ));
        self.keep_errors(estimate.diagonal_errors(params, DiagonalKind::Hessian));
        Ok(diagonal)
    }

    /// Keeps the standard errors of the Hessian diagonal's estimate (its traces').
    fn keep_errors(&self, errors: Option<Vec<Tensor<1>>>) {
        self.keep_errors_of(DiagonalKind::Hessian, errors);
    }

    /// Keeps the standard errors of `kind`'s estimate; where some are kept already (a
    /// Monte-Carlo GGN under a residual's estimate), the two independent errors are added in
    /// quadrature.
    fn keep_errors_of(&self, kind: DiagonalKind, errors: Option<Vec<Tensor<1>>>) {
        let (Some(errors), Ok(mut kept)) = (errors, self.errors.lock()) else {
            return;
        };
        let joined = match kept.remove(&kind) {
            Some(earlier) if earlier.len() == errors.len() => earlier
                .into_iter()
                .zip(errors)
                .map(|(a, b)| (a.square() + b.square()).sqrt())
                .collect(),
            _ => errors,
        };
        kept.insert(kind, joined);
    }

    /// The residual's products `R v = Σ_n Σ_k ḡ_{n,k} ∇²f_{n,k} v` (`H v` minus the
    /// Gauss–Newton product), from central differences of `∇_θ (ḡᵀ f(θ))` with
    /// `ḡ = ∂L/∂f` at the step's parameters, held fixed.
    fn residual_products(&self) -> FiniteDifferenceHvp<M> {
        let f = (self.output_of)(&self.model).detach();
        let g_bar = self.loss.gradient(f);
        let output_of = self.output_of.clone();
        FiniteDifferenceHvp::new(&self.model, move |m: &M| {
            let pseudo = (output_of(m) * g_bar.clone()).sum();
            Ok(GradientsParams::from_grads(pseudo.backward(), m))
        })
    }

    /// The residual's product `R v = H v − G v` (the part of the Hessian the Gauss–Newton
    /// matrix leaves out, `Σ_n Σ_k ∂L/∂f_{n,k} ∇²f_{n,k}`), whose diagonal `diag_h` estimates
    /// where the network is curved between its drop-ins.
    ///
    /// # Cost
    ///
    /// Two forward and backward passes (one forward pass more for `∂L/∂f`).
    ///
    /// # Errors
    ///
    /// [`QuantityError`] if the shifted passes fail.
    pub fn residual_product(
        &self,
        params: &Snapshot,
        v: &Snapshot,
    ) -> Result<Snapshot, QuantityError> {
        self.residual_products().hvp(params, v)
    }

    /// Holds a piecewise-linear declaration against the model, once per model: for each
    /// parameter tensor `p` and Rademacher probes `v` on `p` alone, the residual's block
    /// `(H − G − A)_pp v` must vanish beside the Hessian's `H_pp v` (`A` the curved
    /// activation drop-ins' part, which is computed exactly: what remains is curvature the
    /// drop-ins cannot see); the median ratio over 3 probes is compared with
    /// [`LINEARITY_TOLERANCE`]. Blocks whose `H_pp v` is below 1e-3 of the largest are not
    /// judged.
    ///
    /// Float64 models only: float32 central differences step `u^{1/3} ≈ 5e-3` of `‖θ‖`,
    /// which moves enough ReLU units across their kinks to make a ReLU network's blocks look
    /// as curved as a sigmoid's (measured: ratio ≈ 1 on a ReLU MLP). A float32 model is not
    /// checked, and a note says so.
    ///
    /// # Cost
    ///
    /// Once per model and [`LinearityVerdicts`] (the sources of one run share theirs:
    /// [`RecordedCurvature::with_linearity_verdicts`]): `4·3·P` forward and backward passes
    /// (`P` parameter tensors), with curved activation drop-ins `3·3·P` forward and `3·P`
    /// backward passes more, and one read of `6P` numbers.
    ///
    /// # Errors
    ///
    /// [`QuantityError::CurvedModel`] naming the parameter furthest from linear.
    pub fn check_piecewise_linear(&self, params: &Snapshot) -> Result<(), QuantityError> {
        let Some(key) = params.entries().first().map(|e| e.id) else {
            return Ok(());
        };
        if let Some(result) = self.verdicts.get(&key) {
            return result;
        }
        let float64 = params
            .entries()
            .first()
            .is_some_and(|e| e.value.dtype() == burn::tensor::DType::F64);
        if !float64 {
            self.note(
                "the declaration that the model is piecewise linear between its drop-ins was \
                 believed, not checked: in float32, central differences cannot tell a kink from \
                 curvature (a float64 model is checked)"
                    .into(),
            );
            return Ok(());
        }
        let result = self.linearity(params);
        self.verdicts.set(key, result.clone());
        result
    }

    fn linearity(&self, params: &Snapshot) -> Result<(), QuantityError> {
        let residual = self.residual_products();
        let activations = self.activation_residuals()?;
        let rng = SplitMix::new(self.seed ^ 0x4c49_4e45);
        let entries = params.entries();
        let mut norms = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            for _ in 0..LINEARITY_PROBES {
                let probe = Snapshot::from_entries(
                    entries
                        .iter()
                        .enumerate()
                        .map(|(j, e)| {
                            let options = TensorCreationOptions::new(e.value.device())
                                .with_dtype(e.value.dtype());
                            let signs: Vec<f64> = if j == index {
                                (0..e.numel()).map(|_| rng.sign()).collect()
                            } else {
                                vec![0.0; e.numel()]
                            };
                            let value = Tensor::<1>::from_data(
                                TensorData::new(signs, [e.numel()]),
                                options,
                            );
                            ParamEntry { value, ..e.clone() }
                        })
                        .collect(),
                );
                let block = |product: Snapshot| -> Result<Tensor<1>, QuantityError> {
                    product
                        .entries()
                        .get(index)
                        .map(|p| p.value.clone().square().sum())
                        .ok_or_else(|| {
                            QuantityError::Shape(format!("no product for `{}`", entry.name))
                        })
                };
                // What the activation drop-ins record is computed exactly, not left out.
                let mut unexplained = residual.hvp(params, &probe)?;
                if !activations.is_empty() {
                    let recorded = self.activation_product(params, &probe, &activations)?;
                    unexplained = unexplained.difference(&recorded)?;
                }
                norms.push(block(unexplained)?);
                norms.push(block(self.hvp.hvp(params, &probe)?)?);
            }
        }
        let host = crate::readback::read_together(norms)?;
        let values: Vec<f64> = host
            .into_iter()
            .map(|v| v.first().copied().unwrap_or(f64::NAN).sqrt())
            .collect();
        let tolerance = LINEARITY_TOLERANCE;
        let largest = values.chunks(2).map(|p| p[1]).fold(0.0, f64::max);
        let mut worst: Option<(&str, f64)> = None;
        for (entry, probes) in entries.iter().zip(values.chunks(2 * LINEARITY_PROBES)) {
            let mut ratios: Vec<f64> = probes
                .chunks(2)
                .filter(|p| p[1] > 1e-3 * largest)
                .map(|p| p[0] / p[1])
                .collect();
            if ratios.len() < LINEARITY_PROBES {
                continue;
            }
            ratios.sort_by(f64::total_cmp);
            let median = ratios[ratios.len() / 2];
            let exceeds = median.is_nan() || median > tolerance;
            if exceeds && worst.is_none_or(|(_, w)| median > w) {
                worst = Some((&entry.name, median));
            }
        }
        match worst {
            Some((parameter, relative)) => Err(QuantityError::CurvedModel {
                parameter: parameter.to_string(),
                relative,
                tolerance,
            }),
            None => Ok(()),
        }
    }

    /// Each curved activation's residual `r = ∂L/∂a ⊙ σ''(z)` `[B, units]` (`∂L/∂a` of the
    /// mean loss, from one recorded pass of `ḡᵀ f`), cached for the step; empty where no
    /// curved activation drop-in ran.
    fn activation_residuals(&self) -> Result<Vec<Tensor<2>>, QuantityError> {
        if let Some(cached) = self
            .activation_residuals
            .lock()
            .ok()
            .and_then(|r| r.clone())
        {
            return Ok(cached);
        }
        let recorder = Recorder::start_with_activations();
        let f = (self.output_of)(&self.model);
        let g_bar = self.loss.gradient(f.clone().detach());
        let grads = (f * g_bar).sum().backward();
        let recording = recorder.finish_reached(&grads)?;
        let residuals: Vec<Tensor<2>> = recording
            .activations()
            .iter()
            .map(|a| a.residual().unwrap_or_else(|| a.input.zeros_like()))
            .collect();
        if let Ok(mut cache) = self.activation_residuals.lock() {
            *cache = Some(residuals.clone());
        }
        Ok(residuals)
    }

    /// The curved activations' part of the Hessian's diagonal,
    /// `Σ_l Σ_i Σ_n r_{n,i} (∂z_{n,i}/∂θ)²`, exactly: per unit `i` of activation `l`, two
    /// backward passes from `z_{·,i}` seeded `√r⁺` and `√r⁻` (every sample at once; a sample's
    /// seed reaches only its own per-sample gradient), whose per-sample sums of squares the
    /// recording gives.
    fn activation_part(&self, params: &Snapshot) -> Result<ActivationPart, QuantityError> {
        let residuals = self.activation_residuals()?;
        if residuals.is_empty() {
            return Ok(ActivationPart::None);
        }
        let passes: usize = residuals.iter().map(|r| 2 * r.dims()[1]).sum();
        if passes > self.activation_passes {
            return Ok(ActivationPart::OverBudget { passes });
        }
        let mut total: Vec<Tensor<1>> = params
            .entries()
            .iter()
            .map(|e| e.value.zeros_like())
            .collect();
        for (layer, r) in residuals.iter().enumerate() {
            let [batch, units] = r.dims();
            let scale = ((batch * batch) as f64).recip();
            for unit in 0..units {
                let column = r.clone().slice([0..batch, unit..unit + 1]);
                for sign in [1.0, -1.0] {
                    let seed = column.clone().mul_scalar(sign).clamp_min(0.0).sqrt();
                    let recorder = Recorder::start_with_activations();
                    let _output = (self.output_of)(&self.model);
                    let z = recorder
                        .activation_inputs()
                        .get(layer)
                        .cloned()
                        .ok_or_else(|| {
                            QuantityError::Shape(
                                "a curved activation ran at the first pass but not at a later \
                                 one (output_of must run the same network each time)"
                                    .into(),
                            )
                        })?;
                    let z = z.slice([0..batch, unit..unit + 1]);
                    let grads = (z * seed).sum().backward();
                    let recording = recorder.finish_reached(&grads)?;
                    let reached = recording.recorded(params);
                    if reached.entries().is_empty() {
                        continue;
                    }
                    let request = Request::new().with(Statistic::SumSq);
                    let sum_sq = recording
                        .reduce(&reached, request)?
                        .remove(Statistic::SumSq)
                        .ok_or_else(|| {
                            QuantityError::Shape(
                                "the seeded pass returned no sums of squares".into(),
                            )
                        })?;
                    for (entry, sq) in reached.entries().iter().zip(sum_sq) {
                        if let Some(index) = params.entries().iter().position(|e| e.id == entry.id)
                        {
                            total[index] = total[index].clone() + sq.mul_scalar(sign * scale);
                        }
                    }
                }
            }
        }
        Ok(ActivationPart::Exact(total))
    }

    /// The curved activations' part of the Hessian times `v`:
    /// `A v = Σ_l J_{z_l}ᵀ (r_l ⊙ J_{z_l} v)`, with `J_z v` from central differences of the
    /// activations' inputs (two forward passes) and one backward pass from `z`.
    fn activation_product(
        &self,
        params: &Snapshot,
        v: &Snapshot,
        residuals: &[Tensor<2>],
    ) -> Result<Snapshot, QuantityError> {
        let theta = params.flatten().square().sum().sqrt();
        let (eps, nonzero) = step_size(params, v, theta);
        let inputs_at = |eps: Tensor<1>| -> Vec<Tensor<2>> {
            let recorder = Recorder::start_with_activations();
            let _output = (self.output_of)(&shifted(&self.model, v, eps));
            let inputs = recorder.activation_inputs();
            inputs.into_iter().map(|z| z.detach()).collect()
        };
        let (plus, minus) = (inputs_at(eps.clone()), inputs_at(eps.clone().neg()));
        let scale = (eps.mul_scalar(2.0).recip() * nonzero).reshape([1, 1]);
        let recorder = Recorder::start_with_activations();
        let _output = (self.output_of)(&self.model);
        let inputs = recorder.activation_inputs();
        drop(recorder);
        let mut pseudo: Option<Tensor<1>> = None;
        for (((z, r), p), m) in inputs.into_iter().zip(residuals).zip(plus).zip(minus) {
            let jv = (p - m) * scale.clone();
            let term = (z * (r.clone() * jv)).sum();
            pseudo = Some(match pseudo {
                None => term,
                Some(acc) => acc + term,
            });
        }
        let zeros = || {
            Snapshot::from_entries(
                params
                    .entries()
                    .iter()
                    .map(|e| ParamEntry {
                        value: e.value.zeros_like(),
                        ..e.clone()
                    })
                    .collect(),
            )
        };
        let Some(pseudo) = pseudo else {
            return Ok(zeros());
        };
        let grads = GradientsParams::from_grads(pseudo.backward(), &self.model);
        let snapshot = Snapshot::of_reached_grads(&self.model, &grads);
        Ok(Snapshot::from_entries(
            params
                .entries()
                .iter()
                .map(|p| {
                    snapshot.get(p.id).cloned().unwrap_or_else(|| ParamEntry {
                        value: p.value.zeros_like(),
                        ..p.clone()
                    })
                })
                .collect(),
        ))
    }

    /// Hutchinson's estimate of the residual's diagonal from [`Self::residual_product`]s;
    /// its standard errors are kept (the GGN's part is exact).
    ///
    /// The note says why the residual is estimated (`why`, which ends where the probes drawn
    /// are named) and with how many probes, once they are drawn.
    fn residual(
        &self,
        params: &Snapshot,
        probes: usize,
        ggn: &[Tensor<1>],
        (why, then): (String, String),
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        let estimate = self
            .estimator(self.residual_products(), probes, self.seed ^ 0x5245_5344)
            .with_exact_part(ggn.iter().map(|g| g.clone().sum()).collect());
        let diagonal = estimate.diagonal(params, DiagonalKind::Hessian)?;
        self.note(format!(
            "{why} with {} ({then})",
            self.probes_said(&estimate, probes)
        ));
        self.keep_errors(estimate.diagonal_errors(params, DiagonalKind::Hessian));
        Ok(diagonal)
    }

    fn compute(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        match kind {
            DiagonalKind::GgnExact => match self.ggn(params)? {
                Some(Ggn {
                    diagonal, errors, ..
                }) => {
                    self.keep_errors_of(DiagonalKind::GgnExact, errors);
                    Ok(diagonal)
                }
                None => Err(QuantityError::Unsupported(
                    "diag_ggn_exact needs every parameter in a per-sample drop-in".into(),
                )),
            },
            DiagonalKind::GgnMc => match self.sampled_sum_sq(params, self.samples(1))? {
                Recorded::Covered {
                    diagonal, errors, ..
                } => {
                    self.keep_errors_of(DiagonalKind::GgnMc, errors);
                    Ok(diagonal)
                }
                Recorded::Uncovered(coverage) => Err(QuantityError::Unsupported(format!(
                    "diag_ggn_mc needs every parameter in a per-sample drop-in:\n{coverage}"
                ))),
            },
            DiagonalKind::Hessian => {
                let Some(Ggn {
                    diagonal: ggn,
                    curved,
                    errors,
                }) = self.ggn(params)?
                else {
                    return self.hutchinson(params);
                };
                // A Monte-Carlo GGN's errors; a residual's estimate adds its own.
                self.keep_errors(errors);
                let [_, columns] = self.loss.dims();
                let ggn_is = if columns <= self.exact_columns {
                    "exact GGN diagonal"
                } else {
                    "Monte-Carlo GGN diagonal"
                };
                // Why the residual is estimated; the note names the probes once drawn.
                let estimated = || "an estimate".to_string();
                let (probes, why, then) = match (self.hessian, curved.is_empty()) {
                    // Exact, and labelled by nothing: notes are for estimates and fallbacks.
                    // The declaration is checked first (once per model).
                    (HessianDiagonal::PiecewiseLinear, true) => {
                        self.check_piecewise_linear(params)?;
                        match self.activation_part(params)? {
                            ActivationPart::None => return Ok(ggn),
                            ActivationPart::Exact(part) => {
                                return Ok(ggn.into_iter().zip(part).map(|(g, a)| g + a).collect());
                            }
                            ActivationPart::OverBudget { passes } => (
                                self.fallback_probes,
                                format!(
                                    "the curved activations' exact residual takes {passes} \
                                     backward passes, beyond the budget of {} \
                                     (RecordedCurvature::with_activation_passes): diag_h is the \
                                     {ggn_is} plus Hutchinson's estimate of the residual",
                                    self.activation_passes
                                ),
                                estimated(),
                            ),
                        }
                    }
                    (HessianDiagonal::PiecewiseLinear, false) => (
                        self.fallback_probes,
                        format!(
                            "the network was declared piecewise linear, but curved layers ran \
                             ({}): diag_h is the {ggn_is} plus Hutchinson's estimate of the \
                             residual",
                            curved.join(", ")
                        ),
                        estimated(),
                    ),
                    (HessianDiagonal::GgnPlusResidual { probes }, _) => (
                        probes,
                        format!(
                            "diag_h is the {ggn_is} plus Hutchinson's estimate of the residual"
                        ),
                        format!(
                            "an estimate; {} makes it exact where the model's only curved \
                             functions are activation drop-ins such as persample::Gelu and the \
                             rest is piecewise linear, at a cost of two backward passes per \
                             curved unit and step and a check once per float64 model",
                            self.declared_by
                        ),
                    ),
                };
                let residual = self.residual(params, probes, &ggn, (why, then))?;
                Ok(ggn.into_iter().zip(residual).map(|(g, r)| g + r).collect())
            }
        }
    }
}

/// The curved activations' part of `diag_h`.
enum ActivationPart {
    /// No curved activation drop-in ran.
    None,
    /// Exact, per parameter.
    Exact(Vec<Tensor<1>>),
    /// The exact part would take `passes` backward passes, beyond the budget.
    OverBudget { passes: usize },
}

/// The per-parameter sums of squares of recorded passes, and the curved layers they saw.
#[derive(Default)]
struct PassSums {
    total: Option<Vec<Tensor<1>>>,
    curved: Vec<String>,
    /// Each pass's per-parameter traces, where the passes are samples to be averaged.
    samples: Option<Vec<Vec<Tensor<1>>>>,
}

impl PassSums {
    /// Sums of sampled passes: their mean, with the standard errors of its traces.
    fn sampled() -> Self {
        Self {
            samples: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// Adds one recorded pass; `Some` where the drop-ins do not cover `params`.
    fn add(
        &mut self,
        factors: &Recording,
        params: &Snapshot,
    ) -> Result<Option<Recorded>, QuantityError> {
        if !factors.covers(params) {
            return Ok(Some(Recorded::Uncovered(
                factors.coverage(params).to_string(),
            )));
        }
        for layer in factors.curved_layers() {
            if !self.curved.contains(layer) {
                self.curved.push(layer.clone());
            }
        }
        let request = Request::new().with(Statistic::SumSq);
        let sum_sq = factors
            .reduce(params, request)?
            .remove(Statistic::SumSq)
            .ok_or_else(|| {
                QuantityError::Shape("the recorded pass returned no sums of squares".into())
            })?;
        if let Some(samples) = self.samples.as_mut() {
            samples.push(sum_sq.iter().map(|t| t.clone().sum()).collect());
        }
        self.total = Some(match self.total.take() {
            None => sum_sq,
            Some(acc) => acc.into_iter().zip(sum_sq).map(|(a, t)| a + t).collect(),
        });
        Ok(None)
    }

    /// The diagonal `(1/B) Σ` over a batch of `batch` (sampled passes: their mean, and from
    /// two samples on the standard error of each parameter's trace,
    /// `√(Σ_j (t_j − t̄)² / (k(k − 1)))`).
    fn into_recorded(self, batch: usize) -> Recorded {
        let samples = self.samples.as_ref().map_or(1, |s| s.len().max(1));
        let scale = ((batch * samples) as f64).recip();
        let errors = self.samples.filter(|s| s.len() >= 2).map(|passes| {
            let k = passes.len();
            let parameters = passes.first().map_or(0, Vec::len);
            (0..parameters)
                .map(|i| {
                    let traces =
                        Tensor::cat(passes.iter().map(|pass| pass[i].clone()).collect(), 0)
                            .mul_scalar((batch as f64).recip());
                    let mean = traces.clone().mean();
                    (traces - mean)
                        .square()
                        .sum()
                        .mul_scalar(((k * (k - 1)) as f64).recip())
                        .sqrt()
                })
                .collect()
        });
        Recorded::Covered {
            diagonal: self
                .total
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.mul_scalar(scale))
                .collect(),
            curved: self.curved,
            errors,
        }
    }
}

/// How [`RecordedCurvature`] runs the exact GGN's `C` recorded passes (one per column of the
/// loss Hessian's square root).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GgnPasses {
    /// One recorded forward and backward pass per column.
    Separate,
    /// One recorded pass over the batch repeated `C` times
    /// ([`RecordedCurvature::with_widened_output`]): the same sums, with the launches of one
    /// pass instead of `C` (a graphics card's cost), and `C` times the activations' memory.
    Widened,
    /// Widened on CubeCL devices (wgpu, a software rasterizer included, and cuda) where a
    /// widened output is set; separate on the CPU backends flex and ndarray, where they are
    /// faster and lighter (measured, `BENCHMARKS.md`: 3c3d on lavapipe 6× faster widened, on
    /// flex 1.2× slower).
    #[default]
    Auto,
}

/// What the recorded passes gave.
enum Recorded {
    Covered {
        diagonal: Vec<Tensor<1>>,
        curved: Vec<String>,
        /// The standard errors of a sampled diagonal's traces.
        errors: Option<Vec<Tensor<1>>>,
    },
    Uncovered(String),
}

impl<M: Module + Sync + 'static> CurvatureSource for RecordedCurvature<M> {
    fn hvp(&self, params: &Snapshot, v: &Snapshot) -> Result<Snapshot, QuantityError> {
        self.hvp.hvp(params, v)
    }

    fn diagonal(
        &self,
        params: &Snapshot,
        kind: DiagonalKind,
    ) -> Result<Vec<Tensor<1>>, QuantityError> {
        if let Some(cached) = self.cache.lock().ok().and_then(|c| c.get(&kind).cloned()) {
            return Ok(cached);
        }
        let diagonal = self.compute(params, kind)?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(kind, diagonal.clone());
        }
        Ok(diagonal)
    }

    fn diagonal_errors(&self, _params: &Snapshot, kind: DiagonalKind) -> Option<Vec<Tensor<1>>> {
        self.errors.lock().ok()?.get(&kind).cloned()
    }

    fn notes(&self) -> Vec<String> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}
