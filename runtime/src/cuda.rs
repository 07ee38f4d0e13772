//! The CUDA device, as far as this build goes: finding NVIDIA's driver
//! library. Nothing of CUDA is needed to build nax; the driver
//! (`libcuda.so.1`, installed with the GPU's kernel driver) is looked for
//! when a program is to run on a GPU, so that a machine without one gets a
//! clear error instead of a crash in a binding that assumes it.

use crate::RuntimeError;
use std::ffi::{CStr, CString};

/// The driver library's name on Linux.
pub const DRIVER: &str = "libcuda.so.1";

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

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_driver_is_an_error_that_says_so() {
        // This machine may or may not have a GPU: either answer is clean.
        match super::driver() {
            Ok(()) => println!("{} loads here", super::DRIVER),
            Err(e) => assert!(e.to_string().contains("libcuda.so.1"), "{e}"),
        }
    }
}
