//! The package's exceptions: `nax.CompileError` (a program that does not
//! check: the rendered diagnostics, and `.diagnostics`, the JSON objects
//! of CLI.md as dicts) and `nax.Error` (everything else nax refuses: a bad
//! call, tensor, file or library; a failed collective is its subclass
//! `nax.CollectiveError`), all `ValueError`s, the conversion
//! of nax's typed errors into them, and the guard that turns a panic into
//! a `nax.Error` at every entry.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

create_exception!(nax, Error, PyValueError, "nax refused a call, a tensor, a file or a library; the message is what `nax run` would print.");
create_exception!(
    nax,
    CollectiveError,
    Error,
    "A collective of a sharded function failed in the host's engine (a rank died, the engine timed out): the call ended on this rank."
);
create_exception!(
    nax,
    CompileError,
    PyValueError,
    "A program that does not check: the message is the rendered diagnostics, `.diagnostics` the list of their JSON objects (CLI.md)."
);

/// Runs `body`, turning a panic (a bug of nax) into a `nax.Error` that
/// says so: no call, compilation or tensor operation may take the
/// interpreter down or escape `except Exception` (PyO3's own
/// `PanicException` is a `BaseException`).
pub fn guard<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let message = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default();
        Err(error(format!("internal error: nax panicked ({message}); please report it")))
    })
}

/// A `nax.Error` with this message.
pub fn error(message: impl std::fmt::Display) -> PyErr {
    Error::new_err(message.to_string())
}

/// nax's error as the exception PYTHON.md names: diagnostics of `source`
/// become a `CompileError`, the rest a `nax.Error`.
pub fn from_nax(py: Python<'_>, source: &str, e: nax::Error) -> PyErr {
    match e {
        nax::Error::Diagnostics { diagnostics, rendered } => {
            let err = CompileError::new_err(rendered);
            let objects = nax::diagnostics_json(source, &diagnostics);
            let attach = || -> PyResult<()> {
                let json = py.import("json")?;
                let list = PyList::empty(py);
                for object in objects {
                    list.append(json.call_method1("loads", (object.to_string(),))?)?;
                }
                err.value(py).setattr("diagnostics", list)
            };
            match attach() {
                Ok(()) => err,
                Err(failure) => failure,
            }
        }
        other => error(other),
    }
}

/// An error at a call: a failed collective is a `nax.CollectiveError`,
/// the rest a `nax.Error`.
pub fn at_call(e: nax::Error) -> PyErr {
    match e {
        nax::Error::Runtime(nax::RuntimeError::Collective(c)) => CollectiveError::new_err(format!("a collective failed: {c}")),
        other => error(other),
    }
}
