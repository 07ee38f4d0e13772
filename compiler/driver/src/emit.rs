//! Every artifact a module can be compiled into (`nax build --emit`): the
//! graph as lowered and rewritten, the kernel IR, PyTorch code, MLIR, PTX,
//! LLVM IR, an object file, or an AOT shared library with its header. The
//! rules of what goes with what (PTX is GPU code, objects and libraries
//! CPU code from the LLVM back end) live here, in one place; the CLI parses
//! flags into an [`EmitOptions`], calls [`emit`] and writes or reports.

use crate::aot;
use crate::error::Error;
pub use crate::error::Unsupported;
use crate::pipeline::{self, Backend, FormOptions, Machine};
use crate::timings::Timings;
use nax_front::CheckedModule;
use std::path::Path;

/// An artifact (each variant's [`Emit::about`] says what it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    So,
    Obj,
    LlvmIr,
    Mlir,
    Ptx,
    Graph,
    Kernels,
    Torch,
}

impl Emit {
    /// Every artifact.
    pub const ALL: [Emit; 8] = [Emit::So, Emit::Obj, Emit::LlvmIr, Emit::Mlir, Emit::Ptx, Emit::Graph, Emit::Kernels, Emit::Torch];

    /// What it is, in a line (`nax build --help` shows it).
    pub fn about(self) -> &'static str {
        match self {
            Emit::So => "An AOT shared library libNAME.so and its header NAME.h (the C ABI)",
            Emit::Obj => "An object file of the kernels, calling the C library's math",
            Emit::LlvmIr => "The kernels' optimised LLVM IR",
            Emit::Mlir => "The kernels in MLIR (nax's dialect and upstream dialects)",
            Emit::Ptx => "The kernels as PTX for an NVIDIA GPU (with --target cuda)",
            Emit::Graph => "Each function's graph as lowered and as rewritten, with the optimizer's report and each kernel's bytes and FLOPs",
            Emit::Kernels => "The kernel IR (loop nests), after kernel formation",
            Emit::Torch => "The module as a PyTorch program",
        }
    }

    /// Its name as `--emit` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Emit::So => "so",
            Emit::Obj => "obj",
            Emit::LlvmIr => "llvm-ir",
            Emit::Mlir => "mlir",
            Emit::Ptx => "ptx",
            Emit::Graph => "graph",
            Emit::Kernels => "kernels",
            Emit::Torch => "torch",
        }
    }
}

/// Where the kernels run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The CPU ([`EmitOptions::machine`]).
    #[default]
    Cpu,
    /// An NVIDIA GPU ([`Machine::CUDA`]).
    Cuda,
}

/// What to emit, for what, and how.
#[derive(Clone, Debug)]
pub struct EmitOptions {
    /// The artifact.
    pub emit: Emit,
    /// Where its kernels run.
    pub device: Device,
    /// The CPU's code generator (objects, LLVM IR and libraries come from LLVM's).
    pub backend: Backend,
    /// The CPU, `-O`, `--check-bounds`, the weights a library embeds, the source's name.
    pub build: aot::BuildOptions,
}

/// What [`emit`] made.
#[derive(Debug, PartialEq, Eq)]
pub enum Emitted {
    /// The artifact's bytes, for the caller to write where it asked.
    Bytes(Vec<u8>),
    /// A library and its header, written at the output path.
    Library,
}

impl EmitOptions {
    /// Whether the artifact can be made as asked, written to `out`.
    pub fn check(&self, out: &Path) -> Result<(), Unsupported> {
        match (self.emit, self.device) {
            (Emit::Graph | Emit::Kernels | Emit::Torch | Emit::Mlir, _) | (Emit::Ptx, Device::Cuda) => Ok(()),
            (Emit::Ptx, Device::Cpu) => Err(Unsupported::PtxForCpu),
            (Emit::Obj | Emit::LlvmIr | Emit::So, Device::Cuda) => Err(Unsupported::CpuCodeForGpu),
            (Emit::Obj | Emit::LlvmIr | Emit::So, Device::Cpu) if self.backend != Backend::Llvm => Err(Unsupported::NotLlvm),
            (Emit::So, Device::Cpu) => aot::library_name(out).map(drop).map_err(Unsupported::LibraryName),
            (Emit::Obj | Emit::LlvmIr, Device::Cpu) => Ok(()),
        }
    }

    /// The machine kernels are formed for: the GPU, or the LLVM back end's
    /// view of the CPU (whichever back end is named: the artifacts that
    /// show kernels show the ones the default back end compiles).
    fn kernel_machine(&self) -> Machine {
        match self.device {
            Device::Cuda => Backend::Cuda.machine(self.build.machine),
            Device::Cpu => Backend::Llvm.machine(self.build.machine),
        }
    }

    fn form(&self) -> FormOptions {
        FormOptions { check_bounds: self.build.check_bounds }
    }
}

/// Makes the artifact of every function of `module` (a library is written
/// at `out`, with its header beside it; other artifacts are returned).
/// Records each stage's time.
pub fn emit(module: &CheckedModule, options: &EmitOptions, out: &Path, timings: &mut Timings) -> Result<Emitted, Error> {
    options.check(out).map_err(Error::Unsupported)?;
    if options.emit == Emit::So {
        aot::build_library(module, out, &options.build, timings)?;
        return Ok(Emitted::Library);
    }
    let bytes = artifact(module, options, timings)?;
    timings.mark(match options.emit {
        Emit::Graph => "lower",
        Emit::Kernels => "kernels",
        Emit::Obj | Emit::LlvmIr | Emit::Mlir | Emit::Ptx => "codegen",
        Emit::So | Emit::Torch => "emit",
    });
    Ok(Emitted::Bytes(bytes))
}

/// The bytes of an artifact other than a library.
fn artifact(module: &CheckedModule, options: &EmitOptions, timings: &mut Timings) -> Result<Vec<u8>, Error> {
    let names: Vec<&str> = module.functions.iter().map(|f| f.name.as_str()).collect();
    let machine = options.kernel_machine();
    let kernels = |name: &str, timings: &mut Timings| {
        pipeline::lower(module, name, options.build.optimize, timings).and_then(|l| pipeline::kernels(l.graph(), &machine, options.form()))
    };
    let failed = |e: nax_back_native::CodegenError| Error::Compile { stage: "codegen", error: e.into() };
    Ok(match options.emit {
        Emit::Graph => names.iter().map(|f| annotated_graph(module, f, options, timings)).collect::<Result<String, _>>()?.into_bytes(),
        Emit::Kernels => {
            let mut text = String::new();
            for f in names {
                text.push_str(&nax_kernel::text::print(&kernels(f, timings)?));
            }
            text.into_bytes()
        }
        Emit::Torch => nax_back_torch::emit_module(module).map_err(|e| Error::Compile { stage: "emit", error: e.into() })?.into_bytes(),
        Emit::Mlir | Emit::Ptx | Emit::Obj | Emit::LlvmIr | Emit::So => {
            let programs = names.iter().map(|f| kernels(f, timings)).collect::<Result<Vec<_>, _>>()?;
            match (options.emit, options.device) {
                (Emit::Mlir, Device::Cpu) => nax_back_mlir::emit(&programs, nax_back_mlir::Device::Cpu).map(String::into_bytes).map_err(failed)?,
                (Emit::Mlir, Device::Cuda) => nax_back_mlir::emit(&programs, nax_back_mlir::Device::Gpu).map(String::into_bytes).map_err(failed)?,
                (Emit::Ptx, _) => nax_back_mlir::ptx(&programs).map(String::into_bytes).map_err(failed)?,
                _ => {
                    let artifact = if options.emit == Emit::Obj { nax_back_llvm::Artifact::Object } else { nax_back_llvm::Artifact::Ir };
                    nax_back_llvm::emit(&programs, artifact, &machine).map_err(failed)?
                }
            }
        }
    })
}

/// The graph of one function as lowered and as rewritten, with the
/// optimizer's report and the kernels' estimates.
fn annotated_graph(module: &CheckedModule, function: &str, options: &EmitOptions, timings: &mut Timings) -> Result<String, Error> {
    use std::fmt::Write;
    let lowered = pipeline::lower(module, function, options.build.optimize, timings)?;
    let mut text = format!("# `{function}` as lowered\n{}", nax_ir::text::print(&lowered.lowered));
    match &lowered.rewritten {
        Some((rewritten, report)) => {
            let _ = writeln!(text, "# `{function}` rewritten");
            for line in report.lines() {
                let _ = writeln!(text, "# {line}");
            }
            text.push_str(&nax_ir::text::print(rewritten));
        }
        None => {
            let _ = writeln!(text, "# rewriting is off (-O0)");
        }
    }
    let program = pipeline::kernels(lowered.graph(), &options.kernel_machine(), options.form())?;
    let _ = writeln!(text, "# kernels: {}", program.kernels.len());
    for (i, k) in program.kernels.iter().enumerate() {
        let e = program.estimate(k);
        let cost = match (e.bytes, e.flops) {
            (Some(b), Some(f)) => format!("{} moved, {}", human(b as f64, "B"), human(f as f64, "FLOP")),
            _ => "bytes and FLOPs depend on run-time sizes".to_string(),
        };
        let _ = writeln!(text, "#   k{i} -> %{}: {cost}", k.output);
    }
    Ok(text)
}

/// `v` with a decimal prefix: `1.50 MB`.
fn human(v: f64, unit: &str) -> String {
    let prefixes = [("G", 1e9), ("M", 1e6), ("k", 1e3)];
    match prefixes.iter().find(|(_, scale)| v >= *scale) {
        Some((p, scale)) => format!("{:.2} {p}{unit}", v / scale),
        None => format!("{v} {unit}"),
    }
}
