//! The Cranelift back end (`--backend cranelift`): the fast-compiling JIT
//! fallback. A graph becomes the kernel program of `nax_kernel`; each kernel
//! becomes one Cranelift function through the shared lowering of
//! `nax_back_native` (the emitter is in [`emit`]), compiled for the host
//! CPU at `opt_level=speed` into memory; the runtime's driver calls the
//! functions (`nax_runtime::NativeFunction`). The C math library functions the lowering calls are
//! bound to the Rust implementations `nax_runtime::libm::address` gives.
//! Kernels that differ only in their buffers and constant positions (a
//! written-out loop's turns) share one body, compiled once; each one's
//! function passes it a table of its buffers and its positions
//! ([`nax_back_native::Sharing`]).

mod emit;
mod error;

use cranelift_codegen::ir::{AbiParam, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleError, default_libcall_names};
use emit::{KernelEmitter, kernel_signature, write_entry};
pub use error::CraneliftError;
use nax_back_native::{CodegenError, LIBM, Parameters, Sharing, Slots};
use nax_kernel::Program;
use nax_runtime::{KernelFn, NativeFunction, NativePlan, Signature};
use std::collections::HashMap;
use std::sync::Arc;

/// JIT-compiles a function's kernels (verified) for the host, calling
/// `stage(name)` as each stage ends (`codegen`, `link`). `signature` is
/// the function's, which its calls are checked against.
pub fn compile(program: &Program, signature: Arc<Signature>, stage: &mut dyn FnMut(&'static str)) -> Result<NativeFunction, CodegenError> {
    let slots = Slots::new(program);
    let plan = slots.plan(program)?;
    compile_planned(program, &slots, plan, signature, stage).map_err(|e| e.into_codegen(&program.name))
}

/// [`compile`] once the plan is made.
fn compile_planned(
    program: &Program,
    slots: &Slots,
    plan: NativePlan,
    signature: Arc<Signature>,
    stage: &mut dyn FnMut(&'static str),
) -> Result<NativeFunction, CraneliftError> {
    let mut module = host_module()?;
    let libm = declare_libm(&mut module)?;
    let entry = kernel_signature(&module);
    let mut context = module.make_context();
    let mut builder_context = FunctionBuilderContext::new();
    let sharing = Sharing::new(program, slots);
    // The bodies that kernels share, each compiled once.
    let mut bodies = HashMap::new();
    for (i, kernel) in program.kernels.iter().enumerate().filter(|&(i, _)| sharing.is_shared(i)) {
        let name = format!("body{i}");
        let id = module.declare_function(&name, Linkage::Local, &entry).map_err(CraneliftError::module(format!("declaring {name}")))?;
        module.clear_context(&mut context);
        context.func.signature = entry.clone();
        let mut emitter = KernelEmitter::new(&mut context.func, &mut builder_context, &mut module, &libm, &program.kernel_buffers(kernel), true);
        nax_back_native::lower_kernel(&mut emitter, program, slots, kernel, &sharing.parameters[i])?;
        emitter.finish();
        define(&mut module, id, &mut context, &name)?;
        bodies.insert(i, id);
    }
    let count = program.kernels.len() + program.products.len();
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        let kernel = program.kernels.get(i);
        let name = match kernel {
            Some(_) => format!("kernel{i}"),
            None => format!("microkernel{}", i - program.kernels.len()),
        };
        let id = module.declare_function(&name, Linkage::Local, &entry).map_err(CraneliftError::module(format!("declaring {name}")))?;
        module.clear_context(&mut context);
        context.func.signature = entry.clone();
        let body = sharing.body.get(i).and_then(|b| bodies.get(b).map(|&id| (*b, id)));
        match (kernel, body) {
            (Some(kernel), Some((b, body))) => {
                let positions = &sharing.arguments[i];
                write_entry(
                    &mut context.func,
                    &mut builder_context,
                    &mut module,
                    body,
                    &program.kernel_buffers(kernel),
                    sharing.parameters[b].first_slot(),
                    positions,
                );
            }
            (Some(kernel), None) => {
                let mut emitter = KernelEmitter::new(&mut context.func, &mut builder_context, &mut module, &libm, &program.kernel_buffers(kernel), false);
                nax_back_native::lower_kernel(&mut emitter, program, slots, kernel, &Parameters::default())?;
                emitter.finish();
            }
            (None, _) => {
                let product = program.products.get(i - program.kernels.len()).ok_or(CraneliftError::Missing("no such microkernel"))?;
                // A microkernel's A panel, B panel, C and scratch tile.
                let mut emitter = KernelEmitter::new(&mut context.func, &mut builder_context, &mut module, &libm, &[0, 1, 2, 3], false);
                nax_back_native::lower_microkernel(&mut emitter, &product.micro);
                emitter.finish();
            }
        }
        define(&mut module, id, &mut context, &name)?;
        ids.push(id);
    }
    stage("codegen");
    module.finalize_definitions().map_err(CraneliftError::module("linking the kernels"))?;
    let kernels = ids
        .into_iter()
        .map(|id| {
            let code = module.get_finalized_function(id);
            // SAFETY: the function was compiled with `kernel_signature`,
            // the C signature of `KernelFn`, for this host.
            unsafe { std::mem::transmute::<*const u8, KernelFn>(code) }
        })
        .collect();
    stage("link");
    // SAFETY: entry `i` is kernel `i` of `program`, compiled with the
    // driver's signature from the slots the plan was made from, and the
    // entries after them the plan's microkernels, in order; the module
    // owns the machine code and frees it when dropped.
    Ok(unsafe { NativeFunction::new(signature, plan, kernels, Box::new(JitCode(Some(module)))) }?)
}

/// Compiles the function in `context` as `id`.
fn define(module: &mut JITModule, id: FuncId, context: &mut cranelift_codegen::Context, name: &str) -> Result<(), CraneliftError> {
    module.define_function(id, context).map_err(|e| match e {
        ModuleError::Compilation(error) => {
            CraneliftError::Rejected { name: name.to_string(), report: cranelift_codegen::print_errors::pretty_error(&context.func, error) }
        }
        other => CraneliftError::module(format!("compiling {name}"))(other),
    })
}

/// A JIT module for the host CPU at `opt_level=speed`.
fn host_module() -> Result<JITModule, CraneliftError> {
    let mut flags = settings::builder();
    // Imported functions may lie anywhere in the address space: calls to
    // them need long-range relocations (as `JITBuilder::with_flags` sets).
    // A frame larger than a page (a kernel's scratch tile) touches its
    // pages in order (inline stack probes), so that it meets the thread's
    // guard page rather than stepping over it.
    let settings =
        [("opt_level", "speed"), ("use_colocated_libcalls", "false"), ("is_pic", "false"), ("enable_probestack", "true"), ("probestack_strategy", "inline")];
    for (name, value) in settings {
        flags.set(name, value).map_err(|error| CraneliftError::Setting { name, value, error })?;
    }
    let isa = cranelift_native::builder()
        .map_err(|e| CraneliftError::Host(e.to_string()))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| CraneliftError::Host(e.to_string()))?;
    if isa.pointer_type() != types::I64 {
        return Err(CraneliftError::NotSixtyFourBits(isa.triple().to_string()));
    }
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for name in LIBM {
        let address = nax_runtime::libm::address(name).ok_or(CraneliftError::NoMath(name))?;
        builder.symbol(name, address);
    }
    Ok(JITModule::new(builder))
}

/// Declares the C math library functions the lowering may call, as
/// imports bound to `nax_runtime::libm::address` (see `host_module`).
fn declare_libm(module: &mut JITModule) -> Result<HashMap<&'static str, FuncId>, CraneliftError> {
    LIBM.iter()
        .map(|&name| {
            let mut signature = module.make_signature();
            let arity = if name == "pow" { 2 } else { 1 };
            signature.params.extend(std::iter::repeat_n(AbiParam::new(types::F64), arity));
            signature.returns.push(AbiParam::new(types::F64));
            let id = module.declare_function(name, Linkage::Import, &signature).map_err(CraneliftError::module(format!("declaring {name}")))?;
            Ok((name, id))
        })
        .collect()
}

/// The JIT memory that holds a function's code; always `Some` until
/// dropped, when it is freed.
struct JitCode(Option<JITModule>);

impl Drop for JitCode {
    fn drop(&mut self) {
        if let Some(module) = self.0.take() {
            // SAFETY: the runtime drops the code owner after the function
            // pointers into it (`NativeFunction` keeps it as its last field),
            // and no call is running (a call borrows the function).
            unsafe { module.free_memory() };
        }
    }
}
