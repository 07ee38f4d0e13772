//! Pattern operations the einops way: reshape the operand into its
//! elementary axes, move them (permute), reduce or repeat, and reshape into
//! the output's groups. `einsum` is `torch.einsum` with one letter per name,
//! and `split` puts its results' axis first and `unbind`s it.
//!
//! Output entries pair with input entries by name; numbers pair with equal
//! numbers in order; a number on the output with no twin (a `1`, or any
//! number in `repeat`) is a new axis. `sum(x, a)` on a value with a repeated
//! name reduces the first axis of that name, so the output's occurrences of
//! a name pair with the input's last ones.

use crate::expr::{cast, tensor, value_dtype};
use crate::function::{FnEmitter, join};
use crate::{EmitError, dtype_name};
use nax_front::check::sizes::{Size, Symbols};
use nax_front::check::types::DType;
use nax_front::checked::{Elem, PatternOp, Reduction, ResolvedPattern, TExpr};
use std::collections::HashMap;

/// For each output axis, for each of its elementary axes, the input's
/// elementary axis it comes from (`None`: a new axis). Marks those used.
fn pair(syms: &Symbols, inputs: &[&Elem], output: &[Vec<Elem>], used: &mut [bool]) -> Vec<Vec<Option<usize>>> {
    let mut occurrence: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(output.len());
    for axis in output {
        let mut row = Vec::with_capacity(axis.len());
        for e in axis {
            let found = match e.name.as_deref() {
                Some(name) => {
                    let on_input: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].name.as_deref() == Some(name)).collect();
                    let on_output = output.iter().flatten().filter(|o| o.name.as_deref() == Some(name)).count();
                    let seen = occurrence.entry(name).or_insert(0);
                    let at = on_input.len().saturating_sub(on_output) + *seen;
                    *seen += 1;
                    on_input.get(at).copied().filter(|&i| !used[i])
                }
                None => (0..inputs.len()).find(|&i| !used[i] && inputs[i].name.is_none() && syms.resolve(inputs[i].size) == syms.resolve(e.size)),
            };
            if let Some(i) = found {
                used[i] = true;
            }
            row.push(found);
        }
        out.push(row);
    }
    out
}

/// Whether `order` is `0, 1, 2, ...`.
fn identity(order: &[usize]) -> bool {
    order.iter().enumerate().all(|(i, &j)| i == j)
}

impl FnEmitter<'_> {
    /// A pattern operation.
    pub(crate) fn pattern(&mut self, e: &TExpr, op: PatternOp, args: &[TExpr], p: &ResolvedPattern) -> Result<String, EmitError> {
        if op == PatternOp::Einsum {
            return self.einsum(e, args, p);
        }
        let (Some(x), Some(side)) = (args.first(), p.inputs.first()) else {
            return Err(self.invalid("a pattern operation without an operand"));
        };
        let elems: Vec<&Elem> = side.iter().flatten().collect();
        let from = value_dtype(&x.ty).ok_or_else(|| self.invalid("a pattern operand without a type"))?;
        let mut s = self.expr(x)?;
        if tensor(&x.ty).is_none() {
            s = self.host_tensor(&s, from);
        }
        if side.iter().any(|axis| axis.len() != 1) {
            let sizes: Vec<Size> = elems.iter().map(|e| e.size).collect();
            s = format!("{s}.reshape({})", self.shape(&sizes));
        }
        let mut used = vec![false; elems.len()];
        let count = match op {
            PatternOp::Split { axis, part, .. } => {
                let at = side.iter().take(axis).map(Vec::len).sum::<usize>() + part;
                if at >= elems.len() {
                    return Err(self.invalid("split's number of results is not an input axis"));
                }
                used[at] = true;
                Some(at)
            }
            _ => None,
        };
        let pairs = pair(&self.f.symbols, &elems, &p.output, &mut used);
        let unused: Vec<usize> = (0..elems.len()).filter(|&i| !used[i]).collect();
        match op {
            PatternOp::Reduce(r) => {
                let to = self.result_tensor(e)?.dtype;
                s = reduction(&s, r, from, &unused, to);
                let kept: Vec<usize> = (0..elems.len()).filter(|i| used[*i]).collect();
                let order = pairs.iter().flatten().flatten().map(|i| kept.iter().position(|k| k == i)).collect::<Option<Vec<usize>>>();
                let order = order.ok_or_else(|| self.invalid("a reduction keeps an axis it does not pair"))?;
                if !identity(&order) {
                    s = format!("{s}.permute({})", join(&order));
                }
                let new_axes = pairs.iter().flatten().any(Option::is_none);
                Ok(self.regroup(s, None, &p.output, new_axes))
            }
            _ => {
                if let Some(&i) = unused.iter().find(|&&i| self.f.symbols.constant(elems[i].size) != Some(1)) {
                    let what = elems[i].name.clone().unwrap_or_else(|| self.f.symbols.display(elems[i].size));
                    return Err(self.unsupported(format!("a pattern that drops the input axis `{what}`")));
                }
                // Dropped size-1 axes go last, and need no permute of their
                // own: the reshape that follows drops them wherever they are.
                let moved: Vec<usize> = count.into_iter().chain(pairs.iter().flatten().flatten().copied()).collect();
                if !moved.is_sorted() {
                    let order: Vec<usize> = moved.into_iter().chain(unused.iter().copied()).collect();
                    s = format!("{s}.permute({})", join(&order));
                }
                let new_axes = pairs.iter().flatten().any(Option::is_none);
                let mut needed = new_axes || !unused.is_empty();
                if op == PatternOp::Repeat && new_axes {
                    s = self.repeat(s, &elems, &pairs, &p.output);
                    needed = false;
                }
                let count = count.map(|i| elems[i].size);
                let s = self.regroup(s, count, &p.output, needed);
                Ok(if count.is_some() { format!("{s}.unbind(0)") } else { s })
            }
        }
    }

    /// Inserts and expands `repeat`'s new axes: the tensor holds the paired
    /// elementary axes in output order; the result holds every output
    /// elementary axis.
    fn repeat(&mut self, s: String, elems: &[&Elem], pairs: &[Vec<Option<usize>>], output: &[Vec<Elem>]) -> String {
        let slots: Vec<(Option<usize>, Size)> = pairs.iter().flatten().zip(output.iter().flatten()).map(|(p, e)| (*p, e.size)).collect();
        let view: Vec<Size> = slots.iter().map(|(p, size)| p.map_or(Size::Const(1), |_| *size)).collect();
        let mut s = format!("{s}.reshape({})", self.shape(&view));
        if slots.iter().any(|(p, size)| p.is_none() && self.f.symbols.constant(*size) != Some(1)) {
            let full: Vec<Size> = slots.iter().map(|(p, size)| p.map_or(*size, |i| elems[i].size)).collect();
            s = format!("{s}.expand({})", self.shape(&full));
        }
        s
    }

    /// Reshapes a tensor into the output's groups, after `count` (split's
    /// leading axis) if any. `needed` says the tensor does not hold exactly
    /// the output's elementary axes (a new axis is missing, or a dropped
    /// size-1 axis is still there); otherwise only groups need a reshape.
    fn regroup(&mut self, s: String, count: Option<Size>, output: &[Vec<Elem>], needed: bool) -> String {
        if !needed && output.iter().all(|axis| axis.len() == 1) {
            return s;
        }
        let mut target: Vec<String> = count.map(|c| self.size(c)).into_iter().collect();
        for axis in output {
            let sizes: Vec<Size> = axis.iter().map(|e| e.size).collect();
            target.push(self.product(&sizes));
        }
        let shape = if target.len() == 1 { format!("({},)", target[0]) } else { format!("({})", target.join(", ")) };
        format!("{s}.reshape({shape})")
    }

    /// `torch.einsum` with one letter per name; a `1` on the output is a new axis.
    fn einsum(&mut self, e: &TExpr, args: &[TExpr], p: &ResolvedPattern) -> Result<String, EmitError> {
        let mut letters: Vec<&str> = Vec::new();
        let too_many = || self.unsupported(format!("an einsum with more than {} names", LETTERS.len()));
        let mut sides = Vec::with_capacity(p.inputs.len());
        for side in &p.inputs {
            let mut text = String::new();
            for axis in side {
                match axis.as_slice() {
                    [Elem { name: Some(n), .. }] => text.push(letter(n, &mut letters).ok_or_else(too_many)?),
                    _ => return Err(self.invalid("an einsum input entry that is not one name")),
                }
            }
            sides.push(text);
        }
        let mut out = String::new();
        let mut new_axes = false;
        for axis in &p.output {
            match axis.as_slice() {
                [Elem { name: Some(n), .. }] => out.push(letter(n, &mut letters).ok_or_else(too_many)?),
                [Elem { name: None, .. }] => new_axes = true,
                _ => return Err(self.invalid("an einsum output entry that is not one name or a 1")),
            }
        }
        let dtype = self.result_tensor(e)?.dtype;
        let mut operands = Vec::with_capacity(args.len());
        for arg in args {
            let text = self.expr(arg)?;
            operands.push(if tensor(&arg.ty).is_some() { text } else { self.host_tensor(&text, dtype) });
        }
        let s = format!("torch.einsum('{}->{out}', {})", sides.join(","), operands.join(", "));
        Ok(self.regroup(s, None, &p.output, new_axes))
    }
}

/// The letter of `name` in an einsum equation, giving it the next one if new.
fn letter<'n>(name: &'n str, letters: &mut Vec<&'n str>) -> Option<char> {
    let at = letters.iter().position(|&l| l == name).unwrap_or(letters.len());
    let c = LETTERS.get(at).map(|&b| char::from(b))?;
    if at == letters.len() {
        letters.push(name);
    }
    Some(c)
}

/// Axes as the elements of a Python tuple: `1,` or `0, 2`.
fn dims_tuple(dims: &[usize]) -> String {
    match dims {
        [one] => format!("{one},"),
        _ => join(dims),
    }
}

/// The letters of einsum equations.
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Reduces the axes `dims` of `s` (a tensor of dtype `from`) to a tensor of
/// dtype `to`: `sum` of a Mask counts (int64), `mean` of integers or a Mask
/// is float32, `max`/`min` are `amax`/`amin` (through `_extremum`, which
/// gives nax's value over an empty axis), `prod` goes one axis at a time.
/// With no axis to reduce, only the dtype changes.
fn reduction(s: &str, r: Reduction, from: DType, dims: &[usize], to: DType) -> String {
    if dims.is_empty() {
        return if from == to { s.to_string() } else { cast(s, to) };
    }
    let d = match dims {
        [one] => one.to_string(),
        _ => format!("({})", join(dims)),
    };
    let int32 = if from == DType::I32 { format!(", dtype={}", dtype_name(DType::I32)) } else { String::new() };
    let counted = if from == DType::Bool { DType::I64 } else { from };
    let (text, gives) = match r {
        Reduction::Sum => (format!("{s}.sum({d}{int32})"), counted),
        Reduction::Mean if from.is_float() => (format!("{s}.mean({d})"), from),
        Reduction::Mean => (format!("{}.mean({d})", cast(s, to)), to),
        Reduction::Max => (format!("_extremum({s}, ({}), True)", dims_tuple(dims)), from),
        Reduction::Min => (format!("_extremum({s}, ({}), False)", dims_tuple(dims)), from),
        Reduction::Prod => {
            let mut text = s.to_string();
            for k in dims.iter().rev() {
                text = format!("{text}.prod({k}{int32})");
            }
            (text, counted)
        }
    };
    if gives == to { text } else { cast(&text, to) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_give_the_checked_dtype() {
        assert_eq!(reduction("x", Reduction::Sum, DType::Bool, &[1], DType::I64), "x.sum(1)");
        assert_eq!(reduction("x", Reduction::Mean, DType::Bool, &[0, 2], DType::F32), "x.to(torch.float32).mean((0, 2))");
        assert_eq!(reduction("x", Reduction::Prod, DType::I32, &[0, 1], DType::I32), "x.prod(1, dtype=torch.int32).prod(0, dtype=torch.int32)");
        assert_eq!(reduction("x", Reduction::Max, DType::F32, &[], DType::F32), "x");
        assert_eq!(reduction("x", Reduction::Sum, DType::Bool, &[], DType::I64), "x.to(torch.int64)");
    }
}
