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
mod lower;
mod text;

use engine::Engine;
use melior::Context;
use melior::dialect::DialectRegistry;
use melior::ir::Module;
use melior::ir::operation::OperationLike;
use melior::pass::PassManager;
use melior::{GreedyRewriteDriverConfig, apply_patterns_and_fold_greedily};
use nax_back_native::{LIBM, Slots, lower_kernel, lower_microkernel};
use nax_kernel::Program;
use nax_runtime::{KernelFn, NativeFunction, Signature};
use std::cell::RefCell;
use std::fmt::Write;
use std::rc::Rc;
use std::sync::{Arc, Once};
use text::KernelText;

/// nax's dialect, in IRDL.
pub const DIALECT: &str = include_str!("../../../../dialects/nax.irdl.mlir");

/// The passes from the upstream dialects a kernel uses to the LLVM dialect.
const TO_LLVM: &str = "builtin.module(convert-scf-to-cf,convert-vector-to-llvm,convert-math-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)";

/// A context with every upstream dialect and nax's loaded, and the MLIR
/// diagnostics it reports collected (for error messages).
struct Session {
    context: Context,
    diagnostics: Rc<RefCell<Vec<String>>>,
}

impl Session {
    fn new() -> Result<Session, String> {
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
        Ok(Session { context, diagnostics })
    }

    /// The MLIR diagnostics reported so far, one per line.
    fn reported(&self) -> String {
        self.diagnostics.borrow().join("\n")
    }

    /// Parses and verifies a module, nax's dialect loaded from `dialect`
    /// (which must live as long as the module is used).
    fn parse<'c>(&'c self, dialect: &Module<'c>, source: &str) -> Result<Module<'c>, String> {
        if !melior::utility::load_irdl_dialects(dialect) {
            return Err(format!("internal error: nax's IRDL dialect does not load: {}", self.reported()));
        }
        let module =
            Module::parse(&self.context, source).ok_or_else(|| format!("internal error: the MLIR of the kernels does not parse: {}", self.reported()))?;
        if !module.as_operation().verify() {
            return Err(format!("internal error: the MLIR of the kernels does not verify: {}", self.reported()));
        }
        Ok(module)
    }

    fn dialect(&self) -> Result<Module<'_>, String> {
        Module::parse(&self.context, DIALECT).ok_or_else(|| format!("internal error: nax's IRDL dialect does not parse: {}", self.reported()))
    }
}

/// The exported name of function `i` of a program: its kernels, then its
/// microkernels.
fn function_name(p: &Program, i: usize) -> String {
    match i.checked_sub(p.kernels.len()) {
        None => format!("{}_k{i}", p.name),
        Some(m) => format!("{}_m{m}", p.name),
    }
}

/// The MLIR text of some programs' kernels and microkernels, in nax's
/// dialect and upstream dialects.
fn module_text(programs: &[Program]) -> Result<String, String> {
    let mut functions = String::new();
    let mut libm = std::collections::BTreeSet::new();
    for p in programs {
        let slots = Slots::new(p);
        for i in 0..p.kernels.len() + p.products.len() {
            let kernel = p.kernels.get(i);
            let used = match kernel {
                Some(k) => k.buffers(),
                // A microkernel's A panel, B panel, C and scratch tile.
                None => vec![0, 1, 2, 3],
            };
            let mut e = KernelText::new(&used);
            match kernel {
                Some(k) => lower_kernel(&mut e, p, &slots, k),
                None => {
                    let product = p.products.get(i - p.kernels.len()).ok_or("internal error: no such microkernel")?;
                    lower_microkernel(&mut e, &product.micro);
                }
            }
            let name = function_name(p, i);
            functions.push_str(&e.function(&format!("{name}_body")));
            functions.push_str(&entry(&name, &used));
            libm.extend(e.libm.iter().copied());
        }
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

/// The MLIR module of some programs' kernels before lowering, as MLIR
/// prints it after parsing and verifying it (`nax build --emit mlir`).
pub fn emit(programs: &[Program]) -> Result<String, String> {
    let session = Session::new()?;
    let dialect = session.dialect()?;
    let module = session.parse(&dialect, &module_text(programs)?)?;
    Ok(module.as_operation().to_string())
}

/// JIT-compiles a function's kernels (verified) for the host, calling
/// `stage(name)` as each stage ends (`codegen`: the module built, lowered
/// and optimised; `link`: the machine code). `signature` is the
/// function's, which its calls are checked against.
pub fn compile(p: &Program, signature: Arc<Signature>, stage: &mut dyn FnMut(&'static str)) -> Result<NativeFunction, String> {
    let slots = Slots::new(p);
    let plan = slots.plan(p)?;
    let session = Session::new()?;
    let dialect = session.dialect()?;
    let mut module = session.parse(&dialect, &module_text(std::slice::from_ref(p))?)?;
    apply_patterns_and_fold_greedily(&module, lower::patterns(&session.context).freeze(), &GreedyRewriteDriverConfig::new())
        .map_err(|e| format!("internal error: lowering nax's dialect: {e}: {}", session.reported()))?;
    let passes = PassManager::new(&session.context);
    melior::utility::parse_pass_pipeline(passes.as_operation_pass_manager(), TO_LLVM).map_err(|e| format!("internal error: the MLIR pipeline: {e}"))?;
    passes.run(&mut module).map_err(|e| format!("internal error: lowering to the LLVM dialect: {e}: {}", session.reported()))?;
    stage("codegen");
    let symbols: Vec<(&str, *const u8)> = LIBM.iter().filter_map(|&name| Some((name, nax_runtime::libm::address(name)?))).collect();
    let engine = Engine::new(&module, &symbols).map_err(|e| format!("{e}: {}", session.reported()))?;
    let kernels = (0..p.kernels.len() + p.products.len())
        .map(|i| {
            let address = engine.lookup(&function_name(p, i))?;
            // SAFETY: the function has the driver's signature (see `entry`).
            Ok(unsafe { std::mem::transmute::<*const u8, KernelFn>(address) })
        })
        .collect::<Result<Vec<_>, String>>()?;
    stage("link");
    // SAFETY: entry `i` is kernel `i` of `p`, compiled with the driver's
    // signature from the slots the plan was made from, and the entries
    // after them the plan's microkernels, in order; the engine owns the
    // machine code.
    unsafe { NativeFunction::new(signature, plan, kernels, Box::new(engine)) }.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of one function whose body is `ops`, parsed and verified
    /// with nax's dialect loaded.
    fn check(ops: &str) -> Result<(), String> {
        let session = Session::new()?;
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
            assert!(err.contains("does not verify") || err.contains("does not parse"), "{why}: {err}");
        }
    }
}
