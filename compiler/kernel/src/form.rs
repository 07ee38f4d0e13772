//! Kernel formation: one kernel per graph node, except that an
//! elementwise-style node (map, permute, expansion, selection, constructor)
//! whose only consumer reads each of its elements once is computed inside
//! that consumer's loop nest (elementwise chains become one kernel, and a
//! reduction takes its elementwise prologue), and a cheap one is
//! recomputed in each of its consumers. Views that keep row-major order (reshape, rename) alias their
//! operand's buffer; permutes, expansions and selections are copy kernels
//! whose loads index the operand; host scalars fold into the expressions
//! that use them.

use crate::ProductKernel;
use crate::kernel::{
    Body, Buffer, BufferKind, Expr, Index, IndexCheck, Kernel, Loop, Program, Role, STREAM_AHEAD_BYTES, Schedule, Transpose, constructor_value,
};
use nax_contract::DType;
use nax_contract::Machine;
use nax_contract::Size;
use nax_ir::Type;
use nax_ir::{Graph, MapFn, Op};
use nax_ops::{AlongAxis, Elementwise, Reduction};
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// The tiles of a transposed read: 64 positions of the outer loop by 256
/// of the inner, vectorised one. Each tile reads 256 rows of the
/// transposed operand along 64 contiguous elements (256 bytes of f32)
/// and 64 rows of the other operands and the output along 256 (1 KiB),
/// and stages through a scratch of 64 KiB ([`Transpose`]). Measured on
/// `transpose_add` (4096 x 4096 f32, AVX-512, blocks of 16 x 16, output
/// streamed, Xeon with AMX, 2 threads, ms, medians of 7 interleaved
/// rounds): 64 x 256: 7.8-8.1, 32 x 512: 8.3, 128 x 256: 8.4, 64 x 512:
/// 8.6, 32 x 256: 8.6, 128 x 128: 8.7; the untransposed `elementwise`
/// add of the same sizes takes about 5.3. Staged through the output
/// instead (whose rows are 16 KiB apart, so a tile's lines crowd a few
/// cache sets) and stored plainly, the tiles of 128 x 128 took 18.4. On
/// an AMD Zen 4 (medians of 4 interleaved runs, the next tile's
/// transposed rows prefetched): 64 x 256 9.6-10.5, 128 x 256 9.9-10.2,
/// 64 x 512 11.1-11.2; the untransposed add about 5.
const TILE: (u64, u64) = (64, 256);

/// How many second-level caches an output must outgrow (or the last-level
/// cache) for a store to stream it (see [`Former::outgrows_caches`]).
const STREAMED_L2S: u64 = 16;

/// The widths the column blocks of a softmax along a strided axis keep
/// to (see [`Former::column_block`]): at least 64 columns (256 bytes of
/// each row of f32, four cache lines, for the prefetchers to follow), at
/// most 1024.
const COLUMNS: (u64, u64) = (64, 1024);

/// How many rows ahead along the axis a softmax in column blocks asks for
/// its operand's rows of the block, in its first pass (see
/// [`Schedule::prefetch`]): the block's rows are short (a few lines) and
/// far apart, many streams for the hardware's prefetchers. Measured on
/// `softmax_mid` (Xeon with AMX, 2 threads, 256 columns, interleaved, both
/// orders): 0.92-0.93 of the time at 8 rows; 2 to 16 rows alike; asking
/// for the output's lines to write as well was slower (1.2x).
const COLUMN_ROWS_AHEAD: u64 = 8;

/// The most terms an f32 sum accumulates in the output's memory, in f32
/// (see [`Former::reduce_kernel`]): 4096 keeps the error of the running
/// sums near a few ulps.
const IN_MEMORY_F32_TERMS: u64 = 4096;

/// What a graph node became.
#[derive(Clone)]
enum Value {
    Buffer(usize),
    Scalar(Expr),
    /// An elementwise-style value (a map, permute, expansion, selection or
    /// constructor) whose only consumer will compute it inline: its
    /// expression over its own output loops, and those loops, to emit it as
    /// a kernel of its own if the consumer cannot take it.
    Inline {
        expr: Expr,
        loops: Vec<Loop>,
    },
}

/// Whether an expression over a nest of `rank` loops is cheap enough to
/// compute again in each consumer instead of storing it once: a few
/// arithmetic operations reading at most one operand of the nest's full
/// size (the others broadcast; `0.044715 * h * h` reads `h` once), so
/// that recomputing moves no more memory than storing and reading back
/// (`x - mean` in a layer norm).
fn cheap(e: &Expr, rank: usize) -> bool {
    use nax_ops::BinaryOp as B;
    use nax_ops::Elementwise as F;
    /// Whether `e` reads memory; counts the operations on values read from memory.
    fn reads(e: &Expr) -> bool {
        match e {
            Expr::Load { .. } | Expr::Gather { .. } => true,
            Expr::Apply { args, .. } => args.iter().any(reads),
            _ => false,
        }
    }
    // The distinct reads of whole rows of memory (`h * h` reads `h` once).
    fn walk<'e>(e: &'e Expr, rank: usize, applies: &mut usize, full: &mut Vec<&'e Expr>) -> bool {
        match e {
            Expr::Load { index, .. } => {
                if (0..rank).all(|l| index.contains(&Index::Loop(l))) && !full.contains(&e) {
                    full.push(e);
                }
                true
            }
            Expr::Gather { .. } => {
                if (0..rank).all(|l| e.reads_loop(l)) && !full.contains(&e) {
                    full.push(e);
                }
                true
            }
            // Operations on constants and host scalars are computed once, outside the loops.
            Expr::Apply { .. } if !reads(e) => true,
            Expr::Apply { func, args, .. } => {
                *applies += 1;
                if *applies > 3 {
                    return false;
                }
                let cheap_op = matches!(
                    func,
                    MapFn::Binary(B::Add | B::Sub | B::Mul | B::Div)
                        | MapFn::Unary(_)
                        | MapFn::Builtin(F::Abs | F::Relu | F::Maximum | F::Minimum | F::Where | F::Clamp | F::MaskedFill)
                );
                cheap_op && args.iter().all(|a| walk(a, rank, applies, full))
            }
            _ => true,
        }
    }
    let (mut applies, mut full) = (0, Vec::new());
    walk(e, rank, &mut applies, &mut full) && applies <= 3 && full.len() <= 1
}

/// Whether an inline value only reads a buffer (a selection, a permute,
/// an expansion, a slice or a gather of one): its consumers read the
/// buffer in place, in any nest.
fn is_view(e: &Expr) -> bool {
    matches!(e, Expr::Load { .. } | Expr::Gather { .. })
}

/// `e` with the loops of the nest it was written for replaced by `at`,
/// where some are computed positions: a load indexed by such a loop
/// becomes a gather, and the loop's position its expression.
fn substitute_at(e: &Expr, at: &[At]) -> Expr {
    let convert = |index: &mut Vec<Index>, computed: &mut Vec<(usize, Expr)>| {
        for (axis, i) in index.iter_mut().enumerate() {
            if computed.iter().any(|(c, _)| *c == axis) {
                continue;
            }
            if let Index::Loop(l) = *i {
                match &at[l] {
                    At::Index(j) => *i = *j,
                    At::Computed(position) => {
                        *i = Index::Zero;
                        computed.push((axis, position.clone()));
                    }
                }
            }
        }
    };
    let mut e = e.clone();
    // Bottom-up: a gather's computed positions are rewritten before the gather itself.
    e.rewrite(&mut |x| match x {
        Expr::Load { buffer, index } => {
            let mut index = std::mem::take(index);
            let mut computed = Vec::new();
            convert(&mut index, &mut computed);
            *x = if computed.is_empty() { Expr::Load { buffer: *buffer, index } } else { Expr::Gather { buffer: *buffer, index, computed } };
        }
        Expr::Gather { index, computed, .. } => convert(index, computed),
        Expr::LoopIndex(l) => {
            *x = match &at[*l] {
                At::Index(Index::Loop(m)) => Expr::LoopIndex(*m),
                At::Index(Index::Const(c)) => Expr::Literal(nax_ir::Literal::Int(*c as i64)),
                At::Index(Index::Zero) => Expr::Literal(nax_ir::Literal::Int(0)),
                At::Computed(position) => position.clone(),
            }
        }
        _ => {}
    });
    e
}

/// `e` with the loops of the nest it was written for replaced by `at`
/// (what indexes each of them in the consumer's nest).
fn substitute(e: &Expr, at: &[Index]) -> Expr {
    substitute_at(e, &at.iter().map(|&i| At::Index(i)).collect::<Vec<_>>())
}

/// Why a graph's kernels could not be formed: a graph that is not as the
/// lowering and the optimizer make them (each a bug of nax).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FormError {
    /// The graph has a cycle.
    #[error("internal error: the graph of `{function}` has a cycle")]
    Cycle { function: String },
    /// A contraction node without operands.
    #[error("internal error: node %{node} of `{function}`: a contraction without operands")]
    EmptyContraction { function: String, node: usize },
    /// The graph's output has no value.
    #[error("internal error: the graph of `{function}` has no output")]
    NoOutput { function: String },
    /// An exchange between processes, which a sharded function's stages
    /// never hold (the graph is cut at them).
    #[error("internal error: node %{node} of `{function}` is an exchange between processes, which no stage holds")]
    Exchange { function: String, node: usize },
}

/// How kernels are formed beyond the machine they are for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FormOptions {
    /// Every load and store of every kernel is checked against its
    /// buffer's length at run time (`--check-bounds`): an access outside
    /// fails the call instead of being made. The program gets a fault
    /// record ([`crate::BufferKind::Fault`]).
    pub check_bounds: bool,
}

/// Forms the kernels of a graph for `machine` (as the code generator sees
/// it: [`Machine::with_vector_bytes`] where its vectors are narrower).
pub fn form(g: &Graph, machine: &Machine, options: FormOptions) -> Result<Program, FormError> {
    let order = petgraph::algo::toposort(&g.graph, None).map_err(|_| FormError::Cycle { function: g.name.clone() })?;
    let mut f = Former {
        g,
        p: Program {
            name: g.name.clone(),
            buffers: Vec::new(),
            kernels: Vec::new(),
            results: Vec::new(),
            symbols: g.symbols.clone(),
            size_arguments: g.size_arguments.clone(),
            products: Vec::new(),
        },
        values: HashMap::new(),
        machine: *machine,
        checks: Vec::new(),
    };
    for n in order {
        let v = f.node(n)?;
        f.values.insert(n, v);
    }
    for output in g.output_nodes() {
        f.materialize(output);
        let result = match f.values.get(&output).cloned() {
            Some(Value::Buffer(b)) => b,
            Some(Value::Scalar(e)) => {
                let b = f.buffer(output, BufferKind::Temporary);
                f.p.kernels.push(Kernel {
                    output: b,
                    loops: Vec::new(),
                    rows: Vec::new(),
                    body: Body::Store(e),
                    schedule: Schedule::default(),
                    checks: Vec::new(),
                });
                f.values.insert(output, Value::Buffer(b));
                b
            }
            Some(Value::Inline { .. }) | None => return Err(FormError::NoOutput { function: g.name.clone() }),
        };
        f.p.results.push(result);
    }
    if let Some(last) = f.p.kernels.last_mut() {
        last.checks.append(&mut f.checks);
    }
    crate::attention::fuse(&mut f.p);
    crate::rows::fuse(&mut f.p);
    crate::epilogue::fuse(&mut f.p);
    if machine.gpu() {
        let flats: Vec<usize> = f.p.kernels.iter().map(|k| flat_loops(k, &f.p)).collect();
        for (k, flat) in f.p.kernels.iter_mut().zip(flats) {
            // A GPU has no prefetches (the row fusion may have asked for one).
            k.schedule.prefetch = None;
            k.schedule.flat = flat;
        }
    } else {
        let flats: Vec<usize> = f.p.kernels.iter().map(|k| cpu_flat_loops(k, &f.p)).collect();
        for (k, flat) in f.p.kernels.iter_mut().zip(flats) {
            k.schedule.flat = flat;
        }
        let streams: Vec<Option<u32>> = f.p.kernels.iter().map(|k| f.streamed(k)).collect();
        for (k, stream) in f.p.kernels.iter_mut().zip(streams) {
            k.schedule.stream = stream;
            let untiled = stream.is_some() && k.schedule.tile.is_none();
            k.schedule.stream_ahead = (untiled && computes_much(k)).then_some(STREAM_AHEAD_BYTES);
        }
    }
    f.p.drop_unused_buffers();
    if options.check_bounds {
        let words = Size::Const((nax_contract::plan::FAULT_WORDS + f.p.buffers.len() + 1) as u64);
        f.p.buffers.push(Buffer { dtype: DType::I64, shape: vec![words], kind: BufferKind::Fault });
    }
    // One microkernel per dtype of the products, in the order kernels first use them.
    let dtypes: Vec<DType> = f.p.kernels.iter().filter_map(|k| f.p.product_dtype(k)).collect();
    for dtype in dtypes {
        if f.p.product_kernel(dtype).is_none() {
            f.p.products.push(ProductKernel::for_machine(machine, dtype));
        }
    }
    Ok(f.p)
}

/// Whether a store computes enough per element that the hardware's
/// prefetchers fall behind its reads (see [`Schedule::stream_ahead`]): it
/// has row reductions, or applies a function evaluated by a polynomial
/// (an exponential, a logarithm, erf, a trigonometric function, or one
/// built on them).
fn computes_much(k: &Kernel) -> bool {
    fn polynomial(e: &Expr) -> bool {
        use Elementwise::*;
        match e {
            Expr::Apply { func, args, .. } => {
                matches!(func, MapFn::Builtin(Exp | Log | Log1p | Expm1 | Sin | Cos | Tanh | Erf | Sigmoid | Gelu | Silu | Softplus | Pow))
                    || args.iter().any(polynomial)
            }
            Expr::Gather { computed, .. } => computed.iter().any(|(_, e)| polynomial(e)),
            _ => false,
        }
    }
    !k.rows.is_empty() || k.values().any(polynomial)
}

/// The leading loops a GPU runs as one flat parallel loop (a CPU too, for
/// a function along an axis): every output
/// loop of a store or a reduction (but a store's last loop when it has row
/// reductions, which run along it in each thread), the loops before the
/// axis of a softmax-like function along an axis (each thread runs its
/// passes along the axis, and the loops after it); none for attention,
/// whose parallel loop stays loop 0 alone.
fn flat_loops(k: &Kernel, p: &Program) -> usize {
    let rank = p.buffers[k.output].shape.len();
    if !k.parallel_loop() || k.schedule != (Schedule { prefetch: k.schedule.prefetch, ..Schedule::default() }) {
        return 0;
    }
    match k.body {
        Body::Store(_) if k.rows.is_empty() && k.loops.len() == rank => rank,
        Body::Store(_) if k.loops.len() == rank && rank >= 2 => rank - 1,
        Body::Reduce { .. } if k.loops.len() > rank => rank,
        Body::Along { axis, .. } => axis.min(rank),
        _ => 0,
    }
}

/// The leading loops a CPU runs as one flat parallel loop, so that the
/// work splits across the threads whatever the first loop's extent (a
/// batch of one in front of attention's heads and rows, or of a prompt's
/// tokens, ran on one thread): those before the axis of a function along
/// an axis ([`flat_loops`]) and those before the last loop of a store
/// (the vectorised one, which each thread runs whole); none elsewhere,
/// nor where one of them is the vectorised loop (a logsumexp's rows run
/// in vector lanes).
fn cpu_flat_loops(k: &Kernel, p: &Program) -> usize {
    let rank = p.buffers[k.output].shape.len();
    let flat = match k.body {
        Body::Along { .. } => flat_loops(k, p),
        Body::Store(_) => flat_loops(k, p).min(rank.saturating_sub(1)),
        _ => return 0,
    };
    if flat >= 2 && k.loops[..flat].iter().all(|l| matches!(l.role, Role::Parallel | Role::Serial)) { flat } else { 0 }
}

struct Former<'g> {
    g: &'g Graph,
    p: Program,
    values: HashMap<NodeIndex, Value>,
    machine: Machine,
    /// Checks of `take`'s indices waiting for the next kernel formed
    /// (which runs after the indices are computed and before any kernel
    /// that reads the gather).
    checks: Vec<IndexCheck>,
}

/// How a consumer reads one axis of an operand: at an index of its nest,
/// or at a position it computes (a slice, a concatenation, a gather).
#[derive(Clone, Debug)]
enum At {
    Index(Index),
    Computed(Expr),
}

/// An integer expression in the nest (positions, sizes).
fn int(func: MapFn, args: Vec<Expr>) -> Expr {
    Expr::Apply { func, compute: DType::I64, args }
}

fn shape(ty: &Type) -> Vec<Size> {
    match ty {
        Type::Tensor(t) => t.axes.iter().map(|a| a.size).collect(),
        _ => Vec::new(),
    }
}

impl Former<'_> {
    fn buffer(&mut self, n: NodeIndex, kind: BufferKind) -> usize {
        let ty = &self.g.graph[n].ty;
        self.p.buffers.push(Buffer { dtype: nax_ir::value_dtype(ty), shape: shape(ty), kind });
        self.p.buffers.len() - 1
    }

    fn is_one(&self, s: Size) -> bool {
        self.g.symbols.constant(s) == Some(1)
    }

    /// The loops over a node's own axes: the outermost parallel, the innermost vectorised.
    fn output_loops(&self, sizes: &[Size]) -> Vec<Loop> {
        let rank = sizes.len();
        sizes
            .iter()
            .enumerate()
            .map(|(i, &extent)| {
                let role = match (i == 0, i + 1 == rank) {
                    (true, true) => Role::ParallelVector,
                    (true, false) => Role::Parallel,
                    (false, true) => Role::Vector,
                    (false, false) => Role::Serial,
                };
                Loop { extent, role }
            })
            .collect()
    }

    /// An operand read at loop positions `at` (one per operand axis); a size-1
    /// axis against a longer loop reads index 0. An inline operand is
    /// computed in place when every loop of the consumer's nest indexes it
    /// (each of its elements is then computed once); otherwise it becomes a
    /// kernel of its own first.
    fn read(&mut self, operand: NodeIndex, at: &[Index], loops: &[Loop]) -> Expr {
        let sizes = shape(&self.g.graph[operand].ty);
        let index: Vec<Index> = at
            .iter()
            .zip(&sizes)
            .map(|(&i, &s)| match i {
                Index::Loop(l) if self.is_one(s) && !self.is_one(loops[l].extent) => Index::Zero,
                other => other,
            })
            .collect();
        if let Value::Inline { expr, .. } = &self.values[&operand] {
            // A view (a selection, a permute, a slice of a buffer) is read in
            // place whatever the nest: recomputing it is reading it.
            if is_view(expr) || (0..loops.len()).all(|l| index.contains(&Index::Loop(l))) {
                return substitute(expr, &index);
            }
            self.materialize(operand);
        }
        match &self.values[&operand] {
            Value::Buffer(b) => Expr::Load { buffer: *b, index },
            Value::Scalar(e) => e.clone(),
            Value::Inline { expr, .. } => expr.clone(),
        }
    }

    /// The nest of a reduction of an operand of shape `input` along `axis`
    /// into `out`: the output's loops then the axis's, reducing; where each
    /// operand axis is read; and the reducing loop.
    fn reduction_along(&self, out: &[Size], input: &[Size], axis: usize) -> (Vec<Loop>, Vec<Index>, usize) {
        let mut loops = self.output_loops(out);
        loops.push(Loop { extent: input[axis], role: Role::Reduce });
        let last = loops.len() - 1;
        let at = (0..input.len())
            .map(|a| {
                Index::Loop(if a == axis {
                    last
                } else if a < axis {
                    a
                } else {
                    a - 1
                })
            })
            .collect();
        (loops, at, last)
    }

    /// An operand read at positions `at` (one per operand axis), some of
    /// them computed: an inline operand is computed in place when every
    /// loop of the nest reaches it, a buffer is read by a gather.
    fn read_at(&mut self, operand: NodeIndex, at: &[At], loops: &[Loop]) -> Expr {
        if at.iter().all(|a| matches!(a, At::Index(_))) {
            let index: Vec<Index> = at.iter().map(|a| if let At::Index(i) = a { *i } else { Index::Zero }).collect();
            return self.read(operand, &index, loops);
        }
        if let Value::Inline { expr, .. } = &self.values[&operand] {
            let reaches = |l: usize| {
                at.iter().any(|a| match a {
                    At::Index(i) => *i == Index::Loop(l),
                    At::Computed(e) => e.reads_loop(l),
                })
            };
            if is_view(expr) || (0..loops.len()).all(reaches) {
                return substitute_at(expr, at);
            }
            self.materialize(operand);
        }
        match &self.values[&operand] {
            Value::Buffer(b) => {
                let (mut index, mut computed) = (Vec::with_capacity(at.len()), Vec::new());
                for (axis, a) in at.iter().enumerate() {
                    match a {
                        At::Index(i) => index.push(*i),
                        At::Computed(e) => {
                            index.push(Index::Zero);
                            computed.push((axis, e.clone()));
                        }
                    }
                }
                Expr::Gather { buffer: *b, index, computed }
            }
            Value::Scalar(e) => e.clone(),
            Value::Inline { expr, .. } => expr.clone(),
        }
    }

    /// Materialises an inline operand unless it is cheap to compute again
    /// at each position that reads it (a concatenation's clamped reads,
    /// an arg-reduction's second pass).
    fn materialize_unless_cheap(&mut self, n: NodeIndex) {
        let rank = shape(&self.g.graph[n].ty).len();
        if let Some(Value::Inline { expr, .. }) = self.values.get(&n)
            && !cheap(expr, rank)
        {
            self.materialize(n);
        }
    }

    /// The buffer a running value of node `n` accumulates in: the node's
    /// own, or one of the wider `wide` dtype (a half float's f32), of its shape.
    fn accumulator_buffer(&mut self, n: NodeIndex, wide: DType) -> usize {
        if wide == nax_ir::value_dtype(&self.g.graph[n].ty) {
            return self.buffer(n, BufferKind::Temporary);
        }
        self.p.buffers.push(Buffer { dtype: wide, shape: shape(&self.g.graph[n].ty), kind: BufferKind::Temporary });
        self.p.buffers.len() - 1
    }

    /// Node `n`'s value accumulated by one kernel in buffer `b` (see
    /// [`Self::accumulator_buffer`]), with the plain schedule (the nest
    /// visits its loops in order): `b`, or its elements rounded to the
    /// node's dtype by a store after it.
    fn accumulated(&mut self, n: NodeIndex, b: usize, loops: Vec<Loop>, body: Body) -> Value {
        let checks = std::mem::take(&mut self.checks);
        self.p.kernels.push(Kernel { output: b, loops, rows: Vec::new(), body, schedule: Schedule::default(), checks });
        if self.p.buffers[b].dtype == nax_ir::value_dtype(&self.g.graph[n].ty) {
            return Value::Buffer(b);
        }
        let out = shape(&self.g.graph[n].ty);
        let loops = self.output_loops(&out);
        self.store(n, loops, Expr::Load { buffer: b, index: (0..out.len()).map(Index::Loop).collect() })
    }

    /// The buffer of a scatter's base that the scatter may add into in
    /// place: written by the kernel of the base's own contraction, map or
    /// reduction, in the scatter's dtype, and read by nothing else (the
    /// scatter is the node's one consumer, and it is no result).
    fn in_place_base(&self, base: NodeIndex, dtype: DType) -> Option<usize> {
        let Value::Buffer(b) = self.values[&base] else { return None };
        let single = self.g.graph.edges_directed(base, petgraph::Direction::Outgoing).count() == 1 && !self.g.output_nodes().any(|o| o == base);
        let own = matches!(self.g.graph[base].op, Op::Contract { .. } | Op::Map { .. } | Op::Reduce { .. });
        let written = self.p.kernels.iter().any(|k| k.output == b);
        (single && own && written && self.p.buffers[b].kind == BufferKind::Temporary && self.p.buffers[b].dtype == dtype).then_some(b)
    }

    /// The buffer holding `take`'s indices (computed first where they are
    /// an expression), for the driver to check and the gather to read.
    fn index_buffer(&mut self, n: NodeIndex) -> usize {
        self.materialize(n);
        match self.values[&n].clone() {
            Value::Buffer(b) => b,
            Value::Scalar(e) => self.scratch(DType::I64, Vec::new(), Vec::new(), Body::Store(e)),
            Value::Inline { expr, loops } => {
                let dtype = nax_ir::value_dtype(&self.g.graph[n].ty);
                self.scratch(dtype, shape(&self.g.graph[n].ty), loops, Body::Store(expr))
            }
        }
    }

    /// Emits an inline value's kernel, so the value has a buffer.
    fn materialize(&mut self, n: NodeIndex) {
        if let Some(Value::Inline { expr, loops }) = self.values.get(&n).cloned() {
            let v = self.kernel(n, loops, Body::Store(expr));
            self.values.insert(n, v);
        }
    }

    /// An elementwise-style value: inline when its consumers are kernels
    /// that can compute it in place (one consumer, or several when it is
    /// cheap to recompute), else a kernel of its own.
    fn store(&mut self, n: NodeIndex, loops: Vec<Loop>, expr: Expr) -> Value {
        let consumers: Vec<NodeIndex> = self.g.graph.neighbors_directed(n, petgraph::Direction::Outgoing).collect();
        let edges = self.g.graph.edges_directed(n, petgraph::Direction::Outgoing).count();
        let is_cheap = cheap(&expr, loops.len());
        // softmax and its kind read their operand in several passes: only a cheap one is recomputed there.
        let kernels_all = !consumers.is_empty()
            && consumers.iter().all(|&c| match self.g.graph[c].op {
                Op::Map { .. }
                | Op::Contract { .. }
                | Op::Reduce { .. }
                | Op::Permute { .. }
                | Op::Expand { .. }
                | Op::Select { .. }
                | Op::Slice { .. }
                | Op::Concat { .. }
                | Op::Take { .. }
                | Op::ScatterAdd { .. }
                | Op::Scan { .. }
                | Op::ArgReduce { .. }
                | Op::Rename => true,
                Op::Along { .. } => is_cheap,
                _ => false,
            });
        let fusable = !self.g.output_nodes().any(|o| o == n) && kernels_all && (edges == 1 || is_cheap);
        if fusable { Value::Inline { expr, loops } } else { self.kernel(n, loops, Body::Store(expr)) }
    }

    fn kernel(&mut self, n: NodeIndex, mut loops: Vec<Loop>, body: Body) -> Value {
        let b = self.buffer(n, BufferKind::Temporary);
        let schedule = self.schedule_loops(b, &mut loops, &body);
        let checks = std::mem::take(&mut self.checks);
        self.p.kernels.push(Kernel { output: b, loops, rows: Vec::new(), body, schedule, checks });
        Value::Buffer(b)
    }

    /// A reduction's kernel. Where the schedule accumulates an f32 sum or
    /// mean in the output's memory (rows along a middle axis added in
    /// place) over more than [`IN_MEMORY_F32_TERMS`] terms (or a number
    /// unknown until the call), the accumulation runs in an f64 scratch
    /// of the output's shape, which a second kernel rounds to f32: an f32
    /// accumulator in memory loses whole terms once its sum is 2^24 times
    /// theirs (2^22 rows of `1 + 2^-10` summed 0.1% low), and a register
    /// reduction's blocks ([`Schedule`]'s default order) cannot span
    /// the output's rows.
    fn reduce_kernel(&mut self, n: NodeIndex, loops: Vec<Loop>, op: Reduction, value: Expr) -> Value {
        let rank = shape(&self.g.graph[n].ty).len();
        let terms: Option<u64> = loops[rank..].iter().try_fold(1u64, |count, l| self.p.symbols.constant(l.extent).and_then(|c| count.checked_mul(c)));
        let long = terms.is_none_or(|t| t > IN_MEMORY_F32_TERMS);
        let v = self.kernel(n, loops, Body::Reduce { op, value });
        let Value::Buffer(out) = v else { return v };
        let in_memory = self.p.kernels.last().is_some_and(|k| !k.schedule.order.is_empty());
        if !(long && in_memory && self.p.buffers[out].dtype == DType::F32 && matches!(op, Reduction::Sum | Reduction::Mean)) {
            return v;
        }
        let Some(Kernel { loops, body, checks, .. }) = self.p.kernels.pop() else { return v };
        self.checks = checks;
        let wide = self.scratch(DType::F64, self.p.buffers[out].shape.clone(), loops, body);
        let loops = self.output_loops(&self.p.buffers[out].shape.clone());
        let body = Body::Store(Expr::Load { buffer: wide, index: (0..rank).map(Index::Loop).collect() });
        let schedule = self.schedule(out, &loops, &body);
        self.p.kernels.push(Kernel { output: out, loops, rows: Vec::new(), body, schedule, checks: Vec::new() });
        v
    }

    /// Whether axis `axis` of a shape has a stride: some later axis is not of size 1.
    fn is_strided_axis(&self, sizes: &[Size], axis: usize) -> bool {
        sizes[axis + 1..].iter().any(|&s| !self.is_one(s))
    }

    /// A buffer no graph value names, computed by one kernel.
    fn scratch(&mut self, dtype: DType, shape: Vec<Size>, mut loops: Vec<Loop>, body: Body) -> usize {
        self.p.buffers.push(Buffer { dtype, shape, kind: BufferKind::Temporary });
        let b = self.p.buffers.len() - 1;
        let schedule = self.schedule_loops(b, &mut loops, &body);
        let checks = std::mem::take(&mut self.checks);
        self.p.kernels.push(Kernel { output: b, loops, rows: Vec::new(), body, schedule, checks });
        b
    }

    /// softmax, log_softmax or logsumexp along an axis with a stride, as
    /// three kernels whose inner loops run over contiguous memory: the
    /// maximum along the axis, the sum of exponentials, then the result.
    /// (Along the last axis, one kernel's passes run over contiguous rows.)
    fn along_strided(&mut self, n: NodeIndex, input: NodeIndex, func: AlongAxis, axis: usize) -> Value {
        use nax_ops::BinaryOp as B;
        use nax_ops::Elementwise as F;
        let sizes = shape(&self.g.graph[input].ty);
        let wide = if nax_ir::value_dtype(&self.g.graph[input].ty) == DType::F64 { DType::F64 } else { DType::F32 };
        let reduced: Vec<Size> = sizes.iter().enumerate().filter(|&(a, _)| a != axis).map(|(_, &s)| s).collect();
        let rank = reduced.len();
        let apply = |func: MapFn, args: Vec<Expr>| Expr::Apply { func, compute: wide, args };
        // The reductions: the reduced axes, then the axis.
        let (loops, at, _) = self.reduction_along(&reduced, &sizes, axis);
        let x = self.read(input, &at, &loops);
        let max = self.scratch(wide, reduced.clone(), loops.clone(), Body::Reduce { op: Reduction::Max, value: x.clone() });
        let m = Expr::Load { buffer: max, index: (0..rank).map(Index::Loop).collect() };
        let shifted = apply(MapFn::Binary(B::Sub), vec![x, m]);
        let exp = apply(MapFn::Builtin(F::Exp), vec![shifted.clone()]);
        let float = |v: f64| Expr::Literal(nax_ir::Literal::Float(v));
        // A log_softmax or logsumexp sums the exponentials below the maximum
        // and counts the maximum's ties apart (see the native `along`).
        let at_max = apply(MapFn::Binary(B::Eq), vec![shifted, float(0.0)]);
        let (terms, ties) = if func == AlongAxis::Softmax {
            (exp, None)
        } else {
            let below = apply(MapFn::Builtin(F::Where), vec![at_max.clone(), float(0.0), exp]);
            let tie = apply(MapFn::Builtin(F::Where), vec![at_max, float(1.0), float(0.0)]);
            let ties = self.scratch(wide, reduced.clone(), loops.clone(), Body::Reduce { op: Reduction::Sum, value: tie });
            (below, Some(ties))
        };
        let sum = self.scratch(wide, reduced, loops, Body::Reduce { op: Reduction::Sum, value: terms });
        let out = shape(&self.g.graph[n].ty);
        let loops = self.output_loops(&out);
        let (x, index) = if func == AlongAxis::LogSumExp {
            (None, (0..rank).map(Index::Loop).collect::<Vec<_>>())
        } else {
            let x = self.read(input, &(0..sizes.len()).map(Index::Loop).collect::<Vec<_>>(), &loops);
            (Some(x), (0..sizes.len()).filter(|&a| a != axis).map(Index::Loop).collect())
        };
        let (m, s) = (Expr::Load { buffer: max, index: index.clone() }, Expr::Load { buffer: sum, index: index.clone() });
        let log_sum = match ties {
            Some(ties) => {
                let extra = apply(MapFn::Binary(B::Sub), vec![Expr::Load { buffer: ties, index }, float(1.0)]);
                apply(MapFn::Builtin(F::Log1p), vec![apply(MapFn::Binary(B::Add), vec![s.clone(), extra])])
            }
            None => apply(MapFn::Builtin(F::Log), vec![s.clone()]),
        };
        let value = match (func, x) {
            (AlongAxis::Softmax, Some(x)) => {
                apply(MapFn::Binary(B::Div), vec![apply(MapFn::Builtin(F::Exp), vec![apply(MapFn::Binary(B::Sub), vec![x, m])]), s])
            }
            (AlongAxis::LogSoftmax, Some(x)) => apply(MapFn::Binary(B::Sub), vec![apply(MapFn::Binary(B::Sub), vec![x, m]), log_sum]),
            // logsumexp: the maximum itself where it is infinite.
            _ => {
                let infinite =
                    apply(MapFn::Binary(B::Eq), vec![apply(MapFn::Builtin(F::Abs), vec![m.clone()]), Expr::Literal(nax_ir::Literal::Float(f64::INFINITY))]);
                apply(MapFn::Builtin(F::Where), vec![infinite, m.clone(), apply(MapFn::Binary(B::Add), vec![m, log_sum])])
            }
        };
        self.kernel(n, loops, Body::Store(value))
    }

    /// [`Self::schedule`], and the loops it runs: a schedule that runs
    /// another loop outside loop 0 (a sum into a vector, its rows
    /// outermost) runs on one thread, loop 0 no longer parallel.
    fn schedule_loops(&self, out: usize, loops: &mut [Loop], body: &Body) -> Schedule {
        let schedule = self.schedule(out, loops, body);
        if schedule.order.first().is_some_and(|&l| l != 0) {
            loops[0].role = match loops[0].role {
                Role::ParallelVector => Role::Vector,
                Role::Parallel => Role::Serial,
                other => other,
            };
        }
        schedule
    }

    /// The schedule of a kernel: a transposed read tiles the two innermost
    /// loops; a reduction whose operands are contiguous (or constant) along
    /// the last output loop, and strided along none, runs its reduction
    /// loops outside that loop (accumulating rows of the output, which
    /// vectorises: a matrix product becomes rows of axpys).
    fn schedule(&self, out: usize, loops: &[Loop], body: &Body) -> Schedule {
        let rank = self.p.buffers[out].shape.len();
        let loads: Vec<(usize, &[Index])> = body.exprs().into_iter().flat_map(|v| v.loads()).collect();
        // Whether some load steps through memory with a stride along loop `l`.
        let strided = |l: usize| {
            loads.iter().any(|(b, index)| index.iter().enumerate().any(|(a, &i)| i == Index::Loop(l) && self.is_strided_axis(&self.p.buffers[*b].shape, a)))
        };
        let contiguous = |l: usize| loads.iter().any(|(_, index)| index.last() == Some(&Index::Loop(l)));
        let mut s = Schedule { gemm: self.gemm_loops(out, loops, body), ..Schedule::default() };
        if self.machine.gpu() {
            // One thread per output position; the flat loop is set once the kernels are fused (`gpu_schedule`).
            return s;
        }
        match body {
            Body::Store(_) if rank >= 2 && strided(rank - 1) && contiguous(rank - 2) => {
                s.tile = Some(TILE);
                s.transpose = self.transposed_read(out, &loads, rank);
            }
            Body::Along { func, axis, .. } if Schedule::takes_columns(&self.p.symbols, self.p.buffers[out].dtype, loops, *func, *axis) => {
                s.columns = Some(self.column_block(out, loops[*axis].extent));
                s.prefetch = Some(COLUMN_ROWS_AHEAD);
            }
            // Rows along a middle axis (or, into a vector, every row) added
            // in place: each row read once, contiguous, where a register
            // sum per output vector would read a column at a time (a bias's
            // gradient, `[b n F] -> [F]`: 6.1 ms on 2 threads down to 0.6
            // on one, `block_train`'s 8 MiB).
            Body::Reduce { .. }
                if s.gemm.is_none()
                    && rank >= 1
                    && loops.len() > rank
                    && body.exprs().iter().all(|&v| self.accumulates_in_memory(out, v))
                    && contiguous(rank - 1)
                    && !strided(rank - 1) =>
            {
                s.order = (0..rank - 1).chain(rank..loops.len()).chain([rank - 1]).collect();
            }
            _ => {}
        }
        s
    }

    /// The width of the column blocks of a softmax into `out` along an axis
    /// of `extent` positions: the widest power of two whose block of the
    /// input and the output (`extent` rows each) fills at most half the
    /// machine's second-level cache, so the passes after the first (the
    /// sum of exponentials, kept in the output, and their scaling) find the
    /// block there, within [`COLUMNS`]. Measured on `softmax_mid` (`[32 512
    /// 512]` f32, 1 MiB second-level cache: 128 columns, ms, interleaved
    /// rounds): 64: 2.0-2.5, 128: 1.4-1.9, 256: 2.0-2.4, 1024 (whole rows):
    /// 2.1-2.4; widths that do not divide the rows, 96 to 192: 3.1-3.9. An
    /// online maximum and sum in one pass, then one pass writing the result
    /// (two exponentials per element and the rescaling's, where keeping the
    /// exponentials takes one), was slower at every width: 2.7-3.1.
    fn column_block(&self, out: usize, extent: Size) -> u64 {
        let rows = self.p.symbols.constant(extent).unwrap_or(1).max(1);
        let bytes = self.p.buffers[out].dtype.size_bytes() as u64;
        let fits = self.machine.cache_bytes[1] / 2 / rows.saturating_mul(2 * bytes);
        let widest = if fits == 0 { 0 } else { 1 << fits.ilog2() };
        widest.clamp(COLUMNS.0, COLUMNS.1)
    }

    /// The lanes a CPU kernel streams its results in (see
    /// [`Schedule::stream`]): a store (after its row reductions, if any),
    /// in its loops' order, untiled or staging a transposed read, whose
    /// output outgrows the caches.
    fn streamed(&self, k: &Kernel) -> Option<u32> {
        let s = &k.schedule;
        let rank = self.p.buffers[k.output].shape.len();
        let lanes = match (&s.tile, &s.transpose) {
            (None, None) => self.machine.vector_bytes() / self.p.buffers[k.output].dtype.size_bytes() as u32,
            (Some(_), Some(t)) => t.lanes,
            _ => return None,
        };
        let plain = matches!(k.body, Body::Store(_)) && rank >= 1 && k.loops.len() == rank && s.order.is_empty();
        (plain && s.gemm.is_none() && lanes >= 2 && lanes.is_power_of_two() && self.outgrows_caches(k.output)).then_some(lanes)
    }

    /// Whether `out` is sure to leave the caches before anything reads it
    /// (see [`Schedule::stream`]): its size is known and larger than the
    /// last-level cache or than [`STREAMED_L2S`] second-level caches
    /// (the last level of a large server's CPU, shared by many cores, is
    /// not a share a program can count on).
    fn outgrows_caches(&self, out: usize) -> bool {
        let bytes =
            self.p.buffers[out].shape.iter().try_fold(self.p.buffers[out].dtype.size_bytes() as u64, |n, &s| n.checked_mul(self.p.symbols.constant(s)?));
        let cached = self.machine.cache_bytes[2].min(STREAMED_L2S.saturating_mul(self.machine.cache_bytes[1]));
        bytes.is_some_and(|b| b > cached)
    }

    /// The read a tiled store over `rank` loops stages through a scratch tile
    /// (see [`Transpose`]): the first load whose last axis alone the outer
    /// tiled loop (`rank - 2`) indexes and another the inner one, of the
    /// output's element width, in blocks of the machine's vector lanes.
    fn transposed_read(&self, out: usize, loads: &[(usize, &[Index])], rank: usize) -> Option<Transpose> {
        let (outer, inner) = (Index::Loop(rank - 2), Index::Loop(rank - 1));
        let width = self.p.buffers[out].dtype.size_bytes();
        let lanes = self.machine.vector_bytes() / width as u32;
        let &(buffer, index) = loads.iter().find(|(b, index)| {
            let Some((last, rest)) = index.split_last() else { return false };
            *last == outer && !rest.contains(&outer) && rest.contains(&inner) && self.p.buffers[*b].dtype.size_bytes() == width
        })?;
        (lanes >= 2 && lanes.is_power_of_two()).then(|| Transpose { buffer, index: index.to_vec(), lanes })
    }

    /// The loop roles of a contraction that a packed matrix product can run:
    /// a sum over one loop of the product of two loads of `out`'s float
    /// dtype (f32, f64, or a half float, which the product widens to f32),
    /// each with an output loop the other does not read. The innermost
    /// output loop only the first load reads gives the rows, the innermost
    /// only the second reads the columns; the other output loops are the
    /// batch.
    fn gemm_loops(&self, out: usize, loops: &[Loop], body: &Body) -> Option<crate::kernel::GemmLoops> {
        let dtype = self.p.buffers[out].dtype;
        let Body::Reduce { op: Reduction::Sum, value: Expr::Apply { func: MapFn::Binary(nax_ops::BinaryOp::Mul), compute, args } } = body else {
            return None;
        };
        let [Expr::Load { buffer: a, index: ia }, Expr::Load { buffer: b, index: ib }] = args.as_slice() else { return None };
        let rank = self.p.buffers[out].shape.len();
        if self.machine.gpu()
            || nax_contract::plan::Microkernel::compute_dtype(dtype).is_none()
            || *compute != dtype
            || self.p.buffers[*a].dtype != dtype
            || self.p.buffers[*b].dtype != dtype
            || loops.len() != rank + 1
        {
            return None;
        }
        let inner = rank;
        let reads = |index: &[Index], l: usize| index.contains(&Index::Loop(l));
        if !reads(ia, inner) || !reads(ib, inner) {
            return None;
        }
        let rows = (0..rank).rev().find(|&l| reads(ia, l) && !reads(ib, l));
        let cols = (0..rank).rev().find(|&l| reads(ib, l) && !reads(ia, l));
        if rows.is_none() || cols.is_none() {
            // A matrix-vector product reads each matrix element once: it is
            // bound by memory, and a nest that streams the matrix (rows of
            // axpys, or dot products) beats packing it for a microkernel
            // whose tile would be one row or column.
            return None;
        }
        let batch = (0..rank).filter(|&l| Some(l) != rows && Some(l) != cols).collect();
        Some(crate::kernel::GemmLoops { batch, rows, cols, inner, epilogue: None })
    }

    /// Whether a reduction into `out` can accumulate in the output's own
    /// dtype without losing precision the interpreter keeps: an f64
    /// output, or an f32 output of values computed in f32 or narrower
    /// (masks and integers, such as `where`'s condition, read as they are).
    fn accumulates_in_memory(&self, out: usize, value: &Expr) -> bool {
        fn narrow(p: &Program, e: &Expr) -> bool {
            match e {
                Expr::Load { buffer, .. } => matches!(p.buffers[*buffer].dtype, DType::F32 | DType::F16 | DType::BF16 | DType::Bool),
                Expr::Apply { compute, args, .. } => {
                    matches!(compute, DType::F32 | DType::F16 | DType::BF16)
                        && args.iter().all(|a| narrow(p, a) || !matches!(a, Expr::Apply { .. } | Expr::Load { .. }))
                }
                _ => false,
            }
        }
        match self.p.buffers[out].dtype {
            DType::F64 => true,
            DType::F32 => narrow(&self.p, value),
            _ => false,
        }
    }

    fn node(&mut self, n: NodeIndex) -> Result<Value, FormError> {
        let node = &self.g.graph[n];
        let ops = self.g.operands(n);
        let out = shape(&node.ty);
        let dtype = nax_ir::value_dtype(&node.ty);
        Ok(match &node.op {
            Op::Input { index, .. } => Value::Buffer(self.buffer(n, BufferKind::Input(*index))),
            Op::Weight { name } => Value::Buffer(self.buffer(n, BufferKind::Weight(name.clone()))),
            Op::Literal(l) => Value::Scalar(Expr::Literal(*l)),
            Op::SizeValue(s) => Value::Scalar(Expr::Size(*s)),
            Op::Map { func, maps, compute } => {
                let loops = self.output_loops(&out);
                let args: Vec<Expr> =
                    ops.iter().zip(maps).map(|(&o, m)| self.read(o, &m.iter().map(|&r| Index::Loop(r)).collect::<Vec<_>>(), &loops)).collect();
                let value = Expr::Apply { func: *func, compute: *compute, args };
                if ops.iter().all(|o| matches!(self.values[o], Value::Scalar(_))) && out.is_empty() && !matches!(node.ty, Type::Tensor(_)) {
                    Value::Scalar(value)
                } else {
                    self.store(n, loops, value)
                }
            }
            Op::Contract { labels, output } => {
                let n_labels = labels.iter().flatten().chain(output).copied().max().map_or(0, |m| m + 1);
                let mut extent: Vec<Option<Size>> = vec![None; n_labels];
                for (&o, ls) in ops.iter().zip(labels) {
                    for (&l, &s) in ls.iter().zip(&shape(&self.g.graph[o].ty)) {
                        if extent[l].is_none() || !self.is_one(s) {
                            extent[l] = Some(s);
                        }
                    }
                }
                // Summed: the labels some operand carries and the result does not.
                let summed: Vec<usize> = (0..n_labels).filter(|l| !output.contains(l) && labels.iter().any(|ls| ls.contains(l))).collect();
                let order: Vec<usize> = output.iter().chain(&summed).copied().collect();
                let mut loops = self.output_loops(&out);
                loops.extend(summed.iter().map(|&l| Loop { extent: extent[l].unwrap_or(Size::Const(1)), role: Role::Reduce }));
                let position = |l: usize| order.iter().position(|&x| x == l).unwrap_or(0);
                let reads: Vec<Expr> =
                    ops.iter().zip(labels).map(|(&o, ls)| self.read(o, &ls.iter().map(|&l| Index::Loop(position(l))).collect::<Vec<_>>(), &loops)).collect();
                let value = reads
                    .into_iter()
                    .reduce(|a, b| Expr::Apply { func: MapFn::Binary(nax_ops::BinaryOp::Mul), compute: dtype, args: vec![a, b] })
                    .ok_or_else(|| FormError::EmptyContraction { function: self.g.name.clone(), node: n.index() })?;
                self.kernel(n, loops, Body::Reduce { op: Reduction::Sum, value })
            }
            Op::Reduce { op, axes } => {
                let input = shape(&self.g.graph[ops[0]].ty);
                let kept: Vec<usize> = (0..input.len()).filter(|a| !axes.contains(a)).collect();
                let mut loops = self.output_loops(&out);
                loops.extend(axes.iter().map(|&a| Loop { extent: input[a], role: Role::Reduce }));
                let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
                let at: Vec<Index> = (0..input.len()).map(|a| Index::Loop(order.iter().position(|&x| x == a).unwrap_or(0))).collect();
                let value = self.read(ops[0], &at, &loops);
                self.reduce_kernel(n, loops, *op, value)
            }
            Op::Along { func, axis } if self.is_strided_axis(&shape(&self.g.graph[ops[0]].ty), *axis) => {
                // One kernel in column blocks (see `schedule`) where it can run so; else three kernels.
                let mut loops = self.output_loops(&out);
                loops[*axis].role = Role::Serial;
                if Schedule::takes_columns(&self.p.symbols, nax_ir::value_dtype(&node.ty), &loops, *func, *axis) {
                    let value = self.read(ops[0], &(0..out.len()).map(Index::Loop).collect::<Vec<_>>(), &loops);
                    self.kernel(n, loops, Body::Along { func: *func, axis: *axis, value })
                } else {
                    self.along_strided(n, ops[0], *func, *axis)
                }
            }
            Op::Along { func, axis } => {
                // The passes read the operand three times: an inline operand is
                // cheap (see `store`), and recomputed in each.
                let input = shape(&self.g.graph[ops[0]].ty);
                let (loops, at, along) = if *func == AlongAxis::LogSumExp {
                    self.reduction_along(&out, &input, *axis)
                } else {
                    // The passes run along the axis inside each other position: its loop is serial.
                    let mut loops = self.output_loops(&out);
                    loops[*axis].role = Role::Serial;
                    (loops, (0..input.len()).map(Index::Loop).collect(), *axis)
                };
                let value = self.read(ops[0], &at, &loops);
                self.kernel(n, loops, Body::Along { func: *func, axis: along, value })
            }
            // A renamed value not in memory stays where it is computed: its
            // consumers read it at the same positions (a call's argument
            // that selects a layer of a stacked input is read in place,
            // not copied at the call).
            Op::Rename if matches!(self.values[&ops[0]], Value::Inline { .. }) => {
                let loops = self.output_loops(&out);
                let value = self.read(ops[0], &(0..out.len()).map(Index::Loop).collect::<Vec<_>>(), &loops);
                self.store(n, loops, value)
            }
            Op::Reshape | Op::Rename => {
                // A view needs its operand in memory.
                self.materialize(ops[0]);
                match self.values[&ops[0]].clone() {
                    Value::Buffer(b) => Value::Buffer(self.buffer(n, BufferKind::Alias(b))),
                    // A scalar given axes (of size 1: `rearrange(1.0, -> 1)`)
                    // is stored over them, as any value with axes is.
                    _ if !out.is_empty() => {
                        let loops = self.output_loops(&out);
                        let value = self.read(ops[0], &[], &loops);
                        self.store(n, loops, value)
                    }
                    scalar => scalar,
                }
            }
            Op::Permute { perm } => {
                let loops = self.output_loops(&out);
                let mut at = vec![Index::Zero; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    at[p] = Index::Loop(i);
                }
                let value = self.read(ops[0], &at, &loops);
                self.store(n, loops, value)
            }
            Op::Expand { map } => {
                let loops = self.output_loops(&out);
                let at: Vec<Index> = map.iter().map(|&r| Index::Loop(r)).collect();
                let value = self.read(ops[0], &at, &loops);
                self.store(n, loops, value)
            }
            Op::Select { axis, index, .. } => {
                let loops = self.output_loops(&out);
                let rank = out.len() + 1;
                let at: Vec<Index> =
                    (0..rank).map(|a| if a == *axis { Index::Const(*index) } else { Index::Loop(if a < *axis { a } else { a - 1 }) }).collect();
                let value = self.read(ops[0], &at, &loops);
                self.store(n, loops, value)
            }
            Op::Slice { axis, start, step } => {
                use nax_ops::BinaryOp as B;
                let loops = self.output_loops(&out);
                let scaled = if *step == 1 {
                    Expr::LoopIndex(*axis)
                } else {
                    int(MapFn::Binary(B::Mul), vec![Expr::Literal(nax_ir::Literal::Int(i64::try_from(*step).unwrap_or(i64::MAX))), Expr::LoopIndex(*axis)])
                };
                let position = At::Computed(if self.g.symbols.constant(*start) == Some(0) {
                    scaled
                } else {
                    int(MapFn::Binary(B::Add), vec![Expr::Size(*start), scaled])
                });
                let at: Vec<At> = (0..out.len()).map(|a| if a == *axis { position.clone() } else { At::Index(Index::Loop(a)) }).collect();
                let value = self.read_at(ops[0], &at, &loops);
                self.store(n, loops, value)
            }
            Op::Concat { axis } => {
                use nax_ops::BinaryOp as B;
                use nax_ops::Elementwise as F;
                let loops = self.output_loops(&out);
                let k = Expr::LoopIndex(*axis);
                let zero = Expr::Literal(nax_ir::Literal::Int(0));
                // Offsets of constant sizes are folded: a loop's stack of
                // L turns is a chain of L selections, not of L^2 additions.
                let literal = |v: i64| Expr::Literal(nax_ir::Literal::Int(v));
                let folded = |func: B, a: Expr, b: Expr| match (&a, &b, func) {
                    (Expr::Literal(nax_ir::Literal::Int(x)), Expr::Literal(nax_ir::Literal::Int(y)), B::Add) => literal(x.saturating_add(*y)),
                    (Expr::Literal(nax_ir::Literal::Int(x)), Expr::Literal(nax_ir::Literal::Int(y)), B::Sub) => literal(x.saturating_sub(*y)),
                    _ => int(MapFn::Binary(func), vec![a, b]),
                };
                let (mut start, mut parts) = (zero.clone(), Vec::new());
                for &o in &ops {
                    let len = shape(&self.g.graph[o].ty)[*axis];
                    if self.g.symbols.constant(len) == Some(0) {
                        continue;
                    }
                    self.materialize_unless_cheap(o);
                    let size = match self.g.symbols.constant(len).and_then(|c| i64::try_from(c).ok()) {
                        Some(c) => literal(c),
                        None => Expr::Size(len),
                    };
                    // The operand's position, clamped into it: every branch of the
                    // selection below is computed, so every read must be in bounds.
                    let last = folded(B::Sub, size.clone(), literal(1));
                    let inside = int(MapFn::Builtin(F::Minimum), vec![folded(B::Sub, k.clone(), start.clone()), last]);
                    let position = int(MapFn::Builtin(F::Maximum), vec![inside, zero.clone()]);
                    let at: Vec<At> = (0..out.len()).map(|a| if a == *axis { At::Computed(position.clone()) } else { At::Index(Index::Loop(a)) }).collect();
                    let value = self.read_at(o, &at, &loops);
                    let end = folded(B::Add, start, size);
                    parts.push((end.clone(), value));
                    start = end;
                }
                let mut value = parts.pop().map_or(zero, |(_, v)| v);
                for (end, v) in parts.into_iter().rev() {
                    let before = Expr::Apply { func: MapFn::Binary(B::Lt), compute: DType::I64, args: vec![k.clone(), end] };
                    value = Expr::Apply { func: MapFn::Builtin(F::Where), compute: dtype, args: vec![before, v, value] };
                }
                self.store(n, loops, value)
            }
            Op::Take { axis } => {
                let table = shape(&self.g.graph[ops[0]].ty);
                let ids_rank = shape(&self.g.graph[ops[1]].ty).len();
                let ids = self.index_buffer(ops[1]);
                self.checks.push(IndexCheck { buffer: ids, bound: table[*axis], axis: self.g.take_axis_label(n) });
                let loops = self.output_loops(&out);
                let position = Expr::Load { buffer: ids, index: (0..ids_rank).map(|j| Index::Loop(axis + j)).collect() };
                let at: Vec<At> = (0..table.len())
                    .map(|a| match a.cmp(axis) {
                        std::cmp::Ordering::Less => At::Index(Index::Loop(a)),
                        std::cmp::Ordering::Equal => At::Computed(position.clone()),
                        std::cmp::Ordering::Greater => At::Index(Index::Loop(a - 1 + ids_rank)),
                    })
                    .collect();
                let value = self.read_at(ops[0], &at, &loops);
                self.store(n, loops, value)
            }
            Op::ScatterAdd { axis } => {
                // Zeros (or the base), then each value added at its
                // position: one kernel whose loops are the output's, then
                // the positions'. Half floats add in an f32 buffer, rounded
                // once after. A base that a kernel of its own wrote, which
                // nothing else reads, takes the values in place.
                let values = shape(&self.g.graph[ops[0]].ty);
                let ids_rank = shape(&self.g.graph[ops[1]].ty).len();
                let ids = self.index_buffer(ops[1]);
                let rank = out.len();
                let mut loops = self.output_loops(&out);
                loops.extend(values[*axis..*axis + ids_rank].iter().map(|&extent| Loop { extent, role: Role::Reduce }));
                let position = Expr::Load { buffer: ids, index: (0..ids_rank).map(|j| Index::Loop(rank + j)).collect() };
                let at: Vec<Index> = (0..values.len())
                    .map(|a| match a {
                        a if a < *axis => Index::Loop(a),
                        a if a < axis + ids_rank => Index::Loop(rank + a - axis),
                        a => Index::Loop(a + 1 - ids_rank),
                    })
                    .collect();
                // Each value is computed once (the loop along `axis` does not
                // run around it): an inline one is computed in place.
                let value = match &self.values[&ops[0]] {
                    Value::Inline { expr, .. } => substitute(expr, &at),
                    _ => self.read(ops[0], &at, &loops),
                };
                let wide = if matches!(dtype, DType::F16 | DType::BF16) { DType::F32 } else { dtype };
                let own: Vec<Index> = (0..rank).map(Index::Loop).collect();
                let (b, init) = match (ops.get(2), ops.get(2).and_then(|&base| self.in_place_base(base, wide))) {
                    (_, Some(b)) => (b, Some(Expr::Load { buffer: b, index: own })),
                    (base, None) => {
                        let init = base.map(|&base| self.read(base, &own, &loops[..rank]));
                        (self.accumulator_buffer(n, wide), init)
                    }
                };
                self.checks.push(IndexCheck { buffer: ids, bound: out[*axis], axis: self.g.take_axis_label(n) });
                self.accumulated(n, b, loops, Body::Scatter { axis: *axis, init, position, value })
            }
            Op::Scan { op, axis } => {
                // acc[.., k, ..] = acc[.., k - 1, ..] op x[.., k, ..], the loop
                // along the axis running in order on one thread; the running
                // value is kept in f64 (f32 for half floats), as torch does,
                // and rounded to the dtype once.
                use nax_ops::BinaryOp as B;
                use nax_ops::Elementwise as F;
                let wide = match dtype {
                    DType::F16 | DType::BF16 => DType::F32,
                    DType::F32 | DType::F64 => DType::F64,
                    other => other,
                };
                let mut loops = self.output_loops(&out);
                loops[*axis].role = Role::Serial;
                let all: Vec<Index> = (0..out.len()).map(Index::Loop).collect();
                let x = self.read(ops[0], &all, &loops);
                let b = self.accumulator_buffer(n, wide);
                let k = Expr::LoopIndex(*axis);
                let one = Expr::Literal(nax_ir::Literal::Int(1));
                let before = int(MapFn::Builtin(F::Maximum), vec![int(MapFn::Binary(B::Sub), vec![k.clone(), one]), Expr::Literal(nax_ir::Literal::Int(0))]);
                let previous = Expr::Gather {
                    buffer: b,
                    index: all.iter().enumerate().map(|(a, &i)| if a == *axis { Index::Zero } else { i }).collect(),
                    computed: vec![(*axis, before)],
                };
                let combine = MapFn::Binary(if *op == Reduction::Prod { B::Mul } else { B::Add });
                let first = Expr::Apply { func: MapFn::Binary(B::Eq), compute: DType::I64, args: vec![k, Expr::Literal(nax_ir::Literal::Int(0))] };
                let next = Expr::Apply { func: combine, compute: wide, args: vec![previous, x.clone()] };
                let value = Expr::Apply { func: MapFn::Builtin(F::Where), compute: wide, args: vec![first, x, next] };
                // No tiles: the nest must visit the axis in order.
                self.accumulated(n, b, loops, Body::Store(value))
            }
            Op::ArgReduce { op, axis } => {
                // The best value along the axis, then the first position holding it
                // (or holding a NaN, which the maximum and minimum propagate).
                use nax_ops::BinaryOp as B;
                use nax_ops::Elementwise as F;
                let input = shape(&self.g.graph[ops[0]].ty);
                let compute = nax_ir::value_dtype(&self.g.graph[ops[0]].ty);
                self.materialize_unless_cheap(ops[0]);
                let (loops, at, last) = self.reduction_along(&out, &input, *axis);
                let x = self.read(ops[0], &at, &loops);
                let best = self.scratch(compute, out.clone(), loops.clone(), Body::Reduce { op: *op, value: x.clone() });
                let m = Expr::Load { buffer: best, index: (0..out.len()).map(Index::Loop).collect() };
                let mut hit = Expr::Apply { func: MapFn::Binary(B::Eq), compute, args: vec![x.clone(), m] };
                if compute.is_float() {
                    let nan = Expr::Apply { func: MapFn::Binary(B::Ne), compute, args: vec![x.clone(), x] };
                    hit = Expr::Apply { func: MapFn::Binary(B::Or), compute: DType::Bool, args: vec![hit, nan] };
                }
                let value = int(MapFn::Builtin(F::Where), vec![hit, Expr::LoopIndex(last), Expr::Size(input[*axis])]);
                self.kernel(n, loops, Body::Reduce { op: Reduction::Min, value })
            }
            Op::Construct { func } => {
                let loops = self.output_loops(&out);
                let fill = ops.first().map(|&o| self.read(o, &[], &loops));
                let value = constructor_value(*func, fill);
                self.store(n, loops, value)
            }
            Op::Exchange(_) => return Err(FormError::Exchange { function: self.g.name.clone(), node: n.index() }),
        })
    }
}
