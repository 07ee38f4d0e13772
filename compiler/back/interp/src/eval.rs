//! Evaluation of a graph, node by node in topological order: simple,
//! obviously correct loops. Reductions and contractions accumulate in f64
//! (i64 for integers); every result is rounded to its node's dtype.

use crate::value::{Data, Value, collect, held_bytes, room, round_float, wrap_int};
use nax_ir::Type;
use nax_ir::{Graph, Literal, MapFn, Op};
use nax_ops::{AlongAxis, Constructor, Elementwise, Reduction};
use nax_ops::{BinaryOp, UnaryOp};
use nax_runtime::Size;
use nax_runtime::row_major_strides as strides;
use nax_runtime::{DType, RuntimeError};
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// The sizes of one call: the value of each symbol of the graph's table.
pub struct Sizes<'a>(pub &'a [Option<u64>]);

impl Sizes<'_> {
    fn of(&self, g: &Graph, s: Size) -> Result<usize, RuntimeError> {
        match g.symbols.resolve(s) {
            Size::Const(v) => usize::try_from(v).map_err(|_| error(format!("size {v} is too large"))),
            Size::Sym(id) => self
                .0
                .get(id.0 as usize)
                .copied()
                .flatten()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| error(format!("the size `{}` is not known at this call", g.symbols.display(s)))),
        }
    }

    fn shape(&self, g: &Graph, ty: &Type) -> Result<Vec<usize>, RuntimeError> {
        match ty {
            Type::Tensor(t) => t.axes.iter().map(|a| self.of(g, a.size)).collect(),
            _ => Ok(Vec::new()),
        }
    }

    /// The size of axis `axis` of a value of this type (1 where unknown).
    fn extent(&self, g: &Graph, ty: &Type, axis: usize) -> u128 {
        match ty {
            Type::Tensor(t) => t.axes.get(axis).map_or(1, |a| self.of(g, a.size).map_or(1, |v| v as u128)),
            _ => 1,
        }
    }

    /// The elements of a value of this type (saturating).
    fn elements(&self, g: &Graph, ty: &Type) -> u128 {
        let rank = if let Type::Tensor(t) = ty { t.axes.len() } else { 0 };
        (0..rank).fold(1u128, |n, a| n.saturating_mul(self.extent(g, ty, a)))
    }

    /// The bytes the interpreter holds for a value of this type (saturating).
    fn held(&self, g: &Graph, ty: &Type) -> u128 {
        self.elements(g, ty).saturating_mul(held_bytes(nax_ir::value_dtype(ty)))
    }
}

/// The interpreter's error for what is not a memory failure.
fn error(message: String) -> RuntimeError {
    RuntimeError::Interpreter { message }
}

/// The elements of a shape (0 when some axis is empty; an error when
/// they cannot be counted).
fn count(shape: &[usize]) -> Result<usize, RuntimeError> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape.iter().try_fold(1usize, |n, &e| n.checked_mul(e)).ok_or_else(|| error(format!("a value of shape {shape:?} has too many elements to address")))
}

/// The order nodes are evaluated in, each one's operands, and the
/// position of each node's last use (the output's is never): a value is
/// dropped after its last use, and a reshape or rename that is its
/// operand's last use takes the operand's storage instead of copying it.
struct Schedule {
    order: Vec<NodeIndex>,
    operands: Vec<Vec<NodeIndex>>,
    last_use: HashMap<NodeIndex, usize>,
}

impl Schedule {
    fn new(g: &Graph) -> Result<Schedule, RuntimeError> {
        let order = petgraph::algo::toposort(&g.graph, None).map_err(|_| error("the graph has a cycle".into()))?;
        let operands: Vec<Vec<NodeIndex>> = order.iter().map(|&n| g.operands(n)).collect();
        let mut last_use = HashMap::new();
        for (position, ops) in operands.iter().enumerate() {
            for &o in ops {
                last_use.insert(o, position);
            }
        }
        for output in g.output_nodes() {
            last_use.insert(output, usize::MAX);
        }
        Ok(Schedule { order, operands, last_use })
    }

    /// Whether the node at `position` takes its one operand's storage.
    fn reuses(&self, g: &Graph, position: usize) -> bool {
        let ops = &self.operands[position];
        matches!(g.graph[self.order[position]].op, Op::Reshape | Op::Rename) && ops.len() == 1 && self.last_use.get(&ops[0]) == Some(&position)
    }

    /// The operands whose last use is at `position`.
    fn dead_after(&self, position: usize) -> impl Iterator<Item = NodeIndex> + '_ {
        self.operands[position].iter().copied().filter(move |o| self.last_use.get(o) == Some(&position))
    }
}

/// Runs the graph on its inputs (in parameter order, each already in the
/// parameter's axis order) and weights, which it takes over; values are
/// dropped after their last use. Gives the results in declared order.
pub fn evaluate(g: &Graph, inputs: Vec<Value>, mut weights: HashMap<String, Value>, sizes: &Sizes) -> Result<Vec<Value>, RuntimeError> {
    let schedule = Schedule::new(g)?;
    let mut inputs: Vec<Option<Value>> = inputs.into_iter().map(Some).collect();
    let mut values: HashMap<NodeIndex, Value> = HashMap::with_capacity(schedule.order.len());
    for (position, &n) in schedule.order.iter().enumerate() {
        let node = &g.graph[n];
        let dtype = nax_ir::value_dtype(&node.ty);
        let shape = sizes.shape(g, &node.ty)?;
        let ops = &schedule.operands[position];
        let v = if schedule.reuses(g, position) {
            let operand = values.remove(&ops[0]).ok_or_else(|| error("an operand was dropped before its last use".into()))?;
            Value { shape, ..operand }
        } else {
            let args: Vec<&Value> =
                ops.iter().map(|o| values.get(o).ok_or_else(|| error("an operand was dropped before its last use".into()))).collect::<Result<_, _>>()?;
            match &node.op {
                Op::Input { index, name } => inputs.get_mut(*index).and_then(Option::take).ok_or_else(|| error(format!("no argument for `{name}`")))?,
                Op::Weight { name } => weights.remove(name).ok_or_else(|| error(format!("no weight `{name}`")))?,
                Op::Take { axis } => take(g, n, *axis, &args, shape)?,
                Op::ScatterAdd { axis } => scatter_add(g, n, *axis, &args, dtype, shape)?,
                op => compute(g, sizes, op, &args, dtype, shape)?,
            }
        };
        // A host scalar given a tensor's type (`rearrange(1.0, -> 1)`, a
        // returned literal) takes the tensor's dtype, as compiled code stores it.
        let v = if matches!(node.op, Op::Reshape | Op::Rename) && v.dtype != dtype { v.cast(dtype)? } else { v };
        for dead in schedule.dead_after(position) {
            values.remove(&dead);
        }
        values.insert(n, v);
    }
    // A node returned twice is cloned for all but its last place.
    let outputs: Vec<NodeIndex> = g.output_nodes().collect();
    let mut results = Vec::with_capacity(outputs.len());
    for (i, output) in outputs.iter().enumerate() {
        let value = if outputs[i + 1..].contains(output) { values.get(output).cloned() } else { values.remove(output) };
        results.push(value.ok_or_else(|| error("the graph has no output".into()))?);
    }
    Ok(results)
}

/// What [`evaluate`] holds at its peak at these sizes, in bytes: every
/// input and weight from the start, then each node's value from its
/// evaluation to its operands' last use (a reshape or rename that takes
/// its operand's storage adds nothing).
pub fn peak(g: &Graph, sizes: &Sizes) -> Result<u128, RuntimeError> {
    let schedule = Schedule::new(g)?;
    let held = |n: NodeIndex| sizes.held(g, &g.graph[n].ty);
    let is_leaf = |n: NodeIndex| matches!(g.graph[n].op, Op::Input { .. } | Op::Weight { .. });
    let mut live: u128 = schedule.order.iter().filter(|&&n| is_leaf(n)).map(|&n| held(n)).fold(0, u128::saturating_add);
    let mut peak = live;
    for (position, &n) in schedule.order.iter().enumerate() {
        if !is_leaf(n) && !schedule.reuses(g, position) {
            live = live.saturating_add(held(n));
            peak = peak.max(live);
        }
        for dead in schedule.dead_after(position) {
            if !(schedule.reuses(g, position) && schedule.operands[position][0] == dead) {
                live = live.saturating_sub(held(dead));
            }
        }
    }
    Ok(peak)
}

/// The most iterations any one node's evaluation runs at these sizes: a
/// contraction's output positions times its summed ones, a reduction's or
/// softmax's input elements, another node's output elements.
pub fn work(g: &Graph, sizes: &Sizes) -> u128 {
    g.graph
        .node_indices()
        .map(|n| {
            let node = &g.graph[n];
            let operands = g.operands(n);
            let input = |k: usize| operands.get(k).map_or(1, |&o| sizes.elements(g, &g.graph[o].ty));
            match &node.op {
                Op::Contract { labels, output } => {
                    let mut summed: HashMap<usize, u128> = HashMap::new();
                    for (ls, &o) in labels.iter().zip(&operands) {
                        for (j, &l) in ls.iter().enumerate() {
                            if !output.contains(&l) {
                                summed.insert(l, sizes.extent(g, &g.graph[o].ty, j));
                            }
                        }
                    }
                    summed.values().fold(sizes.elements(g, &node.ty), |w, &e| w.saturating_mul(e))
                }
                Op::Reduce { .. } | Op::Along { .. } => input(0),
                _ => sizes.elements(g, &node.ty),
            }
        })
        .max()
        .unwrap_or(0)
}

/// The value of one operation that is not an input or a weight.
fn compute(g: &Graph, sizes: &Sizes, op: &Op, args: &[&Value], dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    Ok(match op {
        Op::Input { .. } | Op::Weight { .. } | Op::Take { .. } | Op::ScatterAdd { .. } => {
            return Err(error("an input or a gather is not computed here".into()));
        }
        Op::Literal(l) => match l {
            Literal::Int(v) => Value { dtype, shape, data: Data::Int(vec![*v]) }.cast(dtype)?,
            Literal::Float(v) => Value { dtype, shape, data: Data::Float(vec![*v]) }.cast(dtype)?,
            Literal::Bool(v) => Value { dtype, shape, data: Data::Bool(vec![*v]) },
        },
        Op::SizeValue(s) => Value { dtype, shape, data: Data::Int(vec![sizes.of(g, *s)? as i64]) },
        Op::Map { func, maps, compute } => map(*func, maps, *compute, args, dtype, shape)?,
        Op::Contract { labels, output } => contract(&g.name, labels, output, args, dtype, shape)?,
        Op::Reduce { op, axes } => reduce(*op, axes, args[0], dtype, shape)?,
        Op::Along { func, axis } => along(*func, *axis, args[0], dtype, shape)?,
        Op::Reshape | Op::Rename => Value { shape, ..args[0].try_clone()? },
        Op::Permute { perm } => {
            let src = strides(&args[0].shape);
            let map: Vec<usize> = perm.iter().map(|&p| src[p]).collect();
            let index = Offsets::new(&shape, &map)?;
            args[0].gather(shape, index)?
        }
        Op::Expand { map: positions } => {
            let src = strides(&args[0].shape);
            let mut map = vec![0; shape.len()];
            for (j, &r) in positions.iter().enumerate() {
                if args[0].shape[j] != 1 {
                    map[r] = src[j];
                }
            }
            let index = Offsets::new(&shape, &map)?;
            args[0].gather(shape, index)?
        }
        Op::Select { axis, index, .. } => {
            let src = strides(&args[0].shape);
            let map: Vec<usize> = (0..args[0].shape.len()).filter(|&j| j != *axis).map(|j| src[j]).collect();
            let base = index * src[*axis];
            let idx = Offsets::new(&shape, &map)?;
            args[0].gather(shape, idx.map(|i| i + base))?
        }
        Op::Slice { axis, start, step } => {
            let src = strides(&args[0].shape);
            let mut map = src.clone();
            map[*axis] = src[*axis] * *step as usize;
            let base = sizes.of(g, *start)? * src[*axis];
            let idx = Offsets::new(&shape, &map)?;
            args[0].gather(shape, idx.map(|i| i + base))?
        }
        Op::Concat { axis } => {
            // Row-major operands: each outer position takes a contiguous block of every operand in turn.
            let outer = count(&shape[..*axis])?;
            let blocks: Vec<usize> = args.iter().map(|a| count(&a.shape[*axis..])).collect::<Result<_, _>>()?;
            let mut data = Data::with_capacity(dtype, count(&shape)?)?;
            for o in 0..outer {
                for (a, &b) in args.iter().zip(&blocks) {
                    let range = o * b..(o + 1) * b;
                    match (&mut data, &a.data) {
                        (Data::Float(d), Data::Float(s)) => d.extend_from_slice(&s[range]),
                        (Data::Int(d), Data::Int(s)) => d.extend_from_slice(&s[range]),
                        (Data::Bool(d), Data::Bool(s)) => d.extend_from_slice(&s[range]),
                        _ => return Err(error("concat's operands differ in dtype".into())),
                    }
                }
            }
            Value { dtype, shape, data }
        }
        Op::Scan { op, axis } => scan(*op, *axis, args[0], dtype, shape)?,
        Op::ArgReduce { op, axis } => arg_reduce(*op, *axis, args[0], shape)?,
        Op::Exchange(_) => return Err(error("an exchange between processes reached the interpreter (a sharded function's stages hold none)".into())),
        Op::Construct { func } => {
            let n = count(&shape)?;
            let mut data = Data::with_capacity(dtype, n)?;
            let fill = match func {
                Constructor::Zeros => 0.0,
                Constructor::Ones => 1.0,
                Constructor::Full => args[0].f64_at(0),
                Constructor::Arange => {
                    return Ok(Value { dtype, shape, data: Data::Int(collect((0..n).map(|i| i as i64))?) });
                }
            };
            match &mut data {
                Data::Float(v) => v.extend(std::iter::repeat_n(round_float(dtype, fill), n)),
                Data::Int(v) => v.extend(std::iter::repeat_n(wrap_int(dtype, fill as i64), n)),
                Data::Bool(v) => v.extend(std::iter::repeat_n(fill != 0.0, n)),
            }
            Value { dtype, shape, data }
        }
    })
}

/// The flat source offset of every result element, in row-major order of
/// the result's shape, given each result axis's source stride: walked one
/// by one, never stored for the whole value.
struct Offsets {
    shape: Vec<usize>,
    strides: Vec<usize>,
    index: Vec<usize>,
    at: usize,
    left: usize,
}

impl Offsets {
    fn new(shape: &[usize], stride_of_axis: &[usize]) -> Result<Offsets, RuntimeError> {
        Ok(Offsets { shape: shape.to_vec(), strides: stride_of_axis.to_vec(), index: vec![0; shape.len()], at: 0, left: count(shape)? })
    }
}

impl Iterator for Offsets {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let out = self.at;
        for a in (0..self.shape.len()).rev() {
            self.index[a] += 1;
            self.at += self.strides[a];
            if self.index[a] < self.shape[a] {
                break;
            }
            self.at -= self.strides[a] * self.index[a];
            self.index[a] = 0;
        }
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Offsets {}

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

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` for negative x (no overflow).
fn sigmoid(x: f64) -> f64 {
    if x < 0.0 {
        let e = x.exp();
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + (-x).exp())
    }
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
        // Through erfc: `1 + erf` cancels for negative x.
        E::Gelu if x == f64::NEG_INFINITY => -0.0,
        E::Gelu => 0.5 * x * libm::erfc(-x / std::f64::consts::SQRT_2),
        E::Silu if x == f64::NEG_INFINITY => -0.0,
        E::Silu => x * sigmoid(x),
        E::Softplus => {
            if x > nax_ops::SOFTPLUS_THRESHOLD {
                x
            } else {
                x.max(0.0) + (-x.abs()).exp().ln_1p()
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

/// Appends one result, rounded or converted to the value's dtype.
fn push(data: &mut Data, dtype: DType, s: Scalar) {
    match data {
        Data::Float(v) => v.push(round_float(dtype, as_f(s))),
        Data::Bool(v) => v.push(matches!(s, Scalar::B(true)) || matches!(s, Scalar::I(x) if x != 0)),
        Data::Int(v) => v.push(match s {
            Scalar::I(x) => wrap_int(dtype, x),
            other => wrap_int(dtype, as_f(other) as i64),
        }),
    }
}

fn map(func: MapFn, maps: &[Vec<usize>], compute: DType, args: &[&Value], dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let n = count(&shape)?;
    let mut operand_offsets: Vec<Offsets> = args
        .iter()
        .zip(maps)
        .map(|(a, m)| {
            let src = strides(&a.shape);
            let mut per_axis = vec![0; shape.len()];
            if a.len() != 1 {
                for (j, &r) in m.iter().enumerate() {
                    if a.shape[j] != 1 && r < per_axis.len() {
                        per_axis[r] = src[j];
                    }
                }
            }
            Offsets::new(&shape, &per_axis)
        })
        .collect::<Result<_, _>>()?;
    // The operation's own computing dtype for each operand (a mask stays a mask).
    let operand_compute: Vec<DType> =
        args.iter().map(|a| if a.dtype == DType::Bool && compute != DType::Bool && !is_numeric_use(func) { DType::Bool } else { compute }).collect();
    let mut data = Data::with_capacity(dtype, n)?;
    let mut scalars = Vec::with_capacity(args.len());
    for _ in 0..n {
        scalars.clear();
        for ((a, at), &c) in args.iter().zip(&mut operand_offsets).zip(&operand_compute) {
            scalars.push(load(a, at.next().unwrap_or(0), c));
        }
        push(&mut data, dtype, apply(func, compute, &scalars));
    }
    Ok(Value { dtype, shape, data })
}

/// Whether the function reads mask operands as numbers.
fn is_numeric_use(func: MapFn) -> bool {
    matches!(func, MapFn::Builtin(Elementwise::ToFloat | Elementwise::ToInt))
}

/// Advances the operands' offsets by one position of `shape` (row-major,
/// the last axis fastest); `steps[k][d]` is operand k's step along axis d.
fn advance(index: &mut [usize], shape: &[usize], steps: &[Vec<usize>], at: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        index[d] += 1;
        for (k, off) in at.iter_mut().enumerate() {
            *off += steps[k][d];
        }
        if index[d] < shape[d] {
            return;
        }
        for (k, off) in at.iter_mut().enumerate() {
            *off -= steps[k][d] * index[d];
        }
        index[d] = 0;
    }
}

/// A contraction: each output element the sum, in order, of the products
/// over every position of the summed labels. The loops run the output's
/// labels but its last, then the summed labels, then the output's last
/// label innermost, adding each product to its own output element (`i k
/// j` for a matrix product): every element still sums its products in
/// the order of the summed positions, as the definition does, while the
/// inner loop runs along memory. The operands' offsets are walked, never
/// stored; two float operands are read as slices.
fn contract(function: &str, labels: &[Vec<usize>], output: &[usize], args: &[&Value], dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
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
    // The loops: the output's labels but its last, the summed ones, then
    // the innermost (the output's last label; the last summed label when
    // the output is a scalar).
    let order: Vec<usize> = match output.split_last() {
        Some((&last, outer)) => outer.iter().chain(&summed).copied().chain([last]).collect(),
        None => summed.clone(),
    };
    let order_shape: Vec<usize> = order.iter().map(|&l| extent[l]).collect();
    // Each operand's step along each loop (0 where it does not have the
    // label, or broadcasts it).
    let steps: Vec<Vec<usize>> = args
        .iter()
        .zip(labels)
        .map(|(a, ls)| {
            let src = strides(&a.shape);
            order.iter().map(|&l| ls.iter().enumerate().filter(|(j, x)| **x == l && a.shape[*j] != 1).map(|(j, _)| src[j]).sum()).collect()
        })
        .collect();
    let out_len = count(&shape)?;
    let integer = !dtype.is_float();
    let mut f_acc: Vec<f64> = room(if integer { 0 } else { out_len })?;
    let mut i_acc: Vec<i64> = room(if integer { out_len } else { 0 })?;
    if integer {
        i_acc.resize(out_len, 0);
    } else {
        f_acc.resize(out_len, 0.0);
    }
    if out_len > 0 {
        nax_runtime::check_work(function, &order_shape.iter().map(|&e| e as u64).collect::<Vec<_>>())?;
    }
    let summed_count = count(&summed.iter().map(|&l| extent[l]).collect::<Vec<_>>())?;
    // With no labels at all, one product of the operands' single elements.
    let (tight, walked_shape) = order_shape.split_last().map_or((1, &[][..]), |(&t, w)| (t, w));
    if out_len > 0 && summed_count > 0 {
        // Positions of the walked loops per row of the output (the summed
        // positions), and how far the output advances along the innermost loop.
        let (rows, per_row, out_step) = if output.is_empty() { (1, count(walked_shape)?, 0) } else { (out_len / tight, summed_count, 1) };
        let walked = walked_shape.len();
        let last_steps: Vec<usize> = steps.iter().map(|s| s.get(walked).copied().unwrap_or(0)).collect();
        let floats: Option<Vec<&[f64]>> = args.iter().map(|a| if let Data::Float(v) = &a.data { Some(v.as_slice()) } else { None }).collect();
        let mut index = vec![0usize; walked];
        let mut at = vec![0usize; args.len()];
        for row in 0..rows {
            let base = row * tight;
            for _ in 0..per_row {
                match (&floats, integer) {
                    (Some(v), false) if v.len() == 2 => {
                        let (a, b, sa, sb) = (v[0], v[1], last_steps[0], last_steps[1]);
                        // A strided walk of an operand along the innermost loop.
                        fn along(x: &[f64], at: usize, step: usize, n: usize) -> impl Iterator<Item = f64> + '_ {
                            (0..n).map(move |t| x[at + t * step])
                        }
                        if out_step == 1 {
                            let row = &mut f_acc[base..base + tight];
                            match (sa, sb) {
                                // `i k j`'s inner loop: a broadcast scalar times a contiguous row
                                // (as slices: 2.4x the strided walk below on the 1024^3 product,
                                // the same sums; interleaved runs of the test build).
                                (0, 1) => row.iter_mut().zip(&b[at[1]..at[1] + tight]).for_each(|(o, &y)| *o += a[at[0]] * y),
                                (1, 0) => row.iter_mut().zip(&a[at[0]..at[0] + tight]).for_each(|(o, &x)| *o += x * b[at[1]]),
                                _ => row.iter_mut().zip(along(a, at[0], sa, tight).zip(along(b, at[1], sb, tight))).for_each(|(o, (x, y))| *o += x * y),
                            }
                        } else {
                            along(a, at[0], sa, tight).zip(along(b, at[1], sb, tight)).for_each(|(x, y)| f_acc[0] += x * y);
                        }
                    }
                    _ => {
                        for t in 0..tight {
                            let o = base * out_step + t * out_step;
                            let operands = args.iter().zip(&at).zip(&last_steps);
                            if integer {
                                let p = operands.fold(1i64, |p, ((a, &o), &s)| p.wrapping_mul(a.i64_at(o + t * s)));
                                i_acc[o] = i_acc[o].wrapping_add(p);
                            } else {
                                f_acc[o] += operands.map(|((a, &o), &s)| a.f64_at(o + t * s)).product::<f64>();
                            }
                        }
                    }
                }
                advance(&mut index, walked_shape, &steps, &mut at);
            }
        }
    }
    if integer {
        i_acc.iter_mut().for_each(|v| *v = wrap_int(dtype, *v));
        Ok(Value { dtype, shape, data: Data::Int(i_acc) })
    } else {
        Value::from_f64(dtype, shape, f_acc)
    }
}

fn reduce(op: Reduction, axes: &[usize], x: &Value, dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let kept: Vec<usize> = (0..x.shape.len()).filter(|a| !axes.contains(a)).collect();
    let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let order_shape: Vec<usize> = order.iter().map(|&a| x.shape[a]).collect();
    let src = strides(&x.shape);
    let mut offsets = Offsets::new(&order_shape, &order.iter().map(|&a| src[a]).collect::<Vec<_>>())?;
    let out_len = count(&shape)?;
    let inner = count(&axes.iter().map(|&a| x.shape[a]).collect::<Vec<_>>())?;
    let integer_sum = !dtype.is_float() && dtype != DType::Bool;
    let mut data = Data::with_capacity(dtype, out_len)?;
    for _ in 0..out_len {
        let items = (&mut offsets).take(inner);
        let v = if integer_sum && !x.dtype.is_float() {
            let it = items.map(|i| x.i64_at(i));
            Scalar::I(match op {
                Reduction::Sum | Reduction::Mean => it.fold(0i64, i64::wrapping_add),
                Reduction::Prod => it.fold(1i64, i64::wrapping_mul),
                Reduction::Max => it.max().unwrap_or(i64::MIN),
                Reduction::Min => it.min().unwrap_or(i64::MAX),
            })
        } else if dtype == DType::Bool {
            // Every item counted (`all`/`any` would stop early, and the
            // next output's items follow these in the walk).
            let trues = items.filter(|&i| x.bool_at(i)).count();
            Scalar::B(match op {
                Reduction::Min => trues == inner,
                _ => trues > 0,
            })
        } else {
            let it = items.map(|i| x.f64_at(i));
            Scalar::F(match op {
                // From +0.0, as the native back ends and PyTorch start (Rust's
                // `sum` starts from -0.0, which an empty sum would give).
                Reduction::Sum => it.fold(0.0, |a, b| a + b),
                Reduction::Mean => it.fold(0.0, |a, b| a + b) / inner as f64,
                Reduction::Prod => it.fold(1.0, |a, b| a * b),
                Reduction::Max => it.fold(f64::NEG_INFINITY, nan_max),
                Reduction::Min => it.fold(f64::INFINITY, nan_min),
            })
        };
        push(&mut data, dtype, v);
    }
    Ok(Value { dtype, shape, data })
}

fn along(func: AlongAxis, axis: usize, x: &Value, dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let len = x.shape[axis];
    let stride = strides(&x.shape)[axis];
    let outer = count(&x.shape[..axis])?;
    let inner = count(&x.shape[axis + 1..])?;
    let n = if func == AlongAxis::LogSumExp { count(&shape)? } else { x.len() };
    let mut out: Vec<f64> = room(n)?;
    out.resize(n, 0.0);
    if n == 0 {
        // Nothing to compute (the loops below could still be long: a
        // softmax over an empty axis of [0, 2^62]).
        return Value::from_f64(dtype, shape, out);
    }
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| o * len * inner + k * stride + i;
            let m = (0..len).map(|k| x.f64_at(at(k))).fold(f64::NEG_INFINITY, nan_max);
            // The log of the sum as log1p of the exponentials below the
            // maximum and its ties less one (as the native kernels compute it).
            let log_sum = || {
                let (below, ties) = (0..len).map(|k| x.f64_at(at(k)) - m).fold((0.0, 0.0), |(b, t), d| if d == 0.0 { (b, t + 1.0) } else { (b + d.exp(), t) });
                (below + (ties - 1.0)).ln_1p()
            };
            match func {
                AlongAxis::Softmax => {
                    let sum: f64 = (0..len).map(|k| (x.f64_at(at(k)) - m).exp()).sum();
                    (0..len).for_each(|k| out[at(k)] = (x.f64_at(at(k)) - m).exp() / sum)
                }
                AlongAxis::LogSoftmax => {
                    let log_sum = log_sum();
                    (0..len).for_each(|k| out[at(k)] = x.f64_at(at(k)) - m - log_sum)
                }
                AlongAxis::LogSumExp => out[o * inner + i] = if m.is_infinite() { m } else { m + log_sum() },
            }
        }
    }
    Value::from_f64(dtype, shape, out)
}

/// `take`: for each position before the axis, each index (checked to lie
/// in the axis) and each position after it, the table's element.
fn take(g: &Graph, n: NodeIndex, axis: usize, args: &[&Value], shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let (table, ids) = (args[0], args[1]);
    let len = table.shape[axis];
    let outer = count(&table.shape[..axis])?;
    let inner = count(&table.shape[axis + 1..])?;
    let rows = positions(g, n, ids, len)?;
    let index = (0..outer).flat_map(|o| rows.iter().flat_map(move |&r| (0..inner).map(move |i| (o * len + r) * inner + i)));
    let total = count(&shape)?;
    table.gather(shape, ExactIter { inner: index, left: total })
}

/// The rows of `ids`, each checked to lie in `[0, len)` (the error names
/// `take`, which a scatter-add is the adjoint of, and the node's axis).
fn positions(g: &Graph, n: NodeIndex, ids: &Value, len: usize) -> Result<Vec<usize>, RuntimeError> {
    let mut rows = room::<usize>(ids.len())?;
    for i in 0..ids.len() {
        let id = ids.i64_at(i);
        match usize::try_from(id) {
            Ok(row) if row < len => rows.push(row),
            _ => return Err(RuntimeError::IndexOutOfRange { op: "take".into(), axis: g.take_axis_label(n), index: id, size: len as u64 }),
        }
    }
    Ok(rows)
}

/// `take`'s adjoint: zeros of `shape` (or `args[2]`'s values, when it is
/// given), each value of `args[0]` added at the position along `axis`
/// that `args[1]` holds, in the values' order,
/// each sum rounded to the accumulator's dtype (f32 for half floats,
/// rounded to the dtype at the end), as the compiled kernel adds them.
fn scatter_add(g: &Graph, n: NodeIndex, axis: usize, args: &[&Value], dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let (values, ids) = (args[0], args[1]);
    let len = shape[axis];
    let outer = count(&shape[..axis])?;
    let inner = count(&shape[axis + 1..])?;
    let rows = positions(g, n, ids, len)?;
    let wide = if matches!(dtype, DType::F16 | DType::BF16) { DType::F32 } else { dtype };
    let total = count(&shape)?;
    // Zeros or the base, then each value added at its row, in order.
    fn added<T: Copy>(start: Vec<T>, v: &[T], rows: &[usize], (outer, len, inner): (usize, usize, usize), add: impl Fn(T, T) -> T) -> Vec<T> {
        let mut out = start;
        for o in 0..outer {
            for (p, &r) in rows.iter().enumerate() {
                for i in 0..inner {
                    let at = (o * len + r) * inner + i;
                    out[at] = add(out[at], v[(o * rows.len() + p) * inner + i]);
                }
            }
        }
        out
    }
    fn start<T: Copy>(base: Option<&[T]>, total: usize, zero: T) -> Result<Vec<T>, RuntimeError> {
        let mut out = room::<T>(total)?;
        match base {
            Some(b) => out.extend_from_slice(b),
            None => out.resize(total, zero),
        }
        Ok(out)
    }
    let extents = (outer, len, inner);
    let data = match (&values.data, args.get(2).map(|b| &b.data)) {
        (Data::Float(v), base) => {
            let base = if let Some(Data::Float(b)) = base { Some(b.as_slice()) } else { None };
            let mut out = added(start(base, total, 0.0)?, v, &rows, extents, |a, b| round_float(wide, a + b));
            out.iter_mut().for_each(|x| *x = round_float(dtype, *x));
            Data::Float(out)
        }
        (Data::Int(v), base) => {
            let base = if let Some(Data::Int(b)) = base { Some(b.as_slice()) } else { None };
            Data::Int(added(start(base, total, 0)?, v, &rows, extents, |a, b| wrap_int(dtype, a.wrapping_add(b))))
        }
        (Data::Bool(_), _) => return Err(error("a scatter of a mask".into())),
    };
    Ok(Value { dtype, shape, data })
}

/// An iterator of known length (a flattened gather's offsets).
struct ExactIter<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator<Item = usize>> Iterator for ExactIter<I> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let v = self.inner.next()?;
        self.left = self.left.saturating_sub(1);
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator<Item = usize>> ExactSizeIterator for ExactIter<I> {}

/// `cumsum`/`cumprod` along `axis`: the running value is kept in f64 (in
/// f32 for half floats, as torch does) and each result rounded to the dtype.
fn scan(op: Reduction, axis: usize, x: &Value, dtype: DType, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let len = x.shape[axis];
    let outer = count(&x.shape[..axis])?;
    let inner = count(&x.shape[axis + 1..])?;
    let at = |o: usize, k: usize, i: usize| (o * len + k) * inner + i;
    let mut out = x.try_clone()?;
    for o in 0..outer {
        for i in 0..inner {
            match &mut out.data {
                Data::Float(v) => {
                    let wide = if matches!(dtype, DType::F16 | DType::BF16) { DType::F32 } else { DType::F64 };
                    let mut acc = if op == Reduction::Prod { 1.0 } else { 0.0 };
                    for k in 0..len {
                        let e = v[at(o, k, i)];
                        acc = round_float(wide, if op == Reduction::Prod { acc * e } else { acc + e });
                        v[at(o, k, i)] = round_float(dtype, acc);
                    }
                }
                Data::Int(v) => {
                    let mut acc: i64 = if op == Reduction::Prod { 1 } else { 0 };
                    for k in 0..len {
                        let e = v[at(o, k, i)];
                        acc = wrap_int(dtype, if op == Reduction::Prod { acc.wrapping_mul(e) } else { acc.wrapping_add(e) });
                        v[at(o, k, i)] = acc;
                    }
                }
                Data::Bool(_) => return Err(error("a scan of a mask".into())),
            }
        }
    }
    Ok(Value { shape, ..out })
}

/// `argmax`/`argmin` along `axis`: the first position of the best value; a
/// NaN is better than any number (torch's rule), the first NaN wins.
fn arg_reduce(op: Reduction, axis: usize, x: &Value, shape: Vec<usize>) -> Result<Value, RuntimeError> {
    let len = x.shape[axis];
    let outer = count(&x.shape[..axis])?;
    let inner = count(&x.shape[axis + 1..])?;
    let mut out = room::<i64>(outer.saturating_mul(inner))?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut best = 0;
            for k in 1..len {
                let better = match &x.data {
                    Data::Float(v) => {
                        let (b, e) = (v[at(best)], v[at(k)]);
                        !b.is_nan() && (e.is_nan() || if op == Reduction::Max { e > b } else { e < b })
                    }
                    Data::Int(v) => {
                        let (b, e) = (v[at(best)], v[at(k)]);
                        if op == Reduction::Max { e > b } else { e < b }
                    }
                    Data::Bool(_) => return Err(error("an arg-reduction of a mask".into())),
                };
                if better {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    Ok(Value { dtype: DType::I64, shape, data: Data::Int(out) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(source: &str) -> Graph {
        let checked = nax_front::check_source(source);
        assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
        nax_lower::lower(&checked.module, "f").expect("lowers")
    }

    /// The peak counts each value from its node to its last use: the
    /// input (8 KB as f64) is dropped once `y` is made, `y` once `z` is:
    /// never more than two of the 8 KB values live at once, and the two
    /// literals (8 bytes each).
    #[test]
    fn the_peak_follows_each_values_last_use() {
        let g = graph("dim n = 1000\ndef f(x: [n]) -> [n] {\n    y = x * 2.0\n    z = exp(y)\n    return z + 1.0\n}\n");
        assert_eq!(peak(&g, &Sizes(&[])).unwrap(), 2 * 8000 + 16);
    }

    /// A reshape that is its operand's last use takes the storage: no copy counted.
    #[test]
    fn a_reshape_at_the_last_use_adds_nothing() {
        let g = graph("dim n = 1000\ndef f(x: [n]) -> [a b] {\n    y = x * 2.0\n    return rearrange(y, (a b) -> a b, a=10)\n}\n");
        assert_eq!(peak(&g, &Sizes(&[])).unwrap(), 2 * 8000 + 8);
        let x = Value { dtype: DType::F32, shape: vec![1000], data: Data::Float((0..1000).map(f64::from).collect()) };
        let out = evaluate(&g, vec![x], HashMap::new(), &Sizes(&[])).unwrap().remove(0);
        assert_eq!(out.shape, vec![10, 100]);
        assert_eq!(out.f64_at(999), 1998.0);
    }
}
