//! The MLIR back end (`--backend mlir`). Each kernel of the kernel IR is
//! written by the shared lowering ([`nax_back_native::lower_kernel`])
//! through an MLIR emitter ([`text`]) into a module in nax's dialect
//! (`dialects/nax.irdl.mlir`, loaded at run time from IRDL) and upstream
//! dialects; `nax build --emit mlir` prints that module, parsed and
//! verified. To run, nax's ops are lowered to the LLVM dialect by Rust
//! rewrite patterns ([`lower`]), the upstream dialects by MLIR's own passes
//! (a pipeline given as a string: melior's option-less pass constructors
//! carry other defaults), and MLIR's execution engine ([`engine`], checked)
//! optimises the result at `-O3` for the host and JIT-compiles it.
//!
//! Each kernel is two functions, as in the LLVM back end: `<program>_k<i>_body`,
//! whose buffer arguments are `noalias` (kernels never write a buffer they
//! read), and `<program>_k<i>` with the driver's signature, which loads the
//! buffer pointers from the table and calls the body (inlined at `-O3`);
//! microkernels are `<program>_m<i>`.

mod engine;
mod error;
mod lower;
mod text;

use engine::Engine;
pub use error::MlirError;
use melior::Context;
use melior::dialect::DialectRegistry;
use melior::ir::attribute::AttributeLike;
use melior::ir::operation::OperationLike;
use melior::ir::{BlockLike, Module};
use melior::pass::PassManager;
use melior::{GreedyRewriteDriverConfig, apply_patterns_and_fold_greedily};
use nax_back_native::{CodegenError, LIBM, Parameters, Slots, lower_kernel, lower_microkernel};
use nax_kernel::Program;
use nax_runtime::cuda::{CudaKernel, CudaPlan};
use nax_runtime::{KernelFn, NativeFunction, NativePlan, Signature};
use rayon::prelude::*;
use std::cell::RefCell;
use std::fmt::Write;
use std::rc::Rc;
use std::sync::{Arc, Once};
pub use text::Device;
use text::KernelText;

/// nax's dialect, in IRDL.
pub const DIALECT: &str = include_str!("../../../../dialects/nax.irdl.mlir");

/// The passes from the upstream dialects a kernel uses to the LLVM dialect.
const TO_LLVM: &str =
    "builtin.module(convert-scf-to-cf,convert-vector-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)";

/// A context with every upstream dialect and nax's loaded, and the MLIR
/// diagnostics it reports collected (for error messages).
struct Session {
    context: Context,
    diagnostics: Rc<RefCell<Vec<String>>>,
}

impl Session {
    fn new() -> Session {
        static PASSES: Once = Once::new();
        PASSES.call_once(melior::utility::register_all_passes);
        let registry = DialectRegistry::new();
        melior::utility::register_all_dialects(&registry);
        let context = Context::new();
        context.append_dialect_registry(&registry);
        context.load_all_available_dialects();
        melior::utility::register_all_llvm_translations(&context);
        let diagnostics = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&diagnostics);
        context.attach_diagnostic_handler(move |d| {
            sink.borrow_mut().push(format!("{}: {d}", d.location()));
            true
        });
        Session { context, diagnostics }
    }

    /// The MLIR diagnostics reported so far, one per line.
    fn reported(&self) -> String {
        self.diagnostics.borrow().join("\n")
    }

    /// Parses and verifies a module, nax's dialect loaded from `dialect`
    /// (which must live as long as the module is used).
    fn parse<'c>(&'c self, dialect: &Module<'c>, source: &str) -> Result<Module<'c>, MlirError> {
        if !melior::utility::load_irdl_dialects(dialect) {
            return Err(MlirError::DialectLoad { reported: self.reported() });
        }
        let module = Module::parse(&self.context, source).ok_or_else(|| MlirError::Parse { reported: self.reported() })?;
        if !module.as_operation().verify() {
            return Err(MlirError::Verify { reported: self.reported() });
        }
        Ok(module)
    }

    /// Lowers nax's ops to the LLVM dialect (the rewrite patterns of
    /// [`lower`]), then runs `pipeline` on the module.
    fn lower(&self, module: &mut Module<'_>, pipeline: &str) -> Result<(), MlirError> {
        apply_patterns_and_fold_greedily(module, lower::patterns(&self.context).freeze(), &GreedyRewriteDriverConfig::new())
            .map_err(|error| MlirError::Rewrite { error, reported: self.reported() })?;
        let passes = PassManager::new(&self.context);
        melior::utility::parse_pass_pipeline(passes.as_operation_pass_manager(), pipeline).map_err(MlirError::Pipeline)?;
        passes.run(module).map_err(|error| MlirError::Passes { error, reported: self.reported() })
    }

    fn dialect(&self) -> Result<Module<'_>, MlirError> {
        Module::parse(&self.context, DIALECT).ok_or_else(|| MlirError::DialectParse { reported: self.reported() })
    }
}

/// The MLIR text of some programs' kernels and microkernels, in nax's
/// dialect and upstream dialects, for `device`: on a GPU, one `gpu.module`
/// named after the first program, of one kernel per kernel (programs for
/// a GPU have no microkernels: their contractions are loop nests).
fn module_text(programs: &[Program], device: Device) -> Result<String, MlirError> {
    let all: Vec<Vec<usize>> = programs.iter().map(|p| (0..p.function_count()).collect()).collect();
    let parts: Vec<(&Program, &[usize])> = programs.iter().zip(&all).map(|(p, which)| (p, which.as_slice())).collect();
    part_text(&parts, device)
}

/// [`module_text`] of some functions of some programs (their numbers:
/// kernels, then microkernels).
fn part_text(parts: &[(&Program, &[usize])], device: Device) -> Result<String, MlirError> {
    let mut functions = String::new();
    let mut libm = std::collections::BTreeSet::new();
    let mut unsupported = std::collections::BTreeSet::new();
    for &(p, which) in parts {
        if device != Device::Cpu && !p.products.is_empty() {
            return Err(MlirError::GpuProducts);
        }
        let slots = Slots::new(p);
        for &i in which {
            let kernel = p.kernels.get(i);
            let used = match kernel {
                Some(k) => p.kernel_buffers(k),
                // A microkernel's A panel, B panel, C and scratch tile.
                None => vec![0, 1, 2, 3],
            };
            let mut e = KernelText::new(&used, device, kernel.is_some_and(|k| k.parallel_loop()));
            match kernel {
                Some(k) => lower_kernel(&mut e, p, &slots, k, &Parameters::default())?,
                None => {
                    let product = p.products.get(i - p.kernels.len()).ok_or(MlirError::Missing("no such microkernel"))?;
                    lower_microkernel(&mut e, &product.micro);
                }
            }
            let name = p.function_name(i);
            match device {
                Device::Cpu | Device::Emulated => {
                    functions.push_str(&e.function(&format!("{name}_body")));
                    functions.push_str(&entry(&name, &used));
                }
                Device::Gpu => functions.push_str(&e.function(&name)),
            }
            libm.extend(e.libm.iter().copied());
            unsupported.extend(e.unsupported.iter().copied());
        }
    }
    if !unsupported.is_empty() {
        return Err(MlirError::NoGpuMath { functions: unsupported.iter().map(|n| n.to_string()).collect() });
    }
    if device == Device::Gpu {
        let name = parts.first().map_or("nax", |(p, _)| p.name.as_str());
        return Ok(format!("module attributes {{gpu.container_module}} {{\n  gpu.module @{name} {{\n{functions}  }}\n}}\n"));
    }
    let mut text = String::from("module {\n");
    for name in libm {
        let params = vec!["f64"; if name == "pow" { 2 } else { 1 }].join(", ");
        let _ = writeln!(text, "  func.func private @{name}({params}) -> f64");
    }
    text.push_str(&functions);
    text.push_str("}\n");
    Ok(text)
}

/// The exported entry `name` with the driver's signature: loads each used
/// buffer's pointer from the table and calls the body.
fn entry(name: &str, used: &[usize]) -> String {
    let mut text = format!("  func.func @{name}(%table: !llvm.ptr, %sizes: !llvm.ptr, %begin: i64, %end: i64) {{\n");
    for &b in used {
        let _ = writeln!(text, "    %a{b} = llvm.getelementptr inbounds %table[{b}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr");
        let _ = writeln!(text, "    %b{b} = llvm.load %a{b} : !llvm.ptr -> !llvm.ptr");
    }
    let args: Vec<String> = used.iter().map(|b| format!("%b{b}")).collect();
    let types = vec!["!llvm.ptr"; used.len() + 1].join(", ");
    let _ = writeln!(
        text,
        "    func.call @{name}_body({}%sizes, %begin, %end) : ({types}, i64, i64) -> ()",
        args.iter().map(|a| format!("{a}, ")).collect::<String>()
    );
    text.push_str("    return\n  }\n");
    text
}

/// The MLIR module of some programs' kernels for `device` before
/// lowering, as MLIR prints it after parsing and verifying it (`nax build
/// --emit mlir`).
pub fn emit(programs: &[Program], device: Device) -> Result<String, CodegenError> {
    emit_text(programs, device).map_err(|e| e.into_codegen(first_name(programs)))
}

/// [`emit`]'s work.
fn emit_text(programs: &[Program], device: Device) -> Result<String, MlirError> {
    let session = Session::new();
    let dialect = session.dialect()?;
    let module = session.parse(&dialect, &module_text(programs, device)?)?;
    Ok(module.as_operation().to_string())
}

/// The GPU's pipeline: the NVVM target (`sm_90`, LLVM's `-O3`) attached to
/// the `gpu.module`, its kernels to the NVVM and LLVM dialects, then PTX
/// (`format=isa`: no `ptxas` needed, no libdevice linked).
const TO_PTX: &str = "builtin.module(nvvm-attach-target{chip=sm_90 O=3},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,convert-vector-to-llvm,convert-arith-to-llvm),reconcile-unrealized-casts,gpu-module-to-binary{format=isa})";

/// The PTX of some programs' kernels (formed for [`nax_kernel::Target::CUDA`])
/// for `sm_90`: one `.entry` per kernel, named `<program>_k<i>`, whose
/// parameters are the kernel's buffers (in increasing order), the size
/// slots and the range `begin, end` of its parallel loop (thread `t`
/// computes position `begin + t`).
pub fn ptx(programs: &[Program]) -> Result<String, CodegenError> {
    ptx_text(programs).map_err(|e| e.into_codegen(first_name(programs)))
}

/// The name errors give for some programs: the first's.
fn first_name(programs: &[Program]) -> &str {
    programs.first().map_or("", |p| p.name.as_str())
}

/// [`ptx`]'s work.
fn ptx_text(programs: &[Program]) -> Result<String, MlirError> {
    let session = Session::new();
    let dialect = session.dialect()?;
    let mut module = session.parse(&dialect, &module_text(programs, Device::Gpu)?)?;
    session.lower(&mut module, TO_PTX)?;
    gpu_object(&module).ok_or_else(|| MlirError::NoPtx { reported: session.reported() })
}

/// A function's kernels (formed for [`nax_kernel::Target::CUDA`]) as the
/// runtime's CUDA device runs them: the plan, the PTX ([`ptx`]) and each
/// kernel's entry and buffers, in the order of its parameters.
pub fn cuda(p: &Program) -> Result<CudaPlan, CodegenError> {
    let plan = Slots::new(p).plan(p)?;
    let ptx = ptx(std::slice::from_ref(p))?;
    let kernels = p.kernels.iter().enumerate().map(|(i, k)| CudaKernel { entry: p.function_name(i), buffers: p.kernel_buffers(k) }).collect();
    Ok(CudaPlan { plan, ptx, kernels })
}

/// The assembly of the `gpu.binary` the GPU pipeline leaves in `module`.
fn gpu_object(module: &Module<'_>) -> Option<String> {
    let binary = module.body().first_operation()?;
    let objects = binary.attribute("objects").ok()?;
    // SAFETY: `objects` is an array attribute of the live module, and its
    // first element is checked to be a `#gpu.object` before it is read.
    unsafe {
        let object = mlir_sys::mlirArrayAttrGetElement(objects.to_raw(), 0);
        if !mlir_sys::mlirAttributeIsAGPUObjectAttr(object) {
            return None;
        }
        let text = melior::StringRef::from_raw(mlir_sys::mlirGPUObjectAttrGetObject(object));
        text.as_str().ok().map(str::to_string)
    }
}

/// JIT-compiles a function's kernels (verified) for the host, calling
/// `stage(name)` as each stage ends (`codegen`: the modules built, lowered,
/// optimised and compiled to machine code; `link`: their entries gathered
/// into the function): the kernels are split into one module per thread of
/// the current pool, each with its own MLIR context and engine, compiled
/// on its own thread. `signature` is the
/// function's, which its calls are checked against. With
/// [`Device::Emulated`] (kernels formed for [`nax_kernel::Target::CUDA`])
/// the GPU's kernels run on the CPU, each call of a kernel over `begin..end`
/// one launch of `end - begin` threads.
pub fn compile(p: &Program, device: Device, signature: Arc<Signature>, stage: &mut dyn FnMut(&'static str)) -> Result<NativeFunction, CodegenError> {
    let plan = Slots::new(p).plan(p)?;
    compile_planned(p, device, plan, signature, stage).map_err(|e| e.into_codegen(&p.name))
}

/// [`compile`] once the plan is made.
fn compile_planned(
    p: &Program,
    device: Device,
    plan: NativePlan,
    signature: Arc<Signature>,
    stage: &mut dyn FnMut(&'static str),
) -> Result<NativeFunction, MlirError> {
    if device == Device::Gpu {
        return Err(MlirError::GpuOnHost);
    }
    let count = p.function_count();
    let parts = nax_back_native::per_thread(count);
    let symbols: Vec<(&str, usize)> = LIBM.iter().filter_map(|&name| Some((name, nax_runtime::libm::address(name)? as usize))).collect();
    let compiled = parts.par_iter().map(|which| compile_part(p, which, device, &symbols)).collect::<Result<Vec<_>, MlirError>>()?;
    stage("codegen");
    let mut kernels: Vec<Option<KernelFn>> = vec![None; count];
    let mut engines = Vec::with_capacity(compiled.len());
    for (engine, entries) in compiled {
        for (i, f) in entries {
            kernels[i] = Some(f);
        }
        engines.push(engine);
    }
    let kernels = kernels.into_iter().collect::<Option<Vec<_>>>().ok_or(MlirError::Missing("a kernel was not compiled"))?;
    stage("link");
    // SAFETY: entry `i` is kernel `i` of `p`, compiled with the driver's
    // signature from the slots the plan was made from, and the entries
    // after them the plan's microkernels, in order; the engines own the
    // machine code.
    Ok(unsafe { NativeFunction::new(signature, plan, kernels, Box::new(engines)) }?)
}

/// Some functions of a program in one module of their own context, lowered
/// and JIT-compiled, `symbols` (C name, address) bound: the engine that
/// owns the code, and each function's number and entry.
fn compile_part(p: &Program, which: &[usize], device: Device, symbols: &[(&str, usize)]) -> Result<(Engine, Vec<(usize, KernelFn)>), MlirError> {
    let session = Session::new();
    let dialect = session.dialect()?;
    let mut module = session.parse(&dialect, &part_text(&[(p, which)], device)?)?;
    session.lower(&mut module, TO_LLVM)?;
    let symbols: Vec<(&str, *const u8)> = symbols.iter().map(|&(name, address)| (name, address as *const u8)).collect();
    let engine = Engine::new(&module, &symbols).ok_or_else(|| MlirError::Engine { reported: session.reported() })?;
    // The first lookup compiles, on this thread.
    let entries = which
        .iter()
        .map(|&i| {
            let address = engine.lookup(&p.function_name(i))?;
            // SAFETY: the function has the driver's signature (see `entry`).
            Ok((i, unsafe { std::mem::transmute::<*const u8, KernelFn>(address) }))
        })
        .collect::<Result<Vec<_>, MlirError>>()?;
    Ok((engine, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of one function whose body is `ops`, parsed and verified
    /// with nax's dialect loaded.
    fn check(ops: &str) -> Result<(), MlirError> {
        let session = Session::new();
        let dialect = session.dialect()?;
        let source = format!("module {{\n  func.func @f(%b: !llvm.ptr, %s: !llvm.ptr, %i: i64, %x: f32) {{\n{ops}\n    return\n  }}\n}}");
        session.parse(&dialect, &source).map(|_| ())
    }

    #[test]
    fn the_dialect_accepts_its_ops_and_rejects_malformed_ones() {
        check(
            r#"%v = "nax.load"(%b, %i) : (!llvm.ptr, i64) -> vector<8xf32>
            "nax.store"(%x, %b, %i) : (f32, !llvm.ptr, i64) -> ()
            %n = "nax.size"(%s) {slot = 2 : i64} : (!llvm.ptr) -> i64
            "nax.prefetch"(%b, %i) {element = f32, write = 1 : i32} : (!llvm.ptr, i64) -> ()"#,
        )
        .unwrap();
        for (bad, why) in [
            (r#"%v = "nax.load"(%b, %x) : (!llvm.ptr, f32) -> f32"#, "a float index"),
            (r#"%v = "nax.load"(%i, %i) : (i64, i64) -> f32"#, "an integer base"),
            (r#"%n = "nax.size"(%s) : (!llvm.ptr) -> i64"#, "no slot"),
            (r#"%n = "nax.size"(%s) {slot = 2 : i64} : (!llvm.ptr) -> f32"#, "a float size"),
            (r#""nax.store"(%x, %b) : (f32, !llvm.ptr) -> ()"#, "no index"),
            (r#""nax.prefetch"(%b, %i) {write = 1 : i32} : (!llvm.ptr, i64) -> ()"#, "no element type"),
        ] {
            let err = check(bad).expect_err(why);
            assert!(matches!(err, MlirError::Verify { .. } | MlirError::Parse { .. }), "{why}: {err}");
        }
    }
}
