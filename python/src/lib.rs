//! `nax._nax`, the native module of the `nax` Python package
//! (`../shared/spec/PYTHON.md`): [`compile`] a program into a [`Module`]
//! whose [`Function`]s take numpy arrays, torch tensors, any `__dlpack__`
//! object or a [`Tensor`] (read in place, whatever their strides) and give a
//! [`Tensor`]; [`Tensor`] is a named tensor with coordinates and the eager
//! arithmetic of LANGUAGE.md section 12, exported through DLPack without a
//! copy; [`load`] opens an AOT library (ABI.md). Errors are the
//! `nax.CompileError` and `nax.Error` exceptions ([`errors`]); a call
//! releases the GIL while its kernels run.
//!
//! The pieces: `errors` (the exceptions and how nax's errors become them),
//! `dlpack` (objects in through DLPack, tensors out), `tensor` (the
//! `Tensor` class), `module` (`compile`, `Module`, `Function`, the
//! argument binding shared with `library`), `sharded` (a module split
//! over processes, its collectives through `torch.distributed`),
//! `library` (`load`).

mod dlpack;
mod errors;
mod library;
mod module;
mod sharded;
mod tensor;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _nax(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("CompileError", py.get_type::<errors::CompileError>())?;
    m.add("CollectiveError", py.get_type::<errors::CollectiveError>())?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<module::Module>()?;
    m.add_class::<module::Function>()?;
    m.add_class::<sharded::ShardedFunction>()?;
    m.add_class::<library::Library>()?;
    m.add_class::<library::LibraryFunction>()?;
    m.add_function(wrap_pyfunction!(module::compile, m)?)?;
    m.add_function(wrap_pyfunction!(library::load, m)?)?;
    Ok(())
}
