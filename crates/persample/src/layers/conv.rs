//! What the convolution drop-ins share: burn's `Same` padding rule and the tap of a
//! convolution with any number of groups.

use burn::module::ParamId;
use burn::tensor::Tensor;

use burn::tensor::module::unfold4d;
use burn::tensor::ops::UnfoldOptions;

use crate::recorder::tap_conv_input;

/// How a convolution's recorded input becomes its per-sample factors: `unfold4d` with these
/// settings (no padding: the input is recorded padded), then group-major rows
/// ([`unfolded_rows`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unfolding {
    pub(crate) kernel: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) dilation: [usize; 2],
    pub(crate) groups: usize,
}

/// burn's `Same` padding `(before, after)` along one dimension: the output keeps
/// `⌈size / stride⌉` positions, the total padding `(out − 1)·stride + kernel − size` (the
/// kernel's extent without dilation, as burn computes it) is split with the extra element after.
pub(crate) fn same_padding(kernel: usize, stride: usize, size: usize) -> (usize, usize) {
    let out = size.div_ceil(stride);
    let total = if out > 0 {
        ((out - 1) * stride + kernel).saturating_sub(size)
    } else {
        0
    };
    (total / 2, total - total / 2)
}

/// Taps a convolution from its padded input `[B, C_in, H, W]` and its output
/// `[B, C_out, P]` (`P` positions); returns the output `[B, C_out, P]` (with the recorder's
/// zero leaf when one is active). The input is unfolded after the backward pass
/// ([`unfolded_rows`]).
///
/// With `groups = 1` the weight `[C_out, C_in·K]` is a Linear over the `P` positions. With
/// `g` groups, output channel `o` of group `r` sees only group `r`'s `C_in/g` input channels:
/// `G_n[o] = Σ_p E_n[o, p] · U_n^{(r)}[·, p]`. That is again a Linear, over `g·P` positions:
/// position `(r, p)` has input `U_n^{(r)}[·, p]` (width `C_in·K/g`) and output gradient
/// `E_n[·, p]` masked to group `r`'s channels. The mask comes from the forward pass: the
/// output is copied once per group and the copies are summed with the group mask, so the
/// zero leaf's gradient at `(r, p, o)` is `∂L/∂y[o, p]` where `o` belongs to `r` and 0
/// elsewhere.
///
/// # Cost
///
/// During the forward and backward passes: the padded input. After them: the unfolded input
/// (`B·C_in·K·P`), and with `g` groups output gradients `g` times the output's size.
pub(crate) fn tap_conv(
    weight: ParamId,
    bias: Option<ParamId>,
    input: Tensor<4>,
    unfolding: Unfolding,
    output: Tensor<3>,
) -> Tensor<3> {
    let [batch, c_out, positions] = output.dims();
    let groups = unfolding.groups.max(1);
    if groups == 1 {
        return tap_conv_input(
            weight,
            bias,
            input,
            move |input| unfolded_rows(input, unfolding),
            output.swap_dims(1, 2),
        )
        .swap_dims(1, 2);
    }
    let c_per_group = c_out / groups;
    // [B, g·P, C_out]: the output once per group, positions group-major ((r, p) ↦ r·P + p),
    // built from concatenations only (no reshape of a permuted tensor).
    let copies = Tensor::cat(vec![output.swap_dims(1, 2); groups], 1);
    let tapped = tap_conv_input(
        weight,
        bias,
        input,
        move |input| unfolded_rows(input, unfolding),
        copies,
    );
    // Σ_r mask[r, o]·copy_r[p, o], mask[r, o] = 1 where output channel o belongs to group r.
    let mask: Vec<f32> = (0..groups)
        .flat_map(|r| (0..c_out).map(move |o| f32::from(u8::from(o / c_per_group == r))))
        .collect();
    let mask = Tensor::<1>::from_data(
        burn::tensor::TensorData::new(mask, [groups * c_out]),
        (&tapped.device(), tapped.dtype()),
    );
    let parts: Vec<Tensor<3>> = (0..groups)
        .map(|r| {
            let copy =
                tapped
                    .clone()
                    .slice([0..batch, r * positions..(r + 1) * positions, 0..c_out]);
            let mask = mask
                .clone()
                .slice(r * c_out..(r + 1) * c_out)
                .reshape([1, 1, c_out]);
            copy * mask
        })
        .collect();
    parts
        .into_iter()
        .reduce(|a, b| a + b)
        .unwrap_or(tapped)
        .swap_dims(1, 2)
}

/// The per-sample factor rows of a recorded convolution input: `unfold4d` (`[B, C_in·K, P]`,
/// channel-major), then per group `r` its `C_in·K/g` rows at every position, group-major:
/// `[B, g·P, C_in·K/g]`, the layout of [`tap_conv`]'s output copies.
pub(crate) fn unfolded_rows(input: Tensor<4>, unfolding: Unfolding) -> Tensor<3> {
    let unfolded = unfold4d(
        input,
        unfolding.kernel,
        UnfoldOptions::new(unfolding.stride, [0, 0], unfolding.dilation),
    );
    let [batch, width, positions] = unfolded.dims();
    let groups = unfolding.groups.max(1);
    if groups == 1 {
        return unfolded.swap_dims(1, 2);
    }
    let per_group = width / groups;
    Tensor::cat(
        (0..groups)
            .map(|r| {
                unfolded
                    .clone()
                    .slice([0..batch, r * per_group..(r + 1) * per_group, 0..positions])
                    .swap_dims(1, 2)
            })
            .collect(),
        1,
    )
}

/// The number of positions an unfolding of a padded `[.., H, W]` input gives (what burn's
/// convolution gives with the same settings).
pub(crate) fn positions(size: [usize; 2], unfolding: &Unfolding) -> Option<usize> {
    let along = |i: usize| {
        let extent = unfolding.dilation[i] * (unfolding.kernel[i] - 1) + 1;
        (size[i] >= extent).then(|| (size[i] - extent) / unfolding.stride[i] + 1)
    };
    Some(along(0)? * along(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// burn's rule on a few cases: odd and even kernels, strides that do not divide the size.
    #[test]
    fn same_padding_follows_burns_rule() {
        assert_eq!(same_padding(3, 1, 10), (1, 1));
        assert_eq!(same_padding(4, 1, 10), (1, 2));
        assert_eq!(same_padding(3, 2, 10), (0, 1));
        assert_eq!(same_padding(5, 3, 7), (2, 2));
        assert_eq!(same_padding(1, 1, 4), (0, 0));
    }
}
