//! The nax runtime: what a host application links to call compiled nax code,
//! without the compiler. Today: element types ([`DType`]).
//!
//! Architecture invariant: this crate depends on no part of the compiler;
//! the compiler depends on it for the types both sides share.

mod dtype;

pub use dtype::DType;
