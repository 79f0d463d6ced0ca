//! [`Carried`]: what a quantity (or the Cockpit) carries from one step to the next, as host
//! numbers, so that a run resumed from a checkpoint goes on exactly as if never stopped.

use std::collections::BTreeMap;

use burn::tensor::{DType, Tensor, TensorData};

use crate::persample::readback::read_values;
use crate::record::{BytesReader, CodecError, put_floats, put_u64};
use crate::{QuantityError, Snapshot};
use cockpit_persample::ParamEntry;

/// Why a saved state cannot be taken back ([`CockpitError::Resume`](crate::CockpitError::Resume)).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CarriedError {
    /// A part the quantity saves is not in the state (a state of another configuration).
    #[error("`{owner}` has no saved `{part}` (was the run started with other quantities?)")]
    Missing {
        /// The quantity's key, or `Cockpit`.
        owner: String,
        /// The part.
        part: String,
    },
    /// The saved parameters are not the model's: the first difference.
    #[error("the record is of another model: {0}")]
    OtherModel(String),
    /// The state's bytes are damaged.
    #[error("the saved state is damaged")]
    Damaged(#[source] CodecError),
    /// The parameters could not be rebuilt on the device.
    #[error("the saved parameters could not be put back on the device: {0}")]
    Device(String),
}

/// One saved parameter: its dotted name, shape and values.
#[derive(Debug, Clone, PartialEq)]
pub struct HostParam {
    /// Dotted name (`layers.0.weight`).
    pub name: String,
    /// Shape in burn's layout.
    pub shape: Vec<usize>,
    /// Values, flattened.
    pub data: Vec<f64>,
}

/// One named part of a [`Carried`] state.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Numbers(Vec<f64>),
    Params(Vec<HostParam>),
}

/// What a quantity carries to its next step ([`Quantity::carry`](super::Quantity::carry)):
/// named lists of numbers and named parameter snapshots, read to the host. Saved in the run
/// record at a checkpoint; [`Quantity::restore`](super::Quantity::restore) takes it back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Carried {
    parts: BTreeMap<String, Part>,
}

impl Carried {
    /// Nothing carried.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is carried.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Adds numbers under `name`.
    pub fn with_numbers(mut self, name: &str, numbers: Vec<f64>) -> Self {
        self.parts.insert(name.into(), Part::Numbers(numbers));
        self
    }

    /// Adds a parameter snapshot under `name`, read to the host (one read).
    ///
    /// # Errors
    ///
    /// [`QuantityError`] if the device cannot be read.
    pub fn with_snapshot(mut self, name: &str, snapshot: &Snapshot) -> Result<Self, QuantityError> {
        let flat = read_values(snapshot.flatten())?;
        let mut params = Vec::with_capacity(snapshot.len());
        let mut at = 0;
        for entry in snapshot.entries() {
            let n = entry.numel();
            params.push(HostParam {
                name: entry.name.clone(),
                shape: entry.shape.clone(),
                data: flat[at..at + n].to_vec(),
            });
            at += n;
        }
        self.parts.insert(name.into(), Part::Params(params));
        Ok(self)
    }

    /// Adds a one-dimensional tensor under `name`, read to the host with its float type.
    ///
    /// # Errors
    ///
    /// [`QuantityError`] if the device cannot be read.
    pub fn with_tensor(self, name: &str, tensor: &Tensor<1>) -> Result<Self, QuantityError> {
        let code = dtype_code(tensor.dtype());
        let values = read_values(tensor.clone())?;
        Ok(self.with_numbers(name, [vec![code], values].concat()))
    }

    /// The tensor saved under `name` ([`Carried::with_tensor`]), rebuilt on `device` in its
    /// float type.
    ///
    /// # Errors
    ///
    /// [`CarriedError::Missing`] if none was saved.
    pub fn tensor(
        &self,
        owner: &str,
        name: &str,
        device: &burn::tensor::Device,
    ) -> Result<Tensor<1>, CarriedError> {
        let Some((code, values)) = self.numbers(owner, name)?.split_first() else {
            return Err(missing(owner, name));
        };
        let data = TensorData::new(values.to_vec(), [values.len()]);
        Ok(Tensor::<1>::from_data(data, (device, dtype_of(*code))))
    }

    /// Adds parameters' names and shapes under `name` (no values, no read): what
    /// [`Carried::check_signature`] compares a model with.
    pub fn with_signature<'a>(
        mut self,
        name: &str,
        params: impl IntoIterator<Item = (&'a str, &'a [usize])>,
    ) -> Self {
        let params = params
            .into_iter()
            .map(|(name, shape)| HostParam {
                name: name.to_string(),
                shape: shape.to_vec(),
                data: Vec::new(),
            })
            .collect();
        self.parts.insert(name.into(), Part::Params(params));
        self
    }

    /// Whether `like` has the names and shapes saved under `name`.
    ///
    /// # Errors
    ///
    /// [`CarriedError::OtherModel`] naming the first difference.
    pub fn check_signature(
        &self,
        owner: &str,
        name: &str,
        like: &Snapshot,
    ) -> Result<(), CarriedError> {
        let Some(Part::Params(saved)) = self.parts.get(name) else {
            return Err(missing(owner, name));
        };
        check_model(saved, like, false)
    }

    /// Whether a part named `name` is saved.
    pub fn has(&self, name: &str) -> bool {
        self.parts.contains_key(name)
    }

    /// The numbers saved under `name`.
    ///
    /// # Errors
    ///
    /// [`CarriedError::Missing`] (naming `owner`) if there are none.
    pub fn numbers(&self, owner: &str, name: &str) -> Result<&[f64], CarriedError> {
        match self.parts.get(name) {
            Some(Part::Numbers(n)) => Ok(n),
            _ => Err(missing(owner, name)),
        }
    }

    /// The one number saved under `name`.
    ///
    /// # Errors
    ///
    /// As [`Carried::numbers`], also where more or fewer than one number was saved.
    pub fn number(&self, owner: &str, name: &str) -> Result<f64, CarriedError> {
        match self.numbers(owner, name)? {
            [x] => Ok(*x),
            _ => Err(missing(owner, name)),
        }
    }

    /// The snapshot saved under `name`, rebuilt on the device of `like` (the model's
    /// parameters now) with its ids, dtype and order.
    ///
    /// # Errors
    ///
    /// [`CarriedError::Missing`] if none was saved, [`CarriedError::OtherModel`] naming the
    /// first parameter whose name or shape differs.
    pub fn snapshot(
        &self,
        owner: &str,
        name: &str,
        like: &Snapshot,
    ) -> Result<Snapshot, CarriedError> {
        let Some(Part::Params(saved)) = self.parts.get(name) else {
            return Err(missing(owner, name));
        };
        check_model(saved, like, true)?;
        let entries = like
            .entries()
            .iter()
            .zip(saved)
            .map(|(entry, host)| {
                let data = TensorData::new(host.data.clone(), [host.data.len()]);
                let value =
                    Tensor::<1>::from_data(data, (&entry.value.device(), entry.value.dtype()));
                ParamEntry {
                    id: entry.id,
                    name: entry.name.clone(),
                    shape: entry.shape.clone(),
                    value,
                }
            })
            .collect();
        Ok(Snapshot::from_entries(entries))
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_len(out, self.parts.len());
        for (name, part) in &self.parts {
            put_text(out, name);
            match part {
                Part::Numbers(n) => {
                    out.push(0);
                    put_floats(out, n);
                }
                Part::Params(params) => {
                    out.push(1);
                    put_len(out, params.len());
                    for p in params {
                        put_text(out, &p.name);
                        put_len(out, p.shape.len());
                        for &d in &p.shape {
                            put_len(out, d);
                        }
                        put_floats(out, &p.data);
                    }
                }
            }
        }
    }

    pub(crate) fn decode(r: &mut BytesReader<'_>) -> Result<Self, CodecError> {
        let n = r.len(2)?;
        let mut parts = BTreeMap::new();
        for _ in 0..n {
            let name = text(r)?;
            let part = match r.byte()? {
                0 => Part::Numbers(r.floats()?),
                1 => {
                    let count = r.len(3)?;
                    let mut params = Vec::with_capacity(count);
                    for _ in 0..count {
                        let name = text(r)?;
                        let rank = r.len(1)?;
                        let shape = (0..rank)
                            .map(|_| r.u64().map(|d| d as usize))
                            .collect::<Result<_, _>>()?;
                        params.push(HostParam {
                            name,
                            shape,
                            data: r.floats()?,
                        });
                    }
                    Part::Params(params)
                }
                tag => return Err(CodecError::UnknownTag(tag)),
            };
            parts.insert(name, part);
        }
        Ok(Self { parts })
    }
}

/// Refuses saved parameters that are not `like`'s, naming the first difference.
pub(crate) fn check_model(
    saved: &[HostParam],
    like: &Snapshot,
    with_values: bool,
) -> Result<(), CarriedError> {
    for (i, entry) in like.entries().iter().enumerate() {
        let Some(host) = saved.get(i) else {
            return Err(CarriedError::OtherModel(format!(
                "the model has `{}`, the record has no parameter at position {i}",
                entry.name
            )));
        };
        if host.name != entry.name {
            return Err(CarriedError::OtherModel(format!(
                "parameter {i} is `{}` in the model and `{}` in the record",
                entry.name, host.name
            )));
        }
        if host.shape != entry.shape || (with_values && host.data.len() != entry.numel()) {
            return Err(CarriedError::OtherModel(format!(
                "`{}` has shape {:?} in the model and {:?} in the record",
                entry.name, entry.shape, host.shape
            )));
        }
    }
    if let Some(extra) = saved.get(like.len()) {
        return Err(CarriedError::OtherModel(format!(
            "the record has `{}`, which the model lacks",
            extra.name
        )));
    }
    Ok(())
}

fn dtype_code(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 64.0,
        DType::F16 => 16.0,
        DType::BF16 => 17.0,
        _ => 32.0,
    }
}

fn dtype_of(code: f64) -> DType {
    match code as u32 {
        64 => DType::F64,
        16 => DType::F16,
        17 => DType::BF16,
        _ => DType::F32,
    }
}

fn missing(owner: &str, part: &str) -> CarriedError {
    CarriedError::Missing {
        owner: owner.into(),
        part: part.into(),
    }
}

pub(crate) fn put_len(out: &mut Vec<u8>, n: usize) {
    put_u64(out, n as u64);
}

pub(crate) fn put_text(out: &mut Vec<u8>, text: &str) {
    put_len(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

pub(crate) fn text(r: &mut BytesReader<'_>) -> Result<String, CodecError> {
    let n = r.len(1)?;
    let bytes = &r.bytes[r.at..r.at + n];
    r.at += n;
    String::from_utf8(bytes.to_vec()).map_err(|e| CodecError::Text(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_round_trips_and_refuses_another_model() {
        let device = burn::tensor::Device::flex();
        let snap = |names: &[(&str, usize)]| {
            Snapshot::from_entries(
                names
                    .iter()
                    .enumerate()
                    .map(|(i, (name, n))| ParamEntry {
                        id: burn::module::ParamId::new(),
                        name: (*name).into(),
                        shape: vec![*n],
                        value: Tensor::<1>::from_data(
                            TensorData::new(
                                (0..*n).map(|k| (k + i) as f32 * 0.1).collect::<Vec<_>>(),
                                [*n],
                            ),
                            &device,
                        ),
                    })
                    .collect(),
            )
        };
        let model = snap(&[("a.weight", 3), ("a.bias", 2)]);
        let carried = Carried::new()
            .with_numbers("range", vec![-1.0, 2.5])
            .with_snapshot("init", &model)
            .unwrap();
        let mut bytes = Vec::new();
        carried.encode(&mut bytes);
        let back = Carried::decode(&mut BytesReader {
            bytes: &bytes,
            at: 0,
        })
        .unwrap();
        assert_eq!(back, carried);
        let rebuilt = back.snapshot("Distance", "init", &model).unwrap();
        assert_eq!(
            read_values(rebuilt.flatten()).unwrap(),
            read_values(model.flatten()).unwrap()
        );
        assert_eq!(rebuilt.ids(), model.ids());
        let other = snap(&[("a.weight", 3), ("a.bias", 4)]);
        let err = back.snapshot("Distance", "init", &other).unwrap_err();
        assert!(err.to_string().contains("`a.bias` has shape [4]"), "{err}");
        let renamed = snap(&[("b.weight", 3), ("a.bias", 2)]);
        let err = back.snapshot("Distance", "init", &renamed).unwrap_err();
        assert!(err.to_string().contains("`b.weight` in the model"), "{err}");
        assert!(matches!(
            back.number("GradHist1d", "range"),
            Err(CarriedError::Missing { .. })
        ));
    }
}
