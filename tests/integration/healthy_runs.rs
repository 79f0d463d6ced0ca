//! `diagnose` on the gallery of healthy runs (`examples/healthy.rs`): nothing is flagged,
//! whether the diagnosis knows the loss's classes or not. The runs are trained here, on burn's
//! CPU backend, with the same code as the example; one test per run, so they train side by
//! side.

use burn_cockpit::diagnose::Diagnoser;

#[path = "../../examples/common/healthy.rs"]
#[allow(dead_code)]
mod healthy;
use healthy::{Healthy, train};

/// Optimizer steps per run (the example's).
const STEPS: usize = 200;

fn assert_clean(run: Healthy) {
    let device = burn_cockpit::backend::device_named("flex").unwrap();
    let trained = train(run, STEPS, &device, |_| {}).unwrap();
    let blind = Diagnoser::new()
        .with_names(&trained.names)
        .run(&trained.output);
    assert!(!blind.is_flagged(), "{}: {}", run.name(), blind.report());
    if let Some(classes) = run.classes() {
        let told = Diagnoser::new()
            .with_names(&trained.names)
            .with_classes(classes)
            .run(&trained.output);
        assert!(
            !told.is_flagged(),
            "{} ({classes} classes): {}",
            run.name(),
            told.report()
        );
    }
    // The run did learn: the gallery is of healthy runs, not of runs too short to judge.
    let loss: Vec<f64> = trained
        .output
        .series("Loss")
        .iter()
        .filter_map(|(_, v)| v.as_f64())
        .collect();
    assert_eq!(loss.len(), STEPS, "{}", run.name());
    let (head, tail) = (&loss[..20], &loss[STEPS - 20..]);
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    assert!(mean(tail) < 0.8 * mean(head), "{}: {loss:?}", run.name());
}

macro_rules! healthy_tests {
    ($($test:ident => $run:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                assert_clean(Healthy::$run);
            }
        )*

        /// Every run of the gallery has its test above.
        #[test]
        fn every_run_is_tested() {
            let tested = [$(Healthy::$run),*];
            assert!(Healthy::ALL.iter().all(|run| tested.contains(run)));
            assert!(tested.len() >= 12);
        }
    };
}

healthy_tests! {
    gelu_mlp_under_adam_is_clean => GeluAdam,
    fast_sgd_is_clean => GeluSgdFast,
    ten_classes_are_clean => TenClasses,
    a_hundred_classes_are_clean => HundredClasses,
    slow_progress_is_clean => TanhSlow,
    memorising_is_clean => Memorise,
    a_cnn_is_clean => Cnn,
    a_cnn_under_adam_is_clean => CnnAdam,
    a_language_model_is_clean => LanguageModel,
    a_regression_is_clean => Regression,
    a_large_batch_with_momentum_is_clean => LargeBatchMomentum,
    noisy_small_batch_adam_is_clean => SoftplusAdamNoisy,
}
