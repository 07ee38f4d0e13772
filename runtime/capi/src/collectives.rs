//! A host's collectives across the C boundary (`nax_collectives`, the
//! book's chapter "The C ABI"): the struct of function pointers a host
//! fills from its engine (MPI, NCCL, gloo, its own) and passes to
//! `NAME_open_sharded`, seen by the runtime as its [`Collectives`]. A
//! host's function that fails returns nonzero with a message, which the
//! call reports as `NAX_ERR_COLLECTIVE`.

use crate::dlpack::{DLDataType, dl_dtype};
use crate::status::Failure;
use nax_contract::shard::ReduceOp;
use nax_runtime::{CollectiveError, Collectives, DType, Group, reduce_scatter_by_all_reduce};
use std::ffi::{CString, c_char, c_int, c_void};

/// `nax_group`: the ranks a collective runs among.
#[repr(C)]
#[derive(Debug)]
pub struct NaxGroup {
    /// The mesh axis it runs along (NUL-terminated).
    pub mesh_axis: *const c_char,
    /// The group's ranks, in order along the mesh axis.
    pub ranks: *const i32,
    /// How many.
    pub size: usize,
    /// This rank's position among them.
    pub index: usize,
}

/// `all_reduce`'s pointer: reduces `count` elements at `data` in place.
pub type AllReduceFn = unsafe extern "C" fn(*mut c_void, *const NaxGroup, DLDataType, i32, *mut c_void, usize, *mut c_char, usize) -> c_int;
/// `all_gather`'s pointer: `count` elements at `block` from each rank into `out`.
pub type AllGatherFn = unsafe extern "C" fn(*mut c_void, *const NaxGroup, DLDataType, *const c_void, usize, *mut c_void, *mut c_char, usize) -> c_int;
/// `reduce_scatter`'s pointer: `count` elements at `data` reduced, this rank's `count / size` into `out`.
pub type ReduceScatterFn = unsafe extern "C" fn(*mut c_void, *const NaxGroup, DLDataType, i32, *const c_void, usize, *mut c_void, *mut c_char, usize) -> c_int;

/// `nax_collectives`, as the host fills it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NaxCollectives {
    /// The host's, passed to every function.
    pub context: *mut c_void,
    /// This process's rank in the mesh.
    pub rank: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
    /// How many processes the engine has.
    pub size: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
    /// Required.
    pub all_reduce: Option<AllReduceFn>,
    /// Required.
    pub all_gather: Option<AllGatherFn>,
    /// May be NULL: a reduce-scatter is then an all-reduce of which the
    /// rank keeps its part.
    pub reduce_scatter: Option<ReduceScatterFn>,
}

/// The bytes a host's message may take, its NUL included.
const MESSAGE_BYTES: usize = 1024;

/// A host's collectives as the runtime calls them. The host's functions
/// are called on the thread that calls the model, one at a time per call.
pub struct HostCollectives {
    table: NaxCollectives,
    all_reduce: AllReduceFn,
    all_gather: AllGatherFn,
    rank: usize,
    size: usize,
}

// SAFETY: the host's context is only passed back to the host's own
// functions, which the ABI requires to be callable from the thread calling
// the model (a model's sharded calls are made one at a time, in the same
// order on every rank).
unsafe impl Send for HostCollectives {}
// SAFETY: as above.
unsafe impl Sync for HostCollectives {}

impl HostCollectives {
    /// The host's table, checked: every required function given, the rank
    /// within the size.
    ///
    /// # Safety
    /// `table`'s functions are callable with its context as ABI.md's
    /// chapter on sharded libraries says.
    pub unsafe fn new(table: &NaxCollectives) -> Result<HostCollectives, Failure> {
        let missing = |what: &str| Failure::argument(format!("nax_collectives.{what} is NULL: the host's engine must give it"));
        let rank_fn = table.rank.ok_or_else(|| missing("rank"))?;
        let size_fn = table.size.ok_or_else(|| missing("size"))?;
        let all_reduce = table.all_reduce.ok_or_else(|| missing("all_reduce"))?;
        let all_gather = table.all_gather.ok_or_else(|| missing("all_gather"))?;
        // SAFETY: the host's functions (the caller's contract).
        let (rank, size) = unsafe { (rank_fn(table.context), size_fn(table.context)) };
        let size = usize::try_from(size).ok().filter(|&s| s > 0).ok_or_else(|| Failure::argument(format!("nax_collectives.size gives {size}")))?;
        let rank = usize::try_from(rank)
            .ok()
            .filter(|&r| r < size)
            .ok_or_else(|| Failure::argument(format!("nax_collectives.rank gives {rank}, outside the engine's {size} processes")))?;
        Ok(HostCollectives { table: *table, all_reduce, all_gather, rank, size })
    }

    /// Runs a host function with a group and a message buffer; its error
    /// when it returns nonzero.
    fn run(&self, what: &str, group: Group<'_>, call: impl FnOnce(*const NaxGroup, *mut c_char, usize) -> c_int) -> Result<(), CollectiveError> {
        let ranks: Vec<i32> = group.ranks.iter().map(|&r| r as i32).collect();
        let index = group.ranks.iter().position(|&r| r == self.rank).unwrap_or(0);
        let axis = CString::new(group.mesh_axis).unwrap_or_default();
        let g = NaxGroup { mesh_axis: axis.as_ptr(), ranks: ranks.as_ptr(), size: ranks.len(), index };
        let mut message = vec![0u8; MESSAGE_BYTES];
        let status = call(&g, message.as_mut_ptr().cast(), MESSAGE_BYTES - 1);
        if status == 0 {
            return Ok(());
        }
        let end = message.iter().position(|&b| b == 0).unwrap_or(MESSAGE_BYTES - 1);
        let text = String::from_utf8_lossy(&message[..end]).trim().to_string();
        let along = format!("the host's {what} along mesh axis '{}' returned {status}", group.mesh_axis);
        Err(CollectiveError { message: if text.is_empty() { along } else { format!("{along}: {text}") } })
    }
}

/// The `nax_reduce_op` of a reduction.
fn reduce_op(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Max => 1,
        ReduceOp::Min => 2,
        ReduceOp::Prod => 3,
    }
}

impl Collectives for HostCollectives {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &mut [u8]) -> Result<(), CollectiveError> {
        let count = data.len() / dtype.size_bytes();
        let ptr: *mut c_void = data.as_mut_ptr().cast();
        // SAFETY: `count` elements at `data`, the host's function (its contract).
        self.run("all_reduce", group, |g, m, n| unsafe { (self.all_reduce)(self.table.context, g, dl_dtype(dtype), reduce_op(op), ptr, count, m, n) })
    }

    fn all_gather(&self, group: Group<'_>, dtype: DType, block: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        if out.len() != block.len() * group.ranks.len() {
            return Err(CollectiveError {
                message: format!("an all-gather of {} bytes from {} ranks into {} bytes", block.len(), group.ranks.len(), out.len()),
            });
        }
        let count = block.len() / dtype.size_bytes();
        let (from, to): (*const c_void, *mut c_void) = (block.as_ptr().cast(), out.as_mut_ptr().cast());
        // SAFETY: `count` elements at `block`, `count` times the group's size at `out`.
        self.run("all_gather", group, |g, m, n| unsafe { (self.all_gather)(self.table.context, g, dl_dtype(dtype), from, count, to, m, n) })
    }

    fn reduce_scatter(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        let Some(reduce_scatter) = self.table.reduce_scatter else {
            return reduce_scatter_by_all_reduce(self, group, dtype, op, data, out);
        };
        if data.len() != out.len() * group.ranks.len() {
            return Err(CollectiveError {
                message: format!("a reduce-scatter of {} bytes over {} ranks into {} bytes", data.len(), group.ranks.len(), out.len()),
            });
        }
        let count = data.len() / dtype.size_bytes();
        let (from, to): (*const c_void, *mut c_void) = (data.as_ptr().cast(), out.as_mut_ptr().cast());
        // SAFETY: `count` elements at `data`, `count` over the group's size at `out`.
        self.run("reduce_scatter", group, |g, m, n| unsafe { reduce_scatter(self.table.context, g, dl_dtype(dtype), reduce_op(op), from, count, to, m, n) })
    }
}
