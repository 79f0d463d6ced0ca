//! What the convolution drop-ins share: burn's `Same` padding rule, the unfolding of a
//! recorded input into the rows of a Linear (1-d, 2-d and 3-d), and the taps of a convolution
//! and of a transposed convolution with any number of groups.

use burn::module::ParamId;
use burn::tensor::Tensor;

use crate::recorder::{tap_deferred, tap_transposed};

/// How a convolution's recorded input (already padded) becomes its per-sample factors:
/// windows of `kernel` elements `dilation` apart, every `stride` positions, along each of
/// the `N` spatial dimensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unfolding<const N: usize> {
    pub(crate) kernel: [usize; N],
    pub(crate) stride: [usize; N],
    pub(crate) dilation: [usize; N],
}

impl<const N: usize> Unfolding<N> {
    /// The number of windows along each dimension of a (padded) input of `size` (what burn's
    /// convolution gives with the same settings), `None` if a window does not fit.
    /// The span of one window along dimension `i`: `dilation·(kernel − 1) + 1`.
    fn extent(&self, i: usize) -> usize {
        self.dilation[i] * (self.kernel[i].max(1) - 1) + 1
    }

    /// The number of positions an unfolding of a padded input of `size` gives (what burn's
    /// convolution gives with the same settings), `None` if a window does not fit.
    pub(crate) fn positions(&self, size: [usize; N]) -> Option<usize> {
        (0..N).try_fold(1, |positions, i| {
            (size[i] >= self.extent(i) && self.stride[i] > 0)
                .then(|| positions * ((size[i] - self.extent(i)) / self.stride[i] + 1))
        })
    }

    /// The same unfolding over `M ≥ N` dimensions, the leading ones of size 1 (a 1-d layer as
    /// a 2-d one of height 1, a 2-d one as a 3-d one of depth 1).
    fn lifted<const M: usize>(&self) -> Unfolding<M> {
        Unfolding {
            kernel: lift(self.kernel),
            stride: lift(self.stride),
            dilation: lift(self.dilation),
        }
    }
}

/// `[a_1, …, a_N]` as `[1, …, 1, a_1, …, a_N]` of length `M ≥ N`.
fn lift<const N: usize, const M: usize>(a: [usize; N]) -> [usize; M] {
    let mut lifted = [1; M];
    let n = N.min(M);
    lifted[M - n..].copy_from_slice(&a[..n]);
    lifted
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

/// The padding burn applies to an input of `size` (`[height, width]`) under `padding`:
/// `[(top, bottom), (left, right)]`.
pub(crate) fn padding_2d(
    padding: &burn::nn::PaddingConfig2d,
    kernel: [usize; 2],
    stride: [usize; 2],
    size: [usize; 2],
) -> [(usize, usize); 2] {
    use burn::nn::PaddingConfig2d;
    match *padding {
        PaddingConfig2d::Valid => [(0, 0), (0, 0)],
        PaddingConfig2d::Explicit(top, left, bottom, right) => [(top, bottom), (left, right)],
        PaddingConfig2d::Same => [
            same_padding(kernel[0], stride[0], size[0]),
            same_padding(kernel[1], stride[1], size[1]),
        ],
    }
}

/// Taps a convolution with `groups` groups from its output `[B, C_out, O_1, …, O_N]`
/// (`P = O_1⋯O_N` positions); `unfold` gives its padded input's unfolding as rows
/// `[B, P, C_in·K]` (row `p` the window of position `p`, channel-major:
/// [`unfold_rows_2d`], [`unfold_rows_3d`]), run after the backward pass. Returns the output (with the recorder's zero
/// leaf when one is active).
///
/// With `groups = 1` the weight `[C_out, C_in·K]` is a Linear over the `P` positions. With
/// `g` groups, output channel `o` of group `r` sees only group `r`'s `C_in/g` input channels:
/// `G_n[o] = Σ_p E_n[o, p] · U_n^{(r)}[·, p]`. That is again a Linear, over `g·P` positions:
/// position `(r, p)` has input `U_n^{(r)}[·, p]` (width `C_in·K/g`) and output gradient
/// `E_n[·, p]` masked to group `r`'s channels. The zero leaf is those rows, `[B, g·P, C_out]`:
/// group `r`'s block, seen as the output's shape (channels last in memory, a view), is added
/// to the output masked to group `r`'s channels, so its gradient at `(r, p, o)` is
/// `∂L/∂y[o, p]` where `o` belongs to `r` and 0 elsewhere.
///
/// The output keeps the shape and layout the convolution gave it (no reshape of the output
/// on the passes: a CubeCL convolution's output is channels-last in memory, and reshaping it
/// would copy it in the forward pass and its gradient in the backward pass); the leaf's
/// gradient arrives as the rows, `[B, g·P, C_out]`.
///
/// # Cost
///
/// During the forward and backward passes: the padded input, and a zero leaf the output's
/// size (`g` times with `g` groups). After them: the unfolded input (`B·C_in·K·P`).
pub(crate) fn tap_conv<const D: usize>(
    weight: ParamId,
    bias: Option<ParamId>,
    groups: usize,
    unfold: impl FnOnce() -> Tensor<3> + 'static,
    output: Tensor<D>,
) -> Tensor<D> {
    let dims = output.dims();
    let (batch, channels) = (dims[0], dims[1]);
    let positions: usize = dims[2..].iter().product();
    let groups = groups.max(1);
    let rows = move || group_columns(unfold(), groups);
    let Some(leaf) = tap_deferred(
        weight,
        bias,
        rows,
        [batch, groups * positions, channels],
        &output,
    ) else {
        return output;
    };
    if groups == 1 {
        return output + channels_last_view(leaf, dims);
    }
    let added = (0..groups)
        .map(|r| {
            let block =
                leaf.clone()
                    .slice([0..batch, r * positions..(r + 1) * positions, 0..channels]);
            masked_to_group(channels_last_view(block, dims), r, groups, 1)
        })
        .reduce(|a, b| a + b);
    match added {
        Some(added) => output + added,
        None => output,
    }
}

/// Rows `[B, P, C]` seen as a tensor of shape `dims` `[B, C, O_1, …, O_N]` (`P = O_1⋯O_N`):
/// a reshape to `[B, O_1, …, O_N, C]` and a permutation of the channels to axis 1 (views, no
/// copy, for contiguous rows).
fn channels_last_view<const D: usize>(rows: Tensor<3>, dims: [usize; D]) -> Tensor<D> {
    let mut shape = [0; D];
    let mut axes = [0; D];
    shape[0] = dims[0];
    shape[D - 1] = dims[1];
    axes[1] = D - 1;
    for i in 2..D {
        shape[i - 1] = dims[i];
        axes[i] = i - 1;
    }
    rows.reshape(shape).permute(axes)
}

/// `x` with the channels (axis `axis`) outside group `r` of `groups` zeroed (`x ⊙ mask_r`,
/// `mask_r[c] = 1` where channel `c` belongs to group `r`).
fn masked_to_group<const D: usize>(
    x: Tensor<D>,
    r: usize,
    groups: usize,
    axis: usize,
) -> Tensor<D> {
    let channels = x.dims()[axis];
    let per_group = channels / groups;
    let mask: Vec<f32> = (0..channels)
        .map(|c| f32::from(u8::from(c / per_group == r)))
        .collect();
    let mask = Tensor::<1>::from_data(
        burn::tensor::TensorData::new(mask, [channels]),
        (&x.device(), x.dtype()),
    );
    let mut shape = [1; D];
    shape[axis] = channels;
    x * mask.reshape(shape)
}

/// Taps a transposed convolution with `groups` groups from its input `[B, C_in, P_1, …, P_N]`
/// and output `[B, C_out, O_1, …, O_N]` (`D = N + 2`); after the backward pass the output
/// gradient is unfolded by [`unfold_rows_2d`] or [`unfold_rows_3d`] over the uncropped output
/// ([`uncropped_gradient`]). Returns the output with the recorder's zero leaf when one is
/// active: the output gradient's rows `[B, P_out, C_out]`, added through a channels-last view
/// (as [`tap_conv`]: the output keeps its shape and layout on the passes).
///
/// A transposed convolution adds `x[c_in, p] · W[c_in, j, k]` to output `(r·C_out/g + j,
/// p·stride + k·dilation − padding)` for `c_in` in group `r`, so its weight `[C_in,
/// C_out/g·K]` has the per-sample gradient `G_n[c_in, (j, k)] = Σ_p x_n[c_in, p] ·
/// U(E_n)[(r·C_out/g + j, k), p]`: a Linear (`[d_in, d_out]` layout) over the input's
/// positions, whose output gradients are the unfolded output gradient. With `g` groups it
/// runs over `g·P_in` positions: position `(r, p)` has input `x[·, p]` masked to group `r`'s
/// channels and output gradient group `r`'s rows of the unfolding. The bias's per-sample
/// gradient is `Σ_p E_n[·, p]` over the output's positions.
///
/// # Cost
///
/// During the forward and backward passes: the input as rows `[B, P_in, C_in]` (`g` masked
/// copies), a zero leaf the output's size. After them: the unfolded output gradient
/// (`B·C_out·K·P_in`).
pub(crate) fn record_transposed<const D: usize, const N: usize>(
    weight: ParamId,
    bias: Option<ParamId>,
    groups: usize,
    input: Tensor<D>,
    output: Tensor<D>,
    padding: [usize; N],
    unfolding: Unfolding<N>,
) -> Tensor<D> {
    let in_dims = input.dims();
    let out_dims = output.dims();
    let (batch, c_out) = (out_dims[0], out_dims[1]);
    let mut input_size = [0; N];
    input_size.copy_from_slice(&in_dims[2..]);
    let out_positions: usize = out_dims[2..].iter().product();
    let groups = groups.max(1);
    let rows = channels_last_rows(input.detach());
    let rows = if groups == 1 {
        rows
    } else {
        // Group r's copy keeps its C_in/g channels: [B, g·P_in, C_in], group-major.
        Tensor::cat(
            (0..groups)
                .map(|r| masked_to_group(rows.clone(), r, groups, 2))
                .collect(),
            1,
        )
    };
    // The output gradient's rows [B, P_out, C_out] → the unfolding's rows [B, P_in, C_out·K].
    let gradient_rows = move |e: Tensor<3>| {
        let gradient = channels_last_view(e, out_dims);
        let full = uncropped_gradient(gradient, input_size, padding, &unfolding);
        let dims = full.dims();
        let unfolded = if N <= 2 {
            unfold_rows_2d(full.reshape(lift_dims::<D, 4>(dims)), &unfolding.lifted())
        } else {
            unfold_rows_3d(full.reshape(lift_dims::<D, 5>(dims)), &unfolding.lifted())
        };
        group_columns(unfolded, groups)
    };
    match tap_transposed(
        weight,
        bias,
        rows,
        gradient_rows,
        [batch, out_positions, c_out],
        &output,
    ) {
        Some(leaf) => output + channels_last_view(leaf, out_dims),
        None => output,
    }
}

/// A tensor `[B, C, S_1, …, S_N]` as rows `[B, S_1⋯S_N, C]` (channels last: a view where the
/// tensor is channels-last in memory, a copy otherwise).
fn channels_last_rows<const D: usize>(x: Tensor<D>) -> Tensor<3> {
    let dims = x.dims();
    let positions: usize = dims[2..].iter().product();
    let mut axes = [0; D];
    axes[D - 1] = 1;
    for (i, axis) in axes.iter_mut().enumerate().take(D - 1).skip(1) {
        *axis = i + 1;
    }
    x.permute(axes).reshape([dims[0], positions, dims[1]])
}

/// The dimensions `[B, C, S_1, …, S_N]` of a tensor as `[B, C, 1, …, 1, S_1, …, S_N]` of
/// rank `R ≥ D`.
fn lift_dims<const D: usize, const R: usize>(dims: [usize; D]) -> [usize; R] {
    let mut lifted = [1; R];
    lifted[..2].copy_from_slice(&dims[..2]);
    let n = D.saturating_sub(2).min(R - 2);
    lifted[R - n..].copy_from_slice(&dims[D - n..]);
    lifted
}

/// An unfolding's rows `[B, P, C·K]` (channel-major) as the rows of a Linear with `g` groups:
/// per group `r` its `C·K/g` columns at every position, group-major: `[B, g·P, C·K/g]`.
pub(crate) fn group_columns(rows: Tensor<3>, groups: usize) -> Tensor<3> {
    let [batch, positions, width] = rows.dims();
    if groups <= 1 {
        return rows;
    }
    let per_group = width / groups;
    Tensor::cat(
        (0..groups)
            .map(|r| {
                rows.clone()
                    .slice([0..batch, 0..positions, r * per_group..(r + 1) * per_group])
            })
            .collect(),
        1,
    )
}

/// The rows `[B, P, C·k_h·k_w]` of a padded 2-d input `[B, C, H, W]`'s unfolding (a 1-d
/// input is one of height 1): row `p` holds the window of position `p` (positions row-major),
/// channel-major, then the kernel's offsets (burn's `unfold4d` order, transposed).
///
/// The windows are strided views of the input (`Tensor::unfold`), thinned to every
/// `dilation`-th element, and gathered into the rows by one copy: `B·P·C·K` values moved
/// (gathered transposed for even kernel widths: [`misaligned_risk`]).
/// (burn's `unfold4d` convolves with a dense one-hot kernel `[C·K, C, k_h, k_w]`: `C·K`
/// multiply-adds for every value it makes, into an output a CubeCL device lays out
/// channels-last, which this layout would copy again.)
pub(crate) fn unfold_rows_2d(input: Tensor<4>, unfolding: &Unfolding<2>) -> Tensor<3> {
    let [batch, channels, ..] = input.dims();
    // [B, C, P_h, P_w, e_h, e_w]
    let windows: Tensor<6> = input
        .unfold::<5, _>(2, unfolding.extent(0), unfolding.stride[0])
        .unfold::<6, _>(3, unfolding.extent(1), unfolding.stride[1]);
    let [_, _, ph, pw, ..] = windows.dims();
    let kernel: usize = unfolding.kernel.iter().product();
    let windows = thinned(windows, unfolding);
    if misaligned_risk(unfolding) {
        // [B, C, k_h, k_w, P_h, P_w] → [B, C·K, P], seen as rows.
        return windows
            .permute([0, 1, 4, 5, 2, 3])
            .reshape([batch, channels * kernel, ph * pw])
            .swap_dims(1, 2);
    }
    // [B, P_h, P_w, C, k_h, k_w] → [B, P, C·K]
    windows
        .permute([0, 2, 3, 1, 4, 5])
        .reshape([batch, ph * pw, channels * kernel])
}

/// The rows `[B, P, C·k_d·k_h·k_w]` of a padded 3-d input `[B, C, D, H, W]`'s unfolding, as
/// [`unfold_rows_2d`] (burn has no 3-d unfold).
pub(crate) fn unfold_rows_3d(input: Tensor<5>, unfolding: &Unfolding<3>) -> Tensor<3> {
    let [batch, channels, ..] = input.dims();
    // [B, C, P_d, P_h, P_w, e_d, e_h, e_w]
    let windows: Tensor<8> = input
        .unfold::<6, _>(2, unfolding.extent(0), unfolding.stride[0])
        .unfold::<7, _>(3, unfolding.extent(1), unfolding.stride[1])
        .unfold::<8, _>(4, unfolding.extent(2), unfolding.stride[2]);
    let [_, _, pd, ph, pw, ..] = windows.dims();
    let kernel: usize = unfolding.kernel.iter().product();
    let windows = thinned(windows, unfolding);
    if misaligned_risk(unfolding) {
        // [B, C, k_d, k_h, k_w, P_d, P_h, P_w] → [B, C·K, P], seen as rows.
        return windows
            .permute([0, 1, 5, 6, 7, 2, 3, 4])
            .reshape([batch, channels * kernel, pd * ph * pw])
            .swap_dims(1, 2);
    }
    // [B, P_d, P_h, P_w, C, k_d, k_h, k_w] → [B, P, C·K]
    windows
        .permute([0, 2, 3, 4, 1, 5, 6, 7])
        .reshape([batch, pd * ph * pw, channels * kernel])
}

/// Whether gathering the rows could meet CubeCL 0.11's vectorised copy misaligned: it reads
/// `v` values at once along a unit-stride last axis (here a window's last `k` offsets) when
/// `v` divides that axis and the *smallest* other stride, without checking the other strides
/// (`cubecl-core` 0.11.4 `try_tensor_vector_size_parallel`), so windows of an even width over
/// an input whose row or channel stride is odd are read a value off. Then the rows are
/// gathered positions-last (a last axis that is never unit-stride beside a unit-stride window
/// axis, so never vectorised) and seen transposed, which costs a copy where they are used.
/// Odd widths (`v ∈ {2, 4, 8}` never divides them) are gathered directly.
fn misaligned_risk<const N: usize>(unfolding: &Unfolding<N>) -> bool {
    unfolding.kernel[N - 1].is_multiple_of(2)
}

/// Windows `[…, e_1, …, e_N]` (extents `dilation·(k − 1) + 1`, the last `N` axes) thinned to
/// every `dilation`-th element: `[…, k_1, …, k_N]`.
fn thinned<const W: usize, const N: usize>(
    windows: Tensor<W>,
    unfolding: &Unfolding<N>,
) -> Tensor<W> {
    if unfolding.dilation.iter().all(|&d| d == 1) {
        return windows;
    }
    let device = windows.device();
    (0..N).fold(windows, |windows, i| {
        let picks: Vec<i64> = (0..unfolding.kernel[i])
            .map(|k| (k * unfolding.dilation[i]) as i64)
            .collect();
        let picks = Tensor::<1, burn::tensor::Int>::from_data(
            burn::tensor::TensorData::new(picks, [unfolding.kernel[i]]),
            &device,
        );
        windows.select(W - N + i, picks)
    })
}

/// A transposed convolution's output gradient `[B, C, O_1, …, O_N]` brought to the extent of
/// its uncropped output, `(P_i − 1)·stride + dilation·(k − 1) + 1` along each dimension for an
/// input of `P_i` positions: `padding` zeros before, and zeros after or a cut (by
/// `output_padding`'s effect). Its unfolding with the layer's kernel, stride and dilation has
/// one window per input position.
pub(crate) fn uncropped_gradient<const D: usize, const N: usize>(
    gradient: Tensor<D>,
    input_size: [usize; N],
    padding: [usize; N],
    unfolding: &Unfolding<N>,
) -> Tensor<D> {
    let mut full = [0; N];
    for i in 0..N {
        full[i] = (input_size[i].max(1) - 1) * unfolding.stride[i] + unfolding.extent(i);
    }
    uncropped(gradient, padding, full)
}

/// `x` `[B, C, O_1, …, O_N]` placed at offset `before` in zeros `[B, C, F_1, …, F_N]` (what
/// does not fit is cut).
fn uncropped<const D: usize, const N: usize>(
    x: Tensor<D>,
    before: [usize; N],
    full: [usize; N],
) -> Tensor<D> {
    let dims = x.dims();
    let mut shape = dims;
    let mut from = Vec::with_capacity(D);
    let mut to = Vec::with_capacity(D);
    from.push(0..dims[0]);
    from.push(0..dims[1]);
    to.push(0..dims[0]);
    to.push(0..dims[1]);
    for i in 0..N {
        shape[2 + i] = full[i];
        let kept = dims[2 + i].min(full[i].saturating_sub(before[i]));
        from.push(0..kept);
        to.push(before[i].min(full[i])..before[i].min(full[i]) + kept);
    }
    let zeros = Tensor::<D>::zeros(shape, (&x.device(), x.dtype()));
    if from.iter().any(|r| r.is_empty()) {
        return zeros;
    }
    let kept = x.slice(from.as_slice());
    zeros.slice_assign(to.as_slice(), kept)
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

#[cfg(test)]
mod unfold_tests {
    use burn::tensor::module::unfold4d;
    use burn::tensor::ops::UnfoldOptions;
    use burn::tensor::{Device, Tensor};

    use super::*;

    fn devices() -> Vec<Device> {
        vec![
            Device::default(),
            #[cfg(feature = "wgpu")]
            Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
        ]
    }

    /// The rows equal burn's `unfold4d`, transposed, over kernels, strides and dilations.
    #[test]
    fn rows_equal_burns_unfolding() {
        for device in devices() {
            for (kernel, stride, dilation, size) in [
                ([3, 3], [1, 1], [1, 1], [7, 6]),
                ([1, 1], [1, 2], [1, 1], [7, 6]),
                ([1, 2], [1, 2], [1, 1], [1, 9]),
                ([3, 1], [2, 1], [1, 2], [8, 7]),
                ([2, 3], [2, 1], [2, 1], [7, 6]),
                ([3, 3], [2, 2], [2, 2], [9, 9]),
                ([2, 2], [2, 2], [1, 1], [7, 9]),
                ([4, 2], [1, 2], [1, 1], [7, 9]),
            ] {
                let [b, c, _, h, w] = input3(&device, size).dims();
                let input = input3(&device, size).reshape([b, c, h, w]);
                let unfolding = Unfolding {
                    kernel,
                    stride,
                    dilation,
                };
                let ours = unfold_rows_2d(input.clone(), &unfolding);
                let burns = unfold4d(input, kernel, UnfoldOptions::new(stride, [0, 0], dilation))
                    .swap_dims(1, 2);
                assert_eq!(ours.dims(), burns.dims());
                let what = format!("{kernel:?} {stride:?} {dilation:?} on {device:?}");
                crate::testing::close(ours.clone(), burns, &what);
                // A 3-d input of depth one unfolds to the same rows.
                let volume = Unfolding {
                    kernel: [1, kernel[0], kernel[1]],
                    stride: [1, stride[0], stride[1]],
                    dilation: [1, dilation[0], dilation[1]],
                };
                let deep = unfold_rows_3d(input3(&device, size), &volume);
                crate::testing::close(deep, ours, &format!("3-d {what}"));
            }
        }
    }

    /// The test input `[2, 3, 1, H, W]`.
    fn input3(device: &Device, size: [usize; 2]) -> Tensor<5> {
        let n = 2 * 3 * size[0] * size[1];
        let values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        Tensor::from_data(
            burn::tensor::TensorData::new(values, [2, 3, 1, size[0], size[1]]),
            device,
        )
    }
}
