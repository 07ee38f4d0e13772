//! Sizes in one canonical form, so that equality is decided by
//! normalisation rather than by symbol identity.
//!
//! A size's [`Normal`] form is a polynomial with rational coefficients over
//! atoms: free sizes (each class of sizes required equal is one atom), and
//! what a polynomial cannot take apart (`a / b` rounded up, an exact
//! division by a sum). Products, sums and differences multiply out; an
//! exact division by a monomial (`d / 2`, `n / h`) is a product with
//! negative exponents. A derived size stands for its own definition, a
//! free one for its class's first definition (or the class's atom, when
//! none has one), so `2 * (d / 2)` and `d` have one form.
//! Two sizes whose forms are equal are equal at every call the boundary
//! admits (it checks divisions exact, differences non-negative and every
//! class agreed); sizes whose forms differ may still be equal, and are
//! then not provably so.

use crate::sizes::{Size, SizeTable, SymDef, SymId};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

/// A factor a polynomial does not take apart.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    /// A free size: its class's representative.
    Free(SymId),
    /// An exact division whose divisor is not a monomial.
    Div(Box<Normal>, Box<Normal>),
    /// A division rounded up (a slice's length with a step).
    CeilDiv(Box<Normal>, Box<Normal>),
}

/// A product of atoms, each with its exponent (negative: divided by), sorted.
type Monomial = Vec<(Atom, i32)>;

/// A rational coefficient `numerator / denominator`, reduced, the denominator positive.
type Ratio = (i128, i128);

/// A size's normal form: monomials with their nonzero coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Normal {
    terms: BTreeMap<Monomial, Ratio>,
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn ratio(n: i128, d: i128) -> Option<Ratio> {
    if d == 0 {
        return None;
    }
    let g = gcd(n, d).max(1);
    let (n, d) = (n / g, d / g);
    if d < 0 { Some((n.checked_neg()?, d.checked_neg()?)) } else { Some((n, d)) }
}

fn add_ratio(a: Ratio, b: Ratio) -> Option<Ratio> {
    ratio(a.0.checked_mul(b.1)?.checked_add(b.0.checked_mul(a.1)?)?, a.1.checked_mul(b.1)?)
}

fn mul_ratio(a: Ratio, b: Ratio) -> Option<Ratio> {
    ratio(a.0.checked_mul(b.0)?, a.1.checked_mul(b.1)?)
}

fn mul_monomials(a: &Monomial, b: &Monomial) -> Monomial {
    let mut powers: BTreeMap<Atom, i32> = BTreeMap::new();
    for (atom, e) in a.iter().chain(b) {
        *powers.entry(atom.clone()).or_insert(0) += e;
    }
    powers.into_iter().filter(|&(_, e)| e != 0).collect()
}

impl Normal {
    /// A constant.
    pub fn constant(c: u64) -> Normal {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(Vec::new(), (i128::from(c), 1));
        }
        Normal { terms }
    }

    fn atom(a: Atom) -> Normal {
        Normal { terms: BTreeMap::from([(vec![(a, 1)], (1, 1))]) }
    }

    /// The constant this form is, if it is one.
    pub fn as_constant(&self) -> Option<u64> {
        let mut terms = self.terms.iter();
        match (terms.next(), terms.next()) {
            (None, _) => Some(0),
            (Some((m, &(n, 1))), None) if m.is_empty() => u64::try_from(n).ok(),
            _ => None,
        }
    }

    fn add(&self, other: &Normal, sign: i128) -> Option<Normal> {
        let mut terms = self.terms.clone();
        for (m, &(n, d)) in &other.terms {
            let c = (n.checked_mul(sign)?, d);
            let sum = match terms.get(m) {
                Some(&old) => add_ratio(old, c)?,
                None => c,
            };
            if sum.0 == 0 {
                terms.remove(m);
            } else {
                terms.insert(m.clone(), sum);
            }
        }
        Some(Normal { terms })
    }

    fn mul(&self, other: &Normal) -> Option<Normal> {
        let mut out = Normal::default();
        for (ma, &ca) in &self.terms {
            for (mb, &cb) in &other.terms {
                let term = Normal { terms: BTreeMap::from([(mul_monomials(ma, mb), mul_ratio(ca, cb)?)]) };
                out = out.add(&term, 1)?;
            }
        }
        Some(out)
    }

    /// `1 / self` for a single term, else `None`.
    fn inverse(&self) -> Option<Normal> {
        let mut terms = self.terms.iter();
        let (Some((m, &(n, d))), None) = (terms.next(), terms.next()) else { return None };
        let m = m.iter().map(|(a, e)| (a.clone(), -e)).collect();
        Some(Normal { terms: BTreeMap::from([(m, ratio(d, n)?)]) })
    }
}

/// The normal forms of one table's sizes, each class's computed once.
pub struct Algebra<'t> {
    table: &'t SizeTable,
    members: HashMap<SymId, Vec<usize>>,
    memo: RefCell<HashMap<SymId, Option<Normal>>>,
}

impl<'t> Algebra<'t> {
    /// The algebra of a table.
    pub fn new(table: &'t SizeTable) -> Algebra<'t> {
        let mut members: HashMap<SymId, Vec<usize>> = HashMap::new();
        for (i, s) in table.symbols.iter().enumerate() {
            members.entry(s.class).or_default().push(i);
        }
        Algebra { table, members, memo: RefCell::new(HashMap::new()) }
    }

    /// A size's normal form; `None` past the coefficients' range. A
    /// derived size is its own definition's form; a free one its class's:
    /// the form of the class's constant, or of its first defined member,
    /// else the class's atom.
    pub fn normal(&self, size: Size) -> Option<Normal> {
        let id = match size {
            Size::Const(c) => return Some(Normal::constant(c)),
            Size::Sym(id) => id,
        };
        let Some(symbol) = self.table.symbols.get(id.0 as usize) else { return Some(Normal::atom(Atom::Free(id))) };
        if let Some(v) = symbol.value {
            return Some(Normal::constant(v));
        }
        let class = symbol.class;
        let definition = match symbol.def {
            SymDef::Free => self.members.get(&class).into_iter().flatten().map(|&i| (i, &self.table.symbols[i].def)).find(|(_, d)| **d != SymDef::Free),
            ref def => Some((id.0 as usize, def)),
        };
        let Some((defined, def)) = definition else { return Some(Normal::atom(Atom::Free(class))) };
        let key = SymId(defined as u32);
        if let Some(known) = self.memo.borrow().get(&key) {
            return known.clone();
        }
        // While a definition is being expanded its class stands for itself
        // (a cycle of definitions through classes).
        self.memo.borrow_mut().insert(key, Some(Normal::atom(Atom::Free(class))));
        let form = self.definition(def, class);
        self.memo.borrow_mut().insert(key, form.clone());
        form
    }

    /// The normal form of `def`, the definition of a member of `class`.
    fn definition(&self, def: &SymDef, class: SymId) -> Option<Normal> {
        let pair = |a: Size, b: Size| Some((self.normal(a)?, self.normal(b)?));
        match *def {
            SymDef::Free => None,
            // A clipped position or difference is no polynomial: its class is an atom.
            SymDef::Signed | SymDef::Position(..) | SymDef::Gap(..) => Some(Normal::atom(Atom::Free(class))),
            SymDef::Mul(a, b) => pair(a, b).and_then(|(x, y)| x.mul(&y)),
            SymDef::Add(a, b) => pair(a, b).and_then(|(x, y)| x.add(&y, 1)),
            SymDef::Sub(a, b) => pair(a, b).and_then(|(x, y)| x.add(&y, -1)),
            SymDef::Div(a, b) => {
                let (x, y) = pair(a, b)?;
                match y.inverse() {
                    Some(inverse) => x.mul(&inverse),
                    None => Some(Normal::atom(Atom::Div(Box::new(x), Box::new(y)))),
                }
            }
            SymDef::CeilDiv(a, b) => {
                let (x, y) = pair(a, b)?;
                match (x.as_constant(), y.as_constant()) {
                    (Some(n), Some(d)) if d > 0 => Some(Normal::constant(n.div_ceil(d))),
                    (_, Some(1)) => Some(x),
                    _ => Some(Normal::atom(Atom::CeilDiv(Box::new(x), Box::new(y)))),
                }
            }
        }
    }

    /// Whether two sizes are equal at every call the boundary admits.
    pub fn equal(&self, a: Size, b: Size) -> bool {
        self.table.resolve(a) == self.table.resolve(b) || matches!((self.normal(a), self.normal(b)), (Some(x), Some(y)) if x == y)
    }

    /// Whether two products of sizes are equal at every call the boundary admits.
    pub fn equal_products(&self, a: &[Size], b: &[Size]) -> bool {
        let product = |sizes: &[Size]| sizes.iter().try_fold(Normal::constant(1), |p, &s| p.mul(&self.normal(s)?));
        matches!((product(a), product(b)), (Some(x), Some(y)) if x == y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizes::Symbol;

    fn symbol(name: &str, def: SymDef, class: u32) -> Symbol {
        Symbol { name: name.into(), def, class: SymId(class), value: None }
    }

    fn sym(i: u32) -> Size {
        Size::Sym(SymId(i))
    }

    /// `d` free, `r = d / 2`, `e` free and required equal to `d`, `t = 2 * r`,
    /// `h` free, `w = h * r`, `q = (d + h) - h`, `c = ceil(d / 3)`.
    fn table() -> SizeTable {
        SizeTable {
            symbols: vec![
                symbol("d", SymDef::Free, 0),
                symbol("r", SymDef::Div(sym(0), Size::Const(2)), 1),
                symbol("e", SymDef::Free, 0),
                symbol("t", SymDef::Mul(Size::Const(2), sym(1)), 3),
                symbol("h", SymDef::Free, 4),
                symbol("w", SymDef::Mul(sym(4), sym(1)), 5),
                symbol("d+h", SymDef::Add(sym(0), sym(4)), 6),
                symbol("q", SymDef::Sub(sym(6), sym(4)), 7),
                symbol("c", SymDef::CeilDiv(sym(0), Size::Const(3)), 8),
            ],
        }
    }

    #[test]
    fn a_split_and_its_group_are_one_size() {
        let t = table();
        let a = Algebra::new(&t);
        assert!(a.equal(sym(3), sym(2)), "2 * (d / 2) = e, which is d");
        assert!(a.equal(sym(7), sym(0)), "(d + h) - h = d");
        assert!(!a.equal(sym(1), sym(0)), "d / 2 is not d");
        assert!(a.equal_products(&[sym(1), Size::Const(2), sym(4)], &[sym(5), Size::Const(2)]), "r * 2 * h = (h * r) * 2");
        assert!(!a.equal_products(&[sym(1), Size::Const(4)], &[sym(0)]), "4 * (d / 2) is not d");
        assert!(!a.equal(sym(8), sym(1)), "ceil(d / 3) is its own atom");
        assert!(a.equal(sym(8), sym(8)));
    }

    #[test]
    fn constants_fold_and_cycles_end() {
        let t = SizeTable { symbols: vec![symbol("a", SymDef::Mul(sym(1), Size::Const(2)), 0), symbol("b", SymDef::Div(sym(0), Size::Const(2)), 1)] };
        let a = Algebra::new(&t);
        assert!(a.equal(sym(0), sym(0)));
        assert_eq!(Algebra::new(&table()).normal(Size::Const(12)).and_then(|n| n.as_constant()), Some(12));
        assert!(a.normal(sym(1)).is_some());
    }
}
