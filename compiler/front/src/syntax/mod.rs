//! Syntax: the lexer, the parser and the syntax tree.

pub mod ast;
mod lexer;
mod parser;

pub use parser::with_stack;
pub use parser::{MAX_DEPTH, parse};
