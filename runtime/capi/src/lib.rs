//! nax's C ABI (the book's chapter "The C ABI"), the same for every program: the
//! part of an AOT shared library that is not the program's own. `nax build
//! --emit so` links this crate's static archive with the program's kernels
//! (an object file), its plans (JSON), optionally its weights, and a small
//! generated C file whose `NAME_open`, `NAME_call`, ... forward here with a
//! [`Library`] that describes them. A version script then hides every
//! symbol but the `NAME_` entries, so two libraries, each with its own
//! copy of this crate and of Rust's standard library, load into one process.
//!
//! Architecture invariants: no entry unwinds or aborts across the C
//! boundary (each catches panics: [`status::guard`]); every pointer the
//! caller gives is checked before it is read (NULL, device, dtype, ranks,
//! sizes, strides against `capacity`), and tensors are read through the
//! runtime's bounds-checked views; nothing prints.

mod allocator;
mod collectives;
mod dlpack;
mod entries;
mod library;
mod model;
mod status;
mod tensors;

/// The library's allocator, in the static archive `nax build --emit so`
/// links (feature `library`, which `build.rs` turns on), not when the
/// crate is a dependency of the tests.
#[cfg(feature = "library")]
#[global_allocator]
static ALLOCATOR: LibraryAllocator = LibraryAllocator;

pub use allocator::LibraryAllocator;
pub use collectives::{HostCollectives, NaxCollectives, NaxGroup};
pub use dlpack::{DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, NaxArg, NaxResult, NaxShardResult, describe, dl_dtype, nax_dtype};
pub use library::{FunctionCode, Library};
pub use model::ShardOptions;
pub use tensors::{Input, Refusal, tensor};
