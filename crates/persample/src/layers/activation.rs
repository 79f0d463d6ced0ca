//! Drop-ins for burn's elementwise activations, and their function form: the same forward
//! pass, and while a [`Recorder`](crate::Recorder) taps activations
//! ([`Recorder::start_with_activations`](crate::Recorder::start_with_activations)), the input
//! and the output gradient of every curved one, so that the Hessian's part from `σ''` is known
//! unit by unit ([`Recording::activations`](crate::Recording::activations)).

use burn::module::Module;
use burn::tensor::Tensor;
use burn::tensor::activation;

use crate::recorder::tap_activation;

/// An elementwise activation `a = σ(z)` with its second derivative `σ''(z)` in closed form.
///
/// ReLU and leaky ReLU are piecewise linear (`σ'' = 0` away from the kink, as autodiff
/// differentiates them): they record nothing. The others are curved: a recording keeps
/// `z` and `∂L/∂a`, whose product with `σ''(z)` is the per-unit residual of the Hessian
/// (`CURVATURE_MATH` §4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Elementwise {
    /// `max(0, z)`.
    Relu,
    /// `max(0, z) + slope·min(0, z)`.
    LeakyRelu {
        /// The negative slope.
        slope: f64,
    },
    /// `1/(1 + e^{−z})`; `σ'' = σ(1 − σ)(1 − 2σ)`.
    Sigmoid,
    /// `tanh z`; `σ'' = −2 tanh z (1 − tanh² z)`.
    Tanh,
    /// `z Φ(z)`; `σ'' = φ(z)(2 − z²)`.
    Gelu,
    /// `z/2 (1 + tanh u)`, `u = √(2/π)(z + 0.044715 z³)` (burn's `gelu_approximate`);
    /// `σ'' = (1 − tanh² u)(u' + z/2 (u'' − 2 tanh u · u'²))`.
    GeluApproximate,
    /// `z σ(z)`; `σ'' = σ(1 − σ)(2 + z(1 − 2σ))`.
    Silu,
    /// `(1/β) log(1 + e^{βz})`, and `z` where `βz > threshold` (burn's
    /// `softplus_with_threshold`); `σ'' = β s(1 − s)`, `s = σ(βz)`, and `0` beyond the
    /// threshold.
    Softplus {
        /// `β`.
        beta: f64,
        /// The value of `βz` above which the function is `z`.
        threshold: f64,
    },
    /// `z` for `z > 0`, `α(e^z − 1)` otherwise; `σ'' = α e^z` for `z ≤ 0`.
    Elu {
        /// `α`.
        alpha: f64,
    },
    /// `z/(1 + |z|)`; `σ'' = −2 sign(z)/(1 + |z|)³`.
    Softsign,
}

impl Elementwise {
    /// `σ(z)`, as burn computes it.
    pub fn apply<const D: usize>(self, z: Tensor<D>) -> Tensor<D> {
        match self {
            Self::Relu => activation::relu(z),
            Self::LeakyRelu { slope } => activation::leaky_relu(z, slope),
            Self::Sigmoid => activation::sigmoid(z),
            Self::Tanh => activation::tanh(z),
            Self::Gelu => activation::gelu(z),
            Self::GeluApproximate => activation::gelu_approximate(z),
            Self::Silu => activation::silu(z),
            Self::Softplus { beta, threshold } => {
                activation::softplus_with_threshold(z, beta, threshold)
            }
            Self::Elu { alpha } => activation::elu(z, alpha),
            Self::Softsign => activation::softsign(z),
        }
    }

    /// The function of burn's activation wrapper (`burn::nn::activation::Activation`), where
    /// it has one here; `None` for the identity and for what is not elementwise-known here
    /// (PRelu, SwiGlu, SELU, CELU, the hard and shrink functions, …).
    pub fn of_burn(activation: &burn::nn::activation::Activation) -> Option<Self> {
        use burn::nn::activation::Activation as Burn;
        Some(match activation {
            Burn::Relu(_) => Self::Relu,
            Burn::LeakyRelu(layer) => Self::LeakyRelu {
                slope: layer.negative_slope,
            },
            Burn::Sigmoid(_) => Self::Sigmoid,
            Burn::Tanh(_) => Self::Tanh,
            Burn::Gelu(layer) if layer.approximate => Self::GeluApproximate,
            Burn::Gelu(_) => Self::Gelu,
            Burn::Softplus(layer) => Self::Softplus {
                beta: layer.beta,
                threshold: layer.threshold,
            },
            Burn::Elu(layer) => Self::Elu { alpha: layer.alpha },
            Burn::Softsign(_) => Self::Softsign,
            _ => return None,
        })
    }

    /// Whether `σ'' = 0` wherever autodiff differentiates (ReLU, leaky ReLU).
    pub fn is_piecewise_linear(self) -> bool {
        matches!(self, Self::Relu | Self::LeakyRelu { .. })
    }

    /// `σ''(z)`, elementwise (zero for the piecewise-linear functions).
    pub fn second_derivative<const D: usize>(self, z: Tensor<D>) -> Tensor<D> {
        match self {
            Self::Relu | Self::LeakyRelu { .. } => z.zeros_like(),
            Self::Sigmoid => {
                let s = activation::sigmoid(z);
                let d1 = s.clone() * s.clone().neg().add_scalar(1.0);
                d1 * s.mul_scalar(-2.0).add_scalar(1.0)
            }
            Self::Tanh => {
                let t = z.tanh();
                let d1 = t.clone().square().neg().add_scalar(1.0);
                t.mul_scalar(-2.0) * d1
            }
            Self::Gelu => {
                let density = z
                    .clone()
                    .square()
                    .mul_scalar(-0.5)
                    .exp()
                    .mul_scalar((2.0 * std::f64::consts::PI).sqrt().recip());
                density * z.square().neg().add_scalar(2.0)
            }
            Self::GeluApproximate => {
                const K: f64 = 0.044715;
                let c = (2.0 / std::f64::consts::PI).sqrt();
                let square = z.clone().square();
                let u = (z.clone() + z.clone() * square.clone().mul_scalar(K)).mul_scalar(c);
                let t = u.tanh();
                let du = square.mul_scalar(3.0 * K).add_scalar(1.0).mul_scalar(c);
                let ddu = z.clone().mul_scalar(6.0 * K * c);
                let sech2 = t.clone().square().neg().add_scalar(1.0);
                let curl = ddu - t.mul_scalar(2.0) * du.clone().square();
                sech2 * (du + z.mul_scalar(0.5) * curl)
            }
            Self::Silu => {
                let s = activation::sigmoid(z.clone());
                let d1 = s.clone() * s.clone().neg().add_scalar(1.0);
                d1 * (z * s.mul_scalar(-2.0).add_scalar(1.0)).add_scalar(2.0)
            }
            Self::Softplus { beta, threshold } => {
                let scaled = z.mul_scalar(beta);
                let linear = scaled.clone().greater_elem(threshold);
                let s = activation::sigmoid(scaled);
                (s.clone() * s.neg().add_scalar(1.0))
                    .mul_scalar(beta)
                    .mask_fill(linear, 0.0)
            }
            Self::Elu { alpha } => {
                let positive = z.clone().greater_elem(0.0);
                z.exp().mul_scalar(alpha).mask_fill(positive, 0.0)
            }
            Self::Softsign => {
                let denominator = z.clone().abs().add_scalar(1.0);
                let cube = denominator.clone() * denominator.clone() * denominator;
                z.sign().mul_scalar(-2.0) / cube
            }
        }
    }

    /// A name for notes and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Relu => "relu",
            Self::LeakyRelu { .. } => "leaky relu",
            Self::Sigmoid => "sigmoid",
            Self::Tanh => "tanh",
            Self::Gelu | Self::GeluApproximate => "gelu",
            Self::Silu => "silu",
            Self::Softplus { .. } => "softplus",
            Self::Elu { .. } => "elu",
            Self::Softsign => "softsign",
        }
    }
}

/// The function form of the activation drop-ins: `function(input)`, recorded like them (the
/// input and the output gradient of a curved function, while a recorder taps activations).
/// Call it where a model calls `burn::tensor::activation::sigmoid` and the like; the first
/// dimension is the batch.
///
/// # Cost
///
/// Without a recorder tapping activations: one thread-local check. With one, for a curved
/// function: the input is kept and a zero leaf is added to the output.
pub fn elementwise<const D: usize>(function: Elementwise, input: Tensor<D>) -> Tensor<D> {
    let output = function.apply(input.clone());
    if function.is_piecewise_linear() {
        return output;
    }
    tap_activation(function, input, output)
}

macro_rules! unit_drop_in {
    ($(#[$doc:meta])* $name:ident, $burn:ty, $function:expr) => {
        $(#[$doc])*
        #[derive(Module, Debug, Default)]
        pub struct $name;

        impl From<$burn> for $name {
            fn from(_: $burn) -> Self {
                Self
            }
        }

        impl $name {
            /// The activation, as burn's `new()` makes it.
            pub fn new() -> Self {
                Self
            }

            /// The forward pass, `[B, ...] → [B, ...]`, recorded.
            pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
                elementwise($function, input)
            }
        }
    };
}

unit_drop_in!(
    /// `burn::nn::Relu` (piecewise linear: records nothing).
    Relu,
    burn::nn::Relu,
    Elementwise::Relu
);
unit_drop_in!(
    /// `burn::nn::Sigmoid`, recorded ([`Elementwise::Sigmoid`]).
    Sigmoid,
    burn::nn::Sigmoid,
    Elementwise::Sigmoid
);
unit_drop_in!(
    /// `burn::nn::Tanh`, recorded ([`Elementwise::Tanh`]).
    Tanh,
    burn::nn::Tanh,
    Elementwise::Tanh
);
unit_drop_in!(
    /// `burn::nn::SiLU`, recorded ([`Elementwise::Silu`]).
    SiLU,
    burn::nn::activation::SiLU,
    Elementwise::Silu
);
unit_drop_in!(
    /// `burn::nn::Softsign`, recorded ([`Elementwise::Softsign`]).
    Softsign,
    burn::nn::Softsign,
    Elementwise::Softsign
);

/// `burn::nn::Gelu` (exact or tanh-approximate), recorded ([`Elementwise::Gelu`],
/// [`Elementwise::GeluApproximate`]).
#[derive(Module, Debug, Default)]
pub struct Gelu {
    /// Whether the tanh approximation is used, as in burn's layer.
    pub approximate: bool,
}

impl From<burn::nn::Gelu> for Gelu {
    fn from(layer: burn::nn::Gelu) -> Self {
        Self {
            approximate: layer.approximate,
        }
    }
}

impl Gelu {
    /// The exact GELU `z Φ(z)`, as `burn::nn::Gelu::new()`.
    pub fn new() -> Self {
        Self { approximate: false }
    }

    /// The tanh approximation, as `burn::nn::Gelu::new_approximate()`.
    pub fn new_approximate() -> Self {
        Self { approximate: true }
    }

    /// The forward pass, `[B, ...] → [B, ...]`, recorded.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let function = if self.approximate {
            Elementwise::GeluApproximate
        } else {
            Elementwise::Gelu
        };
        elementwise(function, input)
    }
}

/// `burn::nn::LeakyRelu` (piecewise linear: records nothing).
#[derive(Module, Debug)]
pub struct LeakyRelu {
    /// The negative slope, as in burn's layer.
    pub negative_slope: f64,
}

impl From<burn::nn::LeakyRelu> for LeakyRelu {
    fn from(layer: burn::nn::LeakyRelu) -> Self {
        Self {
            negative_slope: layer.negative_slope,
        }
    }
}

impl LeakyRelu {
    /// The activation `config` describes, as burn's `config.init()` makes it.
    pub fn new(config: &burn::nn::activation::LeakyReluConfig) -> Self {
        config.init().into()
    }

    /// The forward pass, `[B, ...] → [B, ...]`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        elementwise(
            Elementwise::LeakyRelu {
                slope: self.negative_slope,
            },
            input,
        )
    }
}

/// `burn::nn::Softplus`, recorded ([`Elementwise::Softplus`]).
#[derive(Module, Debug)]
pub struct Softplus {
    /// `β`, as in burn's layer.
    pub beta: f64,
    /// The linear threshold on `βz`, as in burn's layer.
    pub threshold: f64,
}

impl From<burn::nn::Softplus> for Softplus {
    fn from(layer: burn::nn::Softplus) -> Self {
        Self {
            beta: layer.beta,
            threshold: layer.threshold,
        }
    }
}

impl Softplus {
    /// The activation `config` describes, as burn's `config.init()` makes it.
    pub fn new(config: &burn::nn::activation::SoftplusConfig) -> Self {
        config.init().into()
    }

    /// The forward pass, `[B, ...] → [B, ...]`, recorded.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        elementwise(
            Elementwise::Softplus {
                beta: self.beta,
                threshold: self.threshold,
            },
            input,
        )
    }
}

/// `burn::nn::Elu`, recorded ([`Elementwise::Elu`]).
#[derive(Module, Debug)]
pub struct Elu {
    /// `α`, as in burn's layer.
    pub alpha: f64,
}

impl From<burn::nn::Elu> for Elu {
    fn from(layer: burn::nn::Elu) -> Self {
        Self { alpha: layer.alpha }
    }
}

impl Elu {
    /// The activation `config` describes, as burn's `config.init()` makes it.
    pub fn new(config: &burn::nn::activation::EluConfig) -> Self {
        config.init().into()
    }

    /// The forward pass, `[B, ...] → [B, ...]`, recorded.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        elementwise(Elementwise::Elu { alpha: self.alpha }, input)
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Tensor, TensorData};

    use super::*;

    /// Every drop-in has burn's constructor (`new()`, or `new(&config)` where burn has a
    /// config) and computes what burn's layer built the same way computes.
    #[test]
    fn constructors_match_burns_layers() {
        use burn::nn::activation as nn;
        let device = Device::flex();
        let x = Tensor::<2>::from_data(
            TensorData::new(
                (0..12).map(|i| -3.0 + 0.55 * i as f32).collect::<Vec<_>>(),
                [3, 4],
            ),
            &device,
        );
        let same = |ours: Tensor<2>, theirs: Tensor<2>, what: &str| {
            let (a, b) = (
                ours.into_data().try_to_vec::<f32>(),
                theirs.into_data().try_to_vec::<f32>(),
            );
            assert_eq!(a.expect("f32"), b.expect("f32"), "{what}");
        };
        same(
            Gelu::new().forward(x.clone()),
            nn::Gelu::new().forward(x.clone()),
            "gelu",
        );
        same(
            Gelu::new_approximate().forward(x.clone()),
            nn::Gelu::new_approximate().forward(x.clone()),
            "gelu (tanh)",
        );
        same(
            Relu::new().forward(x.clone()),
            nn::Relu::new().forward(x.clone()),
            "relu",
        );
        same(
            Sigmoid::new().forward(x.clone()),
            nn::Sigmoid::new().forward(x.clone()),
            "sigmoid",
        );
        same(
            Tanh::new().forward(x.clone()),
            nn::Tanh::new().forward(x.clone()),
            "tanh",
        );
        same(
            SiLU::new().forward(x.clone()),
            nn::SiLU::new().forward(x.clone()),
            "silu",
        );
        same(
            Softsign::new().forward(x.clone()),
            nn::Softsign::new().forward(x.clone()),
            "softsign",
        );
        let leaky = nn::LeakyReluConfig::new().with_negative_slope(0.2);
        same(
            LeakyRelu::new(&leaky).forward(x.clone()),
            leaky.init().forward(x.clone()),
            "leaky",
        );
        let softplus = nn::SoftplusConfig::new().with_beta(2.0);
        same(
            Softplus::new(&softplus).forward(x.clone()),
            softplus.init().forward(x.clone()),
            "softplus",
        );
        let elu = nn::EluConfig::new().with_alpha(0.5);
        same(
            Elu::new(&elu).forward(x.clone()),
            elu.init().forward(x),
            "elu",
        );
    }

    /// Each `σ''` equals central differences of burn's own `σ'` (autodiff), in float64.
    #[test]
    fn second_derivatives_match_differences_of_autodiff() {
        // flex: float64 (the default device is wgpu's float32 where that feature is on).
        let device = Device::flex().autodiff();
        let points: Vec<f64> = (0..41).map(|i| -4.0 + 0.2 * i as f64 + 0.013).collect();
        let n = points.len();
        let first = |function: Elementwise, shift: f64| -> Vec<f64> {
            let z = Tensor::<1>::from_data(
                TensorData::new(points.iter().map(|p| p + shift).collect::<Vec<_>>(), [n]),
                (&device, DType::F64),
            )
            .require_grad();
            let grads = function.apply(z.clone()).sum().backward();
            let g = z.grad(&grads).expect("a gradient");
            g.into_data().try_to_vec::<f64>().expect("f64")
        };
        for function in [
            Elementwise::Relu,
            Elementwise::LeakyRelu { slope: 0.1 },
            Elementwise::Sigmoid,
            Elementwise::Tanh,
            Elementwise::Gelu,
            Elementwise::GeluApproximate,
            Elementwise::Silu,
            Elementwise::Softplus {
                beta: 2.0,
                threshold: 5.0,
            },
            Elementwise::Elu { alpha: 0.7 },
            Elementwise::Softsign,
        ] {
            let h = 1e-5;
            let (plus, minus) = (first(function, h), first(function, -h));
            let z =
                Tensor::<1>::from_data(TensorData::new(points.clone(), [n]), (&device, DType::F64));
            let ours = function
                .second_derivative(z)
                .into_data()
                .convert::<f64>()
                .try_to_vec::<f64>()
                .expect("f64");
            for i in 0..n {
                let reference = (plus[i] - minus[i]) / (2.0 * h);
                assert!(
                    (ours[i] - reference).abs() <= 1e-6 * (1.0 + reference.abs()),
                    "{function:?} at {}: ours {} against {reference}",
                    points[i],
                    ours[i]
                );
            }
        }
    }
}
