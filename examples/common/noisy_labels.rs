//! A classification run with labels flipped at random, tracked by the Examples quantity, and
//! how well the per-example record finds the flipped examples: shared by
//! `examples/mislabeled.rs` (the benchmark) and the integration tests (a small run).

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::optim::{AdamConfig, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_cockpit::curvature::OutputLoss;
use burn_cockpit::examples::{ExampleStats, MapBorders, Region, auroc, precision_at, score};
use burn_cockpit::persample::Linear;
use burn_cockpit::quantity::QuantityKind;
use burn_cockpit::{Cockpit, Schedule};

/// The problem and the run.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Training examples.
    pub examples: usize,
    /// Input features.
    pub features: usize,
    /// Classes.
    pub classes: usize,
    /// Hidden units (two hidden layers).
    pub hidden: usize,
    /// The share of training labels flipped to another class.
    pub noise: f64,
    /// Epochs.
    pub epochs: usize,
    /// Batch size.
    pub batch: usize,
    /// The learning rate.
    pub lr: f64,
    /// Adam (which memorises the flipped labels within the epochs) instead of plain SGD.
    pub adam: bool,
    /// The seed of the data, the flips and the shuffles.
    pub seed: u64,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            examples: 4000,
            features: 32,
            classes: 10,
            hidden: 256,
            noise: 0.2,
            epochs: 40,
            batch: 128,
            lr: 0.1,
            adam: false,
            seed: 0,
        }
    }
}

/// The data set: Gaussian classes around random means, and which labels were flipped.
pub struct Data {
    /// `[examples × features]`, row-major.
    pub x: Vec<f32>,
    /// The training labels (flipped ones included).
    pub y: Vec<i64>,
    /// Whether example `i`'s label was flipped.
    pub flipped: Vec<bool>,
}

/// splitmix64: a small seeded generator (the run needs reproducible draws, not quality).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }

    /// A standard normal draw (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = self.uniform().max(1e-300);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.uniform()).cos()
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Draws the data of `setup`: class means `0.6·N(0, I)`, inputs mean + `N(0, I)`, and
/// `round(noise · examples)` labels moved to another class chosen uniformly.
pub fn data(setup: &Setup) -> Data {
    let mut rng = Rng(setup.seed);
    let means: Vec<Vec<f64>> = (0..setup.classes)
        .map(|_| (0..setup.features).map(|_| 0.6 * rng.normal()).collect())
        .collect();
    let mut x = Vec::with_capacity(setup.examples * setup.features);
    let mut y = Vec::with_capacity(setup.examples);
    for _ in 0..setup.examples {
        let c = rng.below(setup.classes);
        x.extend(means[c].iter().map(|m| (m + rng.normal()) as f32));
        y.push(c as i64);
    }
    let mut order: Vec<usize> = (0..setup.examples).collect();
    rng.shuffle(&mut order);
    let count = (setup.noise * setup.examples as f64).round() as usize;
    let mut flipped = vec![false; setup.examples];
    for &i in &order[..count] {
        let shift = 1 + rng.below(setup.classes - 1);
        y[i] = (y[i] + shift as i64) % setup.classes as i64;
        flipped[i] = true;
    }
    Data { x, y, flipped }
}

/// An MLP from the drop-ins: features → hidden → hidden → classes, ReLU.
#[derive(Module, Debug)]
pub struct Mlp {
    l1: Linear,
    l2: Linear,
    l3: Linear,
}

impl Mlp {
    /// A freshly initialised network for `setup`.
    pub fn new(setup: &Setup, device: &Device) -> Self {
        Self {
            l1: Linear::new(&LinearConfig::new(setup.features, setup.hidden), device),
            l2: Linear::new(&LinearConfig::new(setup.hidden, setup.hidden), device),
            l3: Linear::new(&LinearConfig::new(setup.hidden, setup.classes), device),
        }
    }

    /// The logits `[B, classes]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l3
            .forward(relu(self.l2.forward(relu(self.l1.forward(x)))))
    }
}

/// How well a score finds the flipped examples.
#[derive(Debug, Clone, Copy)]
pub struct Detection {
    /// Area under the ROC curve.
    pub auroc: f64,
    /// The share of flipped examples among the top `flipped` by score.
    pub precision: f64,
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The examples flipped.
    pub flipped: usize,
    /// The record's ranking score ([`score`]: the mean loss over visits).
    pub ranking: Detection,
    /// Minus the mean margin (the area under the margin, Pleiss et al.).
    pub margin: Detection,
    /// Baseline: the loss at the last visit alone.
    pub last_loss: Detection,
    /// Baseline: forgetting events (Toneva et al.).
    pub forgetting: Detection,
    /// The share of flipped examples the network classified as labelled at the end
    /// (memorised).
    pub memorised: f64,
    /// The share of clean examples classified as labelled at the end.
    pub clean_fit: f64,
    /// The shares of flipped and of clean examples in the data map's hard-to-learn region
    /// (steadily low confidence in their label).
    pub hard_to_learn: (f64, f64),
    /// Mean device→host reads and values per tracked step.
    pub reads_per_step: (f64, f64),
}

fn detection(
    rows: &[ExampleStats],
    flipped: &[bool],
    f: impl Fn(&ExampleStats) -> f64,
) -> Detection {
    let scores: Vec<f64> = rows.iter().map(f).collect();
    let positive: Vec<bool> = rows.iter().map(|r| flipped[r.id as usize]).collect();
    let count = positive.iter().filter(|p| **p).count();
    Detection {
        auroc: auroc(&scores, &positive),
        precision: precision_at(&scores, &positive, count),
    }
}

/// Trains on `data` with Cockpit tracking Loss and Examples every step (sample ids: dataset
/// indices; margins from the cross-entropy loss), calling `progress(epoch)` after each epoch.
/// Returns the Cockpit (its log and record) and how the record finds the flipped labels.
///
/// # Errors
///
/// The Cockpit's errors.
pub fn run(
    setup: &Setup,
    data: &Data,
    device: &Device,
    mut progress: impl FnMut(usize),
) -> Result<(Cockpit, Outcome), burn_cockpit::CockpitError> {
    let mut cockpit = Cockpit::from_kinds(
        [QuantityKind::Loss, QuantityKind::Examples],
        &Schedule::every_step(),
    )?
    .with_console(false);
    let mut model = Mlp::new(setup, device);
    let mut optimizer = if setup.adam {
        AdamConfig::new().init()
    } else {
        SgdConfig::new().init()
    };
    let mut rng = Rng(setup.seed ^ 0xD1B5_4A32_D192_ED03);
    let mut order: Vec<usize> = (0..setup.examples).collect();
    let (mut reads, mut values, mut steps) = (0u64, 0u64, 0u64);
    for epoch in 0..setup.epochs {
        rng.shuffle(&mut order);
        for chunk in order.chunks(setup.batch) {
            let b = chunk.len();
            let x: Vec<f32> = chunk
                .iter()
                .flat_map(|&i| data.x[i * setup.features..(i + 1) * setup.features].to_vec())
                .collect();
            let y: Vec<i64> = chunk.iter().map(|&i| data.y[i]).collect();
            let x = Tensor::<2>::from_data(TensorData::new(x, [b, setup.features]), device);
            let y = Tensor::<1, Int>::from_data(TensorData::new(y, [b]), device);
            let ids: Vec<u64> = chunk.iter().map(|&i| i as u64).collect();
            let stepped = cockpit.step_with_ids(
                &model,
                move |m: &Mlp| m.forward(x.clone()),
                OutputLoss::classes(y, setup.classes),
                ids,
            )?;
            let count = cockpit.reads();
            (reads, values, steps) = (reads + count.reads, values + count.values, steps + 1);
            model = optimizer.step(setup.lr, model, stepped.grads);
        }
        progress(epoch);
    }
    let rows: Vec<ExampleStats> = cockpit
        .examples()
        .map(|r| r.rows().into_iter().cloned().collect())
        .unwrap_or_default();
    let flipped = &data.flipped;
    let share = |want: bool| {
        let chosen: Vec<&ExampleStats> = rows
            .iter()
            .filter(|r| flipped[r.id as usize] == want)
            .collect();
        chosen.iter().filter(|r| r.learned_now).count() as f64 / chosen.len().max(1) as f64
    };
    let borders = MapBorders::of(&rows);
    let hard = |want: bool| {
        let chosen: Vec<&ExampleStats> = rows
            .iter()
            .filter(|r| flipped[r.id as usize] == want)
            .collect();
        chosen
            .iter()
            .filter(|r| borders.and_then(|b| b.region(r)) == Some(Region::HardToLearn))
            .count() as f64
            / chosen.len().max(1) as f64
    };
    let outcome = Outcome {
        flipped: flipped.iter().filter(|f| **f).count(),
        ranking: detection(&rows, flipped, score),
        last_loss: detection(&rows, flipped, |r| r.loss_last),
        forgetting: detection(&rows, flipped, |r| r.forgetting as f64),
        margin: detection(&rows, flipped, |r| -r.margin_mean),
        memorised: share(true),
        clean_fit: share(false),
        hard_to_learn: (hard(true), hard(false)),
        reads_per_step: (
            reads as f64 / steps.max(1) as f64,
            values as f64 / steps.max(1) as f64,
        ),
    };
    Ok((cockpit, outcome))
}
