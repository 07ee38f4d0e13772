//! The emitter interface: the few scalar operations, memory accesses,
//! variables and counted loops that a code generator (LLVM, Cranelift, and
//! later MLIR and CUDA) provides. The kernel lowering ([`crate::lower`]) and
//! the vector math ([`crate::math`]) are written once against it, so no
//! back end re-derives loop structure or re-implements a function.
//!
//! Every kernel is one function with the same C signature:
//! `void kernel(void **buffers, const int64_t *sizes, int64_t begin, int64_t end)`:
//! `buffers[b]` is buffer `b` of the program, `sizes[s]` the value of size
//! slot `s` (see [`crate::plan::Plan`]), and `begin..end` the range of the
//! kernel's parallel loop that this call computes (the whole loop when the
//! kernel has none).

/// The kind of a value in registers or in memory. Half floats live in
/// memory as their 16 bits (`I16`) and compute as `F32`; masks are `Bool` in
/// registers and one byte (`I8`) in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    Bool,
}

impl Kind {
    pub fn is_float(self) -> bool {
        matches!(self, Kind::F32 | Kind::F64)
    }

    /// Its width in bits (1 for a mask in registers).
    pub fn width(self) -> u32 {
        match self {
            Kind::Bool => 1,
            Kind::I8 => 8,
            Kind::I16 => 16,
            Kind::I32 | Kind::F32 => 32,
            Kind::I64 | Kind::F64 => 64,
        }
    }

    /// The integer of the same width as a float kind (for bit manipulation).
    pub fn bits(self) -> Kind {
        match self {
            Kind::F32 => Kind::I32,
            Kind::F64 => Kind::I64,
            other => other,
        }
    }
}

/// Two-operand operations. On floats `Max`/`Min` propagate nan (IEEE
/// `maximum`/`minimum`, as torch does); on integers they are signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    /// Float division only.
    Div,
    /// Unsigned integer division (the divisor is never 0).
    DivU,
    Max,
    Min,
    /// Bitwise on integers, logical on `Bool`.
    And,
    Or,
    Xor,
    Shl,
    /// Logical (unsigned) right shift.
    ShrU,
    /// Arithmetic (signed) right shift.
    ShrS,
}

/// One-operand operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unary {
    Neg,
    /// Logical not of a `Bool`.
    Not,
    Abs,
    Sqrt,
    Floor,
    Ceil,
    /// Round half to even.
    RoundEven,
}

/// Comparisons: ordered on floats (false when either is nan) except `Ne`,
/// which is true when either is nan; signed on integers; `false < true` on masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// What a code generator provides to lower one kernel.
pub trait Emitter {
    type Value: Copy;
    type Var: Copy;
    type Loop;

    /// A float constant of a float kind.
    fn float(&mut self, kind: Kind, v: f64) -> Self::Value;
    /// An integer constant of an integer kind (truncated to its width), or a mask (`v != 0`).
    fn int(&mut self, kind: Kind, v: i64) -> Self::Value;
    fn binary(&mut self, op: Binary, kind: Kind, a: Self::Value, b: Self::Value) -> Self::Value;
    /// `binary` combining an accumulator with one more term of a reduction:
    /// the back end may reassociate it (accumulate in vector lanes, say),
    /// which changes the order of a float sum but not its tolerance.
    fn accumulate(&mut self, op: Binary, kind: Kind, acc: Self::Value, term: Self::Value) -> Self::Value {
        self.binary(op, kind, acc, term)
    }
    /// `a * b + c` of floats, fused into one rounding where the target
    /// does that fast (the math's polynomials), else a product and a sum.
    fn multiply_add(&mut self, kind: Kind, a: Self::Value, b: Self::Value, c: Self::Value) -> Self::Value {
        let m = self.binary(Binary::Mul, kind, a, b);
        self.binary(Binary::Add, kind, m, c)
    }
    /// `a * b` exactly, as the rounded product and its error: by a fused
    /// multiply-add where the back end guarantees one, else by Dekker's
    /// product ([`crate::math::dekker_product`]).
    fn exact_product(&mut self, kind: Kind, a: Self::Value, b: Self::Value) -> (Self::Value, Self::Value)
    where
        Self: Sized,
    {
        crate::math::dekker_product(self, kind, a, b)
    }
    fn unary(&mut self, op: Unary, kind: Kind, a: Self::Value) -> Self::Value;
    /// A `Bool`.
    fn compare(&mut self, op: Compare, kind: Kind, a: Self::Value, b: Self::Value) -> Self::Value;
    /// `c ? a : b` with `c` a `Bool` and `a`, `b` of `kind`.
    fn select(&mut self, kind: Kind, c: Self::Value, a: Self::Value, b: Self::Value) -> Self::Value;
    /// A value conversion: integers widen by sign and narrow by truncation,
    /// floats round to nearest, integers to floats round, floats to integers
    /// truncate toward zero and saturate (nan gives 0), masks give 0 or 1,
    /// and anything to `Bool` is `!= 0`.
    fn convert(&mut self, from: Kind, to: Kind, v: Self::Value) -> Self::Value;
    /// The same bits as another kind of the same width.
    fn bitcast(&mut self, from: Kind, to: Kind, v: Self::Value) -> Self::Value;
    /// Calls one of [`crate::LIBM`] on `F64` arguments.
    fn call_libm(&mut self, name: &'static str, args: &[Self::Value]) -> Self::Value;
    /// Whether the target has the C math library for [`Emitter::call_libm`];
    /// without it (a GPU), the math computes those functions itself
    /// ([`crate::wide`]).
    fn has_libm(&self) -> bool {
        true
    }

    /// Element `index` (an `I64`) of buffer `buffer`, whose elements are `kind`.
    fn load(&mut self, kind: Kind, buffer: usize, index: Self::Value) -> Self::Value;
    fn store(&mut self, kind: Kind, buffer: usize, index: Self::Value, value: Self::Value);
    /// The value of size slot `slot`, an `I64`.
    fn size(&mut self, slot: usize) -> Self::Value;
    /// The `begin` and `end` arguments.
    fn range(&mut self) -> (Self::Value, Self::Value);

    /// A mutable local, for accumulators.
    fn variable(&mut self, kind: Kind, init: Self::Value) -> Self::Var;
    fn get(&mut self, var: Self::Var) -> Self::Value;
    fn set(&mut self, var: Self::Var, value: Self::Value);

    /// `lanes` consecutive elements of `buffer` from element `index`, as
    /// one vector (no alignment assumed). Vector operations serve the
    /// matrix-product microkernel ([`crate::microkernel`]) and the staged
    /// transposed reads of tiled stores; `lanes` is what the kernel IR
    /// decided from the target's vector width.
    fn load_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Self::Value) -> Self::Value;
    fn store_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Self::Value, value: Self::Value);
    /// A vector of `lanes` copies of a scalar.
    fn splat(&mut self, kind: Kind, lanes: u32, v: Self::Value) -> Self::Value;
    /// A mutable vector local.
    fn vector_variable(&mut self, kind: Kind, lanes: u32, init: Self::Value) -> Self::Var;
    /// `a * b + c` lane by lane, fused into one rounding.
    fn vector_multiply_add(&mut self, kind: Kind, lanes: u32, a: Self::Value, b: Self::Value, c: Self::Value) -> Self::Value;
    /// `a + b` lane by lane.
    fn vector_add(&mut self, kind: Kind, lanes: u32, a: Self::Value, b: Self::Value) -> Self::Value;
    /// Lanes of two vectors of `lanes` elements chosen by `mask` (one
    /// entry per lane): lane `i` of the result is lane `mask[i]` of `a`
    /// when it is below `lanes`, else lane `mask[i] - lanes` of `b`. The
    /// in-register transposes of a tiled store's transposed read use it.
    fn shuffle(&mut self, kind: Kind, lanes: u32, a: Self::Value, b: Self::Value, mask: &[u32]) -> Self::Value;

    /// Makes `buffer` (a number past every buffer of the program) name an
    /// array of `elements` elements of `kind` that is the kernel's own:
    /// on its stack, one per call of the kernel function (per thread),
    /// read and written by the loads and stores (vector or not) of that
    /// number. A tiled store's transposed read is staged in one.
    fn scratch(&mut self, kind: Kind, elements: u32, buffer: usize);

    /// [`Emitter::store_vector`] of a result not read again soon: where
    /// the back end can (an address aligned to the vector's bytes), a
    /// non-temporal store, which writes the cache line without reading it
    /// first and leaves the caches to other data; else a plain store.
    fn store_vector_streaming(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Self::Value, value: Self::Value) {
        self.store_vector(kind, lanes, buffer, index, value)
    }

    /// Orders the kernel's streaming stores before what follows (its
    /// return, and so the driver's join of its threads): a full fence
    /// where [`Emitter::store_vector_streaming`] emits non-temporal
    /// stores, which other stores do not order; nothing elsewhere.
    fn streaming_fence(&mut self) {}

    /// Asks for the cache line of element `index` of `buffer` (elements of
    /// `kind`), to read or, with `write`, to write, ahead of its use. A
    /// hint: it never faults, so `index` may lie past the buffer's end,
    /// and a back end may emit nothing.
    fn prefetch(&mut self, _kind: Kind, _buffer: usize, _index: Self::Value, _write: bool) {}

    /// Says that the next [`Emitter::begin_loop`] is a loop of the
    /// kernel's nest, with the role the kernel IR decided for it (a
    /// tiled loop's tile loop and its loop within the tile both get it).
    /// A back end may record it (MLIR annotates its loops); it changes
    /// nothing in what the loop computes.
    fn loop_role(&mut self, _role: nax_kernel::Role) {}

    /// Starts `for i in (start..end).step_by(step)` (`I64`s); gives the loop
    /// and `i`. Code emitted until [`Emitter::end_loop`] is the loop's body.
    fn begin_loop(&mut self, start: Self::Value, end: Self::Value, step: i64) -> (Self::Loop, Self::Value);
    fn end_loop(&mut self, l: Self::Loop);
}
