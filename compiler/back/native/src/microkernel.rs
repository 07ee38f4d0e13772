//! The matrix-product microkernel, written once against the [`Emitter`]:
//! `C[rows x cols] (+)= A B` over one depth pass of packed panels, the
//! tile's accumulators in vector registers (`rows` times `cols / lanes`
//! of them), each depth step one vector load per B vector, one broadcast
//! per row of A and a fused multiply-add per accumulator. The contract
//! with the driver (buffers, sizes) is [`nax_runtime::plan::Microkernel`]'s.
//!
//! The write-back stores whole vectors when the tile is complete and C's
//! columns are contiguous; otherwise (an edge tile, a strided C) the
//! accumulators go to the scratch tile and the valid part is copied out
//! element by element. "Add to C" reads C before storing.

use crate::emitter::{Binary, Compare, Emitter, Kind};
use nax_runtime::DType;
use nax_runtime::plan::Microkernel;

/// The microkernel's buffers, in the driver's order.
const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const SCRATCH: usize = 3;

/// Emits the body of a microkernel function.
pub fn lower_microkernel<E: Emitter>(e: &mut E, m: &Microkernel) {
    let kind = if m.dtype == DType::F64 { Kind::F64 } else { Kind::F32 };
    let (rows, cols, lanes) = (i64::from(m.rows), i64::from(m.cols), m.lanes);
    let vectors = i64::from(m.cols / m.lanes);
    let int = |e: &mut E, v: i64| e.int(Kind::I64, v);
    let add = |e: &mut E, a, b| e.binary(Binary::Add, Kind::I64, a, b);
    let mul = |e: &mut E, a, b| e.binary(Binary::Mul, Kind::I64, a, b);
    let [depth, row_step, col_step, valid_rows, valid_cols, accumulate] = [0, 1, 2, 3, 4, 5].map(|s| e.size(s));
    let zero = e.float(kind, 0.0);
    let zeros = e.splat(kind, lanes, zero);
    let acc: Vec<Vec<E::Var>> = (0..rows).map(|_| (0..vectors).map(|_| e.vector_variable(kind, lanes, zeros)).collect()).collect();
    let start = int(e, 0);

    // The depth loop: the tile's rank-1 updates.
    let (depth_loop, p) = e.begin_loop(start, depth, 1);
    let (rows_v, cols_v) = (int(e, rows), int(e, cols));
    let a_row = mul(e, p, rows_v);
    let b_row = mul(e, p, cols_v);
    let b: Vec<E::Value> = (0..vectors)
        .map(|v| {
            let offset = int(e, v * i64::from(lanes));
            let at = add(e, b_row, offset);
            e.load_vector(kind, lanes, B, at)
        })
        .collect();
    for (r, row) in acc.iter().enumerate() {
        let offset = int(e, r as i64);
        let at = add(e, a_row, offset);
        let x = e.load(kind, A, at);
        let broadcast = e.splat(kind, lanes, x);
        for (&var, &bv) in row.iter().zip(&b) {
            let old = e.get(var);
            let new = e.vector_multiply_add(kind, lanes, broadcast, bv, old);
            e.set(var, new);
        }
    }
    e.end_loop(depth_loop);

    // A loop of one or no iteration is an `if`.
    let one = int(e, 1);
    let (rows_v, cols_v) = (int(e, rows), int(e, cols));
    let whole_rows = e.compare(Compare::Eq, Kind::I64, valid_rows, rows_v);
    let whole_cols = e.compare(Compare::Eq, Kind::I64, valid_cols, cols_v);
    let unit_step = e.compare(Compare::Eq, Kind::I64, col_step, one);
    let whole = e.binary(Binary::And, Kind::Bool, whole_rows, whole_cols);
    let fast = e.binary(Binary::And, Kind::Bool, whole, unit_step);
    let fast = e.convert(Kind::Bool, Kind::I64, fast);

    // Whole vectors straight to C.
    let (fast_if, _) = e.begin_loop(start, fast, 1);
    let vector_at = |e: &mut E, r: usize, v: usize| {
        let row = int(e, r as i64);
        let row_at = mul(e, row, row_step);
        let offset = int(e, v as i64 * i64::from(lanes));
        add(e, row_at, offset)
    };
    let (add_if, _) = e.begin_loop(start, accumulate, 1);
    for (r, row) in acc.iter().enumerate() {
        for (v, &var) in row.iter().enumerate() {
            let at = vector_at(e, r, v);
            let old = e.load_vector(kind, lanes, C, at);
            let x = e.get(var);
            let sum = e.vector_add(kind, lanes, x, old);
            e.set(var, sum);
        }
    }
    e.end_loop(add_if);
    for (r, row) in acc.iter().enumerate() {
        for (v, &var) in row.iter().enumerate() {
            let at = vector_at(e, r, v);
            let x = e.get(var);
            e.store_vector(kind, lanes, C, at, x);
        }
    }
    e.end_loop(fast_if);

    // Through the scratch tile, element by element.
    let slow = e.binary(Binary::Sub, Kind::I64, one, fast);
    let (slow_if, _) = e.begin_loop(start, slow, 1);
    for (r, row) in acc.iter().enumerate() {
        for (v, &var) in row.iter().enumerate() {
            let at = int(e, r as i64 * cols + v as i64 * i64::from(lanes));
            let x = e.get(var);
            e.store_vector(kind, lanes, SCRATCH, at, x);
        }
    }
    let (row_loop, r) = e.begin_loop(start, valid_rows, 1);
    let cols_v = int(e, cols);
    let tile_row = mul(e, r, cols_v);
    let c_row = mul(e, r, row_step);
    let (col_loop, c) = e.begin_loop(start, valid_cols, 1);
    let tile_at = add(e, tile_row, c);
    let x = e.load(kind, SCRATCH, tile_at);
    let c_col = mul(e, c, col_step);
    let at = add(e, c_row, c_col);
    let value = e.variable(kind, x);
    let (add_if, _) = e.begin_loop(start, accumulate, 1);
    let old = e.load(kind, C, at);
    let x = e.get(value);
    let sum = e.binary(Binary::Add, kind, x, old);
    e.set(value, sum);
    e.end_loop(add_if);
    let x = e.get(value);
    e.store(kind, C, at, x);
    e.end_loop(col_loop);
    e.end_loop(row_loop);
    e.end_loop(slow_if);
}
