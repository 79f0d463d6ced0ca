//! CrossAttention.

use burn::module::Module;
use burn::nn::Dropout;
use burn::nn::attention::{CrossAttentionCache, CrossAttentionConfig};
use burn::tensor::activation::{quiet_softmax, softmax};
use burn::tensor::{Bool, Device, Tensor};

use super::super::Linear;
use crate::recorder::mark_curved;

/// `burn::nn::attention::CrossAttention` with per-sample statistics: queries from one
/// sequence attend to a context of another width (`d_context`), with grouped key/value heads
/// (`n_heads_kv` dividing `n_heads`); its four projections are per-sample [`Linear`]s. Same
/// config, parameter names, record and forward pass.
///
/// burn keeps this block's fields private, so it is built from the config
/// ([`CrossAttention::new`]) or from a burn block and its config
/// ([`CrossAttention::from_burn`]), and goes back through [`CrossAttention::as_burn`].
///
/// # Cost
///
/// Without an active recorder: four thread-local checks per forward. With one: each
/// projection keeps its input and adds a zero leaf to its output.
#[derive(Module, Debug)]
pub struct CrossAttention {
    /// Query projection `[d_model, n_heads·d_head]`.
    pub query: Linear,
    /// Key projection `[d_context, n_heads_kv·d_head]`.
    pub key: Linear,
    /// Value projection `[d_context, n_heads_kv·d_head]`.
    pub value: Linear,
    /// Output projection `[n_heads·d_head, d_model]`.
    pub output: Linear,
    /// Dropout on the attention weights.
    pub dropout: Dropout,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_heads_kv: usize,
    /// Width of a head.
    pub d_head: usize,
    /// Score scale `1/√d_head`.
    pub scale: f64,
    /// Score given to masked positions.
    pub min_float: f64,
    /// Whether the softmax is burn's `quiet_softmax`.
    pub quiet_softmax: bool,
}

impl CrossAttention {
    /// The block `config` describes, initialised as burn initialises it.
    pub fn new(config: &CrossAttentionConfig, device: &Device) -> Self {
        Self::from_burn(config.init(device), config)
    }

    /// burn's block (its parameters, read through its record) with the config it was built
    /// from (its sizes and settings, which burn does not expose).
    pub fn from_burn(
        layer: burn::nn::attention::CrossAttention,
        config: &CrossAttentionConfig,
    ) -> Self {
        let device = layer.devices().into_iter().next().unwrap_or_default();
        let linear = |d_in: usize, d_out: usize| -> Linear {
            burn::nn::LinearConfig::new(d_in, d_out)
                .init(&device)
                .into()
        };
        let shell = Self {
            query: linear(config.d_model, config.n_heads * config.d_head),
            key: linear(config.d_context, config.n_heads_kv * config.d_head),
            value: linear(config.d_context, config.n_heads_kv * config.d_head),
            output: linear(config.n_heads * config.d_head, config.d_model),
            dropout: burn::nn::DropoutConfig::new(config.dropout).init(),
            n_heads: config.n_heads,
            n_heads_kv: config.n_heads_kv,
            d_head: config.d_head,
            scale: (config.d_head as f64).sqrt().recip(),
            min_float: config.min_float,
            quiet_softmax: config.quiet_softmax,
        };
        shell.load_record(layer.into_record())
    }

    /// The config of this block.
    pub fn config(&self) -> CrossAttentionConfig {
        let [d_model, _] = self.query.weight.dims();
        let [d_context, _] = self.key.weight.dims();
        CrossAttentionConfig::new(
            d_model,
            d_context,
            self.n_heads,
            self.n_heads_kv,
            self.d_head,
        )
        .with_dropout(self.dropout.prob)
        .with_min_float(self.min_float)
        .with_quiet_softmax(self.quiet_softmax)
    }

    /// burn's block with these parameters and settings.
    pub fn as_burn(&self) -> burn::nn::attention::CrossAttention {
        self.config()
            .init(&self.query.weight.device())
            .load_record(self.clone().into_record())
    }

    /// Attention of `query` `[B, L_q, d_model]` to `context` `[B, L_k, d_context]` (`mask`
    /// `[B, L_k]`, `true`: padded), `[B, L_q, d_model]`, as burn's `CrossAttention::forward`.
    pub fn forward(
        &self,
        query: Tensor<3>,
        context: Tensor<3>,
        mask: Option<Tensor<2, Bool>>,
    ) -> Tensor<3> {
        mark_curved("attention softmax");
        let [batch, l_q, _] = query.dims();
        let [_, l_k, _] = context.dims();
        let heads = |x: Tensor<3>, linear: &Linear, n: usize| {
            let [b, t, _] = x.dims();
            linear
                .forward(x)
                .reshape([b, t, n, self.d_head])
                .swap_dims(1, 2)
        };
        let q = heads(query, &self.query, self.n_heads);
        let k = heads(context.clone(), &self.key, self.n_heads_kv);
        let v = heads(context, &self.value, self.n_heads_kv);
        let (k, v) = if self.n_heads != self.n_heads_kv {
            let repeats = self.n_heads / self.n_heads_kv.max(1);
            (repeat_heads(k, repeats), repeat_heads(v, repeats))
        } else {
            (k, v)
        };
        let mut scores = q.matmul(k.transpose()) * self.scale;
        if let Some(mask) = mask {
            scores = scores.mask_fill(mask.reshape([batch, 1, 1, l_k]), self.min_float);
        }
        let weights = if self.quiet_softmax {
            quiet_softmax(scores, 3)
        } else {
            softmax(scores, 3)
        };
        let attended = self
            .dropout
            .forward(weights)
            .matmul(v)
            .swap_dims(1, 2)
            .reshape([batch, l_q, self.n_heads * self.d_head]);
        self.output.forward(attended)
    }

    /// Inference with burn's cache of the context's keys and values, as burn's
    /// `CrossAttention::forward_cache` (burn's block runs it: nothing is recorded at
    /// inference).
    pub fn forward_cache(
        &self,
        query: Tensor<3>,
        context: Tensor<3>,
        mask: Option<Tensor<2, Bool>>,
        cache: &mut CrossAttentionCache,
    ) -> Tensor<3> {
        self.as_burn().forward_cache(query, context, mask, cache)
    }
}

/// Key/value heads `[B, h, L, d]` each repeated `repeats` times in place, `[B, h·repeats, L,
/// d]` (grouped-query attention).
fn repeat_heads(x: Tensor<4>, repeats: usize) -> Tensor<4> {
    let [b, h, l, d] = x.dims();
    x.reshape([b, h, 1, l, d])
        .expand([b, h, repeats, l, d])
        .reshape([b, h * repeats, l, d])
}
