//! The driver of natively compiled functions: binds a checked call's
//! arguments and the weights to the plan's buffers without copying, lets
//! temporaries whose lifetimes do not overlap share memory (a memory plan
//! from the kernels' footprints, [`Slots`]), takes that memory from a pool
//! that keeps it between calls (so repeated calls do not pay for fresh
//! pages), allocates the result as the returned
//! tensor's own storage or writes the caller's buffer (the last kernel
//! writes it in place: no copy), and runs the kernels in order inside the
//! caller's thread pool: a nest's parallel loop split across its threads,
//! matrix products through the program's microkernels (blocked and packed
//! by [`crate::gemm`]), flash attention tile by tile. Large fresh buffers ask the OS for transparent
//! huge pages, which cuts the cost of first touching them.

use crate::call::CheckedCall;
use crate::error::RuntimeError;
use crate::gemm::{Element, Micro, Panels, Product, Strided, UNPACKED_ROWS, multiply, multiply_panels, with_scratch};
use crate::memory::Peak;
use crate::packed::{PackKey, PackedWeights};
use crate::threads::ThreadPool;
use nax_contract::DType;
use nax_contract::Signature;
use nax_contract::plan::{AttentionPlan, BufferKind, GemmPlan, Index, IndexCheck, KernelFn, KernelPlan, NativePlan, Nest, Operand, Reach, SizeRef, Strategy};
use nax_host::HostError;
use nax_host::TensorMut;
use nax_host::{HostTensor, TensorData};
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

/// Work below which a kernel runs on the calling thread: splitting costs
/// more than it saves.
const PARALLEL_WORK: usize = 1 << 15;

/// Buffers of at least this many bytes ask for transparent huge pages.
const HUGE_PAGES: usize = 4 << 20;

thread_local! {
    /// The size slots of the GEMM epilogue's current tile, kept by each thread.
    static TILE_SLOTS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What executes a checked call: the native driver over compiled kernels,
/// or (in the compiler) the reference interpreter.
pub trait Execute: Send + Sync {
    /// Runs the call in `pool`. With `into` (a function of one result
    /// only), the result is written to the caller's buffer and nothing
    /// returned; without, the results are returned in declared order.
    fn execute(&self, call: &CheckedCall<'_>, into: Option<&mut TensorMut<'_>>, pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError>;

    /// What [`Execute::execute`] of this call would allocate at most (with
    /// `into`: when the result goes to the caller's buffer), computed from
    /// the call's sizes before anything runs: the memory plan a call is
    /// admitted by.
    fn peak(&self, call: &CheckedCall<'_>, into: bool) -> Peak;

    /// The most iterations any one loop nest of this call runs, from the
    /// call's sizes (what [`crate::call::check_work`] bounds).
    fn work(&self, call: &CheckedCall<'_>) -> Result<u128, RuntimeError>;
}

/// What keeps a function's machine code alive (a JIT's memory, a loaded
/// library); dropped after the entry points are.
pub type CodeOwner = Box<dyn Send>;

/// A natively compiled function, ready to call: its plan, one entry per
/// kernel, and the owner of their code.
pub struct NativeFunction {
    signature: Arc<Signature>,
    plan: NativePlan,
    entries: Vec<KernelFn>,
    /// Temporaries kept between calls.
    temporaries: Mutex<Vec<Vec<u64>>>,
    /// The temporaries that may share memory, each with the first and the
    /// last kernel that use it, in that order ([`shareable`]): decided
    /// once, from the plan.
    shared: Vec<(usize, usize, usize)>,
    /// How each kernel's product reads its weight, if its B is one
    /// ([`weight_reads`]): decided once, from the plan.
    weight_reads: Vec<WeightRead>,
    /// Calls and each kernel's summed seconds since the last report (`NAX_PROFILE`).
    profile: Mutex<(usize, Vec<f64>)>,
    /// Declared last: dropped after everything that points into the code.
    _code: SyncCode,
}

/// The code owner, which nothing reads after construction.
struct SyncCode {
    _owner: CodeOwner,
}
// SAFETY: the owner is never accessed through a shared reference (it is
// only kept, then dropped), so sharing `&SyncCode` between threads cannot
// race.
unsafe impl Sync for SyncCode {}

impl NativeFunction {
    /// The function of this signature from its plan and compiled kernels;
    /// `code` owns the machine code the entries point into. An error when
    /// the plan does not validate or the entries are not one per kernel
    /// and microkernel.
    ///
    /// # Safety
    /// Entry `i` must be the compiled code of the plan's kernel `i`, with
    /// the [`KernelFn`] signature, and the entries after the kernels' the
    /// plan's microkernels (their contract: [`nax_contract::plan::Microkernel`]), reading and writing only the buffers its
    /// plan names at the sizes the slots give for calls of this signature,
    /// and valid while `code` lives.
    pub unsafe fn new(signature: Arc<Signature>, plan: NativePlan, entries: Vec<KernelFn>, code: CodeOwner) -> Result<NativeFunction, RuntimeError> {
        plan.validate(signature.params.len())?;
        if entries.len() != plan.kernels.len() + plan.microkernels.len() {
            return Err(RuntimeError::Internal(format!(
                "{} entries for {} kernels and {} microkernels",
                entries.len(),
                plan.kernels.len(),
                plan.microkernels.len()
            )));
        }
        let shared = shareable(&plan);
        let weight_reads = weight_reads(&plan);
        Ok(NativeFunction {
            signature,
            plan,
            entries,
            temporaries: Mutex::new(Vec::new()),
            shared,
            weight_reads,
            profile: Mutex::new((0, Vec::new())),
            _code: SyncCode { _owner: code },
        })
    }

    /// The plan.
    pub fn plan(&self) -> &NativePlan {
        &self.plan
    }
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
/// given its length (`TensorData::set_len`).
fn room(dtype: DType, count: usize) -> Result<TensorData, RuntimeError> {
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
fn fresh<T>(count: usize) -> Result<Vec<T>, RuntimeError> {
    let mut v: Vec<T> = Vec::new();
    let bytes = count.saturating_mul(std::mem::size_of::<T>());
    v.try_reserve_exact(count).map_err(|_| HostError::Allocation { bytes, count })?;
    advise_huge_pages(v.as_mut_ptr().cast(), bytes);
    Ok(v)
}

/// A temporary of `words` words: the smallest kept one that fits (a large
/// one taken for a small temporary would leave the large temporary to
/// fresh pages at every call), else fresh zeros.
fn take_kept(pool: &mut Vec<Vec<u64>>, words: usize) -> Result<Vec<u64>, RuntimeError> {
    let fits = pool.iter().enumerate().filter(|(_, v)| v.len() >= words).min_by_key(|(_, v)| v.len()).map(|(i, _)| i);
    Ok(match fits {
        Some(i) => pool.swap_remove(i),
        None => {
            let mut v = fresh::<u64>(words)?;
            v.resize(words, 0);
            v
        }
    })
}

/// Reads `count` elements of `dtype` at `ptr` into a host tensor's data.
///
/// # Safety
/// `ptr` must point to `count` initialised elements of `dtype`.
pub(crate) unsafe fn read_data(ptr: *const u8, dtype: DType, count: usize) -> TensorData {
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

/// The buffer table of one call, shared read-only by the threads of a kernel.
struct Table(Vec<*mut u8>);
// SAFETY: the pointers are only dereferenced by kernels, which write
// disjoint parts of their output buffer for disjoint ranges.
unsafe impl Sync for Table {}
// SAFETY: as above.
unsafe impl Send for Table {}

/// One call's sizes: the slots' values and the plan to read sizes through.
pub(crate) struct Sizes<'p> {
    plan: &'p NativePlan,
    pub(crate) slots: Vec<i64>,
}

impl<'p> Sizes<'p> {
    /// The call's value of each of the plan's size slots.
    pub(crate) fn of(plan: &'p NativePlan, call: &CheckedCall<'_>) -> Result<Sizes<'p>, RuntimeError> {
        let table = &call.signature().sizes;
        let slots = plan
            .slots
            .iter()
            .map(|&id| {
                call.size(nax_contract::Size::Sym(id))
                    .and_then(|v| i64::try_from(v).ok())
                    .ok_or_else(|| RuntimeError::UnknownSize { size: table.display(nax_contract::Size::Sym(id)) })
            })
            .collect::<Result<Vec<i64>, RuntimeError>>()?;
        Ok(Sizes { plan, slots })
    }

    /// The loop extents of each kernel that has something to write (no
    /// device runs another).
    pub(crate) fn nests(&self) -> Vec<Vec<u64>> {
        self.plan.kernels.iter().filter(|k| !self.is_empty(k.output)).map(|k| self.extents(k).iter().map(|&e| e as u64).collect()).collect()
    }

    /// Refuses the call when one of its loop nests runs more than
    /// [`crate::error::MAX_ITERATIONS`] iterations.
    pub(crate) fn check_work(&self, function: &str) -> Result<(), RuntimeError> {
        for extents in self.nests() {
            crate::call::check_work(function, &extents)?;
        }
        Ok(())
    }

    /// The most iterations any one loop nest runs.
    pub(crate) fn work(&self) -> u128 {
        self.nests().iter().map(|e| crate::call::iterations(e)).max().unwrap_or(0)
    }

    pub(crate) fn value(&self, s: SizeRef) -> usize {
        match s {
            SizeRef::Const(c) => c as usize,
            SizeRef::Slot(i) => self.slots[i] as usize,
        }
    }

    pub(crate) fn extents(&self, k: &KernelPlan) -> Vec<usize> {
        k.loops.iter().map(|&s| self.value(s)).collect()
    }

    pub(crate) fn shape(&self, buffer: usize) -> Vec<usize> {
        self.plan.buffers[buffer].shape.iter().map(|&s| self.value(s)).collect()
    }

    /// Whether a buffer has no element (a zero axis, whatever the others).
    pub(crate) fn is_empty(&self, buffer: usize) -> bool {
        self.plan.buffers[buffer].shape.iter().any(|&s| self.value(s) == 0)
    }

    pub(crate) fn elements(&self, buffer: usize) -> Result<usize, RuntimeError> {
        if self.is_empty(buffer) {
            return Ok(0);
        }
        self.shape(buffer)
            .iter()
            .try_fold(1usize, |acc, &n| acc.checked_mul(n))
            .ok_or_else(|| RuntimeError::Internal("a buffer is too large to address".into()))
    }

    /// The elements a buffer's memory holds: its own; for an empty buffer
    /// that a kernel with something to write reads, as many as if each
    /// empty axis had one position, zeros (a concatenation reads every
    /// operand at a clamped position: position 0 of an empty axis, any
    /// position of the others); else none.
    pub(crate) fn stored_elements(&self, buffer: usize) -> Result<usize, RuntimeError> {
        if !self.is_empty(buffer) {
            return self.elements(buffer);
        }
        if !self.read_while_running(buffer) {
            return Ok(0);
        }
        self.shape(buffer)
            .iter()
            .try_fold(1usize, |acc, &n| acc.checked_mul(n.max(1)))
            .ok_or_else(|| RuntimeError::Internal("a buffer is too large to address".into()))
    }

    /// Whether a kernel that reads at this call (its output and its loops
    /// are not empty: the rule of [`Sizes::check_footprints`]) reads
    /// `buffer`'s memory, through an alias or not (a plan without
    /// footprints, an older library's, reads every buffer).
    fn read_while_running(&self, buffer: usize) -> bool {
        let reads = |k: &&KernelPlan| !self.is_empty(k.output) && k.loops.iter().all(|&l| self.value(l) > 0);
        self.plan.kernels.iter().filter(reads).any(|k| k.footprint.is_empty() || k.footprint.iter().any(|a| self.plan.alias_root(a.buffer) == buffer))
    }

    /// The bytes of [`Sizes::stored_elements`]. Elements that are
    /// addressable but whose bytes are not (2^61 f64s: an f32 sum's wide
    /// scratch) are memory the call cannot have, a clean error.
    pub(crate) fn stored_bytes(&self, buffer: usize) -> Result<usize, RuntimeError> {
        let count = self.stored_elements(buffer)?;
        count.checked_mul(self.plan.buffers[buffer].dtype.size_bytes()).ok_or(HostError::Allocation { bytes: usize::MAX, count }.into())
    }

    /// The elements each buffer's memory holds at this call: an argument's
    /// or a weight's as given (a host scalar is one), a temporary's as its
    /// shape says, an alias its buffer's; `None` for a tile's scratch,
    /// which the attention kernel sizes itself.
    pub(crate) fn memory(&self, call: &CheckedCall<'_>) -> Result<Vec<Option<usize>>, RuntimeError> {
        let mut memory: Vec<Option<usize>> = Vec::with_capacity(self.plan.buffers.len());
        for (b, buffer) in self.plan.buffers.iter().enumerate() {
            memory.push(match &buffer.kind {
                BufferKind::Input(_) | BufferKind::Weight(_) | BufferKind::Temporary if self.is_empty(b) => Some(self.stored_elements(b)?),
                BufferKind::Input(i) => Some(call.tensor(*i).map_or(1, |t| t.len())),
                BufferKind::Weight(name) => call.weight(name).map(|t| t.len()),
                BufferKind::Temporary | BufferKind::Fault => Some(self.elements(b)?),
                BufferKind::Alias(a) => memory.get(*a).copied().flatten(),
                BufferKind::Tile => None,
            });
        }
        Ok(memory)
    }

    /// The footprint check: before any kernel runs, every buffer each kernel
    /// would read or write, as far as it reaches along each axis at this
    /// call, lies inside the buffer's shape and its memory (`memory`, from
    /// [`Sizes::memory`] or a device's own buffers). The compiler proves
    /// this; the check makes a compiler bug an internal error instead of
    /// an access outside a buffer. O(kernels x accesses x rank).
    pub(crate) fn check_footprints(&self, memory: &[Option<usize>]) -> Result<(), RuntimeError> {
        for (n, k) in self.plan.kernels.iter().enumerate() {
            // A kernel with nothing to write, or an empty loop, is not run
            // or reads nothing its loops index.
            if self.is_empty(k.output) || k.loops.iter().any(|&l| self.value(l) == 0) {
                continue;
            }
            'access: for a in &k.footprint {
                let Some(len) = memory.get(a.buffer).copied().flatten() else { continue };
                let shape = self.shape(a.buffer);
                let steps = nax_host::row_major_steps(&shape);
                let verb = if a.write { "write" } else { "read" };
                let mut last: u128 = 0;
                for (axis, (&r, (&size, &step))) in a.reach.iter().zip(shape.iter().zip(&steps)).enumerate() {
                    let reach = match r {
                        Reach::Positions(s) => self.value(s),
                        Reach::Computed => size,
                    };
                    if reach == 0 {
                        continue 'access;
                    }
                    if reach > size {
                        return Err(RuntimeError::Internal(format!(
                            "kernel k{n} would {verb} buffer {} at position {} of axis {axis}, which has {size}",
                            a.buffer,
                            reach - 1
                        )));
                    }
                    last += (reach as u128 - 1) * step.unsigned_abs() as u128;
                }
                if last >= len as u128 {
                    return Err(RuntimeError::Internal(format!("kernel k{n} would {verb} buffer {} at offset {last} of {len}", a.buffer)));
                }
            }
        }
        // Each result is read whole (copied out when it is an argument or a weight).
        for &result in &self.plan.results {
            let read = self.elements(result)?;
            if let Some(len) = memory.get(result).copied().flatten()
                && read > len
            {
                return Err(RuntimeError::Internal(format!("a result would read buffer {result} to element {read} of {len}")));
            }
        }
        Ok(())
    }

    /// Each loop's step through `operand`'s buffer, in elements, and the
    /// fixed offset, for a kernel of `loops` loops.
    fn steps(&self, loops: usize, operand: &Operand) -> (Vec<isize>, isize) {
        let shape = self.shape(operand.buffer);
        let axis = nax_host::row_major_steps(&shape);
        let mut per_loop = vec![0isize; loops];
        let mut base = 0isize;
        for (d, &i) in operand.index.iter().enumerate() {
            match i {
                Index::Loop(l) => per_loop[l] += axis[d],
                Index::Const(c) => base += c as isize * axis[d],
                Index::Zero => {}
            }
        }
        (per_loop, base)
    }

    /// The steps of a kernel's output, indexed by its leading loops.
    fn output_steps(&self, k: &KernelPlan) -> (Vec<isize>, isize) {
        let rank = self.plan.buffers[k.output].shape.len();
        self.steps(k.loops.len(), &Operand { buffer: k.output, index: (0..rank).map(Index::Loop).collect() })
    }
}

impl NativeFunction {
    /// The call's size slots.
    fn sizes(&self, call: &CheckedCall<'_>) -> Result<Sizes<'_>, RuntimeError> {
        Sizes::of(&self.plan, call)
    }

    /// The slots of this call's temporaries (see [`Slots`]): each, in the
    /// order of their first use, takes the smallest free slot that holds
    /// it (else the largest free one, grown; else a new one). A result's
    /// memory, and a buffer no kernel names, has no slot: its own memory.
    fn slots(&self, sizes: &Sizes<'_>) -> Result<Slots, RuntimeError> {
        let p = &self.plan;
        let mut of = vec![None; p.buffers.len()];
        let (mut words, mut busy_until): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
        for &(first, last, b) in &self.shared {
            let need = sizes.stored_bytes(b)?.div_ceil(8).max(1);
            let free = || (0..words.len()).filter(|&s| busy_until[s] < first);
            let slot = free().filter(|&s| words[s] >= need).min_by_key(|&s| words[s]).or_else(|| free().max_by_key(|&s| words[s]));
            let slot = slot.unwrap_or_else(|| {
                words.push(0);
                busy_until.push(0);
                words.len() - 1
            });
            words[slot] = words[slot].max(need);
            busy_until[slot] = last;
            of[b] = Some(slot);
        }
        Ok(Slots { of, words })
    }

    /// For each result, the buffer it lives in (through reshapes) when a
    /// kernel writes that buffer and no earlier result lives there: the
    /// result is then written in its own storage. Any other result (an
    /// argument, a weight, a value returned twice) is copied out.
    fn result_roots(&self) -> Vec<Option<usize>> {
        let mut roots: Vec<Option<usize>> = Vec::with_capacity(self.plan.results.len());
        for &r in &self.plan.results {
            let root = self.plan.alias_root(r);
            let own = self.plan.buffers[root].kind == BufferKind::Temporary && !roots.contains(&Some(root));
            roots.push(own.then_some(root));
        }
        roots
    }
}

/// How a product reads the weight that is its B (see [`weight_reads`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WeightRead {
    /// From panels packed once into the call's store, laid out for the
    /// bf16 dot products (AMX tiles, `vdpbf16ps`) where the product suits
    /// them (and any product whose B is no weight, which has nothing to
    /// pack there).
    Packed,
    /// From panels packed once for the FMA path: the plan also reads this
    /// weight transposed.
    Panels,
    /// Packed at each call, as a product of two activations: the plan's
    /// first product of this weight reads it the other way, and keeps the
    /// one packed copy.
    AtCall,
}

/// For each kernel, how its product reads its weight. A weight the plan's
/// products read in both orientations (a training step's `x @ w` and
/// `dy @ w^T`) is packed once, in the orientation of the first product
/// that reads it (the forward's), as FMA panels: the AMX tiles' split of
/// an f32 weight takes 1.5 times the weight, and panels of both
/// orientations twice it (GPT-2 small's step: 1.25 GB of panels for 0.5
/// GB of weights with both, 0.49 GB with one, the process's peak 3.02 ->
/// 1.96 GB, PyTorch eager's 2.24; the transposed products, packing at
/// their calls, cost the step 5-10%).
fn weight_reads(plan: &NativePlan) -> Vec<WeightRead> {
    let orientation = |g: &GemmPlan| {
        let axis = |l: usize| g.b.index.iter().position(|&i| i == Index::Loop(l));
        Some((plan.weight_behind(g.b.buffer)?, axis(g.cols?)? < axis(g.inner)?))
    };
    let orientations: Vec<Option<(&str, bool)>> = plan
        .kernels
        .iter()
        .map(|k| match &k.strategy {
            Strategy::Gemm(g) => orientation(g),
            _ => None,
        })
        .collect();
    // Each weight's first orientation, and whether it is read the other way too.
    let mut seen: std::collections::HashMap<&str, (bool, bool)> = std::collections::HashMap::new();
    for &(name, transposed) in orientations.iter().flatten() {
        let (first, both) = seen.entry(name).or_insert((transposed, false));
        *both |= *first != transposed;
    }
    orientations
        .iter()
        .map(|o| match o.map(|(name, transposed)| (seen[name], transposed)) {
            Some(((first, true), transposed)) if transposed != first => WeightRead::AtCall,
            Some(((_, true), _)) => WeightRead::Panels,
            _ => WeightRead::Packed,
        })
        .collect()
}

/// The temporaries that may share memory (not a result's), each with the
/// first and the last kernel that read or write it (through any alias,
/// its index checks included), both included, in the order of their first
/// use. None when some kernel does not name its footprint: each temporary
/// then has memory of its own.
fn shareable(plan: &NativePlan) -> Vec<(usize, usize, usize)> {
    if plan.kernels.iter().any(|k| k.footprint.is_empty()) {
        return Vec::new();
    }
    let mut life: Vec<Option<(usize, usize)>> = vec![None; plan.buffers.len()];
    for (k, kernel) in plan.kernels.iter().enumerate() {
        let touched = kernel.footprint.iter().map(|a| a.buffer).chain([kernel.output]).chain(kernel.checks.iter().map(|c| c.buffer));
        for b in touched {
            if let Some(l) = life.get_mut(plan.alias_root(b)) {
                *l = Some(l.map_or((k, k), |(first, _)| (first, k)));
            }
        }
    }
    let results: Vec<usize> = plan.results.iter().map(|&r| plan.alias_root(r)).collect();
    let mut shared: Vec<(usize, usize, usize)> = (0..plan.buffers.len())
        .filter(|&b| plan.buffers[b].kind == BufferKind::Temporary && !results.contains(&b))
        .filter_map(|b| life[b].map(|(first, last)| (first, last, b)))
        .collect();
    shared.sort_unstable();
    shared
}

/// The memory plan of a call's temporaries: temporaries whose lifetimes do
/// not overlap share a slot (the kernels write every element of their
/// output before reading it, so what an earlier one left there is never
/// read); the slot of each buffer, and each slot's size in words.
struct Slots {
    of: Vec<Option<usize>>,
    words: Vec<usize>,
}

/// Per-thread scratch of the matrix products and attention tiles, and
/// packed B shared by a product's parts, are counted for this many threads:
/// the machine's, asked once (`available_parallelism` reads the cgroup's
/// files each time, 25 us here: more than a tiny call's whole run).
fn scratch_threads() -> u128 {
    static THREADS: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u128))
}

impl Execute for NativeFunction {
    /// A call with work to split runs inside the pool; one without (every
    /// kernel below the size where splitting pays) runs on the calling
    /// thread, which saves the hand-over to a worker and back.
    fn execute(&self, call: &CheckedCall<'_>, into: Option<&mut TensorMut<'_>>, pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        call.require(&self.signature)?;
        let sizes = self.sizes(call)?;
        sizes.check_work(&self.signature.name)?;
        let threads = pool.threads();
        if threads > 1 && self.plan.kernels.iter().any(|k| splits(&sizes, k, threads)) {
            pool.install(|| self.run(&sizes, call, into, threads))
        } else {
            self.run(&sizes, call, into, 1)
        }
    }

    fn work(&self, call: &CheckedCall<'_>) -> Result<u128, RuntimeError> {
        let sizes = self.sizes(call)?;
        Ok(sizes.work())
    }

    /// Every temporary (all live for the whole call, rounded up to whole
    /// words as the driver allocates them), the result unless the caller
    /// gives its buffer, and the products' and attention tiles' scratch:
    /// per thread, packed panels and a tile; a product of half floats
    /// also accumulates in an f32 copy of its output; attention keeps a
    /// tile of scores and of outputs per task; the weights the products
    /// will pack into the call's store. The temporaries kept from earlier
    /// calls are reusable.
    fn peak(&self, call: &CheckedCall<'_>, into: bool) -> Peak {
        let p = &self.plan;
        // A size the call does not give fails the call when it runs.
        let Ok(sizes) = self.sizes(call) else { return Peak::default() };
        let bytes_of = |b: usize| sizes.shape(b).iter().fold(p.buffers[b].dtype.size_bytes() as u128, |a, &s| a.saturating_mul(s as u128));
        let roots = self.result_roots();
        let Ok(slots) = self.slots(&sizes) else { return Peak::default() };
        let mut bytes: u128 = slots.words.iter().fold(0, |total, &w| total.saturating_add(w as u128 * 8));
        for (b, buffer) in p.buffers.iter().enumerate() {
            if buffer.kind == BufferKind::Temporary && slots.of[b].is_none() {
                let own = if roots.contains(&Some(b)) { if into { 0 } else { bytes_of(b) } } else { bytes_of(b).div_ceil(8).max(1) * 8 };
                bytes = bytes.saturating_add(own);
            }
        }
        for (&r, root) in p.results.iter().zip(&roots) {
            if root.is_none() && !into {
                bytes = bytes.saturating_add(bytes_of(r));
            }
        }
        // The products' and attention's scratch: each thread keeps its own,
        // grown to the largest a kernel asks (kernels run one after the
        // other), so the largest of each kind counts, not their sum.
        let threads = scratch_threads();
        let (mut products, mut attention) = (0u128, 0u128);
        for k in &p.kernels {
            let (kind, extra) = match &k.strategy {
                Strategy::Nest(_) => continue,
                Strategy::Gemm(g) => {
                    let micro = p.microkernels.get(g.microkernel);
                    let (mr, nr) = micro.map_or((1, 1), |m| (u128::from(m.rows), u128::from(m.cols)));
                    let b = &g.blocking;
                    let (kc, mc, nc) = (u128::from(b.depth), u128::from(b.rows), u128::from(b.cols));
                    let dtype = p.buffers[k.output].dtype;
                    let wide: u128 = if dtype == DType::F64 { 8 } else { 4 };
                    let half = matches!(dtype, DType::F16 | DType::BF16);
                    let widened = if half { bytes_of(k.output).saturating_mul(2) } else { 0 };
                    (&mut products, threads.saturating_mul((mc * kc + kc * nc + mr * nr) * wide + 256) + crate::gemm::SHARED_B_BYTES as u128 + widened)
                }
                Strategy::Attention(a) => {
                    let extent = |l: usize| k.loops.get(l).map_or(1, |&s| sizes.value(s) as u128);
                    let (width, depth) = (extent(a.cols), extent(k.loops.len().saturating_sub(1)));
                    let micro = p.microkernels.get(a.microkernel);
                    let (mr, nr) = micro.map_or((1, 1), |m| (u128::from(m.rows.max(1)), u128::from(m.cols.max(1))));
                    let (rows, keys) = (u128::from(a.tile.0), u128::from(a.tile.1));
                    let padded = |count: u128, to: u128| count.div_ceil(to).saturating_mul(to);
                    // f32s: the tile's scores, accumulated rows and statistics;
                    // the panels of the queries, keys, probabilities and
                    // values (or the half floats' widened tiles, no larger).
                    let tile = rows.saturating_mul(keys.saturating_add(width)).saturating_add(2 * rows + 1);
                    let panels = padded(rows, mr)
                        .saturating_mul(depth.saturating_add(keys))
                        .saturating_add(padded(keys, nr).saturating_mul(depth))
                        .saturating_add(padded(width, nr).saturating_mul(keys));
                    (&mut attention, threads.saturating_mul(tile.saturating_add(panels).saturating_mul(4)))
                }
            };
            *kind = (*kind).max(extra);
        }
        bytes = bytes.saturating_add(products).saturating_add(attention);
        // The weights the products pack into the call's store (each weight
        // whole and once, in its largest packed form here: widened to the
        // microkernel's type, or split into the bf16 dot products' parts
        // where it is read one way only), less what the store holds
        // already: the first call packs them, and they stay.
        if let Some(store) = call.packed_weights() {
            let mut packed: Vec<(usize, bool)> = p
                .kernels
                .iter()
                .zip(&self.weight_reads)
                .filter_map(|(k, &read)| match &k.strategy {
                    Strategy::Gemm(g) => p.weight_behind(g.b.buffer).map(|_| (p.alias_root(g.b.buffer), read == WeightRead::Packed)),
                    _ => None,
                })
                .collect();
            packed.sort_unstable();
            packed.dedup_by_key(|(w, _)| *w);
            let needed = packed.iter().fold(0u128, |total, &(w, tiles)| {
                let dtype = p.buffers[w].dtype;
                total.saturating_add((bytes_of(w) / dtype.size_bytes() as u128).saturating_mul(crate::gemm::packed_bytes_per_element(dtype, tiles)))
            });
            bytes = bytes.saturating_add(needed.saturating_sub(u128::from(store.bytes())));
        }
        let reusable = self.temporaries.lock().map_or(0, |kept| kept.iter().map(|v| v.len() as u128 * 8).sum());
        Peak { bytes, reusable }
    }
}

/// Whether a kernel would split its work across `threads` threads at
/// these sizes (the same conditions its runner applies).
fn splits(sizes: &Sizes<'_>, k: &KernelPlan, threads: usize) -> bool {
    let extents = sizes.extents(k);
    match &k.strategy {
        Strategy::Nest(n) => nest_splits(&extents, n),
        Strategy::Gemm(g) => work(&extents) >= PARALLEL_WORK || work(&g.batch.iter().map(|&l| extents[l]).collect::<Vec<_>>()) >= threads,
        Strategy::Attention(a) => attention_tasks(&extents, a) > 1,
    }
}

/// The product of some extents (saturating: it is compared with a bound).
fn work(extents: &[usize]) -> usize {
    extents.iter().fold(1usize, |a, &e| a.saturating_mul(e))
}

/// Whether a nest over these loop extents splits its outer loop (or its
/// flat leading loops) across threads: a parallel loop of more than one
/// position, and enough work.
fn nest_splits(extents: &[usize], nest: &Nest) -> bool {
    nest.parallel && !extents.is_empty() && work(&extents[..nest.flat.clamp(1, extents.len())]) > 1 && work(&extents[..nest.loops]) >= PARALLEL_WORK
}

/// An attention kernel's tasks: one per position of the batch loops and
/// tile of rows.
fn attention_tasks(extents: &[usize], a: &AttentionPlan) -> usize {
    a.batch.iter().fold(extents[a.rows].div_ceil(a.tile.0 as usize), |n, &l| n.saturating_mul(extents[l]))
}

impl NativeFunction {
    fn run(&self, sizes: &Sizes<'_>, call: &CheckedCall<'_>, mut into: Option<&mut TensorMut<'_>>, threads: usize) -> Result<Vec<HostTensor>, RuntimeError> {
        let p = &self.plan;
        let roots = self.result_roots();
        let lengths = p.results.iter().map(|&r| sizes.elements(r)).collect::<Result<Vec<_>, _>>()?;
        if let Some(out) = into.as_deref() {
            let ([result], [len]) = (p.results.as_slice(), lengths.as_slice()) else {
                return Err(RuntimeError::Internal(format!("a function of {} results was given one output buffer", p.results.len())));
            };
            let dtype = p.buffers[*result].dtype;
            if out.dtype() != dtype || out.len() != *len {
                return Err(HostError::OutputBuffer { expected_dtype: dtype, expected_len: *len, dtype: out.dtype(), len: out.len() }.into());
            }
        }
        let checking = profiling().map(|_| std::time::Instant::now());
        let memory = sizes.memory(call)?;
        sizes.check_footprints(&memory)?;
        let checked = checking.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let fault = p.fault_buffer();
        // The storage of each result a kernel writes (unless it is the caller's buffer).
        let mut result_data: Vec<Option<TensorData>> = Vec::with_capacity(roots.len());
        for ((&r, root), &len) in p.results.iter().zip(&roots).zip(&lengths) {
            result_data.push(match (&into, root) {
                (None, Some(_)) => Some(room(p.buffers[r].dtype, len)?),
                _ => None,
            });
        }
        // Host scalars live here for the call; temporaries in `storage`.
        let mut scalars: Vec<u64> = Vec::new();
        let mut scalar_of = vec![None; p.buffers.len()];
        for (b, buffer) in p.buffers.iter().enumerate() {
            if let BufferKind::Input(i) = buffer.kind {
                let Some(scalar) = call.scalar(i) else { continue };
                scalar_of[b] = Some(scalars.len());
                scalars.push(u64::from_ne_bytes(scalar.to_ne_bytes()));
            }
        }
        let mut pool = std::mem::take(&mut *self.temporaries.lock().map_err(|_| RuntimeError::Internal("a previous call panicked".into()))?);
        let mut storage: Vec<Vec<u64>> = Vec::new();
        // The shared slots' memory, each from the kept temporaries where one fits.
        let slots = self.slots(sizes)?;
        let mut slot_memory: Vec<*mut u8> = Vec::with_capacity(slots.words.len());
        for &words in &slots.words {
            let mut v = take_kept(&mut pool, words)?;
            slot_memory.push(v.as_mut_ptr().cast::<u8>());
            storage.push(v);
        }
        let mut table: Vec<*mut u8> = Vec::with_capacity(p.buffers.len());
        for (b, buffer) in p.buffers.iter().enumerate() {
            let ptr = match &buffer.kind {
                // An empty argument's pointer may dangle; a kernel may still
                // read it (a concatenation evaluates every operand's clamped
                // position), so it reads zeros of its own instead.
                BufferKind::Input(_) | BufferKind::Weight(_) if sizes.is_empty(b) => {
                    let words = sizes.stored_bytes(b)?.div_ceil(8);
                    let mut v = fresh::<u64>(words)?;
                    v.resize(words, 0);
                    let ptr = v.as_mut_ptr().cast::<u8>();
                    storage.push(v);
                    ptr
                }
                BufferKind::Input(i) => match (call.tensor(*i), scalar_of[b]) {
                    (Some(t), _) => t.as_ptr() as *mut u8,
                    (None, Some(s)) => (&mut scalars[s] as *mut u64).cast::<u8>(),
                    (None, None) => return Err(RuntimeError::Internal(format!("no argument {i}"))),
                },
                BufferKind::Weight(name) => call.weight(name).ok_or_else(|| crate::error::CallError::MissingWeight(name.clone()))?.as_ptr() as *mut u8,
                BufferKind::Alias(a) => table[*a],
                // Given per tile by the attention kernel that uses it.
                BufferKind::Tile => std::ptr::null_mut(),
                BufferKind::Temporary if roots.contains(&Some(b)) => {
                    let i = roots.iter().position(|&r| r == Some(b)).unwrap_or(0);
                    match (into.as_deref_mut(), result_data[i].as_mut()) {
                        (Some(out), _) => out.as_mut_ptr(),
                        (None, Some(d)) => d.as_mut_ptr(),
                        (None, None) => return Err(RuntimeError::Internal("a result has no storage".into())),
                    }
                }
                BufferKind::Temporary if slots.of[b].is_some() => slot_memory[slots.of[b].unwrap_or(0)],
                BufferKind::Temporary | BufferKind::Fault => {
                    let words = sizes.stored_bytes(b)?.div_ceil(8).max(1);
                    let mut v = take_kept(&mut pool, words)?;
                    if buffer.kind == BufferKind::Fault {
                        // Zeros, then each buffer's length in bytes (a tile's
                        // scratch, which the kernels do not check, as the largest).
                        let bytes = |(b, l): (usize, &Option<usize>)| {
                            l.and_then(|l| l.checked_mul(self.plan.buffers[b].dtype.size_bytes())).map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX))
                        };
                        let lengths = memory.iter().enumerate().map(bytes);
                        let words = std::iter::repeat_n(0, nax_contract::plan::FAULT_WORDS).chain(lengths);
                        v.iter_mut().zip(words).for_each(|(w, x)| *w = x as u64);
                    }
                    let ptr = v.as_mut_ptr().cast::<u8>();
                    storage.push(v);
                    ptr
                }
            };
            table.push(ptr);
        }
        let table = Table(table);
        let micro = |index: usize, blocking| {
            let entry = self.entries[p.kernels.len() + index];
            Micro { entry, shape: p.microkernels[index], blocking }
        };
        // Each kernel's time, then the footprint check's.
        let mut profile = profiling().map(|_| {
            let mut times = vec![0.0; p.kernels.len() + 1];
            times[p.kernels.len()] = checked;
            times
        });
        for (index, (kernel, &f)) in p.kernels.iter().zip(&self.entries).enumerate() {
            if call.interrupted() {
                return Err(RuntimeError::Interrupted { kernel: index });
            }
            for check in &kernel.checks {
                check_indices(sizes, p, check, &table)?;
            }
            // A kernel with nothing to write is not run: its loops may
            // still be long (`[4294967296, 0]` is 2^32 empty rows).
            if sizes.is_empty(kernel.output) {
                continue;
            }
            let started = profile.is_some().then(std::time::Instant::now);
            match &kernel.strategy {
                Strategy::Nest(n) => run_nest(sizes, kernel, n, f, &table, threads),
                Strategy::Gemm(g) => run_gemm(
                    sizes,
                    kernel,
                    g,
                    (f, micro(g.microkernel, g.blocking)),
                    &table,
                    threads,
                    match self.weight_reads[index] {
                        WeightRead::Packed => call.packed_weights().map(|store| (store, true)),
                        WeightRead::Panels => call.packed_weights().map(|store| (store, false)),
                        WeightRead::AtCall => None,
                    },
                ),
                Strategy::Attention(a) => run_attention(sizes, kernel, a, (f, micro(a.microkernel, a.blocking)), &table, threads),
            }
            if let (Some(p), Some(t)) = (profile.as_mut(), started) {
                p[index] += t.elapsed().as_secs_f64();
            }
            if let Some(fault) = fault {
                // SAFETY: the fault record is a zeroed buffer of FAULT_WORDS
                // i64 words this call allocated, which the kernels have
                // finished writing (they ran to completion above).
                let words = unsafe { std::slice::from_raw_parts(table.0[fault].cast::<i64>(), nax_contract::plan::FAULT_WORDS) };
                if words[0] != 0 {
                    let buffer = usize::try_from(words[2]).unwrap_or(usize::MAX);
                    let bytes = self.plan.buffers.get(buffer).map_or(1, |b| b.dtype.size_bytes());
                    let len = memory.get(buffer).copied().flatten().map_or(0, |l| l.saturating_mul(bytes));
                    return Err(RuntimeError::OutOfBounds { kernel: usize::try_from(words[1]).unwrap_or(usize::MAX), buffer, offset: words[3], len });
                }
            }
        }
        if let Some(p) = profile {
            self.report_profile(sizes, p);
        }
        storage.append(&mut pool);
        if let Ok(mut kept) = self.temporaries.lock() {
            *kept = storage;
        }
        let mut results = Vec::with_capacity(p.results.len());
        for (i, ((&r, root), &len)) in p.results.iter().zip(&roots).zip(&lengths).enumerate() {
            let dtype = p.buffers[r].dtype;
            match (into.as_deref_mut(), root, result_data[i].take()) {
                // A kernel wrote the caller's buffer.
                (Some(_), Some(_), _) => {}
                // The result is an argument, a weight or an earlier result (through reshapes): copied.
                (Some(out), None, _) => {
                    // SAFETY: the result buffer holds `len` elements of
                    // `dtype`, as the caller's buffer does (checked above);
                    // the caller's is borrowed exclusively, so they do not overlap.
                    unsafe { std::ptr::copy_nonoverlapping(table.0[r], out.as_mut_ptr(), len * dtype.size_bytes()) };
                }
                (None, None, _) => {
                    // SAFETY: as above, the result's buffer holds `len` elements.
                    let data = unsafe { read_data(table.0[r], dtype, len) };
                    results.push(HostTensor::new(data, sizes.shape(r), self.result_names(i))?);
                }
                (None, Some(_), Some(mut d)) => {
                    // SAFETY: every kernel writes each element of its output, and
                    // a kernel wrote this result's buffer.
                    unsafe { d.set_len(len) };
                    results.push(HostTensor::new(d, sizes.shape(r), self.result_names(i))?);
                }
                (None, Some(_), None) => return Err(RuntimeError::Internal("a result has no storage".into())),
            }
        }
        Ok(results)
    }

    /// The axis names of result `i`.
    fn result_names(&self, i: usize) -> Vec<Option<String>> {
        self.signature.results.get(i).map_or_else(Vec::new, |r| r.ty.names())
    }
}

/// `NAX_PROFILE=N`: every N calls of a function, the driver prints to
/// stderr each kernel's mean time over those calls (the slowest first,
/// the [`profiled_kernels`] slowest), its strategy and its loops'
/// extents: where a model's time goes.
fn profiling() -> Option<usize> {
    static EVERY: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| std::env::var("NAX_PROFILE").ok().and_then(|v| v.parse().ok()).filter(|&n: &usize| n > 0))
}

/// How many kernels a profile lists: `NAX_PROFILE_TOP`, else 40.
fn profiled_kernels() -> usize {
    std::env::var("NAX_PROFILE_TOP").ok().and_then(|v| v.parse().ok()).unwrap_or(40)
}

impl NativeFunction {
    /// Adds a call's kernel times (and its footprint check's, last) to the
    /// profile; prints it every `NAX_PROFILE` calls.
    fn report_profile(&self, sizes: &Sizes<'_>, times: Vec<f64>) {
        let Some(every) = profiling() else { return };
        let Ok(mut kept) = self.profile.lock() else { return };
        let (calls, total) = &mut *kept;
        total.resize(times.len(), 0.0);
        total.iter_mut().zip(&times).for_each(|(t, x)| *t += x);
        *calls += 1;
        if *calls < every {
            return;
        }
        let mut order: Vec<usize> = (0..total.len()).collect();
        order.sort_by(|&a, &b| total[b].total_cmp(&total[a]));
        let sum: f64 = total.iter().sum();
        let mut text = format!("nax profile of `{}`: {:.3} ms per call over {calls} calls\n", self.signature.name, sum / *calls as f64 * 1e3);
        let check = self.plan.kernels.len();
        for i in order.into_iter().filter(|&i| i != check).take(profiled_kernels()) {
            let k = &self.plan.kernels[i];
            let kind = match &k.strategy {
                Strategy::Nest(_) => "nest",
                Strategy::Gemm(_) => "gemm",
                Strategy::Attention(_) => "attention",
            };
            let extents: Vec<String> = sizes.extents(k).iter().map(usize::to_string).collect();
            text += &format!(
                "  {:8.3} ms  {:5.1}%  kernel {i:3} {kind:9} -> %{} loops [{}]\n",
                total[i] / *calls as f64 * 1e3,
                total[i] / sum * 100.0,
                k.output,
                extents.join(" ")
            );
        }
        if let Some(&t) = total.get(check) {
            text += &format!("  {:8.4} ms  {:6.3}%  the footprint check\n", t / *calls as f64 * 1e3, t / sum * 100.0);
        }
        eprint!("{text}");
        *calls = 0;
        total.iter_mut().for_each(|t| *t = 0.0);
    }
}

/// Checks that every index in a buffer of `take`'s indices lies in its
/// axis, before any kernel reads the gather.
fn check_indices(sizes: &Sizes<'_>, p: &NativePlan, check: &IndexCheck, table: &Table) -> Result<(), RuntimeError> {
    let bytes = sizes.elements(check.buffer)? * p.buffers[check.buffer].dtype.size_bytes();
    // SAFETY: the buffer holds `bytes` bytes, written by an earlier kernel
    // or given by the caller.
    let indices = unsafe { std::slice::from_raw_parts(table.0[check.buffer].cast_const(), bytes) };
    out_of_range(sizes, p, check, indices)
}

/// The error of the first index of `indices` (the bytes of `check`'s
/// buffer, `i32` or `i64` by the plan) outside `[0, bound)`, if any: what
/// every device runs before a `take` reads them.
pub(crate) fn out_of_range(sizes: &Sizes<'_>, p: &NativePlan, check: &IndexCheck, indices: &[u8]) -> Result<(), RuntimeError> {
    let bound = sizes.value(check.bound) as u64;
    let outside = |x: i64| u64::try_from(x).map_or(true, |x| x >= bound);
    let first = match p.buffers[check.buffer].dtype {
        DType::I32 => indices.chunks_exact(4).map(|c| i64::from(i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))).find(|&x| outside(x)),
        _ => indices.chunks_exact(8).map(|c| i64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).find(|&x| outside(x)),
    };
    match first {
        Some(index) => Err(RuntimeError::IndexOutOfRange { op: "take".into(), axis: check.axis.clone(), index, size: bound }),
        None => Ok(()),
    }
}

/// Runs a nest through its compiled function, its outer loop split across
/// the pool's threads in chunks when there is enough work.
fn run_nest(sizes: &Sizes<'_>, kernel: &KernelPlan, nest: &Nest, f: KernelFn, table: &Table, threads: usize) {
    let extents = sizes.extents(kernel);
    let n = if nest.parallel { extents.iter().take(nest.flat.max(1)).product() } else { 0 };
    let (bufs, sizes_ptr) = (table.0.as_ptr() as usize, sizes.slots.as_ptr() as usize);
    // SAFETY: the kernel was compiled from this plan (`NativeFunction::new`);
    // the table holds every buffer at its size for these slots.
    let call = |begin: usize, end: usize| unsafe { f(bufs as *const *mut u8, sizes_ptr as *const i64, begin as i64, end as i64) };
    if threads > 1 && nest_splits(&extents, nest) {
        // Chunks of whole grains (tiles): only the last grain may be partial.
        let grain = nest.grain.max(1);
        let grains = n.div_ceil(grain);
        let chunks = grains.min(threads * 4);
        let edge = |c: usize| (c * grains / chunks * grain).min(n);
        (0..chunks).into_par_iter().for_each(|c| call(edge(c), edge(c + 1)));
    } else {
        call(0, n);
    }
}

/// Runs a kernel planned as matrix products through the program's
/// microkernel ([`crate::gemm`]): one product per position of the batch
/// loops, the batch split across threads when it has enough positions,
/// else each product; with an epilogue, the kernel's compiled function
/// runs over each tile of the output as soon as its products are done.
///
/// Where B is a weight (or a reshape of one) and the call's weights keep
/// packed panels ([`crate::packed::Weights::packed`]), B is packed at the first
/// call and read from there after: for the bf16 dot products only where
/// the store comes with `true` (see [`weight_reads`]).
fn run_gemm(
    sizes: &Sizes<'_>,
    kernel: &KernelPlan,
    g: &GemmPlan,
    entries: (KernelFn, Micro),
    table: &Table,
    threads: usize,
    store: Option<(&PackedWeights, bool)>,
) {
    let (epilogue_fn, micro) = entries;
    let p = sizes.plan;
    let extents = sizes.extents(kernel);
    let loops = extents.len();
    let (so, bo) = sizes.output_steps(kernel);
    let (sa, ba) = sizes.steps(loops, &g.a);
    let (sb, bb) = sizes.steps(loops, &g.b);
    let along = |s: &[isize], l: Option<usize>| l.map_or(0, |l| s[l]);
    let (mut m, mut n, k) = (g.rows.map_or(1, |l| extents[l]), g.cols.map_or(1, |l| extents[l]), extents[g.inner]);
    // A batch loop that continues the rows (or columns) in memory, in the
    // output and the one operand it indexes, joins them: one larger
    // product instead of several (`[b n D] @ [D F]` is one `(b n) x D`
    // product). Not under an epilogue, which indexes the loops themselves.
    let mut batch_loops = Vec::new();
    for &l in g.batch.iter().rev() {
        let joins = |along: Option<usize>, len: usize, own: &[isize], other: &[isize]| {
            !g.epilogue && along.is_some_and(|r| so[l] == so[r] * len as isize && own[l] == own[r] * len as isize && other[l] == 0)
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
    let size = dtype.size_bytes();
    let (out_ptr, a_ptr, b_ptr) = (table.0[kernel.output] as usize, table.0[g.a.buffer] as usize, table.0[g.b.buffer] as usize);
    let base = sizes.slots.len();
    let weight = store.and_then(|(store, tiles)| p.weight_behind(g.b.buffer).map(|name| (store, tiles, name)));
    let product = |position: usize, threads: usize| {
        let (mut oo, mut oa, mut ob) = (bo, ba, bb);
        let mut slots = sizes.slots.clone();
        slots.resize(base + loops + 2, 0);
        let mut rest = position;
        for &l in batch_loops.iter().rev() {
            let at = rest % extents[l];
            rest /= extents[l];
            slots[base + l] = at as i64;
            let at = at as isize;
            oo += at * so[l];
            oa += at * sa[l];
            ob += at * sb[l];
        }
        let product = Product {
            m,
            n,
            k,
            a: Strided::new(a_ptr, oa, size, along(&sa, g.rows), sa[g.inner]),
            b: Strided::new(b_ptr, ob, size, sb[g.inner], along(&sb, g.cols)),
            c: Strided::new(out_ptr, oo, size, along(&so, g.rows), along(&so, g.cols)),
            accumulate: false,
        };
        // Each block's slots, in a buffer each thread keeps (this runs once per block).
        let tile = |first_row: usize, rows: usize, first_col: usize, cols: usize| {
            with_scratch(&TILE_SLOTS, slots.len() * 8, |at| {
                // SAFETY: the scratch holds `slots.len()` aligned i64s, this thread's alone.
                let own = unsafe { std::slice::from_raw_parts_mut(at as *mut i64, slots.len()) };
                own.copy_from_slice(&slots);
                if let Some(l) = g.rows {
                    own[base + l] = first_row as i64;
                }
                if let Some(l) = g.cols {
                    own[base + l] = first_col as i64;
                }
                own[base + loops] = rows as i64;
                own[base + loops + 1] = cols as i64;
                // SAFETY: the epilogue was compiled from this plan's kernel; the
                // tile is inside the output, whose products are complete.
                unsafe { epilogue_fn(table.0.as_ptr(), own.as_ptr(), 0, 0) };
            })
        };
        let epilogue: Option<crate::gemm::Epilogue<'_>> = if g.epilogue { Some(&tile) } else { None };
        let packed = weight.and_then(|(store, tiles, name)| {
            let packing = crate::gemm::packing(&product, dtype, &micro, threads, PARALLEL_WORK, tiles)?;
            let key = PackKey {
                weight: name.to_string(),
                offset: ob,
                steps: (sb[g.inner], along(&sb, g.cols)),
                depth: k,
                cols: n,
                dtype,
                microkernel: micro.entry as usize,
                packing,
            };
            // SAFETY: as for the product below, for its B.
            store.get_or_pack(key, || unsafe { crate::gemm::pack_b(product, dtype, &micro, threads, PARALLEL_WORK, tiles) })
        });
        // SAFETY: the offsets and steps stay inside the buffers (the plan
        // validated; the kernel verified against the program); the output
        // aliases neither operand; the microkernel is the plan's, of the
        // output's dtype (validated); a packed B is this product's, packed
        // with the same microkernel, threads and work.
        unsafe { multiply(product, dtype, &micro, threads, PARALLEL_WORK, epilogue, packed.as_deref()) };
    };
    if threads > 1 && batch >= threads {
        (0..batch).into_par_iter().for_each(|position| product(position, 1));
    } else {
        (0..batch).for_each(|position| product(position, threads));
    }
}

/// Runs an attention kernel (see [`AttentionPlan`]): one task per position
/// of the batch loops and tile of rows, split across threads; per tile of
/// keys the mask shows (a probe tells), the scores' product into the
/// tile's scratch, the compiled tile code (logits, online softmax,
/// rescaling), and, unless every logit of the tile is `-inf`, the product
/// of the probabilities and the values added to the rows' accumulated
/// output; at the end each row is divided by its sum into the output.
///
/// The compiled tile gets, after the plan's size slots, the tile's first
/// position along each loop, then its number of rows and of keys, then 1
/// to probe the mask or 0 to compute; and the tile's scratch buffers.
///
/// Queries, keys, values and output are of the output's element type (the
/// plan validated f32, bf16 or f16); the scores, probabilities and
/// accumulated rows are f32, half floats widened as their panels are
/// packed and each output element rounded once.
fn run_attention(sizes: &Sizes<'_>, kernel: &KernelPlan, a: &AttentionPlan, entries: (KernelFn, Micro), table: &Table, threads: usize) {
    match sizes.plan.buffers[kernel.output].dtype {
        DType::BF16 => run_attention_as::<half::bf16>(sizes, kernel, a, entries, table, threads),
        DType::F16 => run_attention_as::<half::f16>(sizes, kernel, a, entries, table, threads),
        _ => run_attention_as::<f32>(sizes, kernel, a, entries, table, threads),
    }
}

/// [`run_attention`] for `T` queries, keys, values and output.
fn run_attention_as<T: Element<Wide = f32>>(
    sizes: &Sizes<'_>,
    kernel: &KernelPlan,
    a: &AttentionPlan,
    entries: (KernelFn, Micro),
    table: &Table,
    threads: usize,
) {
    let (tile, micro) = entries;
    let extents = sizes.extents(kernel);
    let loops = extents.len();
    let depth = loops - 1;
    let (so, bo) = sizes.output_steps(kernel);
    let (sq, bq) = sizes.steps(loops, &a.q);
    let (sk, bk) = sizes.steps(loops, &a.k);
    let (sv, bv) = sizes.steps(loops, &a.v);
    let (n, m, d, width) = (extents[a.rows], extents[a.keys], extents[depth], extents[a.cols]);
    let (tile_rows, tile_keys) = (a.tile.0 as usize, a.tile.1 as usize);
    let tasks = attention_tasks(&extents, a);
    let blocks = n.div_ceil(tile_rows);
    let base = sizes.slots.len();
    let (out_ptr, q_ptr, k_ptr, v_ptr) =
        (table.0[kernel.output] as usize, table.0[a.q.buffer] as usize, table.0[a.k.buffer] as usize, table.0[a.v.buffer] as usize);
    let task = |t: usize| {
        let (position, block) = (t / blocks, t % blocks);
        let first_row = block * tile_rows;
        let rows = tile_rows.min(n - first_row);
        let mut slots = sizes.slots.clone();
        slots.resize(base + loops + 3, 0);
        let (mut oo, mut oq, mut ok, mut ov) = (bo, bq, bk, bv);
        let mut rest = position;
        for &l in a.batch.iter().rev() {
            let at = rest % extents[l];
            rest /= extents[l];
            slots[base + l] = at as i64;
            let at = at as isize;
            (oo, oq, ok, ov) = (oo + at * so[l], oq + at * sq[l], ok + at * sk[l], ov + at * sv[l]);
        }
        let row = first_row as isize;
        (oo, oq) = (oo + row * so[a.rows], oq + row * sq[a.rows]);
        slots[base + a.rows] = first_row as i64;
        slots[base + loops] = rows as i64;
        let mut scores = vec![0f32; tile_rows * tile_keys];
        let mut acc = vec![0f32; tile_rows * width];
        let mut stats: Vec<f32> = (0..2 * tile_rows + 1).map(|i| if i % 2 == 0 { f32::NEG_INFINITY } else { 0.0 }).collect();
        let mut buffers = table.0.clone();
        buffers[a.scratch[0]] = scores.as_mut_ptr().cast();
        buffers[a.scratch[1]] = acc.as_mut_ptr().cast();
        buffers[a.scratch[2]] = stats.as_mut_ptr().cast();
        let f32_matrix = |ptr: usize, offset: isize, row_step: isize, col_step: isize| Strided::new(ptr, offset, 4, row_step, col_step);
        let matrix = |ptr: usize, offset: isize, row_step: isize, col_step: isize| Strided::new(ptr, offset, std::mem::size_of::<T>(), row_step, col_step);
        // More rows than a matrix-vector product: the queries packed into
        // the microkernel's panels once, for every tile of keys; each
        // tile's keys, probabilities and values packed once each (half
        // floats widened as they are packed). Fewer, the products run
        // unpacked, on f32 matrices: half floats are widened first.
        let (scores_panels, values_panels) = (rows > UNPACKED_ROWS && d > 0, rows > UNPACKED_ROWS && width > 0);
        let (mut q_panels, mut k_panels, mut p_panels, mut v_panels) = (Panels::default(), Panels::default(), Panels::default(), Panels::default());
        let mut queries = matrix(q_ptr, oq, sq[a.rows], sq[depth]);
        // SAFETY (both): the task's rows of q, `d` deep, are inside q (the plan validated).
        if scores_panels {
            unsafe { q_panels.pack_a::<T>(queries, rows, d, &micro) };
        } else {
            queries = unsafe { q_panels.widen::<T>(queries, rows, d) };
        }
        for first_key in (0..m).step_by(tile_keys) {
            let cols = tile_keys.min(m - first_key);
            slots[base + a.keys] = first_key as i64;
            slots[base + loops + 1] = cols as i64;
            let key = first_key as isize;
            // SAFETY: the offsets and steps stay inside q, k and v (the plan
            // validated, the kernel verified); the tile's scratch holds
            // `rows x cols` scores of row stride `tile_keys` and `rows x
            // width` outputs; the compiled tile reads and writes only the
            // scratch and what the kernel's loads name.
            unsafe {
                if a.masked {
                    slots[base + loops + 2] = 1;
                    tile(buffers.as_ptr(), slots.as_ptr(), 0, 0);
                    slots[base + loops + 2] = 0;
                    if stats[2 * tile_rows] == f32::NEG_INFINITY {
                        continue;
                    }
                }
                let scores_at = f32_matrix(scores.as_mut_ptr() as usize, 0, tile_keys as isize, 1);
                let qk = Product {
                    m: rows,
                    n: cols,
                    k: d,
                    a: queries,
                    b: matrix(k_ptr, ok + key * sk[a.keys], sk[depth], sk[a.keys]),
                    c: scores_at,
                    accumulate: false,
                };
                if scores_panels {
                    k_panels.pack_b::<T>(qk.b, qk.k, qk.n, &micro);
                    multiply_panels(&qk, &q_panels, &k_panels, &micro);
                } else {
                    let qk = Product { b: k_panels.widen::<T>(qk.b, qk.k, qk.n), ..qk };
                    multiply(qk, DType::F32, &micro, 1, usize::MAX, None, None);
                }
                tile(buffers.as_ptr(), slots.as_ptr(), 0, 0);
                if stats[2 * tile_rows] == f32::NEG_INFINITY {
                    continue;
                }
                let pv = Product {
                    m: rows,
                    n: width,
                    k: cols,
                    a: scores_at,
                    b: matrix(v_ptr, ov + key * sv[a.keys], sv[a.keys], sv[a.cols]),
                    c: f32_matrix(acc.as_mut_ptr() as usize, 0, width as isize, 1),
                    accumulate: true,
                };
                if values_panels {
                    p_panels.pack_a::<f32>(pv.a, pv.m, pv.k, &micro);
                    v_panels.pack_b::<T>(pv.b, pv.k, pv.n, &micro);
                    multiply_panels(&pv, &p_panels, &v_panels, &micro);
                } else {
                    let pv = Product { b: v_panels.widen::<T>(pv.b, pv.k, pv.n), ..pv };
                    multiply(pv, DType::F32, &micro, 1, usize::MAX, None, None);
                }
            }
        }
        let out = out_ptr as *mut T;
        let (row_step, col_step) = (so[a.rows], so[a.cols]);
        for (i, row) in acc.chunks_exact(width.max(1)).take(rows).enumerate() {
            // No keys at all: an empty sum, 0 (the softmax of nothing is empty).
            let scale = if m == 0 { 0.0 } else { 1.0 / stats[2 * i + 1] };
            let start = oo + i as isize * row_step;
            if col_step == 1 {
                // SAFETY: row `first_row + i`'s `width` columns are inside the output.
                let written = unsafe { std::slice::from_raw_parts_mut(out.offset(start), width) };
                written.iter_mut().zip(row).for_each(|(o, &x)| *o = T::narrow(x * scale));
                continue;
            }
            for (c, &x) in row.iter().enumerate() {
                // SAFETY: row `first_row + i` and column `c` are inside the output.
                unsafe { *out.offset(start + c as isize * col_step) = T::narrow(x * scale) };
            }
        }
    };
    if threads > 1 && tasks > 1 {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        (0..tasks).for_each(task);
    }
}
