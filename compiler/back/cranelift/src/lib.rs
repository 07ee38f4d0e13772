//! The Cranelift back end (placeholder being written).
