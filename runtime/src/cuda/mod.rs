//! The CUDA device: what the runtime needs to run a function's kernels on
//! an NVIDIA GPU, and nothing of the compiler.
//!
//! - [`CudaPlan`]: the plain value the compiler hands over (serde): the
//!   buffers, size slots and kernels of a [`NativePlan`] (every kernel a
//!   loop nest, formed for a GPU), the kernels' PTX, and each kernel's
//!   entry and the buffers it takes. How many threads each launch has is
//!   decided here ([`CudaPlan::threads`]), from the call's sizes.
//! - [`driver`]: whether NVIDIA's driver library loads. Nothing of CUDA is
//!   needed to build nax; the driver (`libcuda.so.1`, installed with the
//!   GPU's kernel driver) is looked for when a program is to run on a GPU,
//!   so that a machine without one gets a clear error instead of a crash
//!   in a binding that assumes it.
//! - With the `cuda` feature, [`CudaFunction`]: the executor of a call on
//!   the GPU (through `cudarc`, which loads the driver at run time).

#[cfg(feature = "cuda")]
mod device;

#[cfg(feature = "cuda")]
pub use device::CudaFunction;

use crate::error::RuntimeError;
use nax_contract::plan::{BufferKind, NativePlan, SizeRef, Strategy};
use serde::{Deserialize, Serialize};
use std::ffi::{CStr, CString};

/// The driver library's name on Linux.
pub const DRIVER: &str = "libcuda.so.1";

/// Threads per block of every launch.
pub const THREADS_PER_BLOCK: u32 = 256;

/// Checks that NVIDIA's driver library loads in this process.
pub fn driver() -> Result<(), RuntimeError> {
    let name = CString::new(DRIVER).map_err(|e| RuntimeError::Internal(e.to_string()))?;
    // SAFETY: `name` is a NUL-terminated string; the handle is closed below
    // and nothing from the library is called.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: `dlerror` returns NULL or a NUL-terminated message owned by libc.
        let message = unsafe { libc::dlerror() };
        let reason = if message.is_null() { "not found".to_string() } else { unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned() };
        return Err(RuntimeError::NoCudaDriver { reason });
    }
    // SAFETY: `handle` came from `dlopen` and is closed once.
    unsafe { libc::dlclose(handle) };
    Ok(())
}

/// One kernel as the GPU runs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaKernel {
    /// Its entry in the PTX module.
    pub entry: String,
    /// The buffers it takes, in parameter order; then come the size slots'
    /// address and the range `begin, end` of flat positions the launch
    /// covers (thread `t` of the launch computes position `begin + t`).
    pub buffers: Vec<usize>,
}

/// A function compiled for a GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CudaPlan {
    /// Buffers, size slots and kernels, as the CPU driver reads them; every
    /// kernel is a loop nest.
    pub plan: NativePlan,
    /// One PTX module holding every kernel.
    pub ptx: String,
    /// Per kernel of `plan`, in order: its entry and buffers.
    pub kernels: Vec<CudaKernel>,
}

impl CudaPlan {
    /// Checks the plan as [`NativePlan::validate`] does, and what a GPU
    /// adds: one entry per kernel, every kernel a loop nest taking buffers
    /// that exist (its output among them), no matrix-product microkernels
    /// or attention tiles (a GPU's kernels are formed without them).
    pub fn validate(&self, inputs: usize) -> Result<(), RuntimeError> {
        self.plan.validate(inputs)?;
        let bad = |what: String| Err(RuntimeError::Internal(format!("the CUDA plan is malformed: {what}")));
        if self.kernels.len() != self.plan.kernels.len() {
            return bad(format!("{} entries for {} kernels", self.kernels.len(), self.plan.kernels.len()));
        }
        if !self.plan.microkernels.is_empty() {
            return bad("it has matrix-product microkernels".into());
        }
        if let Some(b) = self.plan.buffers.iter().position(|b| b.kind == BufferKind::Tile) {
            return bad(format!("buffer {b} is an attention tile"));
        }
        if self.plan.fault_buffer().is_some() {
            return Err(RuntimeError::Unsupported("bounds-checked kernels (--check-bounds) run on the CPU; the CUDA device runs them unchecked only".into()));
        }
        let buffers = self.plan.buffers.len();
        for (i, (k, gpu)) in self.plan.kernels.iter().zip(&self.kernels).enumerate() {
            if !matches!(k.strategy, Strategy::Nest(_)) {
                return bad(format!("kernel {i} is not a loop nest"));
            }
            if gpu.entry.is_empty() || gpu.entry.contains('\0') {
                return bad(format!("kernel {i} has the entry {:?}", gpu.entry));
            }
            if gpu.buffers.iter().any(|&b| b >= buffers) || !gpu.buffers.contains(&k.output) {
                return bad(format!("kernel {i} takes buffers {:?} of {buffers}, writing {}", gpu.buffers, k.output));
            }
        }
        Ok(())
    }

    /// The threads of kernel `kernel`'s launch when the size slots hold
    /// `slots` (the plan's slots, in order): one per position of its flat
    /// parallel loop (the product of its leading `flat` loops' extents,
    /// the outermost alone when `flat` is 0), or one thread for a kernel
    /// without a parallel loop, which runs whole in thread 0. Saturating:
    /// a count past what a launch can take is refused by the call's work
    /// check first.
    pub fn threads(&self, kernel: usize, slots: &[u64]) -> u64 {
        let k = &self.plan.kernels[kernel];
        let Strategy::Nest(nest) = &k.strategy else { return 1 };
        if !nest.parallel {
            return 1;
        }
        let value = |s: &SizeRef| match *s {
            SizeRef::Const(c) => c,
            SizeRef::Slot(i) => slots.get(i).copied().unwrap_or(0),
        };
        k.loops.iter().take(nest.flat.max(1)).fold(1u64, |n, s| n.saturating_mul(value(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nax_contract::DType;
    use nax_contract::plan::{BufferPlan, KernelPlan, Nest};

    #[test]
    fn a_missing_driver_is_an_error_that_says_so() {
        // This machine may or may not have a GPU: either answer is clean.
        match driver() {
            Ok(()) => println!("{DRIVER} loads here"),
            Err(e) => assert!(e.to_string().contains("libcuda.so.1"), "{e}"),
        }
    }

    /// `out[i, j] = x[i, j]` over `[slot 0, 8]`, in one kernel whose two
    /// loops are one flat parallel loop (`flat`) or not parallel.
    fn copy(flat: usize, parallel: bool) -> CudaPlan {
        let shape = vec![SizeRef::Slot(0), SizeRef::Const(8)];
        let buffer = |kind| BufferPlan { dtype: DType::F32, shape: shape.clone(), kind };
        let nest = Nest { loops: 2, parallel, flat, grain: 1 };
        CudaPlan {
            plan: NativePlan {
                slots: vec![nax_contract::SymId(0)],
                buffers: vec![buffer(BufferKind::Input(0)), buffer(BufferKind::Temporary)],
                kernels: vec![KernelPlan { output: 1, loops: shape.clone(), strategy: Strategy::Nest(nest), checks: vec![], footprint: vec![] }],
                microkernels: vec![],
                results: vec![1],
            },
            ptx: String::new(),
            kernels: vec![CudaKernel { entry: "copy_k0".into(), buffers: vec![0, 1] }],
        }
    }

    #[test]
    fn a_launch_has_a_thread_per_position_of_the_flat_loop() {
        assert_eq!(copy(2, true).threads(0, &[5]), 40);
        assert_eq!(copy(1, true).threads(0, &[5]), 5);
        assert_eq!(copy(0, true).threads(0, &[5]), 5);
        assert_eq!(copy(2, true).threads(0, &[0]), 0);
        assert_eq!(copy(2, false).threads(0, &[5]), 1);
    }

    #[test]
    fn a_plan_that_does_not_fit_a_gpu_is_refused() {
        assert!(copy(2, true).validate(1).is_ok());
        let mut missing = copy(2, true);
        missing.kernels.clear();
        assert!(missing.validate(1).unwrap_err().to_string().contains("0 entries for 1 kernels"));
        let mut no_output = copy(2, true);
        no_output.kernels[0].buffers = vec![0];
        assert!(no_output.validate(1).unwrap_err().to_string().contains("kernel 0 takes buffers [0]"));
        let mut out_of_range = copy(2, true);
        out_of_range.kernels[0].buffers = vec![0, 1, 2];
        assert!(out_of_range.validate(1).is_err());
        let mut nameless = copy(2, true);
        nameless.kernels[0].entry = String::new();
        assert!(nameless.validate(1).is_err());
    }
}
