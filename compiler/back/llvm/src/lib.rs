//! The LLVM back end (`--backend llvm`, the default). Each kernel of the
//! kernel IR becomes an LLVM function through the shared lowering
//! ([`nax_back_native::lower_kernel`]), optimised by LLVM's O3 pipeline for
//! the host CPU (its name and features are detected and set on every
//! function, so the loop vectoriser uses AVX-512 where the machine has it),
//! then JIT-compiled in process for `nax run` (calls to the C math library
//! bound to `nax_runtime::libm::address`), or written as an object file
//! or LLVM IR for `nax build --emit obj|llvm-ir` (where they stay calls to
//! the C library's `exp`, `sin`, ...).
//!
//! Each kernel is two functions: `<program>_k<i>_body`, whose buffer
//! parameters are `noalias` (kernels never write a buffer they read), and
//! the exported `<program>_k<i>` with the driver's uniform signature,
//! which loads the buffer pointers and calls the body (inlined at O3).
//! Kernels that differ only in their buffers and in constant positions
//! (a written-out loop's turns) share one body, compiled once and not
//! inlined, which reads those positions from slots their entries fill
//! ([`nax_back_native::Sharing`]).

mod emit;
mod error;

use emit::LlvmEmitter;
pub use error::{LlvmError, NativeTargetError};
use inkwell::OptimizationLevel;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine};
use nax_back_native::{CodegenError, Sharing, Slots, lower_kernel, lower_microkernel};
use nax_contract::{Machine, Processor};
use nax_kernel::Program;
use nax_runtime::{KernelFn, NativeFunction, NativePlan, Signature};
use rayon::prelude::*;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::OnceLock;

/// What `nax build` can write from the LLVM back end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Artifact {
    /// An ELF object file for the host; math calls to the C library's
    /// `exp`, `sin`, ...
    Object,
    /// An object file for an AOT shared library: math calls to
    /// `nax_libm_exp`, ..., which the library's runtime defines (the JITs'
    /// implementations, so AOT and JIT give the same numbers).
    LibraryObject,
    /// The optimised LLVM IR, as text.
    Ir,
}

/// The machine code's target as LLVM spells it: its triple, CPU name and
/// features, the CPU it is tuned for, and the vector width its loops prefer.
struct Host {
    triple: inkwell::targets::TargetTriple,
    cpu: String,
    features: String,
    tune: Option<String>,
    prefer_vector_width: &'static str,
}

/// The vector width LLVM's loops prefer on `machine`: 512 bits where its
/// vectors are 64 bytes, else 256.
fn prefer_vector_width(machine: &Machine) -> &'static str {
    if machine.vector_bytes() >= 64 { "512" } else { "256" }
}

/// This machine as LLVM detects it (every feature it has, for the JIT).
fn host() -> Result<&'static Host, LlvmError> {
    static HOST: OnceLock<Result<Host, NativeTargetError>> = OnceLock::new();
    HOST.get_or_init(|| {
        Target::initialize_native(&InitializationConfig::default()).map_err(NativeTargetError)?;
        Ok(Host {
            triple: TargetMachine::get_default_triple(),
            cpu: TargetMachine::get_host_cpu_name().to_string(),
            features: TargetMachine::get_host_cpu_features().to_string(),
            tune: None,
            prefer_vector_width: prefer_vector_width(&Machine::host()),
        })
    })
    .as_ref()
    .map_err(|e| e.clone().into())
}

/// The target of ahead-of-time code for `machine`, on this machine's
/// triple: baseline x86-64 with exactly `machine`'s features (so the list
/// a library checks is everything its code needs), tuned for its CPU.
fn host_for(machine: &Machine) -> Result<Host, LlvmError> {
    let h = host()?;
    let features: Vec<String> = machine.features.iter().map(|f| format!("+{f}")).collect();
    let tune = match machine.processor {
        Processor::Native => h.cpu.clone(),
        Processor::Generic | Processor::Cuda => "generic".to_string(),
        Processor::Named(c) => c.name.to_string(),
    };
    Ok(Host {
        triple: TargetMachine::get_default_triple(),
        cpu: "x86-64".to_string(),
        features: features.join(","),
        tune: Some(tune),
        prefer_vector_width: prefer_vector_width(machine),
    })
}

fn target_machine(h: &Host) -> Result<TargetMachine, LlvmError> {
    let target = Target::from_triple(&h.triple).map_err(|e| LlvmError::NoTarget { triple: h.triple.to_string(), message: e.to_string() })?;
    target
        .create_target_machine(&h.triple, &h.cpu, &h.features, OptimizationLevel::Aggressive, RelocMode::PIC, CodeModel::Default)
        .ok_or_else(|| LlvmError::TargetMachine { triple: h.triple.to_string(), cpu: h.cpu.clone() })
}

/// Some functions of a program: the program, its size slots, the kernels
/// that share a body, and the functions' numbers.
type Part<'a> = (&'a Program, &'a Slots, &'a Sharing, &'a [usize]);

/// Builds and verifies the module of some programs' kernels.
fn build_module<'ctx>(context: &'ctx Context, parts: &[Part<'_>], h: &Host, tm: &TargetMachine) -> Result<Module<'ctx>, LlvmError> {
    let module = context.create_module(parts.first().map_or("nax", |(p, ..)| p.name.as_str()));
    module.set_triple(&h.triple);
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let mut target_attributes = vec![
        context.create_string_attribute("target-cpu", &h.cpu),
        context.create_string_attribute("target-features", &h.features),
        context.create_string_attribute("prefer-vector-width", h.prefer_vector_width),
    ];
    if let Some(tune) = &h.tune {
        target_attributes.push(context.create_string_attribute("tune-cpu", tune));
    }
    let enum_attribute = |name: &str| context.create_enum_attribute(Attribute::get_named_enum_kind_id(name), 0);
    for &(p, plan, sharing, which) in parts {
        add_kernels(context, &module, p, plan, sharing, which, &target_attributes, &enum_attribute)?;
    }
    module.verify().map_err(|e| LlvmError::Verify(e.to_string()))?;
    Ok(module)
}

/// Runs LLVM's O3 pipeline, with both vectorisers, for the host.
fn optimise(module: &Module<'_>, tm: &TargetMachine) -> Result<(), LlvmError> {
    let options = PassBuilderOptions::create();
    options.set_loop_vectorization(true);
    options.set_loop_slp_vectorization(true);
    options.set_loop_unrolling(true);
    module.run_passes("default<O3>", tm, options).map_err(|e| LlvmError::Optimise(e.to_string()))
}

/// Adds some functions of a program (its kernels, then its
/// microkernels): the body of each that is a body ([`Sharing`]), and each
/// one's exported entry, which calls its body with its own buffers and,
/// for a shared body, its own positions after the size slots.
#[allow(clippy::too_many_arguments)]
fn add_kernels<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    p: &Program,
    plan: &Slots,
    sharing: &Sharing,
    which: &[usize],
    target_attributes: &[Attribute],
    enum_attribute: &dyn Fn(&str) -> Attribute,
) -> Result<(), LlvmError> {
    let ptr = context.ptr_type(inkwell::AddressSpace::default());
    let i64t = context.i64_type();
    let body_of = |i: usize| sharing.body.get(i).copied().unwrap_or(i);
    let used_by = |i: usize| match p.kernels.get(i) {
        Some(k) => p.kernel_buffers(k),
        // A microkernel's A panel, B panel, C and scratch tile.
        None => vec![0, 1, 2, 3],
    };
    for &i in which.iter().filter(|&&i| body_of(i) == i) {
        let used = used_by(i);
        let mut params: Vec<inkwell::types::BasicMetadataTypeEnum> = used.iter().map(|_| ptr.into()).collect();
        params.extend::<[inkwell::types::BasicMetadataTypeEnum; 3]>([ptr.into(), i64t.into(), i64t.into()]);
        let body = module.add_function(&format!("{}_body", p.function_name(i)), context.void_type().fn_type(&params, false), Some(Linkage::Internal));
        for &a in target_attributes {
            body.add_attribute(AttributeLoc::Function, a);
        }
        // A body of one entry is inlined into it; a shared one is compiled once.
        body.add_attribute(AttributeLoc::Function, enum_attribute(if sharing.is_shared(i) { "noinline" } else { "alwaysinline" }));
        body.add_attribute(AttributeLoc::Function, enum_attribute("nounwind"));
        for j in 0..used.len() {
            body.add_attribute(AttributeLoc::Param(j as u32), enum_attribute("noalias"));
        }
        let entry = context.append_basic_block(body, "entry");
        let builder = context.create_builder();
        builder.position_at_end(entry);
        let param = |j: usize| body.get_nth_param(j as u32).ok_or(LlvmError::Missing("a kernel parameter is missing"));
        let buffers: HashMap<usize, _> = used.iter().enumerate().map(|(j, &b)| Ok((b, param(j)?.into_pointer_value()))).collect::<Result<_, LlvmError>>()?;
        let mut e = LlvmEmitter {
            context,
            module,
            builder,
            function: body,
            entry,
            buffers,
            sizes: param(used.len())?.into_pointer_value(),
            begin: param(used.len() + 1)?.into_int_value(),
            end: param(used.len() + 2)?.into_int_value(),
            error: None,
        };
        match p.kernels.get(i) {
            Some(k) => lower_kernel(&mut e, p, plan, k, &sharing.parameters[i])?,
            None => {
                let product = p.products.get(i - p.kernels.len()).ok_or(LlvmError::Missing("no such microkernel"))?;
                lower_microkernel(&mut e, &product.micro);
            }
        }
        let r = e.builder.build_return(None);
        e.finish()?;
        r?;
    }
    for &i in which {
        let body = module.get_function(&format!("{}_body", p.function_name(body_of(i)))).ok_or(LlvmError::Missing("a kernel's body is not in its module"))?;
        // The exported entry with the driver's signature.
        let entry_fn = module.add_function(&p.function_name(i), context.void_type().fn_type(&[ptr.into(), ptr.into(), i64t.into(), i64t.into()], false), None);
        for &a in target_attributes {
            entry_fn.add_attribute(AttributeLoc::Function, a);
        }
        entry_fn.add_attribute(AttributeLoc::Function, enum_attribute("nounwind"));
        let block = context.append_basic_block(entry_fn, "entry");
        let b = context.create_builder();
        b.position_at_end(block);
        let param = |j: u32| entry_fn.get_nth_param(j).ok_or(LlvmError::Missing("a kernel parameter is missing"));
        let table = param(0)?.into_pointer_value();
        let used = used_by(i);
        let mut args: Vec<inkwell::values::BasicMetadataValueEnum> = Vec::with_capacity(used.len() + 3);
        for &buffer in &used {
            // SAFETY (of the emitted code): the table has one pointer per buffer.
            let slot = unsafe { b.build_in_bounds_gep(ptr, table, &[i64t.const_int(buffer as u64, false)], "") }?;
            args.push(b.build_load(ptr, slot, "")?.into());
        }
        let sizes = param(1)?.into_pointer_value();
        let positions = sharing.arguments.get(i).map_or(&[][..], Vec::as_slice);
        if positions.is_empty() {
            args.push(sizes.into());
        } else {
            // The driver's values, then this kernel's positions.
            let first = sharing.parameters[body_of(i)].first_slot();
            let own = b.build_array_alloca(i64t, i64t.const_int((first + positions.len()) as u64, false), "sizes")?;
            if first > 0 {
                b.build_memcpy(own, 8, sizes, 8, i64t.const_int(8 * first as u64, false))?;
            }
            for (j, &v) in positions.iter().enumerate() {
                // SAFETY (of the emitted code): the array has `first + positions.len()` values.
                let at = unsafe { b.build_in_bounds_gep(i64t, own, &[i64t.const_int((first + j) as u64, false)], "") }?;
                b.build_store(at, i64t.const_int(v as u64, true))?;
            }
            args.push(own.into());
        }
        args.push(param(2)?.into());
        args.push(param(3)?.into());
        b.build_call(body, &args, "")?;
        b.build_return(None)?;
    }
    Ok(())
}

/// Compiles the kernel programs of a module's functions to one object file
/// or to optimised LLVM IR. Each program's kernels are exported as
/// `<program>_k<i>` and its microkernels as `<program>_m<i>`, with the
/// driver's signature, for `machine` (baseline x86-64 with exactly its
/// features, tuned for its CPU), position-independent.
pub fn emit(programs: &[Program], artifact: Artifact, machine: &Machine) -> Result<Vec<u8>, CodegenError> {
    let name = programs.first().map_or("", |p| p.name.as_str());
    emit_programs(programs, artifact, machine).map_err(|e| e.into_codegen(name))
}

/// [`emit`]'s work.
fn emit_programs(programs: &[Program], artifact: Artifact, machine: &Machine) -> Result<Vec<u8>, LlvmError> {
    let h = &host_for(machine)?;
    let tm = target_machine(h)?;
    let slots: Vec<Slots> = programs.iter().map(Slots::new).collect();
    let sharing: Vec<Sharing> = programs.iter().zip(&slots).map(|(p, s)| Sharing::new(p, s)).collect();
    let all: Vec<Vec<usize>> = programs.iter().map(|p| (0..p.function_count()).collect()).collect();
    let parts: Vec<Part> = programs.iter().zip(&slots).zip(&sharing).zip(&all).map(|(((p, s), sh), which)| (p, s, sh, which.as_slice())).collect();
    let context = Context::create();
    let module = build_module(&context, &parts, h, &tm)?;
    optimise(&module, &tm)?;
    if artifact == Artifact::LibraryObject {
        // After optimisation, which treats them as the C library's, as the JIT's do.
        for name in nax_back_native::LIBM {
            if let Some(f) = module.get_function(name) {
                f.as_global_value().set_name(&format!("nax_libm_{name}"));
            }
        }
    }
    match artifact {
        Artifact::Ir => Ok(module.print_to_string().to_bytes().to_vec()),
        Artifact::Object | Artifact::LibraryObject => {
            tm.write_to_memory_buffer(&module, FileType::Object).map(|b| b.as_slice().to_vec()).map_err(|e| LlvmError::Object(e.to_string()))
        }
    }
}

/// Code JIT-compiled from one module: its execution engine (which owns the
/// code) and the context the module lives in.
struct Code {
    engine: ManuallyDrop<ExecutionEngine<'static>>,
    _context: Box<Context>,
}

// SAFETY: the engine's reference count is not shared: the module's handle
// to it is dropped before a `Code` is made (see `jit`), and no `JitFunction`
// is ever taken. The context moves with its engine and is used by nothing
// else.
unsafe impl Send for Code {}

impl Drop for Code {
    fn drop(&mut self) {
        // SAFETY: the engine is dropped once, here, before its context.
        unsafe { ManuallyDrop::drop(&mut self.engine) }
    }
}

/// Builds and optimises the module of some kernels; gives its bitcode.
fn optimised_bitcode(part: Part<'_>, h: &Host) -> Result<Vec<u8>, LlvmError> {
    let tm = target_machine(h)?;
    let context = Context::create();
    let module = build_module(&context, &[part], h, &tm)?;
    optimise(&module, &tm)?;
    Ok(module.write_bitcode_to_memory().as_slice().to_vec())
}

/// JIT-compiles bitcode of some kernels of `p`; gives the code and each kernel's entry.
fn jit(p: &Program, which: &[usize], bitcode: &[u8]) -> Result<(Code, Vec<(usize, KernelFn)>), LlvmError> {
    let context = Box::new(Context::create());
    // SAFETY: the context is boxed (it does not move) and `Code` drops the
    // engine, and with it the module, before the context.
    let context_ref: &'static Context = unsafe { &*(context.as_ref() as *const Context) };
    let buffer = MemoryBuffer::create_from_memory_range_copy(bitcode, &p.name);
    let module = Module::parse_bitcode_from_buffer(&buffer, context_ref).map_err(|e| LlvmError::Bitcode(e.to_string()))?;
    let engine = module.create_jit_execution_engine(OptimizationLevel::Aggressive).map_err(|e| LlvmError::Jit(e.to_string()))?;
    for name in nax_back_native::LIBM {
        if let (Some(f), Some(address)) = (module.get_function(name), nax_runtime::libm::address(name)) {
            engine.add_global_mapping(&f, address as usize);
        }
    }
    let mut entries = Vec::with_capacity(which.len());
    for &i in which {
        let address = engine.get_function_address(&p.function_name(i)).map_err(|e| LlvmError::Address { index: i, message: format!("{e:?}") })?;
        // SAFETY: the function has the driver's signature (see `add_kernels`).
        entries.push((i, unsafe { std::mem::transmute::<usize, KernelFn>(address) }));
    }
    drop(module);
    Ok((Code { engine: ManuallyDrop::new(engine), _context: context }, entries))
}

/// JIT-compiles a function's kernels (verified) for the host, calling
/// `stage(name)` as each stage ends: the kernels are split into one module
/// per thread of the current pool, each optimised (`codegen`) and then
/// JIT-compiled (`link`) on its own thread. `signature` is the function's,
/// which its calls are checked against.
pub fn compile(p: &Program, signature: Arc<Signature>, stage: &mut dyn FnMut(&'static str)) -> Result<NativeFunction, CodegenError> {
    let slots = Slots::new(p);
    let plan = slots.plan(p)?;
    compile_planned(p, &slots, plan, signature, stage).map_err(|e| e.into_codegen(&p.name))
}

/// [`compile`] once the plan is made.
fn compile_planned(
    p: &Program,
    slots: &Slots,
    plan: NativePlan,
    signature: Arc<Signature>,
    stage: &mut dyn FnMut(&'static str),
) -> Result<NativeFunction, LlvmError> {
    let h = host()?;
    let count = p.function_count();
    let sharing = Sharing::new(p, slots);
    let parts = sharing.parts(count);
    let bitcode = parts.par_iter().map(|which| optimised_bitcode((p, slots, &sharing, which), h)).collect::<Result<Vec<_>, LlvmError>>()?;
    stage("codegen");
    let compiled = parts.par_iter().zip(&bitcode).map(|(which, code)| jit(p, which, code)).collect::<Result<Vec<_>, LlvmError>>()?;
    let mut kernels: Vec<Option<KernelFn>> = vec![None; count];
    let mut code = Vec::with_capacity(compiled.len());
    for (c, entries) in compiled {
        code.push(c);
        for (i, f) in entries {
            kernels[i] = Some(f);
        }
    }
    let kernels = kernels.into_iter().collect::<Option<Vec<_>>>().ok_or(LlvmError::Missing("a kernel was not compiled"))?;
    stage("link");
    // SAFETY: entry `i` is kernel `i` of `p`, compiled with the driver's
    // signature from the same slots the plan was made from, and the
    // entries after them the plan's microkernels, in order; `code` owns
    // the engines that hold the machine code.
    Ok(unsafe { NativeFunction::new(signature, plan, kernels, Box::new(code)) }?)
}
