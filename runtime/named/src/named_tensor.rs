//! [`NamedTensor`]: a [`HostTensor`] plus optional coordinate labels per
//! axis, the operand and result type of the eager pointwise ops.
//!
//! Invariants kept by every constructor: one label slot per axis; an axis
//! with labels has exactly one label per position, and no label twice.

use std::collections::HashSet;

use crate::error::NamedError;
use nax_host::DType;
use nax_host::HostTensor;

/// A host tensor with coordinate labels: a [`HostTensor`] (dtype, shape, a
/// name or none per axis, row-major elements) and, per axis, either no
/// labels or one unique label per position, as xarray's coordinates.
///
/// Pointwise arithmetic and comparisons between named tensors pair axes by
/// name, broadcast, and join labelled axes by label: see
/// [`NamedTensor::binary`] and the rules in `docs/src/named-tensors.md`.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    tensor: HostTensor,
    coords: Vec<Option<Vec<String>>>,
}

impl NamedTensor {
    /// A named tensor of `tensor` with these coordinate labels, one entry
    /// per axis (`None` for an unlabelled axis). Errors: the number of
    /// entries is not the rank ([`NamedError::CoordsRank`]), an axis has
    /// a number of labels other than its size
    /// ([`NamedError::LabelCount`]), or a label repeats within an axis
    /// ([`NamedError::DuplicateLabel`]).
    pub fn new(tensor: HostTensor, coords: Vec<Option<Vec<String>>>) -> Result<NamedTensor, NamedError> {
        if coords.len() != tensor.rank() {
            return Err(NamedError::CoordsRank { given: coords.len(), names: tensor.names().to_vec() });
        }
        for (axis, labels) in coords.iter().enumerate() {
            if let Some(labels) = labels {
                check_labels(&tensor, axis, labels)?;
            }
        }
        Ok(NamedTensor { tensor, coords })
    }

    /// A named tensor built from parts already known to be consistent (the
    /// result of an op): `coords` has one entry per axis, each of the
    /// axis's size, without repeats.
    pub(crate) fn from_parts(tensor: HostTensor, coords: Vec<Option<Vec<String>>>) -> NamedTensor {
        NamedTensor { tensor, coords }
    }

    /// The same tensor with the labels of axis `axis` set to `labels`.
    /// Errors: `axis` is not below the rank
    /// ([`NamedError::AxisOutOfRange`]), or as in [`NamedTensor::new`].
    pub fn with_labels<I, S>(mut self, axis: usize, labels: I) -> Result<NamedTensor, NamedError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let labels: Vec<String> = labels.into_iter().map(Into::into).collect();
        let rank = self.rank();
        if axis >= rank {
            return Err(NamedError::AxisOutOfRange { axis, rank });
        }
        check_labels(&self.tensor, axis, &labels)?;
        if let Some(slot) = self.coords.get_mut(axis) {
            *slot = Some(labels);
        }
        Ok(self)
    }

    /// The same tensor without coordinate labels.
    pub fn without_labels(self) -> NamedTensor {
        NamedTensor::from(self.tensor)
    }

    /// The host tensor: dtype, shape, names and elements.
    pub fn tensor(&self) -> &HostTensor {
        &self.tensor
    }

    /// The host tensor, dropping the labels.
    pub fn into_tensor(self) -> HostTensor {
        self.tensor
    }

    /// The host tensor and the labels of each axis.
    pub fn into_parts(self) -> (HostTensor, Vec<Option<Vec<String>>>) {
        (self.tensor, self.coords)
    }

    /// The coordinate labels of each axis, `None` for an unlabelled one.
    pub fn coords(&self) -> &[Option<Vec<String>>] {
        &self.coords
    }

    /// The coordinate labels of axis `axis`, or `None` when it has none or
    /// does not exist.
    pub fn labels(&self, axis: usize) -> Option<&[String]> {
        self.coords.get(axis)?.as_deref()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.tensor.dtype()
    }

    /// The size of each axis.
    pub fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }

    /// The name of each axis, `None` for an unnamed one.
    pub fn names(&self) -> &[Option<String>] {
        self.tensor.names()
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.tensor.rank()
    }

    /// Every element as `f64`, row-major (see [`HostTensor::to_f64_vec`]).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.tensor.to_f64_vec()
    }
}

impl From<HostTensor> for NamedTensor {
    /// The tensor without coordinate labels.
    fn from(tensor: HostTensor) -> NamedTensor {
        let coords = vec![None; tensor.rank()];
        NamedTensor { tensor, coords }
    }
}

/// Checks that `labels` fit axis `axis` of `tensor`: one per position, no
/// repeats.
fn check_labels(tensor: &HostTensor, axis: usize, labels: &[String]) -> Result<(), NamedError> {
    let name = tensor.names().get(axis).cloned().flatten();
    let size = tensor.shape().get(axis).copied().unwrap_or(0);
    if labels.len() != size {
        return Err(NamedError::LabelCount { axis, name, size, labels: labels.len() });
    }
    let mut seen = HashSet::with_capacity(labels.len());
    match labels.iter().find(|l| !seen.insert(l.as_str())) {
        Some(label) => Err(NamedError::DuplicateLabel { axis, name, label: label.clone() }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;

    fn tensor(shape: &[usize], axis_names: &str) -> HostTensor {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        HostTensor::from_f64(DType::F32, shape.to_vec(), names(axis_names), &v).unwrap()
    }

    fn labels(s: &str) -> Option<Vec<String>> {
        Some(s.split_whitespace().map(String::from).collect())
    }

    #[test]
    fn new_checks_coords() {
        let t = NamedTensor::new(tensor(&[3, 2], "x _"), vec![labels("A B C"), None]).unwrap();
        assert_eq!(t.labels(0).unwrap(), ["A", "B", "C"]);
        assert_eq!(t.labels(1), None);
        assert_eq!(t.labels(2), None);
        assert_eq!(t.coords().len(), 2);
        assert_eq!(t.shape(), &[3, 2]);
        assert_eq!(t.names(), names("x _").as_slice());
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.rank(), 2);
        assert_eq!(t.to_f64_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);

        let e = NamedTensor::new(tensor(&[3, 2], "x _"), vec![None]).unwrap_err();
        assert!(matches!(e, NamedError::CoordsRank { given: 1, .. }), "{e}");
        assert_eq!(e.to_string(), "1 coordinate label lists given for a tensor of rank 2 [x _]");
        let e = NamedTensor::new(tensor(&[3, 2], "x _"), vec![labels("A B"), None]).unwrap_err();
        assert_eq!(e.to_string(), "axis 'x' has size 3 but 2 coordinate labels");
        let e = NamedTensor::new(tensor(&[3, 2], "x _"), vec![None, labels("A A")]).unwrap_err();
        assert_eq!(e.to_string(), "axis 1 has the coordinate label 'A' twice; the labels of an axis must be unique");
    }

    #[test]
    fn with_labels_and_conversions() {
        let t = NamedTensor::from(tensor(&[2], "i"));
        assert_eq!(t.coords(), &[None]);
        let t = t.with_labels(0, ["p", "q"]).unwrap();
        assert_eq!(t.labels(0).unwrap(), ["p", "q"]);
        let e = t.clone().with_labels(1, ["p"]).unwrap_err();
        assert_eq!(e.to_string(), "axis 1 does not exist in a tensor of rank 1");
        assert!(t.clone().with_labels(0, ["p"]).is_err());
        assert!(t.clone().with_labels(0, ["p", "p"]).is_err());
        let (host, coords) = t.clone().into_parts();
        assert_eq!(host, tensor(&[2], "i"));
        assert_eq!(coords, vec![labels("p q")]);
        assert_eq!(t.tensor(), &host);
        assert_eq!(t.clone().without_labels().coords(), &[None]);
        assert_eq!(t.into_tensor(), host);
        let s = NamedTensor::from(HostTensor::scalar_f64(DType::I64, 2.0));
        assert_eq!(s.rank(), 0);
        assert!(s.coords().is_empty());
    }
}
