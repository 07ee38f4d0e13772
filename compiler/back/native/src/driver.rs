//! The driver every native back end shares: binds arguments and weights to
//! the program's buffers without copying, takes temporaries from a pool
//! that keeps them between calls (so repeated calls do not pay for fresh
//! pages), allocates the result as the returned tensor's own storage (the
//! last kernel writes it in place: no copy), and runs the compiled kernels
//! in order, splitting each kernel's parallel loop across the threads of
//! one pool (rayon's global pool, shared by all kernels and programs).
//! Large fresh buffers ask the kernel for transparent huge pages, which
//! cuts the cost of first touching them.

use crate::plan::Plan;
use nax_front::check::types::Type;
use nax_ir::{Argument, Graph};
use nax_kernel::{AttentionLoops, Body, BufferKind, Expr, GemmLoops, Index, Kernel, Program};
use nax_runtime::{DType, HostTensor, TensorData};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// A compiled kernel: `kernel(buffers, sizes, begin, end)` (see [`crate::emitter`]).
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i64, i64, i64);

/// Work below which a kernel runs on the calling thread: splitting costs
/// more than it saves.
const PARALLEL_WORK: usize = 1 << 15;

/// Buffers of at least this many bytes ask for transparent huge pages.
const HUGE_PAGES: usize = 4 << 20;

/// A program with its compiled kernels, ready to call.
pub struct Compiled {
    pub program: Program,
    pub plan: Plan,
    pub kernels: Vec<KernelFn>,
    /// The result's axis names.
    pub names: Vec<Option<String>>,
    /// Temporaries kept between calls.
    pool: Mutex<Vec<Vec<u64>>>,
}

/// Asks for transparent huge pages over a large, not yet touched allocation.
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    if bytes < HUGE_PAGES {
        return;
    }
    let page = 2 << 20;
    let start = (ptr as usize).div_ceil(page) * page;
    let end = (ptr as usize + bytes) / page * page;
    if end > start {
        // SAFETY: the range lies inside the caller's allocation; the advice
        // changes only how the kernel backs it.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Room for `count` elements of a dtype, not yet written (length 0):
/// the kernels write every element of their output before the data is
/// given its length (`TensorData::set_len`). Huge pages are asked for
/// when the room is large.
fn room(dtype: DType, count: usize) -> Result<TensorData, String> {
    use half::vec::HalfBitsVecExt;
    Ok(match dtype {
        DType::F16 => TensorData::F16(fresh::<u16>(count)?.reinterpret_into()),
        DType::BF16 => TensorData::BF16(fresh::<u16>(count)?.reinterpret_into()),
        DType::F32 => TensorData::F32(fresh(count)?),
        DType::F64 => TensorData::F64(fresh(count)?),
        DType::I32 => TensorData::I32(fresh(count)?),
        DType::I64 => TensorData::I64(fresh(count)?),
        DType::Bool => TensorData::Bool(fresh(count)?),
    })
}

/// An empty vector with room for `count` elements, or an error naming the
/// size when the memory is not there (never an abort).
fn fresh<T>(count: usize) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    let bytes = count.saturating_mul(std::mem::size_of::<T>());
    v.try_reserve_exact(count).map_err(|_| format!("cannot allocate {bytes} bytes for a buffer of {count} elements"))?;
    advise_huge_pages(v.as_ptr() as *mut u8, bytes);
    Ok(v)
}

/// The buffer table of one call, shared read-only by the threads of a kernel.
struct Table(Vec<*mut u8>);
// SAFETY: the pointers are only dereferenced by kernels, which write
// disjoint parts of their output buffer for disjoint ranges.
unsafe impl Sync for Table {}
unsafe impl Send for Table {}

/// The names of a graph's result axes.
pub fn result_names(g: &Graph) -> Vec<Option<String>> {
    match &g.graph[g.output].ty {
        Type::Tensor(t) => t.axes.iter().map(|a| a.name.clone()).collect(),
        _ => Vec::new(),
    }
}

/// Reads `count` elements of `dtype` at `ptr` into a host tensor's data.
///
/// # Safety
/// `ptr` must point to `count` initialised elements of `dtype`.
unsafe fn read_data(ptr: *const u8, dtype: DType, count: usize) -> TensorData {
    // SAFETY: the caller's contract; every dtype's elements are plain data
    // (bool buffers hold only 0 and 1, as kernels store them).
    unsafe {
        match dtype {
            DType::F16 => TensorData::F16(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
            DType::BF16 => TensorData::BF16(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
            DType::F32 => TensorData::F32(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
            DType::F64 => TensorData::F64(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
            DType::I32 => TensorData::I32(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
            DType::I64 => TensorData::I64(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
            DType::Bool => TensorData::Bool(std::slice::from_raw_parts(ptr.cast(), count).to_vec()),
        }
    }
}

impl Compiled {
    /// Runs a kernel scheduled as a matrix product through the `gemm`
    /// crate (packed, cache-blocked microkernels for the host's vector
    /// width): one call per position of the batch loops, the batch split
    /// across threads when it has enough positions, else each call.
    /// Each loop's step through a buffer read with `index`, in elements,
    /// and the fixed offset, for a kernel of `loops` loops.
    fn steps(&self, slots: &[i64], loops: usize, buffer: usize, index: &[Index]) -> (Vec<isize>, isize) {
        let p = &self.program;
        let shape: Vec<usize> = p.buffers[buffer].shape.iter().map(|&s| self.plan.value(p, s, slots)).collect();
        let axis: Vec<isize> = nax_runtime::row_major_strides(&shape).into_iter().map(|s| s as isize).collect();
        let mut per_loop = vec![0isize; loops];
        let mut base = 0isize;
        for (d, &i) in index.iter().enumerate() {
            match i {
                Index::Loop(l) => per_loop[l] += axis[d],
                Index::Const(c) => base += c as isize * axis[d],
                Index::Zero => {}
            }
        }
        (per_loop, base)
    }

    fn run_gemm(&self, kernel: &Kernel, g: &GemmLoops, table: &Table, slots: &[i64], threads: usize) {
        let p = &self.program;
        let Body::Reduce { value: Expr::Apply { args, .. }, .. } = &kernel.body else { return };
        let [Expr::Load { buffer: a, index: ia }, Expr::Load { buffer: b, index: ib }] = args.as_slice() else { return };
        let extents: Vec<usize> = kernel.loops.iter().map(|l| self.plan.value(p, l.extent, slots)).collect();
        let steps = |buffer: usize, index: &[Index]| self.steps(slots, extents.len(), buffer, index);
        let rank = p.buffers[kernel.output].shape.len();
        let (so, bo) = steps(kernel.output, &(0..rank).map(Index::Loop).collect::<Vec<_>>());
        let (sa, ba) = steps(*a, ia);
        let (sb, bb) = steps(*b, ib);
        let along = |s: &[isize], l: Option<usize>| l.map_or(0, |l| s[l]);
        let (mut m, mut n, k) = (g.rows.map_or(1, |l| extents[l]), g.cols.map_or(1, |l| extents[l]), extents[g.inner]);
        // A batch loop that continues the rows (or columns) in memory, in the
        // output and the one operand it indexes, joins them: one larger
        // product instead of several (`[b n D] @ [D F]` is one `(b n) x D` product).
        let mut batch_loops = Vec::new();
        for &l in g.batch.iter().rev() {
            let joins = |along: Option<usize>, len: usize, own: &[isize], other: &[isize]| {
                along.is_some_and(|r| so[l] == so[r] * len as isize && own[l] == own[r] * len as isize && other[l] == 0)
            };
            if joins(g.rows, m, &sa, &sb) {
                m *= extents[l];
            } else if joins(g.cols, n, &sb, &sa) {
                n *= extents[l];
            } else {
                batch_loops.insert(0, l);
            }
        }
        let batch: usize = batch_loops.iter().map(|&l| extents[l]).product();
        let dtype = p.buffers[kernel.output].dtype;
        let (out_ptr, a_ptr, b_ptr) = (table.0[kernel.output] as usize, table.0[*a] as usize, table.0[*b] as usize);
        let elements: usize = (0..rank).map(|l| extents[l]).product();
        if k == 0 {
            // An empty sum: zeros.
            // SAFETY: the output holds `elements` elements of `dtype`.
            unsafe { std::ptr::write_bytes(out_ptr as *mut u8, 0, elements * dtype.size_bytes()) };
            return;
        }
        let call = |position: usize, parallelism: gemm::Parallelism| {
            let (mut oo, mut oa, mut ob) = (bo, ba, bb);
            let mut rest = position;
            for &l in batch_loops.iter().rev() {
                let at = (rest % extents[l]) as isize;
                rest /= extents[l];
                oo += at * so[l];
                oa += at * sa[l];
                ob += at * sb[l];
            }
            let (dst_cs, dst_rs) = (along(&so, g.cols), along(&so, g.rows));
            let (lhs_cs, lhs_rs) = (sa[g.inner], along(&sa, g.rows));
            let (rhs_cs, rhs_rs) = (along(&sb, g.cols), sb[g.inner]);
            // SAFETY: the offsets and steps stay inside the buffers (the
            // kernel verified against the program); the output is written
            // once per element and aliases neither operand.
            unsafe {
                match dtype {
                    DType::F64 => gemm::gemm::<f64>(m, n, k, (out_ptr as *mut f64).offset(oo), dst_cs, dst_rs, false, (a_ptr as *const f64).offset(oa), lhs_cs, lhs_rs, (b_ptr as *const f64).offset(ob), rhs_cs, rhs_rs, 0.0, 1.0, false, false, false, parallelism),
                    _ => gemm::gemm::<f32>(m, n, k, (out_ptr as *mut f32).offset(oo), dst_cs, dst_rs, false, (a_ptr as *const f32).offset(oa), lhs_cs, lhs_rs, (b_ptr as *const f32).offset(ob), rhs_cs, rhs_rs, 0.0, 1.0, false, false, false, parallelism),
                }
            }
        };
        if threads > 1 && batch >= threads {
            (0..batch).into_par_iter().for_each(|position| call(position, gemm::Parallelism::None));
        } else {
            let parallelism = if threads > 1 && m * n * k >= PARALLEL_WORK { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
            (0..batch).for_each(|position| call(position, parallelism));
        }
    }

    /// Runs an attention kernel (see [`AttentionLoops`]): one task per
    /// position of the batch loops and tile of rows, split across threads;
    /// per tile of keys the mask shows (a probe tells), the scores' product
    /// into the tile's scratch, the
    /// compiled tile code (logits, online softmax, rescaling), and, unless
    /// every logit of the tile is `-inf`, the product of the probabilities
    /// and the values added to the rows' accumulated output; at the end
    /// each row is divided by its sum into the output.
    fn run_attention(&self, kernel: &Kernel, a: &AttentionLoops, tile: KernelFn, table: &Table, slots: &[i64], threads: usize) {
        let p = &self.program;
        let Body::Attention { keys, visible, value: Expr::Load { buffer: vb, index: vi }, .. } = &kernel.body else { return };
        let Some(Expr::Apply { args, .. }) = kernel.rows.first().map(|r| &r.value) else { return };
        let [Expr::Load { buffer: qb, index: qi }, Expr::Load { buffer: kb, index: ki }] = args.as_slice() else { return };
        let extents: Vec<usize> = kernel.loops.iter().map(|l| self.plan.value(p, l.extent, slots)).collect();
        let loops = extents.len();
        let depth = loops - 1;
        let steps = |buffer: usize, index: &[Index]| self.steps(slots, loops, buffer, index);
        let rank = p.buffers[kernel.output].shape.len();
        let (so, bo) = steps(kernel.output, &(0..rank).map(Index::Loop).collect::<Vec<_>>());
        let (sq, bq) = steps(*qb, qi);
        let (sk, bk) = steps(*kb, ki);
        let (sv, bv) = steps(*vb, vi);
        let (n, m, d, width) = (extents[a.rows], extents[*keys], extents[depth], extents[a.cols]);
        let (tile_rows, tile_keys) = (a.tile.0 as usize, a.tile.1 as usize);
        let batch: usize = a.batch.iter().map(|&l| extents[l]).product();
        let blocks = n.div_ceil(tile_rows);
        let base = slots.len();
        let (out_ptr, q_ptr, k_ptr, v_ptr) = (table.0[kernel.output] as usize, table.0[*qb] as usize, table.0[*kb] as usize, table.0[*vb] as usize);
        let task = |t: usize| {
            let (position, block) = (t / blocks, t % blocks);
            let first_row = block * tile_rows;
            let rows = tile_rows.min(n - first_row);
            let mut sizes = slots.to_vec();
            sizes.resize(base + loops + 3, 0);
            let (mut oo, mut oq, mut ok, mut ov) = (bo, bq, bk, bv);
            let mut rest = position;
            for &l in a.batch.iter().rev() {
                let at = rest % extents[l];
                rest /= extents[l];
                sizes[base + l] = at as i64;
                let at = at as isize;
                (oo, oq, ok, ov) = (oo + at * so[l], oq + at * sq[l], ok + at * sk[l], ov + at * sv[l]);
            }
            let row = first_row as isize;
            (oo, oq) = (oo + row * so[a.rows], oq + row * sq[a.rows]);
            sizes[base + a.rows] = first_row as i64;
            sizes[base + loops] = rows as i64;
            let mut scores = vec![0f32; tile_rows * tile_keys];
            let mut acc = vec![0f32; tile_rows * width];
            let mut stats: Vec<f32> = (0..2 * tile_rows + 1).map(|i| if i % 2 == 0 { f32::NEG_INFINITY } else { 0.0 }).collect();
            let mut buffers = table.0.clone();
            buffers[a.scratch[0]] = scores.as_mut_ptr().cast();
            buffers[a.scratch[1]] = acc.as_mut_ptr().cast();
            buffers[a.scratch[2]] = stats.as_mut_ptr().cast();
            for first_key in (0..m).step_by(tile_keys) {
                let cols = tile_keys.min(m - first_key);
                sizes[base + keys] = first_key as i64;
                sizes[base + loops + 1] = cols as i64;
                let key = first_key as isize;
                // SAFETY: the offsets and steps stay inside q, k and v (the
                // kernel verified against the program); the tile's scratch
                // holds `rows x cols` scores of row stride `tile_keys` and
                // `rows x width` outputs; the compiled tile reads and writes
                // only the scratch and what the kernel's loads name.
                unsafe {
                    if visible.is_some() {
                        sizes[base + loops + 2] = 1;
                        tile(buffers.as_ptr(), sizes.as_ptr(), 0, 0);
                        sizes[base + loops + 2] = 0;
                        if stats[2 * tile_rows] == f32::NEG_INFINITY {
                            continue;
                        }
                    }
                    if d == 0 {
                        scores.fill(0.0);
                    } else {
                        gemm::gemm::<f32>(rows, cols, d, scores.as_mut_ptr(), 1, tile_keys as isize, false, (q_ptr as *const f32).offset(oq), sq[depth], sq[a.rows], (k_ptr as *const f32).offset(ok + key * sk[*keys]), sk[*keys], sk[depth], 0.0, 1.0, false, false, false, gemm::Parallelism::None);
                    }
                    tile(buffers.as_ptr(), sizes.as_ptr(), 0, 0);
                    if stats[2 * tile_rows] == f32::NEG_INFINITY {
                        continue;
                    }
                    gemm::gemm::<f32>(rows, width, cols, acc.as_mut_ptr(), 1, width as isize, true, scores.as_ptr(), 1, tile_keys as isize, (v_ptr as *const f32).offset(ov + key * sv[*keys]), sv[a.cols], sv[*keys], 1.0, 1.0, false, false, false, gemm::Parallelism::None);
                }
            }
            let out = out_ptr as *mut f32;
            for (i, row) in acc.chunks_exact(width.max(1)).take(rows).enumerate() {
                // No keys at all: an empty sum, 0 (the softmax of nothing is empty).
                let scale = if m == 0 { 0.0 } else { 1.0 / stats[2 * i + 1] };
                let start = oo + i as isize * so[a.rows];
                for (c, &x) in row.iter().enumerate() {
                    // SAFETY: row `first_row + i` and column `c` are inside the output.
                    unsafe { *out.offset(start + c as isize * so[a.cols]) = x * scale };
                }
            }
        };
        if threads > 1 && batch * blocks > 1 {
            (0..batch * blocks).into_par_iter().for_each(task);
        } else {
            (0..batch * blocks).for_each(task);
        }
    }

    pub fn new(program: Program, plan: Plan, kernels: Vec<KernelFn>, names: Vec<Option<String>>) -> Compiled {
        Compiled { program, plan, kernels, names, pool: Mutex::new(Vec::new()) }
    }

    /// Runs on arguments the call-boundary check accepted (`sizes` is its result).
    pub fn run(&self, args: &[Argument], weights: &HashMap<String, HostTensor>, sizes: &[Option<u64>]) -> Result<HostTensor, String> {
        let p = &self.program;
        let slots = self.plan.values(p, sizes)?;
        let elements = |b: usize| -> Result<usize, String> {
            p.buffers[b].shape.iter().try_fold(1usize, |acc, &s| acc.checked_mul(self.plan.value(p, s, &slots)).ok_or_else(|| "a buffer is too large to address".to_string()))
        };
        // The buffer the result lives in (through reshapes), when a kernel writes it.
        let mut root = p.result;
        while let BufferKind::Alias(a) = p.buffers[root].kind {
            root = a;
        }
        let mut result_data = match p.buffers[root].kind {
            BufferKind::Temporary => Some(room(p.buffers[p.result].dtype, elements(p.result)?)?),
            _ => None,
        };
        // Host scalars live here for the call; temporaries in `storage`.
        let mut scalars: Vec<u64> = Vec::new();
        let mut pool = std::mem::take(&mut *self.pool.lock().map_err(|_| "a previous call panicked")?);
        let mut storage: Vec<Vec<u64>> = Vec::new();
        let mut table: Vec<*mut u8> = Vec::with_capacity(p.buffers.len());
        let mut scalar_of = vec![None; p.buffers.len()];
        for (b, buffer) in p.buffers.iter().enumerate() {
            if let BufferKind::Input(i) = buffer.kind {
                let bytes = match args.get(i) {
                    Some(Argument::Float(x)) => x.to_ne_bytes(),
                    Some(Argument::Int(x)) => x.to_ne_bytes(),
                    Some(Argument::Bool(x)) => [u8::from(*x), 0, 0, 0, 0, 0, 0, 0],
                    _ => continue,
                };
                scalar_of[b] = Some(scalars.len());
                scalars.push(u64::from_ne_bytes(bytes));
            }
        }
        for (b, buffer) in p.buffers.iter().enumerate() {
            let ptr = match &buffer.kind {
                BufferKind::Input(i) => match (args.get(*i), scalar_of[b]) {
                    (Some(Argument::Tensor(t)), _) => t.data().as_ptr() as *mut u8,
                    (_, Some(s)) => (&mut scalars[s] as *mut u64).cast::<u8>(),
                    _ => return Err(format!("no argument {i}")),
                },
                BufferKind::Weight(name) => weights.get(name).ok_or_else(|| format!("the weight '{name}' is missing"))?.data().as_ptr() as *mut u8,
                BufferKind::Alias(a) => table[*a],
                // Given per tile by the attention kernel that uses it.
                BufferKind::Tile => std::ptr::null_mut(),
                BufferKind::Temporary if b == root => match result_data.as_mut() {
                    Some(d) => d.as_mut_ptr(),
                    None => return Err("internal error: the result has no storage".into()),
                },
                BufferKind::Temporary => {
                    let bytes = elements(b)?.checked_mul(buffer.dtype.size_bytes()).ok_or("a buffer is too large to address")?;
                    let words = bytes.div_ceil(8).max(1);
                    let mut v = match pool.iter().position(|v| v.len() >= words) {
                        Some(i) => pool.swap_remove(i),
                        None => {
                            let mut v = fresh::<u64>(words)?;
                            v.resize(words, 0);
                            v
                        }
                    };
                    let ptr = v.as_mut_ptr().cast::<u8>();
                    storage.push(v);
                    ptr
                }
            };
            table.push(ptr);
        }
        let table = Table(table);
        let threads = rayon::current_num_threads();
        for (kernel, &f) in p.kernels.iter().zip(&self.kernels) {
            if let Some(g) = &kernel.schedule.gemm {
                self.run_gemm(kernel, g, &table, &slots, threads);
                if g.epilogue.is_none() {
                    continue;
                }
            }
            if let Some(a) = &kernel.schedule.attention {
                self.run_attention(kernel, a, f, &table, &slots, threads);
                continue;
            }
            // A GEMM's epilogue runs over the output's loops.
            let loops = if kernel.schedule.gemm.is_some() { &kernel.loops[..kernel.loops.len() - 1] } else { &kernel.loops[..] };
            let extents: Vec<usize> = loops.iter().map(|l| self.plan.value(p, l.extent, &slots)).collect();
            let work = extents.iter().fold(1usize, |a, &e| a.saturating_mul(e));
            let parallel = kernel.parallel_loop();
            let n = if parallel { extents[0] } else { 0 };
            let (bufs, sizes_ptr) = (table.0.as_ptr() as usize, slots.as_ptr() as usize);
            // SAFETY: the kernel was compiled from this program; the table
            // holds every buffer at its size for these slots.
            let call = |begin: usize, end: usize| unsafe { f(bufs as *const *mut u8, sizes_ptr as *const i64, begin as i64, end as i64) };
            if parallel && threads > 1 && n > 1 && work >= PARALLEL_WORK {
                let chunks = n.min(threads * 4);
                (0..chunks).into_par_iter().for_each(|c| call(c * n / chunks, (c + 1) * n / chunks));
            } else {
                call(0, n);
            }
        }
        storage.append(&mut pool);
        if let Ok(mut kept) = self.pool.lock() {
            *kept = storage;
        }
        let result = p.result;
        let dtype = p.buffers[result].dtype;
        let shape: Vec<usize> = p.buffers[result].shape.iter().map(|&s| self.plan.value(p, s, &slots)).collect();
        let data = match result_data.take() {
            Some(mut d) => {
                // SAFETY: every kernel writes each element of its output, and
                // a kernel wrote the result's buffer.
                unsafe { d.set_len(elements(result)?) };
                d
            }
            // SAFETY: the result is an argument or weight of `count` elements.
            None => unsafe { read_data(table.0[result], dtype, elements(result)?) },
        };
        HostTensor::new(data, shape, self.names.clone()).map_err(|e| e.to_string())
    }
}

