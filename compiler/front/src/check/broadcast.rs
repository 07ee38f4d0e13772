//! Lining up the axes of two operands (LANGUAGE.md section 5): by name when
//! every axis of one operand has a name found in the other (repeats counted,
//! the i-th `n` matching the i-th `n`), otherwise from the right as NumPy does.

use super::sizes::{Size, Symbols};
use super::types::Axis;

/// How two operands line up.
#[derive(Clone, Debug, PartialEq)]
pub struct Aligned {
    /// The result's axes.
    pub axes: Vec<Axis>,
    /// For each axis of the left operand, the result axis it lines up with.
    pub left: Vec<usize>,
    /// For each axis of the right operand, the result axis it lines up with.
    pub right: Vec<usize>,
    /// Whether the operands lined up by name (else from the right).
    pub by_name: bool,
}

/// Why two operands don't line up: the positions of the offending axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Sizes neither equal nor 1 (E0401).
    Size { left: usize, right: usize },
    /// Two named axes with different names met from the right (E0404).
    Names { left: usize, right: usize },
}

/// For a fully named `a` whose names (with repeats) are all axes of `b`:
/// the position in `b` that each axis of `a` matches.
fn match_by_name(a: &[Axis], b: &[Axis]) -> Option<Vec<usize>> {
    let mut used = vec![false; b.len()];
    let mut map = Vec::with_capacity(a.len());
    for axis in a {
        let name = axis.name.as_deref()?;
        let j = (0..b.len()).find(|&j| !used[j] && b[j].name.as_deref() == Some(name))?;
        used[j] = true;
        map.push(j);
    }
    Some(map)
}

/// Lines up `left` and `right`, unifying the sizes of the axes that meet.
pub fn broadcast(left: &[Axis], right: &[Axis], syms: &mut Symbols) -> Result<Aligned, Mismatch> {
    if left.is_empty() || right.is_empty() {
        let axes = if left.is_empty() { right.to_vec() } else { left.to_vec() };
        return Ok(Aligned { left: (0..left.len()).collect(), right: (0..right.len()).collect(), axes, by_name: false });
    }
    let l_in_r = match_by_name(left, right);
    let r_in_l = match_by_name(right, left);
    let by_name = match (l_in_r, r_in_l) {
        (_, Some(r_map)) if left.len() >= right.len() => Some((left.to_vec(), (0..left.len()).collect(), r_map)),
        (Some(l_map), _) => Some((right.to_vec(), l_map, (0..right.len()).collect())),
        _ => None,
    };
    if let Some((axes, l_map, r_map)) = by_name {
        for (i, &j) in l_map.iter().enumerate() {
            if !syms.unify(left[i].size, axes[j].size) {
                let right_pos = r_map.iter().position(|&k| k == j).unwrap_or(0);
                return Err(Mismatch::Size { left: i, right: right_pos });
            }
        }
        for (i, &j) in r_map.iter().enumerate() {
            if !syms.unify(right[i].size, axes[j].size) {
                let left_pos = l_map.iter().position(|&k| k == j).unwrap_or(0);
                return Err(Mismatch::Size { left: left_pos, right: i });
            }
        }
        return Ok(Aligned { axes, left: l_map, right: r_map, by_name: true });
    }
    from_the_right(left, right, syms)
}

fn from_the_right(left: &[Axis], right: &[Axis], syms: &mut Symbols) -> Result<Aligned, Mismatch> {
    let rank = left.len().max(right.len());
    let (lo, ro) = (rank - left.len(), rank - right.len());
    for k in 0..rank.min(left.len()).min(right.len()) {
        let (i, j) = (left.len() - 1 - k, right.len() - 1 - k);
        if let (Some(a), Some(b)) = (&left[i].name, &right[j].name)
            && a != b
        {
            return Err(Mismatch::Names { left: i, right: j });
        }
    }
    let mut axes = Vec::with_capacity(rank);
    for p in 0..rank {
        let l = p.checked_sub(lo).map(|i| &left[i]);
        let r = p.checked_sub(ro).map(|j| &right[j]);
        let axis = match (l, r) {
            (Some(a), None) => a.clone(),
            (None, Some(b)) => b.clone(),
            (Some(a), Some(b)) => {
                let one = |s: Size| syms.constant(s) == Some(1);
                if syms.same(a.size, b.size) {
                    if a.name.is_some() { a.clone() } else { b.clone() }
                } else if one(b.size) {
                    a.clone()
                } else if one(a.size) {
                    b.clone()
                } else if syms.unify(a.size, b.size) {
                    if a.name.is_some() { a.clone() } else { b.clone() }
                } else {
                    return Err(Mismatch::Size { left: p - lo, right: p - ro });
                }
            }
            (None, None) => unreachable!("every result axis comes from an operand"),
        };
        axes.push(axis);
    }
    Ok(Aligned { axes, left: (lo..rank).collect(), right: (ro..rank).collect(), by_name: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ax(spec: &str) -> Vec<Axis> {
        spec.split_whitespace()
            .map(|p| {
                let (name, size) = p.split_once('=').unwrap();
                Axis { name: (name != "_").then(|| name.to_string()), size: Size::Const(size.parse().unwrap()) }
            })
            .collect()
    }

    fn names(a: &Aligned) -> Vec<String> {
        a.axes.iter().map(|x| x.name.clone().unwrap_or_else(|| "_".into())).collect()
    }

    #[test]
    fn by_name_left_order_wins() {
        let mut s = Symbols::default();
        let a = broadcast(&ax("n=8 m=16"), &ax("m=16 n=8"), &mut s).unwrap();
        assert_eq!(names(&a), ["n", "m"]);
        assert_eq!(a.right, [1, 0]);
    }

    #[test]
    fn by_name_into_the_larger_operand() {
        let mut s = Symbols::default();
        let a = broadcast(&ax("n=8 m=16"), &ax("b=2 H=4 n=8 m=16"), &mut s).unwrap();
        assert_eq!(names(&a), ["b", "H", "n", "m"]);
        assert_eq!(a.left, [2, 3]);
    }

    #[test]
    fn repeated_names_match_in_order() {
        let mut s = Symbols::default();
        let a = broadcast(&ax("b=2 n=8 n=8"), &ax("n=8 n=8"), &mut s).unwrap();
        assert!(a.by_name);
        assert_eq!(a.right, [1, 2]);
        let b = broadcast(&ax("n=8 n=8"), &ax("n=8 m=8"), &mut s).unwrap_err();
        assert_eq!(b, Mismatch::Names { left: 1, right: 1 });
    }

    #[test]
    fn from_the_right_with_size_one_and_unnamed() {
        let mut s = Symbols::default();
        let a = broadcast(&ax("n=8 _=1"), &ax("m=16"), &mut s).unwrap();
        assert_eq!(names(&a), ["n", "m"]);
        let b = broadcast(&ax("_=8 m=16"), &ax("n=8 m=16"), &mut s).unwrap();
        assert_eq!(names(&b), ["n", "m"]);
        assert_eq!(broadcast(&ax("n=8 _=3"), &ax("_=4"), &mut s).unwrap_err(), Mismatch::Size { left: 1, right: 0 });
    }
}
