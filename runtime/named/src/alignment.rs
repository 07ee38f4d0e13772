//! How the axes of two named tensors meet in an eager pointwise op
//! (LANGUAGE.md section 12, "Eager pointwise ops between host named
//! tensors"): which axis of each operand lies on each axis of the result,
//! the result's sizes, names and labels, and the positions each operand
//! keeps along its label-joined axes.
//!
//! The pairing, first rule that applies:
//!
//! 1. Identical name tuples (the same name or `None` at every position):
//!    axis `i` meets axis `i`.
//! 2. An operand with no names at all (rank 0 included): the plain torch
//!    rule, axes right-aligned by position; the result keeps the other
//!    operand's names.
//! 3. An unnamed axis after a named one: an error
//!    ([`NamedError::UnnamedAfterNamedOperand`]).
//! 4. Otherwise each operand is a run of unnamed axes and then named ones:
//!    the unnamed runs meet right-aligned by position, the named axes by
//!    name. The result is the unnamed run, then the left operand's names in
//!    its order, then the right operand's new ones. A name repeated within
//!    an operand pairs by occurrence: the k-th `n` of one operand meets the
//!    k-th `n` of the other.
//!
//! Then per result axis: an axis labelled on both operands keeps the labels
//! both have, in the left operand's order, and each operand is read at its
//! positions of those labels; otherwise the sizes must be equal or one of
//! them 1, and a labelled axis keeps its labels (a labelled axis of size 1
//! cannot broadcast: [`NamedError::LabelsBroadcast`]).

use std::collections::HashMap;

use crate::error::{NamedError, Operand};
use crate::named_tensor::NamedTensor;

/// Where one operand's axes lie on the result's.
#[derive(Debug, PartialEq)]
pub(crate) struct Placement {
    /// For each result axis, the operand's axis there; `None` where the
    /// operand lacks it (it broadcasts).
    pub(crate) axis_at: Vec<Option<usize>>,
    /// For each axis of the operand, the positions the result reads along
    /// it, in order, where a label join keeps other positions than all of
    /// them in order (`None`: all of them).
    pub(crate) take: Vec<Option<Vec<usize>>>,
}

/// How two operands meet: the result's axes, and where each operand's
/// axes lie on them.
#[derive(Debug, PartialEq)]
pub(crate) struct Alignment {
    /// The result's sizes.
    pub(crate) shape: Vec<usize>,
    /// The result's names.
    pub(crate) names: Vec<Option<String>>,
    /// The result's coordinate labels.
    pub(crate) coords: Vec<Option<Vec<String>>>,
    /// The left operand's placement.
    pub(crate) left: Placement,
    /// The right operand's placement.
    pub(crate) right: Placement,
}

/// The operand axes that lie on one result axis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pair {
    /// Axis `.0` of the left operand meets axis `.1` of the right one.
    Both(usize, usize),
    /// Only the left operand has an axis here; the right one broadcasts.
    Left(usize),
    /// Only the right operand has an axis here; the left one broadcasts.
    Right(usize),
}

/// Lines `left` and `right` up by the rules of the module documentation.
pub(crate) fn align(left: &NamedTensor, right: &NamedTensor) -> Result<Alignment, NamedError> {
    let pairs = pair_axes(left.names(), right.names())?;
    let mut al = Alignment {
        shape: Vec::with_capacity(pairs.len()),
        names: Vec::with_capacity(pairs.len()),
        coords: Vec::with_capacity(pairs.len()),
        left: Placement { axis_at: Vec::with_capacity(pairs.len()), take: vec![None; left.rank()] },
        right: Placement { axis_at: Vec::with_capacity(pairs.len()), take: vec![None; right.rank()] },
    };
    for pair in pairs {
        let (l, r) = match pair {
            Pair::Both(i, j) => (Some(i), Some(j)),
            Pair::Left(i) => (Some(i), None),
            Pair::Right(j) => (None, Some(j)),
        };
        let name = l.and_then(|i| left.names().get(i).cloned().flatten()).or_else(|| r.and_then(|j| right.names().get(j).cloned().flatten()));
        let (size, labels) = match pair {
            Pair::Both(i, j) => meet(left, i, right, j, &mut al)?,
            Pair::Left(i) => own_axis(left, i),
            Pair::Right(j) => own_axis(right, j),
        };
        al.shape.push(size);
        al.names.push(name);
        al.coords.push(labels);
        al.left.axis_at.push(l);
        al.right.axis_at.push(r);
    }
    Ok(al)
}

/// The size and labels of an axis that only `t` has.
fn own_axis(t: &NamedTensor, axis: usize) -> (usize, Option<Vec<String>>) {
    let size = t.shape().get(axis).copied().unwrap_or(1);
    (size, t.labels(axis).map(<[String]>::to_vec))
}

/// The size and labels of the result axis where axis `i` of `left` meets
/// axis `j` of `right`; records the positions a label join keeps.
fn meet(left: &NamedTensor, i: usize, right: &NamedTensor, j: usize, al: &mut Alignment) -> Result<(usize, Option<Vec<String>>), NamedError> {
    let ls = left.shape().get(i).copied().unwrap_or(1);
    let rs = right.shape().get(j).copied().unwrap_or(1);
    match (left.labels(i), right.labels(j)) {
        (Some(ll), Some(rl)) => {
            let (labels, lt, rt) = join_labels(ll, rl);
            if let Some(slot) = al.left.take.get_mut(i) {
                *slot = lt;
            }
            if let Some(slot) = al.right.take.get_mut(j) {
                *slot = rt;
            }
            Ok((labels.len(), Some(labels)))
        }
        (Some(_), None) if ls == 1 && rs != 1 => Err(NamedError::LabelsBroadcast { side: Operand::Left, axis: i, names: left.names().to_vec(), size: rs }),
        (None, Some(_)) if rs == 1 && ls != 1 => Err(NamedError::LabelsBroadcast { side: Operand::Right, axis: j, names: right.names().to_vec(), size: ls }),
        (ll, rl) if ls == rs || ls == 1 || rs == 1 => {
            let labels = ll.or(rl).map(<[String]>::to_vec);
            Ok((if ls == 1 { rs } else { ls }, labels))
        }
        _ => Err(NamedError::OperandSizes {
            left_axis: i,
            left_size: ls,
            left_names: left.names().to_vec(),
            right_axis: j,
            right_size: rs,
            right_names: right.names().to_vec(),
        }),
    }
}

/// The inner join of two label lists: the labels both have, in the left
/// list's order, and the positions of those labels in each list (`None`
/// where they are all the positions in order).
fn join_labels(left: &[String], right: &[String]) -> (Vec<String>, Option<Vec<usize>>, Option<Vec<usize>>) {
    let right_pos: HashMap<&str, usize> = right.iter().enumerate().map(|(k, l)| (l.as_str(), k)).collect();
    let mut labels = Vec::new();
    let mut lt = Vec::new();
    let mut rt = Vec::new();
    for (k, label) in left.iter().enumerate() {
        if let Some(&p) = right_pos.get(label.as_str()) {
            labels.push(label.clone());
            lt.push(k);
            rt.push(p);
        }
    }
    let all_in_order = |take: &[usize], len: usize| take.len() == len && take.iter().enumerate().all(|(k, &p)| k == p);
    let lt = (!all_in_order(&lt, left.len())).then_some(lt);
    let rt = (!all_in_order(&rt, right.len())).then_some(rt);
    (labels, lt, rt)
}

/// The operand axes that meet on each result axis, in the result's order.
fn pair_axes(ln: &[Option<String>], rn: &[Option<String>]) -> Result<Vec<Pair>, NamedError> {
    if ln == rn {
        return Ok((0..ln.len()).map(|i| Pair::Both(i, i)).collect());
    }
    let anonymous = |names: &[Option<String>]| names.iter().all(Option::is_none);
    if anonymous(ln) || anonymous(rn) {
        return Ok(right_aligned(ln.len(), rn.len()));
    }
    let kl = leading_unnamed(ln, Operand::Left, ln, rn)?;
    let kr = leading_unnamed(rn, Operand::Right, ln, rn)?;
    let mut pairs = right_aligned(kl, kr);
    let mut right_used = vec![false; rn.len()];
    for (i, name) in ln.iter().enumerate().skip(kl) {
        let occurrence = ln.get(kl..i).unwrap_or_default().iter().filter(|n| *n == name).count();
        let j = rn.iter().enumerate().skip(kr).filter(|(_, n)| *n == name).nth(occurrence).map(|(j, _)| j);
        if let Some(used) = j.and_then(|j| right_used.get_mut(j)) {
            *used = true;
        }
        pairs.push(j.map_or(Pair::Left(i), |j| Pair::Both(i, j)));
    }
    let new_right = (kr..rn.len()).filter(|&j| !right_used.get(j).copied().unwrap_or(true));
    pairs.extend(new_right.map(Pair::Right));
    Ok(pairs)
}

/// Axes `0..nl` and `0..nr` paired from the right, the longer run's extra
/// axes first.
fn right_aligned(nl: usize, nr: usize) -> Vec<Pair> {
    let n = nl.max(nr);
    (0..n)
        .map(|k| match ((k + nl).checked_sub(n), (k + nr).checked_sub(n)) {
            (Some(i), Some(j)) => Pair::Both(i, j),
            (Some(i), None) => Pair::Left(i),
            // The left run is the shorter one, so the right run's axis is `k`.
            (None, _) => Pair::Right(k),
        })
        .collect()
}

/// The number of leading unnamed axes of `names`, which has a named axis;
/// an error when an unnamed axis follows a named one.
fn leading_unnamed(names: &[Option<String>], side: Operand, ln: &[Option<String>], rn: &[Option<String>]) -> Result<usize, NamedError> {
    let first_named = names.iter().position(Option::is_some).unwrap_or(names.len());
    match names.iter().skip(first_named).position(Option::is_none) {
        Some(k) => Err(NamedError::UnnamedAfterNamedOperand { side, position: first_named + k, left_names: ln.to_vec(), right_names: rn.to_vec() }),
        None => Ok(first_named),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;
    use nax_host::{DType, HostTensor};

    fn t(shape: &[usize], axis_names: &str) -> NamedTensor {
        let n: usize = shape.iter().product();
        let v = vec![0.0; n];
        HostTensor::from_f64(DType::F32, shape.to_vec(), names(axis_names), &v).unwrap().into()
    }

    fn pairs(l: &str, r: &str) -> Result<Vec<Pair>, NamedError> {
        pair_axes(&names(l), &names(r))
    }

    #[test]
    fn pairs_by_each_rule() {
        // Identical tuples, even with an unnamed axis after a named one.
        use Pair::*;
        assert_eq!(pairs("x _", "x _").unwrap(), [Both(0, 0), Both(1, 1)]);
        // No names: right-aligned.
        assert_eq!(pairs("_ x y", "_ _").unwrap(), [Left(0), Both(1, 0), Both(2, 1)]);
        assert_eq!(pairs("", "x _").unwrap(), [Right(0), Right(1)]);
        // Unnamed runs right-aligned, then the left's names, then the right's new ones.
        assert_eq!(pairs("_ x y", "_ _ z y").unwrap(), [Right(0), Both(0, 1), Left(1), Both(2, 3), Right(2)]);
        // Repeated names pair by occurrence.
        assert_eq!(pairs("n m n", "n n").unwrap(), [Both(0, 0), Left(1), Both(2, 1)]);
    }

    #[test]
    fn unnamed_after_named_is_an_error() {
        let e = pairs("x _", "x y").unwrap_err();
        assert_eq!(
            e.to_string(),
            "axis 1 of the left operand is unnamed but follows a named axis, and the operands' \
             names differ (left [x _], right [x y]): pairing axes by name would be ambiguous; \
             put the unnamed axes first, name every axis, or give both operands the same names"
        );
        let e = pairs("_ x", "_ x _").unwrap_err();
        assert!(matches!(e, NamedError::UnnamedAfterNamedOperand { side: Operand::Right, position: 2, .. }), "{e}");
        // With an operand without names the pairing is positional: no error.
        assert!(pairs("x _", "_ _").is_ok());
    }

    #[test]
    fn sizes_broadcast_or_fail() {
        let al = align(&t(&[3, 1], "x y"), &t(&[4, 1, 5], "z x y")).unwrap();
        assert_eq!(al.shape, [3, 5, 4]);
        assert_eq!(al.names, names("x y z"));
        assert_eq!(al.left.axis_at, [Some(0), Some(1), None]);
        assert_eq!(al.right.axis_at, [Some(1), Some(2), Some(0)]);
        let e = align(&t(&[3, 1], "x y"), &t(&[4, 2, 5], "z x y")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "axis 'x' (size 3) of the left operand [x y] and axis 'x' (size 2) of the right \
             operand [z x y] do not broadcast: the sizes must be equal or one of them 1"
        );
        let e = align(&t(&[2], "_"), &t(&[3], "_")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "axis 0 (size 2) of the left operand [_] and axis 0 (size 3) of the right \
             operand [_] do not broadcast: the sizes must be equal or one of them 1"
        );
    }

    #[test]
    fn labels_join_and_broadcast() {
        let l = t(&[3], "x").with_labels(0, ["A", "B", "C"]).unwrap();
        let r = t(&[3], "x").with_labels(0, ["B", "C", "D"]).unwrap();
        let al = align(&l, &r).unwrap();
        assert_eq!(al.shape, [2]);
        assert_eq!(al.coords, [Some(vec!["B".to_string(), "C".to_string()])]);
        assert_eq!(al.left.take, [Some(vec![1, 2])]);
        assert_eq!(al.right.take, [Some(vec![0, 1])]);
        // Same labels in the same order: nothing to take.
        let al = align(&l, &l).unwrap();
        assert_eq!(al.left.take, [None]);
        assert_eq!(al.right.take, [None]);
        // A labelled size-1 axis cannot broadcast; an unlabelled one can.
        let one = t(&[1], "x").with_labels(0, ["A"]).unwrap();
        let e = align(&one, &t(&[3], "x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "axis 'x' of the left operand [x] has size 1 and a coordinate label, so it cannot \
             broadcast to size 3; drop its labels or give the other operand's axis the same labels"
        );
        let al = align(&t(&[1], "x"), &l).unwrap();
        assert_eq!(al.shape, [3]);
        assert_eq!(al.coords, [l.labels(0).map(<[String]>::to_vec)]);
    }
}
