//! The LLVM emitter: [`nax_back_native::Emitter`] over inkwell's builder.
//! Values are LLVM SSA values; variables and loop counters are stack slots
//! in the entry block, which `mem2reg` turns into phis; float min/max are
//! the nan-propagating `llvm.maximum`/`llvm.minimum`; float-to-integer
//! conversions saturate (`llvm.fptosi.sat`); the math's multiply-adds are
//! `llvm.fmuladd` (one FMA where the CPU has it); reduction accumulations carry
//! the `reassoc` flag so the loop vectoriser may split them into lanes.
//! A builder error (a bug, never an input's fault) is kept and reported by
//! [`LlvmEmitter::finish`], so nothing here panics.

use crate::LlvmError;
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{AsValueRef, BasicValue, BasicValueEnum, FunctionValue, InstructionValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, FloatPredicate, IntPredicate};
use nax_back_native::{Binary, Compare, Emitter, Kind, Unary};
use std::collections::HashMap;

/// The alignment of a kernel's scratch arrays: a cache line, so that a
/// tile's vectors never straddle two.
const SCRATCH_ALIGN: u32 = 64;

/// Emits one kernel's body into `function`.
pub struct LlvmEmitter<'a, 'ctx> {
    pub context: &'ctx Context,
    pub module: &'a Module<'ctx>,
    pub builder: Builder<'ctx>,
    pub function: FunctionValue<'ctx>,
    pub entry: BasicBlock<'ctx>,
    /// Each used buffer's base pointer.
    pub buffers: HashMap<usize, PointerValue<'ctx>>,
    pub sizes: PointerValue<'ctx>,
    pub begin: IntValue<'ctx>,
    pub end: IntValue<'ctx>,
    pub error: Option<LlvmError>,
}

impl<'ctx> LlvmEmitter<'_, 'ctx> {
    /// The first builder error, if any.
    pub fn finish(self) -> Result<(), LlvmError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn ty(&self, kind: Kind) -> BasicTypeEnum<'ctx> {
        let c = self.context;
        match kind {
            Kind::F32 => c.f32_type().into(),
            Kind::F64 => c.f64_type().into(),
            Kind::I8 => c.i8_type().into(),
            Kind::I16 => c.i16_type().into(),
            Kind::I32 => c.i32_type().into(),
            Kind::I64 => c.i64_type().into(),
            Kind::Bool => c.bool_type().into(),
        }
    }

    fn poison(&self, kind: Kind) -> BasicValueEnum<'ctx> {
        match self.ty(kind) {
            BasicTypeEnum::FloatType(t) => t.get_poison().into(),
            BasicTypeEnum::IntType(t) => t.get_poison().into(),
            other => other.const_zero(),
        }
    }

    /// A value, or poison of `kind` after recording the error.
    fn value<V: Into<BasicValueEnum<'ctx>>>(&mut self, r: Result<V, BuilderError>, kind: Kind) -> BasicValueEnum<'ctx> {
        match r {
            Ok(v) => v.into(),
            Err(e) => {
                self.error.get_or_insert(e.into());
                self.poison(kind)
            }
        }
    }

    fn done<T>(&mut self, r: Result<T, BuilderError>) {
        if let Err(e) = r {
            self.error.get_or_insert(e.into());
        }
    }

    /// Calls an overloaded intrinsic on `args`, typed by `types`.
    fn intrinsic(&mut self, name: &str, types: &[BasicTypeEnum<'ctx>], args: &[BasicValueEnum<'ctx>], kind: Kind) -> BasicValueEnum<'ctx> {
        let Some(decl) = Intrinsic::find(name).and_then(|i| i.get_declaration(self.module, types)) else {
            self.error.get_or_insert(LlvmError::NoIntrinsic(name.to_string()));
            return self.poison(kind);
        };
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        match self.builder.build_call(decl, &args, "") {
            Ok(call) => match call.try_as_basic_value().basic() {
                Some(v) => v,
                None => self.poison(kind),
            },
            Err(e) => {
                self.error.get_or_insert(e.into());
                self.poison(kind)
            }
        }
    }

    fn element_pointer(&mut self, kind: Kind, buffer: usize, index: BasicValueEnum<'ctx>) -> Option<PointerValue<'ctx>> {
        let Some(&base) = self.buffers.get(&buffer) else {
            self.error.get_or_insert(LlvmError::NotAParameter(buffer));
            return None;
        };
        // SAFETY (of the emitted code): the lowering indexes inside the buffer's shape.
        let gep = unsafe { self.builder.build_in_bounds_gep(self.ty(kind), base, &[index.into_int_value()], "") };
        match gep {
            Ok(p) => Some(p),
            Err(e) => {
                self.error.get_or_insert(e.into());
                None
            }
        }
    }

    /// `freeze v`: `v` itself, which the optimiser no longer sees through.
    fn freeze(&mut self, v: BasicValueEnum<'ctx>) -> BasicValueEnum<'ctx> {
        // SAFETY: the builder and the value are live LLVM objects of this
        // context, and LLVMBuildFreeze returns a new instruction of the
        // value's type (or null, which is refused below).
        let frozen = unsafe { inkwell::llvm_sys::core::LLVMBuildFreeze(self.builder.as_mut_ptr(), v.as_value_ref(), c"".as_ptr()) };
        if frozen.is_null() {
            self.error.get_or_insert(LlvmError::Freeze);
            return v;
        }
        // SAFETY: `frozen` is a non-null value of `v`'s (basic) type.
        unsafe { BasicValueEnum::new(frozen) }
    }

    /// Sets a vector load's or store's alignment to its elements'.
    fn align(&mut self, i: InstructionValue<'ctx>, kind: Kind) {
        if let Err(e) = i.set_alignment(kind.width().div_ceil(8)) {
            self.error.get_or_insert(e.into());
        }
    }

    /// The vector type of `lanes` elements of `kind`.
    fn vector_type(&self, kind: Kind, lanes: u32) -> BasicTypeEnum<'ctx> {
        match self.ty(kind) {
            BasicTypeEnum::FloatType(t) => t.vec_type(lanes).into(),
            BasicTypeEnum::IntType(t) => t.vec_type(lanes).into(),
            other => other,
        }
    }

    /// A stack slot in the entry block.
    fn slot(&mut self, ty: BasicTypeEnum<'ctx>) -> Option<PointerValue<'ctx>> {
        let b = self.context.create_builder();
        match self.entry.get_first_instruction() {
            Some(first) => b.position_before(&first),
            None => b.position_at_end(self.entry),
        }
        match b.build_alloca(ty, "") {
            Ok(p) => Some(p),
            Err(e) => {
                self.error.get_or_insert(e.into());
                None
            }
        }
    }
}

fn float_predicate(op: Compare) -> FloatPredicate {
    match op {
        Compare::Eq => FloatPredicate::OEQ,
        Compare::Ne => FloatPredicate::UNE,
        Compare::Lt => FloatPredicate::OLT,
        Compare::Le => FloatPredicate::OLE,
        Compare::Gt => FloatPredicate::OGT,
        Compare::Ge => FloatPredicate::OGE,
    }
}

fn int_predicate(op: Compare, signed: bool) -> IntPredicate {
    match (op, signed) {
        (Compare::Eq, _) => IntPredicate::EQ,
        (Compare::Ne, _) => IntPredicate::NE,
        (Compare::Lt, true) => IntPredicate::SLT,
        (Compare::Le, true) => IntPredicate::SLE,
        (Compare::Gt, true) => IntPredicate::SGT,
        (Compare::Ge, true) => IntPredicate::SGE,
        (Compare::Lt, false) => IntPredicate::ULT,
        (Compare::Le, false) => IntPredicate::ULE,
        (Compare::Gt, false) => IntPredicate::UGT,
        (Compare::Ge, false) => IntPredicate::UGE,
    }
}

/// A stack slot holding a variable, with its type and kind (the kind of
/// its lanes, for a vector).
#[derive(Clone, Copy)]
pub struct Slot<'ctx>(Option<PointerValue<'ctx>>, BasicTypeEnum<'ctx>, Kind);

/// An open loop: its counter, header and exit blocks, and its step.
pub struct OpenLoop<'ctx> {
    counter: Slot<'ctx>,
    header: BasicBlock<'ctx>,
    exit: BasicBlock<'ctx>,
    step: i64,
}

impl<'ctx> Emitter for LlvmEmitter<'_, 'ctx> {
    type Value = BasicValueEnum<'ctx>;
    type Var = Slot<'ctx>;
    type Loop = OpenLoop<'ctx>;

    fn float(&mut self, kind: Kind, v: f64) -> Self::Value {
        match kind {
            Kind::F32 => self.context.f32_type().const_float(f64::from(v as f32)).into(),
            _ => self.context.f64_type().const_float(v).into(),
        }
    }

    fn int(&mut self, kind: Kind, v: i64) -> Self::Value {
        let t = self.ty(kind).into_int_type();
        let bits = if kind == Kind::Bool { u64::from(v != 0) } else { v as u64 };
        t.const_int(bits, kind != Kind::Bool).into()
    }

    fn binary(&mut self, op: Binary, kind: Kind, a: Self::Value, b: Self::Value) -> Self::Value {
        let bd = &self.builder;
        if kind.is_float() {
            let (x, y) = (a.into_float_value(), b.into_float_value());
            let r = match op {
                Binary::Add => bd.build_float_add(x, y, ""),
                Binary::Sub => bd.build_float_sub(x, y, ""),
                Binary::Mul => bd.build_float_mul(x, y, ""),
                Binary::Div => bd.build_float_div(x, y, ""),
                Binary::Max | Binary::Min => {
                    let name = if op == Binary::Max { "llvm.maximum" } else { "llvm.minimum" };
                    let t = self.ty(kind);
                    return self.intrinsic(name, &[t], &[a, b], kind);
                }
                other => {
                    self.error.get_or_insert(LlvmError::NoOperation(format!("{other:?} on floats")));
                    return self.poison(kind);
                }
            };
            return self.value(r, kind);
        }
        let (x, y) = (a.into_int_value(), b.into_int_value());
        let r = match op {
            Binary::Add => bd.build_int_add(x, y, ""),
            Binary::Sub => bd.build_int_sub(x, y, ""),
            Binary::Mul => bd.build_int_mul(x, y, ""),
            Binary::And => bd.build_and(x, y, ""),
            Binary::Or => bd.build_or(x, y, ""),
            Binary::Xor => bd.build_xor(x, y, ""),
            Binary::Shl => bd.build_left_shift(x, y, ""),
            Binary::ShrU => bd.build_right_shift(x, y, false, ""),
            Binary::ShrS => bd.build_right_shift(x, y, true, ""),
            Binary::DivU => bd.build_int_unsigned_div(x, y, ""),
            Binary::Max | Binary::Min => {
                let name = if op == Binary::Max { "llvm.smax" } else { "llvm.smin" };
                let t = self.ty(kind);
                return self.intrinsic(name, &[t], &[a, b], kind);
            }
            Binary::Div => {
                self.error.get_or_insert(LlvmError::NoOperation("integer division".to_string()));
                return self.poison(kind);
            }
        };
        self.value(r, kind)
    }

    fn multiply_add(&mut self, kind: Kind, a: Self::Value, b: Self::Value, c: Self::Value) -> Self::Value {
        let t = self.ty(kind);
        self.intrinsic("llvm.fmuladd", &[t], &[a, b, c], kind)
    }

    fn exact_product(&mut self, kind: Kind, a: Self::Value, b: Self::Value) -> (Self::Value, Self::Value) {
        let t = self.ty(kind);
        let p = self.binary(Binary::Mul, kind, a, b);
        let np = self.unary(Unary::Neg, kind, p);
        (p, self.intrinsic("llvm.fma", &[t], &[a, b, np], kind))
    }

    fn accumulate(&mut self, op: Binary, kind: Kind, acc: Self::Value, term: Self::Value) -> Self::Value {
        // The optimiser folds a maximum (or minimum) of a term that is a
        // select with one constant arm (a masked logit, `where(m, -inf,
        // x)`) into a select of the accumulator (a conditional
        // reduction), which the loop vectoriser does not recognise; a
        // frozen term (a no-op in the code) keeps it a plain reduction.
        let term = if kind.is_float() && matches!(op, Binary::Max | Binary::Min) { self.freeze(term) } else { term };
        let r = self.binary(op, kind, acc, term);
        if kind.is_float()
            && let Some(i) = r.as_instruction_value()
        {
            let _ = InstructionValue::set_fast_math_flags(i, inkwell::values::FastMathFlags::AllowReassoc);
        }
        r
    }

    fn unary(&mut self, op: Unary, kind: Kind, a: Self::Value) -> Self::Value {
        let t = self.ty(kind);
        let name = match op {
            Unary::Neg => {
                let r = self.builder.build_float_neg(a.into_float_value(), "");
                return self.value(r, kind);
            }
            Unary::Not => {
                let r = self.builder.build_not(a.into_int_value(), "");
                return self.value(r, kind);
            }
            Unary::Abs => "llvm.fabs",
            Unary::Sqrt => "llvm.sqrt",
            Unary::Floor => "llvm.floor",
            Unary::Ceil => "llvm.ceil",
            Unary::RoundEven => "llvm.roundeven",
        };
        self.intrinsic(name, &[t], &[a], kind)
    }

    fn compare(&mut self, op: Compare, kind: Kind, a: Self::Value, b: Self::Value) -> Self::Value {
        let r = if kind.is_float() {
            self.builder.build_float_compare(float_predicate(op), a.into_float_value(), b.into_float_value(), "")
        } else {
            self.builder.build_int_compare(int_predicate(op, kind != Kind::Bool), a.into_int_value(), b.into_int_value(), "")
        };
        self.value(r, Kind::Bool)
    }

    fn select(&mut self, kind: Kind, c: Self::Value, a: Self::Value, b: Self::Value) -> Self::Value {
        let r = self.builder.build_select(c.into_int_value(), a, b, "");
        self.value(r, kind)
    }

    fn convert(&mut self, from: Kind, to: Kind, v: Self::Value) -> Self::Value {
        if from == to {
            return v;
        }
        let bd = &self.builder;
        let target = self.ty(to);
        let r: Result<BasicValueEnum<'ctx>, BuilderError> = match (from.is_float(), to.is_float()) {
            _ if to == Kind::Bool => {
                if from.is_float() {
                    let zero = target_zero(self.ty(from));
                    bd.build_float_compare(FloatPredicate::UNE, v.into_float_value(), zero.into_float_value(), "").map(Into::into)
                } else {
                    let zero = self.ty(from).into_int_type().const_zero();
                    bd.build_int_compare(IntPredicate::NE, v.into_int_value(), zero, "").map(Into::into)
                }
            }
            (true, true) if to.width() > from.width() => bd.build_float_ext(v.into_float_value(), target.into_float_type(), "").map(Into::into),
            (true, true) => bd.build_float_trunc(v.into_float_value(), target.into_float_type(), "").map(Into::into),
            (false, true) if from == Kind::Bool => bd.build_unsigned_int_to_float(v.into_int_value(), target.into_float_type(), "").map(Into::into),
            (false, true) => bd.build_signed_int_to_float(v.into_int_value(), target.into_float_type(), "").map(Into::into),
            (true, false) => {
                let f = self.ty(from);
                return self.intrinsic("llvm.fptosi.sat", &[target, f], &[v], to);
            }
            (false, false) if from == Kind::Bool => bd.build_int_z_extend(v.into_int_value(), target.into_int_type(), "").map(Into::into),
            (false, false) if to.width() > from.width() => bd.build_int_s_extend(v.into_int_value(), target.into_int_type(), "").map(Into::into),
            (false, false) => bd.build_int_truncate(v.into_int_value(), target.into_int_type(), "").map(Into::into),
        };
        self.value(r, to)
    }

    fn bitcast(&mut self, _from: Kind, to: Kind, v: Self::Value) -> Self::Value {
        let r = self.builder.build_bit_cast(v, self.ty(to), "");
        self.value(r, to)
    }

    fn call_libm(&mut self, name: &'static str, args: &[Self::Value]) -> Self::Value {
        let f64t = self.context.f64_type();
        let function = match self.module.get_function(name) {
            Some(f) => f,
            None => {
                let params: Vec<_> = args.iter().map(|_| f64t.into()).collect();
                self.module.add_function(name, f64t.fn_type(&params, false), Some(Linkage::External))
            }
        };
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        match self.builder.build_call(function, &args, "") {
            Ok(call) => call.try_as_basic_value().basic().unwrap_or_else(|| self.poison(Kind::F64)),
            Err(e) => {
                self.error.get_or_insert(e.into());
                self.poison(Kind::F64)
            }
        }
    }

    fn load(&mut self, kind: Kind, buffer: usize, index: Self::Value) -> Self::Value {
        let Some(ptr) = self.element_pointer(kind, buffer, index) else { return self.poison(kind) };
        let r = self.builder.build_load(self.ty(kind), ptr, "");
        self.value(r, kind)
    }

    fn store(&mut self, kind: Kind, buffer: usize, index: Self::Value, value: Self::Value) {
        if let Some(ptr) = self.element_pointer(kind, buffer, index) {
            let r = self.builder.build_store(ptr, value);
            self.done(r);
        }
    }

    fn size(&mut self, slot: usize) -> Self::Value {
        let i64t = self.context.i64_type();
        let index = i64t.const_int(slot as u64, false);
        // SAFETY (of the emitted code): the driver passes every slot.
        let p = unsafe { self.builder.build_in_bounds_gep(i64t, self.sizes, &[index], "") };
        match p {
            Ok(p) => {
                let r = self.builder.build_load(i64t, p, "");
                self.value(r, Kind::I64)
            }
            Err(e) => {
                self.error.get_or_insert(e.into());
                self.poison(Kind::I64)
            }
        }
    }

    fn range(&mut self) -> (Self::Value, Self::Value) {
        (self.begin.into(), self.end.into())
    }

    fn variable(&mut self, kind: Kind, init: Self::Value) -> Self::Var {
        let ty = self.ty(kind);
        let slot = Slot(self.slot(ty), ty, kind);
        self.set(slot, init);
        slot
    }

    fn get(&mut self, var: Self::Var) -> Self::Value {
        let Slot(Some(p), ty, kind) = var else { return self.poison(var.2) };
        let r = self.builder.build_load(ty, p, "");
        self.value(r, kind)
    }

    fn set(&mut self, var: Self::Var, value: Self::Value) {
        if let Slot(Some(p), _, _) = var {
            let r = self.builder.build_store(p, value);
            self.done(r);
        }
    }

    fn load_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Self::Value) -> Self::Value {
        let Some(ptr) = self.element_pointer(kind, buffer, index) else { return self.poison(kind) };
        let r = self.builder.build_load(self.vector_type(kind, lanes), ptr, "");
        if let Ok(v) = r
            && let Some(i) = v.as_instruction_value()
        {
            // Only element alignment: panels and rows start anywhere.
            self.align(i, kind);
        }
        self.value(r, kind)
    }

    fn store_vector(&mut self, kind: Kind, _lanes: u32, buffer: usize, index: Self::Value, value: Self::Value) {
        if let Some(ptr) = self.element_pointer(kind, buffer, index) {
            match self.builder.build_store(ptr, value) {
                Ok(i) => self.align(i, kind),
                Err(e) => {
                    self.error.get_or_insert(e.into());
                }
            }
        }
    }

    fn scratch(&mut self, kind: Kind, elements: u32, buffer: usize) {
        let ty = match self.ty(kind) {
            BasicTypeEnum::FloatType(t) => t.array_type(elements),
            BasicTypeEnum::IntType(t) => t.array_type(elements),
            other => {
                self.error.get_or_insert(LlvmError::NoOperation(format!("no scratch array of {other}")));
                return;
            }
        };
        if let Some(p) = self.slot(ty.into()) {
            if let Some(i) = p.as_instruction_value()
                && let Err(e) = i.set_alignment(SCRATCH_ALIGN)
            {
                self.error.get_or_insert(e.into());
            }
            self.buffers.insert(buffer, p);
        }
    }

    fn store_vector_streaming(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Self::Value, value: Self::Value) {
        // A non-temporal store where the address is aligned to the
        // vector (which it needs), else a plain one.
        let Some(ptr) = self.element_pointer(kind, buffer, index) else { return };
        let bytes = u64::from(lanes * kind.width().div_ceil(8));
        let i64_type = self.context.i64_type();
        let address = match self.builder.build_ptr_to_int(ptr, i64_type, "") {
            Ok(a) => a,
            Err(e) => {
                self.error.get_or_insert(e.into());
                return;
            }
        };
        let misalignment = self.builder.build_and(address, i64_type.const_int(bytes - 1, false), "");
        let aligned = misalignment.and_then(|m| self.builder.build_int_compare(IntPredicate::EQ, m, i64_type.const_zero(), ""));
        let (streamed, plain, joined) = (
            self.context.append_basic_block(self.function, "streamed"),
            self.context.append_basic_block(self.function, "plain"),
            self.context.append_basic_block(self.function, "stored"),
        );
        let branch = aligned.and_then(|a| self.builder.build_conditional_branch(a, streamed, plain));
        self.done(branch);
        self.builder.position_at_end(streamed);
        match self.builder.build_store(ptr, value) {
            Ok(i) => {
                let node = self.context.metadata_node(&[self.context.i32_type().const_int(1, false).into()]);
                let kind_id = self.context.get_kind_id("nontemporal");
                if let Err(e) = i.set_metadata(node, kind_id).and_then(|()| i.set_alignment(bytes as u32)) {
                    self.error.get_or_insert(e.into());
                }
            }
            Err(e) => {
                self.error.get_or_insert(e.into());
            }
        }
        let r = self.builder.build_unconditional_branch(joined);
        self.done(r);
        self.builder.position_at_end(plain);
        self.store_vector(kind, lanes, buffer, index, value);
        let r = self.builder.build_unconditional_branch(joined);
        self.done(r);
        self.builder.position_at_end(joined);
    }

    fn streaming_fence(&mut self) {
        // Sequentially consistent: on x86 a locked instruction (or an
        // `mfence`), either of which drains the write-combining buffers of
        // non-temporal stores (a release fence emits nothing there).
        let r = self.builder.build_fence(AtomicOrdering::SequentiallyConsistent, false, "");
        self.done(r);
    }

    fn splat(&mut self, kind: Kind, lanes: u32, v: Self::Value) -> Self::Value {
        let ty = self.vector_type(kind, lanes);
        let poison = match ty {
            BasicTypeEnum::VectorType(t) => t.get_poison(),
            _ => return self.poison(kind),
        };
        let zero = self.context.i32_type().const_zero();
        let first = self.builder.build_insert_element(poison, v, zero, "");
        let first = match first {
            Ok(f) => f,
            Err(e) => {
                self.error.get_or_insert(e.into());
                return self.poison(kind);
            }
        };
        let mask = self.context.i32_type().vec_type(lanes).const_zero();
        let r = self.builder.build_shuffle_vector(first, poison, mask, "");
        self.value(r, kind)
    }

    fn vector_variable(&mut self, kind: Kind, lanes: u32, init: Self::Value) -> Self::Var {
        let ty = self.vector_type(kind, lanes);
        let slot = Slot(self.slot(ty), ty, kind);
        self.set(slot, init);
        slot
    }

    fn vector_multiply_add(&mut self, kind: Kind, lanes: u32, a: Self::Value, b: Self::Value, c: Self::Value) -> Self::Value {
        let t = self.vector_type(kind, lanes);
        self.intrinsic("llvm.fma", &[t], &[a, b, c], kind)
    }

    fn vector_add(&mut self, kind: Kind, _lanes: u32, a: Self::Value, b: Self::Value) -> Self::Value {
        let r = self.builder.build_float_add(a.into_vector_value(), b.into_vector_value(), "");
        self.value(r, kind)
    }

    fn prefetch(&mut self, kind: Kind, buffer: usize, index: Self::Value, write: bool) {
        let Some(&base) = self.buffers.get(&buffer) else {
            self.error.get_or_insert(LlvmError::NotAParameter(buffer));
            return;
        };
        // Not `inbounds`: the address may lie past the buffer (a prefetch never faults).
        // SAFETY (of the emitted code): the pointer is only prefetched, never dereferenced.
        let ptr = match unsafe { self.builder.build_gep(self.ty(kind), base, &[index.into_int_value()], "") } {
            Ok(p) => p,
            Err(e) => {
                self.error.get_or_insert(e.into());
                return;
            }
        };
        let int = self.context.i32_type();
        // Kept in every cache level (locality 3), as data (cache type 1).
        let args = [ptr.into(), int.const_int(u64::from(write), false).into(), int.const_int(3, false).into(), int.const_int(1, false).into()];
        self.intrinsic("llvm.prefetch", &[ptr.get_type().into()], &args, Kind::I8);
    }

    fn shuffle(&mut self, kind: Kind, _lanes: u32, a: Self::Value, b: Self::Value, mask: &[u32]) -> Self::Value {
        let lane = self.context.i32_type();
        let mask: Vec<IntValue<'ctx>> = mask.iter().map(|&m| lane.const_int(u64::from(m), false)).collect();
        let r = self.builder.build_shuffle_vector(a.into_vector_value(), b.into_vector_value(), VectorType::const_vector(&mask), "");
        self.value(r, kind)
    }

    fn begin_loop(&mut self, start: Self::Value, end: Self::Value, step: i64) -> (Self::Loop, Self::Value) {
        let counter = self.variable(Kind::I64, start);
        let header = self.context.append_basic_block(self.function, "header");
        let body = self.context.append_basic_block(self.function, "body");
        let exit = self.context.append_basic_block(self.function, "exit");
        let r = self.builder.build_unconditional_branch(header);
        self.done(r);
        self.builder.position_at_end(header);
        let i = self.get(counter);
        let more = self.compare(Compare::Lt, Kind::I64, i, end);
        let r = self.builder.build_conditional_branch(more.into_int_value(), body, exit);
        self.done(r);
        self.builder.position_at_end(body);
        (OpenLoop { counter, header, exit, step }, i)
    }

    fn end_loop(&mut self, l: Self::Loop) {
        let i = self.get(l.counter);
        let step = self.int(Kind::I64, l.step);
        let r = self.builder.build_int_nsw_add(i.into_int_value(), step.into_int_value(), "");
        let next = self.value(r, Kind::I64);
        self.set(l.counter, next);
        let r = self.builder.build_unconditional_branch(l.header);
        self.done(r);
        self.builder.position_at_end(l.exit);
    }
}

fn target_zero(t: BasicTypeEnum<'_>) -> BasicValueEnum<'_> {
    t.const_zero()
}
