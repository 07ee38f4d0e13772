//! Kernel lowering, written once for every code generator: a kernel of the
//! kernel IR becomes emitter calls. The loop nest is the kernel's (its
//! parallel loop runs over the `begin..end` the driver gives; a tile's
//! transposed read is staged through a scratch tile by in-register
//! transposes); loads and stores index row-major buffers through strides
//! computed once at entry; values compute in the kinds of
//! [`crate::emitter::Kind`] with the reference interpreter's conversions,
//! so every back end agrees with it.

use crate::emitter::{Binary, Compare, Emitter, Kind, Unary};
use crate::math;
use crate::plan::Slots;
use crate::share::Parameters;
use nax_ir::{Literal, MapFn};
use nax_kernel::{Body, Expr, GemmLoops, Index, Kernel, Program, STREAM_BLOCK, Transpose};
use nax_ops::{AlongAxis, Elementwise, Reduction};
use nax_ops::{BinaryOp, UnaryOp};
use nax_runtime::DType;
use nax_runtime::plan::SizeRef;
use std::collections::HashMap;

/// The positions of a reduction's last loop an f32 sum adds in f32 before
/// it adds their sum to its f64 total ([`Lowering::sum_in_blocks`]): long
/// enough that the total's cost vanishes, short enough that each lane's
/// share of a block (64 terms over 64 lanes) keeps the f32 partial sums
/// accurate.
const SUM_BLOCK: i64 = 4096;

/// The kind a buffer's elements have in memory.
pub fn memory_kind(d: DType) -> Kind {
    match d {
        DType::F16 | DType::BF16 => Kind::I16,
        DType::F32 => Kind::F32,
        DType::F64 => Kind::F64,
        DType::I32 => Kind::I32,
        DType::I64 => Kind::I64,
        DType::Bool => Kind::I8,
    }
}

/// The kind a dtype computes in.
pub fn register_kind(d: DType) -> Kind {
    match d {
        DType::F16 | DType::BF16 | DType::F32 => Kind::F32,
        DType::F64 => Kind::F64,
        DType::I32 => Kind::I32,
        DType::I64 => Kind::I64,
        DType::Bool => Kind::Bool,
    }
}

/// Emits the body of one kernel function, every load and store of its
/// buffer's element kind (else [`crate::CodegenError::Access`]: a bug of
/// nax) and, in a program with a fault record (`--check-bounds`), checked
/// while it runs ([`crate::bounds::Checked`]). The constant positions
/// `parameters` names are read from their slots (a body that kernels
/// share, see [`crate::Sharing`]).
pub fn lower_kernel<E: Emitter>(e: &mut E, p: &Program, plan: &Slots, k: &Kernel, parameters: &Parameters) -> Result<(), crate::CodegenError> {
    let kernel = p.kernels.iter().position(|x| std::ptr::eq(x, k)).unwrap_or(usize::MAX);
    let kinds = p.buffers.iter().map(|b| memory_kind(b.dtype)).collect();
    let mut checked = crate::bounds::Checked { inner: e, kinds, fault: p.fault_buffer(), kernel, mismatch: None, scratch: HashMap::new() };
    lower_nest(&mut checked, p, plan, k, parameters);
    match checked.mismatch {
        None => Ok(()),
        Some(m) => Err(crate::CodegenError::Access {
            function: p.name.clone(),
            kernel,
            buffer: m.buffer,
            expected: format!("{:?}", m.expected),
            accessed: format!("{:?}", m.accessed),
        }),
    }
}

/// How many values the driver passes a kernel's code after the program's
/// size slots: a matrix product's epilogue gets its tile (the loops'
/// first positions, its rows and its columns), an attention kernel its
/// tile and whether it probes; a loop nest nothing.
pub fn driver_values(k: &Kernel) -> usize {
    let loops = k.loops.len();
    match (&k.schedule.gemm, &k.schedule.attention) {
        (_, Some(_)) => loops + 3,
        (Some(_), None) => loops + 2,
        (None, None) => 0,
    }
}

fn lower_nest<E: Emitter>(e: &mut E, p: &Program, plan: &Slots, k: &Kernel, parameters: &Parameters) {
    let mut l =
        Lowering { e, p, plan, k, parameters, index: vec![None; k.loops.len()], strides: HashMap::new(), extents: Vec::new(), rows: Vec::new(), staging: None };
    l.run();
}

/// A loop's span in the current tile: the loop, its first position and
/// the position past its last.
type Span<V> = (usize, V, V);

struct Lowering<'a, E: Emitter> {
    e: &'a mut E,
    p: &'a Program,
    plan: &'a Slots,
    k: &'a Kernel,
    /// The constant positions read from slots.
    parameters: &'a Parameters,
    /// The current index of each open loop.
    index: Vec<Option<E::Value>>,
    /// Each used buffer's strides, computed at entry.
    strides: HashMap<usize, Vec<Option<E::Value>>>,
    extents: Vec<E::Value>,
    /// The row reductions' values at the current row.
    rows: Vec<(E::Value, Kind)>,
    /// The current tile's scratch, while a tiled store with a transposed
    /// read runs (see [`nax_kernel::Transpose`]).
    staging: Option<Staging<E::Value>>,
}

/// How a kernel's scratch array (see [`Lowering::scratch_buffer`]) lays
/// out a staged tile or a streamed block: the loop of its rows (a tile's)
/// and of its columns, their first positions and its row's length.
#[derive(Clone, Copy)]
struct Staging<V> {
    outer: Option<(usize, V)>,
    inner: usize,
    first_inner: V,
    width: i64,
}

impl<E: Emitter> Lowering<'_, E> {
    fn size(&mut self, s: nax_runtime::Size) -> E::Value {
        match self.plan.size(self.p, s) {
            SizeRef::Const(c) => self.e.int(Kind::I64, c as i64),
            SizeRef::Slot(i) => self.e.size(i),
        }
    }

    fn prepare_strides(&mut self, buffer: usize) {
        if self.strides.contains_key(&buffer) {
            return;
        }
        let shape = self.p.buffers[buffer].shape.clone();
        let mut strides = vec![None; shape.len()];
        let mut acc: Option<E::Value> = None;
        for a in (0..shape.len()).rev() {
            strides[a] = acc;
            let s = self.size(shape[a]);
            acc = Some(match acc {
                None => s,
                Some(v) => self.e.binary(Binary::Mul, Kind::I64, v, s),
            });
        }
        self.strides.insert(buffer, strides);
    }

    fn run(&mut self) {
        if self.k.schedule.gemm.as_ref().is_some_and(|g| g.epilogue.is_none()) {
            // The driver runs it through the matrix-product library.
            return;
        }
        for b in self.p.kernel_buffers(self.k) {
            self.prepare_strides(b);
        }
        self.extents = self.k.loops.iter().map(|l| l.extent).collect::<Vec<_>>().into_iter().map(|s| self.size(s)).collect();
        let rank = self.p.buffers[self.k.output].shape.len();
        if let Some(g) = self.k.schedule.gemm.clone()
            && let Some(epilogue) = &g.epilogue
        {
            self.epilogue_tile(&g, epilogue);
            return;
        }
        let order = self.k.order();
        match &self.k.body {
            Body::Store(v) if !self.k.rows.is_empty() => {
                // Per row: each row reduction over the last loop, then the store over it.
                let last = self.k.loops.len() - 1;
                let outer: Vec<usize> = (0..last).collect();
                let open = self.open(&outer);
                if let Some(ahead) = self.k.schedule.prefetch {
                    self.prefetch_row(ahead as i64);
                }
                for row in &self.k.rows {
                    let (x, kind) = self.reduce(row.op, row.dtype, &row.value, &[last]);
                    // Rounded to its dtype, as a stored and reloaded value would be.
                    let stored = to_memory(self.e, x, kind, row.dtype);
                    self.rows.push((from_memory(self.e, stored, row.dtype), register_kind(row.dtype)));
                }
                match self.k.schedule.stream {
                    Some(lanes) => {
                        self.stream_last_loop(last, lanes, v);
                        self.e.streaming_fence();
                    }
                    None => {
                        let inner = self.open(&[last]);
                        let (x, kind) = self.eval(v);
                        self.store_output(x, kind);
                        self.close(inner);
                    }
                }
                self.close(open);
            }
            Body::Store(v) => {
                let tile = self.k.schedule.tile.filter(|_| order.len() >= 2);
                match (tile, &self.k.schedule.transpose, self.k.schedule.stream) {
                    (Some((outer, inner)), Some(t), _) => {
                        // The verifier bounds the tile's scratch.
                        self.declare_scratch(outer * inner);
                        let mut open = self.open(&order[..order.len() - 2]);
                        let (tiles, spans) = self.open_tiles(&order[order.len() - 2..], [outer as i64, inner as i64]);
                        open.extend(tiles);
                        self.transposed_tile(t, spans, inner as i64, v);
                        self.close(open);
                    }
                    (Some((outer, inner)), None, _) => {
                        let mut open = self.open(&order[..order.len() - 2]);
                        let (tiles, spans) = self.open_tiles(&order[order.len() - 2..], [outer as i64, inner as i64]);
                        open.extend(tiles);
                        let inside = spans.map(|(i, first, stop)| self.open_from(i, first, stop));
                        let (x, kind) = self.eval(v);
                        self.store_output(x, kind);
                        self.close(inside.into());
                        self.close(open);
                    }
                    (None, _, Some(lanes)) => self.streamed_store(&order, lanes, v),
                    (None, _, None) if self.k.schedule.flat > 0 => {
                        // A GPU's store: every loop in one flat parallel loop; a
                        // CPU's: the loops before the last (the vectorised one).
                        let open = self.open(&order);
                        let (x, kind) = self.eval(v);
                        self.store_output(x, kind);
                        self.close(open);
                    }
                    (None, _, None) => {
                        let mut open = self.open(&order[..order.len().saturating_sub(2)]);
                        open.extend(self.open(&order[order.len().saturating_sub(2)..]));
                        let (x, kind) = self.eval(v);
                        self.store_output(x, kind);
                        self.close(open);
                    }
                }
                if self.k.schedule.stream.is_some() {
                    self.e.streaming_fence();
                }
            }
            Body::Reduce { op, value } if order.iter().take(rank).copied().eq(0..rank) => {
                let open = self.open(&order[..rank]);
                let dtype = self.p.buffers[self.k.output].dtype;
                let (x, kind) = self.reduce(*op, dtype, value, &order[rank..]);
                self.store_output(x, kind);
                self.close(open);
            }
            Body::Reduce { op, value } => self.reduce_in_memory(*op, value, &order, rank),
            Body::Attention { keys, logit, visible, .. } => self.attention_tile(*keys, logit, visible.as_ref()),
            Body::Scatter { axis, init, position, value } => self.scatter(*axis, init.as_ref(), position, value, rank),
            Body::Along { func, axis, value } => match self.k.schedule.columns {
                Some(width) => self.along_columns(*axis, value, width as i64),
                None => self.along(*func, *axis, value),
            },
        }
    }

    /// A matrix product's epilogue over one block of the output, in place,
    /// after the driver's products wrote it (see
    /// `nax_runtime::plan::GemmPlan::epilogue`): the batch loops at the
    /// positions the size slots after the plan's give, then the tile's
    /// rows and columns from their first positions.
    fn epilogue_tile(&mut self, g: &GemmLoops, epilogue: &Expr) {
        let base = self.plan.slot_count();
        let loops = self.k.loops.len();
        for &l in &g.batch {
            self.index[l] = Some(self.e.size(base + l));
        }
        let zero = self.e.int(Kind::I64, 0);
        if let (Some(rows), Some(cols)) = (g.rows, g.cols) {
            self.prefetch_next_tile(epilogue, rows, cols, base);
        }
        let mut handles = Vec::new();
        for (l, count) in [(g.rows, base + loops), (g.cols, base + loops + 1)] {
            let Some(l) = l else { continue };
            let (first, count) = (self.e.size(base + l), self.e.size(count));
            let (h, i) = self.e.begin_loop(zero, count, 1);
            self.index[l] = Some(self.e.binary(Binary::Add, Kind::I64, first, i));
            handles.push(h);
        }
        let (x, kind) = self.eval(epilogue);
        self.store_output(x, kind);
        self.close(handles);
    }

    /// Asks for the rows of the next block down (the driver's products
    /// finish a column of blocks row block by row block) of each operand
    /// other than the output that the epilogue reads at the output's own
    /// position: a full-size operand stored long before (a backward
    /// pass's saved activation) comes from memory, and each tile would
    /// otherwise wait for its lines.
    fn prefetch_next_tile(&mut self, epilogue: &Expr, rows: usize, cols: usize, base: usize) {
        let loops = self.k.loops.len();
        let rank = self.p.buffers[self.k.output].shape.len();
        let own: Vec<Index> = (0..rank).map(Index::Loop).collect();
        let mut streams = loaded_at([epilogue], &own);
        streams.retain(|&b| b != self.k.output);
        if streams.is_empty() {
            return;
        }
        let (first_row, first_col) = (self.e.size(base + rows), self.e.size(base + cols));
        let (tile_rows, tile_cols) = (self.e.size(base + loops), self.e.size(base + loops + 1));
        let next_row = self.e.binary(Binary::Add, Kind::I64, first_row, tile_rows);
        let zero = self.e.int(Kind::I64, 0);
        let per_line = self.elements_per_line(streams.iter().copied());
        let (h_row, r) = self.e.begin_loop(zero, tile_rows, 1);
        self.index[rows] = Some(self.e.binary(Binary::Add, Kind::I64, next_row, r));
        let (h_col, c) = self.e.begin_loop(zero, tile_cols, per_line);
        self.index[cols] = Some(self.e.binary(Binary::Add, Kind::I64, first_col, c));
        for &b in &streams {
            let at = self.offset(b, &own);
            self.e.prefetch(memory_kind(self.p.buffers[b].dtype), b, at, false);
        }
        self.e.end_loop(h_col);
        self.e.end_loop(h_row);
    }

    /// The step of a loop that asks for each 64-byte cache line of these
    /// buffers once: the widest one's elements per line (a narrower one's
    /// lines get a request or more each).
    fn elements_per_line(&self, buffers: impl IntoIterator<Item = usize>) -> i64 {
        let widest = buffers.into_iter().map(|b| self.p.buffers[b].dtype.size_bytes()).max().unwrap_or(1);
        (64 / widest).max(1) as i64
    }

    /// The range loop `i` runs over: the driver's `begin..end` for the parallel loop.
    fn bounds(&mut self, i: usize) -> (E::Value, E::Value) {
        if i == 0 && self.k.parallel_loop() { self.e.range() } else { (self.e.int(Kind::I64, 0), self.extents[i]) }
    }

    /// Opens loops in order, nested with nothing between them. When any
    /// inner one is empty the outermost runs no times: the body would
    /// never run, and an outer loop of 2^40 positions around an empty one
    /// (a reduction over `[2^40, 0]`) would only spin.
    fn open(&mut self, loops: &[usize]) -> Vec<E::Loop> {
        self.open_around(loops, &[])
    }

    /// [`Self::open`], for loops that others (`within`, opened later,
    /// not by this call) will run inside: the outermost runs no times
    /// when one of those is empty, too.
    fn open_around(&mut self, loops: &[usize], within: &[usize]) -> Vec<E::Loop> {
        let flat = self.k.schedule.flat;
        if flat >= 2 && loops.len() >= flat && loops[..flat].iter().copied().eq(0..flat) {
            return self.open_flat(flat, &loops[flat..], within);
        }
        let inner: Vec<usize> = loops.iter().skip(1).chain(within).copied().collect();
        let shortest = match (loops, inner.split_first()) {
            ([_, ..], Some((&first, rest))) => {
                let first = self.extents[first];
                Some(rest.iter().fold(first, |m, &i| self.e.binary(Binary::Min, Kind::I64, m, self.extents[i])))
            }
            _ => None,
        };
        loops
            .iter()
            .enumerate()
            .map(|(n, &i)| {
                let (start, mut end) = self.bounds(i);
                if let (0, Some(shortest)) = (n, shortest) {
                    let zero = self.e.int(Kind::I64, 0);
                    let empty = self.e.compare(Compare::Eq, Kind::I64, shortest, zero);
                    end = self.e.select(Kind::I64, empty, start, end);
                }
                self.open_from(i, start, end)
            })
            .collect()
    }

    /// Opens the kernel's first `flat` loops as one flat loop over the
    /// driver's range of positions of their product (a GPU's threads, a
    /// CPU's rows), each loop's index its digit in the mixed radix of
    /// their extents, then `rest` nested inside; the flat loop runs no
    /// times when one of `rest` or `within` (loops the caller opens
    /// inside) is empty (as [`Self::open_around`]'s outermost loop).
    fn open_flat(&mut self, flat: usize, rest: &[usize], within: &[usize]) -> Vec<E::Loop> {
        let (start, mut end) = self.e.range();
        let inner: Vec<usize> = rest.iter().chain(within).copied().collect();
        if let Some((&first, others)) = inner.split_first() {
            let shortest = others.iter().fold(self.extents[first], |m, &i| self.e.binary(Binary::Min, Kind::I64, m, self.extents[i]));
            let zero = self.e.int(Kind::I64, 0);
            let empty = self.e.compare(Compare::Eq, Kind::I64, shortest, zero);
            end = self.e.select(Kind::I64, empty, start, end);
        }
        self.e.loop_role(self.k.loops[0].role);
        let (h, position) = self.e.begin_loop(start, end, 1);
        let mut left = position;
        for l in (1..flat).rev() {
            let extent = self.extents[l];
            let quotient = self.e.binary(Binary::DivU, Kind::I64, left, extent);
            let whole = self.e.binary(Binary::Mul, Kind::I64, quotient, extent);
            self.index[l] = Some(self.e.binary(Binary::Sub, Kind::I64, left, whole));
            left = quotient;
        }
        self.index[0] = Some(left);
        let mut handles = vec![h];
        for &i in rest {
            let (start, end) = self.bounds(i);
            handles.push(self.open_from(i, start, end));
        }
        handles
    }

    /// Prefetches the row `ahead` rows after the current one (the last
    /// loop's positions) of each operand the kernel reads at its own
    /// position, to read, and of the output, to write (unless streamed,
    /// see [`nax_kernel::Schedule::stream`]): one request per
    /// cache line of each, the operands' first (they are needed first),
    /// line by line. The row's index along the last loop is left at 0.
    fn prefetch_row(&mut self, ahead: i64) {
        let last = self.k.loops.len() - 1;
        let own: Vec<Index> = (0..=last).map(Index::Loop).collect();
        let mut rows: Vec<(usize, bool)> = loaded_at(self.k.values(), &own).into_iter().map(|b| (b, false)).collect();
        if self.k.schedule.stream.is_none() {
            // A streamed output is written without reading its lines.
            rows.push((self.k.output, true));
        }
        self.index[last] = Some(self.e.int(Kind::I64, 0));
        let length = self.extents[last];
        let rows_ahead = self.e.int(Kind::I64, ahead);
        let skip = self.e.binary(Binary::Mul, Kind::I64, length, rows_ahead);
        let next: Vec<E::Value> = rows
            .iter()
            .map(|&(b, _)| {
                let start = self.offset(b, &own);
                self.e.binary(Binary::Add, Kind::I64, start, skip)
            })
            .collect();
        let per_line = self.elements_per_line(rows.iter().map(|&(b, _)| b));
        let zero = self.e.int(Kind::I64, 0);
        let (h, k) = self.e.begin_loop(zero, length, per_line);
        for (&(b, write), &first) in rows.iter().zip(&next) {
            let at = self.e.binary(Binary::Add, Kind::I64, first, k);
            self.e.prefetch(memory_kind(self.p.buffers[b].dtype), b, at, write);
        }
        self.e.end_loop(h);
    }

    /// A softmax in column blocks, at a position along its axis: asks for
    /// the block's row `ahead` positions further along of each operand
    /// `value` reads at its own position, one request per line (see
    /// [`nax_kernel::Schedule::prefetch`]). Past the axis's end the
    /// requests fall on the next rows or past the operand: a prefetch
    /// never faults.
    fn ask_for_rows_ahead(&mut self, value: &Expr, axis: usize, (first, stop): (E::Value, E::Value), ahead: u64) {
        let last = self.k.loops.len() - 1;
        let own: Vec<Index> = (0..=last).map(Index::Loop).collect();
        let operands = loaded_at(std::iter::once(value), &own);
        let Some(here) = self.index[axis].filter(|_| !operands.is_empty()) else { return };
        let rows = self.e.int(Kind::I64, ahead as i64);
        let further = self.e.binary(Binary::Add, Kind::I64, here, rows);
        self.index[axis] = Some(further);
        let per_line = self.elements_per_line(operands.iter().copied());
        let (h, column) = self.e.begin_loop(first, stop, per_line);
        self.index[last] = Some(column);
        for b in operands {
            let at = self.offset(b, &own);
            self.e.prefetch(memory_kind(self.p.buffers[b].dtype), b, at, false);
        }
        self.e.end_loop(h);
        self.index[axis] = Some(here);
    }

    /// Opens loop `i` over `first..stop`.
    fn open_from(&mut self, i: usize, first: E::Value, stop: E::Value) -> E::Loop {
        self.e.loop_role(self.k.loops[i].role);
        let (h, v) = self.e.begin_loop(first, stop, 1);
        self.index[i] = Some(v);
        h
    }

    /// Opens a loop over the blocks of `width` positions of loop `i`; gives
    /// it, the current block's first position and the position past its
    /// last (the loop's end, for the last block).
    fn open_blocks(&mut self, i: usize, width: i64) -> (E::Loop, E::Value, E::Value) {
        let (start, end) = self.bounds(i);
        let (block, first) = self.e.begin_loop(start, end, width);
        let edge = self.e.int(Kind::I64, width);
        let past = self.e.binary(Binary::Add, Kind::I64, first, edge);
        (block, first, self.e.binary(Binary::Min, Kind::I64, past, end))
    }

    /// Opens the loops over the tiles of two loops, of edges `edges`;
    /// gives them and each loop's span in the current tile.
    fn open_tiles(&mut self, pair: &[usize], edges: [i64; 2]) -> (Vec<E::Loop>, [Span<E::Value>; 2]) {
        let mut handles = Vec::with_capacity(2);
        let mut firsts = Vec::with_capacity(2);
        for (&i, t) in pair.iter().zip(edges) {
            let (start, end) = self.bounds(i);
            self.e.loop_role(self.k.loops[i].role);
            let (h, first) = self.e.begin_loop(start, end, t);
            handles.push(h);
            firsts.push((i, first, end, t));
        }
        let spans = [0, 1].map(|k| {
            let (i, first, end, t) = firsts[k];
            let edge = self.e.int(Kind::I64, t);
            let past = self.e.binary(Binary::Add, Kind::I64, first, edge);
            (i, first, self.e.binary(Binary::Min, Kind::I64, past, end))
        });
        (handles, spans)
    }

    /// A tiled store with a transposed read, over one tile (see
    /// [`nax_kernel::Transpose`]): the read staged in the scratch, the
    /// store's values computed into it, then its rows copied to the
    /// output.
    fn transposed_tile(&mut self, t: &Transpose, spans: [Span<E::Value>; 2], width: i64, v: &Expr) {
        let [(outer, first_outer, stop_outer), (inner, first_inner, stop_inner)] = spans;
        let staging = Staging { outer: Some((outer, first_outer)), inner, first_inner, width };
        self.staging = Some(staging);
        self.stage_transposed(t, spans);
        let h_rows = self.open_from(outer, first_outer, stop_outer);
        let h_cols = self.open_from(inner, first_inner, stop_inner);
        self.store_scratch(v);
        self.e.end_loop(h_cols);
        // The tile's rows, copied out.
        self.copy_row(t.lanes, first_inner, stop_inner);
        self.e.end_loop(h_rows);
        self.staging = None;
    }

    /// The number the kernel's scratch array goes by: past every buffer of
    /// the program (see [`Emitter::scratch`]).
    fn scratch_buffer(&self) -> usize {
        self.p.buffers.len()
    }

    /// Declares the kernel's scratch array, of `elements` elements of the
    /// output's type.
    fn declare_scratch(&mut self, elements: u64) {
        let dtype = self.p.buffers[self.k.output].dtype;
        self.e.scratch(memory_kind(dtype), elements as u32, self.scratch_buffer());
    }

    /// The current position's element of the scratch (position 0 outside
    /// a staged tile or streamed block, which no lowering reads).
    fn scratch_at(&mut self) -> E::Value {
        let Some(s) = self.staging else { return self.e.int(Kind::I64, 0) };
        let Some(i) = self.index[s.inner] else { return self.e.int(Kind::I64, 0) };
        let column = self.e.binary(Binary::Sub, Kind::I64, i, s.first_inner);
        let Some((outer, first_outer)) = s.outer else { return column };
        let Some(o) = self.index[outer] else { return column };
        let row = self.e.binary(Binary::Sub, Kind::I64, o, first_outer);
        let width = self.e.int(Kind::I64, s.width);
        let row = self.e.binary(Binary::Mul, Kind::I64, row, width);
        self.e.binary(Binary::Add, Kind::I64, row, column)
    }

    /// A streamed plain store (see [`nax_kernel::Schedule::stream`]): the
    /// loops but the last as usual, then per block of [`STREAM_BLOCK`]
    /// positions of the last, the store's values computed into the
    /// scratch and copied out.
    fn streamed_store(&mut self, loops: &[usize], lanes: u32, v: &Expr) {
        let Some((&last, outer)) = loops.split_last() else { return };
        let open = self.open_around(outer, &[last]);
        self.stream_last_loop(last, lanes, v);
        self.close(open);
    }

    /// The last loop of a streamed store, the loops outside it open: per
    /// block of [`STREAM_BLOCK`] of its positions, the store's values
    /// computed into the scratch (declared here, the kernel's only one)
    /// and copied out in streaming vectors of `lanes`.
    fn stream_last_loop(&mut self, last: usize, lanes: u32, v: &Expr) {
        self.declare_scratch(STREAM_BLOCK);
        let (block, first, stop) = self.open_blocks(last, STREAM_BLOCK as i64);
        self.staging = Some(Staging { outer: None, inner: last, first_inner: first, width: STREAM_BLOCK as i64 });
        let h = self.open_from(last, first, stop);
        self.store_scratch(v);
        self.e.end_loop(h);
        self.copy_row(lanes, first, stop);
        self.staging = None;
        self.e.end_loop(block);
    }

    /// Evaluates a store's value at the current position into the scratch.
    fn store_scratch(&mut self, v: &Expr) {
        let (x, kind) = self.eval(v);
        let dtype = self.p.buffers[self.k.output].dtype;
        let stored = to_memory(self.e, x, kind, dtype);
        let at = self.scratch_at();
        let scratch = self.scratch_buffer();
        self.e.store(memory_kind(dtype), scratch, at, stored);
    }

    /// Stages a tile's transposed read in its scratch: each block of
    /// `lanes` x `lanes` whole inside the tile as `lanes` vector loads
    /// along the outer loop, an in-register transpose and `lanes` vector
    /// stores along the inner loop; then the tile's other elements one by
    /// one (the rows past the last whole block, then the columns past it
    /// in the blocks' rows).
    fn stage_transposed(&mut self, t: &Transpose, [(outer, first0, stop0), (inner, first1, stop1)]: [Span<E::Value>; 2]) {
        let kind = memory_kind(self.p.buffers[t.buffer].dtype);
        let scratch = self.scratch_buffer();
        let lanes = i64::from(t.lanes);
        let rows_end = self.whole_blocks_end(first0, stop0, lanes);
        let cols_end = self.whole_blocks_end(first1, stop1, lanes);
        let (h_rows, i) = self.e.begin_loop(first0, rows_end, lanes);
        let (h_cols, j) = self.e.begin_loop(first1, cols_end, lanes);
        self.index[outer] = Some(i);
        let mut block = Vec::with_capacity(t.lanes as usize);
        for k in 0..lanes {
            let k = self.e.int(Kind::I64, k);
            self.index[inner] = Some(self.e.binary(Binary::Add, Kind::I64, j, k));
            let at = self.offset(t.buffer, &t.index);
            block.push(self.e.load_vector(kind, t.lanes, t.buffer, at));
        }
        transpose_block(self.e, kind, t.lanes, &mut block);
        self.index[inner] = Some(j);
        for (r, row) in block.into_iter().enumerate() {
            let r = self.e.int(Kind::I64, r as i64);
            self.index[outer] = Some(self.e.binary(Binary::Add, Kind::I64, i, r));
            let at = self.scratch_at();
            self.e.store_vector(kind, t.lanes, scratch, at, row);
        }
        self.e.end_loop(h_cols);
        self.e.end_loop(h_rows);
        for (rows, cols) in [((rows_end, stop0), (first1, stop1)), ((first0, rows_end), (cols_end, stop1))] {
            let h_rows = self.open_from(outer, rows.0, rows.1);
            let h_cols = self.open_from(inner, cols.0, cols.1);
            let at = self.offset(t.buffer, &t.index);
            let x = self.e.load(kind, t.buffer, at);
            let to = self.scratch_at();
            self.e.store(kind, scratch, to, x);
            self.e.end_loop(h_cols);
            self.e.end_loop(h_rows);
        }
    }

    /// Copies the current row of the scratch, positions `first..stop` of
    /// its column loop, to the output: in vectors of `lanes` (streaming
    /// ones with [`nax_kernel::Schedule::stream`]), then the positions
    /// past the last whole vector one by one.
    fn copy_row(&mut self, lanes: u32, first: E::Value, stop: E::Value) {
        let Some(staging) = self.staging else { return };
        let scratch = self.scratch_buffer();
        let out = self.k.output;
        let kind = memory_kind(self.p.buffers[out].dtype);
        let inner = staging.inner;
        let whole_end = self.whole_blocks_end(first, stop, i64::from(lanes));
        let (h, j) = self.e.begin_loop(first, whole_end, i64::from(lanes));
        self.index[inner] = Some(j);
        let from = self.scratch_at();
        let x = self.e.load_vector(kind, lanes, scratch, from);
        let to = self.output_at();
        if let Some(bytes) = self.k.schedule.stream_ahead {
            self.ask_ahead(bytes);
        }
        if self.k.schedule.stream.is_some() {
            self.e.store_vector_streaming(kind, lanes, out, to, x);
        } else {
            self.e.store_vector(kind, lanes, out, to, x);
        }
        self.e.end_loop(h);
        let h = self.open_from(inner, whole_end, stop);
        let from = self.scratch_at();
        let x = self.e.load(kind, scratch, from);
        let to = self.output_at();
        self.e.store(kind, out, to, x);
        self.e.end_loop(h);
    }

    /// Asks for the line `bytes` ahead of the current position of each
    /// operand the kernel reads at its own position (see
    /// [`nax_kernel::Schedule::stream_ahead`]): once per vector a streamed
    /// store copies out, so one request per line of an operand as wide as
    /// the output. The address may lie past the operand (a prefetch never
    /// faults).
    fn ask_ahead(&mut self, bytes: u64) {
        let own: Vec<Index> = (0..self.k.loops.len()).map(Index::Loop).collect();
        for b in loaded_at(self.k.values(), &own) {
            let dtype = self.p.buffers[b].dtype;
            let at = self.offset(b, &own);
            let ahead = self.e.int(Kind::I64, (bytes / dtype.size_bytes() as u64) as i64);
            let at = self.e.binary(Binary::Add, Kind::I64, at, ahead);
            self.e.prefetch(memory_kind(dtype), b, at, false);
        }
    }

    /// The end of the whole blocks of `lanes` (a power of two) positions
    /// from `first` before `stop`.
    fn whole_blocks_end(&mut self, first: E::Value, stop: E::Value, lanes: i64) -> E::Value {
        let count = self.e.binary(Binary::Sub, Kind::I64, stop, first);
        let whole = self.e.int(Kind::I64, -lanes);
        let whole = self.e.binary(Binary::And, Kind::I64, count, whole);
        self.e.binary(Binary::Add, Kind::I64, first, whole)
    }

    fn close(&mut self, handles: Vec<E::Loop>) {
        for h in handles.into_iter().rev() {
            self.e.end_loop(h);
        }
    }

    /// The flat offset of an element of `buffer` at these indices.
    fn offset(&mut self, buffer: usize, index: &[Index]) -> E::Value {
        let strides = self.strides[&buffer].clone();
        let mut acc: Option<E::Value> = None;
        for (a, &i) in index.iter().enumerate() {
            let v = match i {
                Index::Loop(l) => match self.index[l] {
                    Some(v) => v,
                    None => continue,
                },
                Index::Zero => continue,
                Index::Const(c) => match self.parameters.slot(buffer, a, c) {
                    Some(slot) => self.e.size(slot),
                    None if c == 0 => continue,
                    None => self.e.int(Kind::I64, c as i64),
                },
            };
            let term = match strides[a] {
                Some(s) => self.e.binary(Binary::Mul, Kind::I64, v, s),
                None => v,
            };
            acc = Some(match acc {
                None => term,
                Some(x) => self.e.binary(Binary::Add, Kind::I64, x, term),
            });
        }
        acc.unwrap_or_else(|| self.e.int(Kind::I64, 0))
    }

    /// The offset of the output's current element (the output loops are the nest's first).
    fn output_at(&mut self) -> E::Value {
        let rank = self.p.buffers[self.k.output].shape.len();
        let index: Vec<Index> = (0..rank).map(Index::Loop).collect();
        self.offset(self.k.output, &index)
    }

    /// Stores a value at the output's current element.
    fn store_output(&mut self, x: E::Value, kind: Kind) {
        let out = self.k.output;
        let at = self.output_at();
        let dtype = self.p.buffers[out].dtype;
        let stored = to_memory(self.e, x, kind, dtype);
        self.e.store(memory_kind(dtype), out, at, stored);
    }

    /// The kind a reduction giving `dtype` accumulates in, and its identity.
    fn accumulator(&mut self, op: Reduction, dtype: DType, value: &Expr) -> (Kind, E::Value) {
        let value_kind = self.kind_of(value);
        let acc_kind = if dtype == DType::Bool {
            Kind::Bool
        } else if !dtype.is_float() && !value_kind.is_float() {
            Kind::I64
        } else if value_kind == Kind::F64 || dtype == DType::F64 {
            Kind::F64
        } else {
            Kind::F32
        };
        let init = match (acc_kind, op) {
            (Kind::Bool, Reduction::Min) => self.e.int(Kind::Bool, 1),
            (Kind::Bool, _) => self.e.int(Kind::Bool, 0),
            (Kind::I64, Reduction::Max) => self.e.int(Kind::I64, i64::MIN),
            (Kind::I64, Reduction::Min) => self.e.int(Kind::I64, i64::MAX),
            (Kind::I64, Reduction::Prod) => self.e.int(Kind::I64, 1),
            (Kind::I64, _) => self.e.int(Kind::I64, 0),
            (k, Reduction::Max) => self.e.float(k, f64::NEG_INFINITY),
            (k, Reduction::Min) => self.e.float(k, f64::INFINITY),
            (k, Reduction::Prod) => self.e.float(k, 1.0),
            (k, _) => self.e.float(k, 0.0),
        };
        (acc_kind, init)
    }

    /// How a reduction combines an accumulator with a term.
    fn combine(acc_kind: Kind, op: Reduction) -> Binary {
        match (acc_kind, op) {
            (Kind::Bool, Reduction::Min) => Binary::And,
            (Kind::Bool, _) => Binary::Or,
            (_, Reduction::Sum | Reduction::Mean) => Binary::Add,
            (_, Reduction::Prod) => Binary::Mul,
            (_, Reduction::Max) => Binary::Max,
            (_, Reduction::Min) => Binary::Min,
        }
    }

    /// The number of terms of a reduction over `loops`, as a float of `kind`.
    fn count(&mut self, kind: Kind, loops: &[usize]) -> E::Value {
        let mut count = self.e.int(Kind::I64, 1);
        for &i in loops {
            count = self.e.binary(Binary::Mul, Kind::I64, count, self.extents[i]);
        }
        self.e.convert(Kind::I64, kind, count)
    }

    /// A reduction whose loops run outside output loops: the output is set
    /// to the identity, each term accumulates into it in place, and a mean
    /// is divided last. Kernel formation chooses this only where the
    /// output's dtype is the accumulator's.
    fn reduce_in_memory(&mut self, op: Reduction, value: &Expr, order: &[usize], rank: usize) {
        let out = self.k.output;
        let dtype = self.p.buffers[out].dtype;
        let mem = memory_kind(dtype);
        // (The loads of the output below read what this kernel stored.)
        let outer: Vec<usize> = (0..rank).collect();
        let (acc_kind, init) = self.accumulator(op, dtype, value);
        let open = self.open(&outer);
        let at = self.output_at();
        let stored = to_memory(self.e, init, acc_kind, dtype);
        self.e.store(mem, out, at, stored);
        self.close(open);
        let open = self.open(order);
        let (x, kind) = self.eval(value);
        let x = self.e.convert(kind, acc_kind, x);
        let at = self.output_at();
        let current = self.load_accumulator(at, acc_kind);
        let combined = self.e.accumulate(Self::combine(acc_kind, op), acc_kind, current, x);
        let stored = to_memory(self.e, combined, acc_kind, dtype);
        self.e.store(mem, out, at, stored);
        self.close(open);
        if op == Reduction::Mean && acc_kind.is_float() {
            let open = self.open(&outer);
            let at = self.output_at();
            let sum = self.load_accumulator(at, acc_kind);
            let reduced: Vec<usize> = (rank..self.k.loops.len()).collect();
            let count = self.count(acc_kind, &reduced);
            let mean = self.e.binary(Binary::Div, acc_kind, sum, count);
            let stored = to_memory(self.e, mean, acc_kind, dtype);
            self.e.store(mem, out, at, stored);
            self.close(open);
        }
    }

    /// `take`'s adjoint (see [`Body::Scatter`]): zeros (or `init`; nothing
    /// in place) over this call's range of the output, then, over the
    /// positions' loops and inside
    /// them the output's other loops, each value added at its position
    /// (clamped into the axis). Where loop 0 is the scattered axis and
    /// splits across threads, a value is added only by the thread whose
    /// range holds its position: a loop that runs once or not at all.
    fn scatter(&mut self, axis: usize, init: Option<&Expr>, position: &Expr, value: &Expr, rank: usize) {
        let out = self.k.output;
        let dtype = self.p.buffers[out].dtype;
        let mem = memory_kind(dtype);
        let (acc_kind, zero) = self.accumulator(Reduction::Sum, dtype, value);
        if !self.k.body.scatters_in_place(out) {
            let outer: Vec<usize> = (0..rank).collect();
            let open = self.open(&outer);
            let at = self.output_at();
            let (first, kind) = match init {
                Some(e) => self.eval(e),
                None => (zero, acc_kind),
            };
            let first = self.e.convert(kind, acc_kind, first);
            let stored = to_memory(self.e, first, acc_kind, dtype);
            self.e.store(mem, out, at, stored);
            self.close(open);
        }
        let positions: Vec<usize> = (rank..self.k.loops.len()).collect();
        let others: Vec<usize> = (0..rank).filter(|&a| a != axis).collect();
        let open = self.open_around(&positions, &others);
        let (p, kind) = self.eval(position);
        let p = self.e.convert(kind, Kind::I64, p);
        let (first, last) = (self.e.int(Kind::I64, 0), self.e.int(Kind::I64, 1));
        let last = self.e.binary(Binary::Sub, Kind::I64, self.extents[axis], last);
        let p = self.e.binary(Binary::Min, Kind::I64, p, last);
        let p = self.e.binary(Binary::Max, Kind::I64, p, first);
        let mut guard = Vec::new();
        if axis == 0 && self.k.parallel_loop() {
            let (begin, end) = self.e.range();
            let after = self.e.compare(Compare::Ge, Kind::I64, p, begin);
            let before = self.e.compare(Compare::Lt, Kind::I64, p, end);
            let mine = self.e.binary(Binary::And, Kind::Bool, after, before);
            let once = self.e.int(Kind::I64, 1);
            let times = self.e.select(Kind::I64, mine, once, first);
            guard.push(self.e.begin_loop(first, times, 1).0);
        }
        self.index[axis] = Some(p);
        let inner = self.open(&others);
        let (x, kind) = self.eval(value);
        let x = self.e.convert(kind, acc_kind, x);
        let at = self.output_at();
        let current = self.load_accumulator(at, acc_kind);
        let sum = self.e.accumulate(Binary::Add, acc_kind, current, x);
        let stored = to_memory(self.e, sum, acc_kind, dtype);
        self.e.store(mem, out, at, stored);
        self.close(inner);
        self.close(guard);
        self.close(open);
    }

    /// The output element at `at` as an accumulator of `acc_kind`.
    fn load_accumulator(&mut self, at: E::Value, acc_kind: Kind) -> E::Value {
        let dtype = self.p.buffers[self.k.output].dtype;
        let raw = self.e.load(memory_kind(dtype), self.k.output, at);
        let value = from_memory(self.e, raw, dtype);
        self.e.convert(register_kind(dtype), acc_kind, value)
    }

    /// Reduces `value` over the loops `inner` in a register, for a result
    /// of `dtype`; gives the result.
    fn reduce(&mut self, op: Reduction, dtype: DType, value: &Expr, inner: &[usize]) -> (E::Value, Kind) {
        let (acc_kind, init) = self.accumulator(op, dtype, value);
        // Blocks where the terms may outnumber a block (not over a row of
        // 1024, say: that would only add a loop).
        let terms: Option<u64> = inner.iter().try_fold(1u64, |n, &i| self.p.symbols.constant(self.k.loops[i].extent).and_then(|c| n.checked_mul(c)));
        let long = terms.is_none_or(|n| n > SUM_BLOCK as u64);
        if acc_kind == Kind::F32 && matches!(op, Reduction::Sum | Reduction::Mean) && long {
            return self.sum_in_blocks(op, value, inner);
        }
        let acc = self.e.variable(acc_kind, init);
        let open = self.open(inner);
        let (x, kind) = self.eval(value);
        let x = self.e.convert(kind, acc_kind, x);
        let a = self.e.get(acc);
        let combined = self.e.accumulate(Self::combine(acc_kind, op), acc_kind, a, x);
        self.e.set(acc, combined);
        self.close(open);
        let mut result = self.e.get(acc);
        if op == Reduction::Mean && acc_kind.is_float() {
            let count = self.count(acc_kind, inner);
            result = self.e.binary(Binary::Div, acc_kind, result, count);
        }
        (result, acc_kind)
    }

    /// An f32 sum (or mean) over the loops `inner` whose error does not
    /// grow with their extent: the last loop runs in blocks of
    /// [`SUM_BLOCK`] positions, each block summed in f32 (in vector lanes,
    /// as any sum) and added to an f64 total; gives the total (f64). A sum
    /// of 1.5e9 ones is exact, where one f32 accumulator per lane stops
    /// at 2^24.
    fn sum_in_blocks(&mut self, op: Reduction, value: &Expr, inner: &[usize]) -> (E::Value, Kind) {
        let Some((&last, outer)) = inner.split_last() else { unreachable!("a reduction over no loops is a map") };
        let zero64 = self.e.float(Kind::F64, 0.0);
        let total = self.e.variable(Kind::F64, zero64);
        let open = self.open_around(outer, &[last]);
        self.e.loop_role(self.k.loops[last].role);
        let (blocks, first, stop) = self.open_blocks(last, SUM_BLOCK);
        let zero = self.e.float(Kind::F32, 0.0);
        let block = self.e.variable(Kind::F32, zero);
        let positions = self.open_from(last, first, stop);
        let (x, kind) = self.eval(value);
        let x = self.e.convert(kind, Kind::F32, x);
        let a = self.e.get(block);
        let combined = self.e.accumulate(Binary::Add, Kind::F32, a, x);
        self.e.set(block, combined);
        self.e.end_loop(positions);
        let partial = self.e.get(block);
        let partial = self.e.convert(Kind::F32, Kind::F64, partial);
        let t = self.e.get(total);
        let t = self.e.binary(Binary::Add, Kind::F64, t, partial);
        self.e.set(total, t);
        self.e.end_loop(blocks);
        self.close(open);
        let mut result = self.e.get(total);
        if op == Reduction::Mean {
            let count = self.count(Kind::F64, inner);
            result = self.e.binary(Binary::Div, Kind::F64, result, count);
        }
        (result, Kind::F64)
    }

    /// softmax, log_softmax (in place of the axis) and logsumexp (over a
    /// trailing reduction loop): passes for the maximum, the sum of
    /// exponentials, and the result.
    fn along(&mut self, func: AlongAxis, axis: usize, value: &Expr) {
        let outer: Vec<usize> = (0..self.k.loops.len()).filter(|&i| i != axis).collect();
        let open = self.open(&outer);
        let kind = if self.kind_of(value) == Kind::F64 { Kind::F64 } else { Kind::F32 };
        let neg_inf = self.e.float(kind, f64::NEG_INFINITY);
        let max = self.e.variable(kind, neg_inf);
        let h = self.open(&[axis]);
        let x = self.float_value(value, kind);
        let m = self.e.get(max);
        let m2 = self.e.accumulate(Binary::Max, kind, m, x);
        self.e.set(max, m2);
        self.close(h);
        let m = self.e.get(max);
        let zero = self.e.float(kind, 0.0);
        let sum = self.e.variable(kind, zero);
        // A softmax into f32 or f64 keeps each exponential in its output
        // element for the last pass, which scales it: one exponential per
        // element, and one division per row.
        let dtype = self.p.buffers[self.k.output].dtype;
        let keep = func == AlongAxis::Softmax && register_kind(dtype) == kind && memory_kind(dtype) == kind;
        // A log_softmax or logsumexp sums the exponentials below the
        // maximum apart from the maximum's ties, so that the log of the sum
        // is `log1p(others + (ties - 1))`: exact where the others are below
        // 1's rounding (the maximum's log_softmax, -2e-9 where a row's
        // next value is 20 below it, is not 0).
        let ties = (func != AlongAxis::Softmax).then(|| self.e.variable(kind, zero));
        let h = self.open(&[axis]);
        let x = self.float_value(value, kind);
        let d = self.e.binary(Binary::Sub, kind, x, m);
        let ex = math::exp(self.e, kind, d);
        if keep {
            self.store_output(ex, kind);
        }
        let term = match ties {
            Some(ties) => {
                let at_max = self.e.compare(Compare::Eq, kind, d, zero);
                let one = self.e.float(kind, 1.0);
                let tie = self.e.select(kind, at_max, one, zero);
                let t = self.e.get(ties);
                let t2 = self.e.accumulate(Binary::Add, kind, t, tie);
                self.e.set(ties, t2);
                self.e.select(kind, at_max, zero, ex)
            }
            None => ex,
        };
        let s = self.e.get(sum);
        let s2 = self.e.accumulate(Binary::Add, kind, s, term);
        self.e.set(sum, s2);
        self.close(h);
        let s = self.e.get(sum);
        if keep {
            let one = self.e.float(kind, 1.0);
            let scale = self.e.binary(Binary::Div, kind, one, s);
            let h = self.open(&[axis]);
            let at = self.output_at();
            let ex = self.e.load(kind, self.k.output, at);
            let r = self.e.binary(Binary::Mul, kind, ex, scale);
            self.e.store(kind, self.k.output, at, r);
            self.close(h);
            self.close(open);
            return;
        }
        // log of the sum: the exponentials below the maximum, then the ties.
        let log_sum = |l: &mut Self| match ties {
            Some(ties) => {
                let one = l.e.float(kind, 1.0);
                let t = l.e.get(ties);
                let extra = l.e.binary(Binary::Sub, kind, t, one);
                let others = l.e.binary(Binary::Add, kind, s, extra);
                math::log1p(l.e, kind, others)
            }
            None => math::log(l.e, kind, s),
        };
        match func {
            AlongAxis::LogSumExp => {
                let ls = log_sum(self);
                let r = self.e.binary(Binary::Add, kind, m, ls);
                let am = self.e.unary(Unary::Abs, kind, m);
                let inf = self.e.float(kind, f64::INFINITY);
                let infinite = self.e.compare(Compare::Eq, kind, am, inf);
                let r = self.e.select(kind, infinite, m, r);
                self.store_output(r, kind);
            }
            AlongAxis::Softmax | AlongAxis::LogSoftmax => {
                let ls = log_sum(self);
                let h = self.open(&[axis]);
                let x = self.float_value(value, kind);
                let d = self.e.binary(Binary::Sub, kind, x, m);
                let r = if func == AlongAxis::Softmax {
                    let ex = math::exp(self.e, kind, d);
                    self.e.binary(Binary::Div, kind, ex, s)
                } else {
                    self.e.binary(Binary::Sub, kind, d, ls)
                };
                self.store_output(r, kind);
                self.close(h);
            }
        }
        self.close(open);
    }

    /// softmax along a middle axis, in blocks of `width` positions of the
    /// last loop: per block, the maximum accumulates in the output's
    /// position 0 along the axis and the sum of exponentials in position 1
    /// (then its reciprocal), the exponentials are kept at positions 2..
    /// (one exponential per element but those of positions 0 and 1), and
    /// the result is written at positions 2.., then at 1 and 0. The block
    /// stays in cache through the passes.
    fn along_columns(&mut self, axis: usize, value: &Expr, width: i64) {
        let last = self.k.loops.len() - 1;
        let out = self.k.output;
        let outer: Vec<usize> = (0..last).filter(|&i| i != axis).collect();
        let open = self.open(&outer);
        // The output holds the running maximum and sum: its own kind (an f64
        // value into an f32 output is computed in f32; stored as f64 it
        // wrote past the output's end).
        let kind = memory_kind(self.p.buffers[out].dtype);
        let (block, first, stop) = self.open_blocks(last, width);
        // The output's element at position `at` along the axis, in the current column.
        let slot = |l: &mut Self, at: usize| {
            let index: Vec<Index> = (0..=last).map(|i| if i == axis { Index::Const(at) } else { Index::Loop(i) }).collect();
            l.offset(out, &index)
        };
        let columns = |l: &mut Self| {
            let (h, v) = l.e.begin_loop(first, stop, 1);
            l.index[last] = Some(v);
            h
        };
        // Start values.
        let h = columns(self);
        let (max_at, sum_at) = (slot(self, 0), slot(self, 1));
        let neg_inf = self.e.float(kind, f64::NEG_INFINITY);
        let zero = self.e.float(kind, 0.0);
        self.e.store(kind, out, max_at, neg_inf);
        self.e.store(kind, out, sum_at, zero);
        self.e.end_loop(h);
        // The maximum, then the sum of exponentials, over the axis; a
        // softmax keeps each exponential at positions 2.. for the last pass.
        let zero_i = self.e.int(Kind::I64, 0);
        let two = self.e.int(Kind::I64, 2);
        for (pass, from, to) in [(0, zero_i, self.extents[axis]), (1, zero_i, two), (2, two, self.extents[axis])] {
            let (h_axis, n) = self.e.begin_loop(from, to, 1);
            self.index[axis] = Some(n);
            if let (0, Some(ahead)) = (pass, self.k.schedule.prefetch) {
                self.ask_for_rows_ahead(value, axis, (first, stop), ahead);
            }
            let h = columns(self);
            let x = self.float_value(value, kind);
            let (max_at, sum_at) = (slot(self, 0), slot(self, 1));
            let m = self.e.load(kind, out, max_at);
            if pass == 0 {
                let m2 = self.e.accumulate(Binary::Max, kind, m, x);
                self.e.store(kind, out, max_at, m2);
            } else {
                let d = self.e.binary(Binary::Sub, kind, x, m);
                let ex = math::exp(self.e, kind, d);
                let s = self.e.load(kind, out, sum_at);
                let s2 = self.e.accumulate(Binary::Add, kind, s, ex);
                self.e.store(kind, out, sum_at, s2);
                if pass == 2 {
                    let at = self.output_at();
                    self.e.store(kind, out, at, ex);
                }
            }
            self.e.end_loop(h);
            self.e.end_loop(h_axis);
        }
        // The sum becomes its reciprocal, which scales the exponentials.
        let h = columns(self);
        let sum_at = slot(self, 1);
        let s = self.e.load(kind, out, sum_at);
        let one = self.e.float(kind, 1.0);
        let t = self.e.binary(Binary::Div, kind, one, s);
        self.e.store(kind, out, sum_at, t);
        self.e.end_loop(h);
        // The result at one position along the axis, from the maximum and that value.
        let result = |l: &mut Self, m: E::Value, t: E::Value| {
            let x = l.float_value(value, kind);
            let d = l.e.binary(Binary::Sub, kind, x, m);
            let ex = math::exp(l.e, kind, d);
            l.e.binary(Binary::Mul, kind, ex, t)
        };
        let (h_axis, n) = self.e.begin_loop(two, self.extents[axis], 1);
        self.index[axis] = Some(n);
        let h = columns(self);
        let sum_at = slot(self, 1);
        let t = self.e.load(kind, out, sum_at);
        let at = self.output_at();
        // The kept exponential, scaled.
        let ex = self.e.load(kind, out, at);
        let r = self.e.binary(Binary::Mul, kind, ex, t);
        self.e.store(kind, out, at, r);
        self.e.end_loop(h);
        self.e.end_loop(h_axis);
        // Positions 1 and 0, which held the maximum and the sum.
        let h = columns(self);
        let (max_at, sum_at) = (slot(self, 0), slot(self, 1));
        let m = self.e.load(kind, out, max_at);
        let t = self.e.load(kind, out, sum_at);
        let mut results = Vec::with_capacity(2);
        for position in [1, 0] {
            self.index[axis] = Some(self.e.int(Kind::I64, position));
            results.push(result(self, m, t));
        }
        self.e.store(kind, out, sum_at, results[0]);
        self.e.store(kind, out, max_at, results[1]);
        self.e.end_loop(h);
        self.e.end_loop(block);
        self.close(open);
    }

    /// One tile of an attention kernel (see [`nax_kernel::AttentionLoops`]),
    /// after the driver put the tile's scores in its scratch: per row of
    /// the tile, the logits (the score is the row reduction `row0`) and
    /// their maximum, the row's new running maximum, the probabilities
    /// (exponentials against it, `-inf` logits giving 0), the running sum
    /// and accumulated output rescaled to the new maximum; then the tile's
    /// largest logit, which tells the driver whether any key is unmasked.
    /// In a probe, only whether the mask shows any key of the tile.
    fn attention_tile(&mut self, keys: usize, logit: &Expr, visible: Option<&Expr>) {
        let Some(a) = self.k.schedule.attention.clone() else { return };
        let [scores, acc, stats] = a.scratch;
        let base = self.plan.slot_count();
        let loops = self.k.loops.len();
        for &l in &a.batch {
            self.index[l] = Some(self.e.size(base + l));
        }
        let (first_row, first_key) = (self.e.size(base + a.rows), self.e.size(base + keys));
        let (rows, cols) = (self.e.size(base + loops), self.e.size(base + loops + 1));
        let width = self.e.int(Kind::I64, a.tile.1 as i64);
        let f = Kind::F32;
        let neg_inf = self.e.float(f, f64::NEG_INFINITY);
        let zero = self.e.float(f, 0.0);
        let zero_i = self.e.int(Kind::I64, 0);
        let one_i = self.e.int(Kind::I64, 1);
        let last = self.e.int(Kind::I64, 2 * a.tile.0 as i64);
        // A loop of one or no iteration is the `if` of probing or computing.
        let probe = self.e.size(base + loops + 2);
        if let Some(visible) = visible {
            let (h_probe, _) = self.e.begin_loop(zero_i, probe, 1);
            // Whether any key shows, as an integer `or` of the mask: a
            // reduction the loop vectoriser takes (a float maximum of a
            // select between constants became a conditional chain, one
            // element a step, a third of the causal block's attention time).
            let any = self.e.variable(Kind::I64, zero_i);
            let (h_row, i) = self.e.begin_loop(zero_i, rows, 1);
            self.index[a.rows] = Some(self.e.binary(Binary::Add, Kind::I64, first_row, i));
            let (h, j) = self.e.begin_loop(zero_i, cols, 1);
            self.index[keys] = Some(self.e.binary(Binary::Add, Kind::I64, first_key, j));
            let (shown, _) = self.eval(visible);
            let x = self.e.convert(Kind::Bool, Kind::I64, shown);
            let y = self.e.get(any);
            let y2 = self.e.accumulate(Binary::Or, Kind::I64, y, x);
            self.e.set(any, y2);
            self.e.end_loop(h);
            self.e.end_loop(h_row);
            let y = self.e.get(any);
            let seen = self.e.compare(Compare::Ne, Kind::I64, y, zero_i);
            let one = self.e.float(f, 1.0);
            let y = self.e.select(f, seen, one, neg_inf);
            self.e.store(f, stats, last, y);
            self.e.end_loop(h_probe);
        }
        let compute = self.e.binary(Binary::Sub, Kind::I64, one_i, probe);
        let (h_compute, _) = self.e.begin_loop(zero_i, compute, 1);
        let tile_max = self.e.variable(f, neg_inf);
        let (h_row, i) = self.e.begin_loop(zero_i, rows, 1);
        let n = self.e.binary(Binary::Add, Kind::I64, first_row, i);
        self.index[a.rows] = Some(n);
        let row_start = self.e.binary(Binary::Mul, Kind::I64, i, width);
        let max_at = self.e.binary(Binary::Add, Kind::I64, i, i);
        let sum_at = self.e.binary(Binary::Add, Kind::I64, max_at, one_i);
        let old_max = self.e.load(f, stats, max_at);
        let old_sum = self.e.load(f, stats, sum_at);
        // The logits, in place of the scores, and their maximum.
        let row_max = self.e.variable(f, neg_inf);
        let (h, j) = self.e.begin_loop(zero_i, cols, 1);
        let m = self.e.binary(Binary::Add, Kind::I64, first_key, j);
        self.index[keys] = Some(m);
        let at = self.e.binary(Binary::Add, Kind::I64, row_start, j);
        let score = self.e.load(f, scores, at);
        self.rows = vec![(score, f)];
        let mut x = self.float_value(logit, f);
        if let Some(visible) = visible {
            let (shown, _) = self.eval(visible);
            x = self.e.select(f, shown, x, neg_inf);
        }
        self.e.store(f, scores, at, x);
        let r = self.e.get(row_max);
        let r2 = self.e.accumulate(Binary::Max, f, r, x);
        self.e.set(row_max, r2);
        self.e.end_loop(h);
        let r = self.e.get(row_max);
        let t = self.e.get(tile_max);
        let t2 = self.e.binary(Binary::Max, f, t, r);
        self.e.set(tile_max, t2);
        let new_max = self.e.binary(Binary::Max, f, old_max, r);
        // Exponentials against 0 while every logit so far is -inf (all 0).
        let none_yet = self.e.compare(Compare::Eq, f, new_max, neg_inf);
        let shift = self.e.select(f, none_yet, zero, new_max);
        let sum = self.e.variable(f, zero);
        let (h, j) = self.e.begin_loop(zero_i, cols, 1);
        let at = self.e.binary(Binary::Add, Kind::I64, row_start, j);
        let x = self.e.load(f, scores, at);
        let d = self.e.binary(Binary::Sub, f, x, shift);
        let p = math::exp(self.e, f, d);
        self.e.store(f, scores, at, p);
        let s = self.e.get(sum);
        let s2 = self.e.accumulate(Binary::Add, f, s, p);
        self.e.set(sum, s2);
        self.e.end_loop(h);
        let d = self.e.binary(Binary::Sub, f, old_max, shift);
        let rescale = math::exp(self.e, f, d);
        let s = self.e.get(sum);
        let total = self.e.multiply_add(f, old_sum, rescale, s);
        self.e.store(f, stats, max_at, new_max);
        self.e.store(f, stats, sum_at, total);
        let width = self.extents[a.cols];
        let out_start = self.e.binary(Binary::Mul, Kind::I64, i, width);
        let (h, c) = self.e.begin_loop(zero_i, width, 1);
        let at = self.e.binary(Binary::Add, Kind::I64, out_start, c);
        let o = self.e.load(f, acc, at);
        let o2 = self.e.binary(Binary::Mul, f, o, rescale);
        self.e.store(f, acc, at, o2);
        self.e.end_loop(h);
        self.e.end_loop(h_row);
        let t = self.e.get(tile_max);
        self.e.store(f, stats, last, t);
        self.e.end_loop(h_compute);
    }

    fn float_value(&mut self, value: &Expr, kind: Kind) -> E::Value {
        let (x, k) = self.eval(value);
        self.e.convert(k, kind, x)
    }

    /// The kind an expression evaluates to (see [`Lowering::eval`]).
    fn kind_of(&self, e: &Expr) -> Kind {
        match e {
            Expr::Load { buffer, .. } | Expr::Gather { buffer, .. } => register_kind(self.p.buffers[*buffer].dtype),
            Expr::Literal(Literal::Int(_)) | Expr::Size(_) | Expr::LoopIndex(_) => Kind::I64,
            Expr::Literal(Literal::Float(_)) => Kind::F64,
            Expr::Literal(Literal::Bool(_)) => Kind::Bool,
            Expr::Row(r) => self.k.rows.get(*r).map_or(Kind::I64, |row| register_kind(row.dtype)),
            Expr::Apply { func, compute, .. } => {
                let ck = register_kind(*compute);
                let float_of = |k: Kind| if k.is_float() { k } else { Kind::F64 };
                match func {
                    MapFn::Unary(UnaryOp::Not) => Kind::Bool,
                    MapFn::Unary(UnaryOp::Neg) => ck,
                    MapFn::Binary(op) => match op {
                        BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::And | BinaryOp::Or => Kind::Bool,
                        BinaryOp::Div => float_of(ck),
                        _ if ck == Kind::Bool => Kind::I64,
                        _ => ck,
                    },
                    MapFn::Builtin(b) => match b {
                        Elementwise::Where | Elementwise::MaskedFill | Elementwise::Clamp | Elementwise::Maximum | Elementwise::Minimum => ck,
                        Elementwise::Pow if !ck.is_float() => ck,
                        Elementwise::ToFloat if ck == Kind::F32 => Kind::F32,
                        Elementwise::ToFloat => Kind::F64,
                        Elementwise::ToInt => Kind::I64,
                        _ => float_of(ck),
                    },
                }
            }
        }
    }

    /// Evaluates an expression at the current loop indices.
    fn eval(&mut self, e: &Expr) -> (E::Value, Kind) {
        match e {
            Expr::Load { buffer, index } => {
                // A transposed read staged in the tile's scratch is read there, at the store's position.
                let staged = self.k.schedule.transpose.as_ref().is_some_and(|t| t.buffer == *buffer && t.index == *index);
                let (from, at) = match self.staging {
                    Some(_) if staged => (self.scratch_buffer(), self.scratch_at()),
                    _ => (*buffer, self.offset(*buffer, index)),
                };
                let dtype = self.p.buffers[*buffer].dtype;
                let raw = self.e.load(memory_kind(dtype), from, at);
                (from_memory(self.e, raw, dtype), register_kind(dtype))
            }
            Expr::Gather { buffer, index, computed } => {
                let mut at = self.offset(*buffer, index);
                for (axis, position) in computed {
                    let (v, kind) = self.eval(position);
                    let v = self.e.convert(kind, Kind::I64, v);
                    let term = match self.strides[buffer][*axis] {
                        Some(s) => self.e.binary(Binary::Mul, Kind::I64, v, s),
                        None => v,
                    };
                    at = self.e.binary(Binary::Add, Kind::I64, at, term);
                }
                let dtype = self.p.buffers[*buffer].dtype;
                let raw = self.e.load(memory_kind(dtype), *buffer, at);
                (from_memory(self.e, raw, dtype), register_kind(dtype))
            }
            Expr::Literal(Literal::Int(v)) => (self.e.int(Kind::I64, *v), Kind::I64),
            Expr::Literal(Literal::Float(v)) => (self.e.float(Kind::F64, *v), Kind::F64),
            Expr::Literal(Literal::Bool(v)) => (self.e.int(Kind::Bool, i64::from(*v)), Kind::Bool),
            Expr::Size(s) => (self.size(*s), Kind::I64),
            Expr::Row(r) => match self.rows.get(*r) {
                Some(&row) => row,
                None => (self.e.int(Kind::I64, 0), Kind::I64),
            },
            Expr::LoopIndex(l) => {
                let v = match self.index[*l] {
                    Some(v) => v,
                    None => self.e.int(Kind::I64, 0),
                };
                (v, Kind::I64)
            }
            Expr::Apply { func, compute, args } => {
                let (v, kind) = self.apply(*func, register_kind(*compute), args);
                // A half-precision computation rounds its result to its dtype
                // (as the interpreter, and PyTorch eager, do after every operation).
                let rounded = match (compute, kind) {
                    (DType::F16, Kind::F32) => {
                        let bits = math::f32_to_f16(self.e, v);
                        math::f16_to_f32(self.e, bits)
                    }
                    (DType::BF16, Kind::F32) => {
                        let bits = math::f32_to_bf16(self.e, v);
                        math::bf16_to_f32(self.e, bits)
                    }
                    _ => v,
                };
                (rounded, kind)
            }
        }
    }

    fn apply(&mut self, func: MapFn, ck: Kind, args: &[Expr]) -> (E::Value, Kind) {
        // Masks stay masks where the function reads them as masks.
        let keeps_mask = |i: usize| match func {
            MapFn::Unary(UnaryOp::Not) | MapFn::Binary(BinaryOp::And | BinaryOp::Or) => true,
            MapFn::Builtin(Elementwise::Where) => i == 0,
            MapFn::Builtin(Elementwise::MaskedFill) => i == 1,
            _ => false,
        };
        let mut values = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let (v, k) = self.eval(a);
            let target = if keeps_mask(i) { Kind::Bool } else { ck };
            values.push(self.e.convert(k, target, v));
        }
        let e = &mut *self.e;
        match func {
            MapFn::Unary(UnaryOp::Not) => (e.unary(Unary::Not, Kind::Bool, values[0]), Kind::Bool),
            MapFn::Unary(UnaryOp::Neg) => {
                if ck.is_float() {
                    (e.unary(Unary::Neg, ck, values[0]), ck)
                } else {
                    let zero = e.int(ck, 0);
                    (e.binary(Binary::Sub, ck, zero, values[0]), ck)
                }
            }
            MapFn::Binary(op) => binary(e, op, ck, values[0], values[1]),
            MapFn::Builtin(b) => builtin(e, b, ck, &values),
        }
    }
}

/// The buffers `exprs` load at exactly the positions `own`, each once, in
/// the order first read (the operands read along with an output, which a
/// prefetch can fetch ahead at the output's next positions).
fn loaded_at<'e>(exprs: impl IntoIterator<Item = &'e Expr>, own: &[Index]) -> Vec<usize> {
    let mut found = Vec::new();
    for (b, index) in exprs.into_iter().flat_map(Expr::loads) {
        if index == own && !found.contains(&b) {
            found.push(b);
        }
    }
    found
}

/// Transposes a square block of vectors of `lanes` elements in
/// registers: lane `c` of `rows[r]` becomes lane `r` of `rows[c]`. Radix
/// 2: for each half-width `h` from `lanes / 2` down to 1, rows `a` and
/// `a + h` (bit `h` of `a` clear) exchange their off-diagonal `h` x `h`
/// blocks, two shuffles per pair of rows.
fn transpose_block<E: Emitter>(e: &mut E, kind: Kind, lanes: u32, rows: &mut [E::Value]) {
    let mut h = lanes / 2;
    while h >= 1 {
        let upper: Vec<u32> = (0..lanes).map(|l| if l & h == 0 { l } else { lanes + l - h }).collect();
        let lower: Vec<u32> = (0..lanes).map(|l| if l & h == 0 { l + h } else { lanes + l }).collect();
        let h_rows = h as usize;
        for a in (0..rows.len()).filter(|a| a & h_rows == 0) {
            let (x, y) = (rows[a], rows[a + h_rows]);
            rows[a] = e.shuffle(kind, lanes, x, y, &upper);
            rows[a + h_rows] = e.shuffle(kind, lanes, x, y, &lower);
        }
        h /= 2;
    }
}

fn binary<E: Emitter>(e: &mut E, op: BinaryOp, ck: Kind, a: E::Value, b: E::Value) -> (E::Value, Kind) {
    let cmp = |op| match op {
        BinaryOp::Eq => Some(Compare::Eq),
        BinaryOp::Ne => Some(Compare::Ne),
        BinaryOp::Lt => Some(Compare::Lt),
        BinaryOp::Le => Some(Compare::Le),
        BinaryOp::Gt => Some(Compare::Gt),
        BinaryOp::Ge => Some(Compare::Ge),
        _ => None,
    };
    if let Some(c) = cmp(op) {
        return (e.compare(c, ck, a, b), Kind::Bool);
    }
    match op {
        BinaryOp::And => (e.binary(Binary::And, Kind::Bool, a, b), Kind::Bool),
        BinaryOp::Or => (e.binary(Binary::Or, Kind::Bool, a, b), Kind::Bool),
        BinaryOp::Div => {
            let fk = if ck.is_float() { ck } else { Kind::F64 };
            let x = e.convert(ck, fk, a);
            let y = e.convert(ck, fk, b);
            (e.binary(Binary::Div, fk, x, y), fk)
        }
        _ => {
            let k = if ck == Kind::Bool { Kind::I64 } else { ck };
            let x = e.convert(ck, k, a);
            let y = e.convert(ck, k, b);
            let o = match op {
                BinaryOp::Add => Binary::Add,
                BinaryOp::Sub => Binary::Sub,
                _ => Binary::Mul,
            };
            (e.binary(o, k, x, y), k)
        }
    }
}

fn builtin<E: Emitter>(e: &mut E, b: Elementwise, ck: Kind, v: &[E::Value]) -> (E::Value, Kind) {
    use Elementwise as F;
    match b {
        F::Where => (e.select(ck, v[0], v[1], v[2]), ck),
        F::MaskedFill => (e.select(ck, v[1], v[2], v[0]), ck),
        F::Maximum => (e.binary(Binary::Max, ck, v[0], v[1]), ck),
        F::Minimum => (e.binary(Binary::Min, ck, v[0], v[1]), ck),
        F::Clamp => {
            let lo = e.binary(Binary::Max, ck, v[0], v[1]);
            (e.binary(Binary::Min, ck, lo, v[2]), ck)
        }
        F::Pow if !ck.is_float() => (math::int_pow(e, ck, v[0], v[1]), ck),
        // In a half computation's registers (f32), to be rounded to the half dtype after.
        F::ToFloat if ck == Kind::F32 => (v[0], Kind::F32),
        F::ToFloat => (e.convert(ck, Kind::F64, v[0]), Kind::F64),
        F::ToInt => (e.convert(ck, Kind::I64, v[0]), Kind::I64),
        _ => {
            let fk = if ck.is_float() { ck } else { Kind::F64 };
            let x: Vec<E::Value> = v.iter().map(|&x| e.convert(ck, fk, x)).collect();
            (math::elementwise(e, b, fk, &x), fk)
        }
    }
}

/// A loaded element in its register kind.
fn from_memory<E: Emitter>(e: &mut E, raw: E::Value, dtype: DType) -> E::Value {
    match dtype {
        DType::F16 => math::f16_to_f32(e, raw),
        DType::BF16 => math::bf16_to_f32(e, raw),
        DType::Bool => e.convert(Kind::I8, Kind::Bool, raw),
        _ => raw,
    }
}

/// A value of kind `kind` as an element of `dtype` in memory. Integers
/// convert through i64, so a float wraps as the interpreter's does.
fn to_memory<E: Emitter>(e: &mut E, x: E::Value, kind: Kind, dtype: DType) -> E::Value {
    match dtype {
        DType::F16 => {
            let f = e.convert(kind, Kind::F32, x);
            math::f32_to_f16(e, f)
        }
        DType::BF16 => {
            let f = e.convert(kind, Kind::F32, x);
            math::f32_to_bf16(e, f)
        }
        DType::Bool => {
            let b = e.convert(kind, Kind::Bool, x);
            e.convert(Kind::Bool, Kind::I8, b)
        }
        DType::I32 if kind.is_float() => {
            let i = e.convert(kind, Kind::I64, x);
            e.convert(Kind::I64, Kind::I32, i)
        }
        other => e.convert(kind, register_kind(other), x),
    }
}
