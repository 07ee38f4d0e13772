//! Expressions as Python expressions.
//!
//! Every expression this module returns is an atom or is parenthesized, so a
//! method call can follow it. Elementwise operands are lined up as the
//! checker decided ([`align`]: a permute, then `None` indices for missing
//! axes, leading ones left to torch's broadcasting) and cast to the dtype the
//! checker gave the result where torch's promotion would pick another (a
//! rank-0 tensor does not promote in torch, it does in nax). Host scalars
//! stay Python numbers and bools.

use crate::function::{FnEmitter, join, strip_parens};
use crate::{EmitError, dtype_name};
use nax_front::check::types::{DType, TensorType, Type, arith_dtype};
use nax_front::checked::{AlongAxis, Constructor, Elementwise, GradTarget, IndexEntry, Reduction, TExpr, TExprKind};
use nax_front::syntax::ast::{BinaryOp, HostType, UnaryOp};

/// A float literal: repr-exact, `math.inf` for infinity.
pub(crate) fn float_literal(x: f64) -> String {
    if x.is_nan() {
        "math.nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "math.inf".to_string() } else { "(-math.inf)".to_string() }
    } else {
        format!("{x:?}")
    }
}

/// `text` converted to `dtype`.
pub(crate) fn cast(text: &str, dtype: DType) -> String {
    format!("{text}.to({})", dtype_name(dtype))
}

/// Views a tensor of rank `map.len()` as one of rank `rank` whose axis
/// `map[j]` is the tensor's axis `j`: a permute into the result's order, then
/// `None` (size-1) indices at the result's axes the tensor lacks. Leading
/// missing axes are left to broadcasting, which aligns from the right.
pub(crate) fn align(text: &str, map: &[usize], rank: usize) -> String {
    let k = map.len();
    if k == 0 {
        return text.to_string();
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by_key(|&j| map[j]);
    let mut out = text.to_string();
    if order.iter().enumerate().any(|(i, &j)| i != j) {
        out = format!("{out}.permute({})", join(&order));
    }
    let mut sorted = map.to_vec();
    sorted.sort_unstable();
    let trailing = rank.checked_sub(k).is_none_or(|lead| sorted.iter().enumerate().all(|(i, &p)| p == lead + i));
    if trailing {
        return out;
    }
    let mut index: Vec<&str> = (sorted[0]..rank).map(|p| if sorted.contains(&p) { ":" } else { "None" }).collect();
    while index.last() == Some(&":") {
        index.pop();
    }
    format!("{out}[{}]", index.join(", "))
}

/// The tensor type of a type, if it is one.
pub(crate) fn tensor(ty: &Type) -> Option<&TensorType> {
    match ty {
        Type::Tensor(t) => Some(t),
        _ => None,
    }
}

/// The dtype of a value: a tensor's, or a host scalar's as a rank-0 tensor.
pub(crate) fn value_dtype(ty: &Type) -> Option<DType> {
    match ty {
        Type::Tensor(t) => Some(t.dtype),
        Type::Host(HostType::Float, _) => Some(DType::F32),
        Type::Host(HostType::Int, _) => Some(DType::I64),
        Type::Host(HostType::Bool, _) => Some(DType::Bool),
        Type::Error => None,
    }
}

/// The torch function of a one-operand elementwise built-in.
fn unary_function(f: Elementwise) -> Option<&'static str> {
    use Elementwise::*;
    Some(match f {
        Exp => "torch.exp",
        Log => "torch.log",
        Log1p => "torch.log1p",
        Expm1 => "torch.expm1",
        Sqrt => "torch.sqrt",
        Rsqrt => "torch.rsqrt",
        Abs => "torch.abs",
        Sin => "torch.sin",
        Cos => "torch.cos",
        Tanh => "torch.tanh",
        Erf => "torch.erf",
        Floor => "torch.floor",
        Ceil => "torch.ceil",
        Round => "torch.round",
        Sign => "torch.sign",
        Sigmoid => "torch.sigmoid",
        Relu => "torch.relu",
        Gelu => "torch.nn.functional.gelu",
        Silu => "torch.nn.functional.silu",
        Softplus => "torch.nn.functional.softplus",
        Pow | Maximum | Minimum | Where | Clamp | MaskedFill | ToFloat | ToInt => return None,
    })
}

impl FnEmitter<'_> {
    /// An expression.
    pub(crate) fn expr(&mut self, e: &TExpr) -> Result<String, EmitError> {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &TExpr) -> Result<String, EmitError> {
        Ok(match &e.kind {
            TExprKind::Int(n) => n.to_string(),
            TExprKind::Float(x) => float_literal(*x),
            TExprKind::Bool(b) => if *b { "True" } else { "False" }.to_string(),
            TExprKind::Local(i) => self.local(*i)?,
            TExprKind::Weight(w) => self.weight(*w)?,
            TExprKind::SizeValue(s) => self.size(*s),
            TExprKind::Unary(op, x) => {
                let s = self.expr(x)?;
                match (op, &x.ty) {
                    (UnaryOp::Neg, _) => format!("(-{s})"),
                    (UnaryOp::Not, Type::Tensor(_)) => format!("(~{s})"),
                    (UnaryOp::Not, _) => format!("(not {s})"),
                }
            }
            TExprKind::Binary { op, lhs, rhs, align } => self.binary(e, *op, lhs, rhs, align)?,
            TExprKind::MatMul { lhs, rhs, batch } => self.matmul(e, lhs, rhs, batch)?,
            TExprKind::Elementwise { func, args, align } => self.elementwise(e, *func, args, align)?,
            TExprKind::AlongAxis { func, arg, axis } => {
                let t = self.result_tensor(e)?;
                let s = self.operand(arg, None, 0, Some(t.dtype))?;
                let f = match func {
                    AlongAxis::Softmax => "torch.softmax",
                    AlongAxis::LogSoftmax => "_log_softmax",
                    AlongAxis::LogSumExp => "_logsumexp",
                };
                format!("{f}({}, {axis})", strip_parens(&s))
            }
            TExprKind::Pattern { op, args, pattern } => self.pattern(e, *op, args, pattern)?,
            TExprKind::Construct { func, value } => self.construct(e, *func, value.as_deref())?,
            TExprKind::Rename(x) => self.expr(x)?,
            TExprKind::Call { function, args } => self.call(*function, args)?,
            TExprKind::Grad { value, wrt } => {
                let value = self.expr(value)?;
                let wrt = wrt
                    .iter()
                    .map(|t| match t {
                        GradTarget::Param(i) => self.local(*i),
                        GradTarget::Weight(w) => self.weight(*w),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                format!("_grad({}, [{}])", strip_parens(&value), wrt.join(", "))
            }
            TExprKind::Stack(values) if values.is_empty() => self.construct(e, Constructor::Zeros, None)?,
            TExprKind::Stack(values) => {
                let turns = values.iter().map(|v| self.expr(v).map(|t| strip_parens(&t).to_string())).collect::<Result<Vec<_>, _>>()?;
                format!("torch.stack([{}])", turns.join(", "))
            }
            TExprKind::Index { arg, entries } => {
                let x = self.expr(arg)?;
                let rank = tensor(&arg.ty).map_or(0, TensorType::rank);
                let mut at = vec![":".to_string(); rank];
                for entry in entries {
                    match entry {
                        IndexEntry::Element { axis, index } => at[*axis] = self.size(*index),
                        IndexEntry::ElementAt { axis, value } => at[*axis] = self.expr(value)?,
                        IndexEntry::Slice { axis, start, step, len } => {
                            let (start, len) = (self.size(*start), self.size(*len));
                            at[*axis] = format!("{start}:{start} + {step} * {len}:{step}");
                        }
                    }
                }
                while at.last().is_some_and(|a| a == ":") {
                    at.pop();
                }
                format!("{x}[{}]", at.join(", "))
            }
            TExprKind::Concat { args, axes, align: maps } => {
                let t = self.result_tensor(e)?;
                let rank = t.rank();
                let parts = args.iter().enumerate().map(|(i, a)| self.operand(a, Some(self.map(maps, i)?), rank, None)).collect::<Result<Vec<_>, _>>()?;
                format!("torch.cat([{}], {})", parts.join(", "), axes.first().copied().unwrap_or(0))
            }
            TExprKind::Take { table, ids, axis } => {
                let (t, i) = (self.expr(table)?, self.expr(ids)?);
                let i = if tensor(&ids.ty).is_some() { format!("{i}.long()") } else { i };
                format!("{t}[{}{i}]", ":, ".repeat(*axis))
            }
            TExprKind::Scan { op, arg, axis } => {
                let t = self.result_tensor(e)?;
                let f = if *op == Reduction::Prod { "torch.cumprod" } else { "torch.cumsum" };
                let x = self.operand(arg, None, 0, Some(t.dtype))?;
                format!("{f}({}, {axis}, dtype={})", strip_parens(&x), dtype_name(t.dtype))
            }
            TExprKind::ArgReduce { op, arg, axis } => {
                let f = if *op == Reduction::Max { "torch.argmax" } else { "torch.argmin" };
                let x = self.expr(arg)?;
                format!("{f}({}, {axis})", strip_parens(&x))
            }
        })
    }

    /// The result type of a tensor-valued expression.
    pub(crate) fn result_tensor<'t>(&self, e: &'t TExpr) -> Result<&'t TensorType, EmitError> {
        tensor(&e.ty).ok_or_else(|| self.invalid("a tensor operation with a non-tensor type"))
    }

    /// An operand: cast to `dtype` (tensors only) and, with `map`, lined up
    /// into a result of rank `rank`. Host scalars are left as they are.
    pub(crate) fn operand(&mut self, e: &TExpr, map: Option<&[usize]>, rank: usize, dtype: Option<DType>) -> Result<String, EmitError> {
        let s = self.expr(e)?;
        let Type::Tensor(t) = &e.ty else { return Ok(s) };
        let s = match dtype {
            Some(d) if d != t.dtype => cast(&s, d),
            _ => s,
        };
        match map {
            Some(map) if map.len() != t.rank() => Err(self.invalid("an alignment of the wrong length")),
            Some(map) => Ok(align(&s, map, rank)),
            None => Ok(s),
        }
    }

    /// An operand that must be a tensor: host scalars become rank-0 tensors.
    fn tensor_operand(&mut self, e: &TExpr, map: &[usize], rank: usize, dtype: DType) -> Result<String, EmitError> {
        let s = self.operand(e, Some(map), rank, Some(dtype))?;
        Ok(if tensor(&e.ty).is_some() { s } else { self.host_tensor(&s, dtype) })
    }

    /// The alignment of operand `i` (an error when the checker gave none).
    fn map<'m>(&self, align: &'m [Vec<usize>], i: usize) -> Result<&'m [usize], EmitError> {
        align.get(i).map(Vec::as_slice).ok_or_else(|| self.invalid("a missing alignment"))
    }

    fn binary(&mut self, e: &TExpr, op: BinaryOp, lhs: &TExpr, rhs: &TExpr, align: &[Vec<usize>; 2]) -> Result<String, EmitError> {
        let host = !matches!(e.ty, Type::Tensor(_));
        // nax spells its operators as Python does, except `and`/`or` on tensors.
        let symbol = match op {
            BinaryOp::And if !host => "&",
            BinaryOp::Or if !host => "|",
            other => other.as_str(),
        };
        if host {
            let (a, b) = (self.expr(lhs)?, self.expr(rhs)?);
            return Ok(format!("({a} {symbol} {b})"));
        }
        let t = self.result_tensor(e)?;
        let compute = match op {
            BinaryOp::And | BinaryOp::Or => None,
            _ if op.is_comparison() => Some(arith_dtype(&lhs.ty, &rhs.ty)),
            _ => Some(t.dtype),
        };
        let rank = t.rank();
        let a = self.operand(lhs, Some(&align[0]), rank, compute)?;
        let b = self.operand(rhs, Some(&align[1]), rank, compute)?;
        Ok(format!("({a} {symbol} {b})"))
    }

    /// `@`: the batch axes of each operand lined up into the result's.
    fn matmul(&mut self, e: &TExpr, lhs: &TExpr, rhs: &TExpr, batch: &[Vec<usize>; 2]) -> Result<String, EmitError> {
        let t = self.result_tensor(e)?;
        let ranks = (tensor(&lhs.ty).map(TensorType::rank), tensor(&rhs.ty).map(TensorType::rank));
        let (a, b) = match ranks {
            (Some(ra), Some(rb)) if ra >= 2 && rb >= 2 => {
                let nb = t.rank().checked_sub(2).ok_or_else(|| self.invalid("a matmul result of rank < 2"))?;
                let with_matrix = |m: &[usize]| m.iter().copied().chain([nb, nb + 1]).collect::<Vec<usize>>();
                let (ma, mb) = (with_matrix(&batch[0]), with_matrix(&batch[1]));
                (self.operand(lhs, Some(&ma), nb + 2, None)?, self.operand(rhs, Some(&mb), nb + 2, None)?)
            }
            _ => (self.expr(lhs)?, self.expr(rhs)?),
        };
        Ok(format!("({a} @ {b})"))
    }

    fn elementwise(&mut self, e: &TExpr, func: Elementwise, args: &[TExpr], align: &[Vec<usize>]) -> Result<String, EmitError> {
        let missing = self.invalid("a missing operand");
        let arg = |i: usize| args.get(i).ok_or_else(|| missing.clone());
        if let Some(f) = unary_function(func) {
            let x = arg(0)?;
            return Ok(match &e.ty {
                Type::Tensor(t) => {
                    let s = self.operand(x, None, 0, Some(t.dtype))?;
                    format!("{f}({})", strip_parens(&s))
                }
                _ => format!("_host({f}, {})", strip_parens(&self.expr(x)?)),
            });
        }
        let all_host = args.iter().all(|a| tensor(&a.ty).is_none());
        match func {
            Elementwise::ToFloat | Elementwise::ToInt => {
                let s = self.expr(arg(0)?)?;
                Ok(match (&e.ty, &arg(0)?.ty) {
                    (Type::Tensor(t), Type::Tensor(x)) if t.dtype != x.dtype => cast(&s, t.dtype),
                    (Type::Tensor(_), _) => s,
                    _ if func == Elementwise::ToFloat => format!("float({})", strip_parens(&s)),
                    _ => format!("int({})", strip_parens(&s)),
                })
            }
            Elementwise::Pow | Elementwise::Maximum | Elementwise::Minimum if all_host => {
                let (a, b) = (self.expr(arg(0)?)?, self.expr(arg(1)?)?);
                let (a, b) = (strip_parens(&a), strip_parens(&b));
                let int = matches!(e.ty, Type::Host(HostType::Int, _));
                Ok(match func {
                    Elementwise::Maximum if int => format!("max({a}, {b})"),
                    Elementwise::Minimum if int => format!("min({a}, {b})"),
                    Elementwise::Maximum => format!("_host(torch.maximum, {a}, {b})"),
                    Elementwise::Minimum => format!("_host(torch.minimum, {a}, {b})"),
                    _ => format!("_host(torch.pow, {a}, {b})"),
                })
            }
            Elementwise::Pow => {
                let t = self.result_tensor(e)?;
                let (rank, dtype) = (t.rank(), Some(t.dtype));
                let a = self.operand(arg(0)?, Some(self.map(align, 0)?), rank, dtype)?;
                let b = self.operand(arg(1)?, Some(self.map(align, 1)?), rank, dtype)?;
                Ok(format!("torch.pow({}, {})", strip_parens(&a), strip_parens(&b)))
            }
            Elementwise::Maximum | Elementwise::Minimum => {
                let t = self.result_tensor(e)?;
                let (rank, dtype) = (t.rank(), t.dtype);
                let a = self.tensor_operand(arg(0)?, self.map(align, 0)?, rank, dtype)?;
                let b = self.tensor_operand(arg(1)?, self.map(align, 1)?, rank, dtype)?;
                let f = if func == Elementwise::Maximum { "torch.maximum" } else { "torch.minimum" };
                Ok(format!("{f}({}, {})", strip_parens(&a), strip_parens(&b)))
            }
            Elementwise::Clamp if all_host => {
                let (x, lo, hi) = (self.expr(arg(0)?)?, self.expr(arg(1)?)?, self.expr(arg(2)?)?);
                let clamped = format!("min(max({}, {}), {})", strip_parens(&x), strip_parens(&lo), strip_parens(&hi));
                Ok(match e.ty {
                    Type::Host(HostType::Float, _) => format!("float({clamped})"),
                    _ => clamped,
                })
            }
            Elementwise::Clamp => {
                let t = self.result_tensor(e)?;
                let (rank, dtype) = (t.rank(), t.dtype);
                let x = self.tensor_operand(arg(0)?, self.map(align, 0)?, rank, dtype)?;
                let (lo, hi) = (arg(1)?, arg(2)?);
                let lo_text = self.operand(lo, Some(self.map(align, 1)?), rank, Some(dtype))?;
                let hi_text = self.operand(hi, Some(self.map(align, 2)?), rank, Some(dtype))?;
                let (lo_host, hi_host) = (tensor(&lo.ty).is_none(), tensor(&hi.ty).is_none());
                let (x, lo_text, hi_text) = (strip_parens(&x), strip_parens(&lo_text), strip_parens(&hi_text));
                if lo_host && hi_host {
                    return Ok(format!("torch.clamp({x}, {lo_text}, {hi_text})"));
                }
                let raised = if lo_host { format!("torch.clamp({x}, min={lo_text})") } else { format!("torch.maximum({x}, {lo_text})") };
                Ok(if hi_host { format!("torch.clamp({raised}, max={hi_text})") } else { format!("torch.minimum({raised}, {hi_text})") })
            }
            Elementwise::Where => {
                let t = self.result_tensor(e)?;
                let (rank, dtype) = (t.rank(), t.dtype);
                let cond = self.tensor_operand(arg(0)?, self.map(align, 0)?, rank, DType::Bool)?;
                let a = self.operand(arg(1)?, Some(self.map(align, 1)?), rank, Some(dtype))?;
                let b = self.operand(arg(2)?, Some(self.map(align, 2)?), rank, Some(dtype))?;
                Ok(format!("torch.where({}, {}, {})", strip_parens(&cond), strip_parens(&a), strip_parens(&b)))
            }
            Elementwise::MaskedFill => {
                let t = self.result_tensor(e)?;
                let rank = t.rank();
                let x = self.operand(arg(0)?, Some(self.map(align, 0)?), rank, None)?;
                let mask = self.tensor_operand(arg(1)?, self.map(align, 1)?, rank, DType::Bool)?;
                let value = self.expr(arg(2)?)?;
                Ok(format!("{x}.masked_fill({}, {})", strip_parens(&mask), strip_parens(&value)))
            }
            _ => Err(self.invalid("an unknown elementwise built-in")),
        }
    }

    /// zeros, ones, full and arange, on the arguments' device.
    fn construct(&mut self, e: &TExpr, func: Constructor, value: Option<&TExpr>) -> Result<String, EmitError> {
        let t = self.result_tensor(e)?;
        let sizes: Vec<_> = t.axes.iter().map(|a| a.size).collect();
        let dtype = dtype_name(t.dtype);
        self.needs_dev = true;
        Ok(match func {
            Constructor::Arange => {
                let n = sizes.first().map(|&s| self.size(s)).ok_or_else(|| self.invalid("arange without an axis"))?;
                format!("torch.arange({n}, dtype={dtype}, device=_dev)")
            }
            Constructor::Zeros | Constructor::Ones => {
                let shape = self.shape(&sizes);
                let f = if func == Constructor::Zeros { "torch.zeros" } else { "torch.ones" };
                format!("{f}({shape}, dtype={dtype}, device=_dev)")
            }
            Constructor::Full => {
                let v = value.ok_or_else(|| self.invalid("full without a value"))?;
                let text = self.expr(v)?;
                let shape = self.shape(&sizes);
                match &v.ty {
                    Type::Tensor(vt) => {
                        let text = if vt.dtype == t.dtype { text } else { cast(&text, t.dtype) };
                        format!("{text}.expand({shape})")
                    }
                    _ => format!("torch.full({shape}, {}, dtype={dtype}, device=_dev)", strip_parens(&text)),
                }
            }
        })
    }

    /// A call of a module function: positional arguments, weights by keyword.
    fn call(&mut self, function: usize, args: &[TExpr]) -> Result<String, EmitError> {
        let cx = self.cx;
        let callee = cx.module.functions.get(function).ok_or_else(|| self.invalid("a call of an unknown function"))?;
        let name = cx.functions.get(function).ok_or_else(|| self.invalid("a call of an unknown function"))?;
        let mut parts = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            let text = self.expr(arg)?;
            let param = callee.bindings.get(i).map(|b| &b.ty);
            parts.push(match (param, &arg.ty) {
                (Some(Type::Tensor(p)), Type::Host(..)) => self.host_tensor(&text, p.dtype),
                _ => strip_parens(&text).to_string(),
            });
        }
        for &w in cx.lists.get(function).map(Vec::as_slice).unwrap_or_default() {
            let w = self.weight(w)?;
            parts.push(format!("{w}={w}"));
        }
        Ok(format!("{name}({})", parts.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_permutes_then_indexes_what_broadcasting_cannot_add() {
        assert_eq!(align("x", &[0, 1], 2), "x");
        assert_eq!(align("x", &[1, 0], 2), "x.permute(1, 0)");
        assert_eq!(align("x", &[2, 3], 4), "x");
        assert_eq!(align("x", &[0, 1], 3), "x[:, :, None]");
        assert_eq!(align("x", &[0, 2], 3), "x[:, None]");
        assert_eq!(align("x", &[1], 3), "x[:, None]");
        assert_eq!(align("x", &[2, 0], 4), "x.permute(1, 0)[:, None, :, None]");
        assert_eq!(align("x", &[], 3), "x");
    }

    #[test]
    fn float_literals_are_exact() {
        assert_eq!(float_literal(1e-5), "1e-5");
        assert_eq!(float_literal(0.1), "0.1");
        assert_eq!(float_literal(2.0), "2.0");
        assert_eq!(float_literal(f64::INFINITY), "math.inf");
    }
}
