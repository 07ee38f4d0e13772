//! What a generated library gives this crate: a [`Library`], a static
//! struct the generated C file defines and passes to every entry (the
//! library's name, its functions' plans as JSON, its kernels' entry
//! points, its CPU features, its embedded weights). The entries
//! themselves are `entries.rs`'s.

use crate::status::Failure;
use nax_runtime::KernelFn;
use std::ffi::{CStr, c_char};

/// One function's compiled code: its kernels' and microkernels' entry
/// points, in the plan's order.
#[repr(C)]
#[derive(Debug)]
pub struct FunctionCode {
    /// The function's name (NUL-terminated).
    pub name: *const c_char,
    /// `count` entry points.
    pub entries: *const KernelFn,
    /// How many.
    pub count: usize,
}

/// A library as its generated C file describes it (static data).
#[repr(C)]
#[derive(Debug)]
pub struct Library {
    /// [`nax_contract::plan::LIBRARY_LAYOUT`] when the C file was generated.
    pub layout: u32,
    /// The library's NAME (NUL-terminated).
    pub name: *const c_char,
    /// The functions, a [`nax_contract::plan::StoredLibrary`] in JSON (NUL-terminated).
    pub plans: *const c_char,
    /// The CPU features the kernels were compiled for, comma-separated (NUL-terminated).
    pub cpu: *const c_char,
    /// The embedded safetensors file, or NULL.
    pub weights: *const u8,
    /// Its length in bytes.
    pub weights_len: usize,
    /// `function_count` functions' code (a sharded function's: each stage's).
    pub functions: *const FunctionCode,
    /// How many.
    pub function_count: usize,
}

// SAFETY: a `Library` is immutable static data (pointers to constants and code).
unsafe impl Sync for Library {}

impl Library {
    /// A NUL-terminated string of the descriptor.
    ///
    /// # Safety
    /// `p` is one of the descriptor's string pointers.
    pub unsafe fn text(p: *const c_char) -> Result<&'static str, Failure> {
        if p.is_null() {
            return Err(Failure::internal("the library's descriptor has a NULL string"));
        }
        // SAFETY: the generated C file gives NUL-terminated static strings.
        unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| Failure::internal("the library's descriptor has a string that is not UTF-8"))
    }
}
