//! The C a library is made of, besides its kernels and runtime: the header
//! `NAME.h` (ABI.md's declarations, DLPack's structs behind DLPack's own
//! include guard, the types all nax libraries share behind one guard, and
//! per function a comment with its signature and a typed entry), the glue
//! (`NAME_*` entries forwarding to the runtime's `nax_capi_*` with the
//! library's descriptor, and the typed entries), the data (plans,
//! manifest and embedded weights, included by the assembler, the weights
//! page-aligned in a large-data section) and the version script that
//! exports only the `NAME_` entries.

use crate::error::LibraryNameError;
use nax_contract::plan::LIBRARY_LAYOUT;
use nax_runtime::{HostType, ParamType, Signature};
use std::fmt::Write;

/// The ABI entries every library has, after `NAME_`.
const ENTRIES: [&str; 9] = ["abi_version", "manifest", "last_error", "open", "open_sharded", "close", "call", "call_n", "call_sharded"];

/// Prefixes of the runtime's own symbols, which no exported name may take.
const RESERVED: [&str; 3] = ["nax_capi_", "nax_libm_", "__nax"];

/// C and C++ keywords a parameter name must not be in a prototype.
const KEYWORDS: [&str; 60] = [
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "class",
    "delete",
    "new",
    "namespace",
    "private",
    "protected",
    "public",
    "template",
    "this",
    "throw",
    "try",
    "catch",
    "typename",
    "virtual",
    "operator",
    "friend",
    "using",
    "mutable",
    "explicit",
    "export",
    "nullptr",
    "and",
    "or",
];

/// One compiled unit's code as the C files see it (a function, or a stage
/// of a function split over a mesh): its name in the plans and where its
/// kernels are.
pub struct CCode {
    /// The name its stored plan has (`forward`, or `forward/0` for a stage).
    pub name: String,
    /// The symbol prefix of its kernels (`__nax_f0`).
    pub symbol: String,
    /// How many kernels it has.
    pub kernels: usize,
    /// How many microkernels, after the kernels.
    pub microkernels: usize,
}

impl CCode {
    /// How many entry points: kernels, then microkernels.
    fn entries(&self) -> usize {
        self.kernels + self.microkernels
    }
}

/// Whether `name` is a library NAME: a C identifier that no runtime symbol starts with.
pub fn valid_library_name(name: &str) -> Result<(), LibraryNameError> {
    let mut chars = name.chars();
    let ident = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(LibraryNameError::NotIdentifier(name.to_string()));
    }
    if let Some(&prefix) = RESERVED.iter().find(|r| format!("{name}_").starts_with(*r) || name.starts_with(*r)) {
        return Err(LibraryNameError::Reserved { name: name.to_string(), prefix });
    }
    if SYSTEM_LIBRARIES.contains(&name) {
        return Err(LibraryNameError::System(name.to_string()));
    }
    Ok(())
}

/// The C and C++ toolchain's own libraries, which `-lNAME` must keep finding.
const SYSTEM_LIBRARIES: &[&str] =
    &["c", "m", "pthread", "dl", "rt", "util", "crypt", "resolv", "nsl", "anl", "mvec", "gcc", "gcc_s", "atomic", "quadmath", "gomp", "asan", "ubsan", "z"];

/// The typed entry of each function: `NAME_FN`, or `None` where that name
/// is taken (an ABI entry, another typed entry, a runtime prefix).
fn typed_names(name: &str, functions: &[&Signature]) -> Vec<Option<String>> {
    let wanted: Vec<String> = functions.iter().map(|f| format!("{name}_{}", f.name)).collect();
    wanted
        .iter()
        .map(|w| {
            let clashes = ENTRIES.iter().any(|e| *w == format!("{name}_{e}"))
                || RESERVED.iter().any(|r| w.starts_with(r))
                || wanted.iter().filter(|o| *o == w).count() > 1;
            (!clashes).then(|| w.clone())
        })
        .collect()
}

/// The C name of a parameter in a prototype (not a keyword, not `model` or `result`).
fn c_param(name: &str) -> String {
    if KEYWORDS.contains(&name) || name == "model" || name == "result" || name.starts_with("nax_") { format!("{name}_") } else { name.to_string() }
}

/// A C string literal.
fn c_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii_graphic() || c == ' ' => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "\\{b:03o}");
                }
            }
        }
    }
    out.push('"');
    out
}

/// The C type of a host scalar in a typed entry.
fn c_host(h: HostType) -> &'static str {
    match h {
        HostType::Float => "double",
        HostType::Int => "int64_t",
        HostType::Bool => "bool",
    }
}

/// The typed entry's parameter list, after `NAME_model *model`.
fn typed_params(f: &Signature) -> String {
    let mut out = String::new();
    for p in &f.params {
        let ty = match &p.ty {
            ParamType::Tensor(_) => "const DLTensor *",
            ParamType::Host(h) => c_host(*h),
        };
        let sep = if ty.ends_with('*') { "" } else { " " };
        let _ = write!(out, ", {ty}{sep}{}", c_param(&p.name));
    }
    out
}

/// DLPack 1.1's declarations, behind DLPack's own include guard.
const DLPACK: &str = r#"#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
/* DLPack 1.1's declarations (https://github.com/dmlc/dlpack), as
   dlpack/dlpack.h makes them: including that header first, or a second
   nax header, does not define them twice. */
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
#define DLPACK_DLL
#ifdef __cplusplus
extern "C" {
#endif
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */
"#;

/// The types every nax library shares, behind one include guard.
const SHARED: &str = r#"#ifndef NAX_ABI_TYPES_H_
#define NAX_ABI_TYPES_H_
enum {                      /* every NAME_ function that can fail returns one */
  NAX_OK = 0,
  NAX_ERR_ARGUMENT = 1,     /* unknown function; missing, extra or unknown argument;
                               dtype, rank, size, axis name, stride, device, null pointer */
  NAX_ERR_WEIGHTS = 2,      /* weights missing, unreadable, malformed or of the wrong shape */
  NAX_ERR_MEMORY = 3,       /* an allocation failed */
  NAX_ERR_CPU = 4,          /* this CPU lacks features the library was compiled for */
  NAX_ERR_INTERNAL = 5,     /* a bug in nax: never an abort, always this code */
  NAX_ERR_COLLECTIVE = 6    /* a collective of the host's engine failed (a rank died,
                               a timeout): the message is the engine's */
};
typedef struct {
  const char *name;          /* the parameter's name in the nax function */
  const DLTensor *tensor;    /* a host scalar: a rank-0 tensor (f64 or f32 for float,
                                i64 or i32 for int, bool for bool) */
  const char *const *axes;   /* NULL, or ndim axis names (a NULL entry: unnamed axis) */
  uint64_t capacity;         /* bytes the caller owns from tensor->data; 0: not given */
} nax_arg;
typedef struct {
  DLManagedTensorVersioned *tensor; /* owned by the caller: call its deleter once */
  const char *const *axes;          /* ndim names, NULL entries for unnamed axes;
                                       valid until the tensor's deleter runs */
} nax_result;
/* Libraries split over processes (`nax build --mesh tp=2 --shard H=tp,F=tp`):
   the host's engine (MPI, NCCL, gloo, its own) runs the collectives. */
typedef enum {
  NAX_REDUCE_SUM = 0,
  NAX_REDUCE_MAX = 1,
  NAX_REDUCE_MIN = 2,
  NAX_REDUCE_PROD = 3
} nax_reduce_op;
typedef struct {
  const char *mesh_axis;     /* the mesh axis the collective runs along ("tp") */
  const int32_t *ranks;      /* the group's ranks, in order along that axis */
  size_t size;               /* how many */
  size_t index;              /* this rank's position among them */
} nax_group;
typedef struct {
  void *context;                        /* the host's, passed to every function */
  int32_t (*rank)(void *context);       /* this process's rank, 0 .. size - 1 */
  int32_t (*size)(void *context);       /* how many processes: the mesh's */
  /* Each collective returns 0, or nonzero after writing a NUL-terminated
     message of at most error_size bytes into error. count is in elements of
     dtype. Every rank of the group makes the same calls in the same order. */
  int (*all_reduce)(void *context, const nax_group *group, DLDataType dtype,
                    nax_reduce_op op, void *data, size_t count,
                    char *error, size_t error_size);                /* in place */
  int (*all_gather)(void *context, const nax_group *group, DLDataType dtype,
                    const void *block, size_t count, void *out,     /* out: count * size, */
                    char *error, size_t error_size);                /* rank after rank    */
  int (*reduce_scatter)(void *context, const nax_group *group, DLDataType dtype,
                        nax_reduce_op op, const void *data, size_t count,
                        void *out,                                  /* this rank's count / size */
                        char *error, size_t error_size);            /* may be NULL: nax then
                                                                       all-reduces and keeps its part */
} nax_collectives;
typedef struct {
  int32_t threads;           /* as NAME_open's */
  int32_t gather;            /* 0: each rank gets its block of every result; 1: the whole */
} nax_shard_options;
typedef struct {
  nax_result result;
  const int64_t *offsets;      /* ndim: the block's start along each axis (0 where not split) */
  const int64_t *global_shape; /* ndim: the whole result's sizes; both valid until
                                  result.tensor's deleter runs */
} nax_shard_result;
#endif /* NAX_ABI_TYPES_H_ */
"#;

/// `NAME.h`.
pub fn header(name: &str, source: &str, functions: &[&Signature], cpu: &[&str], sharded: Option<&str>) -> String {
    let mut h = String::new();
    let guard = format!("NAX_LIBRARY_{name}_H_");
    let cpu = if cpu.is_empty() { "any x86-64 (SSE2)".to_string() } else { cpu.join(", ") };
    let _ = write!(
        h,
        "/* {name}.h: the C interface of lib{name}.so, compiled by nax from {source}\n   \
         for CPUs with: {cpu}.\n   \
         The ABI: the nax book's chapter \"The C ABI\". Link with `cc app.c -L. -l{name}`. */\n\
         #ifndef {guard}\n#define {guard}\n\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n{DLPACK}\n{SHARED}\n\
         #ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n\
         #define {name}_ABI_VERSION 1\n\n\
         typedef struct {name}_model {name}_model;  /* the library's functions bound to one set of weights */\n\n\
         uint32_t    {name}_abi_version(void);                 /* == {name}_ABI_VERSION */\n\
         const char *{name}_manifest(void);                    /* JSON manifest; static storage  */\n\
         const char *{name}_last_error(void);                  /* this thread's last error message, \"\" if none */\n\n\
         int  {name}_open(const char *weights_path,            /* NULL: embedded weights, or none needed */\n\
         \x20                int32_t threads,                     /* 0: one per core; 1: the calling thread only */\n\
         \x20                {name}_model **model);\n\
         void {name}_close({name}_model *model);                 /* NULL is allowed */\n\n\
         int  {name}_call({name}_model *model, const char *function,\n\
         \x20                const nax_arg *args, size_t nargs,   /* in any order, bound by name */\n\
         \x20                nax_result *result);\n\
         int  {name}_call_n({name}_model *model, const char *function, /* any function; one with several */\n\
         \x20                  const nax_arg *args, size_t nargs,   /* results                       */\n\
         \x20                  nax_result *results, size_t nresults); /* must be called this way */\n\n\
         /* A library built split over processes is opened by every rank with the\n   \
         host's collectives; calls are the same, each rank passing its blocks and\n   \
         getting its block of each result (NAME_call_sharded: with where it lies). */\n\
         int  {name}_open_sharded(const char *weights_path,    /* NULL: embedded weights */\n\
         \x20                        const nax_shard_options *options, /* NULL: {{0, 0}} */\n\
         \x20                        const nax_collectives *collectives, /* copied; its context must\n\
         \x20                                                             outlive the model */\n\
         \x20                        {name}_model **model);\n\
         int  {name}_call_sharded({name}_model *model, const char *function,\n\
         \x20                        const nax_arg *args, size_t nargs,\n\
         \x20                        nax_shard_result *results, size_t nresults);\n"
    );
    if let Some(split) = sharded {
        let _ = write!(
            h,
            "\n/* Built split over processes: {split}. Open it with {name}_open_sharded\n   \
             ({name}_open refuses it); the sizes below are each rank's blocks. */\n"
        );
    }
    for (s, typed) in functions.iter().zip(typed_names(name, functions)) {
        let _ = write!(h, "\n/* {s}\n");
        for p in &s.params {
            let what = match &p.ty {
                ParamType::Tensor(t) => {
                    let axes: Vec<String> =
                        t.axes.iter().map(|a| format!("{} ({})", a.name.as_deref().unwrap_or("unnamed"), s.sizes.display(a.size))).collect();
                    format!("{} tensor, axes: {}", t.dtype.as_str(), if axes.is_empty() { "none (rank 0)".to_string() } else { axes.join(", ") })
                }
                ParamType::Host(hst) => format!("host {} ({} in the typed entry)", hst.as_str(), c_host(*hst)),
            };
            let _ = writeln!(h, " *   {}: {what}", p.name);
        }
        match &typed {
            Some(t) => {
                let _ = writeln!(h, " * Typed entry: tensors bound by position (as declared), every argument given{}. */", results_note(s));
                let _ = writeln!(h, "int {t}({name}_model *model{}, {});", typed_params(s), results_param(s));
            }
            None => {
                let _ = writeln!(h, " * No typed entry: `{name}_{}` is taken; call it through {name}_call. */", s.name);
            }
        }
    }
    let _ = write!(h, "\n#ifdef __cplusplus\n}}\n#endif\n#endif /* {guard} */\n");
    h
}

/// The glue: the descriptor and every `NAME_` entry.
pub fn glue(name: &str, functions: &[&Signature], codes: &[CCode], cpu: &[&str], weights_len: Option<u64>) -> String {
    let mut c = String::new();
    let _ = write!(
        c,
        "/* generated by nax: lib{name}.so's entries, forwarding to its runtime (nax_capi_*) */\n\
         #include \"{name}.h\"\n\n\
         typedef void (*nax_kernel_fn)(void *const *buffers, const int64_t *sizes, int64_t begin, int64_t end);\n\
         typedef struct {{ const char *name; const nax_kernel_fn *entries; size_t count; }} nax_function_code;\n\
         typedef struct {{\n  uint32_t layout;\n  const char *name, *plans, *cpu;\n  const unsigned char *weights;\n  size_t weights_len;\n  const nax_function_code *functions;\n  size_t function_count;\n}} nax_library;\n\
         int nax_capi_open(const nax_library *library, const char *weights_path, int32_t threads, void **model);\n\
         int nax_capi_open_sharded(const nax_library *library, const char *weights_path, const nax_shard_options *options, const nax_collectives *collectives, void **model);\n\
         int nax_capi_call_sharded(const void *model, const char *function, const nax_arg *args, size_t nargs, nax_shard_result *results, size_t nresults);\n\
         void nax_capi_close(void *model);\n\
         int nax_capi_call(const void *model, const char *function, const nax_arg *args, size_t nargs, nax_result *result);\n\
         int nax_capi_call_n(const void *model, const char *function, const nax_arg *args, size_t nargs, nax_result *results, size_t nresults);\n\
         const char *nax_capi_last_error(void);\n\
         extern const char __nax_plans[];\nextern const char __nax_manifest[];\n"
    );
    if weights_len.is_some() {
        c.push_str("extern const unsigned char __nax_weights[];\n");
    }
    for f in codes {
        let names: Vec<String> = (0..f.entries()).map(|i| entry_symbol(f, i)).collect();
        for n in &names {
            let _ = writeln!(c, "void {n}(void *const *, const int64_t *, int64_t, int64_t);");
        }
        if !names.is_empty() {
            let _ = writeln!(c, "static const nax_kernel_fn {}_entries[] = {{{}}};", f.symbol, names.join(", "));
        }
    }
    let table: Vec<String> = codes
        .iter()
        .map(|f| format!("{{{}, {}, {}}}", c_string(&f.name), if f.entries() > 0 { format!("{}_entries", f.symbol) } else { "NULL".into() }, f.entries()))
        .collect();
    let functions_table = if table.is_empty() {
        "NULL".to_string()
    } else {
        let _ = writeln!(c, "static const nax_function_code functions[] = {{\n  {}\n}};", table.join(",\n  "));
        "functions".to_string()
    };
    let (weights, len) = match weights_len {
        Some(n) => ("__nax_weights".to_string(), n),
        None => ("NULL".to_string(), 0),
    };
    let _ = write!(
        c,
        "static const nax_library library = {{{LIBRARY_LAYOUT}, {}, __nax_plans, {}, {weights}, (size_t){len}ULL, {functions_table}, {}}};\n\n\
         uint32_t {name}_abi_version(void) {{ return {name}_ABI_VERSION; }}\n\
         const char *{name}_manifest(void) {{ return __nax_manifest; }}\n\
         const char *{name}_last_error(void) {{ return nax_capi_last_error(); }}\n\
         int {name}_open(const char *weights_path, int32_t threads, {name}_model **model) {{\n  return nax_capi_open(&library, weights_path, threads, (void **)model);\n}}\n\
         void {name}_close({name}_model *model) {{ nax_capi_close(model); }}\n\
         int {name}_call({name}_model *model, const char *function, const nax_arg *args, size_t nargs, nax_result *result) {{\n  return nax_capi_call(model, function, args, nargs, result);\n}}\n\
         int {name}_call_n({name}_model *model, const char *function, const nax_arg *args, size_t nargs, nax_result *results, size_t nresults) {{\n  return nax_capi_call_n(model, function, args, nargs, results, nresults);\n}}\n\
         int {name}_open_sharded(const char *weights_path, const nax_shard_options *options, const nax_collectives *collectives, {name}_model **model) {{\n  return nax_capi_open_sharded(&library, weights_path, options, collectives, (void **)model);\n}}\n\
         int {name}_call_sharded({name}_model *model, const char *function, const nax_arg *args, size_t nargs, nax_shard_result *results, size_t nresults) {{\n  return nax_capi_call_sharded(model, function, args, nargs, results, nresults);\n}}\n",
        c_string(name),
        c_string(&cpu.join(",")),
        codes.len()
    );
    for (s, typed) in functions.iter().zip(typed_names(name, functions)) {
        let Some(typed) = typed else { continue };
        let _ = writeln!(c, "\nint {typed}({name}_model *model{}, {}) {{", typed_params(s), results_param(s));
        let mut args = Vec::new();
        for p in &s.params {
            let v = c_param(&p.name);
            let tensor = match &p.ty {
                ParamType::Tensor(_) => v,
                ParamType::Host(h) => {
                    let (code, bits) = match h {
                        HostType::Float => ("kDLFloat", 64),
                        HostType::Int => ("kDLInt", 64),
                        HostType::Bool => ("kDLBool", 8),
                    };
                    let _ = writeln!(c, "  DLTensor {v}_tensor = {{(void *)&{v}, {{kDLCPU, 0}}, 0, {{{code}, {bits}, 1}}, NULL, NULL, 0}};");
                    format!("&{v}_tensor")
                }
            };
            args.push(format!("{{{}, {tensor}, NULL, 0}}", c_string(&p.name)));
        }
        let list = if args.is_empty() {
            "NULL, 0".to_string()
        } else {
            let _ = writeln!(c, "  nax_arg args[{}] = {{{}}};", args.len(), args.join(", "));
            format!("args, {}", args.len())
        };
        match s.results.len() {
            1 => {
                let _ = writeln!(c, "  return {name}_call(model, {}, {list}, result);\n}}", c_string(&s.name));
            }
            k => {
                let _ = writeln!(c, "  return {name}_call_n(model, {}, {list}, results, {k});\n}}", c_string(&s.name));
            }
        }
    }
    c
}

/// A typed entry's last parameter: `nax_result *result`, or `results` for
/// a function of several.
fn results_param(s: &Signature) -> &'static str {
    if s.results.len() == 1 { "nax_result *result" } else { "nax_result *results" }
}

/// What a typed entry's comment says of its results.
fn results_note(s: &Signature) -> String {
    match s.results.len() {
        1 => String::new(),
        k => format!("; `results` holds {k} nax_result, written in order ({})", s.result_names()),
    }
}

/// The symbol of entry `i` of a function: its kernels, then its microkernels
/// (as the LLVM back end names them).
fn entry_symbol(f: &CCode, i: usize) -> String {
    if i < f.kernels { format!("{}_k{i}", f.symbol) } else { format!("{}_m{}", f.symbol, i - f.kernels) }
}

/// The data: plans, manifest and (optionally) the weights file, included
/// by the assembler from files in its directory; the weights page-aligned
/// in `.lrodata`, which the linker places after all other data, so no
/// 32-bit reference crosses them whatever their size (the code reaches
/// them only through the descriptor's 64-bit pointer).
pub fn data(embed_weights: bool) -> String {
    let mut s = String::from("/* generated by nax: lib's read-only data */\n");
    for (symbol, file) in [("__nax_plans", "plans.json"), ("__nax_manifest", "manifest.json")] {
        let _ = write!(s, "  .section .rodata\n  .globl {symbol}\n  .hidden {symbol}\n{symbol}:\n  .incbin \"{file}\"\n  .byte 0\n");
    }
    if embed_weights {
        s.push_str("  .section .lrodata,\"a\",@progbits\n  .balign 4096\n  .globl __nax_weights\n  .hidden __nax_weights\n__nax_weights:\n  .incbin \"weights.safetensors\"\n");
    }
    s.push_str("  .section .note.GNU-stack,\"\",@progbits\n");
    s
}

/// The version script: only the `NAME_` entries are exported.
pub fn version_script(name: &str, functions: &[&Signature]) -> String {
    let mut exported: Vec<String> = ENTRIES.iter().map(|e| format!("{name}_{e}")).collect();
    exported.extend(typed_names(name, functions).into_iter().flatten());
    format!("{{\n  global:\n    {};\n  local: *;\n}};\n", exported.join(";\n    "))
}
