//! Evaluation of a graph, node by node in topological order: simple,
//! obviously correct loops. Reductions and contractions accumulate in f64
//! (i64 for integers); every result is rounded to its node's dtype.

use crate::value::{Data, Value, round_float, wrap_int};
use nax_ir::Type;
use nax_ir::{Graph, Literal, MapFn, Op};
use nax_ops::{AlongAxis, Constructor, Elementwise, Reduction};
use nax_ops::{BinaryOp, UnaryOp};
use nax_runtime::DType;
use nax_runtime::Size;
use nax_runtime::row_major_strides as strides;
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// The sizes of one call: the value of each symbol of the graph's table.
pub struct Sizes<'a>(pub &'a [Option<u64>]);

impl Sizes<'_> {
    fn of(&self, g: &Graph, s: Size) -> Result<usize, String> {
        match g.symbols.resolve(s) {
            Size::Const(v) => usize::try_from(v).map_err(|_| format!("size {v} is too large")),
            Size::Sym(id) => self
                .0
                .get(id.0 as usize)
                .copied()
                .flatten()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| format!("the size `{}` is not known at this call", g.symbols.display(s))),
        }
    }

    fn shape(&self, g: &Graph, ty: &Type) -> Result<Vec<usize>, String> {
        match ty {
            Type::Tensor(t) => t.axes.iter().map(|a| self.of(g, a.size)).collect(),
            _ => Ok(Vec::new()),
        }
    }
}

/// Runs the graph on its inputs (in parameter order, each already in the
/// parameter's axis order) and weights.
pub fn evaluate(g: &Graph, inputs: &[Value], weights: &HashMap<String, Value>, sizes: &Sizes) -> Result<Value, String> {
    let order = petgraph::algo::toposort(&g.graph, None).map_err(|_| "the graph has a cycle".to_string())?;
    let mut values: HashMap<NodeIndex, Value> = HashMap::with_capacity(order.len());
    for n in order {
        let node = &g.graph[n];
        let args: Vec<&Value> = g.operands(n).iter().map(|o| &values[o]).collect();
        let dtype = nax_ir::value_dtype(&node.ty);
        let shape = sizes.shape(g, &node.ty)?;
        let v = match &node.op {
            Op::Input { index, name } => inputs.get(*index).cloned().ok_or_else(|| format!("no argument for `{name}`"))?,
            Op::Weight { name } => weights.get(name).cloned().ok_or_else(|| format!("no weight `{name}`"))?,
            Op::Literal(l) => match l {
                Literal::Int(v) => Value { dtype, shape, data: Data::Int(vec![*v]) }.cast(dtype),
                Literal::Float(v) => Value { dtype, shape, data: Data::Float(vec![*v]) }.cast(dtype),
                Literal::Bool(v) => Value { dtype, shape, data: Data::Bool(vec![*v]) },
            },
            Op::SizeValue(s) => Value { dtype, shape, data: Data::Int(vec![sizes.of(g, *s)? as i64]) },
            Op::Map { func, maps, compute } => map(*func, maps, *compute, &args, dtype, shape),
            Op::Contract { labels, output } => contract(labels, output, &args, dtype, shape),
            Op::Reduce { op, axes } => reduce(*op, axes, args[0], dtype, shape),
            Op::Along { func, axis } => along(*func, *axis, args[0], dtype, shape),
            Op::Reshape | Op::Rename => Value { shape, ..args[0].clone() },
            Op::Permute { perm } => {
                let src = strides(&args[0].shape);
                let map: Vec<usize> = perm.iter().map(|&p| src[p]).collect();
                let index = offsets(&shape, &map);
                args[0].gather(shape, index.into_iter())
            }
            Op::Expand { map: positions } => {
                let src = strides(&args[0].shape);
                let mut map = vec![0; shape.len()];
                for (j, &r) in positions.iter().enumerate() {
                    if args[0].shape[j] != 1 {
                        map[r] = src[j];
                    }
                }
                let index = offsets(&shape, &map);
                args[0].gather(shape, index.into_iter())
            }
            Op::Select { axis, index, .. } => {
                let src = strides(&args[0].shape);
                let map: Vec<usize> = (0..args[0].shape.len()).filter(|&j| j != *axis).map(|j| src[j]).collect();
                let base = index * src[*axis];
                let idx = offsets(&shape, &map);
                args[0].gather(shape, idx.into_iter().map(|i| i + base))
            }
            Op::Construct { func } => {
                let n: usize = shape.iter().product();
                match func {
                    Constructor::Zeros => Value::from_f64(dtype, shape, std::iter::repeat_n(0.0, n)),
                    Constructor::Ones => Value::from_f64(dtype, shape, std::iter::repeat_n(1.0, n)),
                    Constructor::Full => {
                        let v = args[0].f64_at(0);
                        Value::from_f64(dtype, shape, std::iter::repeat_n(v, n))
                    }
                    Constructor::Arange => Value { dtype, shape, data: Data::Int((0..n as i64).collect()) },
                }
            }
        };
        values.insert(n, v);
    }
    values.remove(&g.output).ok_or_else(|| "the graph has no output".to_string())
}

/// The flat source offset of every result element, given each result axis's source stride.
fn offsets(shape: &[usize], stride_of_axis: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    let mut off = 0usize;
    for _ in 0..n {
        out.push(off);
        for a in (0..shape.len()).rev() {
            idx[a] += 1;
            off += stride_of_axis[a];
            if idx[a] < shape[a] {
                break;
            }
            off -= stride_of_axis[a] * idx[a];
            idx[a] = 0;
        }
    }
    out
}

/// One element in the domain an operation computes in.
#[derive(Clone, Copy)]
enum Scalar {
    F(f64),
    I(i64),
    B(bool),
}

fn load(v: &Value, i: usize, compute: DType) -> Scalar {
    if compute.is_float() {
        Scalar::F(round_float(compute, v.f64_at(i)))
    } else if compute == DType::Bool {
        Scalar::B(v.bool_at(i))
    } else {
        Scalar::I(v.i64_at(i))
    }
}

fn as_f(s: Scalar) -> f64 {
    match s {
        Scalar::F(x) => x,
        Scalar::I(x) => x as f64,
        Scalar::B(b) => f64::from(u8::from(b)),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// torch's maximum/minimum/clamp propagate nan.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

fn apply(func: MapFn, compute: DType, a: &[Scalar]) -> Scalar {
    use Elementwise as E;
    match (func, a) {
        (MapFn::Unary(UnaryOp::Not), [x]) => Scalar::B(!matches!(x, Scalar::B(true))),
        (MapFn::Unary(UnaryOp::Neg), [Scalar::I(x)]) => Scalar::I(wrap_int(compute, x.wrapping_neg())),
        (MapFn::Unary(UnaryOp::Neg), [x]) => Scalar::F(-as_f(*x)),
        (MapFn::Binary(op), [x, y]) => binary(op, compute, *x, *y),
        (MapFn::Builtin(E::Where), [c, x, y]) => {
            if matches!(c, Scalar::B(true)) {
                *x
            } else {
                *y
            }
        }
        (MapFn::Builtin(E::MaskedFill), [x, m, v]) => {
            if matches!(m, Scalar::B(true)) {
                *v
            } else {
                *x
            }
        }
        (MapFn::Builtin(E::Clamp), [x, lo, hi]) => match (x, lo, hi) {
            (Scalar::I(x), Scalar::I(lo), Scalar::I(hi)) => Scalar::I((*x).max(*lo).min(*hi)),
            _ => Scalar::F(nan_min(nan_max(as_f(*x), as_f(*lo)), as_f(*hi))),
        },
        (MapFn::Builtin(E::Maximum), [Scalar::I(x), Scalar::I(y)]) => Scalar::I(*x.max(y)),
        (MapFn::Builtin(E::Minimum), [Scalar::I(x), Scalar::I(y)]) => Scalar::I(*x.min(y)),
        (MapFn::Builtin(E::Maximum), [x, y]) => Scalar::F(nan_max(as_f(*x), as_f(*y))),
        (MapFn::Builtin(E::Minimum), [x, y]) => Scalar::F(nan_min(as_f(*x), as_f(*y))),
        (MapFn::Builtin(E::Pow), [Scalar::I(x), Scalar::I(y)]) => {
            Scalar::I(if *y < 0 { 0 } else { wrap_int(compute, x.wrapping_pow(u32::try_from(*y).unwrap_or(u32::MAX))) })
        }
        (MapFn::Builtin(E::Pow), [x, y]) => Scalar::F(as_f(*x).powf(as_f(*y))),
        (MapFn::Builtin(E::ToFloat), [x]) => Scalar::F(as_f(*x)),
        (MapFn::Builtin(E::ToInt), [x]) => match x {
            Scalar::F(v) => Scalar::I(*v as i64),
            other => Scalar::I(as_f(*other) as i64),
        },
        (MapFn::Builtin(f), [x]) => Scalar::F(unary(f, as_f(*x))),
        _ => Scalar::F(f64::NAN),
    }
}

fn unary(f: Elementwise, x: f64) -> f64 {
    use Elementwise as E;
    match f {
        E::Exp => x.exp(),
        E::Log => x.ln(),
        E::Log1p => x.ln_1p(),
        E::Expm1 => x.exp_m1(),
        E::Sqrt => x.sqrt(),
        E::Rsqrt => 1.0 / x.sqrt(),
        E::Abs => x.abs(),
        E::Sin => x.sin(),
        E::Cos => x.cos(),
        E::Tanh => x.tanh(),
        E::Erf => libm::erf(x),
        E::Floor => x.floor(),
        E::Ceil => x.ceil(),
        E::Round => x.round_ties_even(),
        E::Sign => {
            if x.is_nan() {
                x
            } else if x == 0.0 {
                0.0
            } else {
                x.signum()
            }
        }
        E::Sigmoid => sigmoid(x),
        E::Relu => {
            if x.is_nan() {
                x
            } else {
                x.max(0.0)
            }
        }
        E::Gelu => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        E::Silu => x * sigmoid(x),
        E::Softplus => {
            if x > 20.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        _ => f64::NAN,
    }
}

/// A comparison of two values of one domain (`None` for other operators).
fn compare<T: PartialOrd>(op: BinaryOp, a: T, b: T) -> Option<bool> {
    Some(match op {
        BinaryOp::Eq => a == b,
        BinaryOp::Ne => a != b,
        BinaryOp::Lt => a < b,
        BinaryOp::Le => a <= b,
        BinaryOp::Gt => a > b,
        BinaryOp::Ge => a >= b,
        _ => return None,
    })
}

fn binary(op: BinaryOp, compute: DType, x: Scalar, y: Scalar) -> Scalar {
    use BinaryOp as B;
    match (x, y) {
        (Scalar::I(a), Scalar::I(b)) => match op {
            B::Add => Scalar::I(wrap_int(compute, a.wrapping_add(b))),
            B::Sub => Scalar::I(wrap_int(compute, a.wrapping_sub(b))),
            B::Mul => Scalar::I(wrap_int(compute, a.wrapping_mul(b))),
            B::Div => Scalar::F(a as f64 / b as f64),
            _ => Scalar::B(compare(op, a, b).unwrap_or(false)),
        },
        (Scalar::B(a), Scalar::B(b)) => match op {
            B::And => Scalar::B(a && b),
            B::Or => Scalar::B(a || b),
            _ => match compare(op, a, b) {
                Some(c) => Scalar::B(c),
                None => binary(op, compute, Scalar::I(i64::from(a)), Scalar::I(i64::from(b))),
            },
        },
        _ => {
            let (a, b) = (as_f(x), as_f(y));
            match op {
                B::Add => Scalar::F(a + b),
                B::Sub => Scalar::F(a - b),
                B::Mul => Scalar::F(a * b),
                B::Div => Scalar::F(a / b),
                _ => Scalar::B(compare(op, a, b).unwrap_or(false)),
            }
        }
    }
}

fn store(dtype: DType, shape: Vec<usize>, results: Vec<Scalar>) -> Value {
    let data = if dtype.is_float() {
        Data::Float(results.into_iter().map(|s| round_float(dtype, as_f(s))).collect())
    } else if dtype == DType::Bool {
        Data::Bool(results.into_iter().map(|s| matches!(s, Scalar::B(true)) || matches!(s, Scalar::I(v) if v != 0)).collect())
    } else {
        Data::Int(
            results
                .into_iter()
                .map(|s| match s {
                    Scalar::I(v) => wrap_int(dtype, v),
                    other => wrap_int(dtype, as_f(other) as i64),
                })
                .collect(),
        )
    };
    Value { dtype, shape, data }
}

fn map(func: MapFn, maps: &[Vec<usize>], compute: DType, args: &[&Value], dtype: DType, shape: Vec<usize>) -> Value {
    let n: usize = shape.iter().product();
    let operand_offsets: Vec<Vec<usize>> = args
        .iter()
        .zip(maps)
        .map(|(a, m)| {
            let src = strides(&a.shape);
            let mut per_axis = vec![0; shape.len()];
            for (j, &r) in m.iter().enumerate() {
                if a.shape[j] != 1 && r < per_axis.len() {
                    per_axis[r] = src[j];
                }
            }
            if a.len() == 1 { vec![0; n] } else { offsets(&shape, &per_axis) }
        })
        .collect();
    // The operation's own computing dtype for each operand (a mask stays a mask).
    let operand_compute: Vec<DType> =
        args.iter().map(|a| if a.dtype == DType::Bool && compute != DType::Bool && !is_numeric_use(func) { DType::Bool } else { compute }).collect();
    let mut results = Vec::with_capacity(n);
    let mut scalars = Vec::with_capacity(args.len());
    for i in 0..n {
        scalars.clear();
        for ((a, at), &c) in args.iter().zip(&operand_offsets).zip(&operand_compute) {
            scalars.push(load(a, at[i], c));
        }
        results.push(apply(func, compute, &scalars));
    }
    store(dtype, shape, results)
}

/// Whether the function reads mask operands as numbers.
fn is_numeric_use(func: MapFn) -> bool {
    matches!(func, MapFn::Builtin(Elementwise::ToFloat | Elementwise::ToInt))
}

fn contract(labels: &[Vec<usize>], output: &[usize], args: &[&Value], dtype: DType, shape: Vec<usize>) -> Value {
    let n_labels = labels.iter().flatten().chain(output).copied().max().map_or(0, |m| m + 1);
    // A label's extent; an operand axis of size 1 broadcasts (stride 0), as in torch.matmul.
    let mut extent = vec![1usize; n_labels];
    for (ls, a) in labels.iter().zip(args) {
        for (j, &l) in ls.iter().enumerate() {
            if a.shape[j] != 1 {
                extent[l] = a.shape[j];
            }
        }
    }
    let summed: Vec<usize> = (0..n_labels).filter(|l| !output.contains(l)).collect();
    let order: Vec<usize> = output.iter().copied().chain(summed.iter().copied()).collect();
    let order_shape: Vec<usize> = order.iter().map(|&l| extent[l]).collect();
    // Each operand's step along each axis of the order (0 where it does not
    // have the label, or broadcasts it).
    let steps: Vec<Vec<usize>> = args
        .iter()
        .zip(labels)
        .map(|(a, ls)| {
            let src = strides(&a.shape);
            order.iter().map(|&l| ls.iter().enumerate().filter(|(j, x)| **x == l && a.shape[*j] != 1).map(|(j, _)| src[j]).sum()).collect()
        })
        .collect();
    let out_len: usize = shape.iter().product();
    let inner: usize = summed.iter().map(|&l| extent[l]).product();
    let integer = !dtype.is_float();
    let mut f_acc = vec![0.0f64; if integer { 0 } else { out_len }];
    let mut i_acc = vec![0i64; if integer { out_len } else { 0 }];
    // The operands' offsets walk the order's positions one by one (output
    // positions, then the summed labels'), never stored for the whole
    // product: the interpreter's memory stays the size of its values.
    let mut index = vec![0usize; order_shape.len()];
    let mut at = vec![0usize; args.len()];
    for o in 0..out_len {
        for _ in 0..inner {
            if integer {
                let p = args.iter().zip(&at).fold(1i64, |p, (a, &i)| p.wrapping_mul(a.i64_at(i)));
                i_acc[o] = i_acc[o].wrapping_add(p);
            } else {
                f_acc[o] += args.iter().zip(&at).map(|(a, &i)| a.f64_at(i)).product::<f64>();
            }
            for d in (0..order_shape.len()).rev() {
                index[d] += 1;
                for (k, off) in at.iter_mut().enumerate() {
                    *off += steps[k][d];
                }
                if index[d] < order_shape[d] {
                    break;
                }
                for (k, off) in at.iter_mut().enumerate() {
                    *off -= steps[k][d] * index[d];
                }
                index[d] = 0;
            }
        }
    }
    if integer {
        Value { dtype, shape, data: Data::Int(i_acc.into_iter().map(|v| wrap_int(dtype, v)).collect()) }
    } else {
        Value::from_f64(dtype, shape, f_acc.into_iter())
    }
}

fn reduce(op: Reduction, axes: &[usize], x: &Value, dtype: DType, shape: Vec<usize>) -> Value {
    let kept: Vec<usize> = (0..x.shape.len()).filter(|a| !axes.contains(a)).collect();
    let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let order_shape: Vec<usize> = order.iter().map(|&a| x.shape[a]).collect();
    let src = strides(&x.shape);
    let idx = offsets(&order_shape, &order.iter().map(|&a| src[a]).collect::<Vec<_>>());
    let out_len: usize = shape.iter().product();
    let inner: usize = axes.iter().map(|&a| x.shape[a]).product();
    let integer_sum = !dtype.is_float() && dtype != DType::Bool;
    let mut out = Vec::with_capacity(out_len);
    for o in 0..out_len {
        let items = (0..inner).map(|s| idx[o * inner + s]);
        let v = if integer_sum && !x.dtype.is_float() {
            let it = items.map(|i| x.i64_at(i));
            Scalar::I(match op {
                Reduction::Sum | Reduction::Mean => it.fold(0i64, i64::wrapping_add),
                Reduction::Prod => it.fold(1i64, i64::wrapping_mul),
                Reduction::Max => it.max().unwrap_or(i64::MIN),
                Reduction::Min => it.min().unwrap_or(i64::MAX),
            })
        } else if dtype == DType::Bool {
            let mut it = items.map(|i| x.bool_at(i));
            Scalar::B(match op {
                Reduction::Min => it.all(|b| b),
                _ => it.any(|b| b),
            })
        } else {
            let it = items.map(|i| x.f64_at(i));
            Scalar::F(match op {
                // From +0.0, as the native back ends and PyTorch start (Rust's
                // `sum` starts from -0.0, which an empty sum would give).
                Reduction::Sum => it.fold(0.0, |a, b| a + b),
                Reduction::Mean => it.fold(0.0, |a, b| a + b) / inner as f64,
                Reduction::Prod => it.product(),
                Reduction::Max => it.fold(f64::NEG_INFINITY, nan_max),
                Reduction::Min => it.fold(f64::INFINITY, nan_min),
            })
        };
        out.push(v);
    }
    store(dtype, shape, out)
}

fn along(func: AlongAxis, axis: usize, x: &Value, dtype: DType, shape: Vec<usize>) -> Value {
    let len = x.shape[axis];
    let stride = strides(&x.shape)[axis];
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut out = vec![0.0; if func == AlongAxis::LogSumExp { outer * inner } else { x.len() }];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| o * len * inner + k * stride + i;
            let m = (0..len).map(|k| x.f64_at(at(k))).fold(f64::NEG_INFINITY, nan_max);
            let sum: f64 = (0..len).map(|k| (x.f64_at(at(k)) - m).exp()).sum();
            match func {
                AlongAxis::Softmax => (0..len).for_each(|k| out[at(k)] = (x.f64_at(at(k)) - m).exp() / sum),
                AlongAxis::LogSoftmax => (0..len).for_each(|k| out[at(k)] = x.f64_at(at(k)) - m - sum.ln()),
                AlongAxis::LogSumExp => out[o * inner + i] = if m.is_infinite() { m } else { m + sum.ln() },
            }
        }
    }
    Value::from_f64(dtype, shape, out.into_iter())
}
