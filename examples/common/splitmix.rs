//! SplitMix64: the same data and initial weights on every run and backend, for the examples'
//! galleries and toy data sets.
#![allow(dead_code)] // Each example uses the draws it needs.

/// A SplitMix64 stream of uniform and normal numbers.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform on `[0, 1)`.
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-300), self.next());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Uniform on `(−bound, bound)`.
    pub fn uniform(&mut self, bound: f64) -> f64 {
        (2.0 * self.next() - 1.0) * bound
    }

    /// Uniform on `0..n` (`n ≥ 1`).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next() * n as f64) as usize).min(n.saturating_sub(1))
    }
}

/// Re-draws every float parameter of a module from a SplitMix64 stream, as burn draws a
/// layer's: uniform on `±1/√fan_in`, `fan_in` the product of a weight's axes but its output
/// one (`[in, out]` linear weights, `[out, in, k…]` convolution kernels), a bias with its
/// layer's weight (the one visited before it). The same initial weights on every run, whatever
/// other tests draw from burn's global generator at the same time.
pub struct Deterministic {
    rng: Rng,
    fan_in: usize,
}

impl Deterministic {
    /// Draws from a stream seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Rng(seed),
            fan_in: 1,
        }
    }
}

impl burn::module::ModuleMapper for Deterministic {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let dims = tensor.dims();
        match D {
            1 => {}
            2 => self.fan_in = dims[0],
            _ => self.fan_in = dims[1..].iter().product(),
        }
        let bound = 1.0 / (self.fan_in.max(1) as f64).sqrt();
        let values: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|_| self.rng.uniform(bound) as f32)
            .collect();
        let drawn = burn::tensor::Tensor::<D>::from_data(
            burn::tensor::TensorData::new(values, dims),
            &tensor.device(),
        )
        .cast(tensor.dtype())
        .require_grad();
        burn::module::Param::from_mapped_value(id, drawn, mapper)
    }
}
