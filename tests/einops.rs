//! einops' own tests of the ellipsis (`identity_patterns`,
//! `equivalent_rearrange_patterns`, `equivalent_reduction_patterns` of
//! einops' `tests/test_ops.py`), on an unnamed `[2 3 4 5 6]` tensor as
//! einops runs them on numpy arrays: each pattern with `...` gives, on
//! every back end, what its twin without `...` gives on the interpreter
//! (the identity: the tensor itself), values and shape. LANGUAGE.md
//! section 9: `...` over unnamed axes, and `(...)`, `(a ...)` on an output
//! side.

use crate::backends::{NATIVE_BACKENDS, run_on};
use nax::pipeline::Backend;
use nax_runtime::{HostTensor, TensorData, Value};
use std::collections::HashMap;

/// A pattern's twin without `...` and its result type (`None`: the identity).
type Twin = Option<(&'static str, &'static str)>;

/// The operation, the pattern with `...` and its result type, and its twin.
const CASES: [(&str, &str, &str, Twin); 18] = [
    ("rearrange", "... -> ...", "[2 3 4 5 6]", None),
    ("rearrange", "a b c d e -> a b c d e", "[a b c d e]", None),
    ("rearrange", "a b c d e ... -> ... a b c d e", "[a b c d e]", None),
    ("rearrange", "a b c d e ... -> a ... b c d e", "[a b c d e]", None),
    ("rearrange", "... a b c d e -> ... a b c d e", "[a b c d e]", None),
    ("rearrange", "a ... e -> a ... e", "[a 3 4 5 e]", None),
    ("rearrange", "a ... -> a ...", "[a 3 4 5 6]", None),
    ("rearrange", "a ... c d e -> a (...) c d e", "[a 3 c d e]", None),
    ("rearrange", "a b ... -> (a b) ...", "[6 4 5 6]", Some(("a b c d e -> (a b) c d e", "[6 c d e]"))),
    ("rearrange", "... c d e -> ... (c d) e", "[2 3 20 e]", Some(("a b c d e -> a b (c d) e", "[a b 20 e]"))),
    ("rearrange", "... -> ...", "[2 3 4 5 6]", Some(("a b c d e -> a b c d e", "[a b c d e]"))),
    ("rearrange", "... -> (...)", "[720]", Some(("a b c d e -> (a b c d e)", "[720]"))),
    ("rearrange", "a b ... -> b (...) a", "[b 120 a]", Some(("a b c d e -> b (c d e) a", "[b 120 a]"))),
    ("rearrange", "a b ... e -> b (a ...) e", "[b 40 e]", Some(("a b c d e -> b (a c d) e", "[b 40 e]"))),
    ("reduce", "... -> ", "[]", Some(("a b c d e -> ", "[]"))),
    ("reduce", "a ... e -> (e a)", "[12]", Some(("a b c d e -> (e a)", "[12]"))),
    ("reduce", "a b c d e ... -> d (a e)", "[d 12]", Some(("a b c d e -> d (a e)", "[d 12]"))),
    ("reduce", "... c d e -> (...)", "[6]", Some(("a b c d e -> (a b)", "[6]"))),
];

fn call(op: &str, pattern: &str) -> String {
    if op == "reduce" { format!("reduce(x, {pattern}, sum)") } else { format!("rearrange(x, {pattern})") }
}

/// `f` of `source` on `x`, on `backend`: its shape and values.
fn run(backend: Backend, source: &str, x: &HostTensor) -> (Vec<usize>, Vec<f64>) {
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{source}: {:?}", checked.diagnostics);
    let graph = nax_lower::lower(&checked.module, "f").expect("lower");
    let out = run_on(backend, &graph, &[Value::Tensor(x.clone())], &HashMap::new()).unwrap_or_else(|e| panic!("{source} on {}: {e}", backend.name()));
    (out.shape().to_vec(), out.to_f64_vec())
}

#[test]
fn einops_ellipsis_patterns_give_einops_values_on_every_backend() {
    let values: Vec<f32> = (0..720).map(|i| ((i * 37) % 101) as f32 * 0.25 - 12.0).collect();
    let x = HostTensor::new(TensorData::F32(values.clone()), vec![2, 3, 4, 5, 6], vec![None; 5]).expect("tensor");
    let source = |op: &str, pattern: &str, ty: &str| format!("def f(x: [2 3 4 5 6]) -> {ty} {{\n    return {}\n}}\n", call(op, pattern));
    for (op, pattern, ty, twin) in CASES {
        let expected = match twin {
            None => (vec![2, 3, 4, 5, 6], values.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>()),
            Some((full, full_ty)) => run(Backend::Interp, &source(op, full, full_ty), &x),
        };
        let with_ellipsis = source(op, pattern, ty);
        for backend in [Backend::Interp].into_iter().chain(NATIVE_BACKENDS).chain([Backend::CudaEmulation]) {
            let (shape, got) = run(backend, &with_ellipsis, &x);
            assert_eq!(shape, expected.0, "{op}(x, {pattern}) on {}", backend.name());
            for (g, e) in got.iter().zip(&expected.1) {
                assert!((g - e).abs() <= 1e-4 * e.abs().max(1.0), "{op}(x, {pattern}) on {}: {g} where einops gives {e}", backend.name());
            }
        }
    }
}
