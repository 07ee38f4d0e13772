//! The runtime's errors: reading and writing tensor files, building host
//! tensors, binding them to parameters (LANGUAGE.md section 12), checking
//! and running calls.
//!
//! Every variant carries what its message needs (the file, the tensor or
//! parameter, the axis, the sizes, the dtype), so a caller can print it as
//! is or inspect the fields.

use crate::memory::Limit;
use crate::{DType, HostType, SizeError};
use std::fmt;
use std::fmt::Write as _;
use std::path::PathBuf;

/// An error of the runtime. The `Display` text is a complete sentence
/// fragment meant for users, e.g. `parameter 'x': axis 'n' is missing from
/// the tensor's names [b m]`.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A program was to run on a GPU, and this machine has no NVIDIA driver.
    #[error("no NVIDIA GPU driver on this machine: libcuda.so.1 cannot be loaded ({reason}); --target cuda runs on an NVIDIA GPU")]
    NoCudaDriver {
        /// Why the library does not load.
        reason: String,
    },
    /// A call into NVIDIA's driver failed.
    #[error("CUDA: {operation} failed: {message}")]
    Cuda {
        /// What was being done.
        operation: String,
        /// The driver's name and explanation of the error (and its log, for PTX it refused).
        message: String,
    },

    /// A file could not be read (missing, unreadable, a directory, ...).
    #[error("cannot read '{}': {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A file could not be written, or not moved into place.
    #[error("cannot write '{}': {source}", .path.display())]
    Write {
        /// The file that was to be written.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A file is not a well-formed safetensors file (truncated, a header
    /// length or data offsets past the end, invalid JSON, ...).
    #[error("'{}' is not a valid safetensors file: {message}", .path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },

    /// A tensor in a file has an element type nax does not support.
    #[error(
        "'{}': tensor '{}' has dtype {}, which nax does not support \
         (supported: F16 BF16 F32 F64 I32 I64 BOOL)",
        .path.display(),
        shortened(.tensor),
        shortened(.dtype)
    )]
    UnsupportedDType {
        /// The file.
        path: PathBuf,
        /// The tensor's name in the file.
        tensor: String,
        /// The dtype as the file spells it (`U8`, `F8_E4M3`, ...).
        dtype: String,
    },

    /// The `NAME.axes` metadata of a tensor does not fit the tensor.
    #[error(
        "'{}': the metadata '{}.axes' = \"{}\" {problem}",
        .path.display(),
        shortened(.tensor),
        shortened(.axes)
    )]
    BadAxesMetadata {
        /// The file.
        path: PathBuf,
        /// The tensor's name in the file.
        tensor: String,
        /// The metadata value as written in the file.
        axes: String,
        /// What is wrong: a count that differs from the rank, a bad name.
        problem: String,
    },

    /// A tensor name that cannot be written to a safetensors file.
    #[error("cannot write '{}': invalid tensor name '{}' ({reason})", .path.display(), shortened(.name))]
    InvalidTensorName {
        /// The file that was to be written.
        path: PathBuf,
        /// The rejected name.
        name: String,
        /// Why it is rejected.
        reason: &'static str,
    },

    /// Serializing a tensor failed in the safetensors library.
    #[error("cannot write '{}': {message}", .path.display())]
    Serialize {
        /// The file that was to be written.
        path: PathBuf,
        /// The library's message.
        message: String,
    },

    /// The product of a shape does not fit in `usize`.
    #[error("the element count of shape {} overflows", fmt_shape(.shape))]
    ShapeOverflow {
        /// The shape.
        shape: Vec<usize>,
    },

    /// The number of elements given does not match the shape.
    #[error(
        "shape {} holds {expected} elements, but {actual} were given",
        fmt_shape(.shape)
    )]
    ElementCount {
        /// The shape.
        shape: Vec<usize>,
        /// The product of the shape.
        expected: usize,
        /// The number of elements given.
        actual: usize,
    },

    /// The number of axis names does not match the rank.
    #[error(
        "{} axis names {} given for a tensor of rank {rank}",
        .given.len(),
        shown_names(.given)
    )]
    NamesRank {
        /// The names given.
        given: Vec<Option<String>>,
        /// The tensor's rank.
        rank: usize,
    },

    /// An axis name that is empty, `_`, or contains white space (it could
    /// not travel in the space-separated `NAME.axes` metadata).
    #[error("invalid axis name '{}': {reason}", shortened(.name))]
    InvalidAxisName {
        /// The rejected name.
        name: String,
        /// Why it is rejected.
        reason: &'static str,
    },

    /// A permutation that is not one of `0..rank`.
    #[error("{perm:?} is not a permutation of the {rank} axes of a tensor")]
    InvalidPermutation {
        /// The rejected permutation.
        perm: Vec<usize>,
        /// The tensor's rank.
        rank: usize,
    },

    /// A tensor whose rank differs from its parameter's.
    #[error(
        "parameter '{param}': expected a tensor of rank {expected} {}, got one of rank {actual} {}",
        shown_names(.param_axes),
        shown_names(.tensor_names)
    )]
    RankMismatch {
        /// The parameter.
        param: String,
        /// The parameter's rank.
        expected: usize,
        /// The tensor's rank.
        actual: usize,
        /// The parameter's axes.
        param_axes: Vec<Option<String>>,
        /// The tensor's axis names.
        tensor_names: Vec<Option<String>>,
    },

    /// A parameter axis whose name the tensor does not carry.
    #[error(
        "parameter '{param}': axis '{}' is missing from the tensor's names {}",
        shortened(.axis),
        shown_names(.tensor_names)
    )]
    MissingAxis {
        /// The parameter.
        param: String,
        /// The parameter's axis that found no tensor axis.
        axis: String,
        /// The tensor's axis names.
        tensor_names: Vec<Option<String>>,
    },

    /// A named tensor axis that is not an axis of the parameter.
    #[error(
        "parameter '{param}': the tensor's axis '{}' is not an axis of the parameter {}",
        shortened(.axis),
        shown_names(.param_axes)
    )]
    ExtraAxis {
        /// The parameter.
        param: String,
        /// The tensor's axis that matches no parameter axis.
        axis: String,
        /// The parameter's axes.
        param_axes: Vec<Option<String>>,
    },

    /// A fully named tensor passed to a parameter with an unnamed axis.
    #[error(
        "parameter '{param}': axis {position} of the parameter {} is unnamed, so it takes an \
         unnamed or partially named tensor, not the fully named {}",
        shown_names(.param_axes),
        shown_names(.tensor_names)
    )]
    NamedForUnnamedAxis {
        /// The parameter.
        param: String,
        /// The position of the parameter's first unnamed axis.
        position: usize,
        /// The parameter's axes.
        param_axes: Vec<Option<String>>,
        /// The tensor's axis names.
        tensor_names: Vec<Option<String>>,
    },

    /// A partially named tensor with an unnamed axis after a named one.
    #[error(
        "parameter '{param}': the tensor's axis {position} is unnamed but follows a named axis \
         in {}; the unnamed axes of a partially named tensor must all lead",
        shown_names(.tensor_names)
    )]
    UnnamedAfterNamed {
        /// The parameter.
        param: String,
        /// The position of the offending unnamed tensor axis.
        position: usize,
        /// The tensor's axis names.
        tensor_names: Vec<Option<String>>,
    },

    /// A view whose strides are not one per axis.
    #[error("a view of shape {} needs one stride per axis, not {strides:?}", fmt_shape(.shape))]
    StridesRank {
        /// The shape.
        shape: Vec<usize>,
        /// The strides given.
        strides: Vec<isize>,
    },

    /// A view that would reach outside the memory it borrows.
    #[error(
        "a view of shape {} with strides {strides:?} from element {offset} reaches outside \
         the {len} elements it borrows",
        fmt_shape(.shape)
    )]
    ViewOutOfBounds {
        /// The shape.
        shape: Vec<usize>,
        /// The strides, in elements.
        strides: Vec<isize>,
        /// The first element's position.
        offset: usize,
        /// The number of elements borrowed.
        len: usize,
    },

    /// A function with several results called for one.
    #[error("`{function}` has {count} results ({names}); take them all (`call_results`, `NAME_call_n`)")]
    SeveralResults {
        /// The function.
        function: String,
        /// How many results it has.
        count: usize,
        /// Their names, in order.
        names: String,
    },

    /// A result buffer of the wrong dtype or length.
    #[error(
        "the result is {expected_len} elements of {}, but the buffer given holds {len} elements of {}",
        .expected_dtype.as_str(),
        .dtype.as_str()
    )]
    OutputBuffer {
        /// The result's dtype.
        expected_dtype: crate::DType,
        /// The result's element count.
        expected_len: usize,
        /// The buffer's dtype.
        dtype: crate::DType,
        /// The buffer's element count.
        len: usize,
    },

    /// A call the call-boundary check refuses (argument count, kinds,
    /// dtypes, ranks, sizes, memory); the message names the parameter or
    /// weight, the axis and both sizes where there are some.
    #[error("{0}")]
    Call(Box<CallError>),

    /// What this device or build cannot do (named in the message).
    #[error("{0}")]
    Unsupported(String),

    /// A kernel compiled with bounds checks (`--check-bounds`) met an
    /// access outside its buffer, and made none: a bug of nax, which the
    /// call reports instead of reading or writing outside the buffer.
    #[error("kernel k{kernel} would access buffer {buffer} at byte {offset} of its {len} (a bounds check failed: a bug of nax)")]
    OutOfBounds {
        /// The kernel.
        kernel: usize,
        /// The buffer.
        buffer: usize,
        /// The byte offset it computed (of the access's first element).
        offset: i64,
        /// The buffer's length in bytes.
        len: usize,
    },

    /// An index a call computed or was given lies outside the axis it
    /// indexes (`take`'s indices): the call fails before any read.
    #[error("{op}: index {index} is outside {axis} of size {size}")]
    IndexOutOfRange {
        /// The operation (`take`).
        op: String,
        /// The axis, as `axis 'V'` or `axis 0`.
        axis: String,
        /// The index found.
        index: i64,
        /// The axis's size.
        size: u64,
    },

    /// Memory for a buffer could not be had.
    #[error("cannot allocate {bytes} bytes for a buffer of {count} elements")]
    Allocation {
        /// The bytes asked for.
        bytes: usize,
        /// The elements asked for.
        count: usize,
    },

    /// The reference interpreter could not evaluate the call.
    #[error("{message}")]
    Interpreter {
        /// What went wrong.
        message: String,
    },

    /// The host stopped the call ([`crate::CheckedCall::interruptible`]).
    #[error("the call was interrupted before kernel k{kernel}; it returns no result")]
    Interrupted {
        /// The kernel that did not run.
        kernel: usize,
    },

    /// A thread pool could not be started.
    #[error("cannot start a pool of {threads} threads: {message}")]
    ThreadPool {
        /// The threads asked for.
        threads: usize,
        /// Why not: too many, or the operating system's reason.
        message: String,
    },

    /// A call checked against one function's signature, given to another.
    #[error("a call checked against `{checked}` was given to `{given}`")]
    WrongFunction {
        /// The function the call was checked for.
        checked: String,
        /// The function it was given to.
        given: String,
    },

    /// A size the function needs that no argument determines.
    #[error("the size `{size}` is not known at this call")]
    UnknownSize {
        /// The size, as printed.
        size: String,
    },

    /// A plan that does not fit the code it came with, or that contradicts
    /// itself: a bug in the compiler or a damaged artifact, never the caller's data.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<CallError> for RuntimeError {
    fn from(e: CallError) -> RuntimeError {
        RuntimeError::Call(Box::new(e))
    }
}

/// The most iterations one loop nest of a call may run (2^53, about 100
/// days at one iteration per nanosecond): sizes past it are a mistake,
/// refused before anything runs rather than left to spin.
pub const MAX_ITERATIONS: u128 = 1 << 53;

/// What a call-boundary message is about: a parameter or a weight.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    /// The function's parameter of this name.
    Parameter(String),
    /// The module weight of this name.
    Weight(String),
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Parameter(n) => write!(f, "parameter '{n}'"),
            Subject::Weight(n) => write!(f, "weight '{n}'"),
        }
    }
}

/// Where a size given at a call comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSource {
    /// An axis (named, or `None`) of a parameter's or weight's tensor.
    Axis {
        /// Whose axis.
        of: Subject,
        /// Its name, if it has one.
        axis: Option<String>,
    },
    /// A host `int` parameter that gives a size.
    SizeParameter(String),
}

impl fmt::Display for SizeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSource::Axis { of, axis: Some(n) } => write!(f, "{of}: axis '{n}'"),
            SizeSource::Axis { of, axis: None } => write!(f, "{of}: an unnamed axis"),
            SizeSource::SizeParameter(n) => write!(f, "parameter '{n}' (a size)"),
        }
    }
}

/// A call the boundary check refuses. The messages are the ones `nax run`
/// prints.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The wrong number of arguments.
    #[error("`{function}` takes {expected} arguments, {given} given")]
    ArgumentCount {
        /// The function.
        function: String,
        /// Its number of parameters.
        expected: usize,
        /// The number of arguments given.
        given: usize,
    },
    /// A tensor given for a host scalar parameter.
    #[error("{0} is a host scalar, not a tensor")]
    ExpectedScalar(Subject),
    /// A host scalar given for a tensor parameter.
    #[error("{0} needs a tensor, not a host scalar")]
    ExpectedTensor(Subject),
    /// A host scalar of the wrong type.
    #[error("{subject} is a host {}, not {}", .expected.as_str(), .given.as_str())]
    ScalarType {
        /// The parameter.
        subject: Subject,
        /// Its type.
        expected: HostType,
        /// The type given.
        given: HostType,
    },
    /// A tensor of the wrong dtype.
    #[error("{subject} is {} but the tensor is {}", .expected.as_str(), .given.as_str())]
    DType {
        /// The parameter or weight.
        subject: Subject,
        /// Its dtype.
        expected: DType,
        /// The tensor's.
        given: DType,
    },
    /// A tensor of the wrong rank.
    #[error("{subject} has {expected} axes but the tensor has {given}")]
    Rank {
        /// The parameter or weight.
        subject: Subject,
        /// Its rank.
        expected: usize,
        /// The tensor's.
        given: usize,
    },
    /// A weight the function reads was not given.
    #[error("the weight '{0}' is missing")]
    MissingWeight(String),
    /// A parameter with no value and no default.
    #[error("parameter '{name}' ({}) needs a value", .ty)]
    MissingArgument {
        /// The parameter.
        name: String,
        /// What it takes, as written in a type.
        ty: String,
    },
    /// An argument named after no parameter.
    #[error("`{function}` has no parameter '{name}'")]
    UnknownParameter {
        /// The function.
        function: String,
        /// The name given.
        name: String,
    },
    /// A parameter given two arguments.
    #[error("parameter '{0}' is given twice")]
    DuplicateArgument(String),
    /// A size parameter that is not positive.
    #[error("parameter '{name}' gives the size `{size}`, which must be positive, not {value}")]
    NonPositiveSize {
        /// The parameter.
        name: String,
        /// The size it gives, as printed.
        size: String,
        /// The value given.
        value: i64,
    },
    /// A size parameter given something other than an int.
    #[error("parameter '{0}' gives a size and must be an int")]
    SizeNotInt(String),
    /// A size that differs from the constant the type requires.
    #[error("{source_} has size {actual}, expected {expected}")]
    Size {
        /// Where the size comes from.
        source_: SizeSource,
        /// The size given.
        actual: u64,
        /// The size required.
        expected: u64,
    },
    /// A size that differs from the one an earlier argument gave the same symbol.
    #[error("{source_} has size {actual}, but {earlier} gave `{symbol}` the size {value}")]
    SizeConflict {
        /// Where the size comes from.
        source_: SizeSource,
        /// The size given.
        actual: u64,
        /// The argument that gave the symbol its value first.
        earlier: Box<SizeSource>,
        /// The symbol, as printed.
        symbol: String,
        /// Its value from the earlier argument.
        value: u64,
    },
    /// Sizes that contradict a derived size (an inexact division, ...).
    #[error("the sizes of the arguments do not fit `{function}`: {error}")]
    Sizes {
        /// The function.
        function: String,
        /// What failed.
        error: SizeError,
    },
    /// The call's peak (what its executor would allocate while it runs)
    /// is more than the memory the process can still have.
    #[error(
        "`{function}` needs {peak} bytes of memory at its peak ({}), more than the {available} bytes ({}) {}; its largest value is {largest}",
        human(*.peak),
        human(*.available),
        .limit.describe()
    )]
    Memory {
        /// The function.
        function: String,
        /// The bytes the call would allocate at its peak.
        peak: u128,
        /// The bytes the process can still have.
        available: u128,
        /// The limit that leaves that.
        limit: Limit,
        /// The call's largest value, as `a f32 tensor of shape [n=4 8], 128 bytes`.
        largest: String,
    },
    /// One loop nest of the call would run more than [`MAX_ITERATIONS`]
    /// times: it would not finish (and counts past 2^53 are not exact in
    /// the f64 a mean divides by).
    #[error("`{function}` would run a loop nest over [{extents}], {iterations} iterations, more than {MAX_ITERATIONS} (2^53): it would not finish")]
    Work {
        /// The function.
        function: String,
        /// The nest's extents, as `1 9223372036854775807`.
        extents: String,
        /// Their product.
        iterations: u128,
    },
}

/// Bytes as a person reads them: `16.0 GiB`.
fn human(bytes: u128) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} bytes") } else { format!("{value:.1} {}", units[unit]) }
}

/// `[2 3 4]`.
fn fmt_shape(shape: &[usize]) -> String {
    let mut s = String::from("[");
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{d}");
    }
    s.push(']');
    s
}

/// `[b _ n]`: axis names as in a type, `_` for an unnamed axis (each name
/// [`shortened`]).
pub fn shown_names(names: &[Option<String>]) -> String {
    let mut s = String::new();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(n.as_deref().unwrap_or("_"));
    }
    format!("[{}]", shortened(&s))
}

/// How many characters of a user's text a message quotes.
const QUOTED_CHARS: usize = 80;

/// User data (a name, a metadata value) as a message quotes it: whole when
/// short, else its first [`QUOTED_CHARS`] characters and its length, so
/// that a 200 KB axis name does not fill a terminal.
pub fn shortened(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}... ({} bytes)", &text[..end], text.len()),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &[&str]) -> Vec<Option<String>> {
        s.iter().map(|n| (*n != "_").then(|| n.to_string())).collect()
    }

    #[test]
    fn formats_names_and_shapes() {
        assert_eq!(shown_names(&names(&["b", "_", "n"])), "[b _ n]");
        assert_eq!(shown_names(&[]), "[]");
        assert_eq!(fmt_shape(&[2, 3]), "[2 3]");
        assert_eq!(fmt_shape(&[]), "[]");
        let long = "a".repeat(200_000);
        assert_eq!(shortened(&long), format!("{}... (200000 bytes)", "a".repeat(80)));
        assert_eq!(shown_names(&[Some(long.clone()), None]).len(), 2 + 80 + "... (200002 bytes)".len());
    }

    #[test]
    fn missing_axis_message() {
        let e = RuntimeError::MissingAxis { param: "x".into(), axis: "n".into(), tensor_names: names(&["b", "m"]) };
        assert_eq!(e.to_string(), "parameter 'x': axis 'n' is missing from the tensor's names [b m]");
    }

    #[test]
    fn file_messages_name_the_file() {
        let e = RuntimeError::Format { path: "/tmp/a.safetensors".into(), message: "truncated".into() };
        assert_eq!(e.to_string(), "'/tmp/a.safetensors' is not a valid safetensors file: truncated");
        let e = RuntimeError::UnsupportedDType { path: "f".into(), tensor: "w".into(), dtype: "U8".into() };
        assert!(e.to_string().contains("tensor 'w' has dtype U8"));
    }
}
