//! `nax build --emit so`: a program compiled ahead of time into a shared
//! library with the C ABI of ABI.md. Every function of the module is
//! lowered, rewritten and formed into kernels for the chosen CPU, and the
//! LLVM back end compiles them all into one position-independent object
//! (math calls bound to the library's own `nax_libm_*`); their signatures
//! and plans become JSON in the library's read-only data; the C glue and
//! header are generated ([`c`]); and the system's C compiler links them
//! with the C ABI's static archive (the runtime, `runtime/capi`, embedded
//! in nax at build time) under a version script that exports only the
//! `NAME_` entries.

mod c;
mod manifest;

use crate::error::{Error, StageError};
use crate::pipeline::{self, Backend, FormOptions, Machine};
use crate::timings::Timings;
use nax_contract::plan::{StoredLibrary, StoredSharded};
use nax_contract::shard::{Mesh, Sharding};
use nax_front::CheckedModule;
use nax_runtime::plan::StoredFunction;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::error::LibraryNameError;
pub use c::valid_library_name;

/// The C ABI's static archive: the runtime every library links statically.
/// A `static`, not a `const`: a constant's bytes would be copied into the
/// crate's metadata (about 120 MB, once per build of the crate).
static CAPI_ARCHIVE: &[u8] = include_bytes!(env!("NAX_CAPI_ARCHIVE"));

/// How a module is compiled ahead of time (into a library or any other
/// artifact of [`crate::emit`]).
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The CPU the kernels are compiled for (`--cpu`; a library checks its features at `NAME_open`).
    pub machine: Machine,
    /// Whether the graphs are rewritten (`-O1`).
    pub optimize: bool,
    /// Whether every load and store is bounds-checked (`--check-bounds`).
    pub check_bounds: bool,
    /// A safetensors file to embed (`--embed-weights`), read in place by `NAME_open(NULL, ...)`.
    pub embedded_weights: Option<PathBuf>,
    /// The source's name, for diagnostics and the header's first comment.
    pub source_name: String,
    /// The mesh and the sharding every function is split by (`--mesh`,
    /// `--shard`): the library is then opened by each rank with
    /// `NAME_open_sharded`.
    pub split: Option<(Mesh, Sharding)>,
}

/// The library NAME of an output path `DIR/libNAME.so`, or why it is not one.
pub fn library_name(out: &Path) -> Result<String, LibraryNameError> {
    let file = out.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    let name = file.strip_prefix("lib").and_then(|f| f.strip_suffix(".so")).ok_or_else(|| LibraryNameError::NotLibName(out.to_path_buf()))?;
    valid_library_name(name)?;
    Ok(name.to_string())
}

/// Builds `out` (`DIR/libNAME.so`) and its header `DIR/NAME.h` from every
/// function of `module` (each split over the mesh when `options.split`
/// says). Records `lower`, `rewrite`, `kernels`, `codegen` and `link`
/// (and `shard`).
pub fn build_library(module: &CheckedModule, out: &Path, options: &BuildOptions, timings: &mut Timings) -> Result<(), Error> {
    let name = library_name(out).map_err(|e| Error::Unsupported(e.into()))?;
    let machine = Backend::Llvm.machine(options.machine);
    let form = FormOptions { check_bounds: options.check_bounds };
    let cpu = machine.features.names();
    // Every compiled unit (a function, or a stage of a split one), in order.
    let mut programs = Vec::new();
    let mut unit = |graph: &nax_ir::Graph, defaults: &[Option<nax_runtime::Scalar>], name: String, timings: &mut Timings| -> Result<StoredFunction, Error> {
        let signature = nax_ir::signature(graph, defaults);
        let mut program = pipeline::kernels(graph, &machine, form)?;
        timings.mark("kernels");
        // Kernel symbols of their own, which no `NAME_` entry can take.
        program.name = format!("__nax_f{}", programs.len());
        let plan = nax_back_native::Slots::new(&program).plan(&program).map_err(Error::stage("kernels"))?;
        programs.push(program);
        Ok(StoredFunction { name, signature, plan })
    };
    let stored = match &options.split {
        None => {
            let mut stored = Vec::with_capacity(module.functions.len());
            for f in &module.functions {
                let lowered = pipeline::lower(module, &f.name, options.optimize, timings)?;
                stored.push(unit(lowered.graph(), &pipeline::defaults(f), f.name.clone(), timings)?);
            }
            StoredLibrary::Whole(stored)
        }
        Some((mesh, sharding)) => {
            let mut stored = Vec::with_capacity(module.functions.len());
            for f in &module.functions {
                let graphs = pipeline::sharded_graphs(module, &f.name, (mesh, sharding), options.optimize, timings).map_err(|e| match e {
                    Error::Shard(_) => Error::SplitFunction { function: f.name.clone(), source: Box::new(e) },
                    e => e,
                })?;
                let mut stages = Vec::with_capacity(graphs.stages.len());
                for (j, (graph, defaults)) in graphs.stages.iter().enumerate() {
                    stages.push(unit(graph, defaults, format!("{}/{j}", f.name), timings)?);
                }
                stored.push(StoredSharded { name: f.name.clone(), signature: (*graphs.signature).clone(), plan: graphs.plan, stages });
            }
            StoredLibrary::Sharded(stored)
        }
    };
    let codes: Vec<c::CCode> = stored
        .units()
        .into_iter()
        .zip(&programs)
        .map(|(s, p)| c::CCode { name: s.name.clone(), symbol: p.name.clone(), kernels: p.kernels.len(), microkernels: p.products.len() })
        .collect();
    let object = nax_back_llvm::emit(&programs, nax_back_llvm::Artifact::LibraryObject, &machine).map_err(Error::stage("codegen"))?;
    timings.mark("codegen");

    let split = options.split.as_ref().map(|(mesh, sharding)| (mesh.to_string(), sharding.to_string()));
    let functions = stored.signatures();
    let plans =
        serde_json::to_vec(&stored).map_err(|e| Error::Compile { stage: "link", error: StageError::Serialise { what: "plans", message: e.to_string() } })?;
    let manifest = serde_json::to_vec(&manifest::manifest(&functions, &cpu, split.as_ref()))
        .map_err(|e| Error::Compile { stage: "link", error: StageError::Serialise { what: "manifest", message: e.to_string() } })?;
    let described = split.as_ref().map(|(mesh, sharding)| format!("mesh {mesh}, split {sharding}"));
    let header = c::header(&name, &options.source_name, &functions, &cpu, described.as_deref());
    let weights_len = match &options.embedded_weights {
        Some(w) => Some(std::fs::metadata(w).map_err(|e| Error::Link { message: format!("cannot read the weights to embed, `{}`: {e}", w.display()) })?.len()),
        None => None,
    };
    let glue = c::glue(&name, &functions, &codes, &cpu, weights_len);

    let dir = tempfile::Builder::new().prefix("nax-so-").tempdir().map_err(|e| io_error("a temporary directory", &e))?;
    let file = |name: &str, bytes: &[u8]| -> Result<PathBuf, Error> {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).map_err(|e| io_error(&path.display().to_string(), &e))?;
        Ok(path)
    };
    file(&format!("{name}.h"), header.as_bytes())?;
    file("glue.c", glue.as_bytes())?;
    file("data.S", c::data(weights_len.is_some()).as_bytes())?;
    file("plans.json", &plans)?;
    file("manifest.json", &manifest)?;
    file("kernels.o", &object)?;
    file("libnax_capi.a", CAPI_ARCHIVE)?;
    file("exports.map", c::version_script(&name, &functions).as_bytes())?;
    if let Some(w) = &options.embedded_weights {
        let absolute = std::path::absolute(w).map_err(|e| io_error(&w.display().to_string(), &e))?;
        std::os::unix::fs::symlink(&absolute, dir.path().join("weights.safetensors")).map_err(|e| io_error("a link to the weights", &e))?;
    }
    let built = dir.path().join(format!("lib{name}.so"));
    link(dir.path(), &built)?;
    timings.mark("link");

    place(&built, out)?;
    place(&dir.path().join(format!("{name}.h")), &parent(out).join(format!("{name}.h")))
}

/// The directory a path is in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Compiles the glue and data and links the library with the system's C
/// compiler (`$CC`, else `cc`), in `dir`.
fn link(dir: &Path, built: &Path) -> Result<(), Error> {
    let cc = std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or_else(|| "cc".into());
    // Words as a shell (and so make) splits them: `ccache cc`, `cc -O2`.
    let words = shlex::split(&cc).filter(|w| !w.is_empty()).ok_or_else(|| Error::Link {
        message: format!("CC=`{cc}` is not a command: its quotes do not close (it is split into words as a shell splits them)"),
    })?;
    let output = Command::new(&words[0])
        .args(&words[1..])
        .current_dir(dir)
        .args(["-shared", "-fPIC", "-O2", "-std=c99", "-o"])
        .arg(built)
        .args([
            "glue.c",
            "data.S",
            "kernels.o",
            "libnax_capi.a",
            "-Wl,--version-script=exports.map",
            "-Wl,--gc-sections",
            "-Wl,-z,noexecstack",
            "-Wl,-z,relro,-z,now",
            "-Wl,--no-undefined",
            "-s",
            "-lm",
            "-lpthread",
            "-ldl",
            "-lgcc_s",
        ])
        .output()
        .map_err(|e| Error::Link {
            message: format!("cannot run the C compiler `{cc}` to link the library ({e}): --emit so needs one (install gcc or clang, or set CC)"),
        })?;
    if !output.status.success() {
        return Err(Error::Link {
            message: format!("the C compiler `{cc}` failed to link the library:\n{}", String::from_utf8_lossy(&output.stderr).trim_end()),
        });
    }
    if !built.is_file() {
        return Err(Error::Link { message: format!("the C compiler `{cc}` reported success but wrote no library (is CC a C compiler?)") });
    }
    Ok(())
}

/// Moves a built file to its place atomically (copied, with its
/// permissions, to a temporary file beside it, renamed over it; never
/// held in memory whole, as a library with embedded weights may be
/// gigabytes): an error leaves an existing file as it was.
fn place(from: &Path, to: &Path) -> Result<(), Error> {
    let dir = parent(to);
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_error(&format!("a temporary file in `{}`", dir.display()), &e))?;
    std::fs::copy(from, tmp.path()).map_err(|e| io_error(&to.display().to_string(), &e))?;
    tmp.persist(to).map_err(|e| io_error(&to.display().to_string(), &e.error))?;
    Ok(())
}

fn io_error(what: &str, e: &std::io::Error) -> Error {
    Error::Link { message: format!("cannot write {what}: {e}") }
}
