//! Matrix products around the program's compiled microkernels, in the
//! manner of BLIS: the columns of C in blocks of `Blocking::cols` (B's
//! packed block stays in the last-level cache), the depth in passes of
//! `Blocking::depth`, the rows in blocks of `Blocking::rows` (A's packed
//! block stays in the second level), and inside, one microkernel call per
//! tile of `rows x cols` of the microkernel, which keeps the tile's
//! accumulators in vector registers and reads one packed panel of A and
//! one of B (the B panel stays in the first level).
//!
//! Packing copies each block of A into panels of the microkernel's rows
//! and each block of B into panels of its columns, depth-major, zero-padded
//! at the edges: operands of any strides (a transposed operand is a stride)
//! reach the microkernel as the same contiguous panels. C may have any
//! strides too; when its rows, not its columns, are contiguous, the whole
//! product is transposed (`C^T = B^T A^T`) so the microkernel's vectors run
//! along memory.
//!
//! After a block's last depth pass, an optional epilogue runs over the
//! block while it is in the second-level cache (a bias, an activation, a
//! residual add): each output element is written to memory once.
//!
//! Half-float matrices (f16, bf16) are widened to f32 as they are packed,
//! accumulate in f32 (a wide copy of C), and are rounded once per element
//! when a block is finished. Where the CPU multiplies bf16 pairs in one
//! instruction faster than the FMA path (AMX tiles; AVX512_BF16's
//! `vdpbf16ps` on AMD's cores), products of 16 rows or more run there
//! instead ([`dot`]).
//!
//! A product of at most [`UNPACKED_ROWS`] rows (a decoding step's
//! matrix-vector products) is not packed into panels: that would copy all
//! of B to use each element once. It reads B once, in blocks of columns
//! split across threads: rows of B accumulated into C's rows (`axpy`)
//! when B's columns are contiguous, dot products along B's contiguous
//! depth otherwise (a transposed weight, as a tied output head). A
//! weight's B is packed once instead, into strips of 64 columns in its own
//! element type that each thread streams, the strip's sums in registers
//! ([`rows`]).
//!
//! A product splits across threads by rows or by columns, whichever is
//! longer, in whole tiles; each part packs its own panels of A in scratch
//! memory that each thread keeps between calls. Split by rows, the parts
//! share B, packed once by all threads before they start (unless it is
//! very large); split by columns, each packs its own columns of B.

/// Evaluates `$body` with `$t` the element type of `$dtype`'s matrices
/// (f32 for any dtype a product does not take).
macro_rules! with_element {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DType::F64 => {
                type $t = f64;
                $body
            }
            DType::F16 => {
                type $t = half::f16;
                $body
            }
            DType::BF16 => {
                type $t = half::bf16;
                $body
            }
            _ => {
                type $t = f32;
                $body
            }
        }
    };
}

/// Whether products run on this CPU's AMX tiles (bf16 and f16 operands,
/// and f32 weights split into bf16 parts; see `gemm/dot.rs`): the CPU has
/// AMX-BF16, the OS grants the tile state, and `NAX_AMX` is not `0`.
pub fn matrix_tiles() -> bool {
    dot::tiles()
}

use nax_contract::DType;
use nax_contract::plan::{Blocking, Microkernel};
use rayon::prelude::*;
use std::cell::RefCell;

/// The microkernel's entry: the kernels' signature
/// (`f(buffers, sizes, begin, end)`, see [`Microkernel`]).
pub(crate) type MicroFn = nax_contract::plan::KernelFn;

/// A matrix in memory: the address of element `(0, 0)` and the steps, in
/// elements, from one row to the next and from one column to the next.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strided {
    pub ptr: usize,
    pub row_step: isize,
    pub col_step: isize,
}

impl Strided {
    /// The matrix whose element `(0, 0)` lies `offset` elements of `size`
    /// bytes past `base`.
    pub fn new(base: usize, offset: isize, size: usize, row_step: isize, col_step: isize) -> Strided {
        Strided { ptr: base.wrapping_add_signed(offset * size as isize), row_step, col_step }
    }

    /// The address of element `(i, j)`, for elements of `size` bytes.
    fn at(self, i: usize, j: usize, size: usize) -> usize {
        self.ptr.wrapping_add_signed((i as isize * self.row_step + j as isize * self.col_step) * size as isize)
    }

    fn transposed(self) -> Strided {
        Strided { ptr: self.ptr, row_step: self.col_step, col_step: self.row_step }
    }
}

/// One product `c = a b` (or `c += a b`) of an `m x k` matrix by a `k x n` one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Strided,
    pub b: Strided,
    pub c: Strided,
    /// Add to C instead of overwriting it.
    pub accumulate: bool,
}

impl Product {
    fn transposed(self) -> Product {
        Product { m: self.n, n: self.m, k: self.k, a: self.b.transposed(), b: self.a.transposed(), c: self.c.transposed(), accumulate: self.accumulate }
    }
}

/// The microkernel of a product and the blocking around it.
#[derive(Clone, Copy)]
pub(crate) struct Micro {
    pub entry: MicroFn,
    pub shape: Microkernel,
    pub blocking: Blocking,
}

/// What runs over each finished tile of C: `tile(first_row, rows,
/// first_col, cols)`, in C's own orientation.
pub(crate) type Epilogue<'a> = &'a (dyn Fn(usize, usize, usize, usize) + Sync);

thread_local! {
    /// Each thread's packing scratch, kept between products.
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// The packed B that the parts of a product started on this thread
    /// share, kept between products.
    static SHARED_B: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Bytes of alignment of each packed block (a cache line).
const LINE: usize = 64;

/// Runs `f` with the address, aligned to a cache line, of `bytes` bytes
/// of this thread's buffer `key` (grown as needed and kept between calls),
/// or of a fresh buffer when this thread's is already in use (a product
/// started on a thread that waits inside another's parts).
pub(crate) fn with_scratch<R>(key: &'static std::thread::LocalKey<RefCell<Vec<u64>>>, bytes: usize, f: impl FnOnce(usize) -> R) -> R {
    key.with(|kept| {
        let mut fresh = Vec::new();
        let mut borrowed = kept.try_borrow_mut();
        let buffer = match borrowed.as_deref_mut() {
            Ok(b) => b,
            Err(_) => &mut fresh,
        };
        let words = bytes.div_ceil(8) + LINE / 8;
        if buffer.len() < words {
            buffer.resize(words, 0);
        }
        f((buffer.as_mut_ptr() as usize).div_ceil(LINE) * LINE)
    })
}

/// Runs the product on `threads` threads of the current pool when it is
/// large enough (`work` is the size below which splitting does not pay),
/// else on the calling thread.
///
/// # Safety
/// Every element the product's shape and steps reach must be inside its
/// matrix's allocation; C must not overlap A or B; `micro.entry` must be a
/// microkernel of `micro.shape` for elements of `dtype`.
/// `packed_b`, when given, is this product's B packed by [`pack_b`] with
/// the same microkernel, `threads` and `work` (a weight's, packed once):
/// the product reads it instead of packing B.
pub(crate) unsafe fn multiply(
    p: Product,
    dtype: DType,
    micro: &Micro,
    threads: usize,
    work: usize,
    epilogue: Option<Epilogue<'_>>,
    packed_b: Option<&PackedB>,
) {
    // SAFETY: as the caller promised: the matrices hold `dtype` elements;
    // the microkernel computes in their wide type.
    with_element!(dtype, T => unsafe { multiply_as::<T>(p, micro, threads, work, epilogue, packed_b) })
}

/// All of a product's B packed once (a weight's): panels for the
/// microkernel, block after block as [`Blocks::b_offset`] places them for
/// [`Split`]'s `nc`, or split for bf16 dot products ([`dot`]). What a product
/// whose B is a weight reads at every call ([`pack_b`]).
pub struct PackedB(Packed);

enum Packed {
    Panels {
        words: Vec<u64>,
        /// The columns of B's blocks.
        nc: usize,
        /// The depth of a pass (of its panels).
        kc: usize,
        /// The packed elements (wide), from [`PackedB::address`].
        len: usize,
    },
    Tiles(dot::TileB),
    /// The B of a product of few rows, in strips ([`rows`]).
    Rows(rows::Rows),
}

impl PackedB {
    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        match &self.0 {
            Packed::Panels { words, .. } => words.len() * 8,
            Packed::Tiles(tiles) => tiles.bytes(),
            Packed::Rows(rows) => rows.bytes(),
        }
    }

    /// The address of the first packed element (a cache line's) of panels
    /// packed for blocks of `nc` columns and passes of `kc` depth
    /// positions, `len` elements in all.
    fn panels(&self, nc: usize, kc: usize, len: usize) -> Option<usize> {
        match &self.0 {
            Packed::Panels { words, nc: packed_nc, kc: packed_kc, len: packed_len } if *packed_nc == nc && *packed_kc == kc && *packed_len == len => {
                Some((words.as_ptr() as usize).div_ceil(LINE) * LINE)
            }
            _ => None,
        }
    }

    fn rows(&self) -> Option<&rows::Rows> {
        match &self.0 {
            Packed::Rows(rows) => Some(rows),
            _ => None,
        }
    }

    fn tiles(&self) -> Option<&dot::TileB> {
        match &self.0 {
            Packed::Tiles(tiles) => Some(tiles),
            _ => None,
        }
    }
}

/// The most bytes per element of B that a packed weight of `dtype` takes
/// on this machine: its panels, widened to the microkernel's type, or
/// (where `tiles`) its bf16 parts for the bf16 dot products.
pub(crate) fn packed_bytes_per_element(dtype: DType, tiles: bool) -> u128 {
    with_element!(dtype, T => {
        let (wide, tiles) = (std::mem::size_of::<<T as Element>::Wide>(), if tiles && dot::takes::<T>() { 2 * T::TILE_PARTS } else { 0 });
        wide.max(tiles) as u128
    })
}

/// How a product whose B is a weight reads it packed: panels for blocks of
/// `nc` columns and passes of `kc` depth positions, or split for the tiles (what a store of packed
/// weights keys them by, with the weight and the product's geometry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Packing {
    Panels {
        nc: usize,
        kc: usize,
    },
    Tiles,
    /// In strips, for a product of few rows.
    Rows,
}

/// B of `p` packed as [`multiply`] with the same microkernel, `threads` and
/// `work` reads it; `None` where that product packs no B (no depth, or a C
/// whose rows are contiguous, which turns B into the transposed product's
/// A). A product of at most [`UNPACKED_ROWS`] rows gets its B in the
/// column blocks it reads ([`Packing::Rows`]). Without `tiles`, never
/// for the bf16 dot products (the product then runs on the FMA path).
///
/// # Safety
/// As [`multiply`], for B.
pub(crate) unsafe fn pack_b(p: Product, dtype: DType, micro: &Micro, threads: usize, work: usize, tiles: bool) -> Option<PackedB> {
    // SAFETY: as the caller promised.
    with_element!(dtype, T => unsafe { pack_b_as::<T>(p, micro, threads, work, tiles) })
}

/// [`pack_b`] for `T` matrices: split for the tiles where the product
/// runs on them and B splits, else in panels.
///
/// # Safety
/// As [`pack_b`].
unsafe fn pack_b_as<T: Element>(p: Product, micro: &Micro, threads: usize, work: usize, tiles: bool) -> Option<PackedB> {
    if tiles && dot::suits::<T>(&p) {
        // SAFETY: as the caller promised.
        if let Some(tiles) = unsafe { dot::pack_b::<T>(&p) } {
            return Some(PackedB(Packed::Tiles(tiles)));
        }
    }
    if unpacks(&p) {
        // SAFETY: as the caller promised.
        return Some(PackedB(Packed::Rows(unsafe { rows::pack::<T>(&p) })));
    }
    if packs_no_b(&p) {
        return None;
    }
    let split = Split::of(&p, micro, threads, work);
    let blocks = Blocks::new(&p, micro, &split);
    let len = blocks.packed_b_len(&p);
    let mut words = vec![0u64; (len * std::mem::size_of::<T::Wide>()).div_ceil(8) + LINE / 8];
    let address = (words.as_mut_ptr() as usize).div_ceil(LINE) * LINE;
    // SAFETY: B as the caller promised; the buffer holds `len` wide elements past `address`.
    unsafe { pack_whole_b::<T>(&p, &blocks, address) };
    Some(PackedB(Packed::Panels { words, nc: split.nc, kc: split.kc, len }))
}

/// How [`pack_b`] would pack `p`'s B, of `dtype` elements; `None` where it
/// packs none.
pub(crate) fn packing(p: &Product, dtype: DType, micro: &Micro, threads: usize, work: usize, tiles: bool) -> Option<Packing> {
    if tiles && with_element!(dtype, T => dot::suits::<T>(p)) {
        return Some(Packing::Tiles);
    }
    if unpacks(p) {
        return Some(Packing::Rows);
    }
    (!packs_no_b(p)).then(|| {
        let split = Split::of(p, micro, threads, work);
        Packing::Panels { nc: split.nc, kc: split.kc }
    })
}

/// Whether [`multiply`] runs `p` without packing B into panels (see [`pack_b`]).
fn packs_no_b(p: &Product) -> bool {
    p.m == 0 || p.n == 0 || p.k == 0 || unpacks(p) || (p.c.col_step != 1 && p.c.row_step == 1)
}

/// Whether [`multiply`] runs `p` as [`unpacked`] column blocks (few rows,
/// B's columns or its depth contiguous), not the bf16 dot products.
fn unpacks(p: &Product) -> bool {
    p.m > 0 && p.m <= UNPACKED_ROWS && p.n > 0 && p.k > 0 && (p.b.col_step == 1 || p.b.row_step == 1)
}

/// Panels of B one task of [`pack_whole_b`] packs: a row-major B's
/// rows are read `PANELS_PER_TASK` panels wide (1 KiB of f32 with
/// AVX-512's panels of 32), long enough runs for the prefetchers.
const PANELS_PER_TASK: usize = 8;

/// Packs all of `p`'s B at `packed` (block after block, see
/// [`Blocks::b_offset`]), one task per [`PANELS_PER_TASK`] panels of a block.
///
/// # Safety
/// B as [`multiply`]'s caller promised; `packed` holds
/// `blocks.packed_b_len(p)` wide elements.
unsafe fn pack_whole_b<T: Element>(p: &Product, blocks: &Blocks, packed: usize) {
    let nr = blocks.nr;
    let mut panels = Vec::new();
    for jc in (0..p.n).step_by(blocks.nc) {
        let ncb = blocks.nc.min(p.n - jc);
        for pc in (0..p.k).step_by(blocks.kc) {
            let kcb = blocks.kc.min(p.k - pc);
            for first in (0..ncb).step_by(nr * PANELS_PER_TASK) {
                panels.push((blocks.b_offset(p, jc, pc) + first * kcb, jc + first, (nr * PANELS_PER_TASK).min(ncb - first), pc, kcb));
            }
        }
    }
    panels.par_iter().for_each(|&(offset, first, count, pc, kcb)| {
        // SAFETY: the panel is inside B; it lands inside the packed
        // buffer, which holds `packed_b_len` wide elements.
        unsafe { pack::<T>(p.b.transposed(), first, count, pc, kcb, nr, (packed as *mut T::Wide).add(offset)) };
    });
}

/// How a packed product splits across threads and blocks its columns,
/// decided once for its shape, the microkernel and the thread count: by
/// rows or by columns, whichever is longer, in `parts` chunks of `chunk`
/// rows or columns (whole tiles), B in blocks of `nc` columns. Split by
/// columns, each part's chunk is whole blocks, so that a B packed before
/// the call ([`PackedB`]) has the blocks each part reads.
#[derive(Clone, Copy, Debug)]
struct Split {
    parts: usize,
    by_rows: bool,
    chunk: usize,
    nc: usize,
    /// The depth of a pass (see [`Split::depth`]).
    kc: usize,
}

impl Split {
    fn of(p: &Product, micro: &Micro, threads: usize, work: usize) -> Split {
        let (mr, nr) = (micro.shape.rows as usize, micro.shape.cols as usize);
        let parts = parts(p, threads, work);
        let widest = (micro.blocking.cols as usize).min(p.n.div_ceil(nr) * nr).max(nr);
        let by_rows = p.m.div_ceil(mr) >= p.n.div_ceil(nr);
        if parts == 1 || by_rows {
            let chunk = p.m.div_ceil(parts).div_ceil(mr) * mr;
            return Split { parts, by_rows: true, chunk, nc: widest, kc: Split::depth(p, micro, chunk, widest) };
        }
        let chunk = p.n.div_ceil(parts).div_ceil(nr) * nr;
        let blocks = chunk.div_ceil(widest);
        let nc = chunk.div_ceil(blocks).div_ceil(nr) * nr;
        Split { parts, by_rows: false, chunk: nc * blocks, nc, kc: Split::depth(p, micro, p.m, nc) }
    }

    /// The depth of a pass over a part of `rows` rows in column blocks of
    /// `nc`: the blocking's, or all of it in one pass where A's rows at
    /// their whole depth fit the blocking's block of A (half the second
    /// level) and C's block (`rows` by `nc`) outgrows twice that: each
    /// pass reads and writes that block of C, which the caches then do
    /// not keep between passes. GPT-2's tied head (128 rows of 768 by
    /// 50257 columns, f32, Zen 4, 2 threads, `NAX_PROFILE`, four
    /// interleaved runs): 58-59 ms in passes of 128, 51-53 in one; its
    /// layers' products, whose C stays in the second level, took 10%
    /// longer in one pass, so they keep the blocking's.
    fn depth(p: &Product, micro: &Micro, rows: usize, nc: usize) -> usize {
        let blocked = (micro.blocking.depth as usize).min(p.k.max(1));
        let a_block = micro.blocking.rows as usize * micro.blocking.depth as usize;
        let rows = rows.div_ceil(micro.shape.rows as usize) * micro.shape.rows as usize;
        let nc = nc.min(p.n.div_ceil(micro.shape.cols as usize) * micro.shape.cols as usize);
        if rows.saturating_mul(p.k) <= a_block && rows.saturating_mul(nc) > 2 * a_block { p.k.max(1) } else { blocked }
    }
}

/// The threads a product of this size splits across: all of them when
/// its work (`m n k`) reaches `work`, else one.
fn parts(p: &Product, threads: usize, work: usize) -> usize {
    if threads > 1 && p.m.saturating_mul(p.n).saturating_mul(p.k.max(1)) >= work { threads } else { 1 }
}

/// Packed B larger than this is packed by each thread for its own part
/// rather than once for all.
pub(crate) const SHARED_B_BYTES: usize = 64 << 20;

/// [`multiply`] for `T` matrices. Split by rows, the parts share B: its
/// blocks are packed once, in parallel, before the parts run (or read
/// from `packed_b`, which split by columns serves each part too).
///
/// # Safety
/// As [`multiply`].
unsafe fn multiply_as<T: Element>(p: Product, micro: &Micro, threads: usize, work: usize, epilogue: Option<Epilogue<'_>>, packed_b: Option<&PackedB>) {
    if p.m == 0 || p.n == 0 {
        return;
    }
    if dot::suits::<T>(&p) {
        let tiles = packed_b.and_then(PackedB::tiles);
        // SAFETY: as the caller promised; the tiles are available.
        if (tiles.is_some() || (packed_b.is_none() && dot::packs_at_call::<T>(&p))) && unsafe { dot::multiply::<T>(p, tiles, threads, work, epilogue) } {
            return;
        }
    }
    if unpacks(&p) {
        let finish = |i: usize, rows: usize, j: usize, cols: usize| {
            if let Some(f) = epilogue {
                f(i, rows, j, cols)
            }
        };
        match packed_b.and_then(PackedB::rows).filter(|rows| rows.fits(&p)) {
            // SAFETY: as the caller promised; the strips are this product's B.
            Some(rows) => unsafe { rows::multiply::<T>(&p, rows, threads, work, &finish) },
            // SAFETY: as the caller promised.
            None => unsafe { unpacked::<T>(p, threads, work, &finish) },
        }
        return;
    }
    // The microkernel's vectors run along C's columns: make them the contiguous ones.
    let (p, transposed) = if p.c.col_step != 1 && p.c.row_step == 1 { (p.transposed(), true) } else { (p, false) };
    let finish = |i: usize, rows: usize, j: usize, cols: usize| {
        if let Some(f) = epilogue {
            if transposed { f(j, cols, i, rows) } else { f(i, rows, j, cols) }
        }
    };
    let split = Split::of(&p, micro, threads, work);
    let size = std::mem::size_of::<T>();
    let wide_size = std::mem::size_of::<T::Wide>();
    let blocks = Blocks::new(&p, micro, &split);
    let packed_b = packed_b.filter(|_| !transposed && p.k > 0).and_then(|b| b.panels(split.nc, split.kc, blocks.packed_b_len(&p)));
    if split.parts == 1 {
        // SAFETY: as the caller promised.
        unsafe { blocked::<T>(p, micro, &finish, packed_b, &split) };
        return;
    }
    let length = if split.by_rows { p.m } else { p.n };
    let run_parts = |shared_b: Option<usize>| {
        (0..length.div_ceil(split.chunk)).into_par_iter().for_each(|part| {
            let first = part * split.chunk;
            let len = split.chunk.min(length - first);
            let mut q = p;
            let mut part_b = shared_b;
            if split.by_rows {
                q.m = len;
                q.a.ptr = p.a.at(first, 0, size);
                q.c.ptr = p.c.at(first, 0, size);
            } else {
                q.n = len;
                q.b.ptr = p.b.at(0, first, size);
                q.c.ptr = p.c.at(0, first, size);
                // The part's columns start a block: its blocks follow the
                // product's first `first` columns' (`first * k` elements).
                part_b = shared_b.map(|b| b + first * p.k * wide_size);
            }
            let shifted = |i: usize, rows: usize, j: usize, cols: usize| {
                if split.by_rows { finish(i + first, rows, j, cols) } else { finish(i, rows, j + first, cols) }
            };
            // SAFETY: a part is a block of the product's rows or columns;
            // a shared packed B is the whole product's, which a part of
            // rows multiplies whole and a part of columns reads from its
            // first block on.
            unsafe { blocked::<T>(q, micro, &shifted, part_b, &split) };
        })
    };
    if packed_b.is_some() {
        run_parts(packed_b);
        return;
    }
    let packed_len = blocks.packed_b_len(&p);
    if !split.by_rows || p.k == 0 || packed_len * wide_size > SHARED_B_BYTES {
        run_parts(None);
        return;
    }
    with_scratch(&SHARED_B, packed_len * wide_size, |packed| {
        // SAFETY: B as the caller promised; the scratch holds `packed_len` wide elements.
        unsafe { pack_whole_b::<T>(&p, &blocks, packed) };
        run_parts(Some(packed));
    });
}

/// One operand of small f32 products packed once into the microkernel's
/// panels and reused by several of them (attention's queries, against
/// every tile of keys), with what it was packed as. The matrix packed may
/// be of f32 or a half float (`T`), widened to f32 as it is packed.
#[derive(Default)]
pub(crate) struct Panels {
    values: Vec<f32>,
    /// Rows (A) or columns (B) packed, the depth, and the panels' width.
    shape: (usize, usize, usize),
}

impl Panels {
    /// Packs A, `rows` rows of `depth` `T`s, into panels of the microkernel's rows.
    ///
    /// # Safety
    /// Every element of A those sizes and its steps reach is inside its matrix.
    pub(crate) unsafe fn pack_a<T: Element<Wide = f32>>(&mut self, a: Strided, rows: usize, depth: usize, micro: &Micro) {
        // SAFETY: as the caller promised.
        unsafe { self.pack::<T>(a, rows, depth, micro.shape.rows as usize) }
    }

    /// Packs B, `depth` rows of `cols` `T`s, into panels of the microkernel's columns.
    ///
    /// # Safety
    /// Every element of B those sizes and its steps reach is inside its matrix.
    pub(crate) unsafe fn pack_b<T: Element<Wide = f32>>(&mut self, b: Strided, depth: usize, cols: usize, micro: &Micro) {
        // SAFETY: as the caller promised.
        unsafe { self.pack::<T>(b.transposed(), cols, depth, micro.shape.cols as usize) }
    }

    /// `rows x cols` `T`s of `m` as an f32 matrix, for the products of few
    /// rows, which run unpacked: `m` itself where it is f32 or empty, else
    /// its elements widened into these values (one panel of all its rows,
    /// read along memory: a matrix whose rows are contiguous is widened as
    /// its transpose).
    ///
    /// # Safety
    /// Every element of `m` those sizes and its steps reach is inside its matrix.
    pub(crate) unsafe fn widen<T: Element<Wide = f32>>(&mut self, m: Strided, rows: usize, cols: usize) -> Strided {
        if T::FORMAT == Format::F32 || rows == 0 || cols == 0 {
            return m;
        }
        if m.col_step == 1 && m.row_step != 1 {
            // SAFETY: as the caller promised, for the same elements.
            return unsafe { self.widen::<T>(m.transposed(), cols, rows) }.transposed();
        }
        // SAFETY: as the caller promised.
        unsafe { self.pack::<T>(m, rows, cols, rows.max(1)) };
        Strided { ptr: self.values.as_ptr() as usize, row_step: 1, col_step: rows as isize }
    }

    unsafe fn pack<T: Element<Wide = f32>>(&mut self, m: Strided, count: usize, depth: usize, width: usize) {
        let len = count.div_ceil(width) * width * depth;
        if self.values.len() < len {
            self.values.resize(len, 0.0);
        }
        self.shape = (count, depth, width);
        // SAFETY: as the caller promised, for `m`; the panels fit `values`.
        unsafe { pack::<T>(m, 0, count, 0, depth, width, self.values.as_mut_ptr()) };
    }
}

/// `p` (f32, `p.k` at least 1) from A's and B's panels packed from it by
/// [`Panels::pack_a`] and [`Panels::pack_b`] with `micro`: the
/// microkernel over each tile, the whole depth in one pass, on the
/// calling thread (small products whose panels stay in the caches).
///
/// # Safety
/// C's elements that `p` reaches are inside its matrix and overlap
/// neither panel; `micro.entry` is an f32 microkernel of `micro.shape`.
pub(crate) unsafe fn multiply_panels(p: &Product, a: &Panels, b: &Panels, micro: &Micro) {
    let (mr, nr) = (micro.shape.rows as usize, micro.shape.cols as usize);
    assert!(a.shape == (p.m, p.k, mr) && b.shape == (p.n, p.k, nr) && p.k > 0, "panels packed for another product");
    let mut tile = [0f32; 256];
    let mut spare = Vec::new();
    let tile_at = if mr * nr <= tile.len() {
        tile.as_mut_ptr()
    } else {
        spare.resize(mr * nr, 0f32);
        spare.as_mut_ptr()
    };
    let size = std::mem::size_of::<f32>();
    for jr in (0..p.n).step_by(nr) {
        for ir in (0..p.m).step_by(mr) {
            let buffers =
                [a.values[ir * p.k..].as_ptr() as *mut u8, b.values[jr * p.k..].as_ptr() as *mut u8, p.c.at(ir, jr, size) as *mut u8, tile_at as *mut u8];
            let sizes = [p.k as i64, p.c.row_step as i64, p.c.col_step as i64, mr.min(p.m - ir) as i64, nr.min(p.n - jr) as i64, i64::from(p.accumulate)];
            // SAFETY: the panels hold `p.k` depth positions of `mr` and
            // `nr` elements from `ir` and `jr` on (checked above); the
            // tile's valid part is inside C; the scratch tile holds `mr x nr`.
            unsafe { (micro.entry)(buffers.as_ptr(), sizes.as_ptr(), 0, 0) };
        }
    }
}

/// Products of at most this many rows run unpacked (see the module's doc).
pub(crate) const UNPACKED_ROWS: usize = 4;

/// Columns of C one unpacked block computes: its accumulators (at most
/// [`UNPACKED_ROWS`] rows of them, 8 KiB in f32) stay in the first-level cache.
const UNPACKED_COLS: usize = 512;

/// Independent partial sums of an unpacked dot product: one vector's lanes
/// (AVX-512 f32) or more, so that the sum vectorises and its additions do
/// not wait for each other.
const DOT_LANES: usize = 16;

/// The columns of each block of an unpacked product: as many blocks as a
/// multiple of the threads it splits across, each at most
/// [`UNPACKED_COLS`] wide, in whole groups of 16 columns, so that every
/// thread gets as many columns (768 columns on 2 threads are 2 blocks of
/// 384, not one of 512 and one of 256, which left a thread idle a third
/// of the time).
fn unpacked_width(p: &Product, threads: usize, work: usize) -> usize {
    let parts = parts(p, threads, work);
    let blocks = p.n.div_ceil(UNPACKED_COLS).div_ceil(parts) * parts;
    p.n.div_ceil(blocks).div_ceil(16).saturating_mul(16).min(UNPACKED_COLS)
}

/// A product of at most [`UNPACKED_ROWS`] rows without packing, B read
/// where it lies, in blocks of [`unpacked_width`] columns (split across
/// the threads when the product is large enough), each block finished by
/// `finish`. The blocks' loops are compiled for the widest vectors the
/// machine has (AVX-512, AVX2 with FMA, or the baseline), chosen once per
/// product.
///
/// # Safety
/// As [`multiply`]; B's columns or its depth are contiguous.
unsafe fn unpacked<T: Element>(p: Product, threads: usize, work: usize, finish: &(dyn Fn(usize, usize, usize, usize) + Sync)) {
    // SAFETY: as the caller promised.
    let a = unsafe { widened_rows::<T>(&p) };
    let block = unpacked_block_for::<T>();
    let parts = parts(&p, threads, work);
    let width = unpacked_width(&p, threads, work);
    let run = |j0: usize| {
        // SAFETY: as the caller promised; the block's features are the machine's.
        unsafe { block(&p, &a, j0, width) };
        finish(0, p.m, j0, width.min(p.n - j0));
    };
    let starts: Vec<usize> = (0..p.n).step_by(width).collect();
    if parts > 1 && starts.len() > 1 {
        starts.into_par_iter().for_each(run);
    } else {
        starts.into_iter().for_each(run);
    }
}

/// `$name::<T>()`: the function `$inner::<T>` compiled for this machine's
/// widest vectors (AVX-512, AVX2 with FMA, or the baseline), chosen when
/// called by the host's [`nax_contract::Machine`] (detected once).
macro_rules! for_widest_vectors {
    ($(#[$doc:meta])* fn $name:ident = $inner:ident($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        fn $name<T: Element>() -> unsafe fn($($ty),*) {
            // SAFETY (each): as `$inner`'s caller promised; chosen only where the machine has the features.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn avx512<T: Element>($($arg: $ty),*) {
                unsafe { $inner::<T>($($arg),*) }
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<T: Element>($($arg: $ty),*) {
                unsafe { $inner::<T>($($arg),*) }
            }
            unsafe fn baseline<T: Element>($($arg: $ty),*) {
                unsafe { $inner::<T>($($arg),*) }
            }
            // The host's vector width implies the features each variant enables.
            #[cfg(target_arch = "x86_64")]
            match nax_contract::Machine::host().vector_bytes() {
                64 => return avx512::<T>,
                32 => return avx2::<T>,
                _ => {}
            }
            baseline::<T>
        }
    };
}

mod dot;
mod rows;

for_widest_vectors! {
    /// [`unpacked_block`] for this machine.
    fn unpacked_block_for = unpacked_block(p: &Product, a: &[T::Wide], j0: usize, width: usize)
}

for_widest_vectors! {
    /// [`narrowed_block`] for this machine.
    fn narrowed_block_for = narrowed_block(c: Strided, wide: Strided, block: [usize; 4])
}

/// Rounds the block `[first row, rows, first column, columns]` of a wide
/// copy of C (its rows contiguous) into C: a row at a time in vectors
/// where C's columns are contiguous.
///
/// # Safety
/// The block is inside both matrices, of `T` and of `T::Wide` elements.
#[inline(always)]
unsafe fn narrowed_block<T: Element>(c: Strided, wide: Strided, [i, rows, j, cols]: [usize; 4]) {
    let (size, wide_size) = (std::mem::size_of::<T>(), std::mem::size_of::<T::Wide>());
    for r in i..i + rows {
        // SAFETY: the row's columns are inside the wide copy, contiguous.
        let from = unsafe { std::slice::from_raw_parts(wide.at(r, j, wide_size) as *const T::Wide, cols) };
        if c.col_step == 1 {
            // SAFETY: the row's columns are inside C, contiguous, and not in the wide copy.
            let to = unsafe { std::slice::from_raw_parts_mut(c.at(r, j, size) as *mut T, cols) };
            for (to, &from) in to.iter_mut().zip(from) {
                *to = T::narrow(from);
            }
        } else {
            for (q, &from) in from.iter().enumerate() {
                // SAFETY: (r, j + q) is inside C.
                unsafe { *(c.at(r, j + q, size) as *mut T) = T::narrow(from) };
            }
        }
    }
}

/// Columns `j0..j0 + width` (at most [`UNPACKED_COLS`], or to the end) of an unpacked product
/// whose A, widened, is `a` (`m` rows of `k`): four rows of B at a time
/// accumulated into C's rows when B's columns are contiguous, else dot
/// products along B's contiguous depth.
///
/// # Safety
/// As [`multiply`]; `p.m` is at most [`UNPACKED_ROWS`]; B's columns or
/// its depth are contiguous.
#[inline(always)]
unsafe fn unpacked_block<T: Element>(p: &Product, a: &[T::Wide], j0: usize, width: usize) {
    let size = std::mem::size_of::<T>();
    let cols = width.min(UNPACKED_COLS).min(p.n - j0);
    let mut acc = [[T::Wide::default(); UNPACKED_COLS]; UNPACKED_ROWS];
    let a_at = |i: usize, k: usize| a[i * p.k + k];
    // SAFETY (both forms): every element of B read is inside B.
    if p.b.col_step == 1 {
        let b_row = |k: usize| unsafe { std::slice::from_raw_parts(p.b.at(k, j0, size) as *const T, cols) };
        let whole = p.k / 4 * 4;
        for k in (0..whole).step_by(4) {
            let (b0, b1, b2, b3) = (b_row(k), b_row(k + 1), b_row(k + 2), b_row(k + 3));
            for (i, row) in acc.iter_mut().enumerate().take(p.m) {
                let (a0, a1, a2, a3) = (a_at(i, k), a_at(i, k + 1), a_at(i, k + 2), a_at(i, k + 3));
                for j in 0..cols {
                    row[j] = row[j] + (a0 * b0[j].operand() + a1 * b1[j].operand()) + (a2 * b2[j].operand() + a3 * b3[j].operand());
                }
            }
        }
        for k in whole..p.k {
            let b = b_row(k);
            for (i, row) in acc.iter_mut().enumerate().take(p.m) {
                let a = a_at(i, k);
                for (c, &x) in row[..cols].iter_mut().zip(b) {
                    *c = *c + a * x.operand();
                }
            }
        }
    } else {
        for (i, row) in acc.iter_mut().enumerate().take(p.m) {
            let a_row = &a[i * p.k..(i + 1) * p.k];
            for (j, c) in row[..cols].iter_mut().enumerate() {
                let b = unsafe { std::slice::from_raw_parts(p.b.at(0, j0 + j, size) as *const T, p.k) };
                *c = T::dot(a_row, b);
            }
        }
    }
    // SAFETY: as the caller promised.
    unsafe { write_columns::<T, UNPACKED_COLS>(p, j0, cols, &acc[..p.m]) };
}

/// A product of few rows' A, widened as operands once for every block of
/// columns, row after row (`m` rows of `k`).
///
/// # Safety
/// As [`multiply`], for A.
unsafe fn widened_rows<T: Element>(p: &Product) -> Vec<T::Wide> {
    let size = std::mem::size_of::<T>();
    // SAFETY: every (i, k) is inside A, as the caller promised.
    (0..p.m).flat_map(|i| (0..p.k).map(move |k| unsafe { *(p.a.at(i, k, size) as *const T) }.operand())).collect()
}

/// Writes a block of sums to C's columns `j0..j0 + cols` (row `i` from
/// `sums[i]`), added to C where the product accumulates, each rounded once.
///
/// # Safety
/// As [`multiply`], for C; `sums` has at most `p.m` rows.
#[inline(always)]
unsafe fn write_columns<T: Element, const N: usize>(p: &Product, j0: usize, cols: usize, sums: &[[T::Wide; N]]) {
    let size = std::mem::size_of::<T>();
    for (i, row) in sums.iter().enumerate() {
        for (j, &v) in row[..cols].iter().enumerate() {
            let at = p.c.at(i, j0 + j, size) as *mut T;
            // SAFETY: (i, j0 + j) is inside C, which overlaps neither A nor B.
            unsafe { *at = T::narrow(if p.accumulate { (*at).widen() + v } else { v }) };
        }
    }
}

/// The blocking of one product: depth per pass (`kc`), rows of A per
/// packed block (`mc`), columns of B per packed block (`nc`), columns per
/// panel (`nr`).
struct Blocks {
    kc: usize,
    mc: usize,
    nc: usize,
    nr: usize,
}

impl Blocks {
    /// The blocking of `p` (the whole product or one of `split`'s parts)
    /// with B in blocks of `split`'s `nc` columns (whole panels; fewer
    /// where `p` has fewer), in passes of its `kc`.
    fn new(p: &Product, micro: &Micro, split: &Split) -> Blocks {
        let (mr, nr) = (micro.shape.rows as usize, micro.shape.cols as usize);
        Blocks { kc: split.kc, mc: (micro.blocking.rows as usize).min(p.m.div_ceil(mr) * mr), nc: split.nc.min(p.n.div_ceil(nr) * nr).max(nr), nr }
    }

    /// Where the packed block of B at columns `jc` and depth `pc` starts,
    /// in elements, when all of B is packed block after block (the depth
    /// passes of one column block, then the next): the column blocks before
    /// hold `k` depth positions of `nc` columns each (`nc` is whole
    /// panels), and the passes before in this one `pc` positions of its
    /// width in whole panels.
    fn b_offset(&self, p: &Product, jc: usize, pc: usize) -> usize {
        jc * p.k + pc * self.padded_width(p, jc)
    }

    /// The width of the column block at `jc`, in whole panels.
    fn padded_width(&self, p: &Product, jc: usize) -> usize {
        self.nc.min(p.n - jc).div_ceil(self.nr) * self.nr
    }

    /// Elements of all of B packed.
    fn packed_b_len(&self, p: &Product) -> usize {
        (0..p.n).step_by(self.nc).map(|jc| p.k * self.padded_width(p, jc)).sum()
    }
}

/// The type a microkernel computes in (f32 or f64).
pub(crate) trait Wide: Copy + Default + Send + Sync + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    /// A subnormal as a zero of its sign, anything else as it is.
    fn subnormal_as_zero(self) -> Self;
    /// The f32 nearest (the tiles' operands and sums are f32).
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

impl Wide for f32 {
    #[inline(always)]
    fn subnormal_as_zero(self) -> f32 {
        if self.abs() < f32::MIN_POSITIVE { 0.0f32.copysign(self) } else { self }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f32 {
        x
    }
}

impl Wide for f64 {
    #[inline(always)]
    fn subnormal_as_zero(self) -> f64 {
        if self.abs() < f64::MIN_POSITIVE { 0.0f64.copysign(self) } else { self }
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn from_f32(x: f32) -> f64 {
        f64::from(x)
    }
}

/// An element of a product's matrices and the type its microkernel
/// computes in: the same for f32 and f64; f32 for the half floats,
/// widened as they are packed and rounded once when the result is written.
pub(crate) trait Element: Copy + Default + Send + Sync {
    type Wide: Wide;
    /// Which of the element types it is (what vector code reads it as).
    const FORMAT: Format;
    /// The bf16 parts an element splits into exactly for the bf16 dot
    /// products (see [`dot`]); 0 for elements they do not multiply.
    const TILE_PARTS: usize;
    fn widen(self) -> Self::Wide;
    fn narrow(wide: Self::Wide) -> Self;

    /// The element as a product's operand: widened, a subnormal read as a
    /// zero of its sign (as BLAS libraries read operands with the CPU's
    /// denormals-are-zero mode). A multiply-add with a subnormal operand
    /// takes a microcode assist on x86 cores: an MLP whose first product
    /// ends in gelu (whose tail reaches the subnormals) ran its second
    /// product 4x slower. A term it drops is under 2^-126 times the other
    /// operand.
    #[inline(always)]
    fn operand(self) -> Self::Wide {
        self.widen().subnormal_as_zero()
    }

    /// The dot product of `a` (widened) with `b`, in [`DOT_LANES`] partial sums.
    #[inline(always)]
    fn dot(a: &[Self::Wide], b: &[Self]) -> Self::Wide {
        let mut lanes = [Self::Wide::default(); DOT_LANES];
        let whole = a.len() / DOT_LANES * DOT_LANES;
        for (x, y) in a[..whole].chunks_exact(DOT_LANES).zip(b[..whole].chunks_exact(DOT_LANES)) {
            for l in 0..DOT_LANES {
                lanes[l] = x[l] * y[l].operand() + lanes[l];
            }
        }
        let tail = a[whole..].iter().zip(&b[whole..]).fold(Self::Wide::default(), |s, (&x, &y)| x * y.operand() + s);
        lanes.into_iter().fold(tail, |s, l| s + l)
    }
}

/// The element types of products.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    F32,
    F64,
    F16,
    BF16,
}

impl Element for f32 {
    const FORMAT: Format = Format::F32;
    const TILE_PARTS: usize = 3;
    type Wide = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    fn narrow(wide: f32) -> f32 {
        wide
    }
}

impl Element for f64 {
    const FORMAT: Format = Format::F64;
    const TILE_PARTS: usize = 0;
    type Wide = f64;
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
    fn narrow(wide: f64) -> f64 {
        wide
    }
}

impl Element for half::f16 {
    const FORMAT: Format = Format::F16;
    const TILE_PARTS: usize = 2;
    type Wide = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(wide: f32) -> half::f16 {
        half::f16::from_f32(wide)
    }
}

impl Element for half::bf16 {
    const FORMAT: Format = Format::BF16;
    const TILE_PARTS: usize = 1;
    type Wide = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    /// As `half::bf16::from_f32` (to nearest, ties to even; a NaN kept
    /// quiet), branch-free, so that a row of them runs in vectors.
    #[inline(always)]
    fn narrow(wide: f32) -> half::bf16 {
        let bits = wide.to_bits();
        let quiet = (bits >> 16) | 0x40;
        half::bf16::from_bits((if bits & 0x7fff_ffff > 0x7f80_0000 { quiet } else { bf16_nearest(bits) }) as u16)
    }
}

/// The bits of the bf16 nearest the f32 of bits `bits` (ties to even),
/// for any f32 but a NaN: its upper 16 bits rounded, branch-free.
#[inline(always)]
fn bf16_nearest(bits: u32) -> u32 {
    bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16
}

/// The blocked loops of one thread's product of `T` matrices, B in blocks
/// of `split`'s `nc` columns and passes of its `kc` depth positions,
/// packed here block by block, or all of it already
/// packed at `shared_b` (see [`Blocks::b_offset`]). When `T` is narrower than its wide type, the
/// microkernel accumulates into a wide copy of C, which each block is
/// rounded from after its last depth pass; then `finish` runs over the
/// block.
///
/// # Safety
/// As [`multiply`].
unsafe fn blocked<T: Element>(p: Product, micro: &Micro, finish: &(dyn Fn(usize, usize, usize, usize) + Sync), shared_b: Option<usize>, split: &Split) {
    let (size, wide_size) = (std::mem::size_of::<T>(), std::mem::size_of::<T::Wide>());
    let (mr, nr) = (micro.shape.rows as usize, micro.shape.cols as usize);
    if p.k == 0 {
        // An empty sum: zeros (or C unchanged), then the epilogue.
        if !p.accumulate {
            for i in 0..p.m {
                for j in 0..p.n {
                    // SAFETY: (i, j) is inside C.
                    unsafe { *(p.c.at(i, j, size) as *mut T) = T::default() };
                }
            }
        }
        for i in (0..p.m).step_by(mr) {
            for j in (0..p.n).step_by(nr) {
                finish(i, mr.min(p.m - i), j, nr.min(p.n - j));
            }
        }
        return;
    }
    let narrowed = size != wide_size;
    let blocks = Blocks::new(&p, micro, split);
    let (kc, mc, nc) = (blocks.kc, blocks.mc, blocks.nc);
    let (a_len, b_len, tile_len) = (mc * kc, if shared_b.is_some() { 0 } else { kc * nc }, mr * nr);
    let wide_len = if narrowed { p.m * p.n } else { 0 };
    // Each region of the scratch starts on a cache line.
    let bytes = |elements: usize| (elements * wide_size).div_ceil(LINE) * LINE;
    // The wide copy of C is the thread's scratch too, kept between calls
    // (as large as the largest half-float C the thread computes): allocated
    // at each call, its pages were faulted in and zeroed by the kernel
    // every time (a quarter of GPT-2's bf16 prefill on the FMA path).
    with_scratch(&SCRATCH, bytes(a_len) + bytes(b_len) + bytes(tile_len) + bytes(wide_len), |a_pack| {
        let own_b = a_pack + bytes(a_len);
        let tile = own_b + bytes(b_len);
        // Where the microkernel writes: C itself, or a wide copy of it
        // (each element written by the first pass over the depth, or
        // widened from C where the product adds to it).
        let c = if narrowed {
            let wide = Strided { ptr: tile + bytes(tile_len), row_step: p.n as isize, col_step: 1 };
            if p.accumulate {
                for i in 0..p.m {
                    for j in 0..p.n {
                        // SAFETY: (i, j) is inside C and its wide copy.
                        unsafe { *(wide.at(i, j, wide_size) as *mut T::Wide) = (*(p.c.at(i, j, size) as *const T)).widen() };
                    }
                }
            }
            wide
        } else {
            p.c
        };
        let tile_done = |i: usize, rows: usize, j: usize, cols: usize| {
            if narrowed {
                // SAFETY: the block is inside C and its wide copy.
                unsafe { narrowed_block_for::<T>()(p.c, c, [i, rows, j, cols]) };
            }
            finish(i, rows, j, cols);
        };
        for jc in (0..p.n).step_by(nc) {
            let ncb = nc.min(p.n - jc);
            for pc in (0..p.k).step_by(kc) {
                let kcb = kc.min(p.k - pc);
                let last = pc + kcb == p.k;
                let accumulate = i64::from(p.accumulate || pc > 0);
                let b_pack = match shared_b {
                    Some(packed) => packed + blocks.b_offset(&p, jc, pc) * wide_size,
                    None => {
                        // SAFETY: the block is inside B; the packed block fits `b_len` elements.
                        unsafe { pack::<T>(p.b.transposed(), jc, ncb, pc, kcb, nr, own_b as *mut T::Wide) };
                        own_b
                    }
                };
                for ic in (0..p.m).step_by(mc) {
                    let mcb = mc.min(p.m - ic);
                    // SAFETY: as above, for A.
                    unsafe { pack::<T>(p.a, ic, mcb, pc, kcb, mr, a_pack as *mut T::Wide) };
                    let panel_bytes = nr * kcb * wide_size;
                    // Each tile's share of the next panel, whole cache lines.
                    let share = panel_bytes.div_ceil(mcb.div_ceil(mr)).div_ceil(LINE) * LINE;
                    for jr in (0..ncb).step_by(nr) {
                        let cols = nr.min(ncb - jr);
                        let next_panel = (jr + nr < ncb).then(|| b_pack + (jr + nr) * kcb * wide_size);
                        for (tile_index, ir) in (0..mcb).step_by(mr).enumerate() {
                            let rows = mr.min(mcb - ir);
                            // The next B panel, a share per tile: read from
                            // memory while this one's tiles compute (a
                            // weight's packed panels come from DRAM).
                            if let Some(next) = next_panel {
                                prefetch(next + tile_index * share, share.min(panel_bytes.saturating_sub(tile_index * share)));
                            }
                            // The next tile's rows of C, which a C larger
                            // than the caches brings from memory: in flight
                            // while this tile computes, not waited for when
                            // the next one adds to them.
                            let next_tile = if ir + mr < mcb { Some((ir + mr, jr)) } else { (jr + nr < ncb).then_some((0, jr + nr)) };
                            if let Some((next_ir, next_jr)) = next_tile.filter(|_| c.col_step == 1) {
                                for r in ic + next_ir..ic + (next_ir + mr).min(mcb) {
                                    prefetch(c.at(r, jc + next_jr, wide_size), nr.min(ncb - next_jr) * wide_size);
                                }
                            }
                            let buffers = [
                                (a_pack + ir * kcb * wide_size) as *mut u8,
                                (b_pack + jr * kcb * wide_size) as *mut u8,
                                c.at(ic + ir, jc + jr, wide_size) as *mut u8,
                                tile as *mut u8,
                            ];
                            let sizes = [kcb as i64, c.row_step as i64, c.col_step as i64, rows as i64, cols as i64, accumulate];
                            // SAFETY: the panels hold `kcb` depth positions of `mr`
                            // and `nr` elements; the tile's valid part is inside C
                            // (or its wide copy); the scratch tile holds `mr x nr`
                            // elements.
                            unsafe { (micro.entry)(buffers.as_ptr(), sizes.as_ptr(), 0, 0) };
                        }
                    }
                    // The block's products are complete: its epilogue runs
                    // over all of it at once (still in the second-level
                    // cache), rows of `ncb` that vectorise, one call per
                    // block rather than per microkernel tile (whose call
                    // and setup cost what a tanh-gelu's arithmetic did).
                    if last {
                        tile_done(ic, mcb, jc, ncb);
                    }
                }
            }
        }
    });
}

/// Asks for the cache lines of `bytes` bytes at `address` to be brought
/// into the caches (a hint: no effect on results, none off x86-64).
#[inline(always)]
fn prefetch(address: usize, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (address..address + bytes).step_by(LINE) {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(line as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (address, bytes);
}

/// The edge of a transposing pack's tiles (see [`transpose_tiles`]).
const TILE: usize = 8;

for_widest_vectors! {
    /// [`transpose_tiles`] for this machine.
    fn transpose_tiles_for = transpose_tiles(src: *const T, row_step: isize, rows: usize, len: usize, width: usize, dst: *mut T::Wide)
}

/// `dst[p * width + r] = src[r * row_step + p]` (widened) for `r < rows`
/// and `p < len`: whole tiles of [`TILE`] rows by [`TILE`] positions read
/// row by row and written position by position through registers, the
/// edges element by element.
///
/// # Safety
/// `src` holds `rows` rows of `len` elements, `row_step` apart; `dst`
/// holds `len * width` elements, `rows <= width`.
#[inline(always)]
unsafe fn transpose_tiles<T: Element>(src: *const T, row_step: isize, rows: usize, len: usize, width: usize, dst: *mut T::Wide) {
    // SAFETY (throughout): the positions read and written are inside the
    // matrices, as the caller promised.
    let at = |r: usize, p: usize| unsafe { *src.offset(r as isize * row_step + p as isize) }.operand();
    let (whole_rows, whole_len) = (rows / TILE * TILE, len / TILE * TILE);
    #[cfg(target_arch = "x86_64")]
    let f32_tiles = T::FORMAT == Format::F32 && nax_contract::Machine::host().has(nax_contract::Feature::Avx);
    for p0 in (0..whole_len).step_by(TILE) {
        #[cfg(target_arch = "x86_64")]
        if f32_tiles {
            // Every group of up to TILE rows through registers, the last
            // one short where `rows` is not a multiple of TILE (an A
            // panel's 6).
            for r0 in (0..rows).step_by(TILE) {
                // SAFETY: `T` and `T::Wide` are f32 (its format); the tile's
                // rows and panel positions are inside, as promised; the CPU has AVX.
                unsafe {
                    let from = src.offset(r0 as isize * row_step + p0 as isize) as *const f32;
                    f32_tile::transpose(from, row_step, TILE.min(rows - r0), dst.add(p0 * width + r0) as *mut f32, width)
                };
            }
            continue;
        }
        for r0 in (0..whole_rows).step_by(TILE) {
            let mut tile = [[T::Wide::default(); TILE]; TILE];
            for (r, row) in tile.iter_mut().enumerate() {
                for (p, x) in row.iter_mut().enumerate() {
                    *x = at(r0 + r, p0 + p);
                }
            }
            for p in 0..TILE {
                for (r, row) in tile.iter().enumerate() {
                    unsafe { *dst.add((p0 + p) * width + r0 + r) = row[p] };
                }
            }
        }
        for r in whole_rows..rows {
            for p in p0..p0 + TILE {
                unsafe { *dst.add(p * width + r) = at(r, p) };
            }
        }
    }
    for p in whole_len..len {
        for r in 0..rows {
            unsafe { *dst.add(p * width + r) = at(r, p) };
        }
    }
}

for_widest_vectors! {
    /// [`pack_contiguous_rows`] for this machine.
    fn pack_contiguous_rows_for = pack_contiguous_rows(src: *const T, step: isize, count: usize, len: usize, width: usize, out: *mut T::Wide)
}

/// [`pack`] of `count` rows that lie next to each other at each depth
/// position (`src[p * step + r]` is row `r` at position `p < len`): depth
/// position by depth position, each position's `count` elements copied,
/// widened, into the panels of `width` rows they belong to; the last
/// panel's missing rows are zeros.
///
/// # Safety
/// `src` holds `len` positions of `count` elements, `step` apart; `out`
/// holds `count.div_ceil(width) * width * len` wide elements.
#[inline(always)]
unsafe fn pack_contiguous_rows<T: Element>(src: *const T, step: isize, count: usize, len: usize, width: usize, out: *mut T::Wide) {
    for p in 0..len {
        // SAFETY (throughout): position `p`'s elements are inside `src`,
        // and each panel's row of them inside `out`, as promised.
        let row = unsafe { std::slice::from_raw_parts(src.offset(p as isize * step), count) };
        for (panel, chunk) in row.chunks(width).enumerate() {
            let dst = unsafe { std::slice::from_raw_parts_mut(out.add((panel * len + p) * width), width) };
            let (values, padding) = dst.split_at_mut(chunk.len());
            for (d, &x) in values.iter_mut().zip(chunk) {
                *d = x.operand();
            }
            padding.fill(T::Wide::default());
        }
    }
}

/// Packs rows `first..first + count` of `m` (depth positions
/// `depth..depth + len` of each) into panels of `width` rows, each panel
/// depth-major (`[p][r]`), the last one zero-padded to `width` rows,
/// widening each element.
///
/// # Safety
/// The block must be inside `m`'s allocation (of `T`s); `out` must hold
/// `count.div_ceil(width) * width * len` wide elements.
unsafe fn pack<T: Element>(m: Strided, first: usize, count: usize, depth: usize, len: usize, width: usize, out: *mut T::Wide) {
    let size = std::mem::size_of::<T>();
    if m.row_step == 1 {
        // The rows are contiguous at each depth position: read them in
        // that order, every panel's part of one position after the other,
        // so that the reads run along memory (a panel at a time, they
        // would stride over `len` positions, a page apart in a large B).
        // SAFETY: `count` consecutive elements at each depth position are
        // inside `m`; the panels, whole, inside `out`.
        unsafe { pack_contiguous_rows_for::<T>()(m.at(first, depth, size) as *const T, m.col_step, count, len, width, out) };
        return;
    }
    for (panel, start) in (0..count).step_by(width).enumerate() {
        let rows = width.min(count - start);
        // SAFETY: the panel lies inside `out`.
        let dst = unsafe { std::slice::from_raw_parts_mut(out.add(panel * width * len), width * len) };
        if rows < width {
            dst.fill(T::Wide::default());
        }
        if m.col_step == 1 {
            // Rows contiguous along the depth (a transposed weight): a
            // transpose, in tiles of TILE x TILE (in registers, compiled for
            // the machine's vectors), the edges element by element.
            let row_at = |r: usize, p: usize| m.at(first + start + r, depth + p, size) as *const T;
            // SAFETY: every tile's rows and depth positions lie inside `m`, and its panel positions inside `dst`.
            unsafe { transpose_tiles_for::<T>()(row_at(0, 0), m.row_step, rows, len, width, dst.as_mut_ptr()) };
            continue;
        }
        for r in 0..rows {
            let row = m.at(first + start + r, depth, size) as *const T;
            for (p, slot) in dst.iter_mut().skip(r).step_by(width).take(len).enumerate() {
                // SAFETY: depth position `p` of this row is inside `m`.
                *slot = unsafe { *row.offset(p as isize * m.col_step) }.operand();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A microkernel written in Rust with the compiled ones' contract, for
    /// testing the blocking and packing here without a compiler.
    unsafe extern "C" fn reference_micro(buffers: *const *mut u8, sizes: *const i64, _: i64, _: i64) {
        const MR: usize = 3;
        const NR: usize = 4;
        // SAFETY: the driver passes 4 buffers and 6 sizes (the contract).
        unsafe {
            let (a, b, c) = (*buffers as *const f32, *buffers.add(1) as *const f32, *buffers.add(2) as *mut f32);
            let s = std::slice::from_raw_parts(sizes, 6);
            let (kc, rs, cs, rows, cols, add) = (s[0] as usize, s[1] as isize, s[2] as isize, s[3] as usize, s[4] as usize, s[5] != 0);
            for r in 0..rows {
                for col in 0..cols {
                    let mut acc = 0.0;
                    for p in 0..kc {
                        acc += *a.add(p * MR + r) * *b.add(p * NR + col);
                    }
                    let at = c.offset(r as isize * rs + col as isize * cs);
                    *at = if add { *at + acc } else { acc };
                }
            }
        }
    }

    fn micro() -> Micro {
        Micro {
            entry: reference_micro,
            shape: Microkernel { dtype: DType::F32, rows: 3, cols: 4, lanes: 4 },
            blocking: Blocking { depth: 5, rows: 6, cols: 8 },
        }
    }

    /// bf16's rounding, branch-free, is `half`'s: every exponent with the
    /// low bits of the significand at and around the tie, and the
    /// infinities and NaNs.
    #[test]
    fn bf16_rounds_as_half_does() {
        let low = [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1_7fff, 0x1_8000, 0x1_8001, 0x7f_ffff];
        for sign in [0u32, 0x8000_0000] {
            for exponent in 0..=255u32 {
                for &bits in &low {
                    let x = f32::from_bits(sign | exponent << 23 | bits);
                    assert_eq!(<half::bf16 as Element>::narrow(x).to_bits(), half::bf16::from_f32(x).to_bits(), "{:#010x}", x.to_bits());
                }
            }
        }
    }

    /// bf16 products on the FMA path accumulate in a wide copy of C and
    /// round it into C: C's columns contiguous or not, the product adding
    /// to C or not (sums of small integers: exact in f32 and bf16).
    #[test]
    fn bf16_products_round_their_wide_copy_into_c() {
        let (m, n, k) = (UNPACKED_ROWS + 13, 11, 7);
        let bf = |x: f32| half::bf16::from_f32(x);
        let a: Vec<half::bf16> = (0..m * k).map(|i| bf((i % 5) as f32 - 2.0)).collect();
        let b: Vec<half::bf16> = (0..k * n).map(|i| bf((i % 3) as f32)).collect();
        for (col_step, accumulate) in [(1, false), (1, true), (2, false), (2, true)] {
            let mut c: Vec<half::bf16> = (0..m * n * col_step).map(|i| bf((i % 4) as f32)).collect();
            let before = c.clone();
            let p = Product {
                m,
                n,
                k,
                a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                b: Strided { ptr: b.as_ptr() as usize, row_step: n as isize, col_step: 1 },
                c: Strided { ptr: c.as_mut_ptr() as usize, row_step: (n * col_step) as isize, col_step: col_step as isize },
                accumulate,
            };
            // SAFETY: the matrices hold every element the steps reach.
            unsafe { multiply(p, DType::BF16, &micro(), 1, 0, None, None) };
            for i in 0..m {
                for j in 0..n {
                    let at = i * n * col_step + j * col_step;
                    let sum: f32 = (0..k).map(|q| a[i * k + q].to_f32() * b[q * n + j].to_f32()).sum();
                    let want = if accumulate { before[at].to_f32() + sum } else { sum };
                    assert_eq!(c[at].to_f32(), want, "column step {col_step}, adding {accumulate}, at ({i}, {j})");
                }
            }
        }
    }

    /// A product of few rows whose block of C outgrows twice the blocking's
    /// block of A runs its whole depth in one pass (see [`Split::depth`]),
    /// on one thread and two, with B packed at the call and before it
    /// (the weights' packing, which the pass's depth keys); more rows
    /// keep the blocking's depth.
    #[test]
    fn few_rows_with_a_wide_c_run_their_whole_depth_in_one_pass() {
        let micro = Micro { blocking: Blocking { depth: 5, rows: 12, cols: 64 }, ..micro() };
        for (m, n, k, threads, one_pass) in [(5, 70, 9, 1, true), (6, 70, 9, 2, true), (6, 130, 7, 2, true), (7, 70, 9, 2, false)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
            for packed_before in [false, true] {
                let mut c = vec![f32::NAN; m * n];
                let p = Product {
                    m,
                    n,
                    k,
                    a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                    b: Strided { ptr: b.as_ptr() as usize, row_step: n as isize, col_step: 1 },
                    c: Strided { ptr: c.as_mut_ptr() as usize, row_step: n as isize, col_step: 1 },
                    accumulate: false,
                };
                let split = Split::of(&p, &micro, threads, 0);
                let blocks = Blocks::new(&p, &micro, &split);
                assert_eq!(blocks.kc == k, one_pass, "{m}x{n}x{k} on {threads} threads");
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| {
                    // SAFETY: the matrices hold every element the steps reach; the packed B is this product's.
                    let packed = packed_before.then(|| unsafe { pack_b(p, DType::F32, &micro, threads, 0, false) }).flatten();
                    // Packed as the product reads it, so read, not packed again.
                    assert_eq!(packed.as_ref().and_then(|b| b.panels(split.nc, blocks.kc, blocks.packed_b_len(&p))).is_some(), packed_before);
                    // SAFETY: as above.
                    unsafe { multiply(p, DType::F32, &micro, threads, 0, None, packed.as_ref()) }
                });
                for i in 0..m {
                    for j in 0..n {
                        let want: f32 = (0..k).map(|q| a[i * k + q] * b[q * n + j]).sum();
                        assert_eq!(c[i * n + j], want, "{m}x{n}x{k} on {threads} threads, B packed before: {packed_before}, at ({i}, {j})");
                    }
                }
            }
        }
    }

    /// `c = a b` for row-major `a` and `b`, C at the given steps, against
    /// a plain triple loop, with every blocking edge crossed.
    #[test]
    fn blocked_products_match_the_definition() {
        for (m, n, k) in [(1, 1, 1), (7, 9, 11), (13, 17, 5), (6, 8, 10), (0, 3, 2), (4, 0, 2), (5, 3, 0), (1, 1100, 37), (4, 600, 3), (2, 5, 40)] {
            for transposed_c in [false, true] {
                for threads in [1, 2] {
                    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
                    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
                    let mut c = vec![f32::NAN; m * n];
                    let (row_step, col_step) = if transposed_c { (1, m as isize) } else { (n as isize, 1) };
                    let p = Product {
                        m,
                        n,
                        k,
                        a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                        b: Strided { ptr: b.as_ptr() as usize, row_step: n as isize, col_step: 1 },
                        c: Strided { ptr: c.as_mut_ptr() as usize, row_step, col_step },
                        accumulate: false,
                    };
                    let seen = std::sync::Mutex::new(vec![0u32; m * n]);
                    let count = |i: usize, rows: usize, j: usize, cols: usize| {
                        let mut s = seen.lock().unwrap();
                        for r in i..i + rows {
                            for q in j..j + cols {
                                s[r * n + q] += 1;
                            }
                        }
                    };
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    // SAFETY: the matrices hold every element the steps reach.
                    pool.install(|| unsafe { multiply(p, DType::F32, &micro(), threads, 0, Some(&count), None) });
                    for i in 0..m {
                        for j in 0..n {
                            let want: f32 = (0..k).map(|q| a[i * k + q] * b[q * n + j]).sum();
                            let got = c[(i as isize * row_step + j as isize * col_step) as usize];
                            assert_eq!(got, want, "{m}x{n}x{k} at ({i}, {j}), C transposed: {transposed_c}");
                        }
                    }
                    assert!(seen.into_inner().unwrap().iter().all(|&s| s == 1), "every tile finished once: {m}x{n}x{k}");
                }
            }
        }
    }

    /// Products of few rows (unpacked) with B stored either way (its
    /// columns contiguous, or its depth: a transposed weight), read where
    /// it lies and packed into column blocks, accumulating or not.
    #[test]
    fn unpacked_products_read_b_in_either_layout() {
        for (m, n, k) in [(1, 1300, 70), (3, 17, 33), (4, 513, 16)] {
            for b_transposed in [false, true] {
                for accumulate in [false, true] {
                    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
                    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
                    let mut c = vec![0.0f32; m * n];
                    let (row_step, col_step) = if b_transposed { (1, k as isize) } else { (n as isize, 1) };
                    let p = Product {
                        m,
                        n,
                        k,
                        a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                        b: Strided { ptr: b.as_ptr() as usize, row_step, col_step },
                        c: Strided { ptr: c.as_mut_ptr() as usize, row_step: n as isize, col_step: 1 },
                        accumulate,
                    };
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
                    // A weight's B, packed once into the blocks the product reads.
                    // SAFETY: B holds every element the steps reach.
                    let packed = unsafe { pack_b(p, DType::F32, &micro(), 2, 0, true) }.expect("a weight of a product of few rows is packed");
                    assert!(matches!(packing(&p, DType::F32, &micro(), 2, 0, true), Some(Packing::Rows)));
                    for b_packed in [None, Some(&packed)] {
                        c.fill(1.0);
                        // SAFETY: the matrices hold every element the steps reach; the packed B is this product's.
                        pool.install(|| unsafe { multiply(p, DType::F32, &micro(), 2, 0, None, b_packed) });
                        for i in 0..m {
                            for j in 0..n {
                                let b_at = |q: usize| if b_transposed { b[j * k + q] } else { b[q * n + j] };
                                let want: f32 = (0..k).map(|q| a[i * k + q] * b_at(q)).sum::<f32>() + if accumulate { 1.0 } else { 0.0 };
                                assert_eq!(c[i * n + j], want, "{m}x{n}x{k} at ({i}, {j}), B transposed: {b_transposed}, packed: {}", b_packed.is_some());
                            }
                        }
                    }
                }
            }
        }
    }
}

/// [`transpose_tiles`]' whole tiles of f32 in AVX registers: the
/// compiler's own code for the generic tile went through the stack
/// (stores then loads of parts of them, which the CPU cannot forward),
/// and a product's row-major A is packed this way for every product.
#[cfg(target_arch = "x86_64")]
mod f32_tile {
    use super::TILE;
    use std::arch::x86_64::*;

    /// The `rows` x 8 tile of f32 at `src` (rows `row_step` elements
    /// apart, `rows` at most 8) written transposed at `dst` (its rows
    /// `width` apart, `rows` elements each), a subnormal as a zero of its
    /// sign (as [`super::Element::operand`]).
    ///
    /// # Safety
    /// The tile's `rows` rows of 8 are inside `src`'s matrix and its 8
    /// transposed rows of `rows` inside `dst`'s; AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose(src: *const f32, row_step: isize, rows: usize, dst: *mut f32, width: usize) {
        const { assert!(TILE == 8) };
        // SAFETY: as the caller promised; a row past `rows` is not read.
        let row = |r: isize| if (r as usize) < rows { unsafe { _mm256_loadu_ps(src.offset(r * row_step)) } } else { _mm256_setzero_ps() };
        let (r0, r1, r2, r3, r4, r5, r6, r7) = (row(0), row(1), row(2), row(3), row(4), row(5), row(6), row(7));
        // Pairs of rows interleaved, then quarters: columns c and c + 4 of
        // four rows in each half, then the halves of two of those.
        let (t0, t1, t2, t3) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1), _mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        let (t4, t5, t6, t7) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5), _mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
        let (s0, s1) = (_mm256_shuffle_ps::<0x44>(t0, t2), _mm256_shuffle_ps::<0xEE>(t0, t2));
        let (s2, s3) = (_mm256_shuffle_ps::<0x44>(t1, t3), _mm256_shuffle_ps::<0xEE>(t1, t3));
        let (s4, s5) = (_mm256_shuffle_ps::<0x44>(t4, t6), _mm256_shuffle_ps::<0xEE>(t4, t6));
        let (s6, s7) = (_mm256_shuffle_ps::<0x44>(t5, t7), _mm256_shuffle_ps::<0xEE>(t5, t7));
        let columns = [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ];
        let sign = _mm256_set1_ps(-0.0);
        let smallest = _mm256_set1_ps(f32::MIN_POSITIVE);
        for (p, column) in columns.into_iter().enumerate() {
            // |x| below the smallest normal (nan compares false): its sign alone.
            let subnormal = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_andnot_ps(sign, column), smallest);
            let operand = _mm256_blendv_ps(column, _mm256_and_ps(column, sign), subnormal);
            // SAFETY: as the caller promised: `rows` elements of each transposed row.
            unsafe {
                if rows == TILE {
                    _mm256_storeu_ps(dst.add(p * width), operand);
                } else {
                    store_first(dst.add(p * width), operand, rows);
                }
            }
        }
    }

    /// The first `lanes` (fewer than 8) of `v` stored at `dst`, by 128-,
    /// 64- and 32-bit stores (a masked store is microcoded on AMD cores).
    ///
    /// # Safety
    /// `dst` holds `lanes` elements; AVX.
    #[target_feature(enable = "avx")]
    unsafe fn store_first(dst: *mut f32, v: __m256, lanes: usize) {
        let (low, high) = (_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        // SAFETY (each store): inside the `lanes` elements at `dst`.
        let (rest, at, left) = if lanes >= 4 {
            unsafe { _mm_storeu_ps(dst, low) };
            (high, unsafe { dst.add(4) }, lanes - 4)
        } else {
            (low, dst, lanes)
        };
        if left >= 2 {
            unsafe { _mm_storel_epi64(at as *mut __m128i, _mm_castps_si128(rest)) };
        }
        if left % 2 == 1 {
            let last = if left == 3 { _mm_movehl_ps(rest, rest) } else { rest };
            unsafe { _mm_store_ss(at.add(left - 1), last) };
        }
    }
}

#[cfg(test)]
mod transposing_pack {
    use super::*;

    /// Packing rows contiguous along the depth (a transposed weight)
    /// transposes them into panels, tiles and ragged edges alike; rows
    /// contiguous at each depth position are copied into the same places.
    #[test]
    fn packs_every_element_where_the_panel_wants_it() {
        // Panels of 32, 8, 6 (an A panel, narrower than a tile), 4 and 2 rows,
        // whole and ragged.
        for (n, k, depth, len, width) in [
            (37usize, 21usize, 3usize, 17usize, 32usize),
            (64, 64, 0, 64, 32),
            (5, 9, 1, 8, 8),
            (17, 29, 2, 25, 6),
            (12, 16, 0, 16, 6),
            (9, 10, 1, 9, 4),
            (7, 8, 0, 8, 4),
            (2, 16, 0, 16, 2),
        ] {
            let w: Vec<f32> = (0..n * k).map(|i| i as f32).collect();
            // The depth contiguous (a transposed weight, A) and the rows
            // contiguous (B), the same matrix.
            let depth_major: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
            let layouts = [(&w, k as isize, 1), (&depth_major, 1, n as isize)];
            for (values, row_step, col_step) in layouts {
                let m = Strided { ptr: values.as_ptr() as usize, row_step, col_step };
                let mut out = vec![f32::NAN; n.div_ceil(width) * width * len];
                // SAFETY: the block is inside `values`; `out` holds every panel.
                unsafe { pack::<f32>(m, 0, n, depth, len, width, out.as_mut_ptr()) };
                for r in 0..n.div_ceil(width) * width {
                    for p in 0..len {
                        let want = if r < n { w[r * k + depth + p] } else { 0.0 };
                        assert_eq!(out[(r / width) * width * len + p * width + r % width], want, "{n}x{k} rows {row_step} apart: row {r}, depth {p}");
                    }
                }
            }
        }
    }

    /// Packing reads a subnormal as a zero of its sign, in every layout
    /// (rows contiguous, depth contiguous, neither; whole transposed tiles
    /// and their edges), and keeps zeros, normals, infinities and nan as
    /// they are.
    #[test]
    fn packs_subnormals_as_zeros_of_their_sign() {
        let values = [1e-40f32, -1e-40, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, 0.0, -0.0, 1.5, f32::INFINITY, f32::NAN, -3e-39, -f32::NAN];
        let want = |x: f32| if x.is_subnormal() { 0.0f32.copysign(x) } else { x };
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let (n, k) = (values.len() * 2, 19);
        let w: Vec<f32> = (0..n * k).map(|i| values[i % values.len()]).collect();
        for (row_step, col_step, width) in
            [(k as isize, 1, 4), (k as isize, 1, 6), (k as isize, 1, 8), (k as isize, 1, 16), (1, n as isize, 4), (2 * k as isize, 2, 4)]
        {
            let rows = if row_step == 2 * k as isize { n / 2 } else { n };
            let m = Strided { ptr: w.as_ptr() as usize, row_step, col_step };
            let mut out = vec![f32::NAN; rows.div_ceil(width) * width * k];
            // SAFETY: every (row, depth) the steps reach is inside `w`; `out` holds every panel.
            unsafe { pack::<f32>(m, 0, rows, 0, k, width, out.as_mut_ptr()) };
            for r in 0..rows {
                for p in 0..k {
                    let x = w[(r as isize * row_step + p as isize * col_step) as usize];
                    let got = out[(r / width) * width * k + p * width + r % width];
                    assert!(same(got, want(x)), "steps ({row_step}, {col_step}), panels of {width}: row {r}, depth {p}: {got:e} for {x:e}");
                }
            }
        }
    }
}
