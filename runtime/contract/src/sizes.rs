//! Symbolic sizes and the call-boundary solver.
//!
//! A size is a constant or a symbol of a function's [`SizeTable`]. Symbols
//! are free (an argument's axis, a run-time `dim`, a run-time keyword) or
//! derived from other sizes (`dim W = V / 2`, the product of a group). The
//! checker builds the table (unifying sizes it requires equal, learning
//! constants); what it cannot decide at compile time stays in the table,
//! which travels with the compiled program: at each call [`SizeTable::solve`]
//! binds the free symbols from the arguments, evaluates every derived symbol
//! (divisions must be exact, subtractions non-negative, nothing may
//! overflow) and checks that every class of sizes required equal gets one
//! value, so bad inputs are rejected before any kernel runs.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// An index into a [`SizeTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SymId(pub u32);

/// The largest size an axis may have: sizes reach compiled code as `i64`.
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// The size of an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Size {
    /// Known when compiling.
    Const(u64),
    /// A symbol, known at the call.
    Sym(SymId),
}

/// How a symbol gets its value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SymDef {
    /// Bound from outside: an argument's axis, a run-time dim, a run-time keyword.
    Free,
    /// `a * b`.
    Mul(Size, Size),
    /// `a / b`, which must be exact.
    Div(Size, Size),
    /// `a + b`.
    Add(Size, Size),
    /// `a - b`, which must not be negative.
    Sub(Size, Size),
    /// `a / b` rounded up (`b` not 0): the length of a slice with a step.
    CeilDiv(Size, Size),
    /// Bound from an `int` argument of either sign (a run-time slice
    /// bound), held as its two's complement; never an axis's size, only
    /// the first operand of a [`SymDef::Position`].
    Signed,
    /// Where bound `a` (a [`SymDef::Signed`] value, or a constant in two's
    /// complement) lands on an axis of size `b`, as Python clips a slice
    /// bound: `a` counts from the end when negative, and the position is
    /// held to `[0, b]`.
    Position(Size, Size),
    /// `a - b`, or 0 when `b` passes `a`: the length of a slice whose
    /// bounds are run-time `int`s (Python's empty slice).
    Gap(Size, Size),
}

impl SymDef {
    /// The sizes a derived symbol is computed from (none for a free or signed one).
    pub fn operands(&self) -> Option<(Size, Size)> {
        match *self {
            SymDef::Free | SymDef::Signed => None,
            SymDef::Mul(a, b)
            | SymDef::Div(a, b)
            | SymDef::Add(a, b)
            | SymDef::Sub(a, b)
            | SymDef::CeilDiv(a, b)
            | SymDef::Position(a, b)
            | SymDef::Gap(a, b) => Some((a, b)),
        }
    }
}

/// Where a slice bound `bound` (two's complement) lands on an axis of
/// `size` positions, clipped as Python clips it.
pub fn clipped_position(bound: u64, size: u64) -> u64 {
    let bound = bound as i64;
    if bound < 0 { size.saturating_sub(bound.unsigned_abs()) } else { (bound as u64).min(size) }
}

/// One symbol of a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Symbol {
    /// The name printed for it (`V`, `b`, `h`, or an expression such as `3*V`).
    pub name: String,
    /// How it gets its value.
    pub def: SymDef,
    /// Its class's representative: the lowest id of the symbols required equal to it.
    pub class: SymId,
    /// The constant the class is known to have, if any.
    pub value: Option<u64>,
}

/// The symbols of one function, as the checker left them: what the runtime
/// needs to check a call's sizes and to print them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeTable {
    /// Every symbol, in creation order (a derived symbol refers only to
    /// earlier ones, but for the whole size of an axis split over processes
    /// in a rank's table: its block's size, a later symbol, times the parts).
    pub symbols: Vec<Symbol>,
}

/// A call-boundary check that failed: the sizes given contradict the program.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SizeError {
    /// What is wrong, naming the size and the values.
    pub message: String,
    /// The symbol whose requirement failed, when one did.
    pub symbol: Option<SymId>,
}

impl SizeTable {
    /// The size as far as the table knows it: a constant, or its class's representative.
    pub fn resolve(&self, size: Size) -> Size {
        match size {
            Size::Const(_) => size,
            Size::Sym(id) => match self.symbols.get(id.0 as usize) {
                Some(s) => s.value.map_or(Size::Sym(s.class), Size::Const),
                None => size,
            },
        }
    }

    /// The constant a size is known to have, if any.
    pub fn constant(&self, size: Size) -> Option<u64> {
        match self.resolve(size) {
            Size::Const(c) => Some(c),
            Size::Sym(_) => None,
        }
    }

    /// Whether two sizes are known to be equal: one constant, or one class.
    pub fn same(&self, a: Size, b: Size) -> bool {
        self.resolve(a) == self.resolve(b)
    }

    /// How a size is printed: its constant or its class's name.
    pub fn display(&self, size: Size) -> String {
        match self.resolve(size) {
            Size::Const(v) => v.to_string(),
            Size::Sym(id) => self.symbols.get(id.0 as usize).map_or_else(|| format!("#{}", id.0), |s| s.name.clone()),
        }
    }

    /// `, the size of `NAME`` for the first free member of `class` named
    /// otherwise than `name` (a keyword size or parameter axis the
    /// program gave the size), else nothing.
    fn named_by(&self, class: SymId, name: &str) -> String {
        self.symbols
            .iter()
            .find(|m| m.class == class && m.def == SymDef::Free && m.name != name)
            .map_or(String::new(), |m| format!(", the size of `{}`", m.name))
    }

    /// The call-boundary check: given the actual values of some sizes (the
    /// arguments' axes), evaluates every derived size, checks that divisions
    /// are exact, subtractions non-negative and products in range, and that
    /// every class of sizes required equal gets one value. Returns the value
    /// of every symbol (`None` for sizes nothing determines).
    pub fn solve(&self, given: &[(Size, u64)]) -> Result<Vec<Option<u64>>, SizeError> {
        let root = |id: SymId| self.symbols.get(id.0 as usize).map_or(id, |s| s.class);
        let mut class: HashMap<SymId, u64> = HashMap::new();
        // Gives a class its value, or the value it already has when they differ.
        let set = |class: &mut HashMap<SymId, u64>, root: SymId, v: u64| match class.get(&root) {
            Some(&old) if old != v => Err(old),
            _ => {
                class.insert(root, v);
                Ok(())
            }
        };
        for s in &self.symbols {
            if let Some(v) = s.value {
                class.insert(s.class, v);
            }
        }
        for &(size, v) in given {
            match size {
                Size::Const(c) if c != v => return Err(SizeError { message: format!("expected size {c}, got {v}"), symbol: None }),
                Size::Const(_) => {}
                Size::Sym(id) => {
                    let name = self.symbols.get(id.0 as usize).map_or("?", |s| s.name.as_str());
                    set(&mut class, root(id), v).map_err(|old| SizeError { message: format!("`{name}` must be {old}, got {v}"), symbol: Some(id) })?;
                }
            }
        }
        let value_of = |class: &HashMap<SymId, u64>, s: Size| match s {
            Size::Const(c) => Some(c),
            Size::Sym(id) => class.get(&root(id)).copied(),
        };
        // Derived sizes only refer to earlier symbols, but a class can learn its
        // value from a later member, so repeat until nothing changes.
        loop {
            let mut changed = false;
            for (i, s) in self.symbols.iter().enumerate() {
                let Some((a, b)) = s.def.operands() else { continue };
                let (Some(x), Some(y)) = (value_of(&class, a), value_of(&class, b)) else { continue };
                let id = SymId(i as u32);
                let fail = |why: String| SizeError { message: format!("`{}`: {why}", s.name), symbol: Some(id) };
                let v = match s.def {
                    SymDef::Mul(..) => x.checked_mul(y).ok_or_else(|| fail(format!("{x} * {y} overflows")))?,
                    SymDef::Div(..) if y == 0 || x % y != 0 => return Err(fail(format!("{x} / {y} is not exact"))),
                    SymDef::Div(..) => x / y,
                    SymDef::Add(..) => x.checked_add(y).ok_or_else(|| fail(format!("{x} + {y} overflows")))?,
                    SymDef::Sub(..) => x.checked_sub(y).ok_or_else(|| fail(format!("{x} - {y} is negative")))?,
                    SymDef::CeilDiv(..) if y == 0 => return Err(fail(format!("{x} / {y} divides by zero"))),
                    SymDef::CeilDiv(..) => x.div_ceil(y),
                    SymDef::Position(..) => clipped_position(x, y),
                    SymDef::Gap(..) => x.saturating_sub(y),
                    SymDef::Free | SymDef::Signed => continue,
                };
                if class.get(&s.class) != Some(&v) {
                    set(&mut class, s.class, v).map_err(|old| fail(format!("is {v} but must equal {old}{}", self.named_by(s.class, &s.name))))?;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Ok((0..self.symbols.len()).map(|i| class.get(&root(SymId(i as u32))).copied()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol(name: &str, def: SymDef, class: u32) -> Symbol {
        Symbol { name: name.into(), def, class: SymId(class), value: None }
    }

    /// `V` free, `W = V / 2`, `b` free and required equal to `W`.
    fn table() -> SizeTable {
        let v = Size::Sym(SymId(0));
        SizeTable { symbols: vec![symbol("V", SymDef::Free, 0), symbol("W", SymDef::Div(v, Size::Const(2)), 1), symbol("b", SymDef::Free, 1)] }
    }

    #[test]
    fn the_boundary_check_evaluates_derived_sizes() {
        let t = table();
        let (v, b) = (Size::Sym(SymId(0)), Size::Sym(SymId(2)));
        assert_eq!(t.solve(&[(v, 64)]).unwrap(), vec![Some(64), Some(32), Some(32)]);
        assert!(t.solve(&[(v, 7)]).unwrap_err().message.contains("not exact"));
        let e = t.solve(&[(v, 64), (b, 31)]).unwrap_err();
        assert_eq!(e.message, "`W`: is 32 but must equal 31, the size of `b`");
        assert!(t.solve(&[(Size::Const(3), 4)]).is_err());
        assert_eq!(t.display(b), "W");
        assert_eq!(t.resolve(b), Size::Sym(SymId(1)));
    }

    #[test]
    fn overflowing_products_are_errors() {
        let (a, b) = (Size::Sym(SymId(0)), Size::Sym(SymId(1)));
        let t = SizeTable { symbols: vec![symbol("a", SymDef::Free, 0), symbol("b", SymDef::Free, 1), symbol("a*b", SymDef::Mul(a, b), 2)] };
        let e = t.solve(&[(a, u64::MAX), (b, 2)]).unwrap_err();
        assert!(e.message.contains("overflows"), "{e}");
    }

    /// `i` and `j` signed, `n` free: `n[i:j]` has `gap(position(j, n), position(i, n))` elements.
    #[test]
    fn run_time_slice_bounds_are_clipped_as_python_clips_them() {
        let (i, j, n) = (Size::Sym(SymId(0)), Size::Sym(SymId(1)), Size::Sym(SymId(2)));
        let (start, stop) = (Size::Sym(SymId(3)), Size::Sym(SymId(4)));
        let t = SizeTable {
            symbols: vec![
                symbol("i", SymDef::Signed, 0),
                symbol("j", SymDef::Signed, 1),
                symbol("n", SymDef::Free, 2),
                symbol("start", SymDef::Position(i, n), 3),
                symbol("stop", SymDef::Position(j, n), 4),
                symbol("len", SymDef::Gap(stop, start), 5),
            ],
        };
        let slice = |a: i64, b: i64| {
            let v = t.solve(&[(i, a as u64), (j, b as u64), (n, 10)]).unwrap();
            (v[3].unwrap(), v[5].unwrap())
        };
        let python = |a: i64, b: i64| {
            let clip = |x: i64| if x < 0 { (10 + x).max(0) } else { x.min(10) } as u64;
            (clip(a), clip(b).saturating_sub(clip(a)))
        };
        for (a, b) in [(2, 5), (-3, 10), (-30, 4), (8, 20), (7, 2), (0, -1), (12, 14), (i64::MIN, i64::MAX)] {
            assert_eq!(slice(a, b), python(a, b), "[{a}:{b}]");
        }
    }

    #[test]
    fn a_table_round_trips_through_json() {
        let t = table();
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<SizeTable>(&text).unwrap(), t);
    }
}
