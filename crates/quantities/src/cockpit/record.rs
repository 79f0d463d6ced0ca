//! The Cockpit and its run record: values written as they come, the history kept out of
//! memory, checkpoints of the carried state, and a resume that goes on exactly.

use std::path::Path;

use burn::module::Module;

use super::base::{Cockpit, ParamSet};
use crate::quantity::{Carried, CarriedError};
use crate::record::{BytesReader, CodecError, RecordReader, RunRecord, export_log};
use crate::{CockpitError, Output, Snapshot};

/// The owner of the Cockpit's own part of a saved state.
const COCKPIT: &str = "Cockpit";
const UPDATE_CHECK: &str = "Cockpit (update check)";
const PREVIOUS: &str = "Cockpit (previous gradients)";

impl Cockpit {
    /// Writes every call's values into `record` as they come (and every epoch entry), and
    /// keeps no history in memory: [`Cockpit::output`] holds the parameters' names only,
    /// [`Cockpit::latest`] the latest call's values, the record everything. Memory no longer
    /// grows with the number of steps. [`Cockpit::write`] then exports the record.
    ///
    /// Checkpoints for a resume: [`Cockpit::checkpoint`] beside the model's and optimizer's,
    /// and [`Cockpit::resume`] to go on from one.
    pub fn with_record(mut self, record: RunRecord) -> Self {
        self.record = Some(record);
        self
    }

    /// [`Cockpit::with_record`] on a Cockpit in use (an adapter's), from the next call on.
    pub fn set_record(&mut self, record: RunRecord) {
        self.record = Some(record);
    }

    /// The record the values go to ([`Cockpit::with_record`]).
    pub fn record(&self) -> Option<&RunRecord> {
        self.record.as_ref()
    }

    /// The record the values go to, to note more in it ([`RunRecord::mark_epoch`]).
    pub fn record_mut(&mut self) -> Option<&mut RunRecord> {
        self.record.as_mut()
    }

    /// Files a call's values into the output: all of them without a record, only the
    /// parameters' names with one.
    pub(super) fn keep(&mut self, values: &Output) {
        if self.record.is_none() {
            self.output.merge(values.clone());
        } else if self.output.parameter_names().is_empty() && !values.parameter_names().is_empty() {
            self.output
                .set_parameter_names(values.parameter_names().to_vec());
        }
    }

    /// [`Cockpit::write`] with a record: commits it and exports it as a Cockpit JSON log.
    pub(super) fn write_from_record(&mut self, path: &Path) -> Result<(), CockpitError> {
        let Some(record) = &mut self.record else {
            return Ok(());
        };
        record.commit()?;
        let mut reader = RecordReader::open(record.path())?;
        export_log(&mut reader, path)?;
        if let Some(examples) = self.examples().filter(|r| !r.is_empty()) {
            crate::examples::write_table(crate::examples::table_path(path), examples)?;
        }
        Ok(())
    }

    /// Saves what the Cockpit and each quantity carry to the next step (the reference
    /// parameters of Distance, the previous step's of UpdateSize and Alpha, the histogram
    /// ranges, the update check, the random state of HessMaxEV) into the record, under the next
    /// step to track, and commits the record. Call it where the model and the optimizer are
    /// checkpointed, after the optimizer step: a run resumed from that checkpoint
    /// ([`Cockpit::resume`] with the same step) goes on with the same values as one never
    /// stopped. A deferred read is completed first.
    ///
    /// Not carried: the per-example record of `Examples` (it starts over), and Alpha's start
    /// point under an optimizer other than plain SGD (that step's α is missing after the
    /// resume).
    ///
    /// # Errors
    ///
    /// [`CockpitError::NoRecord`] without a record, [`CockpitError::QuantitiesFailed`] if the
    /// device cannot be read, [`CockpitError::Record`] if the record refuses the write.
    ///
    /// # Cost
    ///
    /// One read of each carried snapshot (Distance's reference is the model's size; UpdateSize
    /// and Alpha add one each on a step they are due), written to the record.
    pub fn checkpoint(&mut self) -> Result<usize, CockpitError> {
        let next = self.next_step();
        self.checkpoint_at(next)
    }

    /// [`Cockpit::checkpoint`] for a resume at `next`, a step after the last one tracked (a
    /// loop that tracks every n-th step and checkpoints between two tracked steps).
    ///
    /// # Errors
    ///
    /// As [`Cockpit::checkpoint`], and [`CockpitError::StepNotIncreasing`] if `next` is not
    /// after the last step tracked.
    pub fn checkpoint_at(&mut self, next: usize) -> Result<usize, CockpitError> {
        self.flush()?;
        if self.record.is_none() {
            return Err(CockpitError::NoRecord);
        }
        if let Some(previous) = self.last_step
            && next <= previous
        {
            return Err(CockpitError::StepNotIncreasing {
                previous,
                step: next,
            });
        }
        let failed = |err: crate::QuantityError| CockpitError::QuantitiesFailed {
            step: next,
            failures: vec![("checkpoint".to_string(), err)],
        };
        let mut own = Carried::new().with_numbers("last_step", vec![next as f64 - 1.0]);
        if let Some(set) = &self.param_set {
            own = own
                .with_numbers("first_step", vec![set.first_step as f64])
                .with_signature(
                    "model",
                    set.names
                        .iter()
                        .map(String::as_str)
                        .zip(set.shapes.iter().map(Vec::as_slice)),
                );
        }
        let mut parts = vec![
            (COCKPIT.to_string(), own),
            (
                UPDATE_CHECK.to_string(),
                self.update_check.carry().map_err(failed)?,
            ),
            (
                PREVIOUS.to_string(),
                self.previous_grads.carry().map_err(failed)?,
            ),
        ];
        for quantity in &self.quantities {
            let carried = quantity
                .carry()
                .map_err(|err| CockpitError::QuantitiesFailed {
                    step: next,
                    failures: vec![(quantity.name().to_string(), err)],
                })?;
            parts.push((quantity.name().to_string(), carried));
        }
        let mut bytes = Vec::new();
        crate::quantity::carried_put_len(&mut bytes, parts.len());
        for (owner, carried) in &parts {
            crate::quantity::carried_put_text(&mut bytes, owner);
            carried.encode(&mut bytes);
        }
        if let Some(record) = &mut self.record {
            record.save_state(next, &bytes)?;
        }
        Ok(next)
    }

    /// Goes on with a run from the state [`Cockpit::checkpoint`] saved in `record` for `step`
    /// (the step the model's checkpoint resumes at): every quantity's carried state is taken
    /// back on `model`'s device, steps are numbered on from `step`, Distance measures from the
    /// run's true initial parameters, and the record's values from `step` on are deleted (the
    /// resumed run writes them again: superseded, never duplicated). Build this Cockpit with
    /// the same quantities and settings as the stopped one.
    ///
    /// # Errors
    ///
    /// [`CockpitError::Record`] if the record has no state for `step` (naming the saved
    /// steps), [`CockpitError::Resume`] if the state is of other quantities or another model
    /// (naming the first difference).
    pub fn resume<M: Module>(
        mut self,
        record: RunRecord,
        step: usize,
        model: &M,
    ) -> Result<Self, CockpitError> {
        self.resume_from(record, step, model)?;
        Ok(self)
    }

    /// [`Cockpit::resume`] on a Cockpit held by reference (an adapter's). On an error the
    /// Cockpit is left in an unspecified state: build a new one.
    ///
    /// # Errors
    ///
    /// As [`Cockpit::resume`].
    pub fn resume_from<M: Module>(
        &mut self,
        mut record: RunRecord,
        step: usize,
        model: &M,
    ) -> Result<(), CockpitError> {
        let resume = |reason| CockpitError::Resume { step, reason };
        let bytes = record.load_state(step)?;
        let mut parts = decode_state(&bytes).map_err(|e| resume(CarriedError::Damaged(e)))?;
        let params = Snapshot::of_params(model);
        if params.is_empty() {
            return Err(CockpitError::EmptyModel);
        }
        let mut take = |owner: &str| {
            parts
                .iter()
                .position(|(o, _)| o == owner)
                .map(|i| parts.remove(i).1)
                .ok_or_else(|| CarriedError::Missing {
                    owner: owner.into(),
                    part: "(its whole state: the run had other quantities)".into(),
                })
        };
        let own = take(COCKPIT).map_err(resume)?;
        if own.has("model") {
            own.check_signature(COCKPIT, "model", &params)
                .map_err(resume)?;
        }
        let last = own.number(COCKPIT, "last_step").map_err(resume)?;
        self.last_step = (last >= 0.0).then_some(last as usize);
        self.param_set = match own.has("first_step") {
            true => Some(ParamSet {
                first_step: own.number(COCKPIT, "first_step").map_err(resume)? as usize,
                ids: params.ids(),
                names: params.names(),
                shapes: params.entries().iter().map(|e| e.shape.clone()).collect(),
            }),
            false => None,
        };
        let check = take(UPDATE_CHECK).map_err(resume)?;
        self.update_check.restore(&check, &params).map_err(resume)?;
        let previous = take(PREVIOUS).map_err(resume)?;
        self.previous_grads
            .restore(&previous, &params)
            .map_err(resume)?;
        for quantity in &mut self.quantities {
            let carried = take(quantity.name()).map_err(resume)?;
            quantity.restore(&carried, &params).map_err(resume)?;
        }
        if let Some((owner, _)) = parts.first() {
            return Err(resume(CarriedError::Missing {
                owner: owner.clone(),
                part: "(a quantity of the stopped run this Cockpit lacks)".into(),
            }));
        }
        if self.last_step.is_some() {
            self.output.set_parameter_names(params.names());
        }
        record.truncate_from(step)?;
        self.record = Some(record);
        Ok(())
    }
}

fn decode_state(bytes: &[u8]) -> Result<Vec<(String, Carried)>, CodecError> {
    let mut r = BytesReader { bytes, at: 0 };
    let n = r.len(2)?;
    let mut parts = Vec::with_capacity(n);
    for _ in 0..n {
        let owner = crate::quantity::carried_text(&mut r)?;
        parts.push((owner, Carried::decode(&mut r)?));
    }
    if r.at != bytes.len() {
        return Err(CodecError::Length((bytes.len() - r.at) as u64));
    }
    Ok(parts)
}
