//! Instrumented drop-ins for burn-nn's recurrent layers and gated units: `GateController`,
//! `Lstm`, `Gru` and `SwiGlu`, rebuilt from the per-sample [`Linear`].
//!
//! A recurrent layer applies each gate's two Linears once per time step. Every application
//! taps the Linear again, and the recorder joins the taps of one weight over the steps:
//! `g_n = Σ_t a_{n,t} e_{n,t}ᵀ`, the per-sample gradient of the unrolled recurrence (the
//! output gradients `e_{n,t}` already carry what later steps backpropagate).
//!
//! One file per layer.

mod gate_controller;
mod gru;
mod lstm;
mod swiglu;

pub use gate_controller::GateController;
pub use gru::Gru;
pub use lstm::Lstm;
pub use swiglu::SwiGlu;

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

        let swiglu = SwiGluConfig::new(3, 2).init(&device);
        let expected = params(&swiglu);
        let ours = SwiGlu::new(&SwiGluConfig::new(3, 2), &device).load_record(saved(swiglu));
        assert_eq!(params(&ours), expected);
    }
}
