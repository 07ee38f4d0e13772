//! The status codes of ABI.md, each thread's last error message, and the
//! guard every entry runs its body in: a panic becomes
//! `NAX_ERR_INTERNAL` with its message, never an unwind across the C
//! boundary or an abort, and nothing is printed.

use nax_runtime::{CallError, HostError, RuntimeError, Subject};
use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// `NAX_OK`.
pub const OK: c_int = 0;
/// `NAX_ERR_ARGUMENT`.
pub const ARGUMENT: c_int = 1;
/// `NAX_ERR_WEIGHTS`.
pub const WEIGHTS: c_int = 2;
/// `NAX_ERR_MEMORY`.
pub const MEMORY: c_int = 3;
/// `NAX_ERR_CPU`.
pub const CPU: c_int = 4;
/// `NAX_ERR_INTERNAL`.
pub const INTERNAL: c_int = 5;
/// `NAX_ERR_COLLECTIVE`.
pub const COLLECTIVE: c_int = 6;

/// Why an entry failed: its status code and the message for `NAME_last_error`.
#[derive(Debug)]
pub struct Failure {
    pub code: c_int,
    pub message: String,
}

impl Failure {
    /// A bad argument.
    pub fn argument(message: impl Into<String>) -> Failure {
        Failure { code: ARGUMENT, message: message.into() }
    }

    /// Memory a call needs that could not be had.
    pub fn memory(message: impl Into<String>) -> Failure {
        Failure { code: MEMORY, message: message.into() }
    }

    /// Missing, unreadable or ill-fitting weights.
    pub fn weights(message: impl Into<String>) -> Failure {
        Failure { code: WEIGHTS, message: message.into() }
    }

    /// A bug in nax.
    pub fn internal(message: impl Into<String>) -> Failure {
        Failure { code: INTERNAL, message: format!("internal error: {}", message.into()) }
    }

    /// A runtime error in `context` (`in `forward``), with the code its kind
    /// calls for.
    pub fn runtime(context: &str, e: impl Into<RuntimeError>) -> Failure {
        let e = e.into();
        let code = match &e {
            RuntimeError::Host(HostError::Allocation { .. }) => MEMORY,
            RuntimeError::Call(c) => match c.as_ref() {
                CallError::Memory { .. } => MEMORY,
                CallError::MissingWeight(_) => WEIGHTS,
                CallError::DType { subject: Subject::Weight(_), .. } | CallError::Rank { subject: Subject::Weight(_), .. } => WEIGHTS,
                _ => ARGUMENT,
            },
            RuntimeError::Collective(_) => COLLECTIVE,
            RuntimeError::Internal(_) | RuntimeError::WrongFunction { .. } | RuntimeError::UnknownSize { .. } | RuntimeError::ThreadPool { .. } => INTERNAL,
            RuntimeError::Host(HostError::Read { .. } | HostError::Format { .. } | HostError::UnsupportedDType { .. } | HostError::BadAxesMetadata { .. }) => {
                WEIGHTS
            }
            _ => ARGUMENT,
        };
        let message = if code == INTERNAL { format!("internal error {context}: {e}") } else { format!("{context}: {e}") };
        Failure { code, message }
    }
}

thread_local! {
    /// This thread's last error message ("" after a success).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Sets this thread's last error message (interior NULs become spaces).
fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// This thread's last error message, valid until its next call into the library.
pub fn last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Runs an entry's body: its status code, with this thread's message set
/// (empty on success). A panic is caught and reported as `NAX_ERR_INTERNAL`.
pub fn guard(body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    silence_panics();
    let (code, message) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => (OK, String::new()),
        Ok(Err(f)) => (f.code, f.message),
        Err(payload) => {
            let what = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default();
            (INTERNAL, format!("internal error: nax panicked: {what}"))
        }
    };
    // Setting the message allocates; a failure there must not unwind either.
    if catch_unwind(|| set_last_error(&message)).is_err() {
        return INTERNAL;
    }
    code
}

/// Replaces the default panic hook, which prints, by a silent one: panics
/// are reported through status codes. The hook is this library's own (its
/// copy of the standard library is private to it).
fn silence_panics() {
    static SILENT: std::sync::Once = std::sync::Once::new();
    SILENT.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> String {
        // SAFETY: the pointer is this thread's message, alive until the next call.
        unsafe { std::ffi::CStr::from_ptr(last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_is_an_internal_error_with_its_message_and_success_clears_it() {
        assert_eq!(guard(|| panic!("boom")), INTERNAL);
        assert!(message().contains("boom"), "{}", message());
        assert_eq!(guard(|| Err(Failure::argument("bad x"))), ARGUMENT);
        assert_eq!(message(), "bad x");
        assert_eq!(guard(|| Ok(())), OK);
        assert_eq!(message(), "");
    }
}
