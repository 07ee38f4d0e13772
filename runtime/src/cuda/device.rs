//! The CUDA device's executor: a [`CudaPlan`] loaded on GPU 0 (its PTX
//! JIT-compiled by the driver, whose error log a failure carries), and
//! each call run there: every buffer in device memory (aliases share their
//! source's; temporaries start zeroed; an empty buffer holds zeros as if
//! each empty axis had one position, since a concatenation reads every
//! operand at a clamped position), the arguments,
//! weights and size slots copied in, `take`'s index checks run on the host
//! before the kernel that reads the indices (indices computed on the GPU
//! are copied back for them), each kernel launched with one thread per
//! position of its flat parallel loop ([`CudaPlan::threads`],
//! [`THREADS_PER_BLOCK`] per block, split into several launches past the
//! grid's limit), and the result copied back into a host tensor or the
//! caller's buffer.
//!
//! Everything goes through `cudarc` with the driver loaded at run time;
//! [`CudaFunction::load`] first checks that the driver library loads
//! ([`super::driver`]), since `cudarc` panics without it. Weights are
//! copied at every call (no device-resident weights yet).

use super::{CudaPlan, THREADS_PER_BLOCK};
use crate::call::CheckedCall;
use crate::driver::{Execute, Sizes, out_of_range, read_data};
use crate::error::RuntimeError;
use crate::memory::Peak;
use crate::threads::ThreadPool;
use cudarc::driver::{CudaContext, CudaFunction as Entry, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg, sys};
use nax_contract::plan::BufferKind;
use nax_contract::{Scalar, Signature};
use nax_host::HostError;
use nax_host::HostTensor;
use nax_host::{TensorMut, TensorView};
use std::sync::Arc;

/// Positions one launch covers at most: the grid's limit of blocks in x.
const MAX_POSITIONS: u64 = (i32::MAX as u64) * THREADS_PER_BLOCK as u64;

/// A function compiled for a GPU and loaded there: callable from many
/// threads (calls share the context's default stream, so they run one
/// after another on the GPU).
pub struct CudaFunction {
    signature: Arc<Signature>,
    plan: CudaPlan,
    context: Arc<CudaContext>,
    entries: Vec<Entry>,
    /// Kept for its entries' lifetime.
    _module: Arc<CudaModule>,
}

/// The driver's name and explanation of a failure.
fn explain(e: &DriverError) -> String {
    let name = e.error_name().map_or_else(|_| format!("{:?}", e.0), |n| n.to_string_lossy().into_owned());
    let explanation = e.error_string().map_or_else(|_| String::new(), |s| s.to_string_lossy().into_owned());
    format!("{name}: {explanation}")
}

/// The error of a driver call: what was being done, and the driver's words.
fn failed(operation: &str) -> impl Fn(DriverError) -> RuntimeError + '_ {
    move |e| RuntimeError::Cuda { operation: operation.to_string(), message: explain(&e) }
}

impl CudaFunction {
    /// Loads `plan` on GPU 0 for calls of `signature`: an error when this
    /// machine has no NVIDIA driver or GPU, when the plan does not
    /// validate, or when the driver refuses the PTX (with its log).
    pub fn load(signature: Arc<Signature>, plan: CudaPlan) -> Result<CudaFunction, RuntimeError> {
        super::driver()?;
        plan.validate(signature.params.len())?;
        let context = CudaContext::new(0).map_err(failed("opening GPU 0"))?;
        let module = context.load_module(cudarc::nvrtc::Ptx::from_src(plan.ptx.clone())).map_err(|e| RuntimeError::Cuda {
            operation: "loading the kernels' PTX".into(),
            message: format!("{}\n{}", explain(&e), jit_log(&context, &plan.ptx)),
        })?;
        let entries = plan
            .kernels
            .iter()
            .map(|k| module.load_function(&k.entry).map_err(failed(&format!("finding the kernel {}", k.entry))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CudaFunction { signature, plan, context, entries, _module: module })
    }
}

/// The driver's log of JIT-compiling `ptx` (loaded again with a log
/// buffer, after a load without one failed).
fn jit_log(context: &CudaContext, ptx: &str) -> String {
    let Ok(source) = std::ffi::CString::new(ptx) else { return "the PTX holds a NUL byte".into() };
    if context.bind_to_thread().is_err() {
        return "(no log: the context cannot be made current)".into();
    }
    let mut log = vec![0u8; 1 << 16];
    let mut options = [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values: [*mut std::ffi::c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut std::ffi::c_void];
    let mut module = std::mem::MaybeUninit::<sys::CUmodule>::uninit();
    // SAFETY: the source is NUL-terminated; the options and their values
    // are two, the log buffer as long as its size says; a module that
    // loads after all is unloaded at once.
    unsafe {
        let loaded = sys::cuModuleLoadDataEx(module.as_mut_ptr(), source.as_ptr().cast(), 2, options.as_mut_ptr(), values.as_mut_ptr());
        if loaded == sys::CUresult::CUDA_SUCCESS {
            sys::cuModuleUnload(module.assume_init());
        }
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    match String::from_utf8_lossy(&log[..end]).trim() {
        "" => "(the driver's log is empty)".into(),
        text => format!("the driver's log:\n{text}"),
    }
}

/// The bytes of a contiguous view.
fn bytes_of<'a>(view: &TensorView<'a>) -> Result<&'a [u8], RuntimeError> {
    view.contiguous_bytes().ok_or_else(|| RuntimeError::Internal("a checked call's tensor is not contiguous".into()))
}

impl CudaFunction {
    /// The buffer whose memory buffer `b` is (through aliases).
    fn root(&self, b: usize) -> usize {
        self.plan.plan.alias_root(b)
    }

    /// The host bytes of an input or weight buffer (`None` for one a kernel writes).
    fn host_bytes<'c>(&self, call: &'c CheckedCall<'_>, b: usize, scalars: &'c [[u8; 8]]) -> Result<Option<&'c [u8]>, RuntimeError> {
        Ok(match &self.plan.plan.buffers[b].kind {
            BufferKind::Input(i) => match (call.tensor(*i), call.scalar(*i)) {
                (Some(t), _) => Some(bytes_of(&t)?),
                (None, Some(_)) => Some(&scalars[*i][..]),
                (None, None) => return Err(RuntimeError::Internal(format!("no argument {i}"))),
            },
            BufferKind::Weight(name) => Some(bytes_of(&call.weight(name).ok_or_else(|| crate::error::CallError::MissingWeight(name.clone()))?)?),
            _ => None,
        })
    }

    /// Every buffer's device memory, by root buffer (aliases have none of their own).
    fn allocate(
        &self,
        stream: &Arc<CudaStream>,
        sizes: &Sizes<'_>,
        call: &CheckedCall<'_>,
        scalars: &[[u8; 8]],
    ) -> Result<Vec<Option<CudaSlice<u8>>>, RuntimeError> {
        let p = &self.plan.plan;
        let mut memory = Vec::with_capacity(p.buffers.len());
        for (b, buffer) in p.buffers.iter().enumerate() {
            if let BufferKind::Alias(_) = buffer.kind {
                memory.push(None);
                continue;
            }
            let bytes = sizes.stored_bytes(b)?;
            let slice = match self.host_bytes(call, b, scalars)? {
                Some(host) if !host.is_empty() => stream.clone_htod(host).map_err(failed("copying an argument to the GPU"))?,
                _ => stream.alloc_zeros::<u8>(bytes.max(8)).map_err(failed(&format!("allocating {bytes} bytes on the GPU")))?,
            };
            memory.push(Some(slice));
        }
        Ok(memory)
    }

    /// The device memory of buffer `b`.
    fn memory<'m>(&self, memory: &'m [Option<CudaSlice<u8>>], b: usize) -> Result<&'m CudaSlice<u8>, RuntimeError> {
        memory[self.root(b)].as_ref().ok_or_else(|| RuntimeError::Internal(format!("buffer {b} has no memory")))
    }
}

impl Execute for CudaFunction {
    fn execute(&self, call: &CheckedCall<'_>, into: Option<&mut TensorMut<'_>>, _pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        call.require(&self.signature)?;
        let p = &self.plan.plan;
        let sizes = Sizes::of(p, call)?;
        sizes.check_work(&self.signature.name)?;
        if let Some(out) = into.as_deref() {
            let [result] = p.results.as_slice() else {
                return Err(RuntimeError::Internal(format!("a function of {} results was given one output buffer", p.results.len())));
            };
            let (dtype, len) = (p.buffers[*result].dtype, sizes.elements(*result)?);
            if out.dtype() != dtype || out.len() != len {
                return Err(HostError::OutputBuffer { expected_dtype: dtype, expected_len: len, dtype: out.dtype(), len: out.len() }.into());
            }
        }
        // Host scalars as the kernels read them: 8 bytes, the value first.
        let scalars: Vec<[u8; 8]> = (0..call.len()).map(|i| call.scalar(i).map_or([0; 8], Scalar::to_ne_bytes)).collect();
        let stream = self.context.default_stream();
        let memory = self.allocate(&stream, &sizes, call, &scalars)?;
        // The footprint check, against the device buffers' own lengths.
        let lengths: Vec<Option<usize>> =
            p.buffers.iter().enumerate().map(|(b, buffer)| memory[self.root(b)].as_ref().map(|m| m.len() / buffer.dtype.size_bytes())).collect();
        sizes.check_footprints(&lengths)?;
        let slot_values: Vec<i64> = if sizes.slots.is_empty() { vec![0] } else { sizes.slots.clone() };
        let slots = stream.clone_htod(&slot_values).map_err(failed("copying the size slots to the GPU"))?;
        let slot_counts: Vec<u64> = sizes.slots.iter().map(|&s| s as u64).collect();
        for (index, (kernel, gpu)) in p.kernels.iter().zip(&self.plan.kernels).enumerate() {
            for check in &kernel.checks {
                let indices = match self.host_bytes(call, self.root(check.buffer), &scalars)? {
                    Some(host) => host.to_vec(),
                    None => {
                        let bytes = sizes.elements(check.buffer)? * p.buffers[check.buffer].dtype.size_bytes();
                        let mut all = stream.clone_dtoh(self.memory(&memory, check.buffer)?).map_err(failed("copying indices back from the GPU"))?;
                        all.truncate(bytes);
                        all
                    }
                };
                out_of_range(&sizes, p, check, &indices)?;
            }
            if sizes.is_empty(kernel.output) {
                continue;
            }
            let threads = self.plan.threads(index, &slot_counts);
            let mut begin = 0u64;
            while begin < threads {
                let end = threads.min(begin.saturating_add(MAX_POSITIONS));
                let count = end - begin;
                let blocks =
                    u32::try_from(count.div_ceil(u64::from(THREADS_PER_BLOCK))).map_err(|_| RuntimeError::Internal("a launch has too many blocks".into()))?;
                let block = THREADS_PER_BLOCK.min(count as u32);
                let (first, last) = (begin as i64, end as i64);
                let mut launch = stream.launch_builder(&self.entries[index]);
                for &b in &gpu.buffers {
                    launch.arg(self.memory(&memory, b)?);
                }
                launch.arg(&slots).arg(&first).arg(&last);
                let config = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
                // SAFETY: the entry was compiled from this plan's kernel,
                // whose parameters are its buffers (in this order), the
                // size slots and the range; every buffer holds its
                // elements at these slots (allocated above), and threads
                // past `end` do nothing.
                unsafe { launch.launch(config) }.map_err(failed(&format!("launching the kernel {}", gpu.entry)))?;
                begin = end;
            }
        }
        let mut copies = Vec::with_capacity(p.results.len());
        for &r in &p.results {
            copies.push(stream.clone_dtoh(self.memory(&memory, r)?).map_err(failed("copying a result back from the GPU"))?);
        }
        stream.synchronize().map_err(failed("running the kernels"))?;
        let mut into = into;
        let mut results = Vec::with_capacity(copies.len());
        for (i, (&r, mut copy)) in p.results.iter().zip(copies).enumerate() {
            let (dtype, len) = (p.buffers[r].dtype, sizes.elements(r)?);
            copy.truncate(len * dtype.size_bytes());
            match into.as_deref_mut() {
                Some(out) => {
                    // SAFETY: the caller's buffer holds `len` elements of
                    // `dtype` (checked above), as `copy` does.
                    unsafe { std::ptr::copy_nonoverlapping(copy.as_ptr(), out.as_mut_ptr(), copy.len()) };
                }
                None => {
                    // SAFETY: `copy` holds `len` elements of `dtype`.
                    let data = unsafe { read_data(copy.as_ptr(), dtype, len) };
                    let names = call.signature().results.get(i).map_or_else(Vec::new, |s| s.ty.names());
                    results.push(HostTensor::new(data, sizes.shape(r), names)?);
                }
            }
        }
        Ok(results)
    }

    /// On the host, only the result (unless the caller gives its buffer)
    /// and its copy from the GPU.
    fn peak(&self, call: &CheckedCall<'_>, into: bool) -> Peak {
        let p = &self.plan.plan;
        let Ok(sizes) = Sizes::of(p, call) else { return Peak::default() };
        let bytes = p.results.iter().map(|&r| sizes.elements(r).map_or(0, |n| n as u128 * p.buffers[r].dtype.size_bytes() as u128)).sum::<u128>();
        Peak { bytes: if into { bytes } else { bytes * 2 }, reusable: 0 }
    }

    fn work(&self, call: &CheckedCall<'_>) -> Result<u128, RuntimeError> {
        Ok(Sizes::of(&self.plan.plan, call)?.work())
    }
}
