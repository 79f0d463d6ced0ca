//! What the convolution drop-ins share: burn's `Same` padding rule and the tap of a
//! convolution with any number of groups.

use burn::module::ParamId;
use burn::tensor::Tensor;

use super::recorder::{Layout, tap};

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

/// Taps a convolution from its unfolded input `[B, C_in·K, P]` (channel-major, as
/// `unfold4d` lays it out) and its output `[B, C_out, P]`; returns the output `[B, C_out, P]`
/// (with the recorder's zero leaf when one is active).
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
/// `groups = 1`: the unfolded input. `g` groups: the same input, and output gradients `g`
/// times the output's size.
pub(crate) fn tap_conv(
    weight: ParamId,
    bias: Option<ParamId>,
    unfolded: Tensor<3>,
    output: Tensor<3>,
    groups: usize,
) -> Tensor<3> {
    let [batch, width, positions] = unfolded.dims();
    let [_, c_out, _] = output.dims();
    if groups <= 1 {
        return tap(
            weight,
            bias,
            Layout::OutIn,
            &unfolded.swap_dims(1, 2),
            output.swap_dims(1, 2),
        )
        .swap_dims(1, 2);
    }
    let per_group = width / groups;
    let c_per_group = c_out / groups;
    // Built from slices and concatenations only (no reshape of a permuted tensor), positions
    // ordered group-major: (r, p) ↦ r·P + p.
    // [B, g·P, C_in·K/g]: group r's unfolded input channels at every position.
    let inputs = Tensor::cat(
        (0..groups)
            .map(|r| {
                unfolded
                    .clone()
                    .slice([0..batch, r * per_group..(r + 1) * per_group, 0..positions])
                    .swap_dims(1, 2)
            })
            .collect(),
        1,
    );
    // [B, g·P, C_out]: the output once per group.
    let rows = output.swap_dims(1, 2);
    let copies = Tensor::cat(vec![rows; groups], 1);
    let tapped = tap(weight, bias, Layout::OutIn, &inputs, copies);
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
