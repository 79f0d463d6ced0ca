//! Errors of the burn-train adapter.

use cockpit_quantities::CockpitError;
use cockpit_quantities::persample::PerSampleError;

/// Why a Cockpit cannot be attached to a burn-train run. Every variant is raised before
/// training starts, by [`CockpitLearner`](crate::CockpitLearner)'s constructors and
/// [`CockpitLearner::instrument`](crate::CockpitLearner::instrument).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// A quantity cannot run with the declared optimizer (CABS and EarlyStopping assume plain
    /// SGD, as in Cockpit).
    #[error("{quantity} cannot run with {optimizer:?}: {reason}")]
    UnsupportedForOptimizer {
        /// The quantity's Cockpit name.
        quantity: String,
        /// The declared optimizer.
        optimizer: cockpit_quantities::OptimizerInfo,
        /// Why.
        reason: &'static str,
    },
    /// The configuration has curvature quantities but the model was instrumented without a
    /// way to replay its batch.
    #[error(
        "{quantities:?} need Hessian-vector products on the step's batch: instrument the model \
         with `CockpitLearner::instrument_with_recorded_curvature` (exact diagonals for models \
         built from the per-sample drop-ins) or `CockpitLearner::instrument_with_curvature` (its \
         train input must be `Clone`)"
    )]
    CurvatureNeedsReplay {
        /// The curvature quantities configured.
        quantities: Vec<String>,
    },
    /// [`CockpitLearner::write`](crate::CockpitLearner::write) without an artifact directory.
    #[error(
        "no artifact directory to write the Cockpit log to (CockpitLearner::with_artifact_dir)"
    )]
    NoArtifactDir,
    /// No quantity was configured.
    #[error("no Cockpit quantity configured")]
    NoQuantities,
    /// The Cockpit itself refused the configuration or could not write its log.
    #[error(transparent)]
    Cockpit(#[from] CockpitError),
    /// The TensorBoard event file could not be created
    /// ([`CockpitLearner::with_tensorboard`](crate::CockpitLearner::with_tensorboard)).
    #[error(transparent)]
    TensorBoard(#[from] cockpit_tensorboard::TensorBoardError),
    /// A data-parallel group without a device.
    #[error("a data-parallel group needs at least one device")]
    NoDevices,
    /// The data-parallel group cannot be watched as declared: the collective could not be set
    /// up (its error as the source).
    #[error("data-parallel training cannot be watched as declared")]
    DataParallel(#[source] PerSampleError),
    /// The run record could not be opened or created.
    #[error(transparent)]
    Record(#[from] cockpit_quantities::record::RecordError),
    /// A resume asked for an epoch whose end the record did not note.
    #[error(
        "the run record `{}` has no Cockpit state for the end of epoch {epoch} (was the run \
         given `with_record`, and did that epoch end?)",
        path.display()
    )]
    NoEpochState {
        /// The record.
        path: std::path::PathBuf,
        /// The epoch asked for.
        epoch: usize,
    },
    /// The artifact directory could not be created.
    #[error("cannot create the artifact directory `{}`", path.display())]
    ArtifactDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
