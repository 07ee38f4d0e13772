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
//!
//! The boundary's class checks are facts the forms use: a class whose
//! members have two forms (a group's product and the keyword size that
//! names it, `(w h c) = 30`, or two products required equal) states that
//! they are equal. Where both are single terms, the fact is solved for a
//! free atom that stands with exponent 1 on one side alone (the side's
//! other atoms known nonzero) and that atom is replaced by the solution in
//! every form, so that
//! `w * h * c` and `30` are one size when the program said so.

use nax_contract::{Size, SizeTable, SymDef, SymId};
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

    /// The form with each solved atom replaced by its single term, in
    /// order (atoms inside a division that is an atom of its own stay).
    fn substitute(&self, solved: &[(Atom, Normal)]) -> Option<Normal> {
        let mut form = self.clone();
        for (atom, value) in solved {
            if !form.terms.keys().flatten().any(|(a, _)| a == atom) {
                continue;
            }
            let mut out = Normal::default();
            for (monomial, &c) in &form.terms {
                // The term without the atom, times the atom's value to its power.
                let exponent = monomial.iter().find(|(a, _)| a == atom).map_or(0, |&(_, e)| e);
                let rest = Normal { terms: BTreeMap::from([(without(monomial, atom), c)]) };
                out = out.add(&rest.mul(&value.power(exponent)?)?, 1)?;
            }
            form = out;
        }
        Some(form)
    }

    /// A single term raised to `e` (negative: its inverse's power).
    fn power(&self, e: i32) -> Option<Normal> {
        let base = if e < 0 { self.inverse()? } else { self.clone() };
        (0..e.unsigned_abs()).try_fold(Normal::constant(1), |p, _| p.mul(&base))
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
    /// The class facts solved, in order: each atom and the single term it
    /// equals, in which no earlier atom appears.
    solved: Vec<(Atom, Normal)>,
}

impl<'t> Algebra<'t> {
    /// The algebra of a table.
    pub fn new(table: &'t SizeTable) -> Algebra<'t> {
        let mut members: HashMap<SymId, Vec<usize>> = HashMap::new();
        for (i, s) in table.symbols.iter().enumerate() {
            members.entry(s.class).or_default().push(i);
        }
        let mut algebra = Algebra { table, members, memo: RefCell::new(HashMap::new()), solved: Vec::new() };
        algebra.solved = algebra.solve_facts();
        algebra
    }

    /// A size's normal form, the boundary's facts applied; `None` past the
    /// coefficients' range.
    pub fn normal(&self, size: Size) -> Option<Normal> {
        self.form(size).map(|form| self.apply_facts(form))
    }

    /// The facts the boundary's class checks state, solved for one atom
    /// each where both sides are single terms (see the module's docs).
    fn solve_facts(&self) -> Vec<(Atom, Normal)> {
        let mut classes: Vec<(&SymId, &Vec<usize>)> = self.members.iter().collect();
        classes.sort();
        let mut facts: Vec<(Normal, Normal)> = Vec::new();
        // Atoms known nonzero: every divisor (the boundary checks divisions
        // exact), and every atom of a single term equal to a nonzero constant.
        let mut nonzero: Vec<Atom> = Vec::new();
        for (&class, members) in classes {
            let value = members.iter().find_map(|&i| self.table.symbols[i].value).map(Normal::constant);
            let defined = members.iter().filter_map(|&i| match self.table.symbols[i].def {
                SymDef::Free | SymDef::Signed | SymDef::Position(..) | SymDef::Gap(..) => None,
                ref def => self.definition(def, class),
            });
            let forms: Vec<Normal> = value.into_iter().chain(defined).collect();
            let nonzero_constant = forms.first().and_then(Normal::as_constant).is_some_and(|c| c != 0);
            for form in &forms {
                let single = nonzero_constant && form.terms.len() == 1;
                nonzero.extend(form.terms.keys().flatten().filter(|(_, e)| single || *e < 0).map(|(atom, _)| atom.clone()));
            }
            facts.extend(forms.iter().skip(1).map(|f| (forms[0].clone(), f.clone())));
        }
        let mut solved: Vec<(Atom, Normal)> = Vec::new();
        for (a, b) in facts {
            let reduce = |n: &Normal| n.substitute(&solved);
            let (Some(a), Some(b)) = (reduce(&a), reduce(&b)) else { continue };
            if let Some(solution) = solve_for_an_atom(&a, &b, &nonzero) {
                solved.push(solution);
            }
        }
        solved
    }

    /// The form with the solved atoms replaced; the form itself where the
    /// coefficients would overflow (then only not provably equal).
    fn apply_facts(&self, form: Normal) -> Normal {
        form.substitute(&self.solved).unwrap_or(form)
    }

    /// A size's form before the facts: a derived size is its own
    /// definition's form; a free one its class's: the form of the class's
    /// constant, or of its first defined member, else the class's atom.
    fn form(&self, size: Size) -> Option<Normal> {
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
        let pair = |a: Size, b: Size| Some((self.form(a)?, self.form(b)?));
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

/// A monomial with `atom` left out.
fn without(monomial: &Monomial, atom: &Atom) -> Monomial {
    monomial.iter().filter(|(a, _)| a != atom).cloned().collect()
}

/// Solves `a = b`, both single terms, for a free atom that stands in one
/// side alone with exponent 1 and not in the other, that side's other
/// atoms all in `nonzero` (so that dividing by them is sound): the atom
/// and the single term it equals.
fn solve_for_an_atom(a: &Normal, b: &Normal, nonzero: &[Atom]) -> Option<(Atom, Normal)> {
    if a.terms.len() != 1 || b.terms.len() != 1 {
        return None;
    }
    let monomial = |n: &Normal| n.terms.keys().next().cloned().unwrap_or_default();
    for (side, other) in [(a, b), (b, a)] {
        let (atoms, others) = (monomial(side), monomial(other));
        let solvable = |(x, e): &&(Atom, i32)| {
            matches!(x, Atom::Free(_)) && *e == 1 && others.iter().all(|(y, _)| y != x) && atoms.iter().all(|(y, _)| y == x || nonzero.contains(y))
        };
        if let Some((x, _)) = atoms.iter().rev().find(solvable) {
            // side = x * rest, so x = other / rest.
            let rest = Normal { terms: side.terms.iter().map(|(m, &c)| (without(m, x), c)).collect() };
            return Some((x.clone(), other.mul(&rest.inverse()?)?));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use nax_contract::Symbol;

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

    /// `g` and `k` free, `h = g / 2`, `p = h * k` required to be 30 (a
    /// keyword size naming the group `(h k)`), `q = g * k` and `r = h * h`.
    #[test]
    fn a_class_with_two_forms_is_a_fact() {
        let t = SizeTable {
            symbols: vec![
                symbol("g", SymDef::Free, 0),
                symbol("k", SymDef::Free, 1),
                symbol("h", SymDef::Div(sym(0), Size::Const(2)), 2),
                Symbol { value: Some(30), ..symbol("p", SymDef::Mul(sym(2), sym(1)), 3) },
                symbol("q", SymDef::Mul(sym(0), sym(1)), 4),
            ],
        };
        let a = Algebra::new(&t);
        assert!(a.equal_products(&[sym(2), sym(1)], &[Size::Const(30)]), "h * k = 30");
        assert!(a.equal(sym(4), Size::Const(60)), "g * k = 2 * (h * k) = 60");
        assert!(!a.equal(sym(0), Size::Const(60)), "g alone is not known");
        // Without the fact, nothing is proved.
        let free = SizeTable { symbols: t.symbols.iter().map(|s| Symbol { value: None, ..s.clone() }).collect() };
        assert!(!Algebra::new(&free).equal_products(&[sym(2), sym(1)], &[Size::Const(30)]));
    }

    /// `a * b = c * b` (two products required equal) gives `a = c` only
    /// where `b` is known nonzero.
    #[test]
    fn a_fact_divides_only_by_sizes_known_nonzero() {
        let products = |b_divides: bool| SizeTable {
            symbols: vec![
                symbol("a", SymDef::Free, 0),
                symbol("b", SymDef::Free, 1),
                symbol("c", SymDef::Free, 2),
                symbol("ab", SymDef::Mul(sym(0), sym(1)), 3),
                symbol("cb", SymDef::Mul(sym(2), sym(1)), 3),
                symbol("d", if b_divides { SymDef::Div(sym(0), sym(1)) } else { SymDef::Free }, 5),
            ],
        };
        let zero_possible = products(false);
        assert!(!Algebra::new(&zero_possible).equal(sym(0), sym(2)), "b may be 0");
        let nonzero = products(true);
        assert!(Algebra::new(&nonzero).equal(sym(0), sym(2)), "b divides a, so it is not 0");
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
