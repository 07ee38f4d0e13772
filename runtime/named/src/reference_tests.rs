//! A property test of the eager pointwise ops against a deliberately naive
//! reference written from LANGUAGE.md section 12 alone: its own pairing
//! logic (scans from the end, linear searches, no shared code with
//! `alignment`), and every result element computed one at a time from its
//! index, by looking up each operand's index axis by axis and label by
//! label. The test compares names, shape, labels, dtype and values, and
//! that both sides reject the same inputs (with the same kind of error).
//!
//! The inputs: ranks 0 to 4, sizes 1 to 4 (many 1s, to broadcast), names
//! drawn from a small pool with `None` and repeats, labels drawn from a
//! small pool, right operands that permute or copy the left one's names,
//! every dtype, every op. Values are small integers, exact in every dtype,
//! so the reference can compute in `f64`.

use proptest::prelude::*;

use crate::error::NamedError;
use crate::named_tensor::NamedTensor;
use crate::pointwise::BinaryOp;
use nax_host::{DType, HostTensor};

/// The kinds of error the reference tells apart.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rejection {
    UnnamedAfterNamed,
    Sizes,
    LabelsBroadcast,
    BoolSubtraction,
}

/// What an op gives: a result, or a rejection.
#[derive(Debug, PartialEq)]
enum Outcome {
    Result {
        dtype: DType,
        shape: Vec<usize>,
        names: Vec<Option<String>>,
        coords: Vec<Option<Vec<String>>>,
        /// `None` stands for NaN, so that NaN equals NaN here.
        values: Vec<Option<f64>>,
    },
    Rejected(Rejection),
}

fn nan_as_none(v: Vec<f64>) -> Vec<Option<f64>> {
    v.into_iter().map(|x| (!x.is_nan()).then_some(x)).collect()
}

/// The outcome of the implementation under test.
fn actual(op: BinaryOp, l: &NamedTensor, r: &NamedTensor) -> Outcome {
    match l.binary(op, r) {
        Ok(t) => Outcome::Result {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            names: t.names().to_vec(),
            coords: t.coords().to_vec(),
            values: nan_as_none(t.to_f64_vec()),
        },
        Err(e) => Outcome::Rejected(match e {
            NamedError::UnnamedAfterNamedOperand { .. } => Rejection::UnnamedAfterNamed,
            NamedError::OperandSizes { .. } => Rejection::Sizes,
            NamedError::LabelsBroadcast { .. } => Rejection::LabelsBroadcast,
            NamedError::BoolSubtraction => Rejection::BoolSubtraction,
            other => panic!("unexpected error: {other}"),
        }),
    }
}

/// How many axes before `i` in `names` carry the same name as axis `i`.
fn occurrence(names: &[Option<String>], i: usize) -> usize {
    (0..i).filter(|&j| names[j] == names[i]).count()
}

/// The reference: section 12 applied literally.
fn reference(op: BinaryOp, l: &NamedTensor, r: &NamedTensor) -> Outcome {
    let (ln, rn) = (l.names(), r.names());
    // The result's axes, as (left axis, right axis).
    let mut axes: Vec<(Option<usize>, Option<usize>)> = Vec::new();
    if ln == rn {
        for i in 0..ln.len() {
            axes.push((Some(i), Some(i)));
        }
    } else if ln.iter().all(|n| n.is_none()) || rn.iter().all(|n| n.is_none()) {
        // Torch broadcasting: from the last axis backwards.
        let n = ln.len().max(rn.len());
        for back in 0..n {
            let li = (back < ln.len()).then(|| ln.len() - 1 - back);
            let ri = (back < rn.len()).then(|| rn.len() - 1 - back);
            axes.insert(0, (li, ri));
        }
    } else {
        for names in [ln, rn] {
            let mut named_seen = false;
            for n in names {
                match n {
                    Some(_) => named_seen = true,
                    None if named_seen => {
                        return Outcome::Rejected(Rejection::UnnamedAfterNamed);
                    }
                    None => {}
                }
            }
        }
        let ul = ln.iter().filter(|n| n.is_none()).count();
        let ur = rn.iter().filter(|n| n.is_none()).count();
        let n = ul.max(ur);
        for back in 0..n {
            let li = (back < ul).then(|| ul - 1 - back);
            let ri = (back < ur).then(|| ur - 1 - back);
            axes.insert(0, (li, ri));
        }
        let mut right_taken = vec![false; rn.len()];
        for i in ul..ln.len() {
            let key = (&ln[i], occurrence(ln, i));
            let mut partner = None;
            for j in ur..rn.len() {
                if (&rn[j], occurrence(rn, j)) == key {
                    partner = Some(j);
                    right_taken[j] = true;
                }
            }
            axes.push((Some(i), partner));
        }
        for (j, taken) in right_taken.into_iter().enumerate().skip(ur) {
            if !taken {
                axes.push((None, Some(j)));
            }
        }
    }

    // Sizes, names and labels of each result axis.
    let mut shape = Vec::new();
    let mut names = Vec::new();
    let mut coords: Vec<Option<Vec<String>>> = Vec::new();
    for &(li, ri) in &axes {
        let ll = li.and_then(|i| l.coords()[i].clone());
        let rl = ri.and_then(|j| r.coords()[j].clone());
        let ls = li.map(|i| l.shape()[i]);
        let rs = ri.map(|j| r.shape()[j]);
        names.push(match (li, ri) {
            (Some(i), _) if ln[i].is_some() => ln[i].clone(),
            (_, Some(j)) => rn[j].clone(),
            _ => None,
        });
        match (ls, rs) {
            (Some(ls), Some(rs)) => match (ll, rl) {
                (Some(ll), Some(rl)) => {
                    let common: Vec<String> = ll.iter().filter(|x| rl.contains(x)).cloned().collect();
                    shape.push(common.len());
                    coords.push(Some(common));
                }
                (ll, rl) => {
                    if (ll.is_some() && ls == 1 && rs != 1) || (rl.is_some() && rs == 1 && ls != 1) {
                        return Outcome::Rejected(Rejection::LabelsBroadcast);
                    }
                    if ls != rs && ls != 1 && rs != 1 {
                        return Outcome::Rejected(Rejection::Sizes);
                    }
                    shape.push(if ls == 1 { rs } else { ls });
                    coords.push(ll.or(rl));
                }
            },
            (Some(s), None) => {
                shape.push(s);
                coords.push(ll);
            }
            (None, Some(s)) => {
                shape.push(s);
                coords.push(rl);
            }
            (None, None) => unreachable!("every result axis has an operand axis"),
        }
    }
    if op == BinaryOp::Sub && l.dtype() == DType::Bool && r.dtype() == DType::Bool {
        return Outcome::Rejected(Rejection::BoolSubtraction);
    }

    // Every element from its index.
    let count: usize = shape.iter().product();
    let (lv, rv) = (l.to_f64_vec(), r.to_f64_vec());
    let mut values = Vec::with_capacity(count);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let operand_value = |t: &NamedTensor, side_of: &dyn Fn(usize) -> Option<usize>, v: &[f64]| {
            let mut flat = 0;
            for a in 0..t.rank() {
                let k = (0..axes.len()).find(|&k| side_of(k) == Some(a)).unwrap();
                let pos = match (&coords[k], &t.coords()[a]) {
                    (Some(result_labels), Some(own)) => {
                        let label = &result_labels[index[k]];
                        own.iter().position(|x| x == label).unwrap()
                    }
                    _ if t.shape()[a] == 1 => 0,
                    _ => index[k],
                };
                flat = flat * t.shape()[a] + pos;
            }
            v[flat]
        };
        let x = operand_value(l, &|k| axes[k].0, &lv);
        let y = operand_value(r, &|k| axes[k].1, &rv);
        values.push(match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Eq => f64::from(u8::from(x == y)),
            BinaryOp::Ne => f64::from(u8::from(x != y)),
            BinaryOp::Lt => f64::from(u8::from(x < y)),
            BinaryOp::Le => f64::from(u8::from(x <= y)),
            BinaryOp::Gt => f64::from(u8::from(x > y)),
            BinaryOp::Ge => f64::from(u8::from(x >= y)),
        });
        // Next index, last axis fastest.
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    let promoted = DType::promote(l.dtype(), r.dtype());
    let dtype = match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => promoted,
        BinaryOp::Div if promoted.is_float() => promoted,
        BinaryOp::Div => DType::F32,
        _ => DType::Bool,
    };
    // Rounded into the result's dtype (bool: nonzero), read back.
    let rounded = HostTensor::from_f64(dtype, shape.clone(), names.clone(), &values).unwrap();
    Outcome::Result { dtype, shape, names, coords, values: nan_as_none(rounded.to_f64_vec()) }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const LABELS: [&str; 5] = ["p", "q", "r", "s", "t"];

/// One axis as drawn: a name slot (0 is unnamed), how its size is chosen,
/// whether it is labelled, and an order of the label pool.
type AxisDraw = (usize, u8, usize, bool, Vec<&'static str>);

/// One operand as drawn: its axes, its dtype, and values enough for any
/// shape.
type OperandDraw = (Vec<AxisDraw>, usize, Vec<i8>);

fn axis_draw() -> impl Strategy<Value = AxisDraw> {
    (0usize..=NAMES.len(), 0u8..8, 1usize..=4, prop::bool::weighted(0.35), Just(LABELS.to_vec()).prop_shuffle())
}

fn operand_draw() -> impl Strategy<Value = OperandDraw> {
    (prop::collection::vec(axis_draw(), 0..=4), 0..DType::ALL.len(), prop::collection::vec(-3i8..=3, 256))
}

/// Builds an operand from its draw: `slots` overrides the name slots (for
/// a right operand that copies or permutes the left one's names), and
/// `universe` gives each name slot its size.
fn build(draw: &OperandDraw, slots: Option<Vec<usize>>, universe: &[usize]) -> NamedTensor {
    let (axes, dtype, values) = draw;
    let slots = slots.unwrap_or_else(|| axes.iter().map(|a| a.0).collect());
    let mut shape = Vec::new();
    let mut names = Vec::new();
    let mut coords = Vec::new();
    let plain: AxisDraw = (0, 0, 1, false, LABELS.to_vec());
    for (k, &slot) in slots.iter().enumerate() {
        let (_, size_mode, other, labelled, pool) = axes.get(k).unwrap_or(&plain);
        let size = match size_mode {
            0..=4 => universe[slot],
            5 | 6 => 1,
            _ => *other,
        };
        shape.push(size);
        names.push((slot > 0).then(|| NAMES[slot - 1].to_string()));
        coords.push(labelled.then(|| pool[..size].iter().map(|s| s.to_string()).collect::<Vec<_>>()));
    }
    let n: usize = shape.iter().product();
    let values: Vec<f64> = values[..n].iter().map(|&v| f64::from(v)).collect();
    let t = HostTensor::from_f64(DType::ALL[*dtype], shape, names, &values).unwrap();
    NamedTensor::new(t, coords).unwrap()
}

/// A whole case: the operands, and the op.
fn case() -> impl Strategy<Value = (BinaryOp, NamedTensor, NamedTensor)> {
    (
        prop::collection::vec(1usize..=4, NAMES.len() + 1),
        operand_draw(),
        operand_draw(),
        0u8..6,
        Just((0..4).collect::<Vec<usize>>()).prop_shuffle(),
        0..BinaryOp::ALL.len(),
    )
        .prop_map(|(universe, ld, rd, mode, perm, op)| {
            let left = build(&ld, None, &universe);
            let left_slots: Vec<usize> = ld.0.iter().map(|a| a.0).collect();
            let right_slots = match mode {
                // The left operand's names, the same.
                0 => Some(left_slots),
                // The left operand's names, permuted.
                1 | 2 => Some(perm.iter().filter(|&&p| p < left_slots.len()).map(|&p| left_slots[p]).collect()),
                _ => None,
            };
            let right = build(&rd, right_slots, &universe);
            (BinaryOp::ALL[op], left, right)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn eager_ops_match_the_naive_reference((op, left, right) in case()) {
        let want = reference(op, &left, &right);
        let got = actual(op, &left, &right);
        prop_assert_eq!(got, want, "{:?} {:?} {:?}", op, left, right);
    }
}

/// The generator reaches every rule and error; a check on the test itself.
#[test]
fn the_generator_covers_the_rules() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4000 {
        let (op, l, r) = case().new_tree(&mut runner).unwrap().current();
        let kind = match reference(op, &l, &r) {
            Outcome::Rejected(k) => format!("{k:?}"),
            Outcome::Result { coords, .. } => {
                let joined =
                    (0..l.rank()).any(|i| l.coords()[i].is_some()) && (0..r.rank()).any(|j| r.coords()[j].is_some()) && coords.iter().any(Option::is_some);
                if l.names() == r.names() {
                    "identical".into()
                } else if l.names().iter().all(Option::is_none) || r.names().iter().all(Option::is_none) {
                    "anonymous".into()
                } else if joined {
                    "labels".into()
                } else {
                    "by name".into()
                }
            }
        };
        seen.insert(kind);
    }
    for kind in ["identical", "anonymous", "labels", "by name", "UnnamedAfterNamed", "Sizes", "LabelsBroadcast", "BoolSubtraction"] {
        assert!(seen.contains(kind), "{kind} never drawn: {seen:?}");
    }
}
