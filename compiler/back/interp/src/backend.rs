//! The interpreter behind the runtime's executor interface: a checked
//! call's tensors in, a host tensor out.

use crate::eval::{Sizes, evaluate, peak, work};
use crate::value::{Data, Value, collect};
use nax_ir::Graph;
use nax_ir::Type;
use nax_runtime::memory::Peak;
use nax_runtime::{CheckedCall, DType, Execute, HostTensor, ParamType, RuntimeError, Scalar, Signature, TensorData, TensorMut, ThreadPool};
use std::collections::HashMap;
use std::sync::Arc;

/// A graph the reference interpreter runs (`--backend interp`), with the
/// signature its calls are checked against.
pub struct Interpreter {
    /// The graph.
    pub graph: Graph,
    /// Its signature.
    pub signature: Arc<Signature>,
}

impl Execute for Interpreter {
    fn execute(&self, call: &CheckedCall<'_>, into: Option<&mut TensorMut<'_>>, _pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        call.require(&self.signature)?;
        let g = &self.graph;
        let mut values = Vec::with_capacity(call.len());
        for i in 0..call.len() {
            let scalar = |dtype, data| Value { dtype, shape: Vec::new(), data };
            values.push(match (call.tensor(i), call.scalar(i)) {
                (Some(t), _) => host_value(&t.to_host()?)?,
                (None, Some(Scalar::Float(x))) => scalar(DType::F64, Data::Float(vec![x])),
                (None, Some(Scalar::Int(x))) => scalar(DType::I64, Data::Int(vec![x])),
                (None, Some(Scalar::Bool(x))) => scalar(DType::Bool, Data::Bool(vec![x])),
                (None, None) => return Err(RuntimeError::Internal(format!("no argument {i}"))),
            });
        }
        let mut weights: HashMap<String, Value> = HashMap::new();
        for w in &call.signature().weights {
            if let Some(t) = call.weight(&w.name) {
                weights.insert(w.name.clone(), host_value(&t.to_host()?)?);
            }
        }
        let values = evaluate(g, values, weights, &Sizes(call.sizes()))?;
        let mut results = Vec::with_capacity(values.len());
        for (value, output) in values.into_iter().zip(g.output_nodes()) {
            let names = match &g.graph[output].ty {
                Type::Tensor(t) => t.axes.iter().map(|a| a.name.clone()).collect(),
                _ => Vec::new(),
            };
            results.push(into_host(value, names)?);
        }
        match (into, results.as_slice()) {
            (Some(out), [result]) => Ok(out.copy_from(result).map(|()| Vec::new())?),
            (Some(_), _) => Err(RuntimeError::Internal(format!("a function of {} results was given one output buffer", results.len()))),
            (None, _) => Ok(results),
        }
    }

    fn work(&self, call: &CheckedCall<'_>) -> Result<u128, RuntimeError> {
        Ok(work(&self.graph, &Sizes(call.sizes())))
    }

    /// The evaluation's peak ([`peak`]), plus the largest argument's
    /// copy in its own dtype while it is converted, plus the result in
    /// its dtype beside the interpreter's value of it (each result).
    fn peak(&self, call: &CheckedCall<'_>, _into: bool) -> Peak {
        let s = &self.signature;
        let tensors = s.params.iter().filter_map(|p| match &p.ty {
            ParamType::Tensor(t) => Some(t),
            ParamType::Host(_) => None,
        });
        let converted = tensors.chain(s.weights.iter().map(|w| &w.ty)).map(|t| call.bytes_of(t)).max().unwrap_or(0);
        let evaluation = peak(&self.graph, &Sizes(call.sizes())).unwrap_or(u128::MAX);
        let results = s.results.iter().map(|r| call.bytes_of(&r.ty)).fold(0u128, u128::saturating_add);
        Peak { bytes: evaluation.saturating_add(converted).saturating_add(results), reusable: 0 }
    }
}

/// A host tensor as an interpreter value.
fn host_value(t: &HostTensor) -> Result<Value, RuntimeError> {
    let data = match t.data() {
        TensorData::F16(v) => Data::Float(collect(v.iter().map(|x| x.to_f64()))?),
        TensorData::BF16(v) => Data::Float(collect(v.iter().map(|x| x.to_f64()))?),
        TensorData::F32(v) => Data::Float(collect(v.iter().map(|&x| f64::from(x)))?),
        TensorData::F64(v) => Data::Float(collect(v.iter().copied())?),
        TensorData::I32(v) => Data::Int(collect(v.iter().map(|&x| i64::from(x)))?),
        TensorData::I64(v) => Data::Int(collect(v.iter().copied())?),
        TensorData::Bool(v) => Data::Bool(collect(v.iter().copied())?),
    };
    Ok(Value { dtype: t.dtype(), shape: t.shape().to_vec(), data })
}

/// An interpreter value as a host tensor with these axis names (f64 and
/// i64 values taken over; others converted into fresh storage).
fn into_host(v: Value, names: Vec<Option<String>>) -> Result<HostTensor, RuntimeError> {
    let data = match (v.dtype, v.data) {
        (DType::F16, Data::Float(x)) => TensorData::F16(collect(x.iter().map(|&y| half::f16::from_f64(y)))?),
        (DType::BF16, Data::Float(x)) => TensorData::BF16(collect(x.iter().map(|&y| half::bf16::from_f64(y)))?),
        (DType::F32, Data::Float(x)) => TensorData::F32(collect(x.iter().map(|&y| y as f32))?),
        (DType::F64, Data::Float(x)) => TensorData::F64(x),
        (DType::I32, Data::Int(x)) => TensorData::I32(collect(x.iter().map(|&y| y as i32))?),
        (DType::I64, Data::Int(x)) => TensorData::I64(x),
        (DType::Bool, Data::Bool(x)) => TensorData::Bool(x),
        (dtype, _) => return Err(RuntimeError::Internal(format!("a {} result holds data of another kind", dtype.as_str()))),
    };
    Ok(HostTensor::new(data, v.shape, names)?)
}
