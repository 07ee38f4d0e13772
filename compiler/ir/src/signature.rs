//! A graph's signature as the runtime sees it ([`nax_contract::Signature`]):
//! parameters with their types and defaults, the weights the function
//! reads, its results, every other value's type (for the memory check) and
//! the size table the call-boundary check solves.

use crate::graph::Type;
use crate::graph::value_dtype;
use crate::graph::{Graph, Op};
use nax_contract::{AxisSpec, Param, ParamType, ResultSpec, Scalar, Signature, TensorSpec, WeightSpec};
use std::collections::HashSet;

/// A value's type as a tensor type (a host scalar is rank 0, in the dtype
/// the kernels hold it in).
pub fn tensor_spec(ty: &Type) -> TensorSpec {
    match ty {
        Type::Tensor(t) => TensorSpec { dtype: t.dtype, axes: t.axes.iter().map(|a| AxisSpec { name: a.name.clone(), size: a.size }).collect() },
        other => TensorSpec { dtype: value_dtype(other), axes: Vec::new() },
    }
}

/// The signature of a function's graph; `defaults` gives each parameter's
/// default value, if it has one (missing entries have none).
pub fn signature(g: &Graph, defaults: &[Option<Scalar>]) -> Signature {
    let mut params = Vec::with_capacity(g.inputs.len());
    for (i, &input) in g.inputs.iter().enumerate() {
        let node = &g.graph[input];
        let name = match &node.op {
            Op::Input { name, .. } => name.clone(),
            _ => format!("#{i}"),
        };
        let ty = match &node.ty {
            Type::Host(h, _) => ParamType::Host(*h),
            other => ParamType::Tensor(tensor_spec(other)),
        };
        params.push(Param { name, ty, default: defaults.get(i).copied().flatten() });
    }
    let mut weights: Vec<WeightSpec> = Vec::new();
    let mut values: Vec<TensorSpec> = Vec::new();
    let mut seen: HashSet<TensorSpec> = HashSet::new();
    for n in g.graph.node_indices() {
        let node = &g.graph[n];
        match &node.op {
            Op::Weight { name } if !weights.iter().any(|w| w.name == *name) => weights.push(WeightSpec { name: name.clone(), ty: tensor_spec(&node.ty) }),
            Op::Input { .. } | Op::Weight { .. } => {}
            _ if g.output_nodes().any(|o| o == n) => {}
            _ => {
                let spec = tensor_spec(&node.ty);
                if !spec.axes.is_empty() && seen.insert(spec.clone()) {
                    values.push(spec);
                }
            }
        }
    }
    Signature {
        name: g.name.clone(),
        params,
        weights,
        results: g.outputs.iter().map(|o| ResultSpec { name: o.name.clone(), ty: tensor_spec(&g.graph[o.node].ty) }).collect(),
        values,
        sizes: g.symbols.clone(),
        size_arguments: g.size_arguments.clone(),
    }
}
