//! `nax`: the command line (CLI.md): `check`, `run`, `build`, `plan` and `explain`.
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
use nax::emit::{Device, Emit, EmitOptions, Emitted};
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
        emit: EmitName,
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
        /// With --emit so and --shard: build the library split over this
        /// mesh of processes (opened by each rank with NAME_open_sharded).
        #[arg(long, value_name = "AXIS=SIZE,...", requires = "shard")]
        mesh: Option<String>,
        /// With --mesh: which axis names are split over which mesh axis.
        #[arg(long, value_name = "NAME=AXIS,...", requires = "mesh")]
        shard: Option<String>,
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
    /// Print how a function splits over a mesh of processes: each rank's
    /// sizes, its weights' blocks, every collective and its bytes per call.
    /// Runs nothing.
    Plan {
        /// The .nax source file.
        file: PathBuf,
        /// The function to split.
        #[arg(long = "fn", value_name = "NAME")]
        function: String,
        /// The mesh of processes: its axes and their sizes, in order.
        #[arg(long, value_name = "AXIS=SIZE,...")]
        mesh: String,
        /// Which axis names are split over which mesh axis.
        #[arg(long, value_name = "NAME=AXIS,...")]
        shard: String,
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

/// What `nax build --emit` writes: the driver's artifacts, by their names.
#[derive(Clone, Copy, PartialEq, Eq)]
struct EmitName(Emit);

impl ValueEnum for EmitName {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<[EmitName; 8]> = std::sync::LazyLock::new(|| Emit::ALL.map(EmitName));
        &*ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()).help(self.0.about()))
    }
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
        Command::Build { file, emit, out, backend: name, target, cpu, weights, embed_weights, mesh, shard, timings, opt_level, check_bounds } => {
            let machine = match pipeline::Machine::parse(&cpu) {
                Ok(machine) => machine,
                Err(e) => {
                    eprintln!("error: --cpu {cpu}: {e}");
                    return ExitCode::from(2);
                }
            };
            let embedded_weights = match (weights, embed_weights) {
                (Some(w), true) => Some(w),
                (None, true) => {
                    eprintln!("error: --embed-weights needs the file to embed: --weights W.safetensors");
                    return ExitCode::from(2);
                }
                (_, false) => None,
            };
            let split = match (mesh, shard) {
                (Some(mesh), Some(shard)) if emit.0 == Emit::So => match parse_split(&mesh, &shard) {
                    Ok(split) => Some(split),
                    Err(message) => {
                        eprintln!("error: {message}");
                        return ExitCode::from(2);
                    }
                },
                (Some(_), _) | (_, Some(_)) => {
                    eprintln!("error: --mesh and --shard build a library split over processes: they go with --emit so");
                    return ExitCode::from(2);
                }
                (None, None) => None,
            };
            let device = match target {
                Target::Cpu => Device::Cpu,
                Target::Cuda => Device::Cuda,
            };
            let options = EmitOptions {
                emit: emit.0,
                device,
                backend: backend(name),
                build: nax::aot::BuildOptions {
                    machine,
                    optimize: opt_level > 0,
                    check_bounds,
                    embedded_weights,
                    source_name: file.display().to_string(),
                    split,
                },
            };
            build(&file, &out, timings, options)
        }
        Command::Plan { file, function, mesh, shard } => plan(&file, &function, &mesh, &shard),
        Command::Explain { code } => explain(&code),
    }
}

/// The `--mesh` and `--shard` flags' values, or what is wrong with one.
fn parse_split(mesh: &str, shard: &str) -> Result<(nax::Mesh, nax::Sharding), String> {
    let parsed_mesh = nax::Mesh::parse(mesh).map_err(|e| format!("--mesh {mesh}: {e}"))?;
    Ok((parsed_mesh, nax::Sharding::parse(shard).map_err(|e| format!("--shard {shard}: {e}"))?))
}

/// `nax plan`: prints the plan of one function split over a mesh.
fn plan(path: &Path, function: &str, mesh: &str, shard: &str) -> ExitCode {
    let (mesh, sharding) = match parse_split(mesh, shard) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let source = match read_source(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut timings = Timings::start();
    let planned = pipeline::check(&path.display().to_string(), &source, &mut timings)
        .and_then(|module| pipeline::shard(&module, function, &mesh, &sharding, &mut timings));
    match planned {
        Ok(sharded) => {
            print!("{}", sharded.plan_text());
            ExitCode::SUCCESS
        }
        Err(nax::Error::Diagnostics { rendered, .. }) => {
            eprint!("{rendered}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
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
        Err(run::RunError::Compile(nax::Error::Diagnostics { rendered, .. })) => {
            eprint!("{rendered}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Compiles `path` into what `options` names, written at `out`.
fn build(path: &Path, out: &Path, show_timings: bool, options: EmitOptions) -> ExitCode {
    if let Err(e) = options.check(out) {
        eprintln!("error: {e}");
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
    let mut timings = Timings::start();
    let emitted = pipeline::check(&options.build.source_name, &source, &mut timings).and_then(|module| nax::emit::emit(&module, &options, out, &mut timings));
    if show_timings {
        eprint!("{}", timings.report(options.backend.name()));
    }
    let bytes = match emitted {
        Ok(Emitted::Library) => return ExitCode::SUCCESS,
        Ok(Emitted::Bytes(bytes)) => bytes,
        Err(nax::Error::Diagnostics { rendered, .. }) => {
            eprint!("{rendered}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    match output::write(out, &bytes) {
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
