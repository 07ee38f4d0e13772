//! The core shared by nax's native back ends (LLVM, Cranelift): the
//! [`Emitter`] interface a code generator implements, the kernel lowering
//! and the vector math written once against it, the size slots of a
//! program, and the threaded driver that calls compiled kernels.

mod driver;
mod emitter;
mod lower;
pub mod math;
mod plan;

pub use driver::{result_names, Compiled, KernelFn};
pub use emitter::{Binary, Compare, Emitter, Kind, Unary, LIBM};
pub use lower::{lower_kernel, memory_kind};
pub use plan::{Plan, SizeRef};

/// The buffers a kernel reads or writes, in increasing order.
pub fn kernel_buffers(k: &nax_kernel::Kernel) -> Vec<usize> {
    fn visit(e: &nax_kernel::Expr, out: &mut Vec<usize>) {
        match e {
            nax_kernel::Expr::Load { buffer, .. } => out.push(*buffer),
            nax_kernel::Expr::Apply { args, .. } => args.iter().for_each(|a| visit(a, out)),
            _ => {}
        }
    }
    let mut out = vec![k.output];
    match &k.body {
        nax_kernel::Body::Store(v) | nax_kernel::Body::Reduce { value: v, .. } | nax_kernel::Body::Along { value: v, .. } => visit(v, &mut out),
    }
    out.sort_unstable();
    out.dedup();
    out
}
