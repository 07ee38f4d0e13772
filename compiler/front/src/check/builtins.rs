//! Built-in operations (LANGUAGE.md section 8): elementwise functions,
//! operations along one named axis, and constructors. Calls are dispatched
//! here; pattern operations and module functions have their own files.

use super::expr::SIDES;
use super::range::Range;
use super::sizes::Size;
use super::types::{Axis, DType, Kind, TensorType, Type, describe_axes};
use super::{FnChecker, SizeScope};
use crate::checked::{AlongAxis, Constructor, Elementwise, Reduction, TExpr, TExprKind};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, ExprKind, HostType};

/// Elementwise functions of one operand, and how each maps ranges.
fn unary_builtin(name: &str) -> Option<Elementwise> {
    use Elementwise::*;
    Some(match name {
        "exp" => Exp,
        "log" => Log,
        "log1p" => Log1p,
        "expm1" => Expm1,
        "sqrt" => Sqrt,
        "rsqrt" => Rsqrt,
        "abs" => Abs,
        "sin" => Sin,
        "cos" => Cos,
        "tanh" => Tanh,
        "erf" => Erf,
        "floor" => Floor,
        "ceil" => Ceil,
        "round" => Round,
        "sign" => Sign,
        "sigmoid" => Sigmoid,
        "relu" => Relu,
        "gelu" => Gelu,
        "silu" => Silu,
        "softplus" => Softplus,
        _ => return None,
    })
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The range of a one-operand elementwise function over `r`.
fn unary_range(f: Elementwise, r: Range) -> Range {
    use Elementwise::*;
    match f {
        Exp => r.map_increasing(f64::exp),
        Log => r.map_increasing(|x| if x <= 0.0 { f64::NEG_INFINITY } else { x.ln() }),
        Log1p => r.map_increasing(|x| if x <= -1.0 { f64::NEG_INFINITY } else { x.ln_1p() }),
        Expm1 => r.map_increasing(f64::exp_m1),
        Sqrt => r.map_increasing(|x| x.max(0.0).sqrt()),
        Rsqrt => Range::new(1.0 / r.hi.max(0.0).sqrt(), 1.0 / r.lo.max(0.0).sqrt()),
        Abs => {
            if r.lo >= 0.0 {
                r
            } else if r.hi <= 0.0 {
                -r
            } else {
                Range::new(0.0, (-r.lo).max(r.hi))
            }
        }
        Sin | Cos => Range::new(-1.0, 1.0),
        Tanh => r.map_increasing(f64::tanh),
        Erf => r.map_increasing(libm::erf),
        Floor => r.map_increasing(f64::floor),
        Ceil => r.map_increasing(f64::ceil),
        Round => r.map_increasing(f64::round_ties_even),
        Sign => r.map_increasing(|x| if x == 0.0 { 0.0 } else { x.signum() }),
        Sigmoid => r.map_increasing(sigmoid),
        Relu => r.map_increasing(|x| x.max(0.0)),
        Gelu => Range::new(-0.17, f64::INFINITY),
        Silu => Range::new(-0.28, f64::INFINITY),
        Softplus => r.map_increasing(|x| if x > nax_ops::SOFTPLUS_THRESHOLD { x } else { x.exp().ln_1p() }),
        _ => Range::FULL,
    }
}

impl FnChecker<'_> {
    /// A call: a built-in, a pattern operation or a module function.
    pub(super) fn call(&mut self, call: &ast::Call, span: Span) -> TExpr {
        let name = call.callee.name.as_str();
        if self.module.fn_index.contains_key(name) {
            return self.call_function(call, span);
        }
        if call.pattern.is_some() && name != "concat" {
            return self.pattern_call(call, span);
        }
        let (kind, ty) = match name {
            "matmul" => {
                if !self.arity(call, 2, 2) {
                    return error_expr(span);
                }
                let (l, r) = (self.expr(&call.args[0]), self.expr(&call.args[1]));
                return self.matmul(l, r, span);
            }
            "softmax" | "log_softmax" | "logsumexp" => self.along_axis(call),
            "sum" | "mean" | "max" | "min" | "prod" => return self.reduce_axis(call, span),
            "zeros" | "ones" | "full" | "arange" => self.constructor(call),
            "pow" | "maximum" | "minimum" => self.binary_builtin(call, span),
            "where" | "clamp" | "masked_fill" => self.ternary_builtin(call, span),
            "float" | "int" | "f16" | "bf16" | "f64" => self.conversion(call),
            "concat" => self.concat(call, span),
            "take" => self.take(call),
            "cumsum" | "cumprod" => self.scan(call),
            "argmax" | "argmin" => self.arg_reduce(call),
            "grad" => return self.grad_as_value(call, span),
            "rearrange" | "reduce" | "repeat" | "split" | "einsum" => {
                let d = Diagnostic::new(Code::E0202, span, format!("`{name}` needs an operand and a pattern `inputs -> output`")).primary("missing pattern");
                (TExprKind::Bool(false), self.report(d))
            }
            _ => match unary_builtin(name) {
                Some(f) => self.unary_builtin(f, call, span),
                None => {
                    let d = Diagnostic::new(Code::E0201, call.callee.span, format!("unknown function `{name}`"))
                        .primary("not a built-in or a function of this module");
                    (TExprKind::Bool(false), self.report(d))
                }
            },
        };
        TExpr { kind, ty, span }
    }

    /// Checks the number of positional arguments (and that there are no keywords): E0202.
    pub(super) fn arity(&mut self, call: &ast::Call, min: usize, max: usize) -> bool {
        let n = call.args.len() + usize::from(call.type_arg.is_some());
        let name = &call.callee.name;
        if let Some(k) = call.keywords.first() {
            self.report(Diagnostic::new(Code::E0202, k.name.span, format!("`{name}` takes no keyword arguments")).primary("unexpected keyword argument"));
            return false;
        }
        if n < min || n > max {
            let want = if min == max { format!("{min}") } else { format!("{min} to {max}") };
            self.report(
                Diagnostic::new(
                    Code::E0202,
                    call.callee.span,
                    format!("`{name}` takes {want} argument{}, but {n} {} given", if max == 1 { "" } else { "s" }, if n == 1 { "was" } else { "were" }),
                )
                .primary("wrong number of arguments"),
            );
            return false;
        }
        true
    }

    /// Checks an argument as a numeric operand (E0412 for strings).
    fn operands(&mut self, call: &ast::Call) -> Vec<TExpr> {
        call.args.iter().map(|a| self.expr(a)).collect()
    }

    fn unary_builtin(&mut self, f: Elementwise, call: &ast::Call, span: Span) -> (TExprKind, Type) {
        if !self.arity(call, 1, 1) {
            return (TExprKind::Bool(false), Type::Error);
        }
        let arg = self.expr(&call.args[0]);
        let name = &call.callee.name;
        let ty = if arg.ty.is_error() || self.reject_mask(&arg, &format!("`{name}`")) {
            Type::Error
        } else {
            let r = arg.ty.range().unwrap_or(Range::FULL);
            if matches!(f, Elementwise::Log | Elementwise::Sqrt | Elementwise::Rsqrt) && r.contains_negatives() {
                self.report(
                    Diagnostic::new(Code::W0601, span, format!("`{name}` of a value whose range {r} allows negatives"))
                        .primary("may be nan")
                        .label(arg.span, format!("range {r}")),
                );
            }
            let range = unary_range(f, r);
            match &arg.ty {
                Type::Host(..) => Type::Host(HostType::Float, Some(range)),
                Type::Tensor(t) => {
                    let kind = match (f, &t.kind) {
                        (Elementwise::Exp, Kind::LogProb(a)) => Kind::Prob(a.clone()),
                        (Elementwise::Log, Kind::Prob(a)) => Kind::LogProb(a.clone()),
                        _ => Kind::Plain,
                    };
                    let range = match kind {
                        Kind::Plain => range,
                        ref k => {
                            let n = k.natural_range();
                            Range::new(range.lo.max(n.lo), range.hi.min(n.hi))
                        }
                    };
                    Type::Tensor(TensorType { dtype: t.dtype.to_float(), kind, axes: t.axes.clone(), range: Some(range) })
                }
                Type::Error => Type::Error,
            }
        };
        let align = vec![(0..rank(&arg.ty)).collect()];
        (TExprKind::Elementwise { func: f, args: vec![arg], align }, ty)
    }

    /// `pow`, `maximum`, `minimum`: two numeric operands, broadcast.
    fn binary_builtin(&mut self, call: &ast::Call, span: Span) -> (TExprKind, Type) {
        let func = match call.callee.name.as_str() {
            "pow" => Elementwise::Pow,
            "maximum" => Elementwise::Maximum,
            _ => Elementwise::Minimum,
        };
        if !self.arity(call, 2, 2) {
            return (TExprKind::Bool(false), Type::Error);
        }
        let args = self.operands(call);
        let what = format!("`{}`", call.callee.name);
        if args.iter().any(|a| a.ty.is_error()) || self.reject_mask(&args[0], &what) | self.reject_mask(&args[1], &what) {
            return (TExprKind::Elementwise { func, args, align: Vec::new() }, Type::Error);
        }
        let (a, b) = (args[0].ty.range().unwrap_or(Range::FULL), args[1].ty.range().unwrap_or(Range::FULL));
        let range = match func {
            Elementwise::Maximum => Range::new(a.lo.max(b.lo), a.hi.max(b.hi)),
            Elementwise::Minimum => Range::new(a.lo.min(b.lo), a.hi.min(b.hi)),
            _ => pow_range(a, b),
        };
        if let (Type::Host(x, _), Type::Host(y, _)) = (&args[0].ty, &args[1].ty) {
            let host = if *x == HostType::Int && *y == HostType::Int && func != Elementwise::Pow { HostType::Int } else { HostType::Float };
            return (TExprKind::Elementwise { func, args, align: vec![Vec::new(), Vec::new()] }, Type::Host(host, Some(range)));
        }
        let Some(aligned) = self.align(&args[0], &args[1], span, SIDES) else {
            return (TExprKind::Elementwise { func, args, align: Vec::new() }, Type::Error);
        };
        let dtype = Self::arith_dtype(&args[0].ty, &args[1].ty);
        let ty = Type::Tensor(TensorType { dtype, kind: Kind::Plain, axes: aligned.axes, range: Some(range) });
        (TExprKind::Elementwise { func, args, align: vec![aligned.left, aligned.right] }, ty)
    }

    /// `where(mask, a, b)`, `clamp(x, lo, hi)`, `masked_fill(x, mask, value)`.
    fn ternary_builtin(&mut self, call: &ast::Call, span: Span) -> (TExprKind, Type) {
        let func = match call.callee.name.as_str() {
            "where" => Elementwise::Where,
            "clamp" => Elementwise::Clamp,
            _ => Elementwise::MaskedFill,
        };
        if !self.arity(call, 3, 3) {
            return (TExprKind::Bool(false), Type::Error);
        }
        let args = self.operands(call);
        let fail = |args| (TExprKind::Elementwise { func, args, align: Vec::new() }, Type::Error);
        if args.iter().any(|a| a.ty.is_error()) {
            return fail(args);
        }
        let mask_at = match func {
            Elementwise::Where => Some(0),
            Elementwise::MaskedFill => Some(1),
            _ => None,
        };
        if let Some(i) = mask_at
            && !Self::is_mask(&args[i].ty)
        {
            self.report(
                Diagnostic::new(
                    Code::E0501,
                    args[i].span,
                    format!("the condition of `{}` must be a Mask, not {}", call.callee.name, args[i].ty.display(&self.syms)),
                )
                .primary("not a mask")
                .note("compare to get a mask, as in x > 0"),
            );
            return fail(args);
        }
        match func {
            Elementwise::Where => {
                let Some((axes, align)) = self.align_three(&args, span, ["condition", "first value", "second value"]) else {
                    return fail(args);
                };
                let (a, b) = (Self::as_tensor(&args[1].ty), Self::as_tensor(&args[2].ty));
                let (Some(a), Some(b)) = (a, b) else { return fail(args) };
                let dtype = if a.dtype == DType::Bool && b.dtype == DType::Bool { DType::Bool } else { Self::arith_dtype(&args[1].ty, &args[2].ty) };
                let kind = if a.kind == b.kind { a.kind.clone() } else { Kind::Plain };
                let range = match (a.range, b.range) {
                    (Some(x), Some(y)) => Some(x.union(y)),
                    _ => None,
                };
                let ty = Type::Tensor(TensorType { dtype, kind, axes, range });
                (TExprKind::Elementwise { func, args, align }, ty)
            }
            Elementwise::Clamp => {
                let what = "`clamp`";
                if self.reject_mask(&args[0], what) | self.reject_mask(&args[1], what) | self.reject_mask(&args[2], what) {
                    return fail(args);
                }
                let Some((axes, align)) = self.align_three(&args, span, ["value", "lower bound", "upper bound"]) else {
                    return fail(args);
                };
                let r = |i: usize| args[i].ty.range().unwrap_or(Range::FULL);
                let (x, lo, hi) = (r(0), r(1), r(2));
                let raised = Range::new(x.lo.max(lo.lo), x.hi.max(lo.hi));
                let range = Range::new(raised.lo.min(hi.lo), raised.hi.min(hi.hi));
                let dtype = Self::arith_dtype(&Self::arith_type(&args[0].ty, &args[1].ty), &args[2].ty);
                let kind = Self::as_tensor(&args[0].ty).map_or(Kind::Plain, |t| t.kind);
                let ty = if args.iter().all(|a| matches!(a.ty, Type::Host(..))) {
                    let host = if dtype.is_float() { HostType::Float } else { HostType::Int };
                    Type::Host(host, Some(range))
                } else {
                    Type::Tensor(TensorType { dtype, kind, axes, range: Some(range) })
                };
                (TExprKind::Elementwise { func, args, align }, ty)
            }
            _ => {
                let Type::Tensor(x) = args[0].ty.clone() else {
                    let d = Diagnostic::new(Code::E0202, args[0].span, "the first argument of `masked_fill` must be a tensor").primary("a host scalar");
                    self.report(d);
                    return fail(args);
                };
                let value_ok = match &args[2].ty {
                    Type::Host(..) => true,
                    Type::Tensor(t) => t.rank() == 0,
                    Type::Error => false,
                };
                if !value_ok {
                    let d = Diagnostic::new(Code::E0202, args[2].span, "the fill value of `masked_fill` must be a scalar")
                        .primary(format!("{} value", args[2].ty.display(&self.syms)));
                    self.report(d);
                    return fail(args);
                }
                if x.dtype == DType::Bool && !Self::is_mask(&args[2].ty) || x.dtype != DType::Bool && Self::is_mask(&args[2].ty) {
                    let d = Diagnostic::new(
                        Code::E0505,
                        args[2].span,
                        "the fill value of `masked_fill` must be of the tensor's category (a number for numbers, a bool for masks)",
                    )
                    .primary("wrong category");
                    self.report(d);
                    return fail(args);
                }
                let Some(aligned) = self.align(&args[0], &args[1], span, ["tensor", "mask"]) else { return fail(args) };
                let keeps_shape = aligned.axes.len() == x.rank() && aligned.left.iter().enumerate().all(|(i, &j)| i == j);
                if !keeps_shape {
                    let mask_axes = Self::as_tensor(&args[1].ty).map(|t| t.axes).unwrap_or_default();
                    let d = Diagnostic::new(
                        Code::E0404,
                        args[1].span,
                        format!(
                            "the mask {} of masked_fill would add axes to the tensor {}",
                            describe_axes(&mask_axes, &self.syms),
                            describe_axes(&x.axes, &self.syms)
                        ),
                    )
                    .primary("the mask must broadcast to the tensor's shape without adding axes")
                    .label(args[0].span, "the tensor");
                    self.report(d);
                    return fail(args);
                }
                let range = match (x.range, args[2].ty.range()) {
                    (Some(a), Some(b)) => Some(a.union(b)),
                    _ => None,
                };
                let align = vec![aligned.left, aligned.right, Vec::new()];
                (TExprKind::Elementwise { func, args, align }, Type::Tensor(TensorType { range, ..x }))
            }
        }
    }

    /// Lines up three operands left to right (the first with the second, then
    /// that with the third): the result's axes and each operand's alignment.
    fn align_three(&mut self, args: &[TExpr], span: Span, names: [&str; 3]) -> Option<(Vec<Axis>, Vec<Vec<usize>>)> {
        let first = self.align(&args[0], &args[1], span, [names[0], names[1]])?;
        let partial = TExpr { kind: TExprKind::Bool(false), ty: Type::Tensor(tensor_with_axes(first.axes)), span: args[0].span.to(args[1].span) };
        let both = format!("{} and {}", names[0], names[1]);
        let second = self.align(&partial, &args[2], span, [&both, names[2]])?;
        let compose = |v: &[usize]| v.iter().map(|&k| second.left[k]).collect::<Vec<usize>>();
        let align = vec![compose(&first.left), compose(&first.right), second.right];
        Some((second.axes, align))
    }

    /// The type of arithmetic between two operands, for chaining dtype rules.
    fn arith_type(a: &Type, b: &Type) -> Type {
        match (a, b) {
            (Type::Host(x, r), Type::Host(y, _)) => {
                Type::Host(if *x == HostType::Float || *y == HostType::Float { HostType::Float } else { HostType::Int }, *r)
            }
            _ => Type::Tensor(TensorType { dtype: Self::arith_dtype(a, b), ..tensor_with_axes(Vec::new()) }),
        }
    }

    /// `float(x)` and `int(x)`.
    /// `float(x)`, `int(x)`, and the conversions to another float width
    /// (`f16(x)`, `bf16(x)`, `f64(x)`: a tensor in that dtype, rounded to
    /// nearest; a host scalar stays a `float`). These three names are not
    /// reserved (not in [`super::BUILTINS`]): a module's function of one of
    /// them is called instead, so programs written before them keep their
    /// meaning.
    fn conversion(&mut self, call: &ast::Call) -> (TExprKind, Type) {
        let func = if call.callee.name == "int" { Elementwise::ToInt } else { Elementwise::ToFloat };
        let float_dtype = match call.callee.name.as_str() {
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            "f64" => DType::F64,
            _ => DType::F32,
        };
        if !self.arity(call, 1, 1) {
            return (TExprKind::Bool(false), Type::Error);
        }
        let arg = self.expr(&call.args[0]);
        let range = match (&arg.ty, arg.ty.range()) {
            (_, Some(r)) if func == Elementwise::ToInt => Some(Range::new(r.lo.trunc(), r.hi.trunc())),
            (_, Some(r)) => Some(r),
            (Type::Error, _) => None,
            _ => Some(Range::new(0.0, 1.0)),
        };
        let ty = match &arg.ty {
            Type::Error => Type::Error,
            Type::Host(..) => Type::Host(if func == Elementwise::ToInt { HostType::Int } else { HostType::Float }, range),
            Type::Tensor(t) => {
                let dtype = if func == Elementwise::ToInt { DType::I64 } else { float_dtype };
                Type::Tensor(TensorType { dtype, kind: Kind::Plain, axes: t.axes.clone(), range })
            }
        };
        let align = vec![(0..rank(&arg.ty)).collect()];
        (TExprKind::Elementwise { func, args: vec![arg], align }, ty)
    }

    /// The axis argument at `position` of softmax, sum, take, ...: a name
    /// (E0202) that must be an axis of `t`, the type of `operand` (E0403).
    pub(super) fn axis_argument(&mut self, call: &ast::Call, position: usize, t: &TensorType, operand: &TExpr) -> Option<usize> {
        let arg = &call.args[position];
        let ExprKind::Name(name) = &arg.kind else {
            let ordinal = ["first", "second", "third"].get(position).copied().unwrap_or("last");
            self.report(
                Diagnostic::new(Code::E0202, arg.span, format!("the {ordinal} argument of `{}` must be an axis name", call.callee.name))
                    .primary("not an axis name"),
            );
            return None;
        };
        self.axis_named(name, arg.span, t, operand)
    }

    /// The position of the axis `name` (written at `span`) in `t`, the type
    /// of `operand`; E0403 when it has none.
    pub(super) fn axis_named(&mut self, name: &str, span: Span, t: &TensorType, operand: &TExpr) -> Option<usize> {
        let position = t.axis_position(name);
        if position.is_none() {
            self.report(
                Diagnostic::new(Code::E0403, span, format!("'{name}' is not an axis of the operand {}", describe_axes(&t.axes, &self.syms)))
                    .primary("no such axis")
                    .label(operand.span, "the operand"),
            );
        }
        position
    }

    /// softmax, log_softmax, logsumexp along one named axis.
    fn along_axis(&mut self, call: &ast::Call) -> (TExprKind, Type) {
        let func = match call.callee.name.as_str() {
            "softmax" => AlongAxis::Softmax,
            "log_softmax" => AlongAxis::LogSoftmax,
            _ => AlongAxis::LogSumExp,
        };
        if !self.arity(call, 2, 2) {
            return (TExprKind::Bool(false), Type::Error);
        }
        let arg = self.expr(&call.args[0]);
        let fail = |arg| (TExprKind::AlongAxis { func, arg: Box::new(arg), axis: 0 }, Type::Error);
        if arg.ty.is_error() || self.reject_mask(&arg, &format!("`{}`", call.callee.name)) {
            return fail(arg);
        }
        let Some(t) = Self::as_tensor(&arg.ty) else { return fail(arg) };
        let Some(axis) = self.axis_argument(call, 1, &t, &arg) else { return fail(arg) };
        let domain = t.axes[axis].name.clone().unwrap_or_default();
        let dtype = t.dtype.to_float();
        let ty = match func {
            AlongAxis::Softmax => TensorType { dtype, kind: Kind::Prob(domain), axes: t.axes.clone(), range: Some(Range::new(0.0, 1.0)) },
            AlongAxis::LogSoftmax => TensorType { dtype, kind: Kind::LogProb(domain), axes: t.axes.clone(), range: Some(Range::new(f64::NEG_INFINITY, 0.0)) },
            AlongAxis::LogSumExp => {
                let r = t.range.unwrap_or(Range::FULL);
                let range = match self.syms.constant(t.axes[axis].size) {
                    Some(c) if c > 0 => {
                        let ln = (c as f64).ln();
                        Range::new(r.lo + ln, r.hi + ln)
                    }
                    _ => Range::new(r.lo, f64::INFINITY),
                };
                let mut axes = t.axes.clone();
                axes.remove(axis);
                TensorType { dtype, kind: Kind::Plain, axes, range: Some(range) }
            }
        };
        (TExprKind::AlongAxis { func, arg: Box::new(arg), axis }, Type::Tensor(ty))
    }

    /// `sum(x, a)` and its siblings: `reduce` with the axis left out.
    fn reduce_axis(&mut self, call: &ast::Call, span: Span) -> TExpr {
        let op = Reduction::parse(&call.callee.name).unwrap_or(Reduction::Sum);
        if !self.arity(call, 2, 2) {
            return error_expr(span);
        }
        let arg = self.expr(&call.args[0]);
        if arg.ty.is_error() {
            return TExpr { span, ..arg };
        }
        let Some(t) = Self::as_tensor(&arg.ty) else { return error_expr(span) };
        let Some(axis) = self.axis_argument(call, 1, &t, &arg) else { return error_expr(span) };
        self.reduce_axes(op, arg, &t, &[axis], span)
    }

    /// zeros(TYPE), ones(TYPE), full(TYPE, value), arange(n).
    fn constructor(&mut self, call: &ast::Call) -> (TExprKind, Type) {
        let name = call.callee.name.as_str();
        if name == "arange" {
            if !self.arity(call, 1, 1) {
                return (TExprKind::Bool(false), Type::Error);
            }
            let arg = &call.args[0];
            let (axis, n) = match &arg.kind {
                ExprKind::Name(n) if self.sizes.contains_key(n) => {
                    let s = self.sizes[n];
                    (Axis::named(n, s), s)
                }
                ExprKind::Int(v) => (Axis::unnamed(Size::Const(*v)), Size::Const(*v)),
                _ => {
                    let d = Diagnostic::new(Code::E0201, arg.span, "arange needs a size name in scope (a dim or an axis of a parameter)")
                        .primary("not a size name");
                    return (TExprKind::Bool(false), self.report(d));
                }
            };
            let hi = self.syms.constant(n).map_or(f64::INFINITY, |v| v as f64 - 1.0);
            let ty = TensorType { dtype: DType::I64, kind: Kind::Plain, axes: vec![axis], range: Some(Range::new(0.0, hi.max(0.0))) };
            return (TExprKind::Construct { func: Constructor::Arange, value: None }, Type::Tensor(ty));
        }
        let (func, n) = match name {
            "zeros" => (Constructor::Zeros, 1),
            "ones" => (Constructor::Ones, 1),
            _ => (Constructor::Full, 2),
        };
        if !self.arity(call, n, n) {
            return (TExprKind::Bool(false), Type::Error);
        }
        let Some(te) = &call.type_arg else { return (TExprKind::Bool(false), Type::Error) };
        let mut scope = SizeScope { sizes: std::mem::take(&mut self.sizes), new_names: false };
        let before = self.diags.len();
        let resolved = super::resolve_tensor_type(te, &mut scope, &mut self.syms, self.diags);
        self.errors += self.diags.len() - before;
        self.sizes = scope.sizes;
        let value = if func == Constructor::Full { Some(self.expr(&call.args[0])) } else { None };
        let Some(mut t) = resolved else { return (TExprKind::Construct { func, value: value.map(Box::new) }, Type::Error) };
        let fill = match (&value, func) {
            (Some(v), _) => match &v.ty {
                Type::Host(..) => v.ty.range(),
                Type::Tensor(vt) if vt.rank() == 0 => vt.range,
                Type::Error => return (TExprKind::Construct { func, value: value.map(Box::new) }, Type::Error),
                Type::Tensor(_) => {
                    let d = Diagnostic::new(Code::E0202, v.span, "the value of `full` must be a scalar").primary("not a scalar");
                    return (TExprKind::Construct { func, value: value.map(Box::new) }, self.report(d));
                }
            },
            (None, Constructor::Zeros) => Some(Range::exact(0.0)),
            _ => Some(Range::exact(1.0)),
        };
        t.range = if t.dtype == DType::Bool { None } else { fill };
        (TExprKind::Construct { func, value: value.map(Box::new) }, Type::Tensor(t))
    }
}

/// A stand-in tensor with these axes, for aligning a third operand.
fn tensor_with_axes(axes: Vec<Axis>) -> TensorType {
    TensorType { dtype: DType::F32, kind: Kind::Plain, axes, range: None }
}

fn rank(ty: &Type) -> usize {
    match ty {
        Type::Tensor(t) => t.rank(),
        _ => 0,
    }
}

/// The range of `pow(a, b)`: an even integer exponent or a non-negative base gives no negatives.
fn pow_range(a: Range, b: Range) -> Range {
    let even_exponent = b.lo == b.hi && b.lo.fract() == 0.0 && b.lo % 2.0 == 0.0;
    if a.lo >= 0.0 || even_exponent { Range::new(0.0, f64::INFINITY) } else { Range::FULL }
}

/// An expression that failed to check.
pub(super) fn error_expr(span: Span) -> TExpr {
    TExpr { kind: TExprKind::Bool(false), ty: Type::Error, span }
}
