//! The call boundary: arguments bound to a function's parameters by the
//! rules of LANGUAGE.md section 12 and checked against its signature
//! (kinds, dtypes, ranks, every size) before anything runs, and admitted
//! only when the memory its executor will allocate fits in what the
//! process can still have ([`CheckedCall::admit`]). The only way to a kernel is a [`CheckedCall`], which only
//! [`Signature::check`] makes: a binding that has not been checked cannot
//! reach compiled code.

use crate::binding::bind;
use crate::error::{CallError, MAX_ITERATIONS, RuntimeError, SizeSource, Subject};
use crate::memory::{self, Peak, SMALL_PEAK};
use crate::packed::{PackedWeights, Weights};
use nax_contract::DType;
use nax_contract::{HostType, ParamType, Scalar, Signature, TensorSpec};
use nax_contract::{Size, SymDef};
use nax_host::HostTensor;
use nax_host::TensorView;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicBool;

/// One argument of a call, in parameter order.
#[derive(Clone, Debug)]
pub enum Arg<'a> {
    /// A tensor, borrowed from the caller (any strides, named or not).
    Tensor(TensorView<'a>),
    /// A host scalar.
    Scalar(Scalar),
}

/// An argument the caller owns (a tensor read from a file, generated
/// data): what [`Value::arg`] lends a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A tensor.
    Tensor(HostTensor),
    /// A host scalar.
    Scalar(Scalar),
}

impl Value {
    /// The value as a call's argument, borrowing the tensor's elements.
    pub fn arg(&self) -> Arg<'_> {
        match self {
            Value::Tensor(t) => Arg::Tensor(t.view()),
            Value::Scalar(s) => Arg::Scalar(*s),
        }
    }
}

impl<'a> From<TensorView<'a>> for Arg<'a> {
    fn from(v: TensorView<'a>) -> Arg<'a> {
        Arg::Tensor(v)
    }
}

impl From<f64> for Arg<'_> {
    fn from(x: f64) -> Self {
        Arg::Scalar(Scalar::Float(x))
    }
}

impl From<i64> for Arg<'_> {
    fn from(x: i64) -> Self {
        Arg::Scalar(Scalar::Int(x))
    }
}

impl From<bool> for Arg<'_> {
    fn from(x: bool) -> Self {
        Arg::Scalar(Scalar::Bool(x))
    }
}

/// The iterations of a loop nest over `extents` (saturating).
pub(crate) fn iterations(extents: &[u64]) -> u128 {
    extents.iter().fold(1u128, |n, &e| n.saturating_mul(u128::from(e)))
}

/// Refuses a loop nest over `extents` of more than [`MAX_ITERATIONS`]
/// iterations (with an empty extent, none run).
pub fn check_work(function: &str, extents: &[u64]) -> Result<(), CallError> {
    let iterations = iterations(extents);
    if iterations <= MAX_ITERATIONS {
        return Ok(());
    }
    let extents = extents.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    Err(CallError::Work { function: function.to_string(), extents, iterations })
}

/// An argument after binding: a tensor in the parameter's axis order (the
/// caller's memory when it lies row-major in that order, else a packed
/// copy), or a host scalar.
#[derive(Debug)]
enum Bound<'a> {
    View(TensorView<'a>),
    Packed(HostTensor),
    Scalar(Scalar),
}

/// A call that passed the boundary check: every tensor bound, in its
/// parameter's axis order and contiguous, every size known. Only
/// [`Signature::check`] makes one.
pub struct CheckedCall<'a> {
    signature: &'a Signature,
    args: Vec<Bound<'a>>,
    weights: &'a dyn Weights,
    sizes: Vec<Option<u64>>,
    /// Set by the host to stop the call before its next kernel.
    interrupt: Option<&'a AtomicBool>,
}

impl fmt::Debug for CheckedCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedCall").field("function", &self.signature.name).field("args", &self.args).field("sizes", &self.sizes).finish_non_exhaustive()
    }
}

impl<'a> CheckedCall<'a> {
    /// The same call, stopped before its next kernel once `flag` is set
    /// (a host's Ctrl-C): the run ends in [`RuntimeError::Interrupted`],
    /// having written no result, within one kernel's time.
    pub fn interruptible(self, flag: &'a AtomicBool) -> CheckedCall<'a> {
        CheckedCall { interrupt: Some(flag), ..self }
    }

    /// Whether the host asked the call to stop.
    pub(crate) fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(|flag| flag.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl CheckedCall<'_> {
    /// The signature the call was checked against.
    pub fn signature(&self) -> &Signature {
        self.signature
    }

    /// An error unless the call was checked against `expected` (the same
    /// value, or an equal one): an executor refuses a call checked for
    /// another function, whose buffers would not fit its kernels.
    pub fn require(&self, expected: &Signature) -> Result<(), RuntimeError> {
        if std::ptr::eq(self.signature, expected) || self.signature == expected {
            return Ok(());
        }
        Err(RuntimeError::WrongFunction { checked: self.signature.name.clone(), given: expected.name.clone() })
    }

    /// Argument `i` as a contiguous tensor in its parameter's axis order,
    /// or `None` when it is a host scalar, a strided tensor not yet packed
    /// (see [`CheckedCall::packed`]), or there is no argument `i`.
    pub fn tensor(&self, i: usize) -> Option<TensorView<'_>> {
        match self.args.get(i)? {
            Bound::View(v) if v.is_contiguous() => Some(v.clone()),
            Bound::Packed(t) => Some(t.view()),
            Bound::View(_) | Bound::Scalar(_) => None,
        }
    }

    /// The bytes packing the strided tensor arguments takes, which the
    /// memory plan counts with the executor's peak.
    pub fn packing_bytes(&self) -> u128 {
        self.args.iter().fold(0u128, |total, b| match b {
            Bound::View(v) if !v.is_contiguous() => total.saturating_add(v.len() as u128 * v.dtype().size_bytes() as u128),
            _ => total,
        })
    }

    /// The call with every strided tensor argument packed contiguous in
    /// its parameter's axis order, as executors read them (a view
    /// transposed by name packs with the threads of the pool it runs in).
    /// Admit [`CheckedCall::packing_bytes`] first.
    pub fn packed<'b>(&'b self) -> Result<CheckedCall<'b>, RuntimeError> {
        let args = self
            .args
            .iter()
            .map(|b| match b {
                Bound::View(v) if !v.is_contiguous() => v.to_host().map(Bound::Packed),
                Bound::View(v) => Ok(Bound::View(v.clone())),
                Bound::Packed(t) => Ok(Bound::View(t.view())),
                Bound::Scalar(s) => Ok(Bound::Scalar(*s)),
            })
            .collect::<Result<_, _>>()?;
        Ok(CheckedCall { signature: self.signature, args, weights: self.weights, sizes: self.sizes.clone(), interrupt: self.interrupt })
    }

    /// Argument `i` as a host scalar, or `None` when it is a tensor.
    pub fn scalar(&self, i: usize) -> Option<Scalar> {
        match self.args.get(i)? {
            Bound::Scalar(s) => Some(*s),
            _ => None,
        }
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether the function takes no arguments.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// A weight, bound in its declared axis order and contiguous.
    pub fn weight(&self, name: &str) -> Option<TensorView<'_>> {
        self.weights.weight(name)
    }

    /// The weights' packed panels (see [`Weights::packed`]).
    pub(crate) fn packed_weights(&self) -> Option<&PackedWeights> {
        self.weights.packed()
    }

    /// The value of every size symbol at this call (`None` for those
    /// nothing determines).
    pub fn sizes(&self) -> &[Option<u64>] {
        &self.sizes
    }

    /// The value of a size at this call (`None` when nothing determines it).
    pub fn size(&self, size: Size) -> Option<u64> {
        match self.signature.sizes.resolve(size) {
            Size::Const(c) => Some(c),
            Size::Sym(id) => self.sizes.get(id.0 as usize).copied().flatten(),
        }
    }

    /// The bytes of a value of this type at this call (saturating; a size
    /// nothing determines counts as 1).
    pub fn bytes_of(&self, spec: &TensorSpec) -> u128 {
        spec.axes.iter().fold(spec.dtype.size_bytes() as u128, |b, a| b.saturating_mul(u128::from(self.size(a.size).unwrap_or(1))))
    }

    /// Admits the call when `peak` (what its executor will allocate)
    /// fits in the memory the process can still have; else the error
    /// names both figures, the limit that leaves the least, and the
    /// call's largest value. Calls under [`SMALL_PEAK`] are admitted
    /// without measuring.
    pub fn admit(&self, peak: Peak) -> Result<(), CallError> {
        if peak.bytes < SMALL_PEAK {
            return Ok(());
        }
        let Some(available) = memory::available() else { return Ok(()) };
        if peak.bytes <= available.bytes.saturating_add(peak.reusable) {
            return Ok(());
        }
        let values = self.signature.values.iter().chain(self.signature.results.iter().map(|r| &r.ty));
        let largest = values.max_by_key(|t| self.bytes_of(t)).map_or_else(String::new, |t| {
            let shape: Vec<String> = t
                .axes
                .iter()
                .map(|a| {
                    let v = self.size(a.size).map_or_else(|| "?".to_string(), |v| v.to_string());
                    a.name.as_ref().map_or_else(|| v.clone(), |name| format!("{name}={v}"))
                })
                .collect();
            format!("a {} tensor of shape [{}], {} bytes", t.dtype.as_str(), shape.join(" "), self.bytes_of(t))
        });
        Err(CallError::Memory { function: self.signature.name.clone(), peak: peak.bytes, available: available.bytes, limit: available.limit, largest })
    }
}

/// The call boundary, on a function's [`Signature`] (which the contract
/// crate defines, as the compiler writes it): what turns a caller's
/// arguments into a [`CheckedCall`].
pub trait CallBoundary {
    /// Binds and checks the arguments and weights of a call (see the
    /// implementation on [`Signature`]).
    fn check<'a>(&'a self, args: Vec<Arg<'a>>, weights: &'a dyn Weights) -> Result<CheckedCall<'a>, RuntimeError>;

    /// The arguments of a call given by name, in the parameters' order.
    fn arguments<'a>(&self, named: Vec<(&str, Arg<'a>)>) -> Result<Vec<Arg<'a>>, RuntimeError>;
}

impl CallBoundary for Signature {
    /// The call-boundary check: binds each tensor argument to its parameter
    /// (LANGUAGE.md section 12: by name, by position, transposed without a
    /// copy), then checks every argument and weight against the types
    /// (kind, dtype, rank, sizes: constants directly, symbols fixed by their
    /// first binding, then every derived size and exact division); views
    /// whose strides are not row-major are packed, once the memory plan
    /// admits the copies. `weights` are bound in their declared axis order already.
    fn check<'a>(&'a self, args: Vec<Arg<'a>>, weights: &'a dyn Weights) -> Result<CheckedCall<'a>, RuntimeError> {
        if args.len() != self.params.len() {
            return Err(CallError::ArgumentCount { function: self.name.clone(), expected: self.params.len(), given: args.len() }.into());
        }
        let mut bound = Vec::with_capacity(args.len());
        for (p, arg) in self.params.iter().zip(args) {
            let subject = || Subject::Parameter(p.name.clone());
            bound.push(match (arg, &p.ty) {
                (Arg::Tensor(t), ParamType::Tensor(spec)) => Bound::View(bind(&p.name, &spec.names(), &t)?),
                (Arg::Tensor(_), ParamType::Host(_)) => return Err(CallError::ExpectedScalar(subject()).into()),
                (Arg::Scalar(_), ParamType::Tensor(_)) => return Err(CallError::ExpectedTensor(subject()).into()),
                (Arg::Scalar(s), &ParamType::Host(h)) => Bound::Scalar(match (s, h) {
                    (Scalar::Int(i), HostType::Float) => Scalar::Float(i as f64),
                    (s, h) if s.host_type() == h => s,
                    (s, h) => return Err(CallError::ScalarType { subject: subject(), expected: h, given: s.host_type() }.into()),
                }),
            });
        }
        let mut given: Vec<(Size, u64, SizeSource)> = Vec::new();
        let mut check_tensor = |subject: Subject, spec: &TensorSpec, dtype: DType, shape: &[usize]| -> Result<(), CallError> {
            if dtype != spec.dtype {
                return Err(CallError::DType { subject, expected: spec.dtype, given: dtype });
            }
            if shape.len() != spec.axes.len() {
                return Err(CallError::Rank { subject, expected: spec.axes.len(), given: shape.len() });
            }
            for (axis, &actual) in spec.axes.iter().zip(shape) {
                given.push((axis.size, actual as u64, SizeSource::Axis { of: subject.clone(), axis: axis.name.clone() }));
            }
            Ok(())
        };
        for (p, b) in self.params.iter().zip(&bound) {
            if let (ParamType::Tensor(spec), Bound::View(v)) = (&p.ty, b) {
                check_tensor(Subject::Parameter(p.name.clone()), spec, v.dtype(), v.shape())?;
            }
        }
        for w in &self.weights {
            let t = weights.weight(&w.name).ok_or_else(|| CallError::MissingWeight(w.name.clone()))?;
            if !t.is_contiguous() {
                return Err(RuntimeError::Internal(format!("weight '{}' is not bound contiguously", w.name)));
            }
            check_tensor(Subject::Weight(w.name.clone()), &w.ty, t.dtype(), t.shape())?;
        }
        for &(size, index) in &self.size_arguments {
            let name = self.params.get(index).map_or_else(|| format!("#{index}"), |p| p.name.clone());
            // A slice bound may be of either sign; a size must be positive.
            let signed = matches!(size, Size::Sym(id) if self.sizes.symbols.get(id.0 as usize).is_some_and(|s| s.def == SymDef::Signed));
            match bound.get(index) {
                Some(Bound::Scalar(Scalar::Int(v))) if *v > 0 || signed => given.push((size, *v as u64, SizeSource::SizeParameter(name))),
                Some(Bound::Scalar(Scalar::Int(v))) => {
                    return Err(CallError::NonPositiveSize { name, size: self.sizes.display(size), value: *v }.into());
                }
                _ => return Err(CallError::SizeNotInt(name).into()),
            }
        }
        let mut first: HashMap<Size, (u64, &SizeSource)> = HashMap::new();
        for (size, actual, source) in &given {
            match self.sizes.resolve(*size) {
                Size::Const(c) if c != *actual => {
                    return Err(CallError::Size { source_: source.clone(), actual: *actual, expected: c }.into());
                }
                Size::Const(_) => {}
                root => match first.get(&root) {
                    Some((v, earlier)) if v != actual => {
                        return Err(CallError::SizeConflict {
                            source_: source.clone(),
                            actual: *actual,
                            earlier: Box::new((*earlier).clone()),
                            symbol: self.sizes.display(root),
                            value: *v,
                        }
                        .into());
                    }
                    Some(_) => {}
                    None => {
                        first.insert(root, (*actual, source));
                    }
                },
            }
        }
        let pairs: Vec<(Size, u64)> = given.iter().map(|(s, v, _)| (*s, *v)).collect();
        let sizes = self.sizes.solve(&pairs).map_err(|error| CallError::Sizes { function: self.name.clone(), error })?;
        // Strided tensors are packed only when the call runs, once the
        // memory plan has admitted the packing with the rest of the call's
        // peak (a bool broadcast to 2^32 elements by a zero stride is not
        // copied for a call whose result could never be had).
        Ok(CheckedCall { signature: self, args: bound, weights, sizes, interrupt: None })
    }

    /// The arguments of a call given by name: each parameter takes the
    /// argument of its name or else its default. Errors: a name that is no
    /// parameter's, a parameter with no value.
    fn arguments<'a>(&self, mut named: Vec<(&str, Arg<'a>)>) -> Result<Vec<Arg<'a>>, RuntimeError> {
        let mut args = Vec::with_capacity(self.params.len());
        for p in &self.params {
            match named.iter().position(|(n, _)| *n == p.name) {
                Some(i) => args.push(named.swap_remove(i).1),
                None => match p.default {
                    Some(d) => args.push(Arg::Scalar(d)),
                    None => {
                        let ty = match &p.ty {
                            ParamType::Tensor(t) => t.display(&self.sizes),
                            ParamType::Host(h) => h.as_str().to_string(),
                        };
                        return Err(CallError::MissingArgument { name: p.name.clone(), ty }.into());
                    }
                },
            }
        }
        match named.first() {
            Some((extra, _)) if self.param_index(extra).is_some() => Err(CallError::DuplicateArgument(extra.to_string()).into()),
            Some((extra, _)) => Err(CallError::UnknownParameter { function: self.name.clone(), name: extra.to_string() }.into()),
            None => Ok(args),
        }
    }
}
