//! From a kernel program to the runtime's [`NativePlan`]: the size slots
//! (every symbolic size the kernels use gets a slot in the `sizes` array
//! each kernel receives, filled at each call from the sizes the
//! call-boundary check solved; constant sizes are compiled in), the
//! buffers with their shapes in slots, and each kernel's strategy as the
//! driver runs it.

use nax_ir::algebra::{Algebra, Normal};
use nax_kernel::{Body, Expr, Kernel, Program};
use nax_runtime::Size;
use nax_runtime::plan::{Access, AttentionPlan, BufferPlan, GemmPlan, Index, IndexCheck, KernelPlan, Nest, Operand, Reach, SizeRef, Strategy};
use nax_runtime::{NativePlan, SymId};
use std::collections::HashMap;

/// The size slots of one program.
#[derive(Clone, Debug)]
pub struct Slots {
    /// The symbol of each slot (a resolved root).
    slots: Vec<SymId>,
    index: HashMap<SymId, usize>,
}

impl Slots {
    /// A slot for every symbolic size the program's buffers and kernels
    /// use; sizes with one normal form (equal at every call the boundary
    /// admits, such as the `c + n` each written-out layer derives anew)
    /// share a slot, so that kernels differing only in such names compile
    /// to the same code ([`crate::Sharing`]).
    pub fn new(p: &Program) -> Slots {
        let mut slots = Slots { slots: Vec::new(), index: HashMap::new() };
        let algebra = Algebra::new(&p.symbols);
        let mut forms: HashMap<Normal, usize> = HashMap::new();
        let mut add = |s: Size| {
            let Size::Sym(root) = p.symbols.resolve(s) else { return };
            if slots.index.contains_key(&root) {
                return;
            }
            let mut new_slot = || {
                slots.slots.push(root);
                slots.slots.len() - 1
            };
            let slot = match algebra.normal(Size::Sym(root)) {
                Some(form) => *forms.entry(form).or_insert_with(new_slot),
                None => new_slot(),
            };
            slots.index.insert(root, slot);
        };
        for b in &p.buffers {
            b.shape.iter().for_each(|&s| add(s));
        }
        for k in &p.kernels {
            k.loops.iter().for_each(|l| add(l.extent));
            k.values().for_each(|v| visit_sizes(v, &mut add));
        }
        slots
    }

    /// How many slots there are; an attention tile's positions come after them.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// How kernels read a size.
    pub fn size(&self, p: &Program, s: Size) -> SizeRef {
        match p.symbols.resolve(s) {
            Size::Const(c) => SizeRef::Const(c),
            Size::Sym(root) => SizeRef::Slot(self.index[&root]),
        }
    }

    /// The plan the driver runs the program's compiled kernels by.
    pub fn plan(&self, p: &Program) -> Result<NativePlan, crate::CodegenError> {
        let buffers =
            p.buffers.iter().map(|b| BufferPlan { dtype: b.dtype, shape: b.shape.iter().map(|&s| self.size(p, s)).collect(), kind: b.kind.clone() }).collect();
        let kernels = p
            .kernels
            .iter()
            .enumerate()
            .map(|(i, k)| self.kernel(p, k).ok_or_else(|| crate::CodegenError::Plan { function: p.name.clone(), kernel: i }))
            .collect::<Result<_, _>>()?;
        let microkernels = p.products.iter().map(|k| k.micro).collect();
        Ok(NativePlan { slots: self.slots.clone(), buffers, kernels, microkernels, results: p.results.clone() })
    }

    fn kernel(&self, p: &Program, k: &Kernel) -> Option<KernelPlan> {
        let loops = k.loops.iter().map(|l| self.size(p, l.extent)).collect();
        // The microkernel of the kernel's products, and its blocking.
        let product = || p.product_kernel(p.product_dtype(k)?).map(|i| (i, p.products[i].blocking));
        let strategy = if let Some(a) = &k.schedule.attention {
            let (microkernel, blocking) = product()?;
            let Body::Attention { keys, visible, value, .. } = &k.body else { return None };
            let [q, key] = product_operands(&k.rows.first()?.value)?;
            Strategy::Attention(AttentionPlan {
                batch: a.batch.clone(),
                rows: a.rows,
                cols: a.cols,
                keys: *keys,
                tile: a.tile,
                scratch: a.scratch,
                q,
                k: key,
                v: operand(value)?,
                masked: visible.is_some(),
                microkernel,
                blocking,
            })
        } else if let Some(g) = &k.schedule.gemm {
            let Body::Reduce { value, .. } = &k.body else { return None };
            let [a, b] = product_operands(value)?;
            let (microkernel, blocking) = product()?;
            Strategy::Gemm(GemmPlan {
                batch: g.batch.clone(),
                rows: g.rows,
                cols: g.cols,
                inner: g.inner,
                a,
                b,
                microkernel,
                blocking,
                epilogue: g.epilogue.is_some(),
            })
        } else {
            Strategy::Nest(Nest { loops: k.loops.len(), parallel: k.parallel_loop(), grain: parallel_tile(k), flat: k.schedule.flat })
        };
        let checks = k.checks.iter().map(|c| IndexCheck { buffer: c.buffer, bound: self.size(p, c.bound), axis: c.axis.clone() }).collect();
        Some(KernelPlan { output: k.output, loops, strategy, checks, footprint: self.footprint(p, k) })
    }

    /// Every buffer the kernel writes (its output, over its output loops)
    /// or reads (each load, each gather's positions that loops index), with
    /// its reach along each axis, for the driver's footprint check.
    fn footprint(&self, p: &Program, k: &Kernel) -> Vec<Access> {
        let extent = |l: usize| k.loops.get(l).map_or(SizeRef::Const(0), |lp| self.size(p, lp.extent));
        let reach = |i: Option<Index>| match i {
            Some(Index::Loop(l)) => Reach::Positions(extent(l)),
            Some(Index::Const(c)) => Reach::Positions(SizeRef::Const(c as u64 + 1)),
            Some(Index::Zero) => Reach::Positions(SizeRef::Const(1)),
            None => Reach::Computed,
        };
        let rank = p.buffers.get(k.output).map_or(0, |b| b.shape.len());
        let mut out = vec![Access { buffer: k.output, write: true, reach: (0..rank).map(|l| Reach::Positions(extent(l))).collect() }];
        let staged = k.schedule.transpose.iter().map(|t| (t.buffer, t.index.iter().copied().map(Some).collect()));
        for (buffer, index) in k.values().flat_map(Expr::reads).chain(staged) {
            let access = Access { buffer, write: false, reach: index.into_iter().map(reach).collect() };
            if !out.contains(&access) {
                out.push(access);
            }
        }
        out
    }
}

/// The outer edge of a kernel's tiles when its parallel loop is the outer
/// tiled loop (the driver then splits it at tile edges), else 1.
fn parallel_tile(k: &Kernel) -> usize {
    let order = k.order();
    match k.schedule.tile {
        Some((outer, _)) if k.parallel_loop() && order.len() >= 2 && order[order.len() - 2] == 0 => outer as usize,
        _ => 1,
    }
}

/// A load as the driver's operand.
fn operand(e: &Expr) -> Option<Operand> {
    match e {
        Expr::Load { buffer, index } => Some(Operand { buffer: *buffer, index: index.clone() }),
        _ => None,
    }
}

/// The two loads of a product.
fn product_operands(e: &Expr) -> Option<[Operand; 2]> {
    let Expr::Apply { args, .. } = e else { return None };
    let [a, b] = args.as_slice() else { return None };
    Some([operand(a)?, operand(b)?])
}

fn visit_sizes(e: &Expr, add: &mut impl FnMut(Size)) {
    match e {
        Expr::Size(s) => add(*s),
        Expr::Apply { args, .. } => args.iter().for_each(|a| visit_sizes(a, add)),
        Expr::Gather { computed, .. } => computed.iter().for_each(|(_, a)| visit_sizes(a, add)),
        _ => {}
    }
}
