//! The Cranelift emitter: [`nax_back_native::Emitter`] over a Cranelift
//! `FunctionBuilder`, so that the shared kernel lowering writes one kernel
//! function of the C signature
//! `void kernel(void **buffers, const int64_t *sizes, int64_t begin, int64_t end)`.
//!
//! The entry block loads the base pointer of every buffer the kernel uses;
//! size slots are loaded where they are used, as read-only, movable loads
//! that Cranelift's optimizer merges and hoists out of loops. Mutable
//! locals and loop counters are Cranelift variables, so the builder's SSA
//! construction places the block parameters. Masks are `I8` values holding
//! 0 or 1, which is what Cranelift's comparisons give.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Block, ConstantData, Endianness, FuncRef, Function, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind, Type, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};
use nax_back_native::{Binary, Compare, Emitter, Kind, Unary};
use std::collections::HashMap;

/// The bytes of a buffer pointer and of a size slot: the back end only
/// targets 64-bit hosts (checked when compiling).
const WORD_BYTES: i64 = 8;

/// An open counted loop: its counter, the block testing it, the block after it, and its step.
pub struct CountedLoop {
    counter: Variable,
    header: Block,
    exit: Block,
    step: i64,
}

/// The kernel signature: the `buffers` and `sizes` pointers, then `begin` and `end`.
pub fn kernel_signature(module: &JITModule) -> Signature {
    let mut signature = module.make_signature();
    signature.params.extend([AbiParam::new(types::I64); 4]);
    signature
}

/// Writes the entry of a kernel whose code is a shared body ([`nax_back_native::Sharing`]):
/// of [`kernel_signature`], it passes `body` a table of the kernel's
/// `buffers` (from the driver's, in order) and, when the kernel has
/// `positions`, a size array of the driver's first `first_slot` values
/// followed by them.
pub fn write_entry(
    func: &mut Function,
    context: &mut FunctionBuilderContext,
    module: &mut JITModule,
    body: FuncId,
    buffers: &[usize],
    first_slot: usize,
    positions: &[i64],
) {
    let mut b = FunctionBuilder::new(func, context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let &[table, sizes, begin, end] = b.block_params(entry) else { unreachable!("`kernel_signature` has four parameters") };
    let words = |n: usize| u32::try_from(n.max(1) as i64 * WORD_BYTES).unwrap_or(u32::MAX);
    let own_table = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, words(buffers.len()), 3));
    for (j, &buffer) in buffers.iter().enumerate() {
        let at = b.ins().iadd_imm_s(table, buffer as i64 * WORD_BYTES);
        let pointer = b.ins().load(types::I64, table_flags(), at, 0);
        b.ins().stack_store(types::I64, pointer, own_table, j as i32 * WORD_BYTES as i32);
    }
    let own_table = b.ins().stack_addr(types::I64, own_table, 0);
    let sizes = if positions.is_empty() {
        sizes
    } else {
        let own = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, words(first_slot + positions.len()), 3));
        for s in 0..first_slot {
            let at = b.ins().iadd_imm_s(sizes, s as i64 * WORD_BYTES);
            let value = b.ins().load(types::I64, table_flags(), at, 0);
            b.ins().stack_store(types::I64, value, own, s as i32 * WORD_BYTES as i32);
        }
        for (j, &position) in positions.iter().enumerate() {
            let value = b.ins().iconst(types::I64, position);
            b.ins().stack_store(types::I64, value, own, (first_slot + j) as i32 * WORD_BYTES as i32);
        }
        b.ins().stack_addr(types::I64, own, 0)
    };
    let body = module.declare_func_in_func(body, b.func);
    b.ins().call(body, &[own_table, sizes, begin, end]);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(module.target_config());
}

/// Writes one kernel function.
pub struct KernelEmitter<'a> {
    builder: FunctionBuilder<'a>,
    module: &'a mut JITModule,
    /// The C math library functions declared in the module, by name.
    libm: &'a HashMap<&'static str, FuncId>,
    /// Those of them already imported into this function.
    imported: HashMap<&'static str, FuncRef>,
    /// The `buffers`, `sizes`, `begin` and `end` parameters.
    buffer_table: Value,
    size_table: Value,
    begin: Value,
    end: Value,
    /// The base pointer of each buffer the kernel uses, loaded at entry
    /// (any other buffer is loaded where it is used).
    bases: HashMap<usize, Value>,
    /// For a body kernels share, its buffers in the order of the table it
    /// receives (each kernel's entry passes its own); else empty, the
    /// table being the driver's, of every buffer.
    order: Vec<usize>,
    /// Whether the host has fused multiply-adds (Cranelift lowers `fma`
    /// only where it does).
    fma: bool,
}

/// The Cranelift type of a kind.
fn type_of(kind: Kind) -> Type {
    match kind {
        Kind::F32 => types::F32,
        Kind::F64 => types::F64,
        Kind::I8 | Kind::Bool => types::I8,
        Kind::I16 => types::I16,
        Kind::I32 => types::I32,
        Kind::I64 => types::I64,
    }
}

/// The Cranelift vector of `lanes` elements of a kind (the microkernel's
/// lanes fill 16 bytes, the widest vectors this back end uses; any other
/// count gives the scalar type, which the verifier then rejects).
fn vector_type(kind: Kind, lanes: u32) -> Type {
    type_of(kind).by(lanes).unwrap_or(type_of(kind))
}

/// Flags for vector loads and stores: in bounds, aligned to their elements only.
fn vector_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Flags for loads of the `buffers` and `sizes` tables: valid, aligned and
/// unchanged for the whole call, so free to merge and hoist.
fn table_flags() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly().with_can_move()
}

impl<'a> KernelEmitter<'a> {
    /// Starts a kernel function in `func`, whose signature is
    /// [`kernel_signature`]: the entry block and the base pointers of
    /// `buffers`, from the driver's table of every buffer or, for a body
    /// kernels share (`shared`), from a table of `buffers` alone, in order.
    pub fn new(
        func: &'a mut Function,
        context: &'a mut FunctionBuilderContext,
        module: &'a mut JITModule,
        libm: &'a HashMap<&'static str, FuncId>,
        buffers: &[usize],
        shared: bool,
    ) -> KernelEmitter<'a> {
        let mut builder = FunctionBuilder::new(func, context);
        let entry = builder.create_block();
        builder.append_block_params_for_function_params(entry);
        builder.switch_to_block(entry);
        let &[buffer_table, size_table, begin, end] = builder.block_params(entry) else { unreachable!("`kernel_signature` has four parameters") };
        let fma = module.isa().isa_flags().iter().any(|f| f.name == "has_fma" && f.as_bool() == Some(true));
        let order = if shared { buffers.to_vec() } else { Vec::new() };
        let mut emitter =
            KernelEmitter { builder, module, libm, imported: HashMap::new(), buffer_table, size_table, begin, end, bases: HashMap::new(), order, fma };
        for &b in buffers {
            let base = emitter.load_base(b);
            emitter.bases.insert(b, base);
        }
        emitter
    }

    /// Ends the function: returns, seals every block and finishes the builder.
    pub fn finish(mut self) {
        self.builder.ins().return_(&[]);
        self.builder.seal_all_blocks();
        self.builder.finalize(self.module.target_config());
    }

    /// Loads `buffer`'s pointer from the table.
    fn load_base(&mut self, buffer: usize) -> Value {
        let position = if self.order.is_empty() { buffer } else { self.order.iter().position(|&b| b == buffer).unwrap_or(buffer) };
        let at = self.builder.ins().iadd_imm_s(self.buffer_table, position as i64 * WORD_BYTES);
        self.builder.ins().load(types::I64, table_flags(), at, 0)
    }

    /// The address of element `index` of `buffer`, whose elements are `kind`.
    fn element_address(&mut self, kind: Kind, buffer: usize, index: Value) -> Value {
        let base = match self.bases.get(&buffer) {
            Some(&base) => base,
            None => self.load_base(buffer),
        };
        let offset = self.builder.ins().imul_imm_s(index, i64::from(type_of(kind).bytes()));
        self.builder.ins().iadd(base, offset)
    }

    fn float_compare(op: Compare) -> FloatCC {
        match op {
            Compare::Eq => FloatCC::Equal,
            Compare::Ne => FloatCC::NotEqual,
            Compare::Lt => FloatCC::LessThan,
            Compare::Le => FloatCC::LessThanOrEqual,
            Compare::Gt => FloatCC::GreaterThan,
            Compare::Ge => FloatCC::GreaterThanOrEqual,
        }
    }

    fn int_compare(op: Compare, signed: bool) -> IntCC {
        match (op, signed) {
            (Compare::Eq, _) => IntCC::Equal,
            (Compare::Ne, _) => IntCC::NotEqual,
            (Compare::Lt, true) => IntCC::SignedLessThan,
            (Compare::Le, true) => IntCC::SignedLessThanOrEqual,
            (Compare::Gt, true) => IntCC::SignedGreaterThan,
            (Compare::Ge, true) => IntCC::SignedGreaterThanOrEqual,
            (Compare::Lt, false) => IntCC::UnsignedLessThan,
            (Compare::Le, false) => IntCC::UnsignedLessThanOrEqual,
            (Compare::Gt, false) => IntCC::UnsignedGreaterThan,
            (Compare::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
        }
    }
}

impl Emitter for KernelEmitter<'_> {
    type Value = Value;
    type Var = Variable;
    type Loop = CountedLoop;

    fn float(&mut self, kind: Kind, v: f64) -> Value {
        match kind {
            Kind::F32 => self.builder.ins().f32const(v as f32),
            _ => self.builder.ins().f64const(v),
        }
    }

    fn int(&mut self, kind: Kind, v: i64) -> Value {
        // Cranelift wants a narrow constant's bits zero-extended.
        let bits = match kind {
            Kind::Bool => i64::from(v != 0),
            Kind::I8 => v & 0xff,
            Kind::I16 => v & 0xffff,
            Kind::I32 => v & 0xffff_ffff,
            _ => v,
        };
        self.builder.ins().iconst(type_of(kind), bits)
    }

    fn binary(&mut self, op: Binary, kind: Kind, a: Value, b: Value) -> Value {
        let float = kind.is_float();
        let ins = self.builder.ins();
        match op {
            Binary::Add if float => ins.fadd(a, b),
            Binary::Add => ins.iadd(a, b),
            Binary::Sub if float => ins.fsub(a, b),
            Binary::Sub => ins.isub(a, b),
            Binary::Mul if float => ins.fmul(a, b),
            Binary::Mul => ins.imul(a, b),
            Binary::Div => ins.fdiv(a, b),
            Binary::DivU => ins.udiv(a, b),
            Binary::Max if float => ins.fmax(a, b),
            Binary::Max => ins.smax(a, b),
            Binary::Min if float => ins.fmin(a, b),
            Binary::Min => ins.smin(a, b),
            Binary::And => ins.band(a, b),
            Binary::Or => ins.bor(a, b),
            Binary::Xor => ins.bxor(a, b),
            Binary::Shl => ins.ishl(a, b),
            Binary::ShrU => ins.ushr(a, b),
            Binary::ShrS => ins.sshr(a, b),
        }
    }

    fn multiply_add(&mut self, kind: Kind, a: Value, b: Value, c: Value) -> Value {
        self.vector_multiply_add(kind, 1, a, b, c)
    }

    /// By a fused multiply-add where the host has one, else Dekker's product.
    fn exact_product(&mut self, kind: Kind, a: Value, b: Value) -> (Value, Value) {
        if !self.fma {
            return nax_back_native::math::dekker_product(self, kind, a, b);
        }
        let p = self.builder.ins().fmul(a, b);
        let np = self.builder.ins().fneg(p);
        (p, self.builder.ins().fma(a, b, np))
    }

    fn unary(&mut self, op: Unary, kind: Kind, a: Value) -> Value {
        let ins = self.builder.ins();
        match op {
            Unary::Neg if kind.is_float() => ins.fneg(a),
            Unary::Neg => ins.ineg(a),
            Unary::Not => ins.bxor_imm_u(a, 1),
            Unary::Abs if kind.is_float() => ins.fabs(a),
            Unary::Abs => ins.iabs(a),
            Unary::Sqrt => ins.sqrt(a),
            Unary::Floor => ins.floor(a),
            Unary::Ceil => ins.ceil(a),
            Unary::RoundEven => ins.nearest(a),
        }
    }

    fn compare(&mut self, op: Compare, kind: Kind, a: Value, b: Value) -> Value {
        if kind.is_float() {
            self.builder.ins().fcmp(Self::float_compare(op), a, b)
        } else {
            self.builder.ins().icmp(Self::int_compare(op, kind != Kind::Bool), a, b)
        }
    }

    fn select(&mut self, _kind: Kind, c: Value, a: Value, b: Value) -> Value {
        self.builder.ins().select(c, a, b)
    }

    fn convert(&mut self, from: Kind, to: Kind, v: Value) -> Value {
        if from == to {
            return v;
        }
        if to == Kind::Bool {
            // `!= 0`, true for nan.
            return if from.is_float() {
                let zero = self.float(from, 0.0);
                self.builder.ins().fcmp(FloatCC::NotEqual, v, zero)
            } else {
                self.builder.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
            };
        }
        let (from_bits, to_type) = (type_of(from).bits(), type_of(to));
        let ins = self.builder.ins();
        match (from, to) {
            // A mask is already the byte 0 or 1.
            (Kind::Bool, Kind::I8) => v,
            (Kind::Bool, _) if to.is_float() => ins.fcvt_from_uint(to_type, v),
            (Kind::Bool, _) => ins.uextend(to_type, v),
            (Kind::F32, Kind::F64) => ins.fpromote(to_type, v),
            (Kind::F64, Kind::F32) => ins.fdemote(to_type, v),
            _ if to.is_float() => ins.fcvt_from_sint(to_type, v),
            // Cranelift saturates to 32 or 64 bits only.
            _ if from.is_float() && to_type.bits() < 32 => {
                let wide = ins.fcvt_to_sint_sat(types::I32, v);
                self.builder.ins().ireduce(to_type, wide)
            }
            _ if from.is_float() => ins.fcvt_to_sint_sat(to_type, v),
            _ if to_type.bits() < from_bits => ins.ireduce(to_type, v),
            _ => ins.sextend(to_type, v),
        }
    }

    fn bitcast(&mut self, _from: Kind, to: Kind, v: Value) -> Value {
        self.builder.ins().bitcast(type_of(to), MemFlagsData::new(), v)
    }

    fn call_libm(&mut self, name: &'static str, args: &[Value]) -> Value {
        let callee = match self.imported.get(name) {
            Some(&callee) => callee,
            None => {
                let callee = self.module.declare_func_in_func(self.libm[name], self.builder.func);
                self.imported.insert(name, callee);
                callee
            }
        };
        let call = self.builder.ins().call(callee, args);
        self.builder.inst_results(call)[0]
    }

    fn load(&mut self, kind: Kind, buffer: usize, index: Value) -> Value {
        let at = self.element_address(kind, buffer, index);
        self.builder.ins().load(type_of(kind), MemFlagsData::trusted(), at, 0)
    }

    fn store(&mut self, kind: Kind, buffer: usize, index: Value, value: Value) {
        let at = self.element_address(kind, buffer, index);
        self.builder.ins().store(MemFlagsData::trusted(), value, at, 0);
    }

    fn size(&mut self, slot: usize) -> Value {
        let at = self.builder.ins().iadd_imm_s(self.size_table, slot as i64 * WORD_BYTES);
        self.builder.ins().load(types::I64, table_flags(), at, 0)
    }

    fn range(&mut self) -> (Value, Value) {
        (self.begin, self.end)
    }

    fn variable(&mut self, kind: Kind, init: Value) -> Variable {
        let var = self.builder.declare_var(type_of(kind));
        self.builder.def_var(var, init);
        var
    }

    fn get(&mut self, var: Variable) -> Value {
        self.builder.use_var(var)
    }

    fn set(&mut self, var: Variable, value: Value) {
        self.builder.def_var(var, value);
    }

    fn load_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Value) -> Value {
        let at = self.element_address(kind, buffer, index);
        self.builder.ins().load(vector_type(kind, lanes), vector_flags(), at, 0)
    }

    fn store_vector(&mut self, kind: Kind, _lanes: u32, buffer: usize, index: Value, value: Value) {
        let at = self.element_address(kind, buffer, index);
        self.builder.ins().store(vector_flags(), value, at, 0);
    }

    fn scratch(&mut self, kind: Kind, elements: u32, buffer: usize) {
        // Aligned to a cache line (2^6 bytes).
        let slot = self.builder.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, elements * type_of(kind).bytes(), 6));
        let base = self.builder.ins().stack_addr(types::I64, slot, 0);
        self.bases.insert(buffer, base);
    }

    fn splat(&mut self, kind: Kind, lanes: u32, v: Value) -> Value {
        self.builder.ins().splat(vector_type(kind, lanes), v)
    }

    fn vector_variable(&mut self, kind: Kind, lanes: u32, init: Value) -> Variable {
        let var = self.builder.declare_var(vector_type(kind, lanes));
        self.builder.def_var(var, init);
        var
    }

    fn vector_multiply_add(&mut self, _kind: Kind, _lanes: u32, a: Value, b: Value, c: Value) -> Value {
        if self.fma {
            return self.builder.ins().fma(a, b, c);
        }
        let product = self.builder.ins().fmul(a, b);
        self.builder.ins().fadd(product, c)
    }

    fn vector_add(&mut self, _kind: Kind, _lanes: u32, a: Value, b: Value) -> Value {
        self.builder.ins().fadd(a, b)
    }

    fn shuffle(&mut self, kind: Kind, lanes: u32, a: Value, b: Value, mask: &[u32]) -> Value {
        // Cranelift shuffles the bytes of 16-byte vectors: each lane's bytes.
        let width = type_of(kind).bytes();
        let bytes: Vec<u8> = mask.iter().flat_map(|&lane| (0..width).map(move |byte| (lane * width + byte) as u8)).collect();
        let mask = self.builder.func.dfg.immediates.push(ConstantData::from(bytes.as_slice()));
        let lane_order = MemFlagsData::new().with_endianness(Endianness::Little);
        let (a, b) = (self.builder.ins().bitcast(types::I8X16, lane_order, a), self.builder.ins().bitcast(types::I8X16, lane_order, b));
        let shuffled = self.builder.ins().shuffle(a, b, mask);
        self.builder.ins().bitcast(vector_type(kind, lanes), lane_order, shuffled)
    }

    fn begin_loop(&mut self, start: Value, end: Value, step: i64) -> (CountedLoop, Value) {
        let counter = self.builder.declare_var(types::I64);
        self.builder.def_var(counter, start);
        let header = self.builder.create_block();
        let body = self.builder.create_block();
        let exit = self.builder.create_block();
        self.builder.ins().jump(header, &[]);
        self.builder.switch_to_block(header);
        let i = self.builder.use_var(counter);
        let more = self.builder.ins().icmp(IntCC::SignedLessThan, i, end);
        self.builder.ins().brif(more, body, &[], exit, &[]);
        self.builder.switch_to_block(body);
        let i = self.builder.use_var(counter);
        (CountedLoop { counter, header, exit, step }, i)
    }

    fn end_loop(&mut self, l: CountedLoop) {
        let i = self.builder.use_var(l.counter);
        let next = self.builder.ins().iadd_imm_s(i, l.step);
        self.builder.def_var(l.counter, next);
        self.builder.ins().jump(l.header, &[]);
        self.builder.switch_to_block(l.exit);
    }
}
