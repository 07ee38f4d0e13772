//! The optimizer's e-graph language over every graph operation, its
//! analysis, its cost model, and the conversions between a graph and an
//! e-graph.
//!
//! An e-node is a graph node: its operation and its value's type, both
//! interned in the analysis, and its operand classes. The analysis gives
//! each class the type of its first node, so a rule's condition can read
//! the axes, sizes, dtype, kind and range of any class; a merge of two
//! classes whose types contradict each other (another rank, size, dtype or
//! host type) is recorded and reported as an internal error naming both
//! types. Axis names, kinds and ranges may differ within a class (a rename
//! is the same data), and each extracted node keeps its own type.
//!
//! Rules are [`NodeRule`]s: a test of the operation and a function from one
//! matching e-node to the classes equal to it.

use egg::{Analysis, Applier, CostFunction, DidMerge, EGraph, Id, Language, PatternAst, RecExpr, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use nax_contract::Size;
use nax_contract::SizeTable;
use nax_ir::Type;
use nax_ir::{Graph, Op};
use nax_values::Range;
use nax_values::{Kind, TensorType};
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// One graph operation with its operands: indices into the analysis's
/// tables of operations and types, and the operand classes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ENode {
    pub op: u32,
    pub ty: u32,
    pub children: Vec<Id>,
}

impl Language for ENode {
    type Discriminant = (u32, u32, usize);

    fn discriminant(&self) -> Self::Discriminant {
        (self.op, self.ty, self.children.len())
    }

    fn matches(&self, other: &Self) -> bool {
        self.discriminant() == other.discriminant()
    }

    fn children(&self) -> &[Id] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut [Id] {
        &mut self.children
    }
}

/// The analysis: the interned operations and types, the graph's size
/// symbols, and the first contradiction met.
#[derive(Debug, Default)]
pub struct Types {
    ops: Vec<Op>,
    op_ids: HashMap<String, u32>,
    types: Vec<Type>,
    /// The types of each hash (see [`type_hash`]).
    type_ids: HashMap<u64, Vec<u32>>,
    pub symbols: SizeTable,
    pub contradiction: Option<String>,
}

impl Types {
    pub fn new(symbols: SizeTable) -> Types {
        Types { symbols, ..Types::default() }
    }

    fn intern_op(&mut self, op: Op) -> u32 {
        let key = format!("{op:?}");
        let next = self.ops.len() as u32;
        *self.op_ids.entry(key).or_insert_with(|| {
            self.ops.push(op);
            next
        })
    }

    fn intern_type(&mut self, ty: Type) -> u32 {
        let bucket = self.type_ids.entry(type_hash(&ty)).or_default();
        if let Some(&id) = bucket.iter().find(|&&id| self.types[id as usize] == ty) {
            return id;
        }
        let id = self.types.len() as u32;
        bucket.push(id);
        self.types.push(ty);
        id
    }

    pub fn op(&self, node: &ENode) -> &Op {
        &self.ops[node.op as usize]
    }

    pub fn ty(&self, id: u32) -> &Type {
        &self.types[id as usize]
    }

    /// Whether two tensor types have the same rank and sizes, axis by axis.
    pub fn same_sizes(&self, a: &TensorType, b: &TensorType) -> bool {
        a.axes.len() == b.axes.len() && a.axes.iter().zip(&b.axes).all(|(p, q)| self.symbols.same(p.size, q.size))
    }

    /// Whether two types can describe the same value: the same host type,
    /// or the same dtype and sizes (names, kinds and ranges aside).
    pub fn compatible(&self, a: &Type, b: &Type) -> bool {
        match (a, b) {
            (Type::Host(x, _), Type::Host(y, _)) => x == y,
            (Type::Tensor(x), Type::Tensor(y)) => x.dtype == y.dtype && self.same_sizes(x, y),
            _ => false,
        }
    }
}

/// A hash of a type (its ranges by their bits).
fn type_hash(ty: &Type) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let bits = |r: &Option<Range>| r.map(|r| (r.lo.to_bits(), r.hi.to_bits()));
    match ty {
        Type::Host(host, r) => (1u8, host.as_str(), bits(r)).hash(&mut h),
        Type::Tensor(t) => (2u8, t.dtype, &t.kind, &t.axes, bits(&t.range)).hash(&mut h),
    }
    h.finish()
}

impl Analysis<ENode> for Types {
    /// The class's type (of its first node).
    type Data = u32;

    fn make(_egraph: &mut EGraph<ENode, Self>, enode: &ENode, _id: Id) -> u32 {
        enode.ty
    }

    fn merge(&mut self, a: &mut u32, b: u32) -> DidMerge {
        if *a != b && self.contradiction.is_none() && !self.compatible(self.ty(*a), self.ty(b)) {
            self.contradiction = Some(format!(
                "internal error: the optimizer merged values of types `{}` and `{}`",
                nax_ir::text::type_text(self.ty(*a)),
                nax_ir::text::type_text(self.ty(b))
            ));
        }
        DidMerge(false, false)
    }
}

pub type EG = EGraph<ENode, Types>;

/// Adds a node and returns its class.
pub fn add(eg: &mut EG, op: Op, ty: Type, children: Vec<Id>) -> Id {
    let op = eg.analysis.intern_op(op);
    let ty = eg.analysis.intern_type(ty);
    eg.add(ENode { op, ty, children })
}

/// A class's type.
pub fn type_of(eg: &EG, class: Id) -> &Type {
    eg.analysis.ty(eg[class].data)
}

/// A class's tensor type (`None` for host scalars).
pub fn tensor_of(eg: &EG, class: Id) -> Option<&TensorType> {
    match type_of(eg, class) {
        Type::Tensor(t) => Some(t),
        _ => None,
    }
}

/// A class's rank (0 for host scalars).
pub fn rank_of(eg: &EG, class: Id) -> usize {
    tensor_of(eg, class).map_or(0, |t| t.axes.len())
}

/// The type an e-node gives its value.
pub fn node_type<'a>(eg: &'a EG, node: &ENode) -> &'a Type {
    eg.analysis.ty(node.ty)
}

/// The nodes of a class whose operation passes `wants`, with their operations.
pub fn nodes_of(eg: &EG, class: Id, wants: impl Fn(&Op) -> bool) -> Vec<(ENode, Op)> {
    eg[class].nodes.iter().filter(|&n| wants(eg.analysis.op(n))).map(|n| (n.clone(), eg.analysis.op(n).clone())).collect()
}

/// The one-operand nodes of a class that `pick` accepts: what it takes
/// from each node's operation, and the node's operand.
pub fn unary_nodes<T>(eg: &EG, class: Id, pick: impl Fn(&Op) -> Option<T>) -> Vec<(T, Id)> {
    eg[class].nodes.iter().filter(|n| n.children.len() == 1).filter_map(|n| pick(eg.analysis.op(n)).map(|t| (t, n.children[0]))).collect()
}

/// A map or a contraction with an operand absorbed: for each operand `k`
/// whose class holds a one-operand node that `pick` accepts, the same
/// operation reading that node's operand `x` instead, with operand `k`'s
/// index map (or labels) `list` replaced by `through(eg, k, list, picked,
/// x)`, where that gives one. Permutes and expansions are absorbed so.
pub fn absorb_operands<T>(
    eg: &mut EG,
    node: &ENode,
    op: &Op,
    pick: impl Fn(&Op) -> Option<T>,
    through: impl Fn(&EG, usize, &[usize], &T, Id) -> Option<Vec<usize>>,
) -> Vec<Id> {
    let lists = match op {
        Op::Map { maps, .. } => maps,
        Op::Contract { labels, .. } => labels,
        _ => return Vec::new(),
    };
    let ty = node_type(eg, node).clone();
    let mut out = Vec::new();
    for (k, &child) in node.children.iter().enumerate() {
        for (picked, x) in unary_nodes(eg, child, &pick) {
            let Some(list) = through(eg, k, &lists[k], &picked, x) else { continue };
            let mut absorbed = op.clone();
            if let Op::Map { maps: l, .. } | Op::Contract { labels: l, .. } = &mut absorbed {
                l[k] = list;
            }
            let mut children = node.children.clone();
            children[k] = x;
            out.push(add(eg, absorbed, ty.clone(), children));
        }
    }
    out
}

/// `x` seen with type `ty` (same sizes): `x` itself when its type is `ty`,
/// else a rename.
pub fn as_type(eg: &mut EG, x: Id, ty: &Type) -> Id {
    if type_of(eg, x) == ty { x } else { add(eg, Op::Rename, ty.clone(), vec![x]) }
}

/// A tensor type with other axes (kind and range kept unless given).
pub fn with_axes(t: &TensorType, axes: Vec<nax_values::Axis>) -> Type {
    Type::Tensor(TensorType { axes, ..t.clone() })
}

/// A plain tensor type with a full range (a value a rule computes on the way).
pub fn plain(t: &TensorType, axes: Vec<nax_values::Axis>) -> Type {
    Type::Tensor(TensorType { axes, kind: Kind::Plain, range: t.range.map(|_| Range::FULL), dtype: t.dtype })
}

/// Whether `p` is the identity permutation.
pub fn is_identity(p: &[usize]) -> bool {
    p.iter().enumerate().all(|(i, &j)| i == j)
}

/// The inverse of a permutation.
pub fn inverse(p: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; p.len()];
    for (i, &j) in p.iter().enumerate() {
        if let Some(slot) = inv.get_mut(j) {
            *slot = i;
        }
    }
    inv
}

/// A rule that matches single e-nodes by their operation: `wants` picks
/// the operations, `apply` gives the classes equal to one matching node.
#[derive(Clone, Copy)]
pub struct NodeRule {
    pub wants: fn(&Op) -> bool,
    pub apply: fn(&mut EG, &ENode, &Op) -> Vec<Id>,
}

/// A rewrite rule egg refused to build (a bug of nax): its name and egg's reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{rule}`: {reason}")]
pub struct RuleError {
    pub rule: String,
    pub reason: String,
}

/// A named rewrite from a [`NodeRule`].
pub fn rule(name: &str, wants: fn(&Op) -> bool, apply: fn(&mut EG, &ENode, &Op) -> Vec<Id>) -> Result<Rewrite<ENode, Types>, RuleError> {
    let r = NodeRule { wants, apply };
    Rewrite::new(name, r, r).map_err(|reason| RuleError { rule: name.to_string(), reason })
}

impl Searcher<ENode, Types> for NodeRule {
    fn search_eclass_with_limit(&self, eg: &EG, eclass: Id, limit: usize) -> Option<SearchMatches<'_, ENode>> {
        let hit = limit > 0 && eg[eclass].nodes.iter().any(|n| (self.wants)(eg.analysis.op(n)));
        hit.then(|| SearchMatches { eclass, substs: vec![Subst::default()], ast: None })
    }

    fn vars(&self) -> Vec<Var> {
        Vec::new()
    }
}

impl Applier<ENode, Types> for NodeRule {
    fn apply_one(&self, eg: &mut EG, eclass: Id, _subst: &Subst, _ast: Option<&PatternAst<ENode>>, _rule: Symbol) -> Vec<Id> {
        let mut changed = Vec::new();
        for (node, op) in nodes_of(eg, eclass, self.wants) {
            for new in (self.apply)(eg, &node, &op) {
                if eg.union(eclass, new) {
                    changed.push(new);
                }
            }
        }
        changed
    }
}

/// A size's extent for the cost model (symbolic sizes count as 64).
pub fn extent(symbols: &SizeTable, s: Size) -> f64 {
    symbols.constant(s).map_or(64.0, |c| c as f64)
}

/// The elements of a value.
fn elements(symbols: &SizeTable, ty: &Type) -> f64 {
    match ty {
        Type::Tensor(t) => t.axes.iter().map(|a| extent(symbols, a.size)).product(),
        _ => 1.0,
    }
}

/// The cost model: for each node, one plus an estimate of the memory
/// traffic and arithmetic it adds, in elements. Renames are free, regroupings nearly,
/// an elementwise map costs its elements per operand, an expansion its
/// elements, a permute four times its elements (a strided copy), a
/// reduction or softmax its operand's elements, a contraction two FLOPs per
/// multiply-add.
pub struct Cost<'a> {
    pub eg: &'a EG,
}

impl CostFunction<ENode> for Cost<'_> {
    type Cost = f64;

    fn cost<C: FnMut(Id) -> f64>(&mut self, enode: &ENode, mut costs: C) -> f64 {
        let a = &self.eg.analysis;
        let ty = a.ty(enode.ty);
        let own = elements(&a.symbols, ty);
        let operand = |i: usize| enode.children.get(i).map_or(1.0, |&c| elements(&a.symbols, type_of(self.eg, c)));
        let work = match a.op(enode) {
            Op::Input { .. } | Op::Weight { .. } | Op::Literal(_) | Op::SizeValue(_) | Op::Rename => 0.0,
            // A regrouping may need a copy where its operand is not contiguous.
            Op::Reshape => 0.5,
            // `where` is the canonical form of `masked_fill`.
            Op::Map { func: nax_ir::MapFn::Builtin(nax_ops::Elementwise::MaskedFill), .. } => own * enode.children.len() as f64 + 1.0,
            Op::Map { .. } => own * enode.children.len().max(1) as f64,
            Op::Expand { .. } | Op::Construct { .. } | Op::Select { .. } | Op::Slice { .. } | Op::Concat { .. } | Op::Take { .. } => own,
            // Zeros of its own size, then each gathered value added once.
            Op::ScatterAdd { .. } => own + operand(0),
            Op::Scan { .. } | Op::ArgReduce { .. } => operand(0),
            // Data between processes: dearer than any computation on it.
            Op::Exchange(_) => 16.0 * own,
            Op::Permute { .. } => 4.0 * own,
            Op::Reduce { .. } => operand(0),
            Op::Along { .. } => 3.0 * own,
            Op::Contract { labels, .. } => {
                let mut extents: HashMap<usize, f64> = HashMap::new();
                for (&c, ls) in enode.children.iter().zip(labels) {
                    if let Type::Tensor(t) = type_of(self.eg, c) {
                        for (&l, axis) in ls.iter().zip(&t.axes) {
                            let e = extent(&a.symbols, axis.size);
                            let slot = extents.entry(l).or_insert(e);
                            *slot = slot.max(e);
                        }
                    }
                }
                let multiply_adds: f64 = extents.values().product();
                2.0 * multiply_adds * (enode.children.len() as f64 - 1.0).max(1.0) + own
            }
        };
        1.0 + work + enode.children.iter().map(|&c| costs(c)).sum::<f64>()
    }
}

/// The cheapest term of each root's class under [`Cost`], built as one
/// expression in which the roots share what they have in common; with its
/// cost (the roots' costs summed) and the position of each root in it.
/// A worklist revisits a class only when a child's cost fell (egg's
/// `Extractor` sweeps every class until nothing changes, which is
/// quadratic on the long chains inlining makes). Deterministic: classes
/// are queued in the e-graph's order, and a node replaces the best one
/// only when strictly cheaper. `None` when a root has no finite term.
pub fn extract(eg: &EG, roots: &[Id]) -> Option<(f64, RecExpr<ENode>, Vec<Id>)> {
    let mut best: HashMap<Id, (f64, ENode)> = HashMap::new();
    let mut queue: std::collections::VecDeque<Id> = eg.classes().filter(|c| c.nodes.iter().any(|n| n.children.is_empty())).map(|c| c.id).collect();
    let mut queued: std::collections::HashSet<Id> = queue.iter().copied().collect();
    let mut cost = Cost { eg };
    while let Some(id) = queue.pop_front() {
        queued.remove(&id);
        let mut candidate: Option<(f64, &ENode)> = None;
        for n in eg[id].iter() {
            if n.children.iter().all(|c| best.contains_key(&eg.find(*c))) {
                let c = cost.cost(n, |child| best[&eg.find(child)].0);
                if candidate.is_none_or(|(b, _)| c < b) {
                    candidate = Some((c, n));
                }
            }
        }
        let Some((c, node)) = candidate else { continue };
        if best.get(&id).is_none_or(|(old, _)| c < *old) {
            best.insert(id, (c, node.clone()));
            for parent in eg[id].parents() {
                let parent = eg.find(parent);
                if queued.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
    }
    let mut total = 0.0;
    for &root in roots {
        total += best.get(&eg.find(root))?.0;
    }
    // Each class once, children first (an explicit stack: graphs are deep).
    let mut expr: RecExpr<ENode> = RecExpr::default();
    let mut built: HashMap<Id, Id> = HashMap::new();
    let mut positions = Vec::with_capacity(roots.len());
    for &root in roots {
        let mut stack = vec![(eg.find(root), false)];
        while let Some((class, expanded)) = stack.pop() {
            if built.contains_key(&class) {
                continue;
            }
            let node = &best.get(&class)?.1;
            if expanded {
                let mapped = node.clone().map_children(|c| built[&eg.find(c)]);
                built.insert(class, expr.add(mapped));
            } else {
                stack.push((class, true));
                stack.extend(node.children.iter().map(|&c| (eg.find(c), false)).filter(|(c, _)| !built.contains_key(c)));
            }
        }
        positions.push(built[&eg.find(root)]);
    }
    Some((total, expr, positions))
}

/// A graph as an e-graph: its analysis and the outputs' classes.
pub fn to_egraph(g: &Graph) -> Result<(EG, Vec<Id>), crate::OptimizeError> {
    let mut eg = EG::new(Types::new(g.symbols.clone()));
    let order = petgraph::algo::toposort(&g.graph, None).map_err(|_| crate::OptimizeError::Cycle { function: g.name.clone() })?;
    let mut class: HashMap<NodeIndex, Id> = HashMap::new();
    for n in order {
        let children = g.operands(n).iter().map(|o| class[o]).collect();
        let node = &g.graph[n];
        class.insert(n, add(&mut eg, node.op.clone(), node.ty.clone(), children));
    }
    let roots = g.output_nodes().map(|o| class[&o]).collect();
    Ok((eg, roots))
}

/// The graph of an extracted expression: `g`'s inputs (all of them, in
/// order, used or not), the expression's nodes in order, and as outputs
/// (named as `g`'s) the nodes at `roots`.
pub fn to_graph(g: &Graph, expr: &RecExpr<ENode>, roots: &[Id], types: &Types) -> Graph {
    let mut out = Graph {
        name: g.name.clone(),
        graph: Default::default(),
        inputs: Vec::with_capacity(g.inputs.len()),
        outputs: Vec::new(),
        symbols: g.symbols.clone(),
        size_arguments: g.size_arguments.clone(),
    };
    for &i in &g.inputs {
        let node = g.graph[i].clone();
        out.inputs.push(out.graph.add_node(node));
    }
    let mut built: Vec<NodeIndex> = Vec::with_capacity(expr.as_ref().len());
    for node in expr.as_ref() {
        let op = types.op(node).clone();
        let n = match op {
            Op::Input { index, .. } if index < out.inputs.len() => out.inputs[index],
            op => {
                let children: Vec<NodeIndex> = node.children.iter().map(|&c| built[usize::from(c)]).collect();
                out.add(op, types.ty(node.ty).clone(), &children)
            }
        };
        built.push(n);
    }
    out.outputs = g.outputs.iter().zip(roots).map(|(o, &r)| nax_ir::Output { name: o.name.clone(), node: built[usize::from(r)] }).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nax_contract::DType;
    use nax_values::Axis;

    fn tensor(dtype: DType, sizes: &[u64]) -> Type {
        let axes = sizes.iter().map(|&s| Axis::unnamed(Size::Const(s))).collect();
        Type::Tensor(TensorType { dtype, kind: Kind::Plain, axes, range: Some(Range::FULL) })
    }

    #[test]
    fn merging_contradicting_types_is_an_internal_error_naming_both() {
        let mut eg = EG::new(Types::default());
        let a = add(&mut eg, Op::Weight { name: "a".into() }, tensor(DType::F32, &[4]), Vec::new());
        let b = add(&mut eg, Op::Weight { name: "b".into() }, tensor(DType::F32, &[5]), Vec::new());
        let c = add(&mut eg, Op::Weight { name: "c".into() }, tensor(DType::F32, &[4]), Vec::new());
        eg.union(a, c);
        assert_eq!(eg.analysis.contradiction, None);
        eg.union(a, b);
        let message = eg.analysis.contradiction.clone().expect("a contradiction");
        assert!(message.contains("f32 plain [_:4]") && message.contains("f32 plain [_:5]"), "{message}");
    }
}
