//! The core shared by nax's native back ends (LLVM, Cranelift): the
//! [`Emitter`] interface a code generator implements, the kernel lowering,
//! the matrix-product microkernel and the vector math written once against it, and the size slots and
//! plan of a program that the runtime's driver runs the compiled kernels
//! by (`nax_runtime::NativeFunction`).

mod emitter;
mod lower;
pub mod math;
mod microkernel;
mod plan;

pub use emitter::{Binary, Compare, Emitter, Kind, LIBM, Unary};
pub use lower::lower_kernel;
pub use microkernel::lower_microkernel;
pub use plan::Slots;

/// The address of a Rust implementation of one of [`LIBM`], with the C
/// signature, for JITs to bind the calls to (so no symbol is looked up in
/// the process); `None` for a name not in [`LIBM`].
pub fn libm_address(name: &str) -> Option<*const u8> {
    extern "C" fn exp(x: f64) -> f64 {
        x.exp()
    }
    extern "C" fn log(x: f64) -> f64 {
        x.ln()
    }
    extern "C" fn log1p(x: f64) -> f64 {
        x.ln_1p()
    }
    extern "C" fn expm1(x: f64) -> f64 {
        x.exp_m1()
    }
    extern "C" fn sin(x: f64) -> f64 {
        x.sin()
    }
    extern "C" fn cos(x: f64) -> f64 {
        x.cos()
    }
    extern "C" fn tanh(x: f64) -> f64 {
        x.tanh()
    }
    extern "C" fn erf(x: f64) -> f64 {
        libm::erf(x)
    }
    extern "C" fn pow(x: f64, y: f64) -> f64 {
        x.powf(y)
    }
    Some(match name {
        "exp" => exp as *const u8,
        "log" => log as *const u8,
        "log1p" => log1p as *const u8,
        "expm1" => expm1 as *const u8,
        "sin" => sin as *const u8,
        "cos" => cos as *const u8,
        "tanh" => tanh as *const u8,
        "erf" => erf as *const u8,
        "pow" => pow as *const u8,
        _ => return None,
    })
}
