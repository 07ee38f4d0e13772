//! What the compiler and the runtime agree on, below both: the element
//! types ([`DType`]), symbolic sizes and the size table a compiled
//! function carries ([`SizeTable`], solved at each call), and the
//! description of the machine code runs on ([`machine`]), read by kernel
//! formation, every back end, the ahead-of-time libraries' feature check
//! and the runtime's dispatch of its products. Nothing here compiles or
//! runs a program; it has no dependency on a compiler crate or a code
//! generator.

mod dtype;
pub mod machine;
mod sizes;

pub use dtype::DType;
pub use machine::{Feature, Features, Machine, NAMED_CPUS, NamedCpu, Processor, UnknownCpu};
pub use sizes::{MAX_SIZE, Size, SizeError, SizeTable, SymDef, SymId, Symbol, clipped_position};
