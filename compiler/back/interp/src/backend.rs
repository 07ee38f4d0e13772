//! The interpreter behind the runtime's executor interface: a checked
//! call's tensors in, a host tensor out.

use crate::eval::{Sizes, evaluate};
use crate::value::{Data, Value};
use nax_ir::Graph;
use nax_ir::Type;
use nax_runtime::{CheckedCall, DType, Execute, HostTensor, RuntimeError, Scalar, Signature, TensorData, TensorMut, ThreadPool};
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
    fn execute(&self, call: &CheckedCall<'_>, into: Option<&mut TensorMut<'_>>, _pool: &ThreadPool) -> Result<Option<HostTensor>, RuntimeError> {
        call.require(&self.signature)?;
        let g = &self.graph;
        let mut values = Vec::with_capacity(call.len());
        for i in 0..call.len() {
            let scalar = |dtype, data| Value { dtype, shape: Vec::new(), data };
            values.push(match (call.tensor(i), call.scalar(i)) {
                (Some(t), _) => host_value(&t.to_host()?),
                (None, Some(Scalar::Float(x))) => scalar(DType::F64, Data::Float(vec![x])),
                (None, Some(Scalar::Int(x))) => scalar(DType::I64, Data::Int(vec![x])),
                (None, Some(Scalar::Bool(x))) => scalar(DType::Bool, Data::Bool(vec![x])),
                (None, None) => return Err(RuntimeError::Internal(format!("no argument {i}"))),
            });
        }
        let mut weights: HashMap<String, Value> = HashMap::new();
        for w in &call.signature().weights {
            if let Some(t) = call.weight(&w.name) {
                weights.insert(w.name.clone(), host_value(&t.to_host()?));
            }
        }
        let result = evaluate(g, &values, &weights, &Sizes(call.sizes())).map_err(|message| RuntimeError::Interpreter { message })?;
        let names = match &g.graph[g.output].ty {
            Type::Tensor(t) => t.axes.iter().map(|a| a.name.clone()).collect(),
            _ => Vec::new(),
        };
        let result = into_host(result, names)?;
        match into {
            Some(out) => out.copy_from(&result).map(|()| None),
            None => Ok(Some(result)),
        }
    }
}

/// A host tensor as an interpreter value.
fn host_value(t: &HostTensor) -> Value {
    let data = match t.data() {
        TensorData::F16(v) => Data::Float(v.iter().map(|x| x.to_f64()).collect()),
        TensorData::BF16(v) => Data::Float(v.iter().map(|x| x.to_f64()).collect()),
        TensorData::F32(v) => Data::Float(v.iter().map(|&x| f64::from(x)).collect()),
        TensorData::F64(v) => Data::Float(v.clone()),
        TensorData::I32(v) => Data::Int(v.iter().map(|&x| i64::from(x)).collect()),
        TensorData::I64(v) => Data::Int(v.clone()),
        TensorData::Bool(v) => Data::Bool(v.clone()),
    };
    Value { dtype: t.dtype(), shape: t.shape().to_vec(), data }
}

/// An interpreter value as a host tensor with these axis names.
fn into_host(v: Value, names: Vec<Option<String>>) -> Result<HostTensor, RuntimeError> {
    let data = match (v.dtype, v.data) {
        (DType::F16, Data::Float(x)) => TensorData::F16(x.iter().map(|&y| half::f16::from_f64(y)).collect()),
        (DType::BF16, Data::Float(x)) => TensorData::BF16(x.iter().map(|&y| half::bf16::from_f64(y)).collect()),
        (DType::F32, Data::Float(x)) => TensorData::F32(x.iter().map(|&y| y as f32).collect()),
        (DType::F64, Data::Float(x)) => TensorData::F64(x),
        (DType::I32, Data::Int(x)) => TensorData::I32(x.iter().map(|&y| y as i32).collect()),
        (DType::I64, Data::Int(x)) => TensorData::I64(x),
        (DType::Bool, Data::Bool(x)) => TensorData::Bool(x),
        (dtype, _) => return Err(RuntimeError::Internal(format!("a {} result holds data of another kind", dtype.as_str()))),
    };
    HostTensor::new(data, v.shape, names)
}
