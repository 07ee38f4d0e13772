//! A library built split over a mesh (`nax build --emit so --mesh ...
//! --shard ...`), opened by every rank through the C ABI
//! (`NAME_open_sharded`, `NAME_call_sharded`) with a `nax_collectives`
//! table whose functions forward to the test engine of `shard.rs`: the
//! C door as one more back end of the sharding suite.

use crate::shard::Rank;
use nax::{Collectives, DType, Group, HostTensor, ReduceOp, ShardedResult, TensorData};
use nax_capi::{DLDataType, DLDevice, DLTensor, NaxArg, NaxCollectives, NaxGroup, NaxShardResult, ShardOptions, dl_dtype, nax_dtype};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

type OpenSharded = unsafe extern "C" fn(*const c_char, *const ShardOptions, *const NaxCollectives, *mut *mut c_void) -> c_int;
type CallSharded = unsafe extern "C" fn(*mut c_void, *const c_char, *const NaxArg, usize, *mut NaxShardResult, usize) -> c_int;
type Open = unsafe extern "C" fn(*const c_char, i32, *mut *mut c_void) -> c_int;
type Close = unsafe extern "C" fn(*mut c_void);
type LastError = unsafe extern "C" fn() -> *const c_char;

/// A built library, loaded, the directory it and its weights are in, and
/// whether it holds its weights (opened with NULL for the path).
pub struct ShardedLibrary {
    dir: tempfile::TempDir,
    library: libloading::Library,
    embedded: bool,
}

/// What a C entry gave back: its status code and the thread's message.
#[derive(Debug)]
pub struct Status {
    pub code: c_int,
    pub message: String,
}

impl ShardedLibrary {
    /// `nax build` of `source` into `libsharded.so` with `flags` (the mesh
    /// and sharding, or none for a whole library), its weights written to
    /// a safetensors file beside it (and embedded where `flags` has
    /// `--embed-weights`).
    pub fn build(source: &str, flags: &[&str], weights: &[(&str, HostTensor)]) -> ShardedLibrary {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sharded.nax");
        std::fs::write(&file, source).unwrap();
        let tensors: Vec<(&str, &HostTensor)> = weights.iter().map(|(n, t)| (*n, t)).collect();
        let weights_file = dir.path().join("weights.safetensors");
        nax::write_tensors_atomic(&weights_file, &tensors).unwrap();
        let embedded = flags.contains(&"--embed-weights");
        let weights_flag = weights_file.to_str().unwrap();
        let flags: Vec<&str> = if embedded { flags.iter().copied().chain(["--weights", weights_flag]).collect() } else { flags.to_vec() };
        let lib = crate::aot::build(&file, dir.path(), "sharded", &flags);
        // SAFETY: a library nax built, whose initialisers only set up its runtime.
        let library = unsafe { libloading::Library::new(&lib) }.unwrap();
        ShardedLibrary { dir, library, embedded }
    }

    /// The directory it is in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its weights file.
    pub fn weights(&self) -> PathBuf {
        self.dir.path().join("weights.safetensors")
    }

    fn entry<T: Copy>(&self, name: &str) -> T {
        // SAFETY: the entries' types are ABI.md's.
        *unsafe { self.library.get::<T>(format!("sharded_{name}").as_bytes()) }.unwrap()
    }

    fn status(&self, code: c_int) -> Status {
        // SAFETY: the thread's message, alive until its next call.
        let message = unsafe { CStr::from_ptr(self.entry::<LastError>("last_error")()) }.to_string_lossy().into_owned();
        Status { code, message }
    }

    /// Opens the library whole (`NAME_open`) and closes it again.
    pub fn open_whole(&self, weights: Option<&Path>) -> Status {
        let path = weights.map(|w| CString::new(w.to_str().unwrap()).unwrap());
        let mut model = std::ptr::null_mut();
        // SAFETY: a NUL-terminated path or NULL, a pointer to fill.
        let code = unsafe { self.entry::<Open>("open")(path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()), 1, &mut model) };
        let status = self.status(code);
        // SAFETY: NULL or the model just opened.
        unsafe { self.entry::<Close>("close")(model) };
        status
    }

    /// Opens the rank's part (from its weights file, or NULL where the
    /// library holds them), its collectives forwarded to `rank`, and
    /// calls `function` (of `count` results) `times` times with `args`
    /// (each rank's blocks): each call's results, with where they lie.
    pub fn call(&self, rank: &Rank, function: (&str, usize), args: &[(&str, HostTensor)], times: usize) -> Result<Vec<Vec<ShardedResult>>, Status> {
        let table = table(rank);
        let weights = CString::new(self.weights().to_str().unwrap()).unwrap();
        let weights = if self.embedded { std::ptr::null() } else { weights.as_ptr() };
        let options = ShardOptions { threads: 1, gather: 0 };
        let mut model = std::ptr::null_mut();
        // SAFETY: the table's functions take the rank as context, alive past the model.
        let code = unsafe { self.entry::<OpenSharded>("open_sharded")(weights, &options, &table, &mut model) };
        if code != 0 {
            return Err(self.status(code));
        }
        let calls = (0..times).map(|_| self.call_once(model, function, args)).collect();
        // SAFETY: the model just opened.
        unsafe { self.entry::<Close>("close")(model) };
        calls
    }

    /// Opens the rank's part with `table` (NULL where none) and the
    /// weights at `weights`, and closes it: what the opening gave.
    pub fn open_with(&self, table: Option<&NaxCollectives>, weights: &Path) -> Status {
        let weights = CString::new(weights.to_str().unwrap()).unwrap();
        let mut model = std::ptr::null_mut();
        let table = table.map_or(std::ptr::null(), std::ptr::from_ref);
        // SAFETY: the table is NULL or callable with its context; the path NUL-terminated.
        let code = unsafe { self.entry::<OpenSharded>("open_sharded")(weights.as_ptr(), std::ptr::null(), table, &mut model) };
        let status = self.status(code);
        // SAFETY: NULL or the model just opened.
        unsafe { self.entry::<Close>("close")(model) };
        status
    }

    fn call_once(&self, model: *mut c_void, (function, count): (&str, usize), args: &[(&str, HostTensor)]) -> Result<Vec<ShardedResult>, Status> {
        let names: Vec<CString> = args.iter().map(|(n, _)| CString::new(*n).unwrap()).collect();
        let mut shapes: Vec<Vec<i64>> = args.iter().map(|(_, t)| t.shape().iter().map(|&n| n as i64).collect()).collect();
        let tensors: Vec<DLTensor> = args
            .iter()
            .zip(&mut shapes)
            .map(|((_, t), shape)| DLTensor {
                data: t.data().as_ptr().cast_mut().cast(),
                device: DLDevice { device_type: 1, device_id: 0 },
                ndim: shape.len() as i32,
                dtype: dl_dtype(t.dtype()),
                shape: shape.as_mut_ptr(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            })
            .collect();
        let c_args: Vec<NaxArg> =
            names.iter().zip(&tensors).map(|(n, t)| NaxArg { name: n.as_ptr(), tensor: t, axes: std::ptr::null(), capacity: 0 }).collect();
        let function = CString::new(function).unwrap();
        // SAFETY: plain data, written by the call.
        let mut results: Vec<NaxShardResult> = (0..count).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: the arguments describe the tensors above, alive through the call.
        let code = unsafe { self.entry::<CallSharded>("call_sharded")(model, function.as_ptr(), c_args.as_ptr(), c_args.len(), results.as_mut_ptr(), count) };
        if code != 0 {
            return Err(self.status(code));
        }
        Ok(results.iter().map(owned).collect())
    }
}

/// A `nax_collectives` whose functions forward to the test engine's `rank`.
pub fn table(rank: &Rank) -> NaxCollectives {
    NaxCollectives {
        context: std::ptr::from_ref(rank).cast_mut().cast(),
        rank: Some(rank_of),
        size: Some(size_of),
        all_reduce: Some(all_reduce),
        all_gather: Some(all_gather),
        reduce_scatter: Some(reduce_scatter),
    }
}

/// A result of the library as the runtime's, its tensor freed.
fn owned(r: &NaxShardResult) -> ShardedResult {
    // SAFETY: a result the library made: its tensor, axes, offsets and
    // global shape valid until its deleter runs, which runs once, here.
    unsafe {
        let managed = &*r.result.tensor;
        let t = &managed.dl_tensor;
        let rank = t.ndim as usize;
        let shape: Vec<usize> = std::slice::from_raw_parts(t.shape, rank).iter().map(|&n| n as usize).collect();
        let dtype = nax_dtype(t.dtype).unwrap();
        let len: usize = shape.iter().product::<usize>() * dtype.size_bytes();
        let bytes = if len == 0 { &[][..] } else { std::slice::from_raw_parts(t.data.cast::<u8>(), len) };
        let names: Vec<Option<String>> =
            std::slice::from_raw_parts(r.result.axes, rank).iter().map(|&p| (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())).collect();
        let offsets = std::slice::from_raw_parts(r.offsets, rank).iter().map(|&n| n as usize).collect();
        let global_shape = std::slice::from_raw_parts(r.global_shape, rank).iter().map(|&n| n as usize).collect();
        let tensor = HostTensor::new(TensorData::from_le_bytes(dtype, bytes), shape, names).unwrap();
        (managed.deleter.unwrap())(r.result.tensor);
        ShardedResult { tensor, offsets, global_shape }
    }
}

unsafe extern "C" fn rank_of(context: *mut c_void) -> i32 {
    // SAFETY: the context is a `Rank` (the table's maker).
    unsafe { &*context.cast::<Rank>() }.rank() as i32
}

unsafe extern "C" fn size_of(context: *mut c_void) -> i32 {
    // SAFETY: as above.
    unsafe { &*context.cast::<Rank>() }.size() as i32
}

/// Runs a collective of the test engine for a C entry: 0, or 1 with its
/// message written into `error`.
///
/// # Safety
/// `context` is a `Rank`, `group` a valid group, `error` `error_size` writable bytes.
unsafe fn forward(
    context: *mut c_void,
    group: *const NaxGroup,
    dtype: DLDataType,
    error: *mut c_char,
    error_size: usize,
    run: impl FnOnce(&Rank, Group<'_>, DType) -> Result<(), nax::CollectiveError>,
) -> c_int {
    // SAFETY: the caller's contract.
    let (rank, g) = unsafe { (&*context.cast::<Rank>(), &*group) };
    // SAFETY: as above.
    let ranks: Vec<usize> = unsafe { std::slice::from_raw_parts(g.ranks, g.size) }.iter().map(|&r| r as usize).collect();
    // SAFETY: as above.
    let axis = unsafe { CStr::from_ptr(g.mesh_axis) }.to_string_lossy().into_owned();
    let Some(dtype) = nax_dtype(dtype) else { return 2 };
    match run(rank, Group { mesh_axis: &axis, ranks: &ranks }, dtype) {
        Ok(()) => 0,
        Err(e) => {
            let text = e.message.into_bytes();
            let n = text.len().min(error_size.saturating_sub(1));
            // SAFETY: `n` + 1 <= `error_size` writable bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), error.cast::<u8>(), n);
                *error.add(n) = 0;
            }
            1
        }
    }
}

unsafe extern "C" fn all_reduce(
    context: *mut c_void,
    group: *const NaxGroup,
    dtype: DLDataType,
    op: i32,
    data: *mut c_void,
    count: usize,
    error: *mut c_char,
    error_size: usize,
) -> c_int {
    let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod][op as usize];
    // SAFETY: the library's arguments; `count` elements at `data`.
    unsafe {
        forward(context, group, dtype, error, error_size, |rank, g, dtype| {
            rank.all_reduce(g, dtype, op, std::slice::from_raw_parts_mut(data.cast(), count * dtype.size_bytes()))
        })
    }
}

unsafe extern "C" fn all_gather(
    context: *mut c_void,
    group: *const NaxGroup,
    dtype: DLDataType,
    block: *const c_void,
    count: usize,
    out: *mut c_void,
    error: *mut c_char,
    error_size: usize,
) -> c_int {
    // SAFETY: the library's arguments; `count` elements at `block`, the group's size times that at `out`.
    unsafe {
        let size = (*group).size;
        forward(context, group, dtype, error, error_size, |rank, g, dtype| {
            let bytes = count * dtype.size_bytes();
            rank.all_gather(g, dtype, std::slice::from_raw_parts(block.cast(), bytes), std::slice::from_raw_parts_mut(out.cast(), bytes * size))
        })
    }
}

unsafe extern "C" fn reduce_scatter(
    context: *mut c_void,
    group: *const NaxGroup,
    dtype: DLDataType,
    op: i32,
    data: *const c_void,
    count: usize,
    out: *mut c_void,
    error: *mut c_char,
    error_size: usize,
) -> c_int {
    let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod][op as usize];
    // SAFETY: the library's arguments; `count` elements at `data`, `count` over the group's size at `out`.
    unsafe {
        let size = (*group).size;
        forward(context, group, dtype, error, error_size, |rank, g, dtype| {
            let bytes = count * dtype.size_bytes();
            rank.reduce_scatter(g, dtype, op, std::slice::from_raw_parts(data.cast(), bytes), std::slice::from_raw_parts_mut(out.cast(), bytes / size))
        })
    }
}
