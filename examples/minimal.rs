//! The smallest complete use of burn-cockpit: a CNN built from the drop-in layers, an epoch
//! loop, one `cockpit.step` call per training step, the log and the dashboard at the end.
//! README.md shows this file verbatim (a test keeps the two equal).
use burn::module::Module;
use burn::nn::{LinearConfig, conv::Conv2dConfig};
use burn::optim::SgdConfig;
use burn::tensor::{Distribution, Int, Tensor, activation::relu};
use burn_cockpit::persample::{Conv2d, Linear}; // drop-ins for burn::nn's Conv2d and Linear
use burn_cockpit::prelude::*;

#[derive(Module, Debug)]
struct Cnn {
    conv: Conv2d,
    fc: Linear,
}

impl Cnn {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        self.fc
            .forward(relu(self.conv.forward(images)).flatten(1, 3))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_, device) = burn_cockpit::backend::device()?; // flex; --features wgpu for a GPU
    let device = device.autodiff();
    let mut model = Cnn {
        conv: Conv2d::new(&Conv2dConfig::new([1, 4], [3, 3]), &device),
        fc: Linear::new(&LinearConfig::new(4 * 6 * 6, 2), &device),
    };
    let (sgd, lr) = (SgdConfig::new(), 0.1);
    let mut optimizer = sgd.init();
    let mut cockpit = Cockpit::from_configuration(Configuration::Economy, &Schedule::every_step())?
        .with_optimizer(OptimizerInfo::from_sgd(&sgd, lr));
    for _epoch in 0..8 {
        for _batch in 0..8 {
            // A toy task: is the image's top-left corner brighter than average?
            let images =
                Tensor::<4>::random([16, 1, 8, 8], Distribution::Normal(0.0, 1.0), &device);
            let corner = images.clone().slice([0..16, 0..1, 0..4, 0..4]);
            let labels: Tensor<1, Int> = corner
                .flatten::<2>(1, 3)
                .sum_dim(1)
                .greater_elem(0.0)
                .int()
                .reshape([16]);
            let forward = move |model: &Cnn| model.forward(images.clone());
            let step = cockpit.step(&model, forward, OutputLoss::classes(labels, 2))?;
            model = optimizer.step(lr, model, step.grads);
        }
    }
    std::fs::create_dir_all("cockpit-logs")?;
    cockpit.write("cockpit-logs/minimal.json")?;
    let drawn = burn_cockpit::plot::save(
        cockpit.output(),
        "cockpit-logs/minimal.png",
        &PlotOptions::default(),
    )?;
    // Economy leaves the curvature and the learning rate blank; this says what fills them.
    if let Some(advice) = drawn.blank_advice() {
        println!("{advice}");
    }
    Ok(())
}
