//! The size slots of a program: every symbolic size its kernels use gets a
//! slot in the `sizes` array each kernel receives, filled at each call from
//! the sizes the call-boundary check solved. Constant sizes are compiled in.

use nax_front::check::sizes::Size;
use nax_kernel::{Expr, Program};
use std::collections::HashMap;

/// The slots of one program.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The symbol of each slot (a resolved root).
    slots: Vec<Size>,
    index: HashMap<Size, usize>,
}

/// A size as the kernels see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeRef {
    Const(u64),
    Slot(usize),
}

impl Plan {
    pub fn new(p: &Program) -> Plan {
        let mut plan = Plan { slots: Vec::new(), index: HashMap::new() };
        let mut add = |s: Size| {
            if let Size::Sym(_) = p.symbols.resolve(s) {
                let root = p.symbols.resolve(s);
                if !plan.index.contains_key(&root) {
                    plan.index.insert(root, plan.slots.len());
                    plan.slots.push(root);
                }
            }
        };
        for b in &p.buffers {
            b.shape.iter().for_each(|&s| add(s));
        }
        for k in &p.kernels {
            k.loops.iter().for_each(|l| add(l.extent));
            k.values().for_each(|v| visit_sizes(v, &mut add));
        }
        plan
    }

    /// How many slots there are; an attention tile's positions come after them.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// How kernels read a size.
    pub fn size(&self, p: &Program, s: Size) -> SizeRef {
        match p.symbols.resolve(s) {
            Size::Const(c) => SizeRef::Const(c),
            root => SizeRef::Slot(self.index[&root]),
        }
    }

    /// The value of every slot at one call, from the symbols' values.
    pub fn values(&self, p: &Program, sizes: &[Option<u64>]) -> Result<Vec<i64>, String> {
        self.slots
            .iter()
            .map(|&s| {
                let Size::Sym(id) = s else { return Err("internal error: a constant size has a slot".to_string()) };
                sizes
                    .get(id.0 as usize)
                    .copied()
                    .flatten()
                    .and_then(|v| i64::try_from(v).ok())
                    .ok_or_else(|| format!("the size `{}` is not known at this call", p.symbols.display(s)))
            })
            .collect()
    }

    /// The value of a size at one call, given the slots' values.
    pub fn value(&self, p: &Program, s: Size, slots: &[i64]) -> usize {
        match self.size(p, s) {
            SizeRef::Const(c) => c as usize,
            SizeRef::Slot(i) => slots[i] as usize,
        }
    }
}

fn visit_sizes(e: &Expr, add: &mut impl FnMut(Size)) {
    match e {
        Expr::Size(s) => add(*s),
        Expr::Apply { args, .. } => args.iter().for_each(|a| visit_sizes(a, add)),
        _ => {}
    }
}
