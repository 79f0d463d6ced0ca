//! Curvature without double backward: Hessian-vector products from differences of gradients,
//! Cockpit's power iteration and Lanczos for the top eigenvalue, and exact curvature diagonals
//! of feed-forward nets.

mod base;
mod eigen;
mod finite_difference;
mod hutchinson;
mod merged;
mod mlp;
mod positions;
pub(crate) mod random;
mod recorded;

pub use base::{CurvatureSource, DiagonalKind, NetworkOutput, OutputLoss};
pub(crate) use eigen::lanczos_with_vector;
pub use eigen::{EigenEstimate, Target, lanczos, power_iteration};
pub use finite_difference::FiniteDifferenceHvp;
pub use hutchinson::{Hutchinson, ProbeBudget};
pub use merged::MergedCurvature;
pub use mlp::{Activation, MlpCurvature, MlpLayer};
pub use positions::{ClassAxis, PositionLoss};
pub use recorded::{
    ACTIVATION_PASSES, EXACT_COLUMNS, GgnPasses, HessianDiagonal, LINEARITY_TOLERANCE,
    LinearityVerdicts, MC_SAMPLES, RecordedCurvature, WIDENED_ROWS,
};
