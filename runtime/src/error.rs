//! The runtime's errors, by concern: host data ([`HostError`], from
//! `nax-host`: files, tensors, views, their memory), the call boundary
//! ([`CallError`]: counts, kinds, dtypes, sizes, memory limits), binding
//! tensors to parameters by name (section 12 of the language), and running
//! kernels (bounds, indices, interruption, devices, threads).
//!
//! Every variant carries what its message needs (the file, the tensor or
//! parameter, the axis, the sizes, the dtype), so a caller can print it as
//! is or inspect the fields.

use crate::memory::Limit;
use nax_contract::plan::MalformedPlan;
use nax_contract::{DType, HostType, SizeError};
use nax_host::{HostError, shortened, shown_names};
use std::fmt;

/// An error of the runtime. The `Display` text is a complete sentence
/// fragment meant for users, e.g. `parameter 'x': axis 'n' is missing from
/// the tensor's names [b m]`.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Host data (a tensor, a view, a file of tensors, memory for them)
    /// that the call cannot use; the message names what is wrong.
    #[error(transparent)]
    Host(#[from] HostError),

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

    /// The reference interpreter could not evaluate the call.
    #[error("{message}")]
    Interpreter {
        /// What went wrong.
        message: String,
    },

    /// The host stopped the call (`CheckedCall::interruptible`).
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

    /// A plan that contradicts itself (checked before it runs): a bug in
    /// the compiler or a damaged artifact, never the caller's data.
    #[error("internal error: {0}")]
    MalformedPlan(#[from] MalformedPlan),

    /// A collective of a sharded function failed in the host's engine (a
    /// rank died, the engine timed out or refused): the call ends on this
    /// rank with the engine's message.
    #[error("a collective failed: {0}")]
    Collective(#[from] CollectiveError),

    /// A plan that does not fit the code it came with, or that contradicts
    /// itself: a bug in the compiler or a damaged artifact, never the caller's data.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A collective's failure, as the host's engine reports it (a sharded
/// function's `Collectives`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CollectiveError {
    /// The engine's message.
    pub message: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;

    #[test]
    fn missing_axis_message() {
        let e = RuntimeError::MissingAxis { param: "x".into(), axis: "n".into(), tensor_names: names("b m") };
        assert_eq!(e.to_string(), "parameter 'x': axis 'n' is missing from the tensor's names [b m]");
    }
}
