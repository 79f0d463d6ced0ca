//! Instrumented drop-ins for burn-nn's recurrent layers and gated units: `GateController`,
//! `Rnn`, `Lstm`, `Gru`, their bidirectional `BiRnn`, `BiLstm`, `BiGru`, and `SwiGlu`, rebuilt
//! from the per-sample [`Linear`].
//!
//! A recurrent layer applies each gate's two Linears once per time step. Every application
//! taps the Linear again, and the recorder joins the taps of one weight over the steps:
//! `g_n = Σ_t a_{n,t} e_{n,t}ᵀ`, the per-sample gradient of the unrolled recurrence (the
//! output gradients `e_{n,t}` already carry what later steps backpropagate).
//!
//! One file per layer.

mod basic;
mod bi_gru;
mod bi_lstm;
mod bi_rnn;
mod gate_controller;
mod gru;
mod lstm;
mod swiglu;

pub use basic::Rnn;
pub use bi_gru::BiGru;
pub use bi_lstm::BiLstm;
pub use bi_rnn::BiRnn;
pub use gate_controller::GateController;
pub use gru::Gru;
pub use lstm::Lstm;
pub use swiglu::SwiGlu;

use burn::tensor::Tensor;

/// Runs a recurrence over batch-first `input` `[B, T, d]`, from the last step to the first
/// when `reverse`: `step(x_t, state)` gives the next state, `hidden(&state)` its output
/// `[B, d_hidden]`. Returns the outputs `[B, T, d_hidden]` in the input's order and the final
/// state. Marks the recording curved (a recurrence multiplies its weights over time).
fn unroll<S>(
    input: &Tensor<3>,
    mut state: S,
    reverse: bool,
    mut step: impl FnMut(Tensor<2>, S) -> S,
    hidden: impl Fn(&S) -> Tensor<2>,
) -> (Tensor<3>, S) {
    crate::recorder::mark_curved("recurrent gates");
    let [batch, length, _] = input.dims();
    let order: Vec<usize> = if reverse {
        (0..length).rev().collect()
    } else {
        (0..length).collect()
    };
    let mut outputs: Vec<Option<Tensor<2>>> = vec![None; length];
    for t in order {
        let x = input
            .clone()
            .slice([0..batch, t..t + 1])
            .squeeze_dim::<2>(1);
        state = step(x, state);
        outputs[t] = Some(hidden(&state));
    }
    (
        Tensor::stack(outputs.into_iter().flatten().collect(), 1),
        state,
    )
}

/// One direction's state `[B, d]` of a bidirectional state `[2, B, d]` (0 forward, 1
/// reverse).
fn direction_state(state: &Tensor<3>, direction: usize) -> Tensor<2> {
    let [_, batch, d] = state.dims();
    state
        .clone()
        .slice([direction..direction + 1, 0..batch, 0..d])
        .squeeze_dim(0)
}

/// The two directions' hidden states `[B, T, d]` side by side, `[B, T, 2d]`, in the caller's
/// layout (`[T, B, 2d]` unless batch-first).
fn join_directions(ahead: Tensor<3>, back: Tensor<3>, batch_first: bool) -> Tensor<3> {
    let output = Tensor::cat(vec![ahead, back], 2);
    if batch_first {
        output
    } else {
        output.swap_dims(0, 1)
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::{GruConfig, LstmConfig, LstmState, SwiGluConfig};
    use burn::tensor::{Device, Distribution, Tensor};

    use super::*;
    use crate::testing::{close, params, saved};

    /// The drop-ins compute what burn's layers compute, in every configuration the config
    /// offers, outside a recording and inside one.
    #[test]
    fn forward_passes_equal_burns() {
        let device = Device::default().autodiff();
        let x = Tensor::<3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        for recording in [false, true] {
            let recorder = recording.then(crate::Recorder::start);
            for (batch_first, reverse, input_forget, clip) in [
                (true, false, false, None),
                (false, true, false, Some(0.3)),
                (true, true, true, None),
            ] {
                let config = LstmConfig::new(5, 6, true)
                    .with_batch_first(batch_first)
                    .with_reverse(reverse)
                    .with_input_forget(input_forget)
                    .with_clip(clip);
                let burn_lstm = config.init(&device);
                let ours = Lstm::from(burn_lstm.clone());
                let state = LstmState::new(
                    Tensor::random([4, 6], Distribution::Normal(0.0, 1.0), &device),
                    Tensor::random([4, 6], Distribution::Normal(0.0, 1.0), &device),
                );
                let input = if batch_first {
                    x.clone()
                } else {
                    x.clone().swap_dims(0, 1)
                };
                let state = if batch_first {
                    None
                } else {
                    // [T, B, d] input: the state has the batch of the swapped input.
                    Some(LstmState::new(
                        state.cell.slice(0..3),
                        state.hidden.slice(0..3),
                    ))
                };
                let what = format!("Lstm {batch_first} {reverse} {input_forget} {clip:?}");
                let (a, sa) = ours.forward(input.clone(), state.clone());
                let (b, sb) = burn_lstm.forward(input, state);
                close(a, b, &what);
                close(sa.cell, sb.cell, &what);
                close(sa.hidden, sb.hidden, &what);
            }
            for reset_after in [true, false] {
                let burn_gru = GruConfig::new(5, 6, true)
                    .with_reset_after(reset_after)
                    .with_clip(Some(0.9))
                    .init(&device);
                close(
                    Gru::from(burn_gru.clone()).forward(x.clone(), None),
                    burn_gru.forward(x.clone(), None),
                    &format!("Gru reset_after {reset_after}"),
                );
            }
            let burn_swiglu = SwiGluConfig::new(5, 7).with_bias(true).init(&device);
            close(
                SwiGlu::from(burn_swiglu.clone()).forward(x.clone()),
                burn_swiglu.forward(x.clone()),
                "SwiGlu",
            );
            drop(recorder);
        }
    }

    /// Rnn and the bidirectional layers compute what burn's compute, batch-first or not,
    /// with and without an initial state, outside a recording and inside one; `as_burn` gives
    /// burn's layer back.
    #[test]
    fn rnn_and_bidirectional_forward_passes_equal_burns() {
        use burn::nn::activation::ActivationConfig;
        use burn::nn::{BiGruConfig, BiLstmConfig, BiRnnConfig, RnnConfig, RnnState};
        let device = Device::default().autodiff();
        let normal =
            |shape: [usize; 3]| Tensor::<3>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        for recording in [false, true] {
            let recorder = recording.then(crate::Recorder::start);
            for (batch_first, reverse, clip, relu) in [
                (true, false, None, false),
                (false, true, Some(0.4), false),
                (true, true, None, true),
            ] {
                // [B=3, T=4] batch-first, [T=4, B=3] otherwise.
                let input = if batch_first {
                    normal([3, 4, 5])
                } else {
                    normal([4, 3, 5])
                };
                let what = format!("{batch_first} {reverse} {clip:?} {relu}");
                let activation = if relu {
                    ActivationConfig::Relu
                } else {
                    ActivationConfig::Tanh
                };
                let burn_rnn = RnnConfig::new(5, 6, true)
                    .with_batch_first(batch_first)
                    .with_reverse(reverse)
                    .with_clip(clip)
                    .with_hidden_activation(activation.clone())
                    .init(&device);
                let ours = Rnn::from(burn_rnn.clone());
                let h0 = Tensor::random([3, 6], Distribution::Normal(0.0, 1.0), &device);
                let (a, sa) = ours.forward(input.clone(), Some(RnnState::new(h0.clone())));
                let (b, sb) = burn_rnn.forward(input.clone(), Some(RnnState::new(h0)));
                close(a, b, &format!("Rnn {what}"));
                close(sa.hidden, sb.hidden, &format!("Rnn state {what}"));
                let (a, _) = ours.as_burn().forward(input.clone(), None);
                close(
                    a,
                    burn_rnn.forward(input.clone(), None).0,
                    &format!("Rnn as_burn {what}"),
                );

                let state3 =
                    || Tensor::<3>::random([2, 3, 6], Distribution::Normal(0.0, 1.0), &device);
                let burn_birnn = BiRnnConfig::new(5, 6, true)
                    .with_batch_first(batch_first)
                    .with_clip(clip)
                    .with_hidden_activation(activation)
                    .init(&device);
                let ours = BiRnn::from(burn_birnn.clone());
                let s0 = state3();
                let (a, sa) = ours.forward(input.clone(), Some(RnnState::new(s0.clone())));
                let (b, sb) = burn_birnn.forward(input.clone(), Some(RnnState::new(s0)));
                close(a, b, &format!("BiRnn {what}"));
                close(sa.hidden, sb.hidden, &format!("BiRnn state {what}"));

                let burn_bilstm = BiLstmConfig::new(5, 6, true)
                    .with_batch_first(batch_first)
                    .with_clip(clip)
                    .with_input_forget(relu)
                    .init(&device);
                let ours = BiLstm::from(burn_bilstm.clone());
                let (c0, h0) = (state3(), state3());
                let (a, sa) =
                    ours.forward(input.clone(), Some(LstmState::new(c0.clone(), h0.clone())));
                let (b, sb) = burn_bilstm.forward(input.clone(), Some(LstmState::new(c0, h0)));
                close(a, b, &format!("BiLstm {what}"));
                close(sa.cell, sb.cell, &format!("BiLstm cell {what}"));
                close(sa.hidden, sb.hidden, &format!("BiLstm hidden {what}"));
                let (a, _) = ours.as_burn().forward(input.clone(), None);
                close(
                    a,
                    burn_bilstm.forward(input.clone(), None).0,
                    &format!("BiLstm as_burn {what}"),
                );

                let burn_bigru = BiGruConfig::new(5, 6, true)
                    .with_batch_first(batch_first)
                    .with_clip(clip)
                    .with_reset_after(!relu)
                    .init(&device);
                let ours = BiGru::from(burn_bigru.clone());
                let s0 = state3();
                let (a, sa) = ours.forward(input.clone(), Some(s0.clone()));
                let (b, sb) = burn_bigru.forward(input.clone(), Some(s0));
                close(a, b, &format!("BiGru {what}"));
                close(sa, sb, &format!("BiGru state {what}"));
                let (a, _) = ours.as_burn().forward(input.clone(), None);
                close(
                    a,
                    burn_bigru.forward(input.clone(), None).0,
                    &format!("BiGru as_burn {what}"),
                );
            }
            drop(recorder);
        }
    }

    /// Records saved from burn's layers load into the drop-ins (same dotted names and values)
    /// and back.
    #[test]
    fn burn_records_load_into_the_drop_ins_and_back() {
        let device = Device::default();
        let lstm = LstmConfig::new(3, 4, true).init(&device);
        let expected = params(&lstm);
        let ours = Lstm::new(&LstmConfig::new(3, 4, true), &device).load_record(saved(lstm));
        assert_eq!(params(&ours), expected);
        let back = LstmConfig::new(3, 4, true)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(params(&back), expected);

        let gru = GruConfig::new(3, 4, false).init(&device);
        let expected = params(&gru);
        let ours = Gru::new(&GruConfig::new(3, 4, false), &device).load_record(saved(gru));
        assert_eq!(params(&ours), expected);
        let back = GruConfig::new(3, 4, false)
            .init(&device)
            .load_record(saved(ours));
        assert_eq!(params(&back), expected);

        let bilstm = burn::nn::BiLstmConfig::new(3, 4, true).init(&device);
        let expected = params(&bilstm);
        let ours = BiLstm::new(&burn::nn::BiLstmConfig::new(3, 4, true), &device)
            .load_record(saved(bilstm));
        assert_eq!(params(&ours), expected);
        let bigru = burn::nn::BiGruConfig::new(3, 4, false).init(&device);
        let expected = params(&bigru);
        let ours =
            BiGru::new(&burn::nn::BiGruConfig::new(3, 4, false), &device).load_record(saved(bigru));
        assert_eq!(params(&ours), expected);
        let birnn = burn::nn::BiRnnConfig::new(3, 4, true).init(&device);
        let expected = params(&birnn);
        let ours =
            BiRnn::new(&burn::nn::BiRnnConfig::new(3, 4, true), &device).load_record(saved(birnn));
        assert_eq!(params(&ours), expected);

        let swiglu = SwiGluConfig::new(3, 2).init(&device);
        let expected = params(&swiglu);
        let ours = SwiGlu::new(&SwiGluConfig::new(3, 2), &device).load_record(saved(swiglu));
        assert_eq!(params(&ours), expected);
    }
}
