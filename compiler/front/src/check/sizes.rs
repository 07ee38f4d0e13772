//! Symbolic sizes: constants, and symbols unified as the checker learns.
//!
//! A size is a constant or a symbol. Symbols are free (a run-time `dim`, a
//! parameter's axis bound at the call boundary, a size given by a run-time
//! keyword) or derived from other sizes (`dim W = V / 2`, the solved part of
//! a group, the product of a group). Requiring two sizes to be equal unifies
//! them: symbols join one class, and a class may learn its constant. What
//! cannot be decided while compiling stays in the table: at the call boundary
//! the runtime binds the free symbols from the arguments, evaluates every
//! derived symbol (checking that divisions are exact) and checks each class's
//! members agree, so bad inputs are rejected before any kernel runs. The
//! size vocabulary ([`Size`], [`SymId`], [`SymDef`]) and that check
//! ([`nax_contract::SizeTable::solve`]) belong to the contract; [`Symbols::table`]
//! hands it the table.

use crate::diagnostics::Span;
use std::collections::HashMap;

pub use nax_contract::{MAX_SIZE, Size, SymDef, SymId, clipped_position};

/// One symbol of a table.
#[derive(Clone, Debug)]
pub struct SymData {
    /// The name printed for it (`V`, `b`, `h`, or an expression such as `3*V`).
    pub name: String,
    pub def: SymDef,
    /// Where it came from, for the messages of run-time checks.
    pub origin: Span,
    parent: u32,
    value: Option<u64>,
}

/// How deep a product of products [`Symbols::differ_by_a_factor`] looks.
const MONOMIAL_DEPTH: u32 = 64;

/// The symbols of one function (module dims first, then the function's own).
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    syms: Vec<SymData>,
    memo: HashMap<(u8, Size, Size), SymId>,
    /// How many leading symbols belong to the module (shared by every function).
    shared: usize,
}

impl Symbols {
    /// A new free symbol.
    pub fn fresh(&mut self, name: &str, origin: Span) -> SymId {
        self.push(name.to_string(), SymDef::Free, origin)
    }

    fn push(&mut self, name: String, def: SymDef, origin: Span) -> SymId {
        let id = self.syms.len() as u32;
        self.syms.push(SymData { name, def, origin, parent: id, value: None });
        SymId(id)
    }

    /// Marks every symbol so far as the module's, shared by all functions.
    pub fn mark_shared(&mut self) {
        self.shared = self.syms.len();
    }

    /// How many leading symbols are the module's.
    pub fn module_symbols(&self) -> usize {
        self.shared
    }

    /// One symbol's data.
    pub fn data(&self, id: SymId) -> Option<&SymData> {
        self.syms.get(id.0 as usize)
    }

    /// Copies another function's own symbols into this table (module symbols
    /// are shared, so they map to themselves), keeping definitions and known
    /// values. Returns, for each symbol of `other`, the size it becomes here;
    /// used to inline a call.
    pub fn import(&mut self, other: &Symbols) -> Vec<Size> {
        let mut map: Vec<Size> = Vec::with_capacity(other.syms.len());
        for (i, s) in other.syms.iter().enumerate() {
            if i < other.shared {
                map.push(Size::Sym(SymId(i as u32)));
                continue;
            }
            let root = other.root(i as u32) as usize;
            if root != i {
                // Roots have the lowest id of their class, so the root is mapped already.
                map.push(map[root]);
                continue;
            }
            let remap = |x: Size| match x {
                Size::Const(_) => x,
                Size::Sym(SymId(j)) => map[j as usize],
            };
            let def = match s.def {
                SymDef::Free => SymDef::Free,
                SymDef::Mul(a, b) => SymDef::Mul(remap(a), remap(b)),
                SymDef::Div(a, b) => SymDef::Div(remap(a), remap(b)),
                SymDef::Add(a, b) => SymDef::Add(remap(a), remap(b)),
                SymDef::Sub(a, b) => SymDef::Sub(remap(a), remap(b)),
                SymDef::CeilDiv(a, b) => SymDef::CeilDiv(remap(a), remap(b)),
                SymDef::Signed => SymDef::Signed,
                SymDef::Position(a, b) => SymDef::Position(remap(a), remap(b)),
                SymDef::Gap(a, b) => SymDef::Gap(remap(a), remap(b)),
            };
            let id = self.push(s.name.clone(), def, s.origin);
            self.syms[id.0 as usize].value = s.value;
            map.push(Size::Sym(id));
        }
        map
    }

    /// Whether `size` is a symbol of definition `def` (itself, not its class).
    pub fn defined_as(&self, size: Size, def: &SymDef) -> bool {
        matches!(size, Size::Sym(id) if self.data(id).is_some_and(|d| d.def == *def))
    }

    /// Adds a symbol with a definition, as the IR's text form reads it back.
    pub fn define(&mut self, name: &str, def: SymDef) -> SymId {
        self.push(name.to_string(), def, Span::default())
    }

    /// The representative of a symbol's class (the lowest id in it).
    pub fn class_of(&self, id: SymId) -> SymId {
        SymId(self.root(id.0))
    }

    /// The constant a class learnt by unification (not computed from definitions).
    pub fn learnt_value(&self, id: SymId) -> Option<u64> {
        self.syms.get(self.root(id.0) as usize).and_then(|s| s.value)
    }

    /// Gives a symbol the name it is printed with.
    pub fn rename(&mut self, id: SymId, name: &str) {
        if let Some(s) = self.syms.get_mut(id.0 as usize) {
            s.name = name.to_string();
        }
    }

    /// Every symbol, in creation order.
    pub fn all(&self) -> impl Iterator<Item = (SymId, &SymData)> {
        self.syms.iter().enumerate().map(|(i, s)| (SymId(i as u32), s))
    }

    fn root(&self, mut id: u32) -> u32 {
        while self.syms[id as usize].parent != id {
            id = self.syms[id as usize].parent;
        }
        id
    }

    /// The size as far as it is known: a constant, or the representative symbol of its class.
    pub fn resolve(&self, size: Size) -> Size {
        match size {
            Size::Const(_) => size,
            Size::Sym(SymId(id)) => {
                let r = self.root(id);
                match self.class_value(r) {
                    Some(v) => Size::Const(v),
                    None => Size::Sym(SymId(r)),
                }
            }
        }
    }

    /// The constant of a class: learnt by unification, or computed from a derived definition.
    fn class_value(&self, root: u32) -> Option<u64> {
        let data = &self.syms[root as usize];
        if data.value.is_some() {
            return data.value;
        }
        let pair = |a: Size, b: Size| match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) => Some((x, y)),
            _ => None,
        };
        match data.def {
            SymDef::Free | SymDef::Signed => None,
            SymDef::Position(a, b) => pair(a, b).map(|(x, y)| clipped_position(x, y)),
            SymDef::Gap(a, b) => pair(a, b).map(|(x, y)| x.saturating_sub(y)),
            SymDef::Mul(a, b) => pair(a, b).and_then(|(x, y)| x.checked_mul(y)),
            SymDef::Div(a, b) => pair(a, b).and_then(|(x, y)| (y != 0 && x % y == 0).then(|| x / y)),
            SymDef::Add(a, b) => pair(a, b).and_then(|(x, y)| x.checked_add(y)),
            SymDef::Sub(a, b) => pair(a, b).and_then(|(x, y)| x.checked_sub(y)),
            SymDef::CeilDiv(a, b) => pair(a, b).and_then(|(x, y)| x.checked_div(y).map(|_| x.div_ceil(y))),
        }
    }

    /// The constant value, if known.
    pub fn constant(&self, size: Size) -> Option<u64> {
        match self.resolve(size) {
            Size::Const(v) => Some(v),
            Size::Sym(_) => None,
        }
    }

    /// How the size is printed: its constant or its symbol's name.
    pub fn display(&self, size: Size) -> String {
        match self.resolve(size) {
            Size::Const(v) => v.to_string(),
            Size::Sym(SymId(id)) => self.syms[id as usize].name.clone(),
        }
    }

    /// Whether two sizes differ at every call where neither is 0: both are
    /// a constant times the same product of symbols, with different
    /// constants (`b*2*d` and `b*d`). Sizes that only the call can compare
    /// (`b*2*d` and `b*e`) do not.
    fn differ_by_a_factor(&self, a: Size, b: Size) -> bool {
        match (self.monomial(a, MONOMIAL_DEPTH), self.monomial(b, MONOMIAL_DEPTH)) {
            (Some((x, xs)), Some((y, ys))) => x != y && xs == ys && !xs.is_empty(),
            _ => false,
        }
    }

    /// A size as a constant times the sorted classes of the symbols it is a
    /// product of (a symbol defined otherwise, as a quotient or a sum,
    /// counts as one factor); `None` past `depth` products or an overflow.
    fn monomial(&self, size: Size, depth: u32) -> Option<(u64, Vec<u32>)> {
        match self.resolve(size) {
            Size::Const(c) => Some((c, Vec::new())),
            Size::Sym(SymId(root)) => match self.syms[root as usize].def {
                SymDef::Mul(a, b) => {
                    let depth = depth.checked_sub(1)?;
                    let (x, mut factors) = self.monomial(a, depth)?;
                    let (y, more) = self.monomial(b, depth)?;
                    factors.extend(more);
                    factors.sort_unstable();
                    Some((x.checked_mul(y)?, factors))
                }
                _ => Some((1, vec![root])),
            },
        }
    }

    /// Requires `a == b`. Fails when both are known constants that differ,
    /// or a constant times one product of symbols with different constants
    /// ([`Symbols::differ_by_a_factor`]); else the call checks what is left.
    pub fn unify(&mut self, a: Size, b: Size) -> bool {
        match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) => x == y,
            (Size::Const(v), Size::Sym(SymId(r))) | (Size::Sym(SymId(r)), Size::Const(v)) => {
                self.syms[r as usize].value = Some(v);
                true
            }
            (Size::Sym(SymId(x)), Size::Sym(SymId(y))) => {
                if x != y && self.differ_by_a_factor(a, b) {
                    return false;
                }
                if x != y {
                    let (keep, join) = if x < y { (x, y) } else { (y, x) };
                    self.syms[join as usize].parent = keep;
                }
                true
            }
        }
    }

    /// Whether two sizes are known to be equal.
    pub fn same(&self, a: Size, b: Size) -> bool {
        self.resolve(a) == self.resolve(b)
    }

    fn derived(&mut self, op: u8, a: Size, b: Size, name: String, def: SymDef, origin: Span) -> Size {
        let key = (op, self.resolve(a), self.resolve(b));
        if let Some(&id) = self.memo.get(&key) {
            return Size::Sym(id);
        }
        let id = self.push(name, def, origin);
        self.memo.insert(key, id);
        Size::Sym(id)
    }

    /// `a * b`; `None` past [`MAX_SIZE`].
    pub fn mul(&mut self, a: Size, b: Size, origin: Span) -> Option<Size> {
        match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) => x.checked_mul(y).filter(|&v| v <= MAX_SIZE).map(Size::Const),
            (Size::Const(1), other) | (other, Size::Const(1)) => Some(other),
            (Size::Const(0), _) | (_, Size::Const(0)) => Some(Size::Const(0)),
            (x, y) => {
                let name = format!("{}*{}", self.operand_name(x), self.operand_name(y));
                Some(self.derived(0, x, y, name, SymDef::Mul(x, y), origin))
            }
        }
    }

    /// `a / b` when it is exact; `None` when both are known and it is not.
    /// With a symbol involved, exactness becomes a check at the call boundary.
    pub fn div_exact(&mut self, a: Size, b: Size, name: Option<&str>, origin: Span) -> Option<Size> {
        match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) => (y != 0 && x % y == 0).then(|| Size::Const(x / y)),
            (x, Size::Const(1)) => Some(x),
            (_, Size::Const(0)) => None,
            (x, y) => {
                let name = name.map(str::to_string).unwrap_or_else(|| format!("{}/{}", self.operand_name(x), self.operand_name(y)));
                Some(self.derived(1, x, y, name, SymDef::Div(x, y), origin))
            }
        }
    }

    /// `a + b` or `a - b` (`None` when known to pass [`MAX_SIZE`] or go negative).
    pub fn add_sub(&mut self, a: Size, b: Size, subtract: bool, origin: Span) -> Option<Size> {
        match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) => if subtract { x.checked_sub(y) } else { x.checked_add(y) }.filter(|&v| v <= MAX_SIZE).map(Size::Const),
            (x, Size::Const(0)) => Some(x),
            (x, y) => {
                let sign = if subtract { "-" } else { "+" };
                let name = format!("{}{sign}{}", self.operand_name(x), self.operand_name(y));
                let def = if subtract { SymDef::Sub(x, y) } else { SymDef::Add(x, y) };
                Some(self.derived(if subtract { 3 } else { 2 }, x, y, name, def, origin))
            }
        }
    }

    /// `a / b` rounded up, for a constant `b` above 0 (a slice's length with a step).
    pub fn ceil_div(&mut self, a: Size, b: Size, origin: Span) -> Size {
        match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) if y > 0 => Size::Const(x.div_ceil(y)),
            (x, Size::Const(1)) => x,
            (x, y) => {
                let name = format!("ceil({}/{})", self.operand_name(x), self.operand_name(y));
                self.derived(4, x, y, name, SymDef::CeilDiv(x, y), origin)
            }
        }
    }

    /// A new symbol bound from an `int` argument of either sign (a run-time slice bound).
    pub fn signed(&mut self, name: &str, origin: Span) -> SymId {
        self.push(name.to_string(), SymDef::Signed, origin)
    }

    /// Where bound `a` (signed) lands on an axis of size `n`, clipped as Python clips it.
    pub fn position(&mut self, a: Size, n: Size, origin: Span) -> Size {
        match (self.resolve(a), self.resolve(n)) {
            (Size::Const(x), Size::Const(y)) => Size::Const(clipped_position(x, y)),
            (x, y) => {
                let name = format!("pos({},{})", self.display(x), self.display(y));
                self.derived(5, x, y, name, SymDef::Position(x, y), origin)
            }
        }
    }

    /// `a - b`, or 0 when `b` passes `a` (the length of a slice with run-time bounds).
    pub fn gap(&mut self, a: Size, b: Size, origin: Span) -> Size {
        match (self.resolve(a), self.resolve(b)) {
            (Size::Const(x), Size::Const(y)) => Size::Const(x.saturating_sub(y)),
            (x, Size::Const(0)) => x,
            (x, y) if x == y => Size::Const(0),
            (x, y) => {
                let name = format!("gap({},{})", self.display(x), self.display(y));
                self.derived(6, x, y, name, SymDef::Gap(x, y), origin)
            }
        }
    }

    fn operand_name(&self, s: Size) -> String {
        let text = self.display(s);
        if text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') { text } else { format!("({text})") }
    }
}

impl Symbols {
    /// The table the runtime checks calls with: every symbol's name,
    /// definition, class and the constant its class is known to have.
    pub fn table(&self) -> nax_contract::SizeTable {
        let symbols = (0..self.syms.len() as u32)
            .map(|i| {
                let root = self.root(i);
                let s = &self.syms[i as usize];
                nax_contract::Symbol { name: s.name.clone(), def: s.def.clone(), class: SymId(root), value: self.class_value(root) }
            })
            .collect();
        nax_contract::SizeTable { symbols }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unification_learns_constants_and_derived_values() {
        let mut t = Symbols::default();
        let v = Size::Sym(t.fresh("V", Span::default()));
        let half = t.div_exact(v, Size::Const(2), Some("W"), Span::default()).unwrap();
        assert_eq!(t.display(half), "W");
        assert!(t.unify(v, Size::Const(64)));
        assert_eq!(t.constant(half), Some(32));
        assert!(!t.unify(v, Size::Const(65)));
    }

    #[test]
    fn products_are_shared() {
        let mut t = Symbols::default();
        let v = Size::Sym(t.fresh("V", Span::default()));
        let a = t.mul(Size::Const(3), v, Span::default()).unwrap();
        let b = t.mul(Size::Const(3), v, Span::default()).unwrap();
        assert!(t.same(a, b));
        assert_eq!(t.display(a), "3*V");
    }

    #[test]
    fn the_table_carries_classes_and_learnt_constants() {
        let mut t = Symbols::default();
        let v = Size::Sym(t.fresh("V", Span::default()));
        let w = t.div_exact(v, Size::Const(2), Some("W"), Span::default()).unwrap();
        let b = Size::Sym(t.fresh("b", Span::default()));
        assert!(t.unify(b, w));
        let table = t.table();
        assert_eq!(table.display(b), "W");
        let values = table.solve(&[(v, 64)]).unwrap();
        assert_eq!(values, vec![Some(64), Some(32), Some(32)]);
        assert!(t.unify(v, Size::Const(8)));
        assert_eq!(t.table().resolve(b), Size::Const(4));
    }

    #[test]
    fn symbols_join_classes() {
        let mut t = Symbols::default();
        let a = Size::Sym(t.fresh("a", Span::default()));
        let b = Size::Sym(t.fresh("b", Span::default()));
        assert!(t.unify(b, a));
        assert_eq!(t.display(b), "a");
        assert!(t.unify(a, Size::Const(4)));
        assert_eq!(t.constant(b), Some(4));
    }
}
