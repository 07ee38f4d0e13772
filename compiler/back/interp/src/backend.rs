//! The interpreter behind the back-end interface: host tensors in, host
//! tensors out.

use crate::eval::{evaluate, Sizes};
use crate::value::{Data, Value};
use nax_front::check::types::Type;
use nax_ir::{Argument, Backend, Executable, Graph};
use nax_runtime::{DType, HostTensor, TensorData};
use std::collections::HashMap;

/// The reference interpreter (`--backend interp`).
pub struct Interpreter;

impl Backend for Interpreter {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn compile(&self, graph: &Graph) -> Result<Box<dyn Executable>, String> {
        Ok(Box::new(Compiled(graph.clone())))
    }
}

/// A graph ready to interpret.
struct Compiled(Graph);

impl Executable for Compiled {
    fn run(&self, args: &[Argument], weights: &HashMap<String, HostTensor>, sizes: &[Option<u64>]) -> Result<HostTensor, String> {
        let values: Vec<Value> = args.iter().map(argument_value).collect();
        let weights: HashMap<String, Value> = weights.iter().map(|(k, v)| (k.clone(), host_value(v))).collect();
        let result = evaluate(&self.0, &values, &weights, &Sizes(sizes))?;
        let names = match &self.0.graph[self.0.output].ty {
            Type::Tensor(t) => t.axes.iter().map(|a| a.name.clone()).collect(),
            _ => Vec::new(),
        };
        into_host(result, names)
    }
}

fn argument_value(a: &Argument) -> Value {
    let scalar = |dtype, data| Value { dtype, shape: Vec::new(), data };
    match a {
        Argument::Tensor(t) => host_value(t),
        Argument::Float(x) => scalar(DType::F64, Data::Float(vec![*x])),
        Argument::Int(x) => scalar(DType::I64, Data::Int(vec![*x])),
        Argument::Bool(x) => scalar(DType::Bool, Data::Bool(vec![*x])),
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
fn into_host(v: Value, names: Vec<Option<String>>) -> Result<HostTensor, String> {
    let data = match (v.dtype, v.data) {
        (DType::F16, Data::Float(x)) => TensorData::F16(x.iter().map(|&y| half::f16::from_f64(y)).collect()),
        (DType::BF16, Data::Float(x)) => TensorData::BF16(x.iter().map(|&y| half::bf16::from_f64(y)).collect()),
        (DType::F32, Data::Float(x)) => TensorData::F32(x.iter().map(|&y| y as f32).collect()),
        (DType::F64, Data::Float(x)) => TensorData::F64(x),
        (DType::I32, Data::Int(x)) => TensorData::I32(x.iter().map(|&y| y as i32).collect()),
        (DType::I64, Data::Int(x)) => TensorData::I64(x),
        (DType::Bool, Data::Bool(x)) => TensorData::Bool(x),
        (dtype, _) => return Err(format!("internal error: a {} result holds data of another kind", dtype.as_str())),
    };
    HostTensor::new(data, v.shape, names).map_err(|e| e.to_string())
}
