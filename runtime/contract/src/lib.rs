//! What the compiler and the runtime agree on, below both: today the
//! description of the machine code runs on ([`machine`]), read by kernel
//! formation, every back end, the ahead-of-time libraries' feature check
//! and the runtime's dispatch of its products. Nothing here compiles or
//! runs anything; it has no dependency on a compiler crate or a code
//! generator.

pub mod machine;

pub use machine::{Feature, Features, Machine, NAMED_CPUS, NamedCpu, Processor, UnknownCpu};
