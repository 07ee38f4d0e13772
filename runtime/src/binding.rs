//! Binding a host tensor to a parameter: the host-boundary rules of
//! LANGUAGE.md section 12.
//!
//! - A fully named tensor lines up with the parameter's axes by name and is
//!   transposed to match; a missing or an extra name is an error.
//! - An unnamed tensor (every axis unnamed) binds by position.
//! - A partially named tensor: its unnamed axes must all lead; the named
//!   suffix lines up by name with the parameter's axes of those names, and
//!   the unnamed run binds, in order, to the parameter's remaining axes.
//! - A parameter with an unnamed axis takes an unnamed or a partially named
//!   tensor, never a fully named one.
//! - A tensor whose names are exactly the parameter's (`[n _]` for `[n _]`)
//!   binds one to one, as identical name tuples pair in eager arithmetic:
//!   a function's result, named as its return type, can be passed to a
//!   parameter of that type whatever its unnamed axes (a decision of nax's
//!   where section 12 is silent).
//!
//! A name repeated in a parameter (`[n n]`) or a tensor pairs by occurrence:
//! the i-th `n` of the tensor with the i-th `n` of the parameter. A rank-0
//! tensor counts as unnamed. Sizes are not checked here: the caller checks
//! them against the compiled program's sizes (see the call boundary, `call.rs`);
//! ranks are.

use crate::error::RuntimeError;
use nax_host::HostTensor;
use nax_host::TensorView;

/// Binds `t` to the parameter `param` whose axes are `param_axes` (a name or
/// `None` per axis): returns `t` transposed into the parameter's axis order
/// (a view of the same memory: no copy), carrying the parameter's axis
/// names. The errors name the parameter, the axis and what was expected.
pub fn bind<'a>(param: &str, param_axes: &[Option<String>], t: &TensorView<'a>) -> Result<TensorView<'a>, RuntimeError> {
    if t.names() == param_axes {
        return Ok(t.clone());
    }
    match binding_order(param, param_axes, t.names())? {
        None => Ok(t.clone().with_names(param_axes.to_vec())?),
        Some(perm) => Ok(t.permuted(&perm)?.with_names(param_axes.to_vec())?),
    }
}

/// How a tensor whose axes are named `names` binds to the parameter
/// `param` (axes `param_axes`): for each of the parameter's axes, the
/// tensor's axis bound to it, or `None` where they bind in order. The
/// errors are [`bind`]'s.
pub fn binding_order(param: &str, param_axes: &[Option<String>], names: &[Option<String>]) -> Result<Option<Vec<usize>>, RuntimeError> {
    if names == param_axes {
        return Ok(None);
    }
    match names.iter().position(Option::is_some) {
        // Unnamed (or rank 0): by position.
        None => check_rank(param, param_axes, names).map(|()| None),
        Some(0) => by_name(param, param_axes, names).map(Some),
        Some(first_named) => partially_named(param, param_axes, names, first_named).map(Some),
    }
}

/// [`bind`] for a tensor the caller hands over (a weight, a file's
/// tensor): the tensor itself, renamed, when binding leaves it in place,
/// else its contiguous copy in the parameter's axis order.
pub fn bind_owned(param: &str, param_axes: &[Option<String>], t: HostTensor) -> Result<HostTensor, RuntimeError> {
    let bound = bind(param, param_axes, &t.view())?;
    Ok(if bound.is_contiguous() { t.with_names(param_axes.to_vec())? } else { bound.to_host()? })
}

/// The error for a tensor whose rank differs from the parameter's.
fn check_rank(param: &str, param_axes: &[Option<String>], names: &[Option<String>]) -> Result<(), RuntimeError> {
    if names.len() == param_axes.len() {
        return Ok(());
    }
    Err(RuntimeError::RankMismatch {
        param: param.to_string(),
        expected: param_axes.len(),
        actual: names.len(),
        param_axes: param_axes.to_vec(),
        tensor_names: names.to_vec(),
    })
}

/// The position in `names` of the `k`-th (from 0) occurrence of `name`
/// among the positions `from..`.
fn nth_occurrence(names: &[Option<String>], from: usize, name: &str, k: usize) -> Option<usize> {
    names.iter().enumerate().skip(from).filter(|(_, n)| n.as_deref() == Some(name)).nth(k).map(|(i, _)| i)
}

/// How many times `name` occurs in `names[from..upto]`.
fn occurrences_before(names: &[Option<String>], from: usize, upto: usize, name: &str) -> usize {
    names.get(from..upto).unwrap_or_default().iter().filter(|n| n.as_deref() == Some(name)).count()
}

/// The permutation (source axis of each parameter axis) that lines a fully
/// named tensor up with the parameter by name.
fn by_name(param: &str, param_axes: &[Option<String>], names: &[Option<String>]) -> Result<Vec<usize>, RuntimeError> {
    let mut perm = Vec::with_capacity(param_axes.len());
    let mut used = vec![false; names.len()];
    for (i, axis) in param_axes.iter().enumerate() {
        let Some(axis) = axis else {
            return Err(RuntimeError::NamedForUnnamedAxis {
                param: param.to_string(),
                position: i,
                param_axes: param_axes.to_vec(),
                tensor_names: names.to_vec(),
            });
        };
        let k = occurrences_before(param_axes, 0, i, axis);
        let src = nth_occurrence(names, 0, axis, k).ok_or_else(|| RuntimeError::MissingAxis {
            param: param.to_string(),
            axis: axis.clone(),
            tensor_names: names.to_vec(),
        })?;
        used[src] = true;
        perm.push(src);
    }
    if let Some(extra) = used.iter().position(|u| !u) {
        return Err(RuntimeError::ExtraAxis { param: param.to_string(), axis: names[extra].clone().unwrap_or_default(), param_axes: param_axes.to_vec() });
    }
    Ok(perm)
}

/// The permutation for a partially named tensor whose first named axis is
/// `first_named` (> 0): the named suffix by name, the leading unnamed run in
/// order onto the parameter's remaining axes.
fn partially_named(param: &str, param_axes: &[Option<String>], names: &[Option<String>], first_named: usize) -> Result<Vec<usize>, RuntimeError> {
    if let Some(position) = (first_named..names.len()).find(|&j| names[j].is_none()) {
        return Err(RuntimeError::UnnamedAfterNamed { param: param.to_string(), position, tensor_names: names.to_vec() });
    }
    let mut source: Vec<Option<usize>> = vec![None; param_axes.len()];
    for (j, name) in names.iter().enumerate().skip(first_named) {
        let name = name.as_deref().unwrap_or_default();
        let k = occurrences_before(names, first_named, j, name);
        let target = nth_occurrence(param_axes, 0, name, k).ok_or_else(|| RuntimeError::ExtraAxis {
            param: param.to_string(),
            axis: name.to_string(),
            param_axes: param_axes.to_vec(),
        })?;
        source[target] = Some(j);
    }
    check_rank(param, param_axes, names)?;
    let mut unnamed = 0..first_named;
    Ok(source.into_iter().map(|s| s.or_else(|| unnamed.next()).unwrap_or_default()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;
    use nax_contract::DType;

    /// A tensor whose elements are their own row-major positions.
    fn iota(shape: &[usize], axes: &str) -> HostTensor {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        HostTensor::from_f64(DType::I64, shape.to_vec(), names(axes), &v).unwrap()
    }

    fn ok(param: &str, t: &HostTensor) -> HostTensor {
        bind("x", &names(param), &t.view()).unwrap().to_host().unwrap()
    }

    fn err(param: &str, t: &HostTensor) -> RuntimeError {
        bind("x", &names(param), &t.view()).unwrap_err()
    }

    #[test]
    fn fully_named_transposes_by_name() {
        let t = iota(&[2, 3], "d n");
        let b = ok("n d", &t);
        assert_eq!(b.shape(), &[3, 2]);
        assert_eq!(b.names(), names("n d").as_slice());
        assert_eq!(b.to_f64_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert_eq!(b.dtype(), DType::I64);
        // Already in order: the same tensor.
        assert_eq!(ok("d n", &t), t);
    }

    #[test]
    fn fully_named_three_axes() {
        let t = iota(&[2, 3, 4], "a b c");
        let b = ok("c a b", &t);
        assert_eq!(b, t.permuted(&[2, 0, 1]).unwrap());
    }

    #[test]
    fn missing_and_extra_names() {
        let t = iota(&[2, 3], "b m");
        let e = err("b n", &t);
        assert_eq!(e.to_string(), "parameter 'x': axis 'n' is missing from the tensor's names [b m]");
        let e = err("b n", &iota(&[2, 3, 4], "b n k"));
        assert_eq!(e.to_string(), "parameter 'x': the tensor's axis 'k' is not an axis of the parameter [b n]");
        let e = err("b n", &iota(&[2], "b"));
        assert!(matches!(&e, RuntimeError::MissingAxis { axis, .. } if axis == "n"), "{e}");
    }

    #[test]
    fn unnamed_binds_by_position() {
        let t = iota(&[2, 3], "_ _");
        let b = ok("n d", &t);
        assert_eq!(b.names(), names("n d").as_slice());
        assert_eq!(b.to_f64_vec(), t.to_f64_vec());
        let b = ok("n _", &t);
        assert_eq!(b.names(), names("n _").as_slice());
        let e = err("n", &t);
        assert!(matches!(e, RuntimeError::RankMismatch { expected: 1, actual: 2, .. }), "{e}");
        assert_eq!(e.to_string(), "parameter 'x': expected a tensor of rank 1 [n], got one of rank 2 [_ _]");
    }

    #[test]
    fn rank_zero() {
        let t = HostTensor::scalar_f64(DType::F32, 1.0);
        assert_eq!(bind("s", &[], &t.view()).unwrap().to_host().unwrap(), t);
        let e = bind("s", &names("n"), &t.view()).unwrap_err();
        assert!(matches!(e, RuntimeError::RankMismatch { expected: 1, actual: 0, .. }), "{e}");
    }

    #[test]
    fn partially_named() {
        // [_ d] to [d n]: d by name, the unnamed axis onto n.
        let t = iota(&[3, 2], "_ d");
        let b = ok("d n", &t);
        assert_eq!(b.shape(), &[2, 3]);
        assert_eq!(b.names(), names("d n").as_slice());
        assert_eq!(b, t.permuted(&[1, 0]).unwrap().with_names(names("d n")).unwrap());
        // The unnamed run binds in order to the remaining axes.
        let t = iota(&[2, 3, 4], "_ _ k");
        let b = ok("a k b", &t);
        assert_eq!(b, t.permuted(&[0, 2, 1]).unwrap().with_names(names("a k b")).unwrap());
        // A parameter with an unnamed axis takes a partially named tensor.
        let b = ok("k _ _", &t);
        assert_eq!(b, t.permuted(&[2, 0, 1]).unwrap().with_names(names("k _ _")).unwrap());
    }

    #[test]
    fn partially_named_errors() {
        let e = err("a b c", &iota(&[2, 3, 4], "_ a _"));
        assert!(matches!(e, RuntimeError::UnnamedAfterNamed { position: 2, .. }), "{e}");
        assert!(e.to_string().contains("must all lead"), "{e}");
        let e = err("a b", &iota(&[2, 3], "_ z"));
        assert!(matches!(&e, RuntimeError::ExtraAxis { axis, .. } if axis == "z"), "{e}");
        let e = err("a b c", &iota(&[2, 3], "_ c"));
        assert!(matches!(e, RuntimeError::RankMismatch { expected: 3, actual: 2, .. }), "{e}");
    }

    #[test]
    fn fully_named_never_binds_to_an_unnamed_axis() {
        let e = err("n _", &iota(&[2, 3], "n k"));
        assert!(matches!(e, RuntimeError::NamedForUnnamedAxis { position: 1, .. }), "{e}");
        assert!(e.to_string().starts_with("parameter 'x': axis 1 of the parameter [n _] is unnamed"));
    }

    #[test]
    fn repeated_names_pair_by_occurrence() {
        let t = iota(&[2, 3], "n n");
        assert_eq!(ok("n n", &t), t);
        // [n m n] to [m n n]: the first n stays first among the ns.
        let t = iota(&[2, 3, 4], "n m n");
        let b = ok("m n n", &t);
        assert_eq!(b, t.permuted(&[1, 0, 2]).unwrap().with_names(names("m n n")).unwrap());
        let e = err("n n", &iota(&[2, 3], "n m"));
        assert!(matches!(&e, RuntimeError::MissingAxis { axis, .. } if axis == "n"), "{e}");
        // Partially named: the suffix's ns pair with the parameter's ns in order.
        let t = iota(&[2, 3, 4], "_ n n");
        let b = ok("n b n", &t);
        assert_eq!(b, t.permuted(&[1, 0, 2]).unwrap().with_names(names("n b n")).unwrap());
        let e = err("n b", &iota(&[2, 3, 4], "_ n n"));
        assert!(matches!(&e, RuntimeError::ExtraAxis { axis, .. } if axis == "n"), "{e}");
    }

    #[test]
    fn an_owned_tensor_is_kept_when_binding_leaves_it_in_place() {
        let t = iota(&[2, 3], "d n");
        let same = bind_owned("x", &names("d n"), t.clone()).unwrap();
        assert_eq!(same, t);
        let positional = bind_owned("x", &names("a b"), iota(&[2, 3], "_ _")).unwrap();
        assert_eq!(positional.names(), names("a b").as_slice());
        assert_eq!(bind_owned("x", &names("n d"), t.clone()).unwrap(), ok("n d", &t));
        assert!(bind_owned("x", &names("n k"), t).is_err());
    }

    #[test]
    fn identical_names_bind_one_to_one() {
        let t = iota(&[2, 3, 4], "n _ k");
        assert_eq!(ok("n _ k", &t), t);
        assert!(matches!(err("n k _", &t), RuntimeError::NamedForUnnamedAxis { .. }));
    }

    #[test]
    fn invalid_parameter_names_are_errors() {
        let t = iota(&[2], "_");
        assert!(matches!(bind("x", &[Some("_".into())], &t.view()).unwrap_err(), RuntimeError::Host(nax_host::HostError::InvalidAxisName { .. })));
    }
}
