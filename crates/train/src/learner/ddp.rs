//! burn's distributed data-parallel strategy (DDP): one worker thread per device, each with its
//! own copy of the model and its own batches, gradients all-reduced during the backward pass.
//!
//! Each worker reduces its own batch's per-sample statistics on its own device, then one
//! all-reduce of those partial statistics gives every worker the union's
//! ([`all_reduce_stats`]). The first worker (rank 0) then tracks the step on the union of the
//! workers' batches: the all-reduced mean gradient, the joined statistics, and — for
//! histograms and curvature, which need the quantities' own state — the other workers' sources
//! of the same node, handed over in process.

use std::sync::{Condvar, Mutex};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;
use cockpit_quantities::persample::ErrorChain;
use cockpit_quantities::persample::{
    GroupStats, PerSampleError, PerSampleSource, PerSampleStats, all_reduce_stats,
};
use cockpit_quantities::{Snapshot, StepInfo};

use super::group::{Ddp, Deposit, PATIENCE, WorkerStep};
use super::state::{NO_TRAIN_OUTPUT, State, scaled};
use super::union::Part;

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
    let WorkerStep {
        rank,
        step,
        pending,
        collective,
        k,
    } = start;
    let params = Snapshot::of_params(model);
    let device = params.device();
    let mean = scaled(model, grads, 1.0 / k as f64);
    let grads_snapshot = Snapshot::of_grads(model, &mean);
    let mut problems = Vec::new();

    // This worker's micro-batches joined (the one place: `union`), its own statistics, then
    // the all-reduce every worker takes part in.
    let parts = pending
        .into_iter()
        .map(|p| Part::of(p, &mut problems))
        .collect();
    let mut own = Part::join(parts, &device, &mut problems);
    let factors = own.per_sample_source(&device, &mut problems);
    let local = match &grads_snapshot {
        Ok(g) => own_stats(shared, step, &params, g, factors.as_deref()).map_err(|err| {
            format!(
                "step {step}: per-sample gradients unavailable: {}",
                ErrorChain(&err)
            )
        }),
        Err(err) => Err(format!("step {step} not tracked: {}", ErrorChain(err))),
    };
    let local = local.map_err(|problem| problems.push(problem)).ok();
    let joined = all_reduce_stats(
        local.as_ref(),
        own.losses.clone(),
        &device,
        collective.as_ref(),
    );

    // Hand this worker's part to rank 0 (its per-sample losses also travel in the
    // all-reduce), its sources merged once here, on its own device.
    own.per_sample = factors.map(|f| vec![f]);
    let deposit = Deposit { step, part: own };
    let mut state = State::lock(shared);
    for problem in problems {
        state.problem(problem);
    }
    // The next step's projections on this gradient: kept in the Cockpit's one cache, on this
    // worker's device.
    if let Ok(g) = &grads_snapshot {
        state.keep_gradient(step, g.clone());
    }
    let Some(group) = state.group() else {
        return;
    };
    group.deposit(rank, deposit);
    arrived.notify_all();
    if rank != 0 {
        return;
    }

    // Rank 0: wait for every worker's part, then track the union.
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let ready = state.group().is_some_and(|group| group.all_deposited(step));
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
    let deposits = state.group().map(Ddp::take_deposits).unwrap_or_default();
    let info = union_info(&mut state, deposits, joined, &device, lr, k);
    let iteration = state.iteration();
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
    factors: Option<&dyn PerSampleSource>,
) -> Result<PerSampleStats, PerSampleError> {
    let state = State::lock(shared);
    let previous = state.cockpit().previous_gradient(step, &params.device());
    let request = state
        .cockpit()
        .per_sample_request(step, grads, previous.as_ref());
    drop(state);
    match (factors, !request.is_empty()) {
        (factors, false) => Ok(PerSampleStats::new(factors.map_or(0, |f| f.batch_size()))),
        (Some(f), true) => f.reduce(params, request),
        (None, true) => Err(PerSampleError::MissingInfo(
            "per-sample gradients recorded on this worker",
        )),
    }
}

/// Counts the calling worker's step and takes what it needs; `None` when the step is not
/// tracked (or the thread is not a worker of the group).
fn start_step(shared: &Mutex<State>) -> Option<WorkerStep> {
    let mut state = State::lock(shared);
    let start = state.group()?.begin_step()?;
    if start.rank == 0 {
        state.begin_group_step(start.step);
    }
    state.cockpit().is_tracking(start.step).then_some(start)
}

/// The info of a DDP step on the union of the workers' batches (rank 0, with every
/// worker's deposit in rank order), joined with the all-reduced statistics in one place
/// ([`Part::join_reduced`]): burn applied `k` times the union's mean gradient.
fn union_info(
    state: &mut State,
    deposits: Vec<Deposit>,
    joined: Result<GroupStats, PerSampleError>,
    device: &Device,
    lr: f64,
    k: usize,
) -> Option<StepInfo> {
    let mut problems = Vec::new();
    let parts = deposits.into_iter().map(|d| d.part).collect();
    let union = Part::join_reduced(parts, joined, device, &mut problems);
    let info = union.mean_loss().map(|loss| {
        let info = StepInfo::new(loss).with_optimizer(state.union_optimizer(lr, k));
        union.into_info(info, device, &mut problems)
    });
    if info.is_none() {
        problems.push(NO_TRAIN_OUTPUT.into());
    }
    for problem in problems {
        state.problem(problem);
    }
    info
}
