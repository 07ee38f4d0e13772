//! Row fusion, after kernels are formed: a reduction over the last loop of
//! a store's nest, read by that store (and nothing else) once per row,
//! becomes one of the store's row reductions, and a cheap elementwise
//! kernel over the rows between them is recomputed inside the store. A
//! layer norm (mean, variance, `rsqrt`, normalise) becomes one kernel that
//! reads each row from memory once; its later passes over the row hit the
//! first-level cache, and while they compute, the next row of its operands
//! and its output is prefetched (rows of a known size up to
//! [`PREFETCHED_ROW_BYTES`]).

use crate::kernel::{Body, BufferKind, Expr, Index, Kernel, Program, Role, RowReduction, Schedule};
use std::collections::{HashMap, HashSet};

/// Fuses row reductions into their stores until nothing more fuses, in
/// sweeps: each sweep finds every store's next fusion at once ([`fusions`])
/// and applies them together, so that forming the kernels of a written-out
/// loop takes time in proportion to its turns.
pub fn fuse(p: &mut Program) {
    loop {
        let pairs = fusions(p);
        if pairs.is_empty() {
            return;
        }
        for &(consumer, producer) in &pairs {
            let k = p.kernels[producer].clone();
            let prefetch = prefetch_rows(p, consumer);
            let c = &mut p.kernels[consumer];
            match k.body {
                Body::Reduce { op, value } => {
                    // The new row reduction goes first (it reads none of the others).
                    for v in c.values_mut() {
                        v.rewrite(&mut |e| match e {
                            Expr::Row(r) => *r += 1,
                            Expr::Load { buffer, .. } if *buffer == k.output => *e = Expr::Row(0),
                            _ => {}
                        });
                    }
                    c.rows.insert(0, RowReduction { op, dtype: p.buffers[k.output].dtype, value });
                    c.schedule.prefetch = prefetch;
                }
                Body::Store(value) => {
                    for v in c.values_mut() {
                        v.rewrite(&mut |e| {
                            if matches!(e, Expr::Load { buffer, .. } if *buffer == k.output) {
                                *e = value.clone();
                            }
                        });
                    }
                }
                Body::Along { .. } | Body::Attention { .. } | Body::Scatter { .. } => {}
            }
        }
        remove_kernels(p, pairs.into_iter().map(|(_, producer)| producer).collect());
    }
}

/// Removes kernels, the last first (so the others keep their places while
/// it runs), each one's checks passing to the kernel after it.
pub(crate) fn remove_kernels(p: &mut Program, mut kernels: Vec<usize>) {
    kernels.sort_unstable();
    for k in kernels.into_iter().rev() {
        p.remove_kernel(k);
    }
}

/// The largest row (of the output) a row-reduction kernel prefetches the
/// next of: a third of a first-level cache, so the next row's operands and
/// output stay there beside this row's. Measured on `layernorm` (rows of
/// 4 KiB, ms, interleaved rounds): no prefetch 3.95, the next row of the
/// operand alone 3.8-4.0, of the operand and the output 3.56, two rows
/// ahead 3.62.
const PREFETCHED_ROW_BYTES: u64 = 16 << 10;

/// How many rows ahead a row-reduction kernel prefetches (see
/// [`Schedule::prefetch`]): one, when its rows are of a known size of at
/// most [`PREFETCHED_ROW_BYTES`].
fn prefetch_rows(p: &Program, kernel: usize) -> Option<u64> {
    let k = &p.kernels[kernel];
    let row = p.symbols.constant(k.loops[k.loops.len() - 1].extent)?;
    let bytes = row.checked_mul(p.buffers[k.output].dtype.size_bytes() as u64)?;
    (bytes <= PREFETCHED_ROW_BYTES).then_some(1)
}

/// The most operations of an elementwise kernel over the rows that is
/// recomputed inside the store: its value is the same along the row, so
/// LLVM hoists it out of the row's loop (Cranelift recomputes it).
const MAX_RECOMPUTED: u64 = 4;

/// A store that can take row reductions: a plain schedule (but for the
/// prefetch of rows it gets with them, a GPU's flat loops, or a CPU's
/// streamed results) and a last loop that runs whole
/// inside one call (not the parallel one).
pub(crate) fn takes_rows(c: &Kernel) -> bool {
    matches!(c.body, Body::Store(_))
        && c.schedule
            == Schedule {
                prefetch: c.schedule.prefetch,
                flat: c.schedule.flat,
                stream: c.schedule.stream,
                stream_ahead: c.schedule.stream_ahead,
                ..Schedule::default()
            }
        && c.loops.len() >= 2
        && !matches!(c.loops[c.loops.len() - 1].role, Role::Parallel | Role::ParallelVector)
}

/// The fusions of one sweep: each store's first (consumer, producer)
/// pair, as fusing one pair at a time, first store first, would find it.
/// A store whose producer is itself a store fusing in this sweep (or
/// waiting for one) waits for the next sweep: its producer must have
/// taken its own first.
fn fusions(p: &Program) -> Vec<(usize, usize)> {
    let readers = Readers::new(p);
    let mut busy = vec![false; p.kernels.len()];
    let mut pairs = Vec::new();
    for (ci, c) in p.kernels.iter().enumerate().filter(|(_, c)| takes_rows(c)) {
        let Some(pi) = first_fusion(p, &readers, ci, c) else { continue };
        if !busy[pi] {
            pairs.push((ci, pi));
        }
        busy[ci] = true;
    }
    pairs
}

/// The first producer that store `ci` can take: it writes a temporary that
/// only the consumer reads, always at the consumer's current row, and is a
/// reduction over a loop of the consumer's last loop's extent, or a cheap
/// store over the rows.
fn first_fusion(p: &Program, readers: &Readers, ci: usize, c: &Kernel) -> Option<usize> {
    let r = c.loops.len() - 1;
    let row: Vec<Index> = (0..r).map(Index::Loop).collect();
    for (buffer, index) in c.values().flat_map(|v| v.loads()) {
        // Indices the driver checks stay in memory.
        if index != row.as_slice() || !readers.only_reader(p, buffer, ci, &row) || readers.checked.contains(&buffer) {
            continue;
        }
        let Some(pi) = readers.writer(buffer) else { continue };
        let k = &p.kernels[pi];
        let same = |a: usize, b: usize| p.symbols.same(k.loops[a].extent, c.loops[b].extent);
        if !k.rows.is_empty() || k.schedule != Schedule::default() || pi > ci || k.reads_own_output() {
            continue;
        }
        let fits = match &k.body {
            Body::Reduce { .. } => k.loops.len() == r + 1 && (0..=r).all(|j| same(j, j)),
            Body::Store(v) => k.loops.len() == r && (0..r).all(|j| same(j, j)) && v.operations() <= MAX_RECOMPUTED,
            Body::Along { .. } | Body::Attention { .. } | Body::Scatter { .. } => false,
        };
        if fits {
            return Some(pi);
        }
    }
    None
}

/// Who reads and writes each buffer of a program, taken once per search
/// of a fusion pass (a search asks about every kernel's loads: asking the
/// program each time made kernel formation quadratic in the kernels).
pub(crate) struct Readers {
    /// Each buffer's loads: the kernel and the indices.
    loads: HashMap<usize, Vec<(usize, Vec<Index>)>>,
    /// The first kernel that writes each buffer, and how many do.
    writers: HashMap<usize, (usize, usize)>,
    /// The buffers an alias views.
    aliased: HashSet<usize>,
    /// The buffers whose integers the driver checks (`take`'s indices).
    pub(crate) checked: HashSet<usize>,
}

impl Readers {
    pub(crate) fn new(p: &Program) -> Readers {
        let mut readers = Readers { loads: HashMap::new(), writers: HashMap::new(), aliased: HashSet::new(), checked: HashSet::new() };
        for (i, k) in p.kernels.iter().enumerate() {
            for (buffer, index) in k.values().flat_map(|v| v.loads()) {
                readers.loads.entry(buffer).or_default().push((i, index.to_vec()));
            }
            readers.writers.entry(k.output).or_insert((i, 0)).1 += 1;
            readers.checked.extend(k.checks.iter().map(|c| c.buffer));
        }
        readers.aliased = p.buffers.iter().filter_map(|b| if let BufferKind::Alias(a) = b.kind { Some(a) } else { None }).collect();
        readers
    }

    /// Whether `buffer` is a temporary that kernel `reader` alone reads (at
    /// `row` only), that is not a result, and that no alias views.
    pub(crate) fn only_reader(&self, p: &Program, buffer: usize, reader: usize, row: &[Index]) -> bool {
        p.buffers[buffer].kind == BufferKind::Temporary
            && !p.results.contains(&buffer)
            && !self.aliased.contains(&buffer)
            && self.loads.get(&buffer).into_iter().flatten().all(|(k, index)| *k == reader && index.as_slice() == row)
    }

    /// The kernel that writes `buffer`, when one alone does (a scatter
    /// into a product's output, in place, is a second: neither is the
    /// value a reader may compute in its place).
    pub(crate) fn writer(&self, buffer: usize) -> Option<usize> {
        self.writers.get(&buffer).filter(|&&(_, count)| count == 1).map(|&(first, _)| first)
    }
}
