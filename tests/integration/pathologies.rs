//! `diagnose` on the gallery of real runs (`examples/pathologies.rs`): each pathology is named
//! as the verdict, and the healthy run flags nothing. The runs are trained here, on burn's
//! CPU backend, with the same code as the example.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use burn_cockpit::diagnose::{Code, Diagnoser, Diagnosis};

#[path = "../../examples/common/gallery.rs"]
#[allow(dead_code)]
mod gallery;
use gallery::{Pathology, train};

const STEPS: usize = 160;

fn diagnose(pathology: Pathology) -> (Diagnosis, gallery::Run) {
    let device = burn_cockpit::backend::device_named("flex").unwrap();
    let run = train(pathology, STEPS, &device, |_| {}).unwrap();
    let diagnosis = Diagnoser::new().with_names(&run.names).run(&run.output);
    (diagnosis, run)
}

/// The verdict's finding: the first root cause, else the first root.
fn verdict(d: &Diagnosis) -> Option<Code> {
    d.findings
        .iter()
        .find(|f| f.code.is_cause())
        .or(d.findings.first())
        .map(|f| f.code)
}

#[test]
fn each_pathology_is_named_and_the_healthy_run_is_clean() {
    let expected = [
        (Pathology::LearningRateTooLarge, Code::StepTooLarge),
        (Pathology::LearningRateTooSmall, Code::StepTooSmall),
        (Pathology::DeadRelus, Code::FrozenLayer),
        (Pathology::DeepSigmoid, Code::GradientImbalance),
        (Pathology::UnscaledInputs, Code::MisscaledInputs),
        (Pathology::UnscaledInputsDeadLayer, Code::MisscaledInputs),
        (Pathology::BatchOfTwo, Code::SmallBatch),
        (Pathology::LargeInitialisation, Code::ExplodingStart),
    ];
    let (healthy, _) = diagnose(Pathology::Healthy);
    assert!(!healthy.is_flagged(), "healthy run: {}", healthy.report());
    for (pathology, code) in expected {
        let (d, run) = diagnose(pathology);
        assert_eq!(
            verdict(&d),
            Some(code),
            "{}: {}",
            pathology.name(),
            d.report()
        );
        // One story: the verdict is the only root cause.
        let causes = d.findings.iter().filter(|f| f.code.is_cause()).count();
        assert!(causes <= 1, "{}: {}", pathology.name(), d.report());
        let summary = d.summary.clone().unwrap();
        assert!(summary.contains("first sign at step"), "{summary}");
        assert!(!d.report().contains("parameter #"), "{}", d.report());
        // Told the loss's classes (chance level ln 4), the diagnosis names the same cause.
        let told = Diagnoser::new()
            .with_names(&run.names)
            .with_classes(gallery::CLASSES)
            .run(&run.output);
        assert_eq!(
            verdict(&told),
            Some(code),
            "{}: {}",
            pathology.name(),
            told.report()
        );
    }
}

/// A first layer that dies after a bad start: the input-scale evidence is read from the step
/// where it still had a gradient, and the death is named.
#[test]
fn misscaled_inputs_are_read_before_the_first_layer_dies() {
    let (d, run) = diagnose(Pathology::UnscaledInputsDeadLayer);
    let top = &d.findings[0];
    assert_eq!(top.code, Code::MisscaledInputs, "{}", d.report());
    assert!(top.evidence.contains("at step 0:"), "{}", top.evidence);
    assert!(
        top.evidence.contains("no gradient from step 1 on"),
        "{}",
        top.evidence
    );
    assert_eq!(
        top.parameters,
        vec![run.names[0].clone(), run.names[1].clone()]
    );
    // What the start looks like otherwise is explained by it, not a rival cause.
    assert!(
        !d.findings.iter().skip(1).any(|f| f.code.is_cause()),
        "{}",
        d.report()
    );
}

#[test]
fn a_blow_up_is_one_story_with_its_first_step_and_numbers() {
    let (d, run) = diagnose(Pathology::LearningRateTooLarge);
    let top = &d.findings[0];
    assert_eq!(top.code, Code::StepTooLarge);
    // The loss at step 0 is the initial one; the blow-up shows within the first steps.
    assert!(top.first_step <= 2, "{top:?}");
    assert!(top.evidence.contains("lr·λ_max"), "{}", top.evidence);
    assert!(top.evidence.contains("α > 1"), "{}", top.evidence);
    // The units that died afterwards are explained by it, with the model's names.
    let frozen = top
        .consequences
        .iter()
        .find(|f| f.code == Code::FrozenLayer)
        .expect("dead units after the blow-up");
    assert!(frozen.parameters.iter().all(|p| run.names.contains(p)));
    assert!(frozen.first_step > top.first_step);
}
