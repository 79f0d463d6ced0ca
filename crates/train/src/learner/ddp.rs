//! burn's distributed data-parallel strategy (DDP): one worker thread per device, each with its
//! own copy of the model and its own batches, gradients all-reduced during the backward pass.
//!
//! Each worker reduces its own batch's per-sample statistics on its own device, then one
//! all-reduce of those partial statistics gives every worker the union's
//! ([`all_reduce_stats`]). The first worker (rank 0) then tracks the step on the union of the
//! workers' batches: the all-reduced mean gradient, the joined statistics, and — for
//! histograms and curvature, which need the quantities' own state — the other workers' sources
//! of the same node, handed over in process.

use std::sync::{Arc, Condvar, Mutex};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use cockpit_quantities::curvature::{CurvatureSource, MergedCurvature};
use cockpit_quantities::persample::{
    Collective, MergedPerSample, PerSampleSource, PerSampleStats, ReducedPerSample,
    all_reduce_stats,
};
use cockpit_quantities::{Snapshot, StepInfo};

use super::group::{Deposit, PATIENCE};
use super::state::{NO_TRAIN_OUTPUT, State, scaled};
use crate::step::Pending;

/// What a worker takes from the shared state to track its step.
struct Start {
    rank: usize,
    step: usize,
    pending: Vec<Pending>,
    collective: Arc<dyn Collective>,
    /// `k`: burn's gradient is `k` times the union's mean gradient.
    k: usize,
    previous: Option<Snapshot>,
}

/// One DDP worker's optimizer step: reduce this worker's statistics, join them with the
/// others', and (rank 0) track the step on the union of the workers' batches.
pub(super) fn track<M: Module>(
    shared: &Mutex<State>,
    arrived: &Condvar,
    model: &M,
    grads: &GradientsParams,
    lr: f64,
) {
    let Some(start) = start_step(shared) else {
        return;
    };
    let Start {
        rank,
        step,
        pending,
        collective,
        k,
        previous,
    } = start;
    let params = Snapshot::of_params(model);
    let device = params.device();
    let mean = scaled(model, grads, 1.0 / k as f64);
    let grads_snapshot = Snapshot::of_grads(model, &mean);
    let mut problems = Vec::new();

    // This worker's own statistics, then the all-reduce every worker takes part in.
    let factors = own_factors(&pending, &device, &mut problems);
    let losses: Option<Vec<Tensor<1>>> = pending.iter().map(|p| p.capture.losses.clone()).collect();
    let local = match &grads_snapshot {
        Ok(g) => own_stats(
            shared,
            step,
            &params,
            g,
            previous.as_ref(),
            factors.as_deref(),
        ),
        Err(err) => Err(format!("step {step} not tracked: {err}")),
    };
    let local = local.map_err(|problem| problems.push(problem)).ok();
    let joined = all_reduce_stats(
        local.as_ref(),
        losses.map(|l| Tensor::cat(l, 0)),
        &device,
        collective.as_ref(),
    );

    // Hand this worker's part to rank 0.
    let ids: Option<Vec<u64>> = pending
        .iter()
        .map(|p| p.capture.ids.clone())
        .collect::<Option<Vec<_>>>()
        .map(|parts| parts.concat());
    let margins: Option<Vec<Tensor<1>>> =
        pending.iter().map(|p| p.capture.margins.clone()).collect();
    let deposit = Deposit {
        step,
        ids,
        margins: margins.filter(|m| !m.is_empty()).map(|m| Tensor::cat(m, 0)),
        losses: pending
            .iter()
            .filter_map(|p| p.capture.loss.clone())
            .collect(),
        factors,
        curvature: pending
            .into_iter()
            .map(|p| {
                let size = p.capture.losses.as_ref().map_or(1, |l| l.dims()[0]);
                p.curvature.map(|c| (size, c))
            })
            .collect(),
    };
    let mut state = State::lock(shared);
    for problem in problems {
        state.problem(problem);
    }
    let Some(ddp) = state.ddp.as_mut() else {
        return;
    };
    let worker = &mut ddp.workers[rank];
    // Whether the next step projects on this gradient is known only once rank 0 has
    // tracked this one: every worker keeps it.
    if let Ok(g) = &grads_snapshot {
        worker.previous = Some((step, g.clone()));
    }
    worker.deposit = Some(deposit);
    arrived.notify_all();
    if rank != 0 {
        return;
    }

    // Rank 0: wait for every worker's part, then track the union.
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let ready = state.ddp.as_ref().is_some_and(|ddp| {
            ddp.workers
                .iter()
                .all(|w| w.deposit.as_ref().is_some_and(|d| d.step == step))
        });
        if ready {
            break;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            state.problem(format!(
                "step {step}: a data-parallel worker did not hand over its part within \
                     {PATIENCE:?}; not tracked"
            ));
            return;
        }
        state = arrived
            .wait_timeout(state, deadline - now)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|poison| poison.into_inner().0);
    }
    let deposits: Vec<Deposit> = state
        .ddp
        .as_mut()
        .map(|ddp| {
            ddp.workers
                .iter_mut()
                .filter_map(|w| w.deposit.take())
                .collect()
        })
        .unwrap_or_default();
    let info = union_info(&mut state, step, deposits, joined, &device, lr, k);
    let iteration = state.iteration;
    if let (Some(info), Ok(_)) = (info, &grads_snapshot) {
        state.run(step, iteration, model, &mean, info);
    }
}

/// This worker's statistics for `step`, from its own `factors`: what the Cockpit's
/// request asks for (the batch size alone when it asks for no statistic).
fn own_stats(
    shared: &Mutex<State>,
    step: usize,
    params: &Snapshot,
    grads: &Snapshot,
    previous: Option<&Snapshot>,
    factors: Option<&dyn PerSampleSource>,
) -> Result<PerSampleStats, String> {
    let request = State::lock(shared)
        .cockpit
        .per_sample_request(step, grads, previous);
    let wanted =
        request.sq_norms || request.sum_sq || request.abs_max || !request.directions.is_empty();
    match (factors, wanted) {
        (factors, false) => Ok(PerSampleStats {
            batch_size: factors.map_or(0, |f| f.batch_size()),
            ..PerSampleStats::default()
        }),
        (Some(f), true) => f
            .reduce(params, request)
            .map_err(|err| format!("per-sample gradients unavailable: {err}")),
        (None, true) => Err(format!("step {step}: no per-sample gradients recorded")),
    }
}

/// Counts the calling worker's step and takes what it needs; `None` when the step is not
/// tracked (or the thread is not a worker of the group).
fn start_step(shared: &Mutex<State>) -> Option<Start> {
    let mut state = State::lock(shared);
    let ddp = state.ddp.as_mut()?;
    let rank = ddp.rank()?;
    let world = ddp.workers.len();
    let summed = ddp.summed;
    let collective = ddp.collectives[rank].clone();
    let worker = &mut ddp.workers[rank];
    let step = worker.step;
    worker.step += 1;
    let pending = std::mem::take(&mut worker.pending);
    let previous = match worker.previous.take() {
        Some((at, g)) if at + 1 == step => Some(g),
        _ => None,
    };
    if rank == 0 {
        state.step = step + 1;
    }
    if !state.cockpit.is_tracking(step) {
        return None;
    }
    let k = pending.len().max(1) * if summed { world } else { 1 };
    Some(Start {
        rank,
        step,
        pending,
        collective,
        k,
        previous,
    })
}

/// The info of a DDP step on the union of the workers' batches (rank 0, with every
/// worker's deposit in rank order): burn applied `k` times the union's mean gradient.
fn union_info(
    state: &mut State,
    step: usize,
    deposits: Vec<Deposit>,
    joined: Result<
        cockpit_quantities::persample::GroupStats,
        cockpit_quantities::persample::PerSampleError,
    >,
    device: &Device,
    lr: f64,
    k: usize,
) -> Option<StepInfo> {
    let losses: Vec<Tensor<1>> = deposits
        .iter()
        .flat_map(|d| d.losses.iter().map(|l| l.clone().to_device(device)))
        .collect();
    if losses.is_empty() {
        state.problem(NO_TRAIN_OUTPUT.into());
        return None;
    }
    let mut info = StepInfo::new(Tensor::cat(losses, 0).mean())
        .with_optimizer(state.optimizer.on_union(lr, k));
    // The workers' ids and margins joined in rank order, as their statistics are.
    let ids: Option<Vec<u64>> = deposits
        .iter()
        .map(|d| d.ids.clone())
        .collect::<Option<Vec<_>>>()
        .map(|parts| parts.concat());
    if let Some(ids) = ids {
        info = info.with_sample_ids(ids);
    }
    let margins: Option<Vec<Tensor<1>>> = deposits
        .iter()
        .map(|d| d.margins.clone().map(|m| m.to_device(device)))
        .collect();
    if let Some(margins) = margins {
        info = info.with_margins(Tensor::cat(margins, 0));
    }
    match joined {
        Ok(joined) if joined.sizes.iter().any(|b| *b != joined.sizes[0]) => {
            state.problem(format!(
                "step {step}: data-parallel workers with batches of different sizes {:?}: \
                     per-sample and curvature quantities are refused on this step (the \
                     all-reduced gradient is not the union's mean gradient)",
                joined.sizes
            ));
            return Some(info);
        }
        Ok(joined) => {
            let elements: Option<Vec<Arc<dyn PerSampleSource>>> =
                deposits.iter().map(|d| d.factors.clone()).collect();
            let elements = elements
                .and_then(|parts| MergedPerSample::new(parts).ok())
                .map(|merged| {
                    Arc::new(merged.on_device(device.clone())) as Arc<dyn PerSampleSource>
                });
            if let Some(losses) = joined.losses {
                info = info.with_individual_losses(losses);
            }
            if joined.stats.batch_size > 0 {
                info = info
                    .with_batch_size(joined.stats.batch_size)
                    .with_per_sample(ReducedPerSample::new(joined.stats, elements));
            }
        }
        Err(err) => state.problem(format!(
            "step {step}: per-sample statistics unavailable: {err}"
        )),
    }
    let curvature: Option<Vec<(usize, Box<dyn CurvatureSource>)>> = deposits
        .into_iter()
        .map(|d| d.curvature)
        .collect::<Option<Vec<_>>>()
        .map(|parts| parts.into_iter().flatten().collect());
    if let Some(parts) = curvature.filter(|p| !p.is_empty()) {
        match MergedCurvature::new(parts) {
            Ok(merged) => info = info.with_curvature(merged),
            Err(err) => state.problem(format!("curvature unavailable: {err}")),
        }
    }
    Some(info)
}

/// A worker's per-sample source for its micro-batches (one, or merged), `None` when a
/// micro-batch has none.
fn own_factors(
    pending: &[Pending],
    device: &Device,
    problems: &mut Vec<String>,
) -> Option<Arc<dyn PerSampleSource>> {
    let mut parts: Vec<Arc<dyn PerSampleSource>> = Vec::new();
    for p in pending {
        match &p.capture.factors {
            Some(Ok(f)) => parts.push(Arc::new(f.clone())),
            Some(Err(err)) => {
                problems.push(format!("per-sample gradients unavailable: {err}"));
                return None;
            }
            None => return None,
        }
    }
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => MergedPerSample::new(parts)
            .ok()
            .map(|m| Arc::new(m.on_device(device.clone())) as Arc<dyn PerSampleSource>),
    }
}
