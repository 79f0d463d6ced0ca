//! The per-sample statistics: one enum names each, one map holds their values.
//!
//! A statistic is a reduction of the per-sample gradients `g_{n,p}` of a batch, one tensor
//! per parameter. Everything that moves statistics around (the parts of an accumulated or
//! sharded batch, the data-parallel all-reduce, statistics reduced beforehand, the Cockpit's
//! request) goes by [`Statistic::combine`] and never names a statistic, so a new one is a
//! variant here, its computation from per-sample gradient rows (`factors/accumulator.rs`),
//! and the quantity that reads it (see `docs/internals.md`, "Adding a per-sample statistic").

use std::collections::BTreeMap;

use burn::tensor::{Device, Tensor};

/// A direction per-sample gradients are projected on: `⟨g_{n,p}, v_p⟩`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Direction {
    /// The step's mean gradient `∇L` (the gradient tests, Alpha's start).
    Gradient,
    /// The previous step's mean gradient `∇L_{t−1}` (Alpha's end point on its SGD path, where
    /// the step was `−lr·∇L_{t−1}`). The Cockpit keeps that gradient from step `t − 1` when a
    /// quantity asks for it at `t`.
    PreviousGradient,
    /// The update taken between two steps, `θ_{s+1} − θ_s` (Alpha off the plain SGD path).
    Update,
}

/// One per-sample statistic, per parameter `p` (`g_{n,p}` is the true per-sample gradient
/// `∇_p ℓ_n`, not divided by `B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Statistic {
    /// `‖g_{n,p}‖²`, `[B]` per parameter.
    SqNorm,
    /// `⟨g_{n,p}, v_p⟩` with the direction, `[B]` per parameter.
    Dot(Direction),
    /// `Σ_n g_{n,p}^{⊙2}` (elementwise), `[numel]` per parameter, flattened in burn's layout.
    SumSq,
    /// `max_{n,j} |g_{n,p,j}|`, `[1]` per parameter.
    AbsMax,
    /// `Σ_j g_{n,p,j}³`, `[B]` per parameter: a statistic of the engine's own tests, added as
    /// a newcomer would add one (here, in `factors/accumulator.rs` and in the test that reads
    /// it), with no factored formula, so every source takes it from formed rows.
    #[cfg(test)]
    SumCubes,
}

/// How a statistic of samples `a` and one of the samples that follow them, `b`, make the
/// statistic of both: what a merged batch, the data-parallel all-reduce and a chunked pass do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Per-sample values: `a`'s, then `b`'s.
    Concatenate,
    /// Sums over samples: `a + b`.
    Add,
    /// Maxima over samples: the larger, `[1]`.
    Max,
}

impl Statistic {
    /// Every statistic, in the order of a [`Statistics`] set (and of the all-reduce's packing).
    pub const ALL: &'static [Statistic] = &[
        Statistic::SqNorm,
        Statistic::Dot(Direction::Gradient),
        Statistic::Dot(Direction::PreviousGradient),
        Statistic::Dot(Direction::Update),
        Statistic::SumSq,
        Statistic::AbsMax,
        #[cfg(test)]
        Statistic::SumCubes,
    ];

    /// How two parts of a batch combine.
    pub const fn combine(self) -> Combine {
        match self {
            Statistic::SqNorm | Statistic::Dot(_) => Combine::Concatenate,
            #[cfg(test)]
            Statistic::SumCubes => Combine::Concatenate,
            Statistic::SumSq => Combine::Add,
            Statistic::AbsMax => Combine::Max,
        }
    }

    /// The statistic as a formula, for messages.
    pub const fn formula(self) -> &'static str {
        match self {
            Statistic::SqNorm => "‖g_n‖²",
            Statistic::Dot(Direction::Gradient) => "⟨g_n, ∇L⟩",
            Statistic::Dot(Direction::PreviousGradient) => "⟨g_n, ∇L_{t−1}⟩",
            Statistic::Dot(Direction::Update) => "⟨g_n, θ_{s+1} − θ_s⟩",
            Statistic::SumSq => "Σ_n g_n²",
            Statistic::AbsMax => "max |g|",
            #[cfg(test)]
            Statistic::SumCubes => "Σ_j g_{n,j}³",
        }
    }

    /// Its position in [`Statistic::ALL`] (the bit of a [`Statistics`] set).
    const fn bit(self) -> u32 {
        match self {
            Statistic::SqNorm => 0,
            Statistic::Dot(Direction::Gradient) => 1,
            Statistic::Dot(Direction::PreviousGradient) => 2,
            Statistic::Dot(Direction::Update) => 3,
            Statistic::SumSq => 4,
            Statistic::AbsMax => 5,
            #[cfg(test)]
            Statistic::SumCubes => 6,
        }
    }
}

/// A set of [`Statistic`]s (`Copy`, usable in constants).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Statistics(u32);

impl Statistics {
    /// No statistic.
    pub const NONE: Self = Self(0);

    /// `statistic` alone.
    pub const fn of(statistic: Statistic) -> Self {
        Self(1 << statistic.bit())
    }

    /// This set and `statistic`.
    pub const fn with(self, statistic: Statistic) -> Self {
        Self(self.0 | 1 << statistic.bit())
    }

    /// This set without `statistic`.
    pub const fn without(self, statistic: Statistic) -> Self {
        Self(self.0 & !(1 << statistic.bit()))
    }

    /// The union of two sets.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether `statistic` is in the set.
    pub const fn contains(self, statistic: Statistic) -> bool {
        self.0 & 1 << statistic.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The statistics in the set, in [`Statistic::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Statistic> {
        Statistic::ALL
            .iter()
            .copied()
            .filter(move |s| self.contains(*s))
    }

    /// The set as one number (the all-reduce compares the workers' sets by it).
    pub(crate) const fn bits(self) -> u32 {
        self.0
    }
}

impl FromIterator<Statistic> for Statistics {
    fn from_iter<I: IntoIterator<Item = Statistic>>(iter: I) -> Self {
        iter.into_iter().fold(Self::NONE, Self::with)
    }
}

impl std::fmt::Debug for Statistics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The per-sample statistics one step needs, gathered from every quantity so that a source
/// computes them in one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerSampleNeeds {
    /// The reduced statistics.
    pub statistics: Statistics,
    /// The per-sample gradient elements themselves (histograms), in chunks.
    pub elements: bool,
}

impl PerSampleNeeds {
    /// No per-sample statistic.
    pub const NONE: Self = Self {
        statistics: Statistics::NONE,
        elements: false,
    };

    /// The gradient elements alone.
    pub const ELEMENTS: Self = Self {
        statistics: Statistics::NONE,
        elements: true,
    };

    /// `statistic` alone.
    pub const fn of(statistic: Statistic) -> Self {
        Self {
            statistics: Statistics::of(statistic),
            elements: false,
        }
    }

    /// These needs and `statistic`.
    pub const fn with(self, statistic: Statistic) -> Self {
        Self {
            statistics: self.statistics.with(statistic),
            ..self
        }
    }

    /// Whether `statistic` is needed.
    pub const fn contains(&self, statistic: Statistic) -> bool {
        self.statistics.contains(statistic)
    }

    /// Whether anything is needed.
    pub const fn any(&self) -> bool {
        !self.statistics.is_empty() || self.elements
    }

    /// The union of two needs.
    pub const fn union(self, other: Self) -> Self {
        Self {
            statistics: self.statistics.union(other.statistics),
            elements: self.elements || other.elements,
        }
    }
}

/// Reduced per-sample statistics of one step: for each statistic computed, one tensor per
/// parameter in snapshot order.
#[derive(Debug, Clone, Default)]
pub struct PerSampleStats {
    /// Batch size `B`.
    pub batch_size: usize,
    values: BTreeMap<Statistic, Vec<Tensor<1>>>,
    /// What the source wants the user to know about how it computed these (e.g. that
    /// [`PerSample::auto`](crate::PerSample::auto) fell back to single-sample passes, and
    /// why); the Cockpit turns each distinct note into one warning.
    pub notes: Vec<String>,
}

impl PerSampleStats {
    /// No statistic yet, for a batch of `batch_size`.
    pub fn new(batch_size: usize) -> Self {
        Self {
            batch_size,
            ..Self::default()
        }
    }

    /// These statistics and `statistic`'s per-parameter `values` (replacing any before).
    pub fn with(mut self, statistic: Statistic, values: Vec<Tensor<1>>) -> Self {
        self.insert(statistic, values);
        self
    }

    /// Sets `statistic`'s per-parameter `values`.
    pub fn insert(&mut self, statistic: Statistic, values: Vec<Tensor<1>>) {
        self.values.insert(statistic, values);
    }

    /// `statistic`'s value per parameter, where it was computed.
    pub fn get(&self, statistic: Statistic) -> Option<&[Tensor<1>]> {
        self.values.get(&statistic).map(Vec::as_slice)
    }

    /// Takes `statistic`'s values out.
    pub fn remove(&mut self, statistic: Statistic) -> Option<Vec<Tensor<1>>> {
        self.values.remove(&statistic)
    }

    /// The statistics computed.
    pub fn statistics(&self) -> Statistics {
        self.values.keys().copied().collect()
    }

    /// Every statistic computed and its values, in [`Statistic::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Statistic, &[Tensor<1>])> {
        self.values.iter().map(|(s, v)| (*s, v.as_slice()))
    }

    /// The statistics with every tensor moved to `device`.
    pub fn to_device(self, device: &Device) -> Self {
        Self {
            values: self
                .values
                .into_iter()
                .map(|(s, v)| (s, v.into_iter().map(|t| t.to_device(device)).collect()))
                .collect(),
            ..self
        }
    }

    /// The device of the first tensor held (`None` if there is none).
    pub fn device(&self) -> Option<Device> {
        self.values.values().flatten().next().map(Tensor::device)
    }
}

/// `parts` in order as one tensor: a single part as it is (burn's `cat` of one tensor is a
/// copy: one slice assignment on a CubeCL device where its fusion does not fold it into other
/// element-wise work), several through [`crate::readback::gathered`] (one packing launch per
/// sixteen parts where `cockpit-kernels` runs).
fn concatenated(mut parts: Vec<Tensor<1>>) -> Tensor<1> {
    if parts.len() == 1
        && let Some(part) = parts.pop()
    {
        return part;
    }
    let mut groups = crate::readback::gathered(parts);
    match groups.len() {
        1 => groups.remove(0),
        _ => Tensor::cat(groups, 0),
    }
}

/// `parts` of one parameter's statistic, in sample order, combined as `combine` says.
pub(crate) fn combine_parts(combine: Combine, parts: Vec<Tensor<1>>) -> Option<Tensor<1>> {
    match combine {
        _ if parts.is_empty() => None,
        Combine::Concatenate => Some(concatenated(parts)),
        Combine::Add => parts.into_iter().reduce(|a, b| a + b),
        Combine::Max => Some(crate::reduce::max_nonnegative(Tensor::cat(parts, 0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_what_was_put_in_it() {
        let set = Statistics::of(Statistic::SqNorm).with(Statistic::Dot(Direction::Gradient));
        assert!(set.contains(Statistic::SqNorm));
        assert!(set.contains(Statistic::Dot(Direction::Gradient)));
        assert!(!set.contains(Statistic::Dot(Direction::PreviousGradient)));
        assert!(!set.contains(Statistic::SumSq));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Statistic::SqNorm, Statistic::Dot(Direction::Gradient)]
        );
        assert!(
            set.without(Statistic::SqNorm)
                .without(Statistic::Dot(Direction::Gradient))
                .is_empty()
        );
        let all: Statistics = Statistic::ALL.iter().copied().collect();
        assert_eq!(all.iter().collect::<Vec<_>>(), Statistic::ALL);
        // Every statistic has its own bit.
        for (i, s) in Statistic::ALL.iter().copied().enumerate() {
            assert_eq!(s.bit() as usize, i);
        }
    }
}
