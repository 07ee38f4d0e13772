//! The kernel IR's text form, for `nax build --emit kernels` and file tests:
//!
//! ```text
//! program f
//! module_symbols 0
//! buffer %0 f32[4 3] input 0
//! buffer %2 f32[4 3] temporary
//! kernel %2 loops [4 parallel, 3 vector] store add(f32, load %0[i0 i1], load %1[i1])
//! result %2
//! ```

use crate::kernel::{Body, BufferKind, Expr, Index, Program, Role};
use nax_ir::text::{along_name, map_fn_name, print_symbols, reduction_name, size_text};
use nax_ir::Literal;
use std::fmt::Write;

fn index_text(i: Index) -> String {
    match i {
        Index::Loop(l) => format!("i{l}"),
        Index::Const(c) => c.to_string(),
        Index::Zero => "0".to_string(),
    }
}

fn expr_text(e: &Expr) -> String {
    match e {
        Expr::Load { buffer, index } => {
            let idx: Vec<String> = index.iter().map(|&i| index_text(i)).collect();
            format!("load %{buffer}[{}]", idx.join(" "))
        }
        Expr::Literal(Literal::Int(v)) => v.to_string(),
        Expr::Literal(Literal::Float(v)) => format!("{v:?}"),
        Expr::Literal(Literal::Bool(v)) => v.to_string(),
        Expr::Size(s) => format!("size {}", size_text(*s)),
        Expr::LoopIndex(l) => format!("i{l}"),
        Expr::Apply { func, compute, args } => {
            let args: Vec<String> = args.iter().map(expr_text).collect();
            format!("{}({}, {})", map_fn_name(*func), compute.as_str(), args.join(", "))
        }
    }
}

fn role_text(r: Role) -> &'static str {
    match r {
        Role::Parallel => "parallel",
        Role::Serial => "serial",
        Role::Vector => "vector",
        Role::ParallelVector => "parallel-vector",
        Role::Reduce => "reduce",
    }
}

/// Prints a program in its text form.
pub fn print(p: &Program) -> String {
    let mut out = format!("program {}\n", p.name);
    print_symbols(&p.symbols, &mut out);
    for (size, index) in &p.size_arguments {
        let _ = writeln!(out, "size_argument {} input {index}", size_text(*size));
    }
    for (i, b) in p.buffers.iter().enumerate() {
        let shape: Vec<String> = b.shape.iter().map(|&s| size_text(s)).collect();
        let kind = match &b.kind {
            BufferKind::Input(k) => format!("input {k}"),
            BufferKind::Weight(w) => format!("weight {w:?}"),
            BufferKind::Temporary => "temporary".to_string(),
            BufferKind::Alias(a) => format!("alias %{a}"),
        };
        let _ = writeln!(out, "buffer %{i} {}[{}] {kind}", b.dtype.as_str(), shape.join(" "));
    }
    for k in &p.kernels {
        let loops: Vec<String> = k.loops.iter().map(|l| format!("{} {}", size_text(l.extent), role_text(l.role))).collect();
        let body = match &k.body {
            Body::Store(e) => format!("store {}", expr_text(e)),
            Body::Reduce { op, value } => format!("reduce {} {}", reduction_name(*op), expr_text(value)),
            Body::Along { func, axis, value } => format!("along {} i{axis} {}", along_name(*func), expr_text(value)),
        };
        let _ = writeln!(out, "kernel %{} loops [{}] {body}", k.output, loops.join(", "));
    }
    let _ = writeln!(out, "result %{}", p.result);
    out
}
