//! The runtime's footprint check and bounds-checked kernels: a size
//! planted wrong into a graph after it verified (a compiler bug, as a test
//! makes one) reaches the kernels, and every native back end's driver
//! refuses the call with an internal error naming the kernel, the buffer
//! and the offset, before any kernel reads outside its buffer; a position
//! a kernel computes while it runs (which the footprint cannot bound) is
//! caught by `--check-bounds` as a failed call.

use crate::backends::{run_on, run_with};
use nax::pipeline::Backend;
use nax_runtime::{DType, HostTensor, Size, Value};
use std::collections::HashMap;

/// `x` flattened (a reshape, then a rename) and summed: the graph as lowered, verified.
fn flatten_and_sum() -> nax_ir::Graph {
    let source = "dim a = 3\ndim b = 4\ndef f(x: [a b]) -> [] {\n    y = rearrange(x, a b -> (a b)) as [n]\n    return sum(y, n)\n}\n";
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    nax::pipeline::lower(&checked.module, "f", false, &mut nax::Timings::start()).expect("lowers and verifies").lowered
}

/// Doubles the flattened axis of the reshape and of the rename after it:
/// the sum then runs over 24 elements of a 12-element argument.
fn plant_doubled_reshape(g: &mut nax_ir::Graph) {
    let mut planted = 0;
    for n in g.graph.node_indices().collect::<Vec<_>>() {
        if matches!(g.graph[n].op, nax_ir::Op::Reshape | nax_ir::Op::Rename)
            && let nax_ir::Type::Tensor(t) = &mut g.graph[n].ty
        {
            t.axes[0].size = Size::Const(24);
            planted += 1;
        }
    }
    assert_eq!(planted, 2, "the graph has a reshape and a rename:\n{}", nax_ir::text::print(g));
    assert!(!nax_ir::verify(g).is_empty(), "the verifier sees the planted size");
}

#[test]
fn a_planted_wrong_size_is_an_internal_error_on_every_native_backend() {
    let mut g = flatten_and_sum();
    let x = HostTensor::from_f64(DType::F32, vec![3, 4], vec![Some("a".into()), Some("b".into())], &[1.0; 12]).unwrap();
    let args = [Value::Tensor(x)];
    let weights = HashMap::new();
    // As compiled, every back end sums the 12 ones.
    for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation] {
        let out = run_on(backend, &g, &args, &weights).unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
        assert_eq!(out.to_f64_vec(), vec![12.0], "{}", backend.name());
    }
    plant_doubled_reshape(&mut g);
    for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation] {
        let e = run_on(backend, &g, &args, &weights).expect_err(backend.name());
        assert!(e.starts_with("internal error: kernel k") && e.contains("would read buffer") && e.contains("of 12"), "{}: {e}", backend.name());
        println!("{}: {e}", backend.name());
    }
}

/// `x[n = 1:3]` with the slice's start planted at 10 after verification:
/// the kernel computes the positions `10 + i` while it runs (a gather,
/// which the footprint leaves to the kernel), so only the bounds-checked
/// kernels see the fault, and the call fails on every CPU back end without
/// the access being made.
#[test]
fn a_planted_wrong_position_fails_the_call_with_check_bounds_on_every_backend() {
    let source = "dim n = 4\ndef f(x: [n]) -> [k] {\n    return x[n = 1:3 as k] * 2.0\n}\n";
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    let mut g = nax::pipeline::lower(&checked.module, "f", false, &mut nax::Timings::start()).expect("lowers and verifies").lowered;
    let x = HostTensor::from_f64(DType::F32, vec![4], vec![Some("n".into())], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let args = [Value::Tensor(x)];
    let weights = HashMap::new();
    for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation] {
        let out = run_with(backend, true, &g, &args, &weights).unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
        assert_eq!(out.to_f64_vec(), vec![4.0, 6.0], "{}", backend.name());
    }
    let slice = g.graph.node_indices().find(|&n| matches!(g.graph[n].op, nax_ir::Op::Slice { .. })).expect("a slice");
    if let nax_ir::Op::Slice { start, .. } = &mut g.graph[slice].op {
        *start = Size::Const(10);
    }
    for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation] {
        let e = run_with(backend, true, &g, &args, &weights).expect_err(backend.name());
        // The record keeps one of the faults: element 10 or 11 of 4 f32s.
        assert!(e.contains("would access buffer 0 at byte 4") && e.contains(" of its 16 (a bounds check failed"), "{}: {e}", backend.name());
    }
}
