//! `nax`: the command line (CLI.md): `check`, `run`, `build` and `explain`.
//!
//! Exit codes: 0 success, 1 when the program has an error, 2 for a usage or
//! I/O problem (clap's own usage errors exit 2 as well).

/// mimalloc keeps freed pages for reuse, so a tensor freed after one call
/// backs the next call's output without fresh, kernel-zeroed pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod output;
mod report;
mod run;

use clap::{Parser, Subcommand, ValueEnum};
use nax::Timings;
use nax::pipeline::{self, Backend};
use nax_front::Code;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "nax", version, about = "An optimizing compiler for tensor programs with named axes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check a file: exit 0 when it has no error, 1 when it has one.
    Check {
        /// The .nax source file.
        file: PathBuf,
        /// How to print diagnostics (and, with --types, the types).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Print every function's signature and each binding's type, sizes and range.
        #[arg(long)]
        types: bool,
    },
    /// Compile one function and run it on tensors from safetensors files.
    Run {
        /// The .nax source file.
        file: PathBuf,
        /// The function to run.
        #[arg(long = "fn", value_name = "NAME")]
        function: String,
        /// The function's tensor arguments, by parameter name.
        #[arg(long, value_name = "IN.safetensors")]
        inputs: Option<PathBuf>,
        /// The module's weights (`param`s), by name.
        #[arg(long, value_name = "W.safetensors")]
        weights: Option<PathBuf>,
        /// A host scalar argument: NAME=VALUE (true/false, an integer or a float).
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
        /// Where the result is written, as the tensor `out`.
        #[arg(long, value_name = "OUT.safetensors")]
        out: PathBuf,
        /// The CPU's code generator (with `--target cuda` the kernels are
        /// PTX made through MLIR, whichever is named).
        #[arg(long, value_enum, default_value_t = BackendName::Llvm)]
        backend: BackendName,
        /// Where the kernels run: this machine's CPU, or its NVIDIA GPU.
        #[arg(long, value_enum, default_value_t = Target::Cpu)]
        target: Target,
        /// Print the time of each stage to stderr.
        #[arg(long)]
        timings: bool,
        /// Optimization level: 0 skips the graph rewriting (egg), 1 runs it.
        #[arg(short = 'O', default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
        opt_level: u8,
        /// Check every load and store of every kernel against its buffer
        /// while the call runs: an access outside fails the call (slower;
        /// for finding bugs of nax; CPU back ends).
        #[arg(long)]
        check_bounds: bool,
    },
    /// Compile ahead of time and write what --emit names.
    Build {
        /// The .nax source file.
        file: PathBuf,
        #[arg(long, value_enum)]
        emit: Emit,
        /// The output file.
        #[arg(short = 'o', value_name = "OUT")]
        out: PathBuf,
        #[arg(long, value_enum, default_value_t = BackendName::Llvm)]
        backend: BackendName,
        #[arg(long, value_enum, default_value_t = Target::Cpu)]
        target: Target,
        /// The CPU to compile for: this machine's (`native`, with every
        /// vector extension it has), any x86-64 (`generic`), or a named one
        /// (x86-64-v2/v3/v4, haswell, skylake, skylake-avx512, cascadelake,
        /// icelake-server, sapphirerapids, znver2..znver5).
        #[arg(long, default_value = "native")]
        cpu: String,
        /// With --emit so: a safetensors file of the weights to embed (with
        /// --embed-weights).
        #[arg(long)]
        weights: Option<PathBuf>,
        /// With --emit so: embed the --weights file in the library, read in
        /// place by NAME_open(NULL, ...).
        #[arg(long)]
        embed_weights: bool,
        /// Print the time of each stage to stderr.
        #[arg(long)]
        timings: bool,
        /// Optimization level: 0 skips the graph rewriting (egg), 1 runs it.
        #[arg(short = 'O', default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
        opt_level: u8,
        /// Compile every load and store with a bounds check (see `nax run --check-bounds`).
        #[arg(long)]
        check_bounds: bool,
    },
    /// Print the long explanation of an error code, with an example.
    Explain {
        /// A code such as E0404.
        code: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// The back ends of CLI.md; LLVM is the default.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendName {
    Llvm,
    Mlir,
    Cranelift,
    Interp,
}

/// What `nax build --emit` writes.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Emit {
    So,
    Obj,
    LlvmIr,
    Mlir,
    Ptx,
    Graph,
    /// The kernel IR (loop nests), after kernel formation.
    Kernels,
    Torch,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    Cpu,
    Cuda,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { file, format, types } => check(&file, format, types),
        Command::Run { file, function, inputs, weights, args, out, backend: name, timings, opt_level, target, check_bounds } => {
            let req = run::RunRequest { file, function, inputs, weights, args, out, optimize: opt_level > 0, check_bounds };
            // On a GPU, the kernels are PTX made through MLIR, whatever CPU back end `--backend` names.
            let backend = match target {
                Target::Cpu => backend(name),
                Target::Cuda => Backend::Cuda,
            };
            run_command(&req, backend, timings)
        }
        Command::Build { file, emit, out, backend, target, cpu, weights, embed_weights, timings, opt_level, check_bounds } => {
            let machine = match pipeline::Machine::parse(&cpu) {
                Ok(machine) => machine,
                Err(e) => {
                    eprintln!("error: --cpu {cpu}: {e}");
                    return ExitCode::from(2);
                }
            };
            let embedded = match (weights, embed_weights) {
                (Some(w), true) => Some(w),
                (None, true) => {
                    eprintln!("error: --embed-weights needs the file to embed: --weights W.safetensors");
                    return ExitCode::from(2);
                }
                (_, false) => None,
            };
            build(&file, &out, backend, timings, Options { emit, optimize: opt_level > 0, machine, device: target, embedded_weights: embedded, check_bounds })
        }
        Command::Explain { code } => explain(&code),
    }
}

/// The back end `--backend` names.
fn backend(name: BackendName) -> Backend {
    match name {
        BackendName::Interp => Backend::Interp,
        BackendName::Llvm => Backend::Llvm,
        BackendName::Cranelift => Backend::Cranelift,
        BackendName::Mlir => Backend::Mlir,
    }
}

fn run_command(req: &run::RunRequest, backend: Backend, show_timings: bool) -> ExitCode {
    let out = match output::target(&req.out) {
        Ok(out) => out,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let req = &run::RunRequest { out, ..req.clone() };
    if let Some(message) = run::out_overwrites_an_input(req) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let source = match read_source(&req.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut timings = Timings::start();
    let result = run::run(req, &source, backend, &mut timings);
    if show_timings {
        eprint!("{}", timings.report(backend.name()));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(run::Failure::Diagnostics(rendered)) => {
            eprint!("{rendered}");
            ExitCode::from(1)
        }
        Err(run::Failure::Message(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// What `nax build` was asked to write, and how.
#[derive(Clone)]
struct Options {
    emit: Emit,
    optimize: bool,
    /// `--cpu`.
    machine: pipeline::Machine,
    /// `--target`.
    device: Target,
    /// `--weights` with `--embed-weights`.
    embedded_weights: Option<PathBuf>,
    /// `--check-bounds`.
    check_bounds: bool,
}

impl Options {
    /// The machine kernels are formed for: the GPU of `--target cuda`, or
    /// the LLVM back end's view of `--cpu`.
    fn machine(&self) -> pipeline::Machine {
        match self.device {
            Target::Cuda => Backend::Cuda.machine(self.machine),
            Target::Cpu => Backend::Llvm.machine(self.machine),
        }
    }

    /// How kernels are formed besides.
    fn form(&self) -> pipeline::FormOptions {
        pipeline::FormOptions { check_bounds: self.check_bounds }
    }
}

/// The graph of one function as lowered and as rewritten, with the
/// optimizer's report and the kernels' estimates, as `--emit graph` prints it.
fn annotated_graph(module: &nax_front::CheckedModule, function: &str, options: &Options, timings: &mut Timings) -> Result<String, nax::Error> {
    use std::fmt::Write;
    let lowered = pipeline::lower(module, function, options.optimize, timings)?;
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
    let program = pipeline::kernels(lowered.graph(), &options.machine(), options.form())?;
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

fn human(v: f64, unit: &str) -> String {
    let prefixes = [("G", 1e9), ("M", 1e6), ("k", 1e3)];
    match prefixes.iter().find(|(_, scale)| v >= *scale) {
        Some((p, scale)) => format!("{:.2} {p}{unit}", v / scale),
        None => format!("{v} {unit}"),
    }
}

/// What `--emit` writes for every function of the module.
fn emitted(module: &nax_front::CheckedModule, options: &Options, timings: &mut Timings) -> Result<Vec<u8>, nax::Error> {
    let names: Vec<&str> = module.functions.iter().map(|f| f.name.as_str()).collect();
    let (emit, optimize, machine) = (options.emit, options.optimize, options.machine());
    Ok(match emit {
        Emit::Graph => names.iter().map(|f| annotated_graph(module, f, options, timings)).collect::<Result<String, _>>()?.into_bytes(),
        Emit::Kernels => {
            let mut text = String::new();
            for f in names {
                let lowered = pipeline::lower(module, f, optimize, timings)?;
                text.push_str(&nax_kernel::text::print(&pipeline::kernels(lowered.graph(), &machine, options.form())?));
            }
            text.into_bytes()
        }
        Emit::Torch => nax_back_torch::emit_module(module).map_err(|e| nax::Error::Compile { stage: "emit", error: e.into() })?.into_bytes(),
        _ => {
            let programs = names
                .iter()
                .map(|f| pipeline::lower(module, f, optimize, timings).and_then(|l| pipeline::kernels(l.graph(), &machine, options.form())))
                .collect::<Result<Vec<_>, _>>()?;
            let failed = |e: nax_back_native::CodegenError| nax::Error::Compile { stage: "codegen", error: e.into() };
            match (emit, options.device) {
                (Emit::Mlir, Target::Cpu) => return nax_back_mlir::emit(&programs, nax_back_mlir::Device::Cpu).map(String::into_bytes).map_err(failed),
                (Emit::Mlir, Target::Cuda) => return nax_back_mlir::emit(&programs, nax_back_mlir::Device::Gpu).map(String::into_bytes).map_err(failed),
                (Emit::Ptx, _) => return nax_back_mlir::ptx(&programs).map(String::into_bytes).map_err(failed),
                _ => {}
            }
            let artifact = if emit == Emit::Obj { nax_back_llvm::Artifact::Object } else { nax_back_llvm::Artifact::Ir };
            nax_back_llvm::emit(&programs, artifact, &machine).map_err(failed)?
        }
    })
}

fn build(path: &Path, out: &Path, name: BackendName, show_timings: bool, options: Options) -> ExitCode {
    let (emit, target) = (options.emit, options.device);
    if emit == Emit::So
        && let Err(message) = nax::aot::library_name(out)
    {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let out = match output::target(out) {
        Ok(out) => out,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let out = out.as_path();
    let source = match read_source(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let backend = backend(name);
    match (emit, target) {
        (Emit::Graph | Emit::Kernels | Emit::Torch | Emit::Mlir, _) => {}
        (Emit::Ptx, Target::Cuda) => {}
        (Emit::Ptx, Target::Cpu) => {
            eprintln!("error: --emit ptx is GPU code: add --target cuda");
            return ExitCode::from(2);
        }
        (Emit::Obj | Emit::LlvmIr | Emit::So, Target::Cuda) => {
            eprintln!("error: --emit so, obj and llvm-ir are CPU code; for --target cuda, --emit ptx (or mlir) writes the kernels");
            return ExitCode::from(2);
        }
        (Emit::Obj | Emit::LlvmIr | Emit::So, Target::Cpu) if backend == Backend::Llvm => {}
        (Emit::Obj | Emit::LlvmIr | Emit::So, Target::Cpu) => {
            eprintln!("error: --emit so, obj and llvm-ir come from the llvm back end (--backend llvm)");
            return ExitCode::from(2);
        }
    }
    let mut timings = Timings::start();
    if emit == Emit::So {
        let library = nax::aot::LibraryOptions {
            machine: options.machine,
            optimize: options.optimize,
            check_bounds: options.check_bounds,
            embedded_weights: options.embedded_weights.clone(),
            source_name: path.display().to_string(),
        };
        let built = pipeline::check(&path.display().to_string(), &source, &mut timings)
            .and_then(|module| nax::aot::build_library(&module, out, &library, &mut timings));
        if show_timings {
            eprint!("{}", timings.report(backend.name()));
        }
        return match built {
            Ok(()) => ExitCode::SUCCESS,
            Err(nax::Error::Diagnostics { rendered, .. }) => {
                eprint!("{rendered}");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    let text = match pipeline::check(&path.display().to_string(), &source, &mut timings).and_then(|module| emitted(&module, &options, &mut timings)) {
        Ok(text) => text,
        Err(nax::Error::Diagnostics { rendered, .. }) => {
            eprint!("{rendered}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    timings.mark(match emit {
        Emit::Graph => "lower",
        Emit::Kernels => "kernels",
        Emit::Obj | Emit::LlvmIr | Emit::Mlir | Emit::Ptx => "codegen",
        _ => "emit",
    });
    if show_timings {
        eprint!("{}", timings.report(backend.name()));
    }
    match output::write(out, &text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write `{}`: {e}", out.display());
            ExitCode::from(2)
        }
    }
}

/// The largest source file nax reads: a model's source is kilobytes, and a
/// file this large is a mistake (a device, a data file).
const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Reads a source file, or says why not (exit 2): a regular file of at
/// most [`MAX_SOURCE_BYTES`], in UTF-8.
fn read_source(path: &Path) -> Result<String, ExitCode> {
    use std::io::Read;
    let fail = |message: String| {
        eprintln!("error: {message}");
        ExitCode::from(2)
    };
    let cannot = |e: std::io::Error| fail(format!("cannot read `{}`: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(fail(format!("`{}` is not a regular file (a source is read from a file)", path.display())));
    }
    let too_large = || fail(format!("`{}` is larger than {} MiB, more than any source nax reads", path.display(), MAX_SOURCE_BYTES >> 20));
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    // A file that grows while it is read stops at the cap all the same.
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| fail(format!("`{}` is not UTF-8 text (invalid byte at offset {})", path.display(), e.utf8_error().valid_up_to())))
}

fn check(path: &Path, format: Format, types: bool) -> ExitCode {
    let source = match read_source(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let checked = nax_front::check_source(&source);
    match format {
        Format::Json => output::print(&format!("{}\n", report::json(&source, &checked))),
        Format::Text => {
            let name = path.display().to_string();
            eprint!("{}", nax_front::diagnostics::render_text(&name, &source, &checked.diagnostics));
            if types {
                output::print(&report::types_text(&source, &checked));
            }
        }
    }
    if checked.has_errors() { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

fn explain(code: &str) -> ExitCode {
    match Code::parse(code) {
        Some(c) => {
            output::print(c.explanation());
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("error: `{code}` is not a nax error code; codes look like E0404 or W0601");
            ExitCode::from(2)
        }
    }
}
