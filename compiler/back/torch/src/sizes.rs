//! Sizes at run time: each size symbol of a function becomes a Python `int`.
//!
//! The preamble of each function binds every size that is an axis of a tensor
//! parameter from the argument's shape (`b = x.shape[0]`), checking constant
//! sizes and sizes required equal (`_size(y.shape[0], n, 'y.shape[0]')`).
//! Weights give the sizes no parameter gives. Derived sizes (`dim W = V / 2`,
//! the solved part of a pattern's group) are computed by their definition,
//! in the order of the symbol table, with exact division (`_div`); where a
//! class of equal sizes has several definitions, the others become checks.
//! Only the definitions the code needs are emitted, so the preamble stays short.

use crate::function::FnEmitter;
use crate::names::string_literal;
use nax_front::check::sizes::{Size, SymDef, SymId};
use nax_front::check::types::Type;
use std::collections::{BTreeMap, HashSet};

/// Where a size's value comes from.
enum Value {
    /// Axis `k` of the tensor with this Python name.
    Shape(String, usize),
    /// A derived size's definition, and the symbol's printed name.
    Derived(SymDef, String),
    /// A host int parameter with this Python name (a run-time keyword size).
    Host(String),
}

/// One line of the preamble.
enum Line {
    /// Binds the size class `root`; `eager` lines are emitted even when unused.
    Def { root: u32, value: Value, eager: bool },
    /// Checks that a value equals an expected size.
    Check { value: Value, expected: Size },
}

impl FnEmitter<'_> {
    /// A size as a Python expression: a literal, or the variable of its class.
    pub(crate) fn size(&mut self, size: Size) -> String {
        match self.f.symbols.resolve(size) {
            Size::Const(c) => c.to_string(),
            Size::Sym(SymId(root)) => {
                self.needed.insert(root);
                self.size_var(root)
            }
        }
    }

    /// The Python variable of a size class, named after its symbol.
    pub(crate) fn size_var(&mut self, root: u32) -> String {
        if let Some(v) = self.size_vars.get(&root) {
            return v.clone();
        }
        let want = self.f.symbols.data(SymId(root)).map_or_else(|| format!("size{root}"), |d| d.name.clone());
        let name = self.namer.fresh(&want);
        self.size_vars.insert(root, name.clone());
        name
    }

    /// A shape as a Python tuple: `()`, `(a,)`, `(a, b)`.
    pub(crate) fn shape(&mut self, sizes: &[Size]) -> String {
        let parts: Vec<String> = sizes.iter().map(|&s| self.size(s)).collect();
        match parts.as_slice() {
            [one] => format!("({one},)"),
            _ => format!("({})", parts.join(", ")),
        }
    }

    /// The product of sizes, constants folded: `3 * D`, `b * n`, `12`.
    pub(crate) fn product(&mut self, sizes: &[Size]) -> String {
        let mut constant: u64 = 1;
        let mut symbols = Vec::new();
        for &s in sizes {
            match self.f.symbols.resolve(s) {
                Size::Const(c) => constant = constant.saturating_mul(c),
                sym => symbols.push(self.size(sym)),
            }
        }
        if symbols.is_empty() || constant != 1 {
            symbols.insert(0, constant.to_string());
        }
        symbols.join(" * ")
    }

    /// The preamble's lines, and the needed sizes nothing defines.
    pub(crate) fn size_plan(&mut self) -> (Vec<String>, Vec<SymId>) {
        let f = self.f;
        let syms = &f.symbols;
        let mut defined: HashSet<u32> = HashSet::new();
        let mut lines: Vec<Line> = Vec::new();
        let resolve = |s: Size| syms.resolve(s);
        // Tensor parameters, in order: their sizes, and the checks between them.
        let mut sources: Vec<(String, Vec<Size>, bool)> = Vec::new();
        for (i, b) in self.f.bindings.iter().take(self.f.params).enumerate() {
            if let (Type::Tensor(t), Ok(name)) = (&b.ty, self.local(i)) {
                sources.push((name, t.axes.iter().map(|a| a.size).collect(), true));
            }
        }
        // Weights give the sizes no parameter gives.
        for &w in self.cx.lists.get(self.index).map(Vec::as_slice).unwrap_or_default() {
            if let (Some(weight), Ok(name)) = (self.cx.module.weights.get(w), self.weight(w)) {
                sources.push((name, weight.ty.axes.iter().map(|a| a.size).collect(), false));
            }
        }
        for (name, sizes, is_param) in sources {
            for (k, size) in sizes.into_iter().enumerate() {
                let value = Value::Shape(name.clone(), k);
                match resolve(size) {
                    Size::Sym(SymId(root)) if !defined.contains(&root) => {
                        defined.insert(root);
                        lines.push(Line::Def { root, value, eager: is_param });
                    }
                    expected if is_param => lines.push(Line::Check { value, expected }),
                    _ => {}
                }
            }
        }
        // Host int parameters that size patterns at run time (`h=k`).
        for &(size, i) in &self.f.size_arguments {
            if let (Size::Sym(SymId(root)), Ok(name)) = (resolve(size), self.local(i)) {
                if defined.insert(root) {
                    lines.push(Line::Def { root, value: Value::Host(name), eager: false });
                } else {
                    lines.push(Line::Check { value: Value::Host(name), expected: Size::Sym(SymId(root)) });
                }
            }
        }
        // Derived sizes, each once its operands are known.
        let derived: Vec<(SymId, SymDef, String)> =
            syms.all().filter(|(_, d)| d.def.operands().is_some()).map(|(id, d)| (id, d.def.clone(), d.name.clone())).collect();
        let mut done = vec![false; derived.len()];
        let known = |defined: &HashSet<u32>, s: Size| match resolve(s) {
            Size::Const(_) => true,
            Size::Sym(SymId(r)) => defined.contains(&r),
        };
        loop {
            let mut changed = false;
            for (j, (id, def, name)) in derived.iter().enumerate() {
                let (a, b) = operands(def);
                if done[j] || !known(&defined, a) || !known(&defined, b) {
                    continue;
                }
                done[j] = true;
                changed = true;
                let value = Value::Derived(def.clone(), name.clone());
                let symbolic = matches!(resolve(a), Size::Sym(_)) || matches!(resolve(b), Size::Sym(_));
                match resolve(Size::Sym(*id)) {
                    Size::Sym(SymId(root)) if !defined.contains(&root) => {
                        defined.insert(root);
                        lines.push(Line::Def { root, value, eager: false });
                    }
                    expected if symbolic && !self.identity(def, expected) => lines.push(Line::Check { value, expected }),
                    _ => {}
                }
            }
            if !changed {
                break;
            }
        }
        // What is needed: the code's sizes, and what needed lines refer to.
        let mut needed = self.needed.clone();
        for line in lines.iter().rev() {
            match line {
                Line::Def { root, value, eager } => {
                    if *eager || needed.contains(root) {
                        needed.extend(self.dependencies(value));
                    }
                }
                Line::Check { value, expected } => {
                    needed.extend(self.dependencies(value));
                    if let Size::Sym(SymId(r)) = resolve(*expected) {
                        needed.insert(r);
                    }
                }
            }
        }
        let unresolved = needed.iter().filter(|r| !defined.contains(r)).map(|&r| SymId(r)).collect();
        let mut out = Vec::new();
        for line in &lines {
            match line {
                Line::Def { root, value, eager } if *eager || needed.contains(root) => {
                    let var = self.size_var(*root);
                    let value = self.render(value);
                    out.push(format!("{var} = {value}"));
                }
                Line::Def { .. } => {}
                Line::Check { value, expected } => {
                    let what = match value {
                        Value::Shape(t, k) => format!("{t}.shape[{k}]"),
                        Value::Derived(_, name) | Value::Host(name) => name.clone(),
                    };
                    let value = self.render(value);
                    let expected = self.size(*expected);
                    out.push(format!("_size({value}, {expected}, {})", string_literal(&what)));
                }
            }
        }
        (out, unresolved)
    }

    /// Whether `def = expected` holds whatever the sizes, given that every
    /// division emitted is exact: both sides are the same product
    /// (`(b*8)*n*64` and `(b*n)*512`, or `2*(x/2)` and `x`), so no check is
    /// needed.
    fn identity(&self, def: &SymDef, expected: Size) -> bool {
        let SymDef::Mul(a, b) = def else { return false };
        let product = self.monomial(*a, 0).and_then(|x| x.times(&self.monomial(*b, 0)?, 1));
        product.is_some() && product == self.monomial(expected, 0)
    }

    /// A size as a rational constant times a product of powers of size
    /// classes, seeing through the products and exact quotients that define
    /// classes (`None` when a constant overflows).
    fn monomial(&self, size: Size, depth: usize) -> Option<Monomial> {
        let syms = &self.f.symbols;
        match syms.resolve(size) {
            Size::Const(c) => Some(Monomial::constant(c)),
            Size::Sym(SymId(r)) => match syms.data(SymId(r)).map(|d| &d.def) {
                Some(SymDef::Mul(a, b)) if depth < 64 => self.monomial(*a, depth + 1)?.times(&self.monomial(*b, depth + 1)?, 1),
                Some(SymDef::Div(a, b)) if depth < 64 => self.monomial(*a, depth + 1)?.times(&self.monomial(*b, depth + 1)?, -1),
                _ => Some(Monomial { num: 1, den: 1, powers: BTreeMap::from([(r, 1)]) }),
            },
        }
    }

    /// The size classes a value refers to.
    fn dependencies(&self, value: &Value) -> Vec<u32> {
        match value {
            Value::Shape(..) | Value::Host(_) => Vec::new(),
            Value::Derived(def, _) => {
                let (a, b) = operands(def);
                [a, b]
                    .into_iter()
                    .filter_map(|s| match self.f.symbols.resolve(s) {
                        Size::Sym(SymId(r)) => Some(r),
                        Size::Const(_) => None,
                    })
                    .collect()
            }
        }
    }

    /// A value as a Python expression.
    fn render(&mut self, value: &Value) -> String {
        match value {
            Value::Shape(t, k) => format!("{t}.shape[{k}]"),
            Value::Host(name) => name.clone(),
            Value::Derived(def, name) => {
                let (a, b) = operands(def);
                let (x, y) = (self.size(a), self.size(b));
                match def {
                    SymDef::Mul(..) => format!("{x} * {y}"),
                    SymDef::Add(..) => format!("{x} + {y}"),
                    SymDef::Div(..) => format!("_div({x}, {y}, {})", string_literal(name)),
                    SymDef::Sub(..) => format!("_sub({x}, {y}, {})", string_literal(name)),
                    SymDef::CeilDiv(..) => format!("-(-{x} // {y})"),
                    // A constant bound is held in two's complement.
                    SymDef::Position(a, _) => match self.f.symbols.resolve(*a) {
                        Size::Const(c) => format!("_position({}, {y})", c as i64),
                        Size::Sym(_) => format!("_position({x}, {y})"),
                    },
                    SymDef::Gap(..) => format!("max({x} - {y}, 0)"),
                    SymDef::Free | SymDef::Signed => name.clone(),
                }
            }
        }
    }
}

/// The operands of a derived size (a free or signed symbol has none: `1` and `1`).
fn operands(def: &SymDef) -> (Size, Size) {
    def.operands().unwrap_or((Size::Const(1), Size::Const(1)))
}

/// `num / den` times the product of each size class to its power.
#[derive(Debug, PartialEq, Eq)]
struct Monomial {
    num: u64,
    den: u64,
    powers: BTreeMap<u32, i32>,
}

impl Monomial {
    fn constant(c: u64) -> Monomial {
        Monomial { num: c, den: 1, powers: BTreeMap::new() }
    }

    /// `self * other` (`sign` 1) or `self / other` (`sign` -1), reduced;
    /// `None` on overflow.
    fn times(mut self, other: &Monomial, sign: i32) -> Option<Monomial> {
        let (n, d) = if sign > 0 { (other.num, other.den) } else { (other.den, other.num) };
        self.num = self.num.checked_mul(n)?;
        self.den = self.den.checked_mul(d)?;
        let g = gcd(self.num, self.den);
        if g > 1 {
            self.num /= g;
            self.den /= g;
        }
        for (&r, &p) in &other.powers {
            let e = self.powers.entry(r).or_insert(0);
            *e += sign * p;
            if *e == 0 {
                self.powers.remove(&r);
            }
        }
        Some(self)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
