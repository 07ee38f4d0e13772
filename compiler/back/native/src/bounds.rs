//! Every kernel's loads and stores pass through [`Checked`], an
//! [`Emitter`] around a back end's. While the kernel is compiled it checks
//! that each access is of its buffer's element kind (a store of f64 into an
//! f32 buffer would reach twice as far as its offsets say): otherwise the
//! kernel does not compile ([`Mismatch`], an internal error). In a
//! bounds-checked program (`--check-bounds`, which has a fault record) it
//! also checks each access while the kernel runs, against its buffer's
//! length in bytes, which the driver writes in the program's fault record:
//! an access outside the buffer is not made (it reads or writes element 0
//! instead), and the kernel records the fault (1, the kernel, the buffer,
//! the byte offset) in the record, which the driver reads after the
//! kernel and turns into a failed call. Every other operation passes
//! through unchanged.

use crate::emitter::{Binary, Compare, Emitter, Kind, Unary};
use nax_kernel::Role;
use std::collections::HashMap;

/// A kernel's access of another kind than its buffer's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The buffer.
    pub buffer: usize,
    /// Its elements' kind in memory.
    pub expected: Kind,
    /// The kind accessed.
    pub accessed: Kind,
}

/// A back end's emitter whose loads and stores are checked.
pub struct Checked<'e, E: Emitter> {
    pub inner: &'e mut E,
    /// Each buffer's element kind in memory.
    pub kinds: Vec<Kind>,
    /// The fault record's buffer, in a bounds-checked program (its words
    /// after the first [`nax_runtime::plan::FAULT_WORDS`] hold each
    /// buffer's length in bytes).
    pub fault: Option<usize>,
    /// The kernel's number, for the record.
    pub kernel: usize,
    /// The first access of the wrong kind.
    pub mismatch: Option<Mismatch>,
    /// The kernel's scratch arrays (see [`Emitter::scratch`]) and their
    /// lengths in elements.
    pub scratch: HashMap<usize, u32>,
}

impl<E: Emitter> Checked<'_, E> {
    /// `index` when `lanes` elements of `kind` from it lie inside `buffer`
    /// (its length is in bytes), else 0 (the fault recorded); `index`
    /// itself in a program without bounds checks. Notes an access of
    /// another kind than the buffer's.
    fn checked(&mut self, buffer: usize, kind: Kind, index: E::Value, lanes: u32) -> E::Value {
        if let Some(&expected) = self.kinds.get(buffer)
            && expected != kind
            && self.mismatch.is_none()
        {
            self.mismatch = Some(Mismatch { buffer, expected, accessed: kind });
        }
        let Some(fault) = self.fault.filter(|&f| f != buffer) else { return index };
        let scratch = self.scratch.get(&buffer).copied();
        let e = &mut *self.inner;
        let shift = e.int(Kind::I64, i64::from(kind.width().div_ceil(8).trailing_zeros()));
        let len = match scratch {
            // A scratch array's length is the kernel's own constant.
            Some(elements) => e.int(Kind::I64, i64::from(elements)),
            None => {
                let len_at = e.int(Kind::I64, (nax_runtime::plan::FAULT_WORDS + buffer) as i64);
                let bytes = e.load(Kind::I64, fault, len_at);
                // Whole elements of `kind` in the buffer: its bytes over 1, 2, 4 or 8.
                e.binary(Binary::ShrU, Kind::I64, bytes, shift)
            }
        };
        let (zero, one) = (e.int(Kind::I64, 0), e.int(Kind::I64, 1));
        let last = if lanes > 1 {
            let extra = e.int(Kind::I64, i64::from(lanes) - 1);
            e.binary(Binary::Add, Kind::I64, index, extra)
        } else {
            index
        };
        let from_start = e.compare(Compare::Ge, Kind::I64, index, zero);
        let before_end = e.compare(Compare::Lt, Kind::I64, last, len);
        let inside = e.binary(Binary::And, Kind::Bool, from_start, before_end);
        let safe = e.select(Kind::I64, inside, index, zero);
        // Runs once when the access is outside: the fault's record.
        let inside_count = e.convert(Kind::Bool, Kind::I64, inside);
        let outside = e.binary(Binary::Sub, Kind::I64, one, inside_count);
        let (l, _) = e.begin_loop(zero, outside, 1);
        let byte = e.binary(Binary::Shl, Kind::I64, index, shift);
        let words = [one, e.int(Kind::I64, self.kernel as i64), e.int(Kind::I64, buffer as i64), byte];
        for (w, value) in words.into_iter().enumerate() {
            let at = e.int(Kind::I64, w as i64);
            e.store(Kind::I64, fault, at, value);
        }
        e.end_loop(l);
        safe
    }
}

impl<E: Emitter> Emitter for Checked<'_, E> {
    type Value = E::Value;
    type Var = E::Var;
    type Loop = E::Loop;

    fn float(&mut self, kind: Kind, v: f64) -> E::Value {
        self.inner.float(kind, v)
    }
    fn int(&mut self, kind: Kind, v: i64) -> E::Value {
        self.inner.int(kind, v)
    }
    fn binary(&mut self, op: Binary, kind: Kind, a: E::Value, b: E::Value) -> E::Value {
        self.inner.binary(op, kind, a, b)
    }
    fn accumulate(&mut self, op: Binary, kind: Kind, acc: E::Value, term: E::Value) -> E::Value {
        self.inner.accumulate(op, kind, acc, term)
    }
    fn multiply_add(&mut self, kind: Kind, a: E::Value, b: E::Value, c: E::Value) -> E::Value {
        self.inner.multiply_add(kind, a, b, c)
    }
    fn exact_product(&mut self, kind: Kind, a: E::Value, b: E::Value) -> (E::Value, E::Value) {
        self.inner.exact_product(kind, a, b)
    }
    fn unary(&mut self, op: Unary, kind: Kind, a: E::Value) -> E::Value {
        self.inner.unary(op, kind, a)
    }
    fn compare(&mut self, op: Compare, kind: Kind, a: E::Value, b: E::Value) -> E::Value {
        self.inner.compare(op, kind, a, b)
    }
    fn select(&mut self, kind: Kind, c: E::Value, a: E::Value, b: E::Value) -> E::Value {
        self.inner.select(kind, c, a, b)
    }
    fn convert(&mut self, from: Kind, to: Kind, v: E::Value) -> E::Value {
        self.inner.convert(from, to, v)
    }
    fn bitcast(&mut self, from: Kind, to: Kind, v: E::Value) -> E::Value {
        self.inner.bitcast(from, to, v)
    }
    fn call_libm(&mut self, name: &'static str, args: &[E::Value]) -> E::Value {
        self.inner.call_libm(name, args)
    }
    fn has_libm(&self) -> bool {
        self.inner.has_libm()
    }
    fn load(&mut self, kind: Kind, buffer: usize, index: E::Value) -> E::Value {
        let index = self.checked(buffer, kind, index, 1);
        self.inner.load(kind, buffer, index)
    }
    fn store(&mut self, kind: Kind, buffer: usize, index: E::Value, value: E::Value) {
        let index = self.checked(buffer, kind, index, 1);
        self.inner.store(kind, buffer, index, value)
    }
    fn size(&mut self, slot: usize) -> E::Value {
        self.inner.size(slot)
    }
    fn range(&mut self) -> (E::Value, E::Value) {
        self.inner.range()
    }
    fn variable(&mut self, kind: Kind, init: E::Value) -> E::Var {
        self.inner.variable(kind, init)
    }
    fn get(&mut self, var: E::Var) -> E::Value {
        self.inner.get(var)
    }
    fn set(&mut self, var: E::Var, value: E::Value) {
        self.inner.set(var, value)
    }
    fn load_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: E::Value) -> E::Value {
        let index = self.checked(buffer, kind, index, lanes);
        self.inner.load_vector(kind, lanes, buffer, index)
    }
    fn store_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: E::Value, value: E::Value) {
        let index = self.checked(buffer, kind, index, lanes);
        self.inner.store_vector(kind, lanes, buffer, index, value)
    }
    fn splat(&mut self, kind: Kind, lanes: u32, v: E::Value) -> E::Value {
        self.inner.splat(kind, lanes, v)
    }
    fn vector_variable(&mut self, kind: Kind, lanes: u32, init: E::Value) -> E::Var {
        self.inner.vector_variable(kind, lanes, init)
    }
    fn vector_multiply_add(&mut self, kind: Kind, lanes: u32, a: E::Value, b: E::Value, c: E::Value) -> E::Value {
        self.inner.vector_multiply_add(kind, lanes, a, b, c)
    }
    fn vector_add(&mut self, kind: Kind, lanes: u32, a: E::Value, b: E::Value) -> E::Value {
        self.inner.vector_add(kind, lanes, a, b)
    }
    fn shuffle(&mut self, kind: Kind, lanes: u32, a: E::Value, b: E::Value, mask: &[u32]) -> E::Value {
        self.inner.shuffle(kind, lanes, a, b, mask)
    }
    fn scratch(&mut self, kind: Kind, elements: u32, buffer: usize) {
        self.scratch.insert(buffer, elements);
        self.inner.scratch(kind, elements, buffer)
    }
    fn store_vector_streaming(&mut self, kind: Kind, lanes: u32, buffer: usize, index: E::Value, value: E::Value) {
        let index = self.checked(buffer, kind, index, lanes);
        self.inner.store_vector_streaming(kind, lanes, buffer, index, value)
    }
    fn streaming_fence(&mut self) {
        self.inner.streaming_fence()
    }
    fn prefetch(&mut self, kind: Kind, buffer: usize, index: E::Value, write: bool) {
        self.inner.prefetch(kind, buffer, index, write)
    }
    fn loop_role(&mut self, role: Role) {
        self.inner.loop_role(role)
    }
    fn begin_loop(&mut self, start: E::Value, end: E::Value, step: i64) -> (E::Loop, E::Value) {
        self.inner.begin_loop(start, end, step)
    }
    fn end_loop(&mut self, l: E::Loop) {
        self.inner.end_loop(l)
    }
}
