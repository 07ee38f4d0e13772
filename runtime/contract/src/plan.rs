//! The execution plan of a natively compiled function: what the driver
//! needs to run its kernels, and nothing of the compiler. Buffers (their
//! dtypes, shapes in size slots, and where their memory comes from), and
//! for each kernel its loops' extents and its strategy: a plain nest whose
//! outer loop the driver splits across threads (column-block softmaxes
//! and row reductions are nests too: their blocks live inside the compiled
//! code), a matrix product run through the program's compiled
//! microkernels (blocked and packed by the runtime's products) with an optional
//! elementwise epilogue per tile, or flash attention run tile by tile.
//! A plan is a plain value (serde): the JIT hands it to the driver with
//! function pointers, an AOT library will carry it beside its code.

use crate::dtype::DType;
use crate::sizes::SymId;
use serde::{Deserialize, Serialize};

/// A plan that contradicts itself (an index out of range, a missing
/// result, a tile of another shape): a bug of the compiler or a damaged
/// artifact, never the caller's data. The message says what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the plan is malformed: {0}")]
pub struct MalformedPlan(pub String);

/// A compiled kernel: `kernel(buffers, sizes, begin, end)`: the table of
/// every buffer's address, the size slots' values, and the range of the
/// outermost loop to run.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i64, i64, i64);

/// A size as kernels see it: compiled in, or read from the call's size slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SizeRef {
    /// A constant.
    Const(u64),
    /// The value in slot `i` of the `sizes` array each kernel receives.
    Slot(usize),
}

/// What indexes one axis of a buffer in a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Index {
    /// The loop of this position in the nest.
    Loop(usize),
    /// A fixed position (a split's part).
    Const(usize),
    /// Position 0: the axis has size 1 and broadcasts.
    Zero,
}

/// Where a buffer's memory comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BufferKind {
    /// The function's parameter of this index (a host scalar is a rank-0 buffer).
    Input(usize),
    /// A weight, by name.
    Weight(String),
    /// Computed by a kernel.
    Temporary,
    /// The same memory as another buffer, with another shape (a reshape or rename).
    Alias(usize),
    /// Scratch of one tile of an attention kernel, which the driver gives
    /// each tile's task.
    Tile,
    /// The fault record of a function compiled with bounds checks
    /// (`--check-bounds`): `i64` words, written by the driver at each
    /// call: [`FAULT_WORDS`] zeros, which a kernel sets on an access
    /// outside its buffer (1, the kernel, the buffer, the offset) instead
    /// of making it, then each buffer's length in bytes, which the kernels
    /// check their accesses against (an access of another width than the
    /// buffer's elements by the bytes it touches).
    Fault,
}

/// One buffer: a value in memory, row-major and contiguous.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferPlan {
    /// Its element type.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<SizeRef>,
    /// Where its memory comes from.
    pub kind: BufferKind,
}

/// A buffer read by a kernel, one index per axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operand {
    /// The buffer.
    pub buffer: usize,
    /// What indexes each of its axes.
    pub index: Vec<Index>,
}

/// A register-blocked matrix-product microkernel, compiled with the
/// program for the target's vectors: `C[rows x cols] (+)= A B` over a depth
/// of `kc`, where A is a packed panel of `rows` rows (element `[p][r]` at
/// `p * rows + r`) and B a packed panel of `cols` columns (`[p][c]` at
/// `p * cols + c`), the accumulators living in registers.
///
/// Its entry has the kernels' signature; the driver passes the buffers
/// `[A panel, B panel, C at the tile's first element, scratch of rows x
/// cols elements]` and the sizes `[kc, C's row step, C's column step,
/// valid rows, valid columns, 1 to add to C or 0 to overwrite it]` (steps
/// in elements). A tile with fewer valid rows or columns, or whose columns
/// are not contiguous, goes through the scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Microkernel {
    /// Its element type (f32 or f64), of the panels and of C.
    pub dtype: DType,
    /// Rows of C per tile (the A panel's width).
    pub rows: u32,
    /// Columns of C per tile (the B panel's width), a multiple of `lanes`.
    pub cols: u32,
    /// Elements per vector register.
    pub lanes: u32,
}

impl Microkernel {
    /// The largest tile the driver accepts (its scratch is per thread).
    pub const MAX_TILE: u32 = 64 * 256;

    /// Whether the driver runs this microkernel: whole vectors of f32 or
    /// f64, a tile no larger than [`Microkernel::MAX_TILE`].
    pub fn is_valid(&self) -> bool {
        self.rows > 0
            && self.lanes > 0
            && self.cols > 0
            && self.cols.is_multiple_of(self.lanes)
            && self.rows.checked_mul(self.cols).is_some_and(|tile| tile <= Microkernel::MAX_TILE)
            && matches!(self.dtype, DType::F32 | DType::F64)
    }

    /// Whether `blocking` blocks around this microkernel: no empty block,
    /// blocks of whole tiles.
    pub fn fits(&self, blocking: &Blocking) -> bool {
        blocking.depth > 0 && blocking.rows > 0 && blocking.cols > 0 && blocking.rows.is_multiple_of(self.rows) && blocking.cols.is_multiple_of(self.cols)
    }

    /// The dtype a matrix product of `dtype` matrices computes in: its own
    /// for f32 and f64, f32 for the half floats (widened as they are
    /// packed, rounded once as the result is written); `None` for the
    /// dtypes products do not run through a microkernel.
    pub fn compute_dtype(dtype: DType) -> Option<DType> {
        match dtype {
            DType::F32 | DType::F16 | DType::BF16 => Some(DType::F32),
            DType::F64 => Some(DType::F64),
            _ => None,
        }
    }
}

/// Cache blocking of a matrix product: the depth of one pass over packed
/// panels (`depth`, so a B panel stays in the first-level cache), the rows
/// of A packed at once (`rows`, the second level) and the columns of B
/// packed at once (`cols`, the last level).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Blocking {
    /// Depth per pass (KC).
    pub depth: u32,
    /// Rows of A per packed block (MC), a multiple of the microkernel's rows.
    pub rows: u32,
    /// Columns of B per packed block (NC), a multiple of the microkernel's columns.
    pub cols: u32,
}

/// A loop nest the driver runs through the kernel's compiled function,
/// `f(buffers, sizes, begin, end)` over positions `begin..end` of the
/// outermost loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Nest {
    /// How many of the kernel's leading loops the nest runs (its work is
    /// the product of their extents).
    pub loops: usize,
    /// Whether the outermost loop may be split across threads.
    pub parallel: bool,
    /// How many leading loops run as one flat parallel loop (a GPU's
    /// kernels, and a CPU's functions along an axis, whose rows split
    /// across threads: the range counts positions of the product of their
    /// extents); 0 or 1: the outermost alone.
    #[serde(default)]
    pub flat: usize,
    /// The outermost loop splits at multiples of this many positions (one
    /// or more): the outer edge of its tiles when it is tiled, so that no
    /// tile straddles two chunks.
    pub grain: usize,
}

/// A batch of matrix products `out[rows, cols] = sum over inner of
/// a[rows, inner] b[inner, cols]`, once per position of the batch loops;
/// loops are positions in the kernel's loops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmPlan {
    /// The batch loops.
    pub batch: Vec<usize>,
    /// The rows loop, if the output has one.
    pub rows: Option<usize>,
    /// The columns loop, if the output has one.
    pub cols: Option<usize>,
    /// The summed loop.
    pub inner: usize,
    /// The left operand.
    pub a: Operand,
    /// The right operand.
    pub b: Operand,
    /// The microkernel (an index into [`NativePlan::microkernels`]).
    pub microkernel: usize,
    /// The cache blocking.
    pub blocking: Blocking,
    /// Whether the kernel's compiled function is an elementwise epilogue,
    /// run in place over each block of the output (a cache block of the
    /// product, or a part of it) as soon as its products are complete,
    /// while the block is in the second-level cache. It gets, after the
    /// plan's size slots, the block's first position along each loop,
    /// then its number of rows and of columns.
    pub epilogue: bool,
}

/// Flash attention: per position of the batch loops and tile of `tile.0`
/// rows (queries), over tiles of `tile.1` keys: the scores' product into
/// the tile's scratch, the compiled tile code (logits, online softmax,
/// rescaling), and the probabilities' product with the values. The
/// queries, keys, values and output are of one element type, f32, bf16 or
/// f16; the scores, probabilities and accumulated rows are f32 (half
/// floats are widened as they are packed, the output rounded once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionPlan {
    /// The batch loops.
    pub batch: Vec<usize>,
    /// The rows (queries) loop.
    pub rows: usize,
    /// The output's columns loop (the values' columns).
    pub cols: usize,
    /// The keys loop.
    pub keys: usize,
    /// Rows and keys per tile.
    pub tile: (u64, u64),
    /// The tile buffers: scores, accumulated rows, running maximum and sum.
    pub scratch: [usize; 3],
    /// The queries, keys and values.
    pub q: Operand,
    /// The keys.
    pub k: Operand,
    /// The values.
    pub v: Operand,
    /// Whether a mask hides keys: each tile is probed first.
    pub masked: bool,
    /// The f32 microkernel of both products (an index into
    /// [`NativePlan::microkernels`]).
    pub microkernel: usize,
    /// The products' cache blocking.
    pub blocking: Blocking,
}

/// How the driver runs a kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Strategy {
    /// Its compiled loop nest.
    Nest(Nest),
    /// Packed matrix products.
    Gemm(GemmPlan),
    /// Flash attention.
    Attention(AttentionPlan),
}

/// One kernel: the buffer it writes, its loops' extents, its strategy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelPlan {
    /// The buffer it writes.
    pub output: usize,
    /// The extent of each of its loops.
    pub loops: Vec<SizeRef>,
    /// How it runs.
    pub strategy: Strategy,
    /// Indices to check before it runs (`take`'s).
    #[serde(default)]
    pub checks: Vec<IndexCheck>,
    /// Every buffer it reads or writes and how far along each axis: the
    /// driver checks these against the buffers' memory at each call before
    /// any kernel runs, so that a compiler bug is an internal error, never
    /// an access outside a buffer.
    #[serde(default)]
    pub footprint: Vec<Access>,
}

/// How far a kernel reaches along one axis of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reach {
    /// Positions `0..n`: a loop of extent `n`, a constant position `n - 1`
    /// (`n` is then a constant), or 1 for a broadcast.
    Positions(SizeRef),
    /// Positions computed while the kernel runs, kept inside the axis by
    /// the kernel itself (a concatenation's clamped positions, a slice's
    /// `start + step * i`) or by an [`IndexCheck`] (`take`'s indices).
    Computed,
}

/// One buffer a kernel reads or writes, with its reach along each axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Access {
    /// The buffer.
    pub buffer: usize,
    /// Whether the kernel writes it (its output) rather than reads it.
    pub write: bool,
    /// One reach per axis of the buffer.
    pub reach: Vec<Reach>,
}

/// A check the driver runs before a kernel: every integer of `buffer`
/// lies in `[0, bound)`; the first that does not fails the call, naming
/// `take`, the axis and the index, before any kernel reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexCheck {
    /// The buffer of indices (`i32` or `i64`).
    pub buffer: usize,
    /// The size of the axis they index.
    pub bound: SizeRef,
    /// The axis, for the message: `axis 'V'` or `axis 0`.
    pub axis: String,
}
/// A natively compiled function as an AOT library stores it (JSON in the
/// library's read-only data): its name, signature and plan; its kernels'
/// code is the library's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredFunction {
    /// The function's name in the program.
    pub name: String,
    /// What it takes and gives.
    pub signature: crate::signature::Signature,
    /// How its kernels run.
    pub plan: NativePlan,
}

/// A function split over a mesh (SHARDING.md) as an AOT library stores
/// it: the rank's signature (its parameters with their blocks' sizes), the
/// plan of its stages and exchanges, and each stage as a natively compiled
/// function; every rank of the mesh runs the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredSharded {
    /// The function's name in the program.
    pub name: String,
    /// What the rank's part takes and gives.
    pub signature: crate::signature::Signature,
    /// Its stages and exchanges, in order, and its weights' blocks.
    pub plan: crate::shard::ShardedPlan,
    /// Each stage, named `FUNCTION/STAGE`.
    pub stages: Vec<StoredFunction>,
}

/// The layout of an AOT library's descriptor (the struct its generated C
/// file defines, and its plans' JSON, a [`StoredLibrary`]), written by the
/// compiler into the C file and checked by the library's runtime at open.
pub const LIBRARY_LAYOUT: u32 = 2;

/// Every function of an AOT library as its descriptor stores them:
/// compiled whole, or each split over the mesh the library was built for
/// (`nax build --mesh ... --shard ...`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredLibrary {
    /// Opened by `NAME_open`.
    Whole(Vec<StoredFunction>),
    /// Opened by `NAME_open_sharded`, with the host's collectives.
    Sharded(Vec<StoredSharded>),
}

impl StoredLibrary {
    /// Each function's signature (a split function's: a rank's), in order.
    pub fn signatures(&self) -> Vec<&crate::signature::Signature> {
        match self {
            StoredLibrary::Whole(functions) => functions.iter().map(|f| &f.signature).collect(),
            StoredLibrary::Sharded(functions) => functions.iter().map(|f| &f.signature).collect(),
        }
    }

    /// Every compiled unit, in order: the functions, or each split
    /// function's stages.
    pub fn units(&self) -> Vec<&StoredFunction> {
        match self {
            StoredLibrary::Whole(functions) => functions.iter().collect(),
            StoredLibrary::Sharded(functions) => functions.iter().flat_map(|f| &f.stages).collect(),
        }
    }
}

/// The plan of one natively compiled function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativePlan {
    /// The size symbol whose value each slot holds at a call.
    pub slots: Vec<SymId>,
    /// Every buffer.
    pub buffers: Vec<BufferPlan>,
    /// The kernels, in the order they run.
    pub kernels: Vec<KernelPlan>,
    /// The matrix-product microkernels the kernels use; their entries
    /// follow the kernels'.
    pub microkernels: Vec<Microkernel>,
    /// The buffers holding the results, in declared order.
    pub results: Vec<usize>,
}

/// The words of a [`BufferKind::Fault`] record before the buffers' lengths.
pub const FAULT_WORDS: usize = 4;

impl NativePlan {
    /// The buffer whose memory `buffer` is, through aliases (a validated
    /// plan's aliases name earlier buffers).
    pub fn alias_root(&self, mut buffer: usize) -> usize {
        while let Some(BufferKind::Alias(a)) = self.buffers.get(buffer).map(|b| &b.kind) {
            buffer = *a;
        }
        buffer
    }

    /// The weight whose memory `buffer` is (itself, or through aliases).
    pub fn weight_behind(&self, buffer: usize) -> Option<&str> {
        match &self.buffers.get(self.alias_root(buffer))?.kind {
            BufferKind::Weight(name) => Some(name),
            _ => None,
        }
    }

    /// The fault record of a plan compiled with bounds checks.
    pub fn fault_buffer(&self) -> Option<usize> {
        self.buffers.iter().position(|b| b.kind == BufferKind::Fault)
    }

    /// Checks that every index in the plan points where it must: buffers,
    /// loops, slots and inputs in range, one index per operand axis,
    /// aliases to earlier buffers, tile buffers where attention uses them.
    /// The driver relies on this (a damaged or mismatched plan is an
    /// error here, never an access out of bounds later).
    pub fn validate(&self, inputs: usize) -> Result<(), MalformedPlan> {
        let bad = |what: String| Err(MalformedPlan(what));
        let buffers = self.buffers.len();
        if self.results.is_empty() {
            return bad("no result".into());
        }
        if let Some(r) = self.results.iter().find(|&&r| r >= buffers) {
            return bad(format!("a result is buffer {r} of {buffers}"));
        }
        if let Some((i, m)) = self.microkernels.iter().enumerate().find(|(_, m)| !m.is_valid()) {
            return bad(format!("microkernel {i} has the shape {m:?}"));
        }
        let blocking_ok = |micro: usize, b: &Blocking, dtype: DType| self.microkernels.get(micro).is_some_and(|m| m.dtype == dtype && m.fits(b));
        let size_ok = |s: &SizeRef| matches!(s, SizeRef::Const(_)) || matches!(s, SizeRef::Slot(i) if *i < self.slots.len());
        for (b, buffer) in self.buffers.iter().enumerate() {
            if !buffer.shape.iter().all(size_ok) {
                return bad(format!("buffer {b} has a size slot out of range"));
            }
            match buffer.kind {
                BufferKind::Fault if buffer.dtype != DType::I64 || buffer.shape != [SizeRef::Const((FAULT_WORDS + buffers) as u64)] => {
                    return bad(format!("buffer {b} is a fault record of another shape"));
                }
                BufferKind::Input(i) if i >= inputs => return bad(format!("buffer {b} is input {i} of {inputs}")),
                BufferKind::Alias(a) if a >= b => return bad(format!("buffer {b} aliases a later buffer {a}")),
                _ => {}
            }
        }
        for (i, k) in self.kernels.iter().enumerate() {
            let loops = k.loops.len();
            let operand_ok = |o: &Operand| {
                o.buffer < buffers
                    && o.index.len() == self.buffers[o.buffer].shape.len()
                    && o.index.iter().all(|x| match x {
                        Index::Loop(l) => *l < loops,
                        Index::Const(_) | Index::Zero => true,
                    })
            };
            let loop_ok = |l: &usize| *l < loops;
            let fits = k.output < buffers
                && k.loops.iter().all(size_ok)
                && match &k.strategy {
                    Strategy::Nest(n) => n.loops <= loops && n.grain > 0 && n.flat <= n.loops,
                    Strategy::Gemm(g) => {
                        g.batch.iter().all(loop_ok)
                            && g.rows.iter().all(loop_ok)
                            && g.cols.iter().all(loop_ok)
                            && g.inner < loops
                            && operand_ok(&g.a)
                            && operand_ok(&g.b)
                            && self.buffers[k.output].dtype == self.buffers[g.a.buffer].dtype
                            && self.buffers[k.output].dtype == self.buffers[g.b.buffer].dtype
                            && self.buffers[k.output].shape.len() < loops
                            && Microkernel::compute_dtype(self.buffers[k.output].dtype).is_some_and(|d| blocking_ok(g.microkernel, &g.blocking, d))
                    }
                    Strategy::Attention(a) => {
                        a.batch.iter().all(loop_ok)
                            && [a.rows, a.cols, a.keys].iter().all(loop_ok)
                            && loops >= 1
                            && a.tile.0 > 0
                            && a.tile.1 > 0
                            && matches!(self.buffers[k.output].dtype, DType::F32 | DType::BF16 | DType::F16)
                            && [&a.q, &a.k, &a.v].iter().all(|o| operand_ok(o) && self.buffers[o.buffer].dtype == self.buffers[k.output].dtype)
                            && self.buffers[k.output].shape.len() <= loops
                            && a.scratch.iter().all(|&s| s < buffers && self.buffers[s].kind == BufferKind::Tile)
                            && blocking_ok(a.microkernel, &a.blocking, DType::F32)
                    }
                };
            if !fits {
                return bad(format!("kernel {i} does not fit its buffers and loops"));
            }
            let access_ok = |a: &Access| {
                a.buffer < buffers
                    && a.reach.len() == self.buffers[a.buffer].shape.len()
                    && a.reach.iter().all(|r| match r {
                        Reach::Positions(s) => size_ok(s),
                        Reach::Computed => true,
                    })
            };
            if !k.footprint.iter().all(access_ok) {
                return bad(format!("kernel {i} has a footprint outside its buffers"));
            }
            if k.checks.iter().any(|c| c.buffer >= buffers || !size_ok(&c.bound) || !matches!(self.buffers[c.buffer].dtype, DType::I32 | DType::I64)) {
                return bad(format!("kernel {i} checks indices it cannot read"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `out[i] = f(x[i])` over 4 elements, with a slot for nothing.
    fn nest() -> NativePlan {
        NativePlan {
            slots: vec![],
            buffers: vec![
                BufferPlan { dtype: DType::F32, shape: vec![SizeRef::Const(4)], kind: BufferKind::Input(0) },
                BufferPlan { dtype: DType::F32, shape: vec![SizeRef::Const(4)], kind: BufferKind::Temporary },
            ],
            kernels: vec![KernelPlan {
                output: 1,
                loops: vec![SizeRef::Const(4)],
                strategy: Strategy::Nest(Nest { loops: 1, parallel: true, grain: 1, flat: 0 }),
                checks: Vec::new(),
                footprint: vec![Access { buffer: 1, write: true, reach: vec![Reach::Positions(SizeRef::Const(4))] }],
            }],
            microkernels: vec![Microkernel { dtype: DType::F32, rows: 4, cols: 8, lanes: 8 }],
            results: vec![1],
        }
    }

    #[test]
    fn a_plan_that_fits_validates() {
        nest().validate(1).unwrap();
    }

    #[test]
    fn every_index_out_of_range_is_refused() {
        let mut broken: Vec<NativePlan> = Vec::new();
        let mut p = nest();
        p.results = vec![1, 2];
        broken.push(p);
        let mut p = nest();
        p.results.clear();
        broken.push(p);
        let mut p = nest();
        p.buffers[0].shape[0] = SizeRef::Slot(0);
        broken.push(p);
        let mut p = nest();
        p.buffers[0].kind = BufferKind::Alias(1);
        broken.push(p);
        let mut p = nest();
        p.kernels[0].output = 5;
        broken.push(p);
        let mut p = nest();
        p.kernels[0].strategy = Strategy::Nest(Nest { loops: 2, parallel: false, grain: 1, flat: 0 });
        broken.push(p);
        let mut p = nest();
        p.kernels[0].strategy = Strategy::Nest(Nest { loops: 1, parallel: true, grain: 0, flat: 0 });
        broken.push(p);
        let mut p = nest();
        p.kernels[0].strategy = Strategy::Nest(Nest { loops: 1, parallel: true, grain: 1, flat: 2 });
        broken.push(p);
        let operand = |buffer, index| Operand { buffer, index };
        let mut p = nest();
        p.kernels[0].strategy = Strategy::Gemm(GemmPlan {
            batch: vec![],
            rows: Some(0),
            cols: None,
            inner: 0,
            a: operand(0, vec![Index::Loop(3)]),
            b: operand(0, vec![Index::Loop(0)]),
            microkernel: 0,
            blocking: Blocking { depth: 64, rows: 8, cols: 8 },
            epilogue: false,
        });
        broken.push(p);
        // A footprint of another rank than its buffer's.
        let mut p = nest();
        p.kernels[0].footprint[0].reach.push(Reach::Computed);
        broken.push(p);
        // A microkernel whose columns are not whole vectors.
        let mut p = nest();
        p.microkernels[0].cols = 12;
        broken.push(p);
        for (i, p) in broken.iter().enumerate() {
            let e = p.validate(1).unwrap_err();
            assert!(e.to_string().starts_with("the plan is malformed"), "case {i}: {e}");
        }
        // An input past the function's parameters.
        assert!(nest().validate(0).is_err());
    }
}
