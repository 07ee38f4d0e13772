//! Lowering: from one checked function to a [`Graph`], inlining calls.
//! This is the one stage that reads the checker's program and its mutable
//! size table ([`Symbols`]); the graph leaves with the frozen
//! [`nax_contract::SizeTable`], the only size table of every later stage.
//!
//! The lowering reads only the checked program: every alignment the checker
//! chose becomes explicit here. Elementwise operands get index maps;
//! pattern operations become reshapes to their elementary axes, permutes,
//! reductions, expansions, selections and reshapes back; `@` and `einsum`
//! become one contraction node with axis labels; a call's callee is lowered
//! in place with its symbols imported into the graph's table.

use nax_contract::DType;
use nax_contract::{Size, SymDef};
use nax_front::check::sizes::Symbols;
use nax_front::check::types::{Axis, Kind, TensorType, Type as Checked, arith_dtype};
use nax_front::checked::{CheckedFn, CheckedModule, Elem, GradTarget, IndexEntry, PatternOp, ResolvedPattern, TExpr, TExprKind, TStmt};
use nax_ir::{Graph, Literal, MapFn, Op, Output, Type, value_dtype};
use nax_ops::{BinaryOp, UnaryOp};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

mod grad;

/// The most nodes a graph may have: inlining can multiply a program's size,
/// and a graph past this is refused rather than exhausting memory.
pub const MAX_NODES: usize = 1_000_000;

/// Why a function cannot be lowered.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LowerError {
    /// The module has no function of this name.
    #[error("no function `{name}` in the module")]
    NoFunction { name: String },
    /// The function has errors: the checker's diagnostics say which.
    #[error("function `{name}` did not check")]
    Unchecked { name: String },
    /// Inlining its calls made the graph larger than [`MAX_NODES`].
    #[error("`{function}` is too large after inlining its calls (over {limit} nodes)")]
    TooLarge { function: String, limit: usize },
    /// A call passes a keyword size as an `int` the size algebra cannot express.
    #[error(
        "the size `{size}` of `{callee}` is given by an `int` that is not a sum, difference or product of `int` parameters, literals and sizes: nax cannot size the call"
    )]
    UnsizedKeyword { callee: String, size: String },
    /// The checked program is not as the checker makes them: a bug of nax.
    #[error("internal error: {what} (lowering `{function}`)")]
    Internal { function: String, what: String },
}

/// An internal error; [`lower`] names the function.
fn internal(what: impl Into<String>) -> LowerError {
    LowerError::Internal { function: String::new(), what: what.into() }
}

/// Lowers the module's function `name` to a graph.
pub fn lower(module: &CheckedModule, name: &str) -> Result<Graph, LowerError> {
    lower_function(module, name).map_err(|e| match e {
        LowerError::Internal { what, .. } => LowerError::Internal { function: name.to_string(), what },
        e => e,
    })
}

fn lower_function(module: &CheckedModule, name: &str) -> Result<Graph, LowerError> {
    let f = module.functions.iter().find(|f| f.name == name).ok_or_else(|| LowerError::NoFunction { name: name.to_string() })?;
    if !f.ok {
        return Err(LowerError::Unchecked { name: name.to_string() });
    }
    let mut l = Lowerer {
        module,
        g: Graph {
            name: name.to_string(),
            graph: DiGraph::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            symbols: Default::default(),
            size_arguments: f.size_arguments.clone(),
        },
        symbols: f.symbols.clone(),
        weights: HashMap::new(),
    };
    let mut inputs = Vec::with_capacity(f.params);
    for (i, b) in f.bindings[..f.params].iter().enumerate() {
        inputs.push(l.g.add(Op::Input { index: i, name: b.name.clone() }, map_type(&b.ty, &[])?, &[]));
    }
    l.g.inputs = inputs.clone();
    let identity: Vec<Size> = Vec::new();
    let nodes = l.function(f, inputs, &identity)?;
    l.g.outputs = f.results.iter().zip(nodes).map(|(r, node)| Output { name: r.name.clone(), node }).collect();
    l.g.remove_dead_nodes();
    l.g.symbols = l.symbols.table();
    Ok(l.g)
}

struct Lowerer<'m> {
    module: &'m CheckedModule,
    g: Graph,
    /// The graph's sizes while it is built: the function's table, with each
    /// inlined callee's imported and unified; frozen into `g.symbols` at the end.
    symbols: Symbols,
    weights: HashMap<String, NodeIndex>,
}

/// Maps a callee's sizes into the graph's table (an empty map is the identity).
fn map_size(s: Size, map: &[Size]) -> Size {
    match s {
        Size::Sym(id) if !map.is_empty() => map[id.0 as usize],
        other => other,
    }
}

/// A checked type as a graph type, its sizes mapped into the graph's table.
/// The lowering reads only functions that checked, so no value has the
/// checker's error type; one that did would be a bug, reported as such.
fn map_type(ty: &Checked, map: &[Size]) -> Result<Type, LowerError> {
    match ty {
        Checked::Tensor(t) => {
            Ok(Type::Tensor(TensorType { axes: t.axes.iter().map(|a| Axis { name: a.name.clone(), size: map_size(a.size, map) }).collect(), ..t.clone() }))
        }
        Checked::Host(h, range) => Ok(Type::Host(*h, *range)),
        Checked::Error => Err(internal("a value that did not check reached the lowering")),
    }
}

fn tensor(ty: &Type) -> Option<&TensorType> {
    match ty {
        Type::Tensor(t) => Some(t),
        _ => None,
    }
}

impl Lowerer<'_> {
    fn ty(&self, n: NodeIndex) -> &Type {
        &self.g.graph[n].ty
    }

    /// Lowers a function body whose parameters are the nodes `args`; returns
    /// its result nodes, one per declared result.
    fn function(&mut self, f: &CheckedFn, args: Vec<NodeIndex>, map: &[Size]) -> Result<Vec<NodeIndex>, LowerError> {
        let mut env: Vec<Option<NodeIndex>> = vec![None; f.bindings.len()];
        for (i, a) in args.into_iter().enumerate() {
            env[i] = Some(a);
        }
        // What a `grad` differentiates by is a variable of this function:
        // inlined, its argument (or weight) gets a node of its own, so that
        // the derivative neither flows into how the caller computed it nor
        // merges two parameters given the same value.
        let mut shadowed = Vec::new();
        if !map.is_empty() {
            for target in &f.grad_targets {
                match *target {
                    GradTarget::Param(i) => {
                        if let Some(Some(a)) = env.get(i).copied() {
                            let ty = self.ty(a).clone();
                            env[i] = Some(self.g.add(Op::Rename, ty, &[a]));
                        }
                    }
                    GradTarget::Weight(w) => {
                        let node = self.weight(w);
                        let name = self.module.weights[w].name.clone();
                        let ty = self.ty(node).clone();
                        let own = self.g.add(Op::Rename, ty, &[node]);
                        shadowed.push((name.clone(), self.weights.insert(name, own)));
                    }
                }
            }
        }
        let result = self.body(f, env, map);
        for (name, outer) in shadowed {
            match outer {
                Some(n) => self.weights.insert(name, n),
                None => self.weights.remove(&name),
            };
        }
        result
    }

    /// The statements of [`Lowerer::function`], the parameters bound in `env`.
    fn body(&mut self, f: &CheckedFn, mut env: Vec<Option<NodeIndex>>, map: &[Size]) -> Result<Vec<NodeIndex>, LowerError> {
        for stmt in &f.body {
            match stmt {
                TStmt::Assign { targets, value } => {
                    let nodes = match (&value.kind, targets.len() > 1) {
                        (TExprKind::Pattern { op: PatternOp::Split { count, axis, part }, args, pattern }, true) => {
                            let x = self.expr(&args[0], &env, f, map)?;
                            self.split(x, pattern, *count, *axis, *part, &value.ty, map)?
                        }
                        (TExprKind::Call { function, args }, true) => {
                            let types = targets.iter().map(|&t| map_type(&f.bindings[t].ty, map)).collect::<Result<Vec<_>, _>>()?;
                            self.call(*function, args, types, &env, f, map)?
                        }
                        (TExprKind::Grad { value, wrt }, true) => self.grad(value, wrt, &env, f, map)?,
                        _ => vec![self.expr(value, &env, f, map)?; targets.len()],
                    };
                    if nodes.len() != targets.len() {
                        return Err(internal(format!("{} values bound to {} names", nodes.len(), targets.len())));
                    }
                    for (t, n) in targets.iter().zip(nodes) {
                        env[*t] = Some(n);
                    }
                }
                TStmt::Return { values } => {
                    if values.len() != f.results.len() {
                        return Err(internal(format!("`{}` returns {} values for {} results", f.name, values.len(), f.results.len())));
                    }
                    let mut out = Vec::with_capacity(values.len());
                    for (returned, result) in values.iter().zip(&f.results) {
                        let n = self.expr(&returned.value, &env, f, map)?;
                        let ret = map_type(&result.ty, map)?;
                        let permutation = &returned.permutation;
                        let identity = permutation.iter().enumerate().all(|(i, &p)| i == p);
                        out.push(if identity && self.ty(n) == &ret {
                            n
                        } else {
                            let op = if identity { Op::Rename } else { Op::Permute { perm: permutation.clone() } };
                            self.g.add(op, ret, &[n])
                        });
                    }
                    return Ok(out);
                }
            }
        }
        Err(internal(format!("function `{}` has no return", f.name)))
    }

    /// A call of the module's function `function`, inlined: its results,
    /// which the checker typed `types` in the caller's sizes.
    fn call(
        &mut self,
        function: usize,
        args: &[TExpr],
        types: Vec<Type>,
        env: &[Option<NodeIndex>],
        f: &CheckedFn,
        map: &[Size],
    ) -> Result<Vec<NodeIndex>, LowerError> {
        let xs = args.iter().map(|x| self.expr(x, env, f, map)).collect::<Result<Vec<_>, _>>()?;
        let callee = &self.module.functions[function];
        let callee_map = self.symbols.import(&callee.symbols);
        let mut params = Vec::with_capacity(xs.len());
        for (b, &x) in callee.bindings[..callee.params].iter().zip(&xs) {
            let want = map_type(&b.ty, &callee_map)?;
            let given = self.ty(x).clone();
            self.unify_axes(&want, &given);
            params.push(if &want == self.ty(x) { x } else { self.g.add(Op::Rename, want, &[x]) });
        }
        for &(size, i) in &callee.size_arguments {
            let signed = callee.symbols.defined_as(size, &SymDef::Signed);
            let size = map_size(size, &callee_map);
            let Some(&x) = xs.get(i) else { continue };
            match if signed { self.int_bound(x) } else { self.int_size(x) } {
                Some(value) => {
                    self.symbols.unify(size, value);
                }
                None => {
                    return Err(LowerError::UnsizedKeyword { callee: callee.name.clone(), size: self.symbols.display(size) });
                }
            }
        }
        let outs = self.function(callee, params, &callee_map)?;
        if outs.len() != types.len() {
            return Err(internal(format!("a call of `{}` bound to {} names for {} results", callee.name, types.len(), outs.len())));
        }
        // The checker sized the call's results with fresh symbols; they are the callee's sizes.
        let mut results = Vec::with_capacity(outs.len());
        for (out, ty) in outs.into_iter().zip(types) {
            let inner = self.ty(out).clone();
            self.unify_axes(&inner, &ty);
            results.push(if self.ty(out) == &ty { out } else { self.g.add(Op::Rename, ty, &[out]) });
        }
        Ok(results)
    }

    fn expr(&mut self, e: &TExpr, env: &[Option<NodeIndex>], f: &CheckedFn, map: &[Size]) -> Result<NodeIndex, LowerError> {
        if self.g.graph.node_count() > MAX_NODES {
            return Err(LowerError::TooLarge { function: self.g.name.clone(), limit: MAX_NODES });
        }
        nax_front::syntax::with_stack(|| self.expr_inner(e, env, f, map))
    }

    fn expr_inner(&mut self, e: &TExpr, env: &[Option<NodeIndex>], f: &CheckedFn, map: &[Size]) -> Result<NodeIndex, LowerError> {
        let ty = map_type(&e.ty, map)?;
        let operands = |l: &mut Self, es: &[TExpr]| -> Result<Vec<NodeIndex>, LowerError> { es.iter().map(|x| l.expr(x, env, f, map)).collect() };
        Ok(match &e.kind {
            TExprKind::Int(v) => self.g.add(Op::Literal(Literal::Int(i64::try_from(*v).unwrap_or(i64::MAX))), ty, &[]),
            TExprKind::Float(v) => self.g.add(Op::Literal(Literal::Float(*v)), ty, &[]),
            TExprKind::Bool(v) => self.g.add(Op::Literal(Literal::Bool(*v)), ty, &[]),
            TExprKind::Local(i) => env.get(*i).copied().flatten().ok_or_else(|| internal(format!("`{}` used before it is bound", f.bindings[*i].name)))?,
            TExprKind::Weight(w) => self.weight(*w),
            TExprKind::SizeValue(s) => self.g.add(Op::SizeValue(map_size(*s, map)), ty, &[]),
            TExprKind::Unary(op, a) => {
                let x = self.expr(a, env, f, map)?;
                let compute = value_dtype(&ty);
                let rank = tensor(&ty).map_or(0, TensorType::rank);
                self.g.add(Op::Map { func: MapFn::Unary(*op), maps: vec![(0..rank).collect()], compute }, ty, &[x])
            }
            TExprKind::Binary { op, lhs, rhs, align } => {
                let compute = if op.is_comparison() || matches!(op, BinaryOp::And | BinaryOp::Or) { arith_dtype(&lhs.ty, &rhs.ty) } else { value_dtype(&ty) };
                let xs = operands(self, &[(**lhs).clone(), (**rhs).clone()])?;
                self.g.add(Op::Map { func: MapFn::Binary(*op), maps: align.to_vec(), compute }, ty, &xs)
            }
            TExprKind::MatMul { lhs, rhs, batch } => {
                let xs = operands(self, &[(**lhs).clone(), (**rhs).clone()])?;
                let (ra, rb) = (rank_of(self.ty(xs[0])), rank_of(self.ty(xs[1])));
                let r = rank_of(&ty);
                let k = r; // the contracted label
                let (la, lb) = match (ra, rb) {
                    (1, 1) => (vec![k], vec![k]),
                    (1, _) => (vec![k], batch[1].iter().copied().chain([k, r - 1]).collect()),
                    (_, 1) => (batch[0].iter().copied().chain([r - 1, k]).collect(), vec![k]),
                    _ => (batch[0].iter().copied().chain([r - 2, k]).collect(), batch[1].iter().copied().chain([k, r - 1]).collect()),
                };
                self.g.add(Op::Contract { labels: vec![la, lb], output: (0..r).collect() }, ty, &xs)
            }
            TExprKind::Elementwise { func, args, align } => {
                let xs = operands(self, args)?;
                let compute = match func {
                    nax_ops::Elementwise::Where => value_dtype(&ty),
                    // A conversion to a half dtype rounds to it where it stands,
                    // also inside a fused chain (`float(bf16(x))` is not `x`).
                    nax_ops::Elementwise::ToFloat if matches!(value_dtype(&ty), DType::F16 | DType::BF16) => value_dtype(&ty),
                    nax_ops::Elementwise::MaskedFill | nax_ops::Elementwise::ToFloat | nax_ops::Elementwise::ToInt => value_dtype(self.ty(xs[0])),
                    _ => value_dtype(&ty),
                };
                let mut maps = align.clone();
                maps.resize(xs.len(), Vec::new());
                self.g.add(Op::Map { func: MapFn::Builtin(*func), maps, compute }, ty, &xs)
            }
            TExprKind::AlongAxis { func, arg, axis } => {
                let x = self.expr(arg, env, f, map)?;
                self.g.add(Op::Along { func: *func, axis: *axis }, ty, &[x])
            }
            TExprKind::Pattern { op, args, pattern } => {
                let xs = operands(self, args)?;
                self.pattern(*op, &xs, pattern, ty, map)?
            }
            TExprKind::Construct { func, value } => {
                let xs = match value {
                    Some(v) => vec![self.expr(v, env, f, map)?],
                    None => Vec::new(),
                };
                self.g.add(Op::Construct { func: *func }, ty, &xs)
            }
            TExprKind::Rename(a) => {
                let x = self.expr(a, env, f, map)?;
                self.g.add(Op::Rename, ty, &[x])
            }
            TExprKind::Index { arg, entries } => {
                let x = self.expr(arg, env, f, map)?;
                let mut values = HashMap::new();
                for e in entries {
                    if let IndexEntry::ElementAt { axis, value } = e {
                        values.insert(*axis, self.expr(value, env, f, map)?);
                    }
                }
                self.index(x, entries, &values, ty, map)?
            }
            TExprKind::Concat { args, axes, align } => {
                let xs = operands(self, args)?;
                let mut joined = Vec::with_capacity(xs.len());
                for (k, &x) in xs.iter().enumerate() {
                    // Each operand's axes in the result's order: result axis r is operand axis perm[r].
                    let mut perm = vec![0; align[k].len()];
                    for (j, &r) in align[k].iter().enumerate() {
                        perm[r] = j;
                    }
                    let operand = tensor(self.ty(x)).cloned().ok_or_else(|| internal("concat of a host scalar"))?;
                    let axes_in_order = perm.iter().map(|&j| operand.axes[j].clone()).collect();
                    joined.push(if perm.iter().enumerate().all(|(i, &j)| i == j) { x } else { self.view(Op::Permute { perm }, x, axes_in_order) });
                }
                self.g.add(Op::Concat { axis: axes[0] }, ty, &joined)
            }
            TExprKind::Take { table, ids, axis } => {
                let xs = operands(self, &[(**table).clone(), (**ids).clone()])?;
                self.g.add(Op::Take { axis: *axis }, ty, &xs)
            }
            TExprKind::Scan { op, arg, axis } => {
                let x = self.expr(arg, env, f, map)?;
                self.g.add(Op::Scan { op: *op, axis: *axis }, ty, &[x])
            }
            TExprKind::ArgReduce { op, arg, axis } => {
                let x = self.expr(arg, env, f, map)?;
                self.g.add(Op::ArgReduce { op: *op, axis: *axis }, ty, &[x])
            }
            TExprKind::Call { function, args } => self.call(*function, args, vec![ty], env, f, map)?[0],
            TExprKind::Grad { .. } => return Err(internal("a `grad` used as one value")),
            TExprKind::Stack(values) => {
                let stacked = tensor(&ty).cloned().ok_or_else(|| internal("a stack of host scalars"))?;
                let mut turns = Vec::with_capacity(values.len());
                for v in values {
                    let x = self.expr(v, env, f, map)?;
                    let mut axes = stacked.axes.clone();
                    axes[0] = Axis { name: None, size: Size::Const(1) };
                    let turn = Type::Tensor(TensorType { axes, ..tensor(self.ty(x)).cloned().ok_or_else(|| internal("a yielded host scalar"))? });
                    turns.push(self.g.add(Op::Reshape, turn, &[x]));
                }
                match turns.as_slice() {
                    [] => self.g.add(Op::Construct { func: nax_ops::Constructor::Zeros }, ty, &[]),
                    [one] => self.g.add(Op::Reshape, ty, &[*one]),
                    _ => self.g.add(Op::Concat { axis: 0 }, ty, &turns),
                }
            }
        })
    }

    /// Weight `w`'s node (one per weight, made at its first use).
    fn weight(&mut self, w: usize) -> NodeIndex {
        let weight = &self.module.weights[w];
        if let Some(&n) = self.weights.get(&weight.name) {
            return n;
        }
        let n = self.g.add(Op::Weight { name: weight.name.clone() }, Type::Tensor(weight.ty.clone()), &[]);
        self.weights.insert(weight.name.clone(), n);
        n
    }

    /// `grad(value, wrt...)`: the value's node, then its derivative by each target.
    fn grad(&mut self, value: &TExpr, wrt: &[GradTarget], env: &[Option<NodeIndex>], f: &CheckedFn, map: &[Size]) -> Result<Vec<NodeIndex>, LowerError> {
        let v = self.expr(value, env, f, map)?;
        let targets = wrt
            .iter()
            .map(|t| match *t {
                GradTarget::Param(i) => env.get(i).copied().flatten().ok_or_else(|| internal(format!("`{}` used before it is bound", f.bindings[i].name))),
                GradTarget::Weight(w) => Ok(self.weight(w)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let derivatives = grad::differentiate(&mut self.g, &mut self.symbols, v, &targets)?;
        Ok(std::iter::once(v).chain(derivatives).collect())
    }

    /// The size an `int` value gives (a keyword size passed by a caller):
    /// a parameter (a free size bound from it at the call, one per
    /// parameter), a literal, a size, or a sum, difference or product of
    /// those, in the size algebra (a difference must not be negative: the
    /// call boundary checks it). `None` for anything else.
    fn int_size(&mut self, n: NodeIndex) -> Option<Size> {
        let operands = self.g.operands(n);
        match self.g.graph[n].op.clone() {
            Op::Input { index, name } => Some(self.size_argument(index, &name, SymDef::Free)),
            Op::Literal(Literal::Int(v)) => u64::try_from(v).ok().map(Size::Const),
            Op::SizeValue(s) => Some(s),
            Op::Rename => self.int_size(*operands.first()?),
            Op::Map { func: MapFn::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul)), .. } if operands.len() == 2 => {
                let (a, b) = (self.int_size(operands[0])?, self.int_size(operands[1])?);
                match op {
                    BinaryOp::Mul => self.symbols.mul(a, b, Default::default()),
                    _ => self.symbols.add_sub(a, b, op == BinaryOp::Sub, Default::default()),
                }
            }
            _ => None,
        }
    }

    /// The signed size an `int` value gives (a slice bound passed by a
    /// caller): a parameter (a signed size bound from it at the call, one
    /// per parameter), a size, or a literal of either sign (in two's
    /// complement).
    /// `None` for anything else.
    fn int_bound(&mut self, n: NodeIndex) -> Option<Size> {
        match self.g.graph[n].op.clone() {
            Op::Input { index, name } => Some(self.size_argument(index, &name, SymDef::Signed)),
            Op::Literal(Literal::Int(v)) => Some(Size::Const(v as u64)),
            Op::SizeValue(s) => Some(s),
            Op::Rename => self.int_bound(*self.g.operands(n).first()?),
            Op::Map { func: MapFn::Unary(UnaryOp::Neg), .. } => match self.int_bound(*self.g.operands(n).first()?)? {
                Size::Const(c) => Some(Size::Const((c as i64).wrapping_neg() as u64)),
                Size::Sym(_) => None,
            },
            _ => None,
        }
    }

    /// The size `int` parameter `index` gives at the call, of definition
    /// `def` (free: a positive size; signed: a slice bound): one per
    /// parameter and definition.
    fn size_argument(&mut self, index: usize, name: &str, def: SymDef) -> Size {
        if let Some(&(size, _)) = self.g.size_arguments.iter().find(|&&(size, i)| i == index && self.symbols.defined_as(size, &def)) {
            return size;
        }
        let size = Size::Sym(self.symbols.define(name, def.clone()));
        self.g.size_arguments.push((size, index));
        size
    }

    /// Requires two tensor types' sizes to be equal, axis by axis (an inlined
    /// parameter and its argument, a call's result and the callee's).
    fn unify_axes(&mut self, a: &Type, b: &Type) {
        if let (Some(a), Some(b)) = (tensor(a), tensor(b)) {
            for (x, y) in a.axes.iter().zip(&b.axes) {
                self.unify_sizes(x.size, y.size);
            }
        }
    }

    /// Requires `a == b`; where both are derived by the same operation
    /// with one operand in common, the other operands are equal too (the
    /// checker sizes a call's result with its own copy of each size the
    /// callee derives, `r*m` with a fresh `r`; inlined, it meets the
    /// callee's `r*n`, and `r` is the callee's `r`).
    fn unify_sizes(&mut self, a: Size, b: Size) {
        self.symbols.unify(a, b);
        let def = |l: &Self, s: Size| match s {
            Size::Sym(id) => l.symbols.data(id).map(|d| d.def.clone()),
            Size::Const(_) => None,
        };
        let (Some(x), Some(y)) = (def(self, a), def(self, b)) else { return };
        let pairs = match (x, y) {
            (SymDef::Mul(a1, b1), SymDef::Mul(a2, b2)) => vec![(a1, a2, b1, b2), (a1, b2, b1, a2)],
            (SymDef::Add(a1, b1), SymDef::Add(a2, b2)) => vec![(a1, a2, b1, b2), (a1, b2, b1, a2)],
            (SymDef::Sub(a1, b1), SymDef::Sub(a2, b2)) | (SymDef::Div(a1, b1), SymDef::Div(a2, b2)) => vec![(a1, a2, b1, b2)],
            _ => Vec::new(),
        };
        for (p1, p2, q1, q2) in pairs {
            if self.symbols.same(p1, p2) {
                self.unify_sizes(q1, q2);
                return;
            }
            if self.symbols.same(q1, q2) {
                self.unify_sizes(p1, p2);
                return;
            }
        }
    }

    /// A view of `x` with the given axes (the same kind of element).
    fn view(&mut self, op: Op, x: NodeIndex, axes: Vec<Axis>) -> NodeIndex {
        let base = tensor(self.ty(x)).cloned().unwrap_or(TensorType { dtype: DType::F32, kind: Kind::Plain, axes: Vec::new(), range: None });
        let ty = Type::Tensor(TensorType { axes, kind: Kind::Plain, ..base });
        self.g.add(op, ty, &[x])
    }

    /// Reshapes `x` to its elementary axes, leaving out unnamed size-1 entries.
    fn elementary(&mut self, x: NodeIndex, parts: &[Vec<Elem>]) -> (NodeIndex, Vec<Elem>) {
        let elems: Vec<Elem> = parts.iter().flatten().filter(|e| !(e.name.is_none() && self.is_one(e.size))).cloned().collect();
        let axes: Vec<Axis> = elems.iter().map(|e| Axis { name: e.name.clone(), size: e.size }).collect();
        let current = tensor(self.ty(x)).map(|t| t.axes.clone()).unwrap_or_default();
        if current == axes {
            return (x, elems);
        }
        (self.view(Op::Reshape, x, axes), elems)
    }

    fn is_one(&self, s: Size) -> bool {
        self.symbols.constant(s) == Some(1)
    }

    /// For each output elementary axis, the input elementary axis it is (`None`: a new axis).
    fn match_elems(&self, input: &[Elem], output: &[Elem]) -> Vec<Option<usize>> {
        let mut used = vec![false; input.len()];
        output
            .iter()
            .map(|o| {
                let found = match &o.name {
                    Some(n) => input.iter().position(|e| e.name.as_ref() == Some(n)),
                    None if self.is_one(o.size) => None,
                    None => {
                        let v = self.symbols.constant(o.size);
                        (0..input.len()).find(|&i| !used[i] && input[i].name.is_none() && self.symbols.constant(input[i].size) == v)
                    }
                };
                if let Some(i) = found {
                    used[i] = true;
                }
                found
            })
            .collect()
    }

    /// Permutes the elementary axes `elems` of `x` into the order `order` (indices into `elems`).
    fn permute(&mut self, x: NodeIndex, elems: &[Elem], order: &[usize]) -> NodeIndex {
        if order.iter().enumerate().all(|(i, &j)| i == j) && order.len() == elems.len() {
            return x;
        }
        let axes = order.iter().map(|&i| Axis { name: elems[i].name.clone(), size: elems[i].size }).collect();
        self.view(Op::Permute { perm: order.to_vec() }, x, axes)
    }

    /// Reshapes to the result type unless `x` already has it.
    fn finish(&mut self, x: NodeIndex, ty: Type) -> NodeIndex {
        if self.ty(x) == &ty {
            return x;
        }
        let same_axes = match (tensor(self.ty(x)), tensor(&ty)) {
            (Some(a), Some(b)) => a.axes == b.axes,
            _ => false,
        };
        self.g.add(if same_axes { Op::Rename } else { Op::Reshape }, ty, &[x])
    }

    fn pattern(&mut self, op: PatternOp, xs: &[NodeIndex], p: &ResolvedPattern, ty: Type, map: &[Size]) -> Result<NodeIndex, LowerError> {
        let mapped = |parts: &[Vec<Elem>]| -> Vec<Vec<Elem>> {
            parts.iter().map(|a| a.iter().map(|e| Elem { name: e.name.clone(), size: map_size(e.size, map) }).collect()).collect()
        };
        let out_elems: Vec<Elem> = mapped(&p.output).into_iter().flatten().collect();
        match op {
            PatternOp::Rearrange | PatternOp::Reduce(_) | PatternOp::Repeat => {
                let (Some(&x), Some(input)) = (xs.first(), p.inputs.first()) else {
                    return Err(internal("a pattern without an operand"));
                };
                // A host scalar (`repeat(0, -> a r, r=2)`) becomes a rank-0
                // tensor of the result's dtype first, so that the views
                // after it are of that dtype (an int's repeat was once an
                // f32 buffer read through an i64 alias: twice its size).
                let x = match (self.ty(x), tensor(&ty)) {
                    (Type::Host(..), Some(result)) => {
                        let scalar = TensorType { axes: Vec::new(), kind: Kind::Plain, range: None, ..result.clone() };
                        self.g.add(Op::Rename, Type::Tensor(scalar), &[x])
                    }
                    _ => x,
                };
                let (x, elems) = self.elementary(x, &mapped(input));
                let matched = self.match_elems(&elems, &out_elems);
                let kept: Vec<usize> = matched.iter().flatten().copied().collect();
                let x = if let PatternOp::Reduce(red) = op {
                    let reduced: Vec<usize> = (0..elems.len()).filter(|i| !kept.contains(i)).collect();
                    let remaining_at: Vec<usize> = (0..elems.len()).filter(|i| kept.contains(i)).collect();
                    let remaining: Vec<Elem> = remaining_at.iter().map(|&i| elems[i].clone()).collect();
                    let x = if reduced.is_empty() {
                        x
                    } else {
                        let axes = remaining.iter().map(|e| Axis { name: e.name.clone(), size: e.size }).collect();
                        let base = tensor(&ty).cloned().ok_or_else(|| internal("reduce of a host scalar"))?;
                        let rty = Type::Tensor(TensorType { axes, kind: Kind::Plain, ..base });
                        self.g.add(Op::Reduce { op: red, axes: reduced }, rty, &[x])
                    };
                    let order: Vec<usize> = kept.iter().map(|k| remaining_at.iter().position(|r| r == k).unwrap_or(0)).collect();
                    self.permute(x, &remaining, &order)
                } else {
                    self.permute(x, &elems, &kept)
                };
                let x = if op == PatternOp::Repeat && matched.iter().any(Option::is_none) {
                    let positions: Vec<usize> = (0..matched.len()).filter(|&i| matched[i].is_some()).collect();
                    let axes = out_elems.iter().map(|e| Axis { name: e.name.clone(), size: e.size }).collect();
                    self.view(Op::Expand { map: positions }, x, axes)
                } else {
                    x
                };
                Ok(self.finish(x, ty))
            }
            PatternOp::Einsum => {
                let mut labels: Vec<String> = Vec::new();
                let mut label = |n: &str| match labels.iter().position(|l| l == n) {
                    Some(i) => i,
                    None => {
                        labels.push(n.to_string());
                        labels.len() - 1
                    }
                };
                let ins: Vec<Vec<usize>> =
                    p.inputs.iter().map(|side| side.iter().flatten().map(|e| label(e.name.as_deref().unwrap_or("_"))).collect()).collect();
                let named_out: Vec<&Elem> = out_elems.iter().filter(|e| e.name.is_some()).collect();
                let output: Vec<usize> = named_out.iter().map(|e| label(e.name.as_deref().unwrap_or("_"))).collect();
                let (ins, operands) = self.sum_lone_labels(ins, &output, xs);
                let base = tensor(&ty).cloned().ok_or_else(|| internal("einsum of host scalars"))?;
                let axes = named_out.iter().map(|e| Axis { name: e.name.clone(), size: e.size }).collect();
                let cty = Type::Tensor(TensorType { axes, ..base });
                let c = self.g.add(Op::Contract { labels: ins, output }, cty, &operands);
                Ok(self.finish(c, ty))
            }
            PatternOp::Split { .. } => Err(internal("split must bind its results to names")),
        }
    }

    /// An einsum's operands with each label that only one of several
    /// carries, once, and the output does not, summed out of it first (as
    /// `torch.einsum` and numpy's optimised einsum do): fewer products,
    /// and the infinities PyTorch gives (an infinite operand times the sum
    /// of a row of mixed signs is infinite, where the sum of the products
    /// is nan). Gives the operands' labels and the operands.
    fn sum_lone_labels(&mut self, mut ins: Vec<Vec<usize>>, output: &[usize], xs: &[NodeIndex]) -> (Vec<Vec<usize>>, Vec<NodeIndex>) {
        let mut operands = xs.to_vec();
        if ins.len() < 2 {
            return (ins, operands);
        }
        for i in 0..ins.len() {
            let carriers = |l: usize| ins.iter().map(|side| side.iter().filter(|&&m| m == l).count()).sum::<usize>();
            let alone: Vec<usize> = (0..ins[i].len()).filter(|&a| !output.contains(&ins[i][a]) && carriers(ins[i][a]) == 1).collect();
            let Type::Tensor(t) = self.g.graph[operands[i]].ty.clone() else { continue };
            if alone.is_empty() || t.axes.len() != ins[i].len() {
                continue;
            }
            let axes = t.axes.iter().enumerate().filter(|(a, _)| !alone.contains(a)).map(|(_, axis)| axis.clone()).collect();
            let rty = Type::Tensor(TensorType { axes, kind: Kind::Plain, range: t.range.map(|_| nax_values::Range::FULL), dtype: t.dtype });
            operands[i] = self.g.add(Op::Reduce { op: nax_ops::Reduction::Sum, axes: alone.clone() }, rty, &[operands[i]]);
            ins[i] = ins[i].iter().enumerate().filter(|(a, _)| !alone.contains(a)).map(|(_, &l)| l).collect();
        }
        (ins, operands)
    }

    /// `x[...]`: the slices first (each keeps its axis), then the elements,
    /// from the last axis down; an element of a run-time axis, or at a
    /// run-time position, is a slice of one element then a selection; an
    /// element at an `int` (`values`, by axis) is a selection where the
    /// call inlined a literal in the axis, else a gather of one index
    /// (negative counts from the end), checked while the call runs.
    fn index(&mut self, x: NodeIndex, entries: &[IndexEntry], values: &HashMap<usize, NodeIndex>, ty: Type, map: &[Size]) -> Result<NodeIndex, LowerError> {
        let result = tensor(&ty).cloned().ok_or_else(|| internal("indexing gives a tensor"))?;
        let mut axes = tensor(self.ty(x)).map(|t| t.axes.clone()).ok_or_else(|| internal("indexing of a host scalar"))?;
        let mut x = x;
        let dropped =
            |a: usize| entries.iter().filter(|e| matches!(e, IndexEntry::Element { axis, .. } | IndexEntry::ElementAt { axis, .. } if *axis < a)).count();
        for e in entries {
            if let IndexEntry::Slice { axis, start, step, len } = e {
                axes[*axis] = Axis { name: result.axes[*axis - dropped(*axis)].name.clone(), size: map_size(*len, map) };
                x = self.view(Op::Slice { axis: *axis, start: map_size(*start, map), step: *step }, x, axes.clone());
            }
        }
        for e in entries.iter().rev() {
            if let IndexEntry::Element { axis, index } = e {
                let index = map_size(*index, map);
                let size = axes[*axis].size;
                let (at, count) = match (self.symbols.constant(index), self.symbols.constant(size)) {
                    (Some(i), Some(n)) => (i as usize, n as usize),
                    _ => {
                        let mut one = axes.clone();
                        one[*axis].size = Size::Const(1);
                        x = self.view(Op::Slice { axis: *axis, start: index, step: 1 }, x, one);
                        (0, 1)
                    }
                };
                axes.remove(*axis);
                x = self.view(Op::Select { axis: *axis, index: at, count }, x, axes.clone());
            }
            if let IndexEntry::ElementAt { axis, .. } = e {
                let value = values.get(axis).copied().ok_or_else(|| internal("an index without its value"))?;
                let size = axes[*axis].size;
                axes.remove(*axis);
                let literal = self.literal_int(value);
                let n = self.symbols.constant(size).and_then(|n| i64::try_from(n).ok());
                if let (Some(v), Some(n)) = (literal, n)
                    && (-n..n).contains(&v)
                {
                    let index = if v < 0 { v + n } else { v } as usize;
                    x = self.view(Op::Select { axis: *axis, index, count: n as usize }, x, axes.clone());
                    continue;
                }
                // where(i < 0, where(i + n < 0, i, i + n), i), then a gather of that
                // one index: an index still outside after counting from the end
                // stays as given, so that the gather's refusal names it.
                let int = Type::Host(nax_contract::HostType::Int, None);
                let scalar = |l: &mut Self, op: Op, xs: &[NodeIndex]| l.g.add(op, int.clone(), xs);
                let zero = scalar(self, Op::Literal(Literal::Int(0)), &[]);
                let count = scalar(self, Op::SizeValue(size), &[]);
                let map_of = |func, k: usize| Op::Map { func, maps: vec![Vec::new(); k], compute: DType::I64 };
                let boolean = Type::Host(nax_contract::HostType::Bool, None);
                let negative = self.g.add(map_of(MapFn::Binary(BinaryOp::Lt), 2), boolean.clone(), &[value, zero]);
                let wrapped = scalar(self, map_of(MapFn::Binary(BinaryOp::Add), 2), &[value, count]);
                let still_outside = self.g.add(map_of(MapFn::Binary(BinaryOp::Lt), 2), boolean, &[wrapped, zero]);
                let counted = scalar(self, map_of(MapFn::Builtin(nax_ops::Elementwise::Where), 3), &[still_outside, value, wrapped]);
                let index = scalar(self, map_of(MapFn::Builtin(nax_ops::Elementwise::Where), 3), &[negative, counted, value]);
                let base = tensor(self.ty(x)).cloned().ok_or_else(|| internal("indexing of a host scalar"))?;
                let taken = Type::Tensor(TensorType { axes: axes.clone(), kind: Kind::Plain, ..base });
                x = self.g.add(Op::Take { axis: *axis }, taken, &[x, index]);
            }
        }
        Ok(self.finish(x, ty))
    }

    /// The value of an `int` node known when compiling: a literal or a
    /// constant size, through the renames a call's parameter binding adds.
    fn literal_int(&self, mut n: NodeIndex) -> Option<i64> {
        loop {
            match &self.g.graph[n].op {
                Op::Literal(Literal::Int(v)) => return Some(*v),
                Op::SizeValue(s) => return self.symbols.constant(*s).and_then(|c| i64::try_from(c).ok()),
                Op::Rename => n = *self.g.operands(n).first()?,
                _ => return None,
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn split(
        &mut self,
        x: NodeIndex,
        p: &ResolvedPattern,
        count: usize,
        axis: usize,
        part: usize,
        ty: &Checked,
        map: &[Size],
    ) -> Result<Vec<NodeIndex>, LowerError> {
        let inputs: Vec<Vec<Elem>> =
            p.inputs[0].iter().map(|a| a.iter().map(|e| Elem { name: e.name.clone(), size: map_size(e.size, map) }).collect()).collect();
        let out_elems: Vec<Elem> = p.output.iter().flatten().map(|e| Elem { name: e.name.clone(), size: map_size(e.size, map) }).collect();
        let flat: usize = inputs[..axis].iter().map(Vec::len).sum::<usize>() + part;
        let dropped_before = inputs.iter().flatten().take(flat).filter(|e| e.name.is_none() && self.is_one(e.size)).count();
        let (x, elems) = self.elementary(x, &inputs);
        let s = flat - dropped_before;
        let rest: Vec<Elem> = elems.iter().enumerate().filter(|(i, _)| *i != s).map(|(_, e)| e.clone()).collect();
        let matched = self.match_elems(&rest, &out_elems);
        let kept: Vec<usize> = matched.iter().flatten().copied().collect();
        let ty = map_type(ty, map)?;
        let mut out = Vec::with_capacity(count);
        for index in 0..count {
            let axes = rest.iter().map(|e| Axis { name: e.name.clone(), size: e.size }).collect();
            let sel = self.view(Op::Select { axis: s, index, count }, x, axes);
            let perm = self.permute(sel, &rest, &kept);
            out.push(self.finish(perm, ty.clone()));
        }
        Ok(out)
    }
}

fn rank_of(ty: &Type) -> usize {
    tensor(ty).map_or(0, TensorType::rank)
}
