//! The named-axis IR graph: a dataflow graph (petgraph) of one function with
//! its calls inlined. Every node carries its value's type (axes with names
//! and sizes, dtype, kind, range) and makes one alignment decision explicit:
//! broadcasts are index maps (an operand axis reads a result axis; result
//! axes an operand lacks are read with stride 0), permutes, groupings
//! (reshapes that keep row-major order), selections, reductions and
//! contractions are nodes of their own.

use nax_contract::HostType;
use nax_contract::shard::Exchange;
use nax_contract::{DType, SizeTable};
use nax_ops::{AlongAxis, Constructor, Elementwise, Reduction};
use nax_ops::{BinaryOp, UnaryOp};
use nax_values::{Range, TensorType};
use petgraph::graph::{DiGraph, NodeIndex};

/// A value's type in the graph: a host scalar (with its range, if any)
/// or a tensor. Unlike the checker's type it has no error case: only
/// functions that checked are lowered.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    Host(HostType, Option<Range>),
    Tensor(TensorType),
}

/// A node: its operation and its value's type.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub ty: Type,
}

/// A host literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// The function an elementwise node applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapFn {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Builtin(Elementwise),
}

/// What a node does. Operands are the node's incoming edges, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The function's parameter `index` (a tensor or a host scalar).
    Input {
        index: usize,
        name: String,
    },
    /// A weight, bound by name at load time.
    Weight {
        name: String,
    },
    Literal(Literal),
    /// A size used as an `int` host scalar.
    SizeValue(nax_contract::Size),
    /// Elementwise: operand k's axis j reads result axis `maps[k][j]`; result
    /// axes an operand does not map are broadcast (stride 0). The operation
    /// computes in `compute` (the promoted operand dtype) and gives the node's dtype.
    Map {
        func: MapFn,
        maps: Vec<Vec<usize>>,
        compute: nax_contract::DType,
    },
    /// A contraction (einsum, `@`): each operand axis has a label; labels not
    /// in `output` are summed over.
    Contract {
        labels: Vec<Vec<usize>>,
        output: Vec<usize>,
    },
    /// Reduces the operand's listed axes.
    Reduce {
        op: Reduction,
        axes: Vec<usize>,
    },
    /// softmax, log_softmax, logsumexp along one axis.
    Along {
        func: AlongAxis,
        axis: usize,
    },
    /// A view with another grouping of the same row-major elements (its shape is the node's type).
    Reshape,
    /// Result axis i is operand axis `perm[i]`.
    Permute {
        perm: Vec<usize>,
    },
    /// Result axis `map[j]` is operand axis j; the other result axes are new (stride 0).
    Expand {
        map: Vec<usize>,
    },
    /// Takes index `index` along `axis` (of size `count`), dropping that axis.
    Select {
        axis: usize,
        index: usize,
        count: usize,
    },
    /// The same data under new axis names (`as`).
    Rename,
    /// Elements `start, start + step, ...` of `axis` (as many as the
    /// node's type says), the other axes unchanged.
    Slice {
        axis: usize,
        start: nax_contract::Size,
        step: u64,
    },
    /// The operands, whose axes are in the result's order, joined along `axis`.
    Concat {
        axis: usize,
    },
    /// A gather: operand 0 read along `axis` at the positions operand 1
    /// (integers) holds; that axis is replaced, where it stands, by the
    /// axes of operand 1. A position outside the axis fails the call.
    Take {
        axis: usize,
    },
    /// The adjoint of [`Op::Take`]: zeros of the node's type (or operand
    /// 2, of that type, when there is one), to which each element of
    /// operand 0 (the node's axes with `axis` replaced, where it stands, by
    /// the axes of operand 1) is added at the position along `axis` that
    /// operand 1 holds; positions that repeat sum. A position outside the
    /// axis fails the call, as `take`'s does.
    ScatterAdd {
        axis: usize,
    },
    /// A running sum (`Sum`) or product (`Prod`) along `axis`.
    Scan {
        op: Reduction,
        axis: usize,
    },
    /// The first position of the largest (`Max`) or smallest (`Min`)
    /// element along `axis`, which goes; a NaN counts as the largest and
    /// as the smallest, as in torch.
    ArgReduce {
        op: Reduction,
        axis: usize,
    },
    /// zeros, ones, full (one operand: the value), arange.
    Construct {
        func: Constructor,
    },
    /// Data moved between the processes of a sharded function, or a
    /// rank's block of a whole value (SHARDING.md): only in a rank's graph,
    /// which is cut at these into stages before kernels are formed.
    Exchange(Exchange),
}

/// One result of a function's graph: the node it is, and its declared name.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub name: Option<String>,
    pub node: NodeIndex,
}

/// One function as a graph.
#[derive(Clone, Debug)]
pub struct Graph {
    pub name: String,
    pub graph: DiGraph<Node, usize>,
    /// The parameters' nodes, in order.
    pub inputs: Vec<NodeIndex>,
    /// The results, in declared order (one, unnamed, for `-> TYPE`).
    pub outputs: Vec<Output>,
    /// The sizes every type refers to, with the call-boundary checks.
    pub symbols: SizeTable,
    /// Sizes given by host int parameters: the size and the input's index.
    pub size_arguments: Vec<(nax_contract::Size, usize)>,
}

impl Graph {
    /// The operands of a node, in order.
    pub fn operands(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut edges: Vec<(usize, NodeIndex)> =
            self.graph.edges_directed(n, petgraph::Direction::Incoming).map(|e| (*e.weight(), petgraph::visit::EdgeRef::source(&e))).collect();
        edges.sort_by_key(|(i, _)| *i);
        edges.into_iter().map(|(_, s)| s).collect()
    }

    /// The result nodes, in order.
    pub fn output_nodes(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.outputs.iter().map(|o| o.node)
    }

    /// Drops every node the outputs do not depend on (the parameters'
    /// nodes stay: they are the signature). A value a function binds and
    /// never uses is not computed: not `v = sum(repeat(x, n -> n r,
    /// r=k), r)` with `k` at 2^63, nor anything cheaper.
    pub fn remove_dead_nodes(&mut self) {
        let live = self.live_nodes();
        if live.iter().all(|&l| l) {
            return;
        }
        let mut kept = DiGraph::with_capacity(self.graph.node_count(), self.graph.edge_count());
        let mut new_index = vec![None; live.len()];
        for n in self.graph.node_indices().filter(|n| live[n.index()]) {
            new_index[n.index()] = Some(kept.add_node(self.graph[n].clone()));
        }
        for e in self.graph.raw_edges() {
            if let (Some(a), Some(b)) = (new_index[e.source().index()], new_index[e.target().index()]) {
                kept.add_edge(a, b, e.weight);
            }
        }
        let map = |n: NodeIndex| new_index[n.index()].unwrap_or(n);
        self.inputs = self.inputs.iter().map(|&n| map(n)).collect();
        for o in &mut self.outputs {
            o.node = map(o.node);
        }
        self.graph = kept;
    }

    /// Which nodes the outputs depend on, and the parameters' nodes, by
    /// index: what [`Graph::remove_dead_nodes`] keeps (in index order).
    pub fn live_nodes(&self) -> Vec<bool> {
        let mut live = vec![false; self.graph.node_count()];
        let mut stack: Vec<NodeIndex> = self.output_nodes().collect();
        stack.extend(&self.inputs);
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut live[n.index()], true) {
                continue;
            }
            stack.extend(self.graph.neighbors_directed(n, petgraph::Direction::Incoming));
        }
        live
    }

    /// How the errors of a `take` node `n` (or of its adjoint, a
    /// `scatter_add`) name the axis it gathers along
    /// (`axis 'V'`, or `axis 0` when unnamed): the interpreter's and the
    /// native driver's index checks say the same.
    pub fn take_axis_label(&self, n: NodeIndex) -> String {
        let (axis, table) = match self.graph[n].op {
            Op::Take { axis } => (axis, self.operands(n).first().map(|&o| &self.graph[o].ty)),
            Op::ScatterAdd { axis } => (axis, Some(&self.graph[n].ty)),
            _ => (0, None),
        };
        let name = match table {
            Some(Type::Tensor(t)) => t.axes.get(axis).and_then(|a| a.name.clone()),
            _ => None,
        };
        name.map_or_else(|| format!("axis {axis}"), |a| format!("axis '{a}'"))
    }

    /// Adds a node with its operands.
    pub fn add(&mut self, op: Op, ty: Type, operands: &[NodeIndex]) -> NodeIndex {
        let n = self.graph.add_node(Node { op, ty });
        for (i, &o) in operands.iter().enumerate() {
            self.graph.add_edge(o, n, i);
        }
        n
    }
}

/// The dtype a value computes in (host scalars: f64 for floats, i64 for ints).
pub fn value_dtype(ty: &Type) -> DType {
    match ty {
        Type::Tensor(t) => t.dtype,
        Type::Host(nax_contract::HostType::Float, _) => DType::F64,
        Type::Host(nax_contract::HostType::Int, _) => DType::I64,
        Type::Host(nax_contract::HostType::Bool, _) => DType::Bool,
    }
}
