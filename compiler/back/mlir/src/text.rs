//! The MLIR emitter: [`nax_back_native::Emitter`] writing a kernel as MLIR
//! text in nax's dialect (`dialects/nax.irdl.mlir`: loads, stores, size
//! slots, prefetches) and upstream dialects (`arith`, `vector`, `scf.for`
//! loops, `func.call`s of the C math functions, `llvm` allocas and
//! intrinsics). The semantics are the LLVM emitter's, op for op: float
//! min/max are the nan-propagating `arith.maximumf`/`minimumf`,
//! float-to-integer conversions saturate (`llvm.fptosi.sat`), the math's
//! multiply-adds are `llvm.intr.fmuladd`, and reduction accumulations
//! carry `fastmath<reassoc>`. `fabs`, `sqrt`, `floor`, `ceil` and
//! `roundeven` are LLVM's intrinsics called by name (`llvm.call_intrinsic`),
//! which both the CPU and the NVPTX back ends compile to one instruction
//! (the `math` dialect's ops would become libdevice calls on a GPU).
//! Variables are `llvm.alloca`s at the function's entry (LLVM's `mem2reg`
//! makes them registers).
//!
//! For a GPU ([`Device::Gpu`]) a kernel is a `gpu.func`: its parallel loop
//! runs one position per thread (thread `t` of the launch computes
//! position `begin + t`, and none past `end`), and a call of the C math
//! library, which a GPU does not have (the math computes its own), is
//! recorded ([`KernelText::unsupported`]) for the caller to report. Kernels
//! formed for a GPU have no prefetches.
//!
//! Every value is named `%vN` and its type is remembered, so each op can be
//! written with the types MLIR's syntax asks for. The loops of the kernel's
//! nest carry the role the kernel IR decided (`{nax.role = "parallel"}`).

use nax_back_native::{Binary, Compare, Emitter, Kind, Unary};
use nax_kernel::Role;
use std::collections::BTreeSet;
use std::fmt::Write;

/// A value: its number (`%vN`).
#[derive(Clone, Copy, Debug)]
pub struct Value(usize);

/// A variable: the number of its alloca (`%pN`) and the type it holds.
#[derive(Clone, Copy, Debug)]
pub struct Var {
    slot: usize,
    ty: Ty,
}

/// A value's type: a kind, and its lanes when it is a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ty {
    kind: Kind,
    lanes: Option<u32>,
}

impl Ty {
    fn scalar(kind: Kind) -> Ty {
        Ty { kind, lanes: None }
    }
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.lanes {
            Some(n) => write!(f, "vector<{n}x{}>", scalar_type(self.kind)),
            None => f.write_str(scalar_type(self.kind)),
        }
    }
}

fn scalar_type(kind: Kind) -> &'static str {
    match kind {
        Kind::F32 => "f32",
        Kind::F64 => "f64",
        Kind::I8 => "i8",
        Kind::I16 => "i16",
        Kind::I32 => "i32",
        Kind::I64 => "i64",
        Kind::Bool => "i1",
    }
}

/// Where a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The host CPU: a `func.func` called by the runtime's driver over a
    /// range of its parallel loop.
    Cpu,
    /// An NVIDIA GPU: a `gpu.func` kernel, one position of the parallel
    /// loop per thread.
    Gpu,
    /// The GPU's kernels run on the CPU: a `func.func` like the CPU's whose
    /// body is the GPU kernel's inside a loop over the launch's threads, the
    /// thread id a loop variable. It checks the GPU schedule's index and
    /// guard logic without a GPU.
    Emulated,
}

impl Device {
    /// Whether the kernel is the GPU's (no C math library).
    fn is_gpu(self) -> bool {
        self != Device::Cpu
    }
}

/// Emits one kernel's body: the text of its function's entry allocas and
/// of its ops, put together by [`KernelText::function`].
pub struct KernelText {
    device: Device,
    /// The buffers the kernel uses, each the argument `%b<N>`.
    buffers: BTreeSet<usize>,
    /// Its scratch arrays, each the alloca `%b<N>` at the entry.
    scratch: BTreeSet<usize>,
    /// The allocas, written at the entry.
    allocas: String,
    /// The ops, in order.
    body: String,
    /// The indentation of the next op (inside loops).
    depth: usize,
    /// Each value's type, by number.
    types: Vec<Ty>,
    slots: usize,
    /// The C math functions called, to declare.
    pub libm: BTreeSet<&'static str>,
    /// The role of the next loop, when it is one of the kernel's nest.
    role: Option<Role>,
    /// The range of the parallel loop this function computes.
    range: (Value, Value),
    /// The C math functions called on a device that has none.
    pub unsupported: BTreeSet<&'static str>,
    /// The loops opened at the entry (over the emulated threads, around a
    /// kernel without a parallel loop), closed at the end.
    entry_loops: usize,
}

impl KernelText {
    /// An emitter for a kernel whose used buffers are `buffers` (named
    /// `%b<N>` after their numbers), running on `device`. On a GPU a kernel
    /// with a `parallel` loop runs one position of it per thread; one
    /// without runs whole in thread 0 (launched alone).
    pub fn new(buffers: &[usize], device: Device, parallel: bool) -> KernelText {
        let mut text = KernelText {
            device,
            buffers: buffers.iter().copied().collect(),
            scratch: BTreeSet::new(),
            allocas: String::new(),
            body: String::new(),
            depth: 1,
            types: Vec::new(),
            slots: 0,
            libm: BTreeSet::new(),
            role: None,
            range: (Value(0), Value(1)),
            unsupported: BTreeSet::new(),
            entry_loops: 0,
        };
        // `%v0` and `%v1`: the range's bounds, the last two arguments.
        text.types.extend([Ty::scalar(Kind::I64), Ty::scalar(Kind::I64)]);
        let id = match device {
            Device::Cpu => return text,
            Device::Gpu => {
                let id = text.op(Ty::scalar(Kind::I64), format_args!("gpu.global_id x"));
                text.op(Ty::scalar(Kind::I64), format_args!("arith.index_cast %v{} : index to i64", id.0))
            }
            Device::Emulated => {
                // One launch, in a loop over its threads.
                let zero = text.int(Kind::I64, 0);
                let threads = if parallel { text.arith("subi", "", Value(1), Value(0)) } else { text.int(Kind::I64, 1) };
                let (_, id) = text.begin_loop(zero, threads, 1);
                text.entry_loops += 1;
                id
            }
        };
        if parallel {
            text.range = text.thread_range(id);
        } else {
            // The whole nest in thread 0: a loop of one iteration there, none elsewhere.
            let zero = text.int(Kind::I64, 0);
            let first = text.compare(Compare::Eq, Kind::I64, id, zero);
            let once = text.convert(Kind::Bool, Kind::I64, first);
            text.begin_loop(zero, once, 1);
            text.entry_loops += 1;
        }
        text
    }

    /// For a GPU, at the entry: this thread's position of the parallel
    /// loop, `begin` plus its index `id` in the launch, and the end of its
    /// range, one past it unless it is at or past `end` (threads past it
    /// compute nothing).
    fn thread_range(&mut self, id: Value) -> (Value, Value) {
        let i64t = Ty::scalar(Kind::I64);
        let first = self.arith("addi", "", Value(0), id);
        let inside = self.op(Ty::scalar(Kind::Bool), format_args!("arith.cmpi slt, %v{}, %v1 : i64", first.0));
        let one = self.op(i64t, format_args!("arith.extui %v{} : i1 to i64", inside.0));
        let end = self.arith("addi", "", first, one);
        (first, end)
    }

    /// The kernel's function `name`: buffer arguments `%b<N>` (`noalias`:
    /// kernels never write a buffer they read), the size slots and the
    /// range. On a CPU, the body the entry calls (internal, inlined into
    /// it); on a GPU, the kernel the runtime launches.
    pub fn function(&self, name: &str) -> String {
        let mut params: Vec<String> = self.buffers.iter().map(|b| format!("%b{b}: !llvm.ptr {{llvm.noalias}}")).collect();
        params.extend(["%sizes: !llvm.ptr {llvm.noalias}".to_string(), "%v0: i64".to_string(), "%v1: i64".to_string()]);
        let (indent, mut text, ret) = match self.device {
            Device::Cpu | Device::Emulated => {
                ("    ", format!("  func.func @{name}({}) attributes {{llvm.linkage = #llvm.linkage<internal>}} {{\n", params.join(", ")), "return")
            }
            Device::Gpu => ("      ", format!("    gpu.func @{name}({}) kernel {{\n", params.join(", ")), "gpu.return"),
        };
        if self.slots > 0 {
            let _ = writeln!(text, "{indent}%one = llvm.mlir.constant(1 : i64) : i64");
        }
        for line in self.allocas.lines().chain(self.body.lines()) {
            let _ = writeln!(text, "{}{}", &indent[4..], line);
        }
        for depth in (0..self.entry_loops).rev() {
            let _ = writeln!(text, "{indent}{:width$}}}", "", width = 2 * depth);
        }
        let _ = writeln!(text, "{indent}{ret}\n{}}}", &indent[2..]);
        text
    }

    fn ty(&self, v: Value) -> Ty {
        self.types.get(v.0).copied().unwrap_or(Ty::scalar(Kind::I64))
    }

    /// Writes `%vN = <op>` for a new value of type `ty`.
    fn op(&mut self, ty: Ty, op: std::fmt::Arguments<'_>) -> Value {
        let v = Value(self.types.len());
        self.types.push(ty);
        let _ = writeln!(self.body, "{:indent$}%v{} = {op}", "", v.0, indent = 2 * self.depth + 2);
        v
    }

    /// Writes an op without a result.
    fn effect(&mut self, op: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.body, "{:indent$}{op}", "", indent = 2 * self.depth + 2);
    }

    /// The argument of `buffer`. One that is not a parameter is a bug of
    /// the lowering; its name is then undefined and the module fails to
    /// parse, reported as an internal error.
    fn buffer(&self, buffer: usize) -> String {
        if self.buffers.contains(&buffer) || self.scratch.contains(&buffer) { format!("%b{buffer}") } else { "%missing_buffer".to_string() }
    }

    /// A variable of type `ty`: an alloca at the entry, set to `init` here.
    fn new_variable(&mut self, ty: Ty, init: Value) -> Var {
        let slot = self.slots;
        self.slots += 1;
        let _ = writeln!(self.allocas, "    %p{slot} = llvm.alloca %one x {ty} : (i64) -> !llvm.ptr");
        let var = Var { slot, ty };
        self.set(var, init);
        var
    }

    fn load_typed(&mut self, ty: Ty, buffer: usize, index: Value) -> Value {
        let base = self.buffer(buffer);
        self.op(ty, format_args!("\"nax.load\"({base}, %v{}) : (!llvm.ptr, i64) -> {ty}", index.0))
    }

    fn store_typed(&mut self, buffer: usize, index: Value, value: Value) {
        let base = self.buffer(buffer);
        let ty = self.ty(value);
        self.effect(format_args!("\"nax.store\"(%v{}, {base}, %v{}) : ({ty}, !llvm.ptr, i64) -> ()", value.0, index.0));
    }

    fn arith(&mut self, name: &str, flags: &str, a: Value, b: Value) -> Value {
        let ty = self.ty(a);
        self.op(ty, format_args!("arith.{name} %v{}, %v{}{flags} : {ty}", a.0, b.0))
    }
}

/// `arith.cmpf`'s predicate: ordered, except `Ne`.
fn float_predicate(op: Compare) -> &'static str {
    match op {
        Compare::Eq => "oeq",
        Compare::Ne => "une",
        Compare::Lt => "olt",
        Compare::Le => "ole",
        Compare::Gt => "ogt",
        Compare::Ge => "oge",
    }
}

/// `arith.cmpi`'s predicate: signed on integers, unsigned on masks.
fn int_predicate(op: Compare, signed: bool) -> &'static str {
    match (op, signed) {
        (Compare::Eq, _) => "eq",
        (Compare::Ne, _) => "ne",
        (Compare::Lt, true) => "slt",
        (Compare::Le, true) => "sle",
        (Compare::Gt, true) => "sgt",
        (Compare::Ge, true) => "sge",
        (Compare::Lt, false) => "ult",
        (Compare::Le, false) => "ule",
        (Compare::Gt, false) => "ugt",
        (Compare::Ge, false) => "uge",
    }
}

/// An open `scf.for`, and the role it is annotated with (`nax.role`)
/// when it is a loop of the kernel's nest.
pub struct OpenLoop(Option<Role>);

impl Emitter for KernelText {
    type Value = Value;
    type Var = Var;
    type Loop = OpenLoop;

    fn float(&mut self, kind: Kind, v: f64) -> Value {
        // Bit patterns: exact, and nan and infinities included.
        match kind {
            Kind::F32 => self.op(Ty::scalar(kind), format_args!("arith.constant {:#010X} : f32", (v as f32).to_bits())),
            _ => self.op(Ty::scalar(Kind::F64), format_args!("arith.constant {:#018X} : f64", v.to_bits())),
        }
    }

    fn int(&mut self, kind: Kind, v: i64) -> Value {
        let ty = Ty::scalar(kind);
        match kind {
            Kind::Bool => self.op(ty, format_args!("arith.constant {}", v != 0)),
            Kind::I8 => self.op(ty, format_args!("arith.constant {} : i8", v as i8)),
            Kind::I16 => self.op(ty, format_args!("arith.constant {} : i16", v as i16)),
            Kind::I32 => self.op(ty, format_args!("arith.constant {} : i32", v as i32)),
            _ => self.op(Ty::scalar(Kind::I64), format_args!("arith.constant {v} : i64")),
        }
    }

    fn binary(&mut self, op: Binary, kind: Kind, a: Value, b: Value) -> Value {
        let name = match (op, kind.is_float()) {
            (Binary::Add, true) => "addf",
            (Binary::Sub, true) => "subf",
            (Binary::Mul, true) => "mulf",
            (Binary::Div, true) => "divf",
            (Binary::Max, true) => "maximumf",
            (Binary::Min, true) => "minimumf",
            (Binary::Add, false) => "addi",
            (Binary::Sub, false) => "subi",
            (Binary::Mul, false) => "muli",
            (Binary::Max, false) => "maxsi",
            (Binary::Min, false) => "minsi",
            (Binary::And, _) => "andi",
            (Binary::Or, _) => "ori",
            (Binary::Xor, _) => "xori",
            (Binary::Shl, _) => "shli",
            (Binary::ShrU, _) => "shrui",
            (Binary::ShrS, _) => "shrsi",
            (Binary::DivU, _) => "divui",
            // Integer division is `DivU`; `divsi` keeps the text well formed.
            (Binary::Div, false) => "divsi",
        };
        self.arith(name, "", a, b)
    }

    fn accumulate(&mut self, op: Binary, kind: Kind, acc: Value, term: Value) -> Value {
        match (op, kind.is_float()) {
            (Binary::Add, true) => self.arith("addf", " fastmath<reassoc>", acc, term),
            (Binary::Mul, true) => self.arith("mulf", " fastmath<reassoc>", acc, term),
            _ => self.binary(op, kind, acc, term),
        }
    }

    fn multiply_add(&mut self, kind: Kind, a: Value, b: Value, c: Value) -> Value {
        let ty = Ty::scalar(kind);
        self.op(ty, format_args!("llvm.intr.fmuladd(%v{}, %v{}, %v{}) : ({ty}, {ty}, {ty}) -> {ty}", a.0, b.0, c.0))
    }

    fn exact_product(&mut self, kind: Kind, a: Value, b: Value) -> (Value, Value) {
        let ty = Ty::scalar(kind);
        let p = self.binary(Binary::Mul, kind, a, b);
        let np = self.unary(Unary::Neg, kind, p);
        (p, self.op(ty, format_args!("llvm.intr.fma(%v{}, %v{}, %v{}) : ({ty}, {ty}, {ty}) -> {ty}", a.0, b.0, np.0)))
    }

    fn unary(&mut self, op: Unary, kind: Kind, a: Value) -> Value {
        let ty = Ty::scalar(kind);
        let name = match op {
            Unary::Neg => return self.op(ty, format_args!("arith.negf %v{} : {ty}", a.0)),
            Unary::Not => {
                let t = self.int(Kind::Bool, 1);
                return self.arith("xori", "", a, t);
            }
            Unary::Abs => "fabs",
            Unary::Sqrt => "sqrt",
            Unary::Floor => "floor",
            Unary::Ceil => "ceil",
            Unary::RoundEven => "roundeven",
        };
        self.op(ty, format_args!("llvm.call_intrinsic \"llvm.{name}.{ty}\"(%v{}) : ({ty}) -> {ty}", a.0))
    }

    fn compare(&mut self, op: Compare, kind: Kind, a: Value, b: Value) -> Value {
        let ty = Ty::scalar(kind);
        let (name, predicate) = if kind.is_float() { ("cmpf", float_predicate(op)) } else { ("cmpi", int_predicate(op, kind != Kind::Bool)) };
        self.op(Ty::scalar(Kind::Bool), format_args!("arith.{name} {predicate}, %v{}, %v{} : {ty}", a.0, b.0))
    }

    fn select(&mut self, kind: Kind, c: Value, a: Value, b: Value) -> Value {
        let ty = Ty { kind, lanes: self.ty(a).lanes };
        self.op(ty, format_args!("arith.select %v{}, %v{}, %v{} : {ty}", c.0, a.0, b.0))
    }

    fn convert(&mut self, from: Kind, to: Kind, v: Value) -> Value {
        if from == to {
            return v;
        }
        let (f, t) = (scalar_type(from), scalar_type(to));
        let target = Ty::scalar(to);
        if to == Kind::Bool {
            let zero = if from.is_float() { self.float(from, 0.0) } else { self.int(from, 0) };
            return self.compare(Compare::Ne, from, v, zero);
        }
        let name = match (from.is_float(), to.is_float()) {
            (true, true) if to.width() > from.width() => "extf",
            (true, true) => "truncf",
            (false, true) if from == Kind::Bool => "uitofp",
            (false, true) => "sitofp",
            (true, false) => {
                return self.op(target, format_args!("llvm.call_intrinsic \"llvm.fptosi.sat.{t}.{f}\"(%v{}) : ({f}) -> {t}", v.0));
            }
            (false, false) if from == Kind::Bool => "extui",
            (false, false) if to.width() > from.width() => "extsi",
            (false, false) => "trunci",
        };
        self.op(target, format_args!("arith.{name} %v{} : {f} to {t}", v.0))
    }

    fn bitcast(&mut self, from: Kind, to: Kind, v: Value) -> Value {
        self.op(Ty::scalar(to), format_args!("arith.bitcast %v{} : {} to {}", v.0, scalar_type(from), scalar_type(to)))
    }

    fn has_libm(&self) -> bool {
        !self.device.is_gpu()
    }

    fn call_libm(&mut self, name: &'static str, args: &[Value]) -> Value {
        if self.device.is_gpu() {
            // Reported by the caller; the text stays well formed.
            self.unsupported.insert(name);
            return self.float(Kind::F64, f64::NAN);
        }
        self.libm.insert(name);
        let list: Vec<String> = args.iter().map(|a| format!("%v{}", a.0)).collect();
        let types = vec!["f64"; args.len()].join(", ");
        self.op(Ty::scalar(Kind::F64), format_args!("func.call @{name}({}) : ({types}) -> f64", list.join(", ")))
    }

    fn load(&mut self, kind: Kind, buffer: usize, index: Value) -> Value {
        self.load_typed(Ty::scalar(kind), buffer, index)
    }

    fn store(&mut self, _kind: Kind, buffer: usize, index: Value, value: Value) {
        self.store_typed(buffer, index, value);
    }

    fn size(&mut self, slot: usize) -> Value {
        self.op(Ty::scalar(Kind::I64), format_args!("\"nax.size\"(%sizes) {{slot = {slot} : i64}} : (!llvm.ptr) -> i64"))
    }

    fn range(&mut self) -> (Value, Value) {
        self.range
    }

    fn variable(&mut self, kind: Kind, init: Value) -> Var {
        self.new_variable(Ty::scalar(kind), init)
    }

    fn get(&mut self, var: Var) -> Value {
        self.op(var.ty, format_args!("llvm.load %p{} : !llvm.ptr -> {}", var.slot, var.ty))
    }

    fn set(&mut self, var: Var, value: Value) {
        self.effect(format_args!("llvm.store %v{}, %p{} : {}, !llvm.ptr", value.0, var.slot, var.ty));
    }

    fn load_vector(&mut self, kind: Kind, lanes: u32, buffer: usize, index: Value) -> Value {
        self.load_typed(Ty { kind, lanes: Some(lanes) }, buffer, index)
    }

    fn store_vector(&mut self, _kind: Kind, _lanes: u32, buffer: usize, index: Value, value: Value) {
        self.store_typed(buffer, index, value);
    }

    fn scratch(&mut self, kind: Kind, elements: u32, buffer: usize) {
        self.scratch.insert(buffer);
        let _ = writeln!(self.allocas, "    %c{buffer} = llvm.mlir.constant({elements} : i64) : i64");
        let _ = writeln!(self.allocas, "    %b{buffer} = llvm.alloca %c{buffer} x {} {{alignment = 64 : i64}} : (i64) -> !llvm.ptr", scalar_type(kind));
    }

    fn splat(&mut self, kind: Kind, lanes: u32, v: Value) -> Value {
        let ty = Ty { kind, lanes: Some(lanes) };
        self.op(ty, format_args!("vector.broadcast %v{} : {} to {ty}", v.0, scalar_type(kind)))
    }

    fn vector_variable(&mut self, kind: Kind, lanes: u32, init: Value) -> Var {
        self.new_variable(Ty { kind, lanes: Some(lanes) }, init)
    }

    fn vector_multiply_add(&mut self, kind: Kind, lanes: u32, a: Value, b: Value, c: Value) -> Value {
        let ty = Ty { kind, lanes: Some(lanes) };
        self.op(ty, format_args!("llvm.intr.fma(%v{}, %v{}, %v{}) : ({ty}, {ty}, {ty}) -> {ty}", a.0, b.0, c.0))
    }

    fn vector_add(&mut self, _kind: Kind, _lanes: u32, a: Value, b: Value) -> Value {
        self.arith("addf", "", a, b)
    }

    fn shuffle(&mut self, kind: Kind, lanes: u32, a: Value, b: Value, mask: &[u32]) -> Value {
        let input = Ty { kind, lanes: Some(lanes) };
        let ty = Ty { kind, lanes: Some(mask.len() as u32) };
        let mask: Vec<String> = mask.iter().map(u32::to_string).collect();
        self.op(ty, format_args!("vector.shuffle %v{}, %v{} [{}] : {input}, {input}", a.0, b.0, mask.join(", ")))
    }

    fn prefetch(&mut self, kind: Kind, buffer: usize, index: Value, write: bool) {
        let base = self.buffer(buffer);
        self.effect(format_args!(
            "\"nax.prefetch\"({base}, %v{}) {{element = {}, write = {} : i32}} : (!llvm.ptr, i64) -> ()",
            index.0,
            scalar_type(kind),
            u32::from(write)
        ));
    }

    fn begin_loop(&mut self, start: Value, end: Value, step: i64) -> (OpenLoop, Value) {
        let step = self.int(Kind::I64, step);
        let i = Value(self.types.len());
        self.types.push(Ty::scalar(Kind::I64));
        self.effect(format_args!("scf.for %v{} = %v{} to %v{} step %v{} : i64 {{", i.0, start.0, end.0, step.0));
        self.depth += 1;
        (OpenLoop(self.role.take()), i)
    }

    fn end_loop(&mut self, l: OpenLoop) {
        self.depth -= 1;
        match l.0 {
            Some(role) => self.effect(format_args!("}} {{nax.role = \"{}\"}}", role.name())),
            None => self.effect(format_args!("}}")),
        }
    }

    fn loop_role(&mut self, role: Role) {
        self.role = Some(role);
    }
}
