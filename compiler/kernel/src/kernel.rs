//! The kernel IR: a small loop-nest language between the graph and the code
//! generators. A [`Program`] is a list of kernels over buffers; each kernel
//! computes one buffer with a loop nest whose loops say which is parallel,
//! which is vectorised and which reduces, and whose loads say, for each
//! axis of the buffer read, which loop indexes it (or a constant, or 0 for
//! a broadcast). Loop structure is decided here, once; LLVM, Cranelift, MLIR
//! and CUDA lower from it without re-deriving it.

use nax_contract::DType;
use nax_contract::Size;
use nax_contract::SizeTable;
use nax_ir::{Literal, MapFn};
use nax_ops::{AlongAxis, Constructor, Reduction};

pub use crate::product_kernel::ProductKernel;

/// A buffer: one graph value in memory, row-major and contiguous.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub dtype: DType,
    pub shape: Vec<Size>,
    pub kind: BufferKind,
}

pub use nax_contract::plan::{BufferKind, Index};

/// How a loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Iterations are independent and split across threads.
    Parallel,
    /// Iterations are independent and run in order.
    Serial,
    /// The innermost independent loop, over contiguous output elements: vectorised.
    Vector,
    /// The only output loop: vectorised, and split across threads in chunks.
    ParallelVector,
    /// Accumulates into the same output element.
    Reduce,
}

impl Role {
    /// Its name in the kernel IR's text form (and the MLIR back end's loop attributes).
    pub fn name(self) -> &'static str {
        match self {
            Role::Parallel => "parallel",
            Role::Serial => "serial",
            Role::Vector => "vector",
            Role::ParallelVector => "parallel-vector",
            Role::Reduce => "reduce",
        }
    }
}

/// One loop of a nest.
#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    pub extent: Size,
    pub role: Role,
}

/// A scalar expression evaluated at each point of the nest.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A buffer element, one index per axis, converted to `compute`.
    Load {
        buffer: usize,
        index: Vec<Index>,
    },
    Literal(Literal),
    /// A size's value (an `int`).
    Size(Size),
    /// The position of a loop (arange).
    LoopIndex(usize),
    /// An elementwise function computing in `compute`.
    Apply {
        func: MapFn,
        compute: DType,
        args: Vec<Expr>,
    },
    /// The value of the kernel's row reduction of this index (see
    /// [`RowReduction`]).
    Row(usize),
    /// A buffer element some of whose positions are computed: along each
    /// axis of `computed`, the integer value of its expression; along the
    /// others, `index` (whose entries at computed axes are [`Index::Zero`]
    /// and unused). A slice's `start + step * i`, a concatenation's clamped
    /// position, `take`'s index. Kernel formation keeps every position
    /// inside its axis: clamped, or checked by the driver before the
    /// kernel runs (`take`'s indices, see [`IndexCheck`]).
    Gather {
        buffer: usize,
        index: Vec<Index>,
        computed: Vec<(usize, Expr)>,
    },
}

/// A check the driver runs before a kernel: every integer of `buffer`
/// (`take`'s indices) lies in `[0, bound)`, else the call fails naming
/// `take` and `axis`.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexCheck {
    pub buffer: usize,
    pub bound: Size,
    /// The axis for the message: `axis 'V'` or `axis 0`.
    pub axis: String,
}

/// A reduction over a kernel's last loop, computed once per position of
/// its other loops (a row) before the kernel's store runs over that row;
/// later row reductions and the store read it as [`Expr::Row`]. Its value
/// is rounded to `dtype`, as if stored in a buffer of that dtype and read
/// back. A layer norm is one kernel: the mean and the variance of each row
/// are row reductions, and the row is read from memory once.
#[derive(Clone, Debug, PartialEq)]
pub struct RowReduction {
    pub op: Reduction,
    pub dtype: DType,
    pub value: Expr,
}

/// What a kernel computes at each point of its output loops.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// `out[output loops] = value`.
    Store(Expr),
    /// `out[output loops] = op over the reduction loops of value`; a
    /// contraction is a sum of a product.
    Reduce { op: Reduction, value: Expr },
    /// softmax, log_softmax or logsumexp along the loop `axis` of the nest:
    /// passes over that loop for the maximum, the sum, and the result.
    Along { func: AlongAxis, axis: usize, value: Expr },
    /// Attention: `out[output loops] = sum over the loop keys of
    /// softmax along keys of logit, times value`. The kernel's loops are
    /// the output's, then `keys`, then the depth of the score, the
    /// kernel's one row reduction (a sum over the last loop, per position
    /// of the others), which `logit` reads as `row0`. Where `visible` (a
    /// mask that does not read the score) is false, the logit is `-inf`.
    /// It runs as one flash-attention pass (see [`AttentionLoops`]): the
    /// scores and the probabilities never exist whole. The score's
    /// operands, the value and the output are of one element type (f32,
    /// bf16 or f16); the scores, logits and probabilities are f32.
    Attention { keys: usize, logit: Expr, visible: Option<Expr>, value: Expr },
    /// `take`'s adjoint (a scatter-add): the output set to zeros (or to
    /// `init`, a value at each output position) over its loops, then, at
    /// each point of the positions' loops (the loops after
    /// the output's) and of the output loops other than `axis`, `value`
    /// added to the output at the position along `axis` that `position`
    /// computes (clamped into the axis; the driver checks the positions
    /// first, as `take`'s). Where loop 0 splits across threads, each adds
    /// only into its range of loop 0: a thread whose loop 0 is `axis`
    /// skips the values whose position falls outside its range, so no two
    /// threads add into one element. An `init` that loads the output at
    /// its own position adds into what an earlier kernel wrote there, in
    /// place.
    Scatter { axis: usize, init: Option<Expr>, position: Expr, value: Expr },
}

impl Expr {
    /// Rewrites the expression bottom-up: `f` sees each node after its arguments.
    pub fn rewrite(&mut self, f: &mut impl FnMut(&mut Expr)) {
        match self {
            Expr::Apply { args, .. } => args.iter_mut().for_each(|a| a.rewrite(f)),
            Expr::Gather { computed, .. } => computed.iter_mut().for_each(|(_, e)| e.rewrite(f)),
            _ => {}
        }
        f(self);
    }

    /// Whether the expression reads memory at a computed position.
    pub fn gathers(&self) -> bool {
        match self {
            Expr::Gather { .. } => true,
            Expr::Apply { args, .. } => args.iter().any(Expr::gathers),
            _ => false,
        }
    }

    /// How many functions the expression applies.
    pub fn operations(&self) -> u64 {
        match self {
            Expr::Apply { args, .. } => 1 + args.iter().map(Expr::operations).sum::<u64>(),
            Expr::Gather { computed, .. } => computed.iter().map(|(_, e)| e.operations()).sum(),
            _ => 0,
        }
    }

    /// Whether the expression depends on loop `l`: a load it indexes, or its position.
    pub fn reads_loop(&self, l: usize) -> bool {
        match self {
            Expr::LoopIndex(i) => *i == l,
            Expr::Load { index, .. } => index.contains(&Index::Loop(l)),
            Expr::Gather { index, computed, .. } => {
                index.iter().enumerate().any(|(a, &i)| i == Index::Loop(l) && !computed.iter().any(|(c, _)| *c == a))
                    || computed.iter().any(|(_, e)| e.reads_loop(l))
            }
            Expr::Apply { args, .. } => args.iter().any(|a| a.reads_loop(l)),
            _ => false,
        }
    }

    /// Every buffer the expression reads and, per axis, what indexes it
    /// (`None`: a position a gather computes while the kernel runs), in
    /// order: the accesses of the runtime's footprint check.
    pub fn reads(&self) -> Vec<(usize, Vec<Option<Index>>)> {
        self.memory_reads()
            .into_iter()
            .filter_map(|e| match e {
                Expr::Gather { buffer, index, computed } => {
                    Some((*buffer, index.iter().enumerate().map(|(a, &i)| (!computed.iter().any(|(c, _)| *c == a)).then_some(i)).collect()))
                }
                Expr::Load { buffer, index } => Some((*buffer, index.iter().copied().map(Some).collect())),
                _ => None,
            })
            .collect()
    }

    /// Every load of the expression, with its indices, in order.
    pub fn loads(&self) -> Vec<(usize, &[Index])> {
        self.memory_reads()
            .into_iter()
            .filter_map(|e| match e {
                Expr::Load { buffer, index } | Expr::Gather { buffer, index, .. } => Some((*buffer, index.as_slice())),
                _ => None,
            })
            .collect()
    }

    /// The loads and gathers of the expression, outermost first, in order.
    fn memory_reads(&self) -> Vec<&Expr> {
        fn visit<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
            match e {
                Expr::Load { .. } => out.push(e),
                Expr::Gather { computed, .. } => {
                    out.push(e);
                    computed.iter().for_each(|(_, e)| visit(e, out));
                }
                Expr::Apply { args, .. } => args.iter().for_each(|a| visit(a, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        visit(self, &mut out);
        out
    }
}

impl Body {
    /// Whether a scatter adds into what its output already holds: its
    /// `init` loads `output` at the position it initialises.
    pub fn scatters_in_place(&self, output: usize) -> bool {
        match self {
            Body::Scatter { init: Some(Expr::Load { buffer, index }), .. } => *buffer == output && index.iter().enumerate().all(|(a, &i)| i == Index::Loop(a)),
            _ => false,
        }
    }

    /// The expressions evaluated at each point of the nest.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Body::Store(v) | Body::Reduce { value: v, .. } | Body::Along { value: v, .. } => vec![v],
            Body::Attention { logit, visible, value, .. } => [Some(logit), visible.as_ref(), Some(value)].into_iter().flatten().collect(),
            Body::Scatter { init, position, value, .. } => init.iter().chain([position, value]).collect(),
        }
    }

    /// The same, to rewrite.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Body::Store(v) | Body::Reduce { value: v, .. } | Body::Along { value: v, .. } => vec![v],
            Body::Attention { logit, visible, value, .. } => [Some(logit), visible.as_mut(), Some(value)].into_iter().flatten().collect(),
            Body::Scatter { init, position, value, .. } => init.iter_mut().chain([position, value]).collect(),
        }
    }
}

/// One kernel: a loop nest writing one buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub output: usize,
    /// The output's loops (one per output axis, in order), then the
    /// reduction loops. Loop numbers (`i0`, `i1`, ...) refer to this list.
    pub loops: Vec<Loop>,
    /// Row reductions, in evaluation order (only before a store).
    pub rows: Vec<RowReduction>,
    pub body: Body,
    pub schedule: Schedule,
    /// The checks of the indices its gathers read, run before it.
    pub checks: Vec<IndexCheck>,
}

/// How a kernel's nest runs, decided when kernels are formed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    /// The nesting order of the loops, outermost first; empty means the
    /// loops' own order. The parallel loop, when there is one, stays
    /// outermost. A reduction loop outside an output loop makes the
    /// reduction accumulate in the output buffer (initialised first).
    pub order: Vec<usize>,
    /// The two innermost loops of the order run in tiles of these edges
    /// (the outer loop's, then the inner loop's): a transposed read then
    /// touches one cache-sized block at a time.
    pub tile: Option<(u64, u64)>,
    /// A tiled store's transposed read, staged through a scratch tile by
    /// in-register transposes (see [`Transpose`]).
    pub transpose: Option<Transpose>,
    /// A store (plain, after its row reductions if any, or tiled with a
    /// transposed read) writes its results
    /// to the output with streaming (non-temporal) stores where the back
    /// end has them, in vectors of this many lanes: an output far larger
    /// than the caches, which nothing reads before it has left them, is
    /// written without reading its lines first (a third of an
    /// elementwise function's traffic, a quarter of an add's) and without
    /// evicting the operands' lines (a layer norm's output, for one: its
    /// rows' reductions read the input, never the output). A plain store
    /// computes each block of [`STREAM_BLOCK`] positions of its last loop
    /// into a scratch array, then copies the block out; a tiled one copies
    /// its scratch tile.
    pub stream: Option<u32>,
    /// An untiled streamed store, as it copies each vector of a block out,
    /// asks for the line this many bytes ahead of each operand it reads at
    /// its own position: a store that computes much per element (a
    /// transcendental function, row reductions) leaves the hardware's
    /// prefetchers behind (see [`STREAM_AHEAD_BYTES`]).
    pub stream_ahead: Option<u64>,
    /// A softmax or log_softmax along a strided axis runs in blocks of
    /// this many positions of the last loop: per block, its passes along
    /// the axis run over contiguous rows of the block, the block's maximum
    /// and sum live in the output's first two positions along the axis
    /// until the last pass writes them, and a softmax keeps its
    /// exponentials in the output for the last pass (see
    /// [`Schedule::takes_columns`]). One kernel, where it would otherwise
    /// be three.
    pub columns: Option<u64>,
    /// The kernel (a sum over one reduction loop of the product of two
    /// loads, in f32 or f64) runs as calls to a packed matrix-product
    /// library rather than as its loop nest.
    pub gemm: Option<GemmLoops>,
    /// An attention kernel's loops and tiles.
    pub attention: Option<AttentionLoops>,
    /// A kernel with row reductions asks, at the start of each row, for
    /// the row this many rows ahead of its output (to write) and of each
    /// operand it reads at its own position (the nest's loops in order),
    /// so that memory fetches them while this row's passes compute. A
    /// softmax in column blocks ([`Schedule::columns`]) asks, in its first
    /// pass, at each position along the axis, for the block's row this
    /// many positions further along of each such operand.
    pub prefetch: Option<u64>,
    /// This many leading loops (output loops, independent) run as one flat
    /// parallel loop over the product of their extents, the driver's range
    /// counting positions of that product: on a GPU, one thread per
    /// position; on a CPU, for a function along an axis (its rows split
    /// across threads, whatever the first loop's extent). 0 elsewhere (the
    /// parallel loop, if any, is loop 0 alone).
    pub flat: usize,
}

/// The positions of a streamed plain store's last loop computed into its
/// scratch before they are copied out (see [`Schedule::stream`]): 2 KiB
/// of f32, in the first-level cache.
pub const STREAM_BLOCK: u64 = 512;

/// How far ahead a streamed store that computes much per element asks for
/// its operands (see [`Schedule::stream_ahead`]): 3 KiB. Measured on
/// `gelu_bias` (Xeon with AMX, 2 threads, interleaved rounds, ms): 7.9
/// without, 5.5 at 3 KiB and at 7 KiB; `layernorm` 0.96 of the time. At a
/// multiple of 2 KiB it gains little or nothing (7.8 at 2 KiB, 7.9 at 4
/// KiB, 8.9 at 12 KiB): a request 4 KiB from a store still in flight
/// waits for it (the output and the operand start at the same offset
/// within a page). The elementwise add gains nothing (its loads keep the
/// prefetchers ahead; the requests cost it 3%).
pub const STREAM_AHEAD_BYTES: u64 = 3 << 10;

/// The most bytes a kernel's scratch tile (see [`Transpose`]) holds: it
/// lives on the stack of the thread that runs the kernel.
pub const MAX_SCRATCH_BYTES: u64 = 256 << 10;

/// How a tiled store reads an operand transposed: the loads of `buffer`
/// at `index`, whose last axis is indexed by the tile's outer loop (and
/// only it) and another by its inner loop. Per tile, a scratch array of
/// the tile's size (the kernel's own, row-major over the tile, rows along
/// the outer loop) first receives the transposed read: each block of
/// `lanes` x `lanes` positions is read as `lanes` vectors along the outer
/// loop (contiguous), transposed in registers, and written as `lanes`
/// vectors into the scratch's rows (the tile's elements off the blocks
/// are copied one by one). The store then reads those elements from the
/// scratch at its own position, contiguous along the inner loop, in
/// place of the loads, and writes its result there; last, the tile's
/// rows are copied to the output in vectors (streaming ones with
/// [`Schedule::stream`]). The buffer's elements have the output's width,
/// so the scratch holds them bit for bit. The scratch, not the output,
/// stages the tile: its rows are contiguous, where the output's are a
/// row's stride apart (a power of two, for the common sizes, whose lines
/// all fall in the same few sets of the caches).
#[derive(Clone, Debug, PartialEq)]
pub struct Transpose {
    pub buffer: usize,
    pub index: Vec<Index>,
    /// The block's edge: the elements of one vector register, a power of two.
    pub lanes: u32,
}

/// How an attention kernel runs: per position of the batch loops and per
/// tile of `tile.0` positions of the rows loop (the queries), over tiles
/// of `tile.1` positions of the keys loop: the tile's scores are a packed
/// matrix product, the kernel's compiled code turns them into logits and
/// updates each row's running maximum and sum (an online softmax, which
/// rescales the row's accumulated output), and a second product adds the
/// tile's probabilities times the values to the accumulated output. A
/// tile whose logits are all `-inf` adds nothing and skips its second
/// product; a tile where the mask (`visible`) hides every key skips both
/// products, which the compiled code tells first, in a probe that reads
/// only the mask. `cols` is the output loop of the value's columns.
///
/// The kernel's compiled code computes one tile: the driver passes, after
/// the program's size slots, the tile's first position along each loop,
/// then its number of rows and of keys, then 1 to probe the mask (the
/// tile's scratch then gets the largest of 1 where visible and `-inf`
/// where not) or 0 to compute; and the tile's scratch buffers.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionLoops {
    pub batch: Vec<usize>,
    pub rows: usize,
    pub cols: usize,
    pub tile: (u64, u64),
    /// [`BufferKind::Tile`] buffers: the tile's scores, then logits and
    /// probabilities, in place (f32 `[tile.0 tile.1]`); its rows'
    /// accumulated outputs (f32 `[tile.0 cols]`); and its rows' running
    /// maximum and sum, in pairs, then the tile's largest logit (f32
    /// `[2 tile.0 + 1]`).
    pub scratch: [usize; 3],
}

impl AttentionLoops {
    /// The shapes of the scratch buffers, for a kernel of these loops.
    pub fn scratch_shapes(&self, loops: &[Loop]) -> [Vec<Size>; 3] {
        let (rows, keys) = (Size::Const(self.tile.0), Size::Const(self.tile.1));
        [vec![rows, keys], vec![rows, loops[self.cols].extent], vec![Size::Const(2 * self.tile.0 + 1)]]
    }
}

/// The roles of a GEMM kernel's loops: `out[rows, cols] = sum over inner of
/// a[rows, inner] b[inner, cols]`, once per position of the batch loops
/// (every other output loop). The first load of the product is `a`.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmLoops {
    pub batch: Vec<usize>,
    pub rows: Option<usize>,
    pub cols: Option<usize>,
    pub inner: usize,
    /// An elementwise epilogue (a bias, an activation, a scale): after the
    /// products, `out = epilogue` at each output element, where the
    /// epilogue reads the product as a load of the output at its own
    /// position. The kernel's compiled code runs it over the output loops,
    /// in place, while the driver splits them across threads.
    pub epilogue: Option<Expr>,
}

impl Schedule {
    /// Whether `func` along loop `axis` of `loops`, into a `dtype` output,
    /// can run in column blocks: a softmax into f32 or f64 along an axis
    /// that is neither the first loop (the parallel one) nor the last (the
    /// columns), with at least two positions (the output's first two hold
    /// the maximum and the sum). A log_softmax counts the maximum's ties
    /// apart from the sum, which the blocks have no room for.
    pub fn takes_columns(symbols: &SizeTable, dtype: DType, loops: &[Loop], func: AlongAxis, axis: usize) -> bool {
        func == AlongAxis::Softmax
            && matches!(dtype, DType::F32 | DType::F64)
            && axis > 0
            && axis + 1 < loops.len()
            && symbols.constant(loops[axis].extent).is_some_and(|n| n >= 2)
    }
}

impl Kernel {
    /// Whether the outermost loop is split across threads (the driver gives
    /// each thread a range of it).
    pub fn parallel_loop(&self) -> bool {
        self.loops.first().is_some_and(|l| matches!(l.role, Role::Parallel | Role::ParallelVector))
    }

    /// The expressions the kernel evaluates: its row reductions', then its body's.
    pub fn values(&self) -> impl Iterator<Item = &Expr> {
        let epilogue = self.schedule.gemm.as_ref().and_then(|g| g.epilogue.as_ref());
        self.rows.iter().map(|r| &r.value).chain(self.body.exprs()).chain(epilogue)
    }

    /// The same, to rewrite.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Expr> {
        let epilogue = self.schedule.gemm.as_mut().and_then(|g| g.epilogue.as_mut());
        self.rows.iter_mut().map(|r| &mut r.value).chain(self.body.exprs_mut()).chain(epilogue)
    }

    /// Whether some expression of the kernel reads at a computed position
    /// (the fusions that move expressions between nests leave such kernels alone).
    pub fn gathers(&self) -> bool {
        self.values().any(Expr::gathers)
    }

    /// Whether the kernel reads its own output (a scan reads the positions
    /// it wrote before): its nest cannot be moved into another's.
    pub fn reads_own_output(&self) -> bool {
        self.values().flat_map(Expr::loads).any(|(b, _)| b == self.output)
    }

    /// The buffers the kernel reads or writes, in increasing order.
    pub fn buffers(&self) -> Vec<usize> {
        let scratch = self.schedule.attention.iter().flat_map(|a| a.scratch);
        let mut out: Vec<usize> = self.values().flat_map(|v| v.loads()).map(|(b, _)| b).chain([self.output]).chain(scratch).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Renames every buffer the kernel refers to (its output, its loads,
    /// its checks, its scratch and its staged reads) by `rename`.
    pub fn rename_buffers(&mut self, rename: impl Fn(usize) -> usize) {
        self.output = rename(self.output);
        self.checks.iter_mut().for_each(|c| c.buffer = rename(c.buffer));
        if let Some(a) = &mut self.schedule.attention {
            a.scratch = a.scratch.map(&rename);
        }
        if let Some(t) = &mut self.schedule.transpose {
            t.buffer = rename(t.buffer);
        }
        for v in self.values_mut() {
            v.rewrite(&mut |e| {
                if let Expr::Load { buffer, .. } | Expr::Gather { buffer, .. } = e {
                    *buffer = rename(*buffer);
                }
            });
        }
    }

    /// The nesting order of the loops, outermost first.
    pub fn order(&self) -> Vec<usize> {
        if self.schedule.order.is_empty() { (0..self.loops.len()).collect() } else { self.schedule.order.clone() }
    }
}

/// A function as kernels.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub buffers: Vec<Buffer>,
    /// In execution order.
    pub kernels: Vec<Kernel>,
    /// The buffers holding the results, in declared order.
    pub results: Vec<usize>,
    pub symbols: SizeTable,
    /// Sizes given by host int parameters (see the graph's).
    pub size_arguments: Vec<(Size, usize)>,
    /// The matrix-product microkernels of the kernels' products, one per
    /// dtype used, with their blocking (decided for the machine: [`crate::ProductKernel::for_machine`]).
    pub products: Vec<ProductKernel>,
}

/// An estimate of what one kernel costs: the bytes it moves (each buffer it
/// reads once, and its output once) and its arithmetic; `None` where a size
/// is known only at run time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub bytes: Option<u64>,
    pub flops: Option<u64>,
}

impl Program {
    /// The fault record of a program formed with bounds checks
    /// ([`crate::FormOptions::check_bounds`]).
    pub fn fault_buffer(&self) -> Option<usize> {
        self.buffers.iter().position(|b| b.kind == BufferKind::Fault)
    }

    /// The buffers kernel `k`'s code receives, increasing: those it reads
    /// or writes, and the fault record where there is one.
    pub fn kernel_buffers(&self, k: &Kernel) -> Vec<usize> {
        let mut out = k.buffers();
        if let Some(f) = self.fault_buffer() {
            out.push(f);
            out.sort_unstable();
            out.dedup();
        }
        out
    }

    /// The number of functions a native back end compiles for the
    /// program: its kernels, then its microkernels.
    pub fn function_count(&self) -> usize {
        self.kernels.len() + self.products.len()
    }

    /// The exported name of function `i` (see [`Program::function_count`]):
    /// `<program>_k<i>` for a kernel, `<program>_m<j>` for microkernel `j`.
    pub fn function_name(&self, i: usize) -> String {
        match i.checked_sub(self.kernels.len()) {
            None => format!("{}_k{i}", self.name),
            Some(m) => format!("{}_m{m}", self.name),
        }
    }

    /// The index of the product kernel of `dtype`, if the program has one.
    pub fn product_kernel(&self, dtype: DType) -> Option<usize> {
        self.products.iter().position(|k| k.micro.dtype == dtype)
    }

    /// The dtype the products of a kernel run through a microkernel
    /// compute in: its output's for a matrix product (f32 for half
    /// floats), f32 for attention.
    pub fn product_dtype(&self, k: &Kernel) -> Option<DType> {
        match (&k.schedule.gemm, &k.schedule.attention) {
            (Some(_), _) => nax_contract::plan::Microkernel::compute_dtype(self.buffers[k.output].dtype),
            (_, Some(_)) => Some(DType::F32),
            _ => None,
        }
    }

    /// Removes kernel `i` (a fusion moved its work elsewhere); the checks it
    /// ran pass to the kernel that now runs in its place, still before
    /// every kernel that came after it.
    pub fn remove_kernel(&mut self, i: usize) -> Kernel {
        let mut k = self.kernels.remove(i);
        let next = i.min(self.kernels.len().saturating_sub(1));
        if let Some(next) = self.kernels.get_mut(next) {
            next.checks.append(&mut k.checks);
        }
        k
    }

    /// Removes the temporaries no kernel writes (a fusion removed their
    /// kernel), renumbering the others.
    pub fn drop_unused_buffers(&mut self) {
        let written: Vec<usize> = self.kernels.iter().map(|k| k.output).collect();
        let keep: Vec<bool> =
            (0..self.buffers.len()).map(|b| self.buffers[b].kind != BufferKind::Temporary || written.contains(&b) || self.results.contains(&b)).collect();
        if keep.iter().all(|&k| k) {
            return;
        }
        let mut new_index = vec![0; keep.len()];
        let mut next = 0;
        for (b, &k) in keep.iter().enumerate() {
            new_index[b] = next;
            next += usize::from(k);
        }
        let mut kept = keep.iter();
        self.buffers.retain(|_| *kept.next().unwrap_or(&true));
        for b in &mut self.buffers {
            if let BufferKind::Alias(a) = &mut b.kind {
                *a = new_index[*a];
            }
        }
        for k in &mut self.kernels {
            k.rename_buffers(|b| new_index[b]);
        }
        self.results.iter_mut().for_each(|r| *r = new_index[*r]);
    }

    /// A buffer's elements, when its sizes are constants.
    fn elements(&self, buffer: usize) -> Option<u64> {
        self.buffers[buffer].shape.iter().try_fold(1u64, |p, &s| self.symbols.constant(s).and_then(|c| p.checked_mul(c)))
    }

    /// What a kernel moves and computes. A GEMM counts two FLOPs per
    /// multiply-add; a loop nest counts its operations per iteration (one
    /// more to accumulate a reduction, four more for a softmax's passes, and
    /// each row reduction's), and a GEMM's epilogue its operations per
    /// output element.
    pub fn estimate(&self, k: &Kernel) -> Estimate {
        let bytes = k.buffers().into_iter().try_fold(0u64, |sum, b| {
            let size = self.elements(b)?.checked_mul(self.buffers[b].dtype.size_bytes() as u64)?;
            sum.checked_add(size)
        });
        let iterations = k.loops.iter().try_fold(1u64, |p, l| self.symbols.constant(l.extent).and_then(|c| p.checked_mul(c)));
        if let (Body::Attention { keys, logit, .. }, Some(a)) = (&k.body, &k.schedule.attention) {
            // Two products (scores, then probabilities times values) and
            // the logit and online softmax (about 6 operations) per score.
            let extent = |l: usize| self.symbols.constant(k.loops[l].extent);
            let scores = a.batch.iter().chain([&a.rows, keys]).try_fold(1u64, |p, &l| extent(l).and_then(|c| p.checked_mul(c)));
            let depth = extent(k.loops.len() - 1);
            let per_score = depth.zip(extent(a.cols)).and_then(|(d, c)| d.checked_add(c)?.checked_mul(2)?.checked_add(logit.operations() + 6));
            return Estimate { bytes, flops: scores.zip(per_score).and_then(|(s, f)| s.checked_mul(f)) };
        }
        let rows: u64 = k.rows.iter().map(|r| r.value.operations() + 1).sum();
        let per_iteration = rows
            + match (&k.body, &k.schedule.gemm) {
                (_, Some(_)) => 2,
                (Body::Store(v), None) => v.operations(),
                (Body::Reduce { value, .. }, None) => value.operations() + 1,
                (Body::Along { value, .. }, None) => value.operations() + 4,
                (Body::Attention { logit, .. }, None) => logit.operations() + 6,
                // Its iterations skip the scattered axis (see below).
                (Body::Scatter { value, .. }, None) => value.operations() + 1,
            };
        if let Body::Scatter { axis, .. } = &k.body {
            // Zeros over the output, then an add per value.
            let values = k
                .loops
                .iter()
                .enumerate()
                .filter(|(l, _)| l != axis)
                .try_fold(1u64, |p, (_, l)| self.symbols.constant(l.extent).and_then(|c| p.checked_mul(c)));
            let flops = values.and_then(|v| v.checked_mul(per_iteration)?.checked_add(self.elements(k.output)?));
            return Estimate { bytes, flops };
        }
        // A GEMM's epilogue runs once per output element.
        let epilogue = match k.schedule.gemm.as_ref().and_then(|g| g.epilogue.as_ref()) {
            Some(e) => self.elements(k.output).and_then(|n| n.checked_mul(e.operations())),
            None => Some(0),
        };
        Estimate { bytes, flops: iterations.and_then(|i| i.checked_mul(per_iteration)).zip(epilogue).and_then(|(a, b)| a.checked_add(b)) }
    }
}

/// The constructors a kernel writes directly.
pub fn constructor_value(func: Constructor, fill: Option<Expr>) -> Expr {
    match func {
        Constructor::Zeros => Expr::Literal(Literal::Float(0.0)),
        Constructor::Ones => Expr::Literal(Literal::Float(1.0)),
        Constructor::Full => fill.unwrap_or(Expr::Literal(Literal::Float(0.0))),
        Constructor::Arange => Expr::LoopIndex(0),
    }
}
