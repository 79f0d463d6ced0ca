//! A histogram axis: Cockpit's bin rules and their thresholds.
//!
//! Both of Cockpit's bin rules are monotone in the value, so an axis is fully described by its
//! thresholds `T_k`, the smallest value whose bin is at least `k` (found once per axis by
//! bisection over the floats, so the rule is reproduced bit for bit). The host and the device
//! engines both count against them.

use crate::CockpitError;

/// How an axis maps a value to its bin. Both rules are monotone non-decreasing in the value,
/// which the fast path relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// `torch.histc` (GradHist1d): `⌊(clamp(x, lo, hi) − lo)·bins/(hi − lo)⌋`, at most
    /// `bins − 1`.
    Histc,
    /// GradHist2d: `⌊(clamp(x, lo + w/2, hi − w/2) − lo)/w⌋` with `w = (hi − lo)/bins`.
    Centred,
}

/// One histogram axis: its rule, range, bins and thresholds.
#[derive(Debug, Clone)]
pub(crate) struct Axis {
    rule: Rule,
    lo: f64,
    hi: f64,
    bins: usize,
    width: f64,
    clamp: (f64, f64),
    /// `thresholds[k]`: the smallest value whose bin is at least `k` (`k ≥ 1`); `−∞` at 0.
    pub(super) thresholds: Vec<f64>,
    /// The bin of `±0`.
    pub(super) zero: usize,
    /// The bin below it (`zero − 1`, or `zero` when that is bin 0).
    pub(super) below_zero: usize,
    /// The smallest value in the bin of zero (`≤ 0`; `−∞` when that is bin 0): a value below
    /// it is in a bin below zero's.
    pub(super) zero_threshold: f64,
    /// The values in the bins `below_zero` and `zero`: `[split_window.0, split_window.1)`.
    pub(super) split_window: (f64, f64),
}

/// The floats in increasing order as unsigned integers (`−∞ … −0, +0 … +∞`, NaNs outside).
pub(super) fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

pub(super) fn from_order_key(key: u64) -> f64 {
    if key >> 63 == 1 {
        f64::from_bits(key & !(1 << 63))
    } else {
        f64::from_bits(!key)
    }
}

impl Axis {
    /// An axis of `bins ≥ 1` bins over the finite range `lo < hi` (checked by the quantities
    /// before training).
    pub(crate) fn new(rule: Rule, (lo, hi): (f64, f64), bins: usize) -> Self {
        let bins = bins.max(1);
        let width = (hi - lo) / bins as f64;
        let clamp = match rule {
            Rule::Histc => (lo, hi),
            Rule::Centred => (lo + width / 2.0, hi - width / 2.0),
        };
        let mut axis = Self {
            rule,
            lo,
            hi,
            bins,
            width,
            clamp,
            thresholds: vec![f64::NEG_INFINITY; bins],
            zero: 0,
            below_zero: 0,
            zero_threshold: f64::NEG_INFINITY,
            split_window: (f64::NEG_INFINITY, f64::INFINITY),
        };
        for k in 1..bins {
            // bin(low) < k ≤ bin(high), halving the key interval.
            let (mut low, mut high) = (order_key(f64::NEG_INFINITY), order_key(f64::INFINITY));
            while high - low > 1 {
                let mid = low + (high - low) / 2;
                if axis.bin(from_order_key(mid)) >= k {
                    high = mid;
                } else {
                    low = mid;
                }
            }
            axis.thresholds[k] = from_order_key(high);
        }
        axis.zero = axis.bin(0.0);
        axis.below_zero = axis.zero.saturating_sub(1);
        axis.zero_threshold = axis.thresholds[axis.zero];
        axis.split_window = (
            axis.thresholds[axis.below_zero],
            axis.thresholds
                .get(axis.zero + 1)
                .copied()
                .unwrap_or(f64::INFINITY),
        );
        axis
    }

    /// The axis in `slot` if it has this rule, range and bins, else a new one put there (its
    /// thresholds take a few thousand bin evaluations to find).
    pub(crate) fn cached(
        slot: &mut Option<Axis>,
        rule: Rule,
        range: (f64, f64),
        bins: usize,
    ) -> &Axis {
        let fits = |axis: &Axis| {
            axis.rule == rule && (axis.lo, axis.hi) == range && axis.bins == bins.max(1)
        };
        if !slot.as_ref().is_some_and(fits) {
            *slot = Some(Axis::new(rule, range, bins));
        }
        slot.get_or_insert_with(|| Axis::new(rule, range, bins))
    }

    /// The number of bins.
    pub(crate) fn bins(&self) -> usize {
        self.bins
    }

    /// The rule as arithmetic: `bin(x) = min(⌊((clamp(x, lo, hi) − offset)·mul)/div⌋, bins − 1)`
    /// with `((lo, hi), offset, mul, div)` returned here, the operations in this order.
    pub(crate) fn formula(&self) -> ((f64, f64), f64, f64, f64) {
        match self.rule {
            Rule::Histc => (self.clamp, self.lo, self.bins as f64, self.hi - self.lo),
            Rule::Centred => (self.clamp, self.lo, 1.0, self.width),
        }
    }

    /// `thresholds[k]`, the smallest value whose bin is at least `k`, for `k = 1 … bins − 1`:
    /// `bin(x) = #{k ≥ 1 : x ≥ thresholds[k]}` (a NaN passes none: bin 0).
    pub(crate) fn thresholds(&self) -> &[f64] {
        &self.thresholds[1..]
    }

    /// The bin of `x` (NaN: bin 0), exactly as the rule computes it in `f64`.
    #[inline]
    pub(crate) fn bin(&self, x: f64) -> usize {
        let clamped = x.clamp(self.clamp.0, self.clamp.1) - self.lo;
        let t = match self.rule {
            Rule::Histc => clamped * self.bins as f64 / (self.hi - self.lo),
            Rule::Centred => clamped / self.width,
        };
        // `t ≥ 0`: truncation is the floor; NaN casts to 0, as the rule's NaN handling.
        (t as usize).min(self.bins - 1)
    }
}

/// The most bins a histogram axis may have: `GradHist1d`'s counts, its thresholds and each
/// counting thread's partial counts are `bins` numbers each (8 MiB per copy at this bound).
/// Cockpit's defaults are 100 (1-d) and 40 × 50 (2-d).
pub const MAX_BINS: usize = 1 << 20;

/// The most cells a 2-d histogram may have (`x bins · y bins`): the same bound as
/// [`MAX_BINS`], since the counts, each counting thread's copy and the 0/1 matrix product that
/// counts small gradients are that many numbers each.
pub const MAX_BINS_2D: usize = MAX_BINS;

/// A histogram axis needs between one and [`MAX_BINS`] bins and a finite range `lo < hi`
/// whose width `hi − lo` is finite too (a wider one puts every value in one bin).
pub(crate) fn check_axis(
    quantity: &str,
    axis: &str,
    bins: usize,
    (lo, hi): (f64, f64),
) -> Result<(), CockpitError> {
    if bins == 0 {
        return Err(invalid(quantity, format!("{axis}needs at least one bin")));
    }
    if bins > MAX_BINS {
        return Err(invalid(
            quantity,
            format!("{axis}{bins} bins is more than the {MAX_BINS} allowed"),
        ));
    }
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(invalid(
            quantity,
            format!("{axis}range ({lo}, {hi}) must be finite with lo < hi"),
        ));
    }
    let width = (hi - lo) / bins as f64;
    if !(hi - lo).is_finite() || width <= 0.0 || !(1.0 / width).is_finite() {
        return Err(invalid(
            quantity,
            format!(
                "{axis}range ({lo}, {hi}) with {bins} bins has a bin width ({width:e}) that \
                 float64 cannot work with"
            ),
        ));
    }
    Ok(())
}

/// [`CockpitError::InvalidSettings`] for `quantity`.
fn invalid(quantity: &str, reason: String) -> CockpitError {
    CockpitError::InvalidSettings {
        quantity: quantity.to_string(),
        reason,
        source: None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::histogram) fn generator(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// The rules as the quantities wrote them before (with `floor`), for comparison.
    fn reference_bin(rule: Rule, x: f64, (lo, hi): (f64, f64), bins: usize) -> usize {
        if x.is_nan() {
            return 0;
        }
        let k = match rule {
            Rule::Histc => ((x.clamp(lo, hi) - lo) * bins as f64 / (hi - lo)).floor(),
            Rule::Centred => {
                let w = (hi - lo) / bins as f64;
                ((x.clamp(lo + w / 2.0, hi - w / 2.0) - lo) / w).floor()
            }
        };
        (k.max(0.0) as usize).min(bins - 1)
    }

    /// The thresholds reproduce the rule exactly: `bin(x) ≥ k ⟺ x ≥ T_k`, at and around every
    /// threshold, at 0 and ±0, and the bins agree with the rule written with `floor`.
    #[test]
    fn thresholds_reproduce_the_rule() {
        for rule in [Rule::Histc, Rule::Centred] {
            for (range, bins) in [((-2.0, 2.0), 100), ((-1.0456, 1.0456), 21), ((0.0, 1.5), 7)] {
                let axis = Axis::new(rule, range, bins);
                for k in 1..bins {
                    let t = axis.thresholds[k];
                    let before = from_order_key(order_key(t) - 1);
                    assert!(
                        axis.bin(t) >= k && axis.bin(before) < k,
                        "{rule:?} {range:?} {k}"
                    );
                }
                let mut next = generator(3);
                for x in (0..2000).map(|_| (next() - 0.5) * 6.0).chain([
                    0.0,
                    -0.0,
                    f64::NAN,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                ]) {
                    assert_eq!(axis.bin(x), reference_bin(rule, x, range, bins), "{x}");
                }
                assert_eq!(axis.bin(-0.0), axis.zero);
                assert!(axis.zero_threshold <= 0.0 && axis.bin(axis.zero_threshold) == axis.zero);
            }
        }
    }
}
