//! Products on bf16 dot-product instructions: AMX tiles (Intel's Advanced
//! Matrix Extensions, Sapphire Rapids and later), whose `tdpbf16ps`
//! multiplies a 16 x 32 tile of bf16 by a 32 x 16 one into 16 x 16 f32
//! accumulators, sixteen times the work per cycle of the AVX-512 FMA
//! units; or, on CPUs with AVX512_BF16 and no tiles (AMD Zen 4 and Zen 5),
//! `vdpbf16ps` in vector registers, two bf16 products per f32 lane and
//! instruction, twice the FMA path's work per instruction ([`Engine`]).
//!
//! **f32-grade results from bf16 tiles.** Each operand element is split
//! into bf16 parts whose sum is exactly the element ([`split_values`]: an
//! f32 is three parts of 8 significand bits and a sign, an f16 two, a bf16
//! one), and the product is the sum of the products of parts `i` of A and
//! `j` of B with `i + j <= 2` (from 0, [`terms`]): six for f32 by f32,
//! dropping the terms under about 2^-23 of `|a b|`: two units of f32
//! rounding per product, not per term of the sum. Each bf16 by bf16
//! product is exact in f32; the leading parts' product `(0, 0)` is
//! accumulated in one block of f32 sums and the smaller terms in another
//! (2^-8 of the result), added once at the end: the sum's rounding is that
//! of an f32 sum of the leading products. The vector engine takes bf16
//! operands only (one part, one term): split operands' several terms at
//! twice the work per instruction lose to the FMA path.
//!
//! Operands the parts cannot represent exactly (infinities, NaNs, values
//! under 2^-103 whose lowest part would be subnormal, which tiles read as
//! zero) send the product back to the FMA path; a subnormal is a zero of
//! its sign, as every product here reads it. Results under the smallest
//! normal are flushed to zero by the tiles and by `vdpbf16ps`.
//!
//! **Layouts.** B (a weight's, packed once; or split per call for a
//! product of many rows) is in panels of 32 columns, each panel its parts
//! one after another, each part its chunks of 32 depth positions, each
//! chunk two 16 x 32 tiles (pairs of depth positions side by side, as
//! `tdpbf16ps` and `vdpbf16ps` read them: a tile's row is one vector of
//! 16 columns' pairs). A is split per call into blocks of 32 rows laid
//! out the same way. One microkernel call keeps a 32 x 32 block of C
//! (in four tiles, or eight rows at a time in vector registers) over
//! every term that goes to one block of sums, for a pass of the depth
//! (its split A stays in the second level). Every tile is 64-byte
//! aligned: a misaligned tile load costs six times as much.
//!
//! The tiles are used where the CPU has AMX-BF16 and the OS grants the
//! process its tile state (Linux's `arch_prctl(ARCH_REQ_XCOMP_PERM)`), and
//! `NAX_AMX` is not `0`; else the vectors where the CPU has AVX512_BF16
//! and they outrun the FMA path (`Machine::fast_bf16_dots`: AMD's cores),
//! or where `NAX_DPBF16` is `1`; never where it is `0`.

use super::{Element, Epilogue, Format, LINE, Product, SCRATCH, Wide, bf16_nearest, parts as thread_parts, with_scratch};
use nax_contract::machine::{Feature, Machine};
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::OnceLock;

/// bf16 elements in one tile (16 rows of 32).
const TILE: usize = 512;
/// Depth positions of one tile row (and one chunk of the depth).
const CHUNK: usize = 32;
/// Rows or columns of C one microkernel call computes (2 x 2 tiles).
const BLOCK: usize = 32;
/// The fewest chunks of the depth in one pass.
const MIN_PASS_CHUNKS: usize = 8;
/// Bytes of split A one pass over the depth reads (the second level holds it).
const PASS_A_BYTES: usize = 3 << 19;
/// Bytes of one bf16 panel's B one step over the depth reads: it stays in
/// the first level (48 KiB on Sapphire Rapids) beside a block of A's step.
const STEP_B_BYTES: usize = 16 << 10;
/// Bytes of C (every row of a group of panels) an epilogue runs over at
/// once, after the group's last panel is written: in the second level
/// beside a pass's split A, in rows that vectorise (run per 32 x 32
/// block, its loops set up again for every two vectors, GPT-2's bf16
/// prefill was 1.2% slower on a Xeon with AMX).
const EPILOGUE_BYTES: usize = 128 << 10;
/// Products of fewer rows stay on the FMA path (a tile has 16 rows).
const MIN_ROWS: usize = 16;
/// Products of fewer rows whose B is not packed before the call stay on
/// the FMA path: packing B's parts is paid back over many rows.
const PACK_ROWS: usize = 64;
/// Values under this (2^-103) would have a subnormal lowest part.
const SMALLEST_SPLIT: f32 = 9.860761e-32;
/// Magnitudes (bits) from this one round to an infinite bf16.
const LARGEST_SPLIT: u32 = 0x7f7f_8000;

thread_local! {
    /// The split A of the products started on this thread.
    static SPLIT_A: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// The split B of the products started on this thread whose B is not
    /// packed before the call.
    static SPLIT_B: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The instructions bf16 dot products run on here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// AMX tiles (`tdpbf16ps`): operands of any element type, split into
    /// bf16 parts.
    Tiles,
    /// AVX512_BF16's `vdpbf16ps` in vector registers: bf16 operands.
    Vectors,
}

impl Engine {
    /// Whether this engine multiplies `T` matrices faster than the FMA
    /// path: every type on the tiles, bf16 alone on the vectors.
    fn takes<T: Element>(self) -> bool {
        T::TILE_PARTS > 0 && (self == Engine::Tiles || T::TILE_PARTS == 1)
    }

    /// The microkernel, and whether it needs the tile configuration.
    #[cfg(target_arch = "x86_64")]
    fn kernel(self) -> (TileKernel, bool) {
        match self {
            Engine::Tiles => (amx_kernel, true),
            Engine::Vectors => (vector_kernel, false),
        }
    }
}

/// The engine bf16 dot products run on here, decided once: the AMX tiles
/// where the CPU has AMX-TILE and AMX-BF16, the OS granted this process
/// the tile state, and `NAX_AMX` is not `0`; else `vdpbf16ps` where the
/// CPU has AVX512_BF16 and `NAX_DPBF16` is `1`, or is not `0` and they
/// outrun the FMA path here ([`Machine::fast_bf16_dots`]: AMD's cores;
/// on an Intel Xeon with its tiles hidden GPT-2's bf16 prefill took
/// 1.3-1.5 times as long on them as on the FMA path); else none.
pub(crate) fn engine() -> Option<Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    *ENGINE.get_or_init(|| {
        let set = |name: &str| std::env::var_os(name).map(|v| v != "0");
        if set("NAX_AMX") != Some(false) && Machine::host().amx && os_grants_tiles() {
            Some(Engine::Tiles)
        } else if cpu_has_vector_dot_products() && set("NAX_DPBF16").unwrap_or(Machine::host().fast_bf16_dots) {
            Some(Engine::Vectors)
        } else {
            None
        }
    })
}

/// Whether products run on AMX tiles here (see [`engine`]).
pub(crate) fn tiles() -> bool {
    engine() == Some(Engine::Tiles)
}

/// Whether this machine's engine takes products of `T` matrices.
pub(crate) fn takes<T: Element>() -> bool {
    engine().is_some_and(Engine::takes::<T>)
}

/// Whether this CPU runs [`vector_kernel`]: it has AVX-512 F and AVX512_BF16.
fn cpu_has_vector_dot_products() -> bool {
    let host = Machine::host();
    host.has(Feature::Avx512f) && host.has(Feature::Avx512bf16)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn os_grants_tiles() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: the request only asks the kernel for permission to use the
    // tile state; it reads and writes no memory of ours.
    unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn os_grants_tiles() -> bool {
    false
}

/// Whether `p`, of `T` matrices, runs on this machine's engine (when its
/// operands split): f32 (three parts, six terms) only up to
/// [`MAX_F32_DEPTH`] and [`MAX_F32_ROWS`].
pub(super) fn suits<T: Element>(p: &Product) -> bool {
    p.m >= MIN_ROWS && p.n > 0 && p.k > 0 && (T::TILE_PARTS < 3 || (p.k <= MAX_F32_DEPTH && p.m <= MAX_F32_ROWS)) && takes::<T>()
}

/// The deepest f32 product the tiles take: deeper, each row block's three
/// parts of split A outgrow a pass ([`PASS_A_BYTES`] at 4 row blocks)
/// and the six terms lose to the FMA path (GPT-2's `[128 3072] x [3072
/// 768]`, Xeon with AMX: 3.1 ms on the tiles, 2.4 ms on the FMA path; at
/// depth 768 the tiles are as fast or faster, the tied head 1.3x).
const MAX_F32_DEPTH: usize = 2048;

/// The most rows of an f32 product the tiles take: with more, the FMA
/// path's blocks reuse each panel of B over enough rows that the six
/// terms lose (Xeon with AMX, 2 threads, interleaved: `block_train`'s
/// 1024-row products 12.5 ms on the tiles, 7.3 ms on the FMA path for
/// `gelu(h) @ w_2`, the step 127 -> 113 ms; `block`, `mlp` and GPT-2's
/// 128-row prefill unchanged within the noise).
const MAX_F32_ROWS: usize = 256;

/// Whether `p` may split its B for the tiles at the call (no B packed
/// before): enough rows to pay for it, and operands of at most two parts
/// (an f32 B's three parts cost more to split at every call than its six
/// terms save over the FMA path; a weight's are split once).
pub(super) fn packs_at_call<T: Element>(p: &Product) -> bool {
    p.m >= PACK_ROWS && T::TILE_PARTS < 3
}

/// Splits `values` into bf16 parts (bits) whose sum is exactly each value:
/// the value rounded to bf16, the rest rounded to bf16, and the rest of
/// that (which has at most 8 significant bits: the parts hold 9 bits each
/// with their signs), into `parts[0]`, `[1]` and `[2]`. False where the
/// tiles would not multiply a value's parts exactly: not finite, rounding
/// to an infinite bf16, or under 2^-103 (the last part would be
/// subnormal). A subnormal is a zero of its sign. Branch-free, so that it
/// runs in vectors.
#[inline(always)]
fn split_values(values: &[f32], parts: &mut [Vec<u16>; 3]) -> bool {
    let [leading, middle, last] = parts;
    let round = |bits: u32| bf16_nearest(bits) << 16;
    let mut exact = true;
    for (((&x, leading), middle), last) in values.iter().zip(leading.iter_mut()).zip(middle.iter_mut()).zip(last.iter_mut()) {
        let magnitude = x.to_bits() & 0x7fff_ffff;
        let subnormal = magnitude < f32::MIN_POSITIVE.to_bits();
        exact &= magnitude < LARGEST_SPLIT && (subnormal || magnitude >= SMALLEST_SPLIT.to_bits());
        let x = if subnormal { f32::from_bits(x.to_bits() & 0x8000_0000) } else { x };
        let first = round(x.to_bits());
        let rest = x - f32::from_bits(first);
        let second = round(rest.to_bits());
        let third = (rest - f32::from_bits(second)).to_bits();
        (*leading, *middle, *last) = ((first >> 16) as u16, (second >> 16) as u16, (third >> 16) as u16);
    }
    exact
}

/// [`split_values`] compiled for AVX-512 (every CPU with AMX has it).
///
/// # Safety
/// The CPU has AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn split_values_avx512(values: &[f32], parts: &mut [Vec<u16>; 3]) -> bool {
    split_values(values, parts)
}

/// Copies bf16 bits for the tiles, a subnormal as a zero of its sign; false
/// where one is not finite (the tiles' one part of a bf16 is the bf16).
#[inline(always)]
fn copy_bf16_values(from: &[u16], to: &mut [u16]) -> bool {
    let mut finite = true;
    for (&bits, out) in from.iter().zip(to) {
        let exponent = bits & 0x7f80;
        finite &= exponent != 0x7f80;
        *out = if exponent == 0 { bits & 0x8000 } else { bits };
    }
    finite
}

/// [`copy_bf16_values`] compiled for AVX-512.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn copy_bf16_avx512(from: &[u16], to: &mut [u16]) -> bool {
    copy_bf16_values(from, to)
}

/// Whether this CPU moves bf16 values in 64-byte vectors: AVX-512 BW and VL.
fn wide_bf16_moves() -> bool {
    let host = Machine::host();
    host.has(Feature::Avx512bw) && host.has(Feature::Avx512vl)
}

/// [`copy_bf16_values`] in the widest vectors this CPU has.
fn copy_bf16(from: &[u16], to: &mut [u16]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if wide_bf16_moves() {
        // SAFETY: the CPU has the features.
        return unsafe { copy_bf16_avx512(from, to) };
    }
    copy_bf16_values(from, to)
}

/// [`split_values`] in the widest vectors this CPU has.
fn split(values: &[f32], parts: &mut [Vec<u16>; 3]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if wide_bf16_moves() {
        // SAFETY: the CPU has the features.
        return unsafe { split_values_avx512(values, parts) };
    }
    split_values(values, parts)
}

/// The products of parts the tiles sum: `(i, j)` is part `i` of A times
/// part `j` of B, for `i + j <= 2`, each operand of `parts` parts; the
/// leading parts' product `(0, 0)` last.
fn terms(parts: usize) -> Vec<(usize, usize)> {
    let mut terms: Vec<(usize, usize)> = (0..parts).flat_map(|i| (0..parts).map(move |j| (i, j))).filter(|&(i, j)| i + j <= 2).collect();
    terms.sort_by_key(|&(i, j)| std::cmp::Reverse(i + j));
    terms
}

/// The parts of an operand's block (of 32 rows of A or 32 columns of B)
/// one after another, each `chunks` chunks of two tiles.
fn block_len(parts: usize, chunks: usize) -> usize {
    parts * chunks * 2 * TILE
}

/// B split and laid out for the tiles, packed once for a weight: each
/// panel of 32 columns its parts one after another, each part its chunks
/// of the depth, each chunk two 16 x 32 tiles of 16 columns (pairs of
/// depth positions side by side, as `tdpbf16ps` reads them).
pub(crate) struct TileB {
    words: Vec<u64>,
    k: usize,
    n: usize,
    parts: usize,
}

impl TileB {
    fn address(&self) -> usize {
        (self.words.as_ptr() as usize).div_ceil(LINE) * LINE
    }

    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Whether this is `p`'s B, for `T` matrices.
    fn fits<T: Element>(&self, p: &Product) -> bool {
        self.k == p.k && self.n == p.n && self.parts == T::TILE_PARTS
    }
}

/// `p`'s B split for the tiles (`None` where an element does not split),
/// packed once (a weight's), its panels split in parallel.
///
/// # Safety
/// B's elements, `T`s, are inside its allocation.
pub(super) unsafe fn pack_b<T: Element>(p: &Product) -> Option<TileB> {
    let len = b_len::<T>(p);
    let mut words = vec![0u64; (len * 2).div_ceil(8) + LINE / 8];
    let address = (words.as_mut_ptr() as usize).div_ceil(LINE) * LINE;
    // SAFETY: the buffer holds `len` bf16s past `address`; B as the caller promised.
    let split = unsafe { split_b::<T>(p, address, true) };
    split.then_some(TileB { words, k: p.k, n: p.n, parts: T::TILE_PARTS })
}

/// The bf16s of `p`'s B split for the tiles: a panel of [`block_len`] per
/// 32 columns.
fn b_len<T: Element>(p: &Product) -> usize {
    p.n.div_ceil(BLOCK) * block_len(T::TILE_PARTS, p.k.div_ceil(CHUNK))
}

/// Splits `p`'s B for the tiles at `out`: each panel of 32 columns its
/// parts one after another, each part its chunks of the depth, each chunk
/// two 16 x 32 tiles of 16 columns (pairs of depth positions side by side,
/// as `tdpbf16ps` reads them); each row of each panel split once (a bf16's
/// one part is its own bits, copied). Panels in parallel where `parallel`.
/// False where an element does not split.
///
/// # Safety
/// B's elements, `T`s, are inside its allocation; `out` holds
/// [`b_len`] bf16s, 64-byte aligned.
unsafe fn split_b<T: Element>(p: &Product, out: usize, parallel: bool) -> bool {
    let parts = T::TILE_PARTS;
    let chunks = p.k.div_ceil(CHUNK);
    let panel_len = block_len(parts, chunks);
    // SAFETY: as the caller promised.
    let all = unsafe { std::slice::from_raw_parts_mut(out as *mut u16, b_len::<T>(p)) };
    let size = std::mem::size_of::<T>();
    // Where part `part` of (k, c) of a panel goes.
    let position = |part: usize, k: usize, c: usize| (part * chunks + k / CHUNK) * 2 * TILE + k % CHUNK / 2 * 32 + k % 2 + c / 16 * TILE + c % 16 * 2;
    let place = |out: &mut [u16], part: usize, k: usize, bits: &[u16]| {
        for (c, &bits) in bits.iter().enumerate() {
            out[position(part, k, c)] = bits;
        }
    };
    let split_panel = |(panel, out): (usize, &mut [u16])| {
        out.fill(0);
        let first = panel * BLOCK;
        let cols = BLOCK.min(p.n - first);
        if T::FORMAT == Format::BF16 && p.b.row_step == 1 {
            // Each column's depth is contiguous (a transposed B: attention's
            // keys): copied by runs of a chunk.
            let mut kept = [0u16; CHUNK];
            return (0..cols).all(|c| {
                (0..chunks).all(|chunk| {
                    let depth = CHUNK.min(p.k - chunk * CHUNK);
                    // SAFETY: the column's `depth` bf16s from (chunk * CHUNK, first + c) are inside B, as the caller promised.
                    let run = unsafe { std::slice::from_raw_parts(p.b.at(chunk * CHUNK, first + c, size) as *const u16, depth) };
                    let copied = copy_bf16(run, &mut kept[..depth]);
                    for (k, &bits) in kept[..depth].iter().enumerate() {
                        out[position(0, chunk * CHUNK + k, c)] = bits;
                    }
                    copied
                })
            });
        }
        if T::FORMAT == Format::BF16 {
            let (mut bits, mut kept) = ([0u16; BLOCK], [0u16; BLOCK]);
            return (0..p.k).all(|k| {
                for (c, bits) in bits[..cols].iter_mut().enumerate() {
                    // SAFETY: (k, first + c) is inside B, as the caller promised.
                    *bits = unsafe { *(p.b.at(k, first + c, size) as *const u16) };
                }
                let copied = copy_bf16(&bits[..cols], &mut kept[..cols]);
                place(out, 0, k, &kept[..cols]);
                copied
            });
        }
        let mut values = vec![0.0f32; cols];
        let mut row = [vec![0u16; cols], vec![0u16; cols], vec![0u16; cols]];
        (0..p.k).all(|k| {
            for (c, value) in values.iter_mut().enumerate() {
                // SAFETY: (k, first + c) is inside B, as the caller promised.
                *value = unsafe { *(p.b.at(k, first + c, size) as *const T) }.widen().to_f32();
            }
            let split = split(&values, &mut row);
            for (part, bits) in row[..parts].iter().enumerate() {
                place(out, part, k, bits);
            }
            split
        })
    };
    if parallel { all.par_chunks_mut(panel_len).enumerate().all(split_panel) } else { all.chunks_mut(panel_len).enumerate().all(split_panel) }
}

/// Splits `p`'s A for the tiles at `out`: each block of 32 rows its parts
/// one after another, each part its chunks of the depth, each chunk two
/// 16 x 32 tiles of 16 rows. False where an element does not split.
///
/// # Safety
/// A's elements, `T`s, are inside its allocation; `out` holds
/// `p.m.div_ceil(BLOCK)` blocks of [`block_len`], 64-byte aligned.
unsafe fn split_a<T: Element>(p: &Product, out: usize, threads: usize) -> bool {
    let (parts, chunks) = (T::TILE_PARTS, p.k.div_ceil(CHUNK));
    let len = block_len(parts, chunks);
    let blocks = p.m.div_ceil(BLOCK);
    // SAFETY: as the caller promised.
    let all = unsafe { std::slice::from_raw_parts_mut(out as *mut u16, blocks * len) };
    let size = std::mem::size_of::<T>();
    if T::FORMAT == Format::BF16 && p.a.col_step == 1 {
        // One part, the element's own bits: each row's runs of 32 copied
        // where the tiles want them.
        let copy_block = |(block, out): (usize, &mut [u16])| {
            out.fill(0);
            (0..BLOCK.min(p.m - block * BLOCK)).all(|r| {
                // SAFETY: the row's `k` contiguous bf16s are inside A, as the caller promised.
                let row = unsafe { std::slice::from_raw_parts(p.a.at(block * BLOCK + r, 0, size) as *const u16, p.k) };
                row.chunks(CHUNK).enumerate().all(|(chunk, run)| {
                    let at = (chunk * 2 + r / 16) * TILE + r % 16 * CHUNK;
                    copy_bf16(run, &mut out[at..at + run.len()])
                })
            })
        };
        return if threads > 1 { all.par_chunks_mut(len).enumerate().all(copy_block) } else { all.chunks_mut(len).enumerate().all(copy_block) };
    }
    let split_block = |(block, out): (usize, &mut [u16])| {
        out.fill(0);
        let mut values = vec![0.0f32; p.k];
        let mut row = [vec![0u16; p.k], vec![0u16; p.k], vec![0u16; p.k]];
        for r in 0..BLOCK.min(p.m - block * BLOCK) {
            for (k, value) in values.iter_mut().enumerate() {
                // SAFETY: (row, k) is inside A, as the caller promised.
                *value = unsafe { *(p.a.at(block * BLOCK + r, k, size) as *const T) }.widen().to_f32();
            }
            if !split(&values, &mut row) {
                return false;
            }
            for (i, part) in row[..parts].iter().enumerate() {
                for (chunk, run) in part.chunks(CHUNK).enumerate() {
                    let at = ((i * chunks + chunk) * 2 + r / 16) * TILE + r % 16 * CHUNK;
                    out[at..at + run.len()].copy_from_slice(run);
                }
            }
        }
        true
    };
    if threads > 1 { all.par_chunks_mut(len).enumerate().all(split_block) } else { all.chunks_mut(len).enumerate().all(split_block) }
}

/// A microkernel: the sum, over `segments` (the addresses of split A's and
/// B's first chunks), of `chunks` chunks of the depth of the 32 x 32 block
/// of C, added to the f32 block at `c` (32 x 32, rows 128 bytes apart) or,
/// with `load` false, replacing it. One call runs every term that goes to
/// one block of sums: the accumulators stay in the tiles. `ahead` names
/// the lines of B the caller will read next, for the kernel to ask for
/// while it computes.
pub(super) type TileKernel = unsafe fn(segments: &[[usize; 2]], chunks: usize, c: usize, load: bool, ahead: Ahead);

/// Lines of memory a microkernel call asks the second-level cache for
/// while it computes: after each chunk of each segment, `lines` lines of
/// 64 bytes from `address` on, `address` then moving on by `advance`
/// bytes (by the lines asked for, to walk a span of memory; by a chunk,
/// to ask for part of each chunk of the next step). A prefetch never
/// faults: the lines may lie past the end of B.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Ahead {
    pub address: usize,
    pub lines: usize,
    pub advance: usize,
}

/// The microkernel on the AMX tiles: C in tiles 0 to 3, A's two tiles in 4
/// and 5, B's in 6 and 7; between a chunk's loads and products, the
/// `ahead` lines are asked for into the second level (`prefetcht1`): B
/// streams from memory, and a tile load that misses the second level
/// holds up the products that wait for it (on a Xeon with AMX, GPT-2's
/// bf16 prefill took 0.87 of the time, its f32 prefill 0.93; asking two
/// or three steps ahead was no faster, nor asking for C's lines before
/// a block is written). The tiles must be configured ([`configure`]).
///
/// # Safety
/// Each segment's `a` and `b` hold `chunks` chunks (2 KiB each), `c` a 4
/// KiB block, all 64-byte aligned; the tiles are configured.
#[cfg(target_arch = "x86_64")]
unsafe fn amx_kernel(segments: &[[usize; 2]], chunks: usize, c: usize, load: bool, ahead: Ahead) {
    if segments.is_empty() || chunks == 0 {
        return;
    }
    // SAFETY: as the caller promised. The tiles are not the compiler's:
    // they keep their values from one statement to the next.
    unsafe {
        if load {
            std::arch::asm!(
                "tileloadd tmm0, [{c} + {row}]",
                "tileloadd tmm1, [{c} + {row} + 64]",
                "tileloadd tmm2, [{c} + {row} + 2048]",
                "tileloadd tmm3, [{c} + {row} + 2112]",
                c = in(reg) c,
                row = in(reg) 128usize,
                options(nostack, readonly),
            );
        } else {
            std::arch::asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
        }
        std::arch::asm!(
            "5:",
            "mov {a}, [{segment}]",
            "mov {b}, [{segment} + 8]",
            "mov {left}, {chunks}",
            "4:",
            "tileloadd tmm4, [{a} + {line}]",
            "tileloadd tmm6, [{b} + {line}]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tileloadd tmm7, [{b} + {line} + 1024]",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tileloadd tmm5, [{a} + {line} + 1024]",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "mov {n}, {lines}",
            "test {n}, {n}",
            "jz 7f",
            "mov {line_ahead}, {ahead}",
            "6:",
            "prefetcht1 [{line_ahead}]",
            "add {line_ahead}, 64",
            "dec {n}",
            "jnz 6b",
            "add {ahead}, {advance}",
            "7:",
            "add {a}, 2048",
            "add {b}, 2048",
            "dec {left}",
            "jnz 4b",
            "add {segment}, 16",
            "dec {segments}",
            "jnz 5b",
            line = in(reg) 64usize,
            chunks = in(reg) chunks,
            lines = in(reg) ahead.lines,
            advance = in(reg) ahead.advance,
            ahead = inout(reg) ahead.address => _,
            line_ahead = out(reg) _,
            segment = inout(reg) segments.as_ptr() => _,
            segments = inout(reg) segments.len() => _,
            a = out(reg) _,
            b = out(reg) _,
            left = out(reg) _,
            n = out(reg) _,
            options(nostack, readonly),
        );
        std::arch::asm!(
            "tilestored [{c} + {row}], tmm0",
            "tilestored [{c} + {row} + 64], tmm1",
            "tilestored [{c} + {row} + 2048], tmm2",
            "tilestored [{c} + {row} + 2112], tmm3",
            c = in(reg) c,
            row = in(reg) 128usize,
            options(nostack),
        );
    }
}

/// The microkernel on `vdpbf16ps`: the 32 x 32 block of C eight rows at
/// a time, each row two vectors of 16 sums; for each pair of depth
/// positions, B's two rows of the chunk's tiles are loaded once and each
/// row's pair of A broadcast to every lane. It asks for the lines of B one
/// call further on itself, into the first level (tuned on AMD Zen 4,
/// where the `ahead` lines were not measured), and leaves `_ahead` alone.
///
/// # Safety
/// As [`amx_kernel`]'s; the CPU has AVX-512 F and AVX512_BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn vector_kernel(segments: &[[usize; 2]], chunks: usize, c: usize, load: bool, _ahead: Ahead) {
    use std::arch::x86_64::{
        __m512, __m512bh, __m512i, _MM_HINT_T0, _mm_prefetch, _mm512_dpbf16_ps, _mm512_load_ps, _mm512_load_si512, _mm512_set1_epi32, _mm512_setzero_ps,
        _mm512_store_ps,
    };
    /// Rows of C in registers at once: 16 vectors of sums.
    const ROWS: usize = 8;
    /// Pairs of depth positions in a tile's row (as i32s: a chunk's two
    /// tiles are [`TILE`] of them).
    const PAIRS: usize = CHUNK / 2;
    let sums = c as *mut f32;
    // SAFETY: the two types are 64 bytes of any bits.
    let as_bh = |v: __m512i| unsafe { std::mem::transmute::<__m512i, __m512bh>(v) };
    for first in (0..BLOCK).step_by(ROWS) {
        // SAFETY (the block): as the caller promised, the block of C, and
        // every segment's chunks, lie inside their buffers, 64-byte aligned.
        unsafe {
            let mut acc: [[__m512; 2]; ROWS] = [[_mm512_setzero_ps(); 2]; ROWS];
            if load {
                for (r, acc) in acc.iter_mut().enumerate() {
                    let row = sums.add((first + r) * BLOCK);
                    *acc = [_mm512_load_ps(row), _mm512_load_ps(row.add(16))];
                }
            }
            for &[a, b] in segments {
                // This group's rows in the chunks' tiles of 16 rows (pairs as i32s).
                let a = (a as *const i32).add(first / 16 * TILE / 2 + first % 16 * PAIRS);
                let b = b as *const i32;
                for chunk in 0..chunks {
                    let (a, b) = (a.add(chunk * TILE), b.add(chunk * TILE));
                    for pair in 0..PAIRS {
                        if first == 0 {
                            // The first rows ask for the lines of B one call
                            // further on (the next step over the depth, most
                            // often from memory); a prefetch never faults.
                            let ahead = b.wrapping_add(chunks * TILE + pair * 16) as *const i8;
                            _mm_prefetch::<_MM_HINT_T0>(ahead);
                            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(2 * TILE));
                        }
                        let left = as_bh(_mm512_load_si512(b.add(pair * 16) as *const __m512i));
                        let right = as_bh(_mm512_load_si512(b.add(TILE / 2 + pair * 16) as *const __m512i));
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let x = as_bh(_mm512_set1_epi32(*a.add(r * PAIRS + pair)));
                            acc[0] = _mm512_dpbf16_ps(acc[0], x, left);
                            acc[1] = _mm512_dpbf16_ps(acc[1], x, right);
                        }
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let row = sums.add((first + r) * BLOCK);
                _mm512_store_ps(row, acc[0]);
                _mm512_store_ps(row.add(16), acc[1]);
            }
        }
    }
}

/// Loads the tile configuration the microkernel uses: eight tiles of 16
/// rows of 64 bytes.
///
/// # Safety
/// The OS granted the tile state ([`available`]).
#[cfg(target_arch = "x86_64")]
unsafe fn configure() {
    #[repr(C, align(64))]
    struct Config([u8; 64]);
    let mut config = Config([0; 64]);
    config.0[0] = 1;
    for tile in 0..8 {
        config.0[16 + 2 * tile] = 64;
        config.0[48 + tile] = 16;
    }
    // SAFETY: a valid palette-1 configuration, as the caller promised.
    unsafe { std::arch::asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly)) };
}

/// Returns the tiles to their initial state (cheap to save on a switch).
///
/// # Safety
/// The OS granted the tile state.
#[cfg(target_arch = "x86_64")]
unsafe fn release() {
    // SAFETY: as the caller promised.
    unsafe { std::arch::asm!("tilerelease", options(nostack, nomem)) };
}

/// Runs `p` on this machine's engine with B split in `packed` (or split
/// here), `threads` parts of whole panels of columns when its work
/// reaches `work`; false (C untouched) where an operand does not split.
///
/// # Safety
/// As [`super::multiply`]; the engine [`takes`] `T`.
pub(super) unsafe fn multiply<T: Element>(p: Product, packed: Option<&TileB>, threads: usize, work: usize, epilogue: Option<Epilogue<'_>>) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(engine) = engine() {
        let (kernel, tiles) = engine.kernel();
        // SAFETY: as the caller promised; the engine is this machine's.
        return unsafe { multiply_with::<T>(p, packed, threads, work, epilogue, kernel, tiles) };
    }
    let _ = (p, packed, threads, work, epilogue);
    false
}

/// [`multiply`] with the microkernel `kernel` (`tiles`: the AMX one,
/// which needs the tile configuration).
///
/// # Safety
/// As [`multiply`]; with `tiles`, the tiles are [`available`].
pub(super) unsafe fn multiply_with<T: Element>(
    p: Product,
    packed: Option<&TileB>,
    threads: usize,
    work: usize,
    epilogue: Option<Epilogue<'_>>,
    kernel: TileKernel,
    tiles: bool,
) -> bool {
    // The product on B split for the tiles at `b`.
    let on_split_b = |b: usize| {
        let a_len = p.m.div_ceil(BLOCK) * block_len(T::TILE_PARTS, p.k.div_ceil(CHUNK));
        with_scratch(&SPLIT_A, a_len * 2, |a| {
            // SAFETY: the scratch holds the split A, aligned.
            if !unsafe { split_a::<T>(&p, a, threads) } {
                return false;
            }
            let panels = p.n.div_ceil(BLOCK);
            let parts = thread_parts(&p, threads, work).min(panels);
            let chunk = panels.div_ceil(parts);
            let run = |part: usize| {
                let first = part * chunk;
                let count = chunk.min(panels - first);
                // SAFETY: the split operands are this product's; the part's
                // panels are inside B and C.
                unsafe { run_part::<T>(&p, a, b, first, count, epilogue, kernel, tiles) };
            };
            if parts > 1 {
                (0..panels.div_ceil(chunk)).into_par_iter().for_each(run);
            } else {
                run(0);
            }
            true
        })
    };
    match packed {
        Some(b) if b.fits::<T>(&p) => on_split_b(b.address()),
        Some(_) => false,
        // B split at the call, into this thread's scratch: large enough to
        // split in parallel only where the product is split into parts.
        None => with_scratch(&SPLIT_B, b_len::<T>(&p) * 2, |b| {
            // SAFETY: the scratch holds the split B, aligned; B as the caller promised.
            let split = unsafe { split_b::<T>(&p, b, thread_parts(&p, threads, work) > 1) };
            split && on_split_b(b)
        }),
    }
}

/// One part of a tile product: panels `first..first + count` of C. The
/// depth runs in passes whose split A stays in the second level; in each,
/// every panel's every block of 32 rows runs each term over the pass's
/// chunks, the leading parts' product into one f32 block of scratch and
/// the smaller terms into another (so that the sum's rounding is that of
/// the leading products alone, whatever the order of the passes). After
/// the last pass a panel's blocks are written to C (their sum); the
/// epilogue runs over groups of panels (every row, [`EPILOGUE_BYTES`] of
/// C at most), after each group's last panel.
///
/// # Safety
/// `a` and `b` are `p`'s split operands; the panels are `p`'s.
#[allow(clippy::too_many_arguments)]
unsafe fn run_part<T: Element>(p: &Product, a: usize, b: usize, first: usize, count: usize, epilogue: Option<Epilogue<'_>>, kernel: TileKernel, tiles: bool) {
    let parts = T::TILE_PARTS;
    let terms = terms(parts);
    // The terms before the leading parts' product `(0, 0)`, the last.
    let smaller_terms = terms.len() - 1;
    let chunks = p.k.div_ceil(CHUNK);
    let blocks = p.m.div_ceil(BLOCK);
    // Bytes of one block of split A, and of one panel of split B.
    let block_bytes = block_len(parts, chunks) * 2;
    let chunk_bytes = 2 * TILE * 2;
    let pass_chunks = (PASS_A_BYTES / (blocks * parts * chunk_bytes)).max(MIN_PASS_CHUNKS);
    let passes = chunks.div_ceil(pass_chunks);
    // Within a pass, a bf16 panel's depth in steps whose B stays in the
    // first level while every block of A runs over it (GPT-2's bf16
    // prefill, Xeon with AMX: 5% faster). Operands of several parts run
    // their whole pass at once: their sums, loaded and stored at every
    // step, cost more than the steps save (its f32 prefill: 8% slower).
    let step_chunks = if parts == 1 { STEP_B_BYTES / chunk_bytes } else { chunks };
    // Each block's two sums (leading, smaller), for one panel, or for every
    // panel when the depth takes passes.
    let scratch_panels = if passes == 1 { 1 } else { count };
    let sums_bytes = BLOCK * BLOCK * 4;
    let write_block = write_block_for::<T>();
    let group = (EPILOGUE_BYTES / (p.m * BLOCK * std::mem::size_of::<T>()).max(1)).max(1);
    with_scratch(&SCRATCH, scratch_panels * blocks * 2 * sums_bytes, |c| {
        #[cfg(target_arch = "x86_64")]
        if tiles {
            // SAFETY: the caller promised the tile state.
            unsafe { configure() };
        }
        for pass in 0..passes {
            let (start, end) = (pass * pass_chunks, ((pass + 1) * pass_chunks).min(chunks));
            for panel in 0..count {
                let c_panel = c + if passes == 1 { 0 } else { panel * blocks * 2 * sums_bytes };
                let b_panel = b + (first + panel) * block_bytes;
                for step in (start..end).step_by(step_chunks) {
                    let step_end = (step + step_chunks).min(end);
                    for block in 0..blocks {
                        let sums = c_panel + block * 2 * sums_bytes;
                        let segment = |&(i, j): &(usize, usize)| {
                            [a + block * block_bytes + (i * chunks + step) * chunk_bytes, b_panel + (j * chunks + step) * chunk_bytes]
                        };
                        // The smaller terms' segments, on the stack (at most
                        // five: this runs for every block of every panel).
                        let mut smaller = [[0usize; 2]; 5];
                        smaller.iter_mut().zip(&terms[..smaller_terms]).for_each(|(slot, term)| *slot = segment(term));
                        // This block's share of the B the next step reads
                        // (the panel's next step, or the next panel's first):
                        // for one part, its share of each chunk's lines, as
                        // the leading product reads each chunk (on a Xeon
                        // with AMX, GPT-2's bf16 prefill took 0.95 of the
                        // time of a span of whole chunks per block); for
                        // split parts, a span of the next panel's whole
                        // block (the smaller terms' walk: 0.90 of the time of
                        // a share of each chunk for each part). A split
                        // operand's parts lie apart when the depth takes
                        // passes: those are left to the hardware.
                        let (leading_ahead, smaller_ahead) = if parts == 1 {
                            let next = if step_end < end { b_panel + step_end * chunk_bytes } else { b_panel + block_bytes + start * chunk_bytes };
                            let lines = (chunk_bytes / LINE).div_ceil(blocks);
                            (Ahead { address: next + block * lines * LINE % chunk_bytes, lines, advance: chunk_bytes }, Ahead::default())
                        } else if passes == 1 {
                            let share = block_bytes / blocks;
                            let lines = share.div_ceil(LINE * smaller_terms * (step_end - step));
                            (Ahead::default(), Ahead { address: b_panel + block_bytes + block * share, lines, advance: lines * LINE })
                        } else {
                            (Ahead::default(), Ahead::default())
                        };
                        // SAFETY: the chunks are inside the split operands; the sums inside the scratch.
                        unsafe {
                            kernel(&smaller[..smaller_terms], step_end - step, sums + sums_bytes, step > 0, smaller_ahead);
                            kernel(&[segment(&(0, 0))], step_end - step, sums, step > 0, leading_ahead);
                        }
                    }
                }
                if pass + 1 == passes {
                    let j = (first + panel) * BLOCK;
                    let cols = BLOCK.min(p.n - j);
                    for block in 0..blocks {
                        let i = block * BLOCK;
                        let rows = BLOCK.min(p.m - i);
                        let leading = (c_panel + block * 2 * sums_bytes) as *mut f32;
                        // SAFETY: the block's two sums are inside the
                        // scratch; its rows and columns inside C.
                        unsafe {
                            let (leading, smaller) =
                                (std::slice::from_raw_parts_mut(leading, BLOCK * BLOCK), std::slice::from_raw_parts(leading.add(BLOCK * BLOCK), BLOCK * BLOCK));
                            write_block(p, leading, (smaller_terms > 0).then_some(smaller), i, rows, j, cols);
                        }
                    }
                    if let Some(finish) = epilogue.filter(|_| (panel + 1) % group == 0 || panel + 1 == count) {
                        // The group's panels, every row, written: its epilogue.
                        let group_first = (first + panel / group * group) * BLOCK;
                        finish(0, p.m, group_first, (j + cols) - group_first);
                    }
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if tiles {
            // SAFETY: as above.
            unsafe { release() };
        }
    });
}

for_widest_vectors! {
    /// [`write_block_values`] for this machine.
    fn write_block_for = write_block_values(p: &Product, leading: &mut [f32], smaller: Option<&[f32]>, i: usize, rows: usize, j: usize, cols: usize)
}

/// Writes a finished 32 x 32 block of sums (`leading`, plus `smaller`
/// when the terms had two blocks) to rows `i..i + rows`, columns `j..j +
/// cols` of C.
///
/// # Safety
/// The rows and columns are inside C.
#[inline(always)]
unsafe fn write_block_values<T: Element>(p: &Product, leading: &mut [f32], smaller: Option<&[f32]>, i: usize, rows: usize, j: usize, cols: usize) {
    if let Some(smaller) = smaller {
        leading.iter_mut().zip(smaller).for_each(|(sum, &small)| *sum += small);
    }
    let size = std::mem::size_of::<T>();
    for (r, sums) in leading.chunks_exact(BLOCK).take(rows).enumerate() {
        // SAFETY: the row's `cols` elements are inside C.
        unsafe { write_row::<T>(p.c.at(i + r, j, size) as *mut T, p.c.col_step, &sums[..cols], p.accumulate) };
    }
}

/// Writes `sums` to the row of C at `out` (elements `step` apart), added
/// to it with `accumulate`; in vectors where the row is contiguous.
///
/// # Safety
/// The row's `sums.len()` elements are inside C.
#[inline(always)]
unsafe fn write_row<T: Element>(out: *mut T, step: isize, sums: &[f32], accumulate: bool) {
    let value = |old: T, sum: f32| T::narrow(T::Wide::from_f32(if accumulate { old.widen().to_f32() + sum } else { sum }));
    if step == 1 {
        // SAFETY: as the caller promised.
        let row = unsafe { std::slice::from_raw_parts_mut(out, sums.len()) };
        row.iter_mut().zip(sums).for_each(|(out, &sum)| *out = value(*out, sum));
    } else {
        for (q, &sum) in sums.iter().enumerate() {
            // SAFETY: as the caller promised.
            unsafe {
                let at = out.offset(q as isize * step);
                *at = value(*at, sum);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Strided;
    use super::*;

    /// `tdpbf16ps` in Rust: the layout and blocking checked on any CPU.
    unsafe fn emulated_kernel(segments: &[[usize; 2]], chunks: usize, c: usize, load: bool, _ahead: Ahead) {
        let bf16 = |bits: u16| f32::from_bits(u32::from(bits) << 16);
        let c = c as *mut f32;
        for r in 0..BLOCK {
            for q in 0..BLOCK {
                // SAFETY: as the kernel's contract.
                unsafe {
                    let mut sum = if load { *c.add(r * BLOCK + q) } else { 0.0 };
                    for &[a, b] in segments {
                        let (a, b) = (a as *const u16, b as *const u16);
                        for chunk in 0..chunks {
                            let (tile_a, tile_b) = (a.add(chunk * 2 * TILE + r / 16 * TILE), b.add(chunk * 2 * TILE + q / 16 * TILE));
                            for pair in 0..16 {
                                for e in 0..2 {
                                    sum += bf16(*tile_a.add(r % 16 * 32 + pair * 2 + e)) * bf16(*tile_b.add(pair * 32 + q % 16 * 2 + e));
                                }
                            }
                        }
                    }
                    *c.add(r * BLOCK + q) = sum;
                }
            }
        }
    }

    #[test]
    fn the_parts_of_an_f32_sum_to_it_exactly() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let values: Vec<f32> = (0..100_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                f32::from_bits(state as u32)
            })
            .collect();
        let mut parts = [vec![0u16; 1], vec![0u16; 1], vec![0u16; 1]];
        let f = |bits: u16| f32::from_bits(u32::from(bits) << 16);
        for &x in &values {
            if split(&[x], &mut parts) {
                let want = if x.abs() < f32::MIN_POSITIVE { 0.0f32.copysign(x) } else { x };
                let sum = f64::from(f(parts[0][0])) + f64::from(f(parts[1][0])) + f64::from(f(parts[2][0]));
                assert_eq!(sum, f64::from(want), "{x:e}");
                assert!(parts.iter().all(|p| f(p[0]) == 0.0 || f(p[0]).abs() >= f32::MIN_POSITIVE), "{x:e}: a subnormal part");
            } else {
                assert!(x.abs().to_bits() >= LARGEST_SPLIT || (x.abs() >= f32::MIN_POSITIVE && x.abs() < SMALLEST_SPLIT), "{x:e}");
            }
        }
        let mut all = [vec![0u16; values.len()], vec![0u16; values.len()], vec![0u16; values.len()]];
        let finite: Vec<f32> = values.iter().map(|x| if x.is_finite() && x.abs() > 1e-30 && x.abs() < 1e38 { *x } else { 1.5 }).collect();
        assert!(split(&finite, &mut all), "a slice of values that split");
    }

    #[test]
    fn terms_run_from_the_smallest_to_the_leading_parts() {
        assert_eq!(terms(3), [(0, 2), (1, 1), (2, 0), (0, 1), (1, 0), (0, 0)]);
        assert_eq!(terms(2), [(1, 1), (0, 1), (1, 0), (0, 0)]);
        assert_eq!(terms(1), [(0, 0)]);
    }

    /// Products on the emulated tiles against f64 sums: f32-grade for f32
    /// operands, across block, panel, pass and chunk edges, C strided and
    /// accumulated, on one and two threads; every element finished once.
    /// The same on the CPU's tiles where it has them.
    #[test]
    fn tile_products_are_f32_grade() {
        products_are_f32_grade(emulated_kernel, false);
    }

    /// This CPU's microkernels on the same products: the AMX tiles where
    /// it has them, and `vdpbf16ps` where it has AVX512_BF16 (which reads
    /// the tiles' layout as the tiles do: split f32 operands, six terms
    /// through two blocks of sums, come out f32-grade too).
    #[test]
    fn products_on_this_cpus_dot_products_are_f32_grade() {
        #[cfg(target_arch = "x86_64")]
        for (has, kernel, tiles, what) in
            [(tiles(), amx_kernel as TileKernel, true, "AMX tiles (or NAX_AMX=0)"), (cpu_has_vector_dot_products(), vector_kernel, false, "AVX512_BF16")]
        {
            if has {
                products_are_f32_grade(kernel, tiles);
            } else {
                eprintln!("skipped: this CPU or OS gives no {what}; the layout is checked on the emulated tiles");
            }
        }
    }

    /// The `i`th element of a bf16 operand of the layout tests: values in
    /// [-0.5, 0.5), a positive subnormal every 11th, -2^-126 (the smallest
    /// normal) every 11th.
    fn bf16_operand(i: usize) -> half::bf16 {
        match i % 11 {
            3 => half::bf16::from_bits(0x0003),
            7 => half::bf16::from_bits(0x8040),
            _ => half::bf16::from_f32((i * 7919 % 1009) as f32 / 1009.0 - 0.5),
        }
    }

    /// A bf16 B is laid out for the tiles from its own bits whichever way
    /// it is stored (rows contiguous, columns contiguous as attention's
    /// keys, or neither), as the general split lays out its f32 values;
    /// a subnormal reads as a zero of its sign; an infinity refuses.
    #[test]
    fn bf16_b_is_laid_out_as_the_general_split_lays_it_out() {
        let (k, n) = (70, 45);
        let rows: Vec<half::bf16> = (0..k * n).map(bf16_operand).collect();
        let columns: Vec<half::bf16> = (0..k * n).map(|i| rows[(i % k) * n + i / k]).collect();
        let spread: Vec<half::bf16> = (0..2 * k * n).map(|i| if i % 2 == 0 { rows[i / 2] } else { half::bf16::NAN }).collect();
        let widened: Vec<f32> = rows.iter().map(|x| x.to_f32()).collect();
        let product = |ptr: usize, row_step: isize, col_step: isize| Product {
            m: 1,
            n,
            k,
            a: Strided { ptr: 0, row_step: 1, col_step: 1 },
            b: Strided { ptr, row_step, col_step },
            c: Strided { ptr: 0, row_step: 1, col_step: 1 },
            accumulate: false,
        };
        fn split<T: Element>(p: &Product) -> (bool, Vec<u16>) {
            let len = b_len::<T>(p);
            let mut out = vec![0xffffu64; len.div_ceil(4) + LINE / 8];
            let at = (out.as_mut_ptr() as usize).div_ceil(LINE) * LINE;
            // SAFETY: B holds every element; `out` holds the split B, aligned.
            let ok = unsafe { split_b::<T>(p, at, false) };
            // SAFETY: the split B's bits lie at `at`.
            (ok, unsafe { std::slice::from_raw_parts(at as *const u16, len) }.to_vec())
        }
        let (general, all_parts) = split::<f32>(&product(widened.as_ptr() as usize, n as isize, 1));
        let leading =
            all_parts.chunks(block_len(3, k.div_ceil(CHUNK))).flat_map(|panel| panel[..block_len(1, k.div_ceil(CHUNK))].to_vec()).collect::<Vec<u16>>();
        assert!(general);
        for (what, p) in [
            ("rows", product(rows.as_ptr() as usize, n as isize, 1)),
            ("columns", product(columns.as_ptr() as usize, 1, k as isize)),
            ("strided", product(spread.as_ptr() as usize, 2 * n as isize, 2)),
        ] {
            let (ok, laid_out) = split::<half::bf16>(&p);
            assert!(ok, "{what}");
            assert_eq!(laid_out, leading, "{what}");
        }
        for (mut bad, row_step, col_step) in [(rows.clone(), n as isize, 1), (columns.clone(), 1, k as isize)] {
            bad[100] = half::bf16::INFINITY;
            assert!(!split::<half::bf16>(&product(bad.as_ptr() as usize, row_step, col_step)).0);
        }
    }

    /// bf16 products on the tiles (emulated, and this CPU's where it has
    /// them) and on `vdpbf16ps` (where it has it), B stored either way and
    /// deep enough to take several steps over the depth: each element
    /// within the bf16 rounding of its f32 sum.
    #[test]
    fn bf16_tile_products_round_their_f32_sums() {
        bf16_products_round_their_f32_sums(emulated_kernel, false);
        #[cfg(target_arch = "x86_64")]
        if tiles() {
            bf16_products_round_their_f32_sums(amx_kernel, true);
        }
        #[cfg(target_arch = "x86_64")]
        if cpu_has_vector_dot_products() {
            bf16_products_round_their_f32_sums(vector_kernel, false);
        }
    }

    fn bf16_products_round_their_f32_sums(kernel: TileKernel, tiles: bool) {
        for (m, n, k) in [(33, 40, 70), (64, 65, 700)] {
            let value = |i: usize| half::bf16::from_f32(((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * (1.0 + (i % 13) as f32 / 7.0));
            let a: Vec<half::bf16> = (0..m * k).map(value).collect();
            let b: Vec<half::bf16> = (0..k * n).map(|i| value(i + 17)).collect();
            let b_columns: Vec<half::bf16> = (0..k * n).map(|i| b[(i % k) * n + i / k]).collect();
            for (b_ptr, row_step, col_step) in [(b.as_ptr() as usize, n as isize, 1), (b_columns.as_ptr() as usize, 1, k as isize)] {
                let mut c = vec![half::bf16::ZERO; m * n];
                let p = Product {
                    m,
                    n,
                    k,
                    a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                    b: Strided { ptr: b_ptr, row_step, col_step },
                    c: Strided { ptr: c.as_mut_ptr() as usize, row_step: n as isize, col_step: 1 },
                    accumulate: false,
                };
                // SAFETY: the matrices hold every element the steps reach.
                assert!(unsafe { multiply_with::<half::bf16>(p, None, 1, 0, None, kernel, tiles) });
                for i in 0..m {
                    for j in 0..n {
                        let terms = (0..k).map(|q| f64::from(a[i * k + q].to_f32()) * f64::from(b[q * n + j].to_f32()));
                        let (exact, scale) = terms.fold((0.0, 0.0), |(s, t), x| (s + x, t + x.abs()));
                        let got = f64::from(c[i * n + j].to_f32());
                        let bound = exact.abs() / 256.0 + k as f64 * scale * f64::from(f32::EPSILON);
                        assert!((got - exact).abs() <= bound, "{m}x{n}x{k} at ({i}, {j}), B steps ({row_step}, {col_step}): {got} against {exact}");
                    }
                }
            }
        }
    }

    fn products_are_f32_grade(kernel: TileKernel, tiles: bool) {
        // (512, 70, 40): the epilogue's groups of two panels, the last one short.
        for (m, n, k) in [(16, 1, 1), (33, 40, 70), (64, 65, 300), (40, 33, 2100), (20, 17, 9000), (512, 70, 40)] {
            for (accumulate, threads) in [(false, 1), (true, 2)] {
                let value = |i: usize| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * (1.0 + (i % 13) as f32 / 7.0);
                let a: Vec<f32> = (0..m * k).map(value).collect();
                let b: Vec<f32> = (0..k * n).map(|i| value(i + 17)).collect();
                let mut c = vec![0.25f32; 2 * m * n];
                let p = Product {
                    m,
                    n,
                    k,
                    a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                    b: Strided { ptr: b.as_ptr() as usize, row_step: n as isize, col_step: 1 },
                    c: Strided { ptr: c.as_mut_ptr() as usize, row_step: 2 * n as isize, col_step: 1 },
                    accumulate,
                };
                let seen = std::sync::Mutex::new(vec![0u32; m * n]);
                let count = |i: usize, rows: usize, j: usize, cols: usize| {
                    let mut s = seen.lock().unwrap();
                    (i..i + rows).for_each(|r| (j..j + cols).for_each(|q| s[r * n + q] += 1));
                };
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                // SAFETY: the matrices hold every element the steps reach.
                let ran = pool.install(|| unsafe { multiply_with::<f32>(p, None, threads, 0, Some(&count), kernel, tiles) });
                assert!(ran);
                for i in 0..m {
                    for j in 0..n {
                        let exact: f64 = (0..k).map(|q| f64::from(a[i * k + q]) * f64::from(b[q * n + j])).sum::<f64>() + if accumulate { 0.25 } else { 0.0 };
                        let scale: f64 = (0..k).map(|q| (f64::from(a[i * k + q]) * f64::from(b[q * n + j])).abs()).sum::<f64>() + 0.25;
                        let got = f64::from(c[i * 2 * n + j]);
                        // An f32 sum's bound (a rounding per term, of the
                        // unit 2^-24), a tenth more for the small terms'
                        // sum, and the dropped terms' two units.
                        let bound = (1.1 * k as f64 + 4.0) * scale * f64::from(f32::EPSILON) / 2.0;
                        assert!((got - exact).abs() <= bound, "{m}x{n}x{k} at ({i}, {j}): {got} against {exact}");
                    }
                }
                assert!(seen.into_inner().unwrap().iter().all(|&s| s == 1));
            }
        }
    }

    /// A bf16 A with contiguous rows is copied for the tiles bit for bit
    /// as the general split lays out the same matrix stored transposed
    /// (subnormals as zeros of their sign); a non-finite one does not split.
    #[test]
    fn bf16_rows_are_laid_out_as_the_general_split_lays_them() {
        let (m, k) = (45, 70);
        let rows: Vec<half::bf16> = (0..m * k).map(bf16_operand).collect();
        let columns: Vec<half::bf16> = (0..m * k).map(|i| rows[(i % m) * k + i / m]).collect();
        let product = |a: &[half::bf16], row_step: isize, col_step: isize| Product {
            m,
            n: 1,
            k,
            a: Strided { ptr: a.as_ptr() as usize, row_step, col_step },
            b: Strided { ptr: 0, row_step: 1, col_step: 1 },
            c: Strided { ptr: 0, row_step: 1, col_step: 1 },
            accumulate: false,
        };
        let len = m.div_ceil(BLOCK) * block_len(1, k.div_ceil(CHUNK));
        let split = |p: &Product| {
            let mut out = vec![0u64; len.div_ceil(4) + LINE / 8];
            let at = (out.as_mut_ptr() as usize).div_ceil(LINE) * LINE;
            // SAFETY: A holds every element; `out` holds the split A, aligned.
            let ok = unsafe { split_a::<half::bf16>(p, at, 2) };
            // SAFETY: the split A's bits lie at `at`.
            (ok, unsafe { std::slice::from_raw_parts(at as *const u16, len) }.to_vec())
        };
        let (fast, copied) = split(&product(&rows, k as isize, 1));
        let (general, laid_out) = split(&product(&columns, 1, m as isize));
        assert!(fast && general);
        assert_eq!(copied, laid_out);
        let mut bad = rows.clone();
        bad[100] = half::bf16::INFINITY;
        assert!(!split(&product(&bad, k as isize, 1)).0);
    }

    #[test]
    fn operands_that_do_not_split_leave_c_to_the_fma_path() {
        let (m, n, k) = (16, 4, 3);
        for bad in [f32::INFINITY, f32::NAN, 1e-33, 3.4e38] {
            let mut a = vec![1.0f32; m * k];
            a[5] = bad;
            let b = vec![1.0f32; k * n];
            let mut c = vec![7.0f32; m * n];
            let p = Product {
                m,
                n,
                k,
                a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                b: Strided { ptr: b.as_ptr() as usize, row_step: n as isize, col_step: 1 },
                c: Strided { ptr: c.as_mut_ptr() as usize, row_step: n as isize, col_step: 1 },
                accumulate: false,
            };
            // SAFETY: the matrices hold every element the steps reach.
            assert!(!unsafe { multiply_with::<f32>(p, None, 1, 0, None, emulated_kernel, false) });
            assert!(c.iter().all(|&x| x == 7.0));
        }
    }
}
