//! The rank's graph: each node of the function's graph, in topological
//! order, with the split of each of its axes decided from its operands'
//! (SHARDING.md's rules), the exchanges its operation needs inserted
//! before or after it, and the name rule applied (an axis whose name is
//! split holds the rank's block).

use crate::ShardError;
use crate::regroup;
use crate::replicated::{self, Chosen};
use nax_contract::shard::{Exchange, Mesh, ReduceOp, Sharding, Split, WeightBlock};
use nax_contract::{Size, SymDef, SymId, Symbol};
use nax_ir::{Graph, Literal, MapFn, Op, Output, Type};
use nax_ops::{AlongAxis, BinaryOp, Reduction};
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// The splits of a value's axes (`None`: the rank holds the axis whole).
pub(crate) type Splits = Vec<Option<Split>>;

/// A function's graph for one rank of a mesh.
#[derive(Clone, Debug)]
pub struct Partitioned {
    /// The rank's graph: blocks' sizes, exchanges as nodes.
    pub graph: Graph,
    /// The split of each axis of each node of `graph`, by node index.
    pub splits: Vec<Splits>,
    /// The weights the rank binds, each the rank's block of a module weight.
    pub weights: Vec<WeightBlock>,
}

/// The state of a partitioning.
pub(crate) struct Partitioner<'a> {
    pub(crate) g: &'a Graph,
    pub(crate) mesh: &'a Mesh,
    pub(crate) sharding: &'a Sharding,
    pub(crate) out: Graph,
    pub(crate) splits: HashMap<NodeIndex, Splits>,
    /// Each whole size split in parts, and its block's size.
    local: HashMap<(Size, u64), Size>,
    /// Each block's size, and the whole size it is a part of.
    whole: HashMap<Size, Size>,
    pub(crate) blocked: HashMap<(NodeIndex, usize, Split), NodeIndex>,
    /// The weights' nodes and the module weight each is (part of).
    pub(crate) weights: Vec<(NodeIndex, String)>,
    /// The module weights split along a contracted axis by the compiler.
    chosen: &'a Chosen,
}

/// Splits `g` over `mesh` as `sharding` says: the graph one rank runs.
/// Where that leaves a large product whole on every rank, its weight is
/// split along the contracted axis too ([`crate::replicated`]).
pub fn partition(g: &Graph, mesh: &Mesh, sharding: &Sharding) -> Result<Partitioned, ShardError> {
    sharding.check_against(mesh)?;
    let first = partition_with(g, mesh, sharding, &Chosen::new())?;
    let chosen = replicated::chosen_splits(&first, mesh);
    if chosen.is_empty() {
        return Ok(first);
    }
    partition_with(g, mesh, sharding, &chosen)
}

/// [`partition`], the weights in `chosen` split as it says.
fn partition_with(g: &Graph, mesh: &Mesh, sharding: &Sharding, chosen: &Chosen) -> Result<Partitioned, ShardError> {
    let order = crate::topological(g)?;
    let out = crate::empty_like(g, g.name.clone());
    let mut p = Partitioner {
        g,
        mesh,
        sharding,
        out,
        splits: HashMap::new(),
        local: HashMap::new(),
        whole: HashMap::new(),
        blocked: HashMap::new(),
        weights: Vec::new(),
        chosen,
    };
    let mut map: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    for n in order {
        let operands: Vec<NodeIndex> = g.operands(n).iter().map(|o| map[o]).collect();
        let made = p.node(n, &operands)?;
        map.insert(n, made);
    }
    p.out.inputs = g.inputs.iter().map(|i| map[i]).collect();
    let mut outputs = Vec::with_capacity(g.outputs.len());
    for o in &g.outputs {
        outputs.push(Output { name: o.name.clone(), node: p.contiguous(map[&o.node])? });
    }
    p.out.outputs = outputs;
    p.finish()
}

impl Partitioner<'_> {
    /// The split the name rule gives an axis called `name`.
    pub(crate) fn named_split(&self, name: Option<&str>) -> Option<Split> {
        let mesh_axis = self.mesh.axis(self.sharding.mesh_axis_of(name?)?)?;
        Some(Split { mesh_axis, parts: self.mesh.size(mesh_axis) as u64, outer: 1 })
    }

    /// The axis and split the compiler chose for node `n` of the
    /// function's graph, a weight ([`crate::replicated`]).
    fn chosen_weight(&self, n: NodeIndex) -> Option<&(usize, Split)> {
        match &self.g.graph[n].op {
            Op::Weight { name } => self.chosen.get(name),
            _ => None,
        }
    }

    /// The mesh axis's name.
    fn mesh_name(&self, axis: usize) -> String {
        self.mesh.axes().get(axis).map_or_else(|| format!("#{axis}"), |(n, _)| n.clone())
    }

    /// The size of a block of `size` in `split.parts` parts.
    fn local_size(&mut self, size: Size, split: Split, axis: Option<&str>) -> Result<Size, ShardError> {
        let parts = split.parts;
        let size = self.out.symbols.resolve(size);
        if let Size::Const(c) = size {
            if c % (parts * split.outer) != 0 {
                let axis = axis.unwrap_or("(unnamed)").to_string();
                return Err(ShardError::NotDivisible { axis, size: c, mesh_axis: self.mesh_name(split.mesh_axis), parts });
            }
            return Ok(Size::Const(c / parts));
        }
        if let Some(&l) = self.local.get(&(size, parts)) {
            return Ok(l);
        }
        let Size::Sym(id) = size else { unreachable!("a constant returned above") };
        let symbols = &mut self.out.symbols.symbols;
        let fresh = SymId(symbols.len() as u32);
        let name = format!("{}/{parts}", symbols[id.0 as usize].name);
        let local = Size::Sym(fresh);
        // A free size is the block's times the parts (the block is what
        // the call is given); a derived one is divided, exactly, at the call.
        let def = if symbols[id.0 as usize].def == SymDef::Free {
            symbols[id.0 as usize].def = SymDef::Mul(local, Size::Const(parts));
            SymDef::Free
        } else {
            SymDef::Div(size, Size::Const(parts))
        };
        symbols.push(Symbol { name, def, class: fresh, value: None });
        self.local.insert((size, parts), local);
        self.whole.insert(local, size);
        Ok(local)
    }

    /// The whole size a block of `size` is one of `parts` of.
    pub(crate) fn whole_size(&self, size: Size, parts: u64) -> Size {
        match self.out.symbols.resolve(size) {
            Size::Const(c) => Size::Const(c * parts),
            s => self.whole.get(&s).copied().unwrap_or(s),
        }
    }

    /// `ty` with axis `axis` (whole) cut to its block.
    pub(crate) fn cut(&mut self, ty: &Type, axis: usize, split: Split) -> Result<Type, ShardError> {
        let mut ty = ty.clone();
        if let Type::Tensor(t) = &mut ty
            && let Some(a) = t.axes.get_mut(axis)
        {
            a.size = self.local_size(a.size, split, a.name.as_deref())?;
        }
        Ok(ty)
    }

    /// `ty` (whole sizes) cut to the blocks `splits` says.
    fn cut_all(&mut self, ty: &Type, splits: &[Option<Split>]) -> Result<Type, ShardError> {
        let mut ty = ty.clone();
        for (axis, split) in splits.iter().enumerate() {
            if let Some(split) = split {
                ty = self.cut(&ty, axis, *split)?;
            }
        }
        Ok(ty)
    }

    /// Adds a node of the rank's graph with its axes' splits.
    pub(crate) fn add(&mut self, op: Op, ty: Type, operands: &[NodeIndex], splits: Splits) -> NodeIndex {
        let n = self.out.add(op, ty, operands);
        self.splits.insert(n, splits);
        n
    }

    pub(crate) fn splits_of(&self, n: NodeIndex) -> Splits {
        self.splits.get(&n).cloned().unwrap_or_default()
    }

    /// Whether axis `axis` of `n` has size 1 (broadcast along any size).
    fn size_one(&self, n: NodeIndex, axis: usize) -> bool {
        match &self.out.graph[n].ty {
            Type::Tensor(t) => t.axes.get(axis).is_some_and(|a| self.out.symbols.resolve(a.size) == Size::Const(1)),
            Type::Host(..) => false,
        }
    }

    /// `n` with its axes split as `want` says: gathered where it holds a
    /// block it should not, cut to the rank's block where it holds whole
    /// what should be split.
    fn take(&mut self, n: NodeIndex, want: &[Option<Split>]) -> Result<NodeIndex, ShardError> {
        self.take_by(n, want, Self::block)
    }

    /// [`Self::take`], each block cut by `block`.
    fn take_by(
        &mut self,
        n: NodeIndex,
        want: &[Option<Split>],
        block: fn(&mut Self, NodeIndex, usize, Split) -> Result<NodeIndex, ShardError>,
    ) -> Result<NodeIndex, ShardError> {
        let mut n = n;
        for (axis, &w) in want.iter().enumerate() {
            let have = self.splits_of(n).get(axis).copied().flatten();
            if have == w {
                continue;
            }
            if let Some(split) = have {
                n = self.gather(n, axis, split)?;
            }
            if let Some(split) = w {
                n = block(self, n, axis, split)?;
            }
        }
        Ok(n)
    }

    /// The whole of axis `axis` of `n`, gathered from the ranks' blocks.
    fn gather(&mut self, n: NodeIndex, axis: usize, split: Split) -> Result<NodeIndex, ShardError> {
        let mut ty = self.out.graph[n].ty.clone();
        if let Type::Tensor(t) = &mut ty {
            t.axes[axis].size = self.whole_size(t.axes[axis].size, split.parts);
        }
        let mut splits = self.splits_of(n);
        splits[axis] = None;
        Ok(self.add(Op::Exchange(Exchange::AllGather { axis, split }), ty, &[n], splits))
    }

    /// `n` with each axis split in runs regathered and cut into one
    /// contiguous block: a result's block is where its offsets say.
    fn contiguous(&mut self, mut n: NodeIndex) -> Result<NodeIndex, ShardError> {
        for (axis, split) in self.splits_of(n).into_iter().enumerate() {
            if let Some(split) = split.filter(|s| s.outer > 1) {
                n = self.gather(n, axis, split)?;
                n = self.block(n, axis, Split { outer: 1, ..split })?;
            }
        }
        Ok(n)
    }

    /// Keeps the first split of each mesh axis; later axes on the same
    /// mesh axis are held whole.
    fn one_axis_per_mesh_axis(splits: &mut [Option<Split>]) {
        let mut used = Vec::new();
        for s in splits.iter_mut() {
            if let Some(split) = s {
                if used.contains(&split.mesh_axis) {
                    *s = None;
                } else {
                    used.push(split.mesh_axis);
                }
            }
        }
    }

    /// The rank's node for `n` of the function's graph, whose operands'
    /// nodes are `operands`.
    fn node(&mut self, n: NodeIndex, operands: &[NodeIndex]) -> Result<NodeIndex, ShardError> {
        let node = &self.g.graph[n];
        let rank = match &node.ty {
            Type::Tensor(t) => t.rank(),
            Type::Host(..) => 0,
        };
        let has = |p: &Self, i: usize| p.splits_of(operands[i]);
        let mut reduced: Vec<(ReduceOp, usize)> = Vec::new();
        let mut gathered: Vec<(usize, Split)> = Vec::new();
        let mut mean_parts = 1u64;
        let (operands, splits): (Vec<NodeIndex>, Splits) = match &node.op {
            Op::Input { .. } | Op::Weight { .. } => {
                let names: Vec<Option<String>> = axis_names(&node.ty);
                let mut splits: Splits = names.iter().map(|name| self.named_split(name.as_deref())).collect();
                self.two_named_axes(&names)?;
                if let Some(&(axis, split)) = self.chosen_weight(n) {
                    splits[axis] = Some(split);
                }
                (Vec::new(), splits)
            }
            Op::Literal(_) | Op::SizeValue(_) => (Vec::new(), Vec::new()),
            Op::Map { maps, .. } => {
                let mut choose: Splits = vec![None; rank];
                for (k, m) in maps.iter().enumerate() {
                    for (j, &r) in m.iter().enumerate() {
                        if choose[r].is_none() {
                            choose[r] = has(self, k).get(j).copied().flatten();
                        }
                    }
                }
                Self::one_axis_per_mesh_axis(&mut choose);
                let mut ops = Vec::new();
                for (k, m) in maps.iter().enumerate() {
                    // An axis of size 1 held whole is broadcast along a split one: it stays whole.
                    let held = has(self, k);
                    let broadcast = |j: usize| held.get(j).copied().flatten().is_none() && self.size_one(operands[k], j);
                    let want: Splits = m.iter().enumerate().map(|(j, &r)| choose[r].filter(|_| !broadcast(j))).collect();
                    ops.push(self.take(operands[k], &want)?);
                }
                (ops, choose)
            }
            Op::Contract { labels, output } => {
                let count = labels.iter().flatten().chain(output).map(|l| l + 1).max().unwrap_or(0);
                let mut choose: Splits = vec![None; count];
                for (k, ls) in labels.iter().enumerate() {
                    for (j, &l) in ls.iter().enumerate() {
                        if choose[l].is_none() {
                            choose[l] = has(self, k).get(j).copied().flatten();
                        }
                    }
                }
                // One label per mesh axis, the output's first.
                let mut order: Vec<usize> = output.clone();
                order.extend((0..count).filter(|l| !output.contains(l)));
                let mut ordered: Splits = order.iter().map(|&l| choose[l]).collect();
                Self::one_axis_per_mesh_axis(&mut ordered);
                for (i, &l) in order.iter().enumerate() {
                    choose[l] = ordered[i];
                }
                // Beside a weight the compiler split, the other operands are cut where they are.
                let beside_chosen = self.g.operands(n).into_iter().any(|o| self.chosen_weight(o).is_some());
                let block = if beside_chosen { Self::cut_in_place } else { Self::block };
                let mut ops = Vec::new();
                for (k, ls) in labels.iter().enumerate() {
                    let want: Splits = ls.iter().map(|&l| choose[l]).collect();
                    ops.push(self.take_by(operands[k], &want, block)?);
                }
                for l in (0..count).filter(|l| !output.contains(l)) {
                    if let Some(split) = choose[l] {
                        reduced.push((ReduceOp::Sum, split.mesh_axis));
                    }
                }
                (ops, output.iter().map(|&l| choose[l]).collect())
            }
            Op::Reduce { op, axes } => {
                let given = has(self, 0);
                for &a in axes {
                    if let Some(split) = given.get(a).copied().flatten() {
                        let all_reduce = match op {
                            Reduction::Sum | Reduction::Mean => ReduceOp::Sum,
                            Reduction::Max => ReduceOp::Max,
                            Reduction::Min => ReduceOp::Min,
                            Reduction::Prod => ReduceOp::Prod,
                        };
                        if *op == Reduction::Mean {
                            mean_parts *= split.parts;
                        }
                        reduced.push((all_reduce, split.mesh_axis));
                    }
                }
                let kept = given.iter().enumerate().filter(|(a, _)| !axes.contains(a)).map(|(_, s)| *s).collect();
                (operands.to_vec(), kept)
            }
            // From the ranks' partial statistics, the axis never gathered.
            Op::Along { func, axis } if self.along_from_statistics(operands[0], *axis) => {
                let mut kept = self.splits_of(operands[0]);
                if *func == AlongAxis::LogSumExp {
                    kept.remove(*axis);
                }
                let ty = self.cut_all(&node.ty, &kept)?;
                let made = self.along_in_blocks(*func, *axis, operands[0], ty);
                return self.name_rule(made, &axis_names(&node.ty));
            }
            Op::Along { axis, .. } | Op::Slice { axis, .. } | Op::Scan { axis, .. } => {
                let mut want = has(self, 0);
                want[*axis] = None;
                (vec![self.take(operands[0], &want)?], want)
            }
            Op::Select { axis, .. } | Op::ArgReduce { axis, .. } => {
                let mut want = has(self, 0);
                want[*axis] = None;
                let x = self.take(operands[0], &want)?;
                want.remove(*axis);
                (vec![x], want)
            }
            Op::Reshape => {
                let to = sizes(&self.g.graph[n].ty);
                let from = sizes(&self.g.graph[self.g.operands(n)[0]].ty);
                let mut want = has(self, 0);
                let mut result: Splits = vec![None; rank];
                for (axis, split) in want.clone().into_iter().enumerate() {
                    let Some(split) = split else { continue };
                    match regroup::carry(&self.out.symbols, &from, &to, axis, split) {
                        Some((q, s)) if result[q].is_none() => result[q] = Some(s),
                        _ => want[axis] = None,
                    }
                }
                (vec![self.take(operands[0], &want)?], result)
            }
            Op::Rename => (operands.to_vec(), has(self, 0)),
            Op::Permute { perm } => {
                let given = has(self, 0);
                (operands.to_vec(), perm.iter().map(|&p| given[p]).collect())
            }
            Op::Expand { map } => {
                let given = has(self, 0);
                let mut result: Splits = vec![None; rank];
                for (j, &r) in map.iter().enumerate() {
                    result[r] = given[j];
                }
                (operands.to_vec(), result)
            }
            Op::Concat { axis } => {
                let mut choose: Splits = vec![None; rank];
                for k in 0..operands.len() {
                    for (a, s) in has(self, k).into_iter().enumerate() {
                        if choose[a].is_none() {
                            choose[a] = s;
                        }
                    }
                }
                choose[*axis] = None;
                Self::one_axis_per_mesh_axis(&mut choose);
                let mut ops = Vec::new();
                for &o in operands {
                    ops.push(self.take(o, &choose)?);
                }
                (ops, choose)
            }
            // A table split along the indexed axis, at indices held whole:
            // each rank looks up its block's positions, and the results are summed.
            Op::Take { axis } if self.lookup_is_partial(*axis, &has(self, 0), &has(self, 1), operands[0]) => {
                let (table, indices) = (has(self, 0), has(self, 1));
                let split = table[*axis].expect("checked by lookup_is_partial");
                let kept = spliced(&table, *axis, 1, &indices);
                let made = self.lookup_in_blocks(operands[0], operands[1], *axis, split, &node.ty, kept)?;
                return self.name_rule(made, &axis_names(&node.ty));
            }
            Op::Take { axis } => {
                let mut table = has(self, 0);
                table[*axis] = None;
                let mut indices = has(self, 1);
                let mut result = spliced(&table, *axis, 1, &indices);
                let mut unique = result.clone();
                Self::one_axis_per_mesh_axis(&mut unique);
                // Indices split over a mesh axis the table's kept axes use are gathered.
                if unique != result {
                    indices = vec![None; indices.len()];
                    result = spliced(&table, *axis, 1, &indices);
                }
                // A table the compiler split: the rows looked up are gathered.
                if let Some(&(a, split)) = self.chosen_weight(self.g.operands(n)[0]) {
                    gathered.push((if a < *axis { a } else { a - 1 + indices.len() }, split));
                }
                (vec![self.take(operands[0], &table)?, self.take(operands[1], &indices)?], result)
            }
            // Each rank adds its split positions' values into zeros: the
            // sums are partial along the indices' mesh axes (the adjoint of
            // a `take` whose indices are split: embeddings' gradients in
            // data-parallel training).
            Op::ScatterAdd { axis } if operands.len() == 2 && self.scatter_is_partial(*axis, has(self, 0), has(self, 1)) => {
                let (values, indices) = (has(self, 0), has(self, 1));
                let k = indices.len();
                let want = spliced(&values, *axis, k, &indices);
                let result = spliced(&values, *axis, k, &[None]);
                for split in indices.iter().flatten() {
                    reduced.push((ReduceOp::Sum, split.mesh_axis));
                }
                (vec![self.take(operands[0], &want)?, operands[1]], result)
            }
            Op::ScatterAdd { .. } => {
                let mut ops = Vec::new();
                for &o in operands {
                    let whole = vec![None; self.splits_of(o).len()];
                    ops.push(self.take(o, &whole)?);
                }
                (ops, vec![None; rank])
            }
            Op::Construct { .. } => (operands.to_vec(), vec![None; rank]),
            Op::Exchange(_) => {
                return Err(ShardError::Verify { function: self.g.name.clone(), problems: format!("node %{} is already an exchange", n.index()) });
            }
        };
        let names = axis_names(&node.ty);
        let ty = self.cut_all(&node.ty, &splits)?;
        let op = match &node.op {
            Op::Weight { name } => Op::Weight { name: format!("{name}#{}", self.weights.len()) },
            other => other.clone(),
        };
        let mut made = self.add(op, ty, &operands, splits);
        if let Op::Weight { name } = &node.op {
            self.weights.push((made, name.clone()));
        }
        for (op, mesh_axis) in reduced {
            let ty = self.out.graph[made].ty.clone();
            let splits = self.splits_of(made);
            made = self.add(Op::Exchange(Exchange::AllReduce { op, mesh_axis }), ty, &[made], splits);
        }
        if mean_parts > 1 {
            made = self.scale(made, 1.0 / mean_parts as f64);
        }
        for (axis, split) in gathered {
            made = self.gather(made, axis, split)?;
        }
        self.name_rule(made, &names)
    }

    /// The name rule: each axis of `made` whose name (in `names`) is split
    /// holds the rank's block.
    fn name_rule(&mut self, mut made: NodeIndex, names: &[Option<String>]) -> Result<NodeIndex, ShardError> {
        self.two_named_axes(names)?;
        for (axis, name) in names.iter().enumerate() {
            let Some(split) = self.named_split(name.as_deref()) else { continue };
            let have = self.splits_of(made);
            if have[axis].is_none() && !have.iter().flatten().any(|s| s.mesh_axis == split.mesh_axis) {
                made = self.block(made, axis, split)?;
            }
        }
        Ok(made)
    }

    /// Whether a scatter of `values` at `indices` (their splits) can add
    /// each rank's positions into zeros and all-reduce: some index axis is
    /// split, and no axis the result keeps is split over an index axis's
    /// mesh axis.
    fn scatter_is_partial(&self, axis: usize, values: Splits, indices: Splits) -> bool {
        let k = indices.len();
        if values.len() < axis + k || indices.iter().all(Option::is_none) {
            return false;
        }
        let index_axes: Vec<usize> = indices.iter().flatten().map(|s| s.mesh_axis).collect();
        let kept = values[..axis].iter().chain(&values[axis + k..]).flatten();
        kept.clone().all(|s| !index_axes.contains(&s.mesh_axis)) && index_axes.iter().enumerate().all(|(i, m)| !index_axes[..i].contains(m))
    }

    /// Whether a `take` along `axis` looks up each rank's block: the table
    /// (a float or integer tensor) is split along it in one run, and no
    /// index axis nor other table axis is split over that mesh axis.
    fn lookup_is_partial(&self, axis: usize, table: &[Option<Split>], indices: &[Option<Split>], table_node: NodeIndex) -> bool {
        let float_or_int = nax_ir::value_dtype(&self.out.graph[table_node].ty) != nax_contract::DType::Bool;
        let split = table.get(axis).copied().flatten();
        let Some(split) = split.filter(|s| s.outer == 1) else { return false };
        let elsewhere = |s: &Option<Split>| s.is_none_or(|s| s.mesh_axis != split.mesh_axis);
        float_or_int && indices.iter().all(elsewhere) && table.iter().enumerate().all(|(a, s)| a == axis || elsewhere(s))
    }

    /// A host literal of the rank's graph (its range the value itself).
    pub(crate) fn literal(&mut self, value: Literal) -> NodeIndex {
        let (host, v) = match value {
            Literal::Int(i) => (nax_contract::HostType::Int, i as f64),
            Literal::Float(f) => (nax_contract::HostType::Float, f),
            Literal::Bool(b) => (nax_contract::HostType::Bool, f64::from(u8::from(b))),
        };
        self.add(Op::Literal(value), Type::Host(host, Some(nax_values::Range { lo: v, hi: v })), &[], Vec::new())
    }

    /// `n` times the constant `factor`.
    fn scale(&mut self, n: NodeIndex, factor: f64) -> NodeIndex {
        let ty = self.out.graph[n].ty.clone();
        let rank = self.splits_of(n).len();
        let compute = nax_ir::value_dtype(&ty);
        let literal = self.literal(Literal::Float(factor));
        let splits = self.splits_of(n);
        self.add(Op::Map { func: MapFn::Binary(BinaryOp::Mul), maps: vec![(0..rank).collect(), Vec::new()], compute }, ty, &[n, literal], splits)
    }

    /// Refuses a value two of whose axes' names are split over one mesh axis.
    fn two_named_axes(&self, names: &[Option<String>]) -> Result<(), ShardError> {
        for (i, a) in names.iter().enumerate() {
            let Some(sa) = self.named_split(a.as_deref()) else { continue };
            for b in &names[i + 1..] {
                if let Some(sb) = self.named_split(b.as_deref())
                    && sa.mesh_axis == sb.mesh_axis
                    && a != b
                {
                    return Err(ShardError::TwoAxesOnOneMeshAxis {
                        function: self.g.name.clone(),
                        first: a.clone().unwrap_or_default(),
                        second: b.clone().unwrap_or_default(),
                        mesh_axis: self.mesh_name(sa.mesh_axis),
                    });
                }
            }
        }
        Ok(())
    }

    /// Drops what the outputs do not need, names each weight as the rank
    /// binds it (the module's name where the rank binds one block of it),
    /// and verifies.
    fn finish(mut self) -> Result<Partitioned, ShardError> {
        let old_splits = std::mem::take(&mut self.splits);
        let weight_sources: HashMap<NodeIndex, String> = self.weights.iter().cloned().collect();
        let mut g = self.out;
        // The live nodes keep their order: a node's new index is its position among them.
        let live = g.live_nodes();
        let mut splits = Vec::new();
        let mut sources: Vec<(NodeIndex, String)> = Vec::new();
        for n in g.graph.node_indices() {
            if live[n.index()] {
                splits.push(old_splits.get(&n).cloned().unwrap_or_default());
                if let Some(s) = weight_sources.get(&n) {
                    sources.push((NodeIndex::new(splits.len() - 1), s.clone()));
                }
            }
        }
        g.remove_dead_nodes();
        // Each module weight's live blocks: one keeps the module's name.
        let mut weights = Vec::new();
        let mut variants: HashMap<String, Vec<(Splits, String)>> = HashMap::new();
        for (n, source) in &sources {
            let s = splits[n.index()].clone();
            let Op::Weight { name } = &g.graph[*n].op else { continue };
            let list = variants.entry(source.clone()).or_default();
            let bound = match list.iter().find(|(v, _)| *v == s) {
                Some((_, b)) => b.clone(),
                None => {
                    let b = if list.is_empty() { source.clone() } else { name.clone() };
                    list.push((s.clone(), b.clone()));
                    let ty = nax_ir::tensor_spec(&g.graph[*n].ty);
                    weights.push(WeightBlock { name: b.clone(), source: source.clone(), splits: s.clone(), ty });
                    b
                }
            };
            g.graph[*n].op = Op::Weight { name: bound };
        }
        Ok(Partitioned { graph: crate::verified(g)?, splits, weights })
    }
}

/// `items` with the `len` of them from `at` replaced by `with`: a gather's
/// result axes are its table's with the indexed axis replaced by the
/// indices' (and a scatter's, the other way).
pub(crate) fn spliced<T: Clone>(items: &[T], at: usize, len: usize, with: &[T]) -> Vec<T> {
    items[..at].iter().chain(with).chain(&items[at + len..]).cloned().collect()
}

/// A type's axis names (none for a host scalar).
pub(crate) fn axis_names(ty: &Type) -> Vec<Option<String>> {
    match ty {
        Type::Tensor(t) => t.axes.iter().map(|a| a.name.clone()).collect(),
        Type::Host(..) => Vec::new(),
    }
}

/// A type's sizes (none for a host scalar).
pub(crate) fn sizes(ty: &Type) -> Vec<Size> {
    match ty {
        Type::Tensor(t) => t.axes.iter().map(|a| a.size).collect(),
        Type::Host(..) => Vec::new(),
    }
}
