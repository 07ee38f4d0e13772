//! MLIR's execution engine, checked: melior's `ExecutionEngine::new` does
//! not look at what MLIR returns, and a failed creation (a module that does
//! not translate to LLVM IR) crashes at the first lookup. This wrapper
//! gives an error instead, binds symbols before the code is initialised,
//! and finds functions by their C names.

use crate::MlirError;
use melior::StringRef;
use melior::ir::Module;
use mlir_sys::{
    MlirExecutionEngine, mlirExecutionEngineCreate, mlirExecutionEngineDestroy, mlirExecutionEngineInitialize, mlirExecutionEngineLookup,
    mlirExecutionEngineRegisterSymbol,
};

/// Machine code JIT-compiled from a module in the LLVM dialect.
pub struct Engine {
    raw: MlirExecutionEngine,
}

// SAFETY: the engine owns its machine code and nothing of the context it
// was made from (the module is translated to LLVM IR at creation); it is
// only read (looked up) after creation, and dropped once.
unsafe impl Send for Engine {}

impl Engine {
    /// Translates `module` (LLVM dialect only) to LLVM IR, optimises it at
    /// `-O3` for the host CPU and JIT-compiles it, with `symbols` (C name,
    /// address) bound before any code is initialised; `None` where the
    /// engine rejects the module (it does not translate to LLVM IR).
    pub fn new(module: &Module<'_>, symbols: &[(&str, *const u8)]) -> Option<Engine> {
        // SAFETY: the module is valid for the call; no shared libraries are given.
        let raw = unsafe { mlirExecutionEngineCreate(module.to_raw(), 3, 0, std::ptr::null(), false, false) };
        if raw.ptr.is_null() {
            return None;
        }
        let engine = Engine { raw };
        for &(name, address) in symbols {
            // SAFETY: the engine is live; `address` is a function of this process with the C signature the code declares.
            unsafe { mlirExecutionEngineRegisterSymbol(engine.raw, StringRef::new(name).to_raw(), address as *mut std::ffi::c_void) };
        }
        // SAFETY: the engine is live and every symbol its code calls is bound.
        unsafe { mlirExecutionEngineInitialize(engine.raw) };
        Some(engine)
    }

    /// The address of the function named `name`.
    pub fn lookup(&self, name: &str) -> Result<*const u8, MlirError> {
        // SAFETY: the engine is live.
        let address = unsafe { mlirExecutionEngineLookup(self.raw, StringRef::new(name).to_raw()) };
        if address.is_null() {
            return Err(MlirError::NoFunction(name.to_string()));
        }
        Ok(address as *const u8)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: created by `mlirExecutionEngineCreate`, destroyed once.
        unsafe { mlirExecutionEngineDestroy(self.raw) }
    }
}
