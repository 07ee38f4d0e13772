//! Gradients (LANGUAGE.md section 15) on every back end: each program
//! returns `grad(...)` of a loss built from one family of operations. In
//! f32 every back end is compared with the interpreter and with PyTorch's
//! `torch.autograd.grad` on the `--emit torch` code; in f64 every back
//! end's derivatives are compared with central finite differences of the
//! interpreter's value (`torch.autograd.gradcheck`'s tolerances); and the
//! conventions of section 15 where a function is not smooth are checked
//! at the points where they matter.

use crate::backends::{Case, prepare, run_all, run_cases};
use nax::pipeline::Backend;
use nax_front::checked::GradTarget;
use nax_runtime::{HostTensor, Value};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::collections::HashMap;

/// The programs, in a kind-generic form: `R[` is a float tensor type and
/// `cast(` a conversion to it (f32 or f64); each `f` returns `grad(...)`.
const PROGRAMS: &[(&str, &str)] = &[
    (
        "unary_chain",
        "dim b = 3\ndim D = 5\ndef f(x: R[b D]) -> (l: R[], d: R[b D]) {\n    p = x * x + 1.0\n    u = exp(x * 0.5) + log(p) + sqrt(p) + rsqrt(p) + log1p(p) + expm1(x * 0.25)\n    v = sin(x) * cos(x) + tanh(x) + erf(x) + sigmoid(x) + abs(x) + relu(x)\n    w = gelu(x) + silu(x) + softplus(x * 15.0) + floor(x) + ceil(x) * -x + round(x) * sign(x)\n    return grad(sum(sum(u * v + w, D), b), x)\n}\n",
    ),
    (
        "binary_broadcast",
        "dim b = 3\ndim D = 4\ndef f(x: R[b D], y: R[D], s: R[b 1]) -> (l: R[], dx: R[b D], dy: R[D], ds: R[b 1]) {\n    q = (x - y) * (x + s) / (y * y + 1.5) - 2.0 * x + x / 3.0\n    r = pow(x * x + 0.5, y) + maximum(x, y) - minimum(x, s)\n    return grad(sum(sum(q * r - x * y, D), b), x, y, s)\n}\n",
    ),
    (
        "selections",
        "dim b = 3\ndim D = 4\ndef f(x: R[b D], y: R[b D]) -> (l: R[], dx: R[b D], dy: R[b D]) {\n    a = where(x > y, x * y, y - x)\n    c = clamp(x, -0.5, 0.75) * y\n    m = masked_fill(x * x, y > 0.5, 2.0)\n    return grad(sum(sum(a * c + m, D), b), x, y)\n}\n",
    ),
    (
        "products",
        "dim b = 2\ndim n = 3\ndim D = 4\ndim F = 5\nparam w: R[D F]\ndef f(x: R[b n D], v: R[F]) -> (l: R[], dx: R[b n D], dw: R[D F], dv: R[F]) {\n    h = x @ w\n    k = einsum(h, x: b n F, b n D -> b F D)\n    o = h @ v\n    return grad(sum(sum(sum(k, D), F), b) + sum(sum(o * o, n), b), x, w, v)\n}\n",
    ),
    (
        "patterns",
        "dim b = 2\ndim D = 6\ndef f(x: R[b D], y: R[D]) -> (l: R[], dx: R[b D], dy: R[D]) {\n    t = rearrange(x, b (h d) -> d b h, h=2)\n    r = reduce(t * t, d b h -> h, \"sum\") + reduce(t, d b h -> h, \"max\")\n    p = repeat(y, D -> b D)\n    lo, hi = split(x, b (2 e) -> b e)\n    return grad(sum(r, h) + sum(sum(p * x * x, D), b) + sum(reduce(x, b D -> D, \"mean\") * y, D) + sum(sum(lo * hi, e), b), x, y)\n}\n",
    ),
    (
        "reductions",
        "dim b = 3\ndim D = 5\ndef f(x: R[b D]) -> (l: R[], dx: R[b D]) {\n    a = sum(mean(x * x, D) * max(x, D), b)\n    c = sum(min(x, b) * prod(x + 0.25, b), D)\n    return grad(a + c + prod(sum(x, D), b), x)\n}\n",
    ),
    (
        "along_an_axis",
        "dim b = 3\ndim V = 6\ndef f(x: R[b V], y: R[b V]) -> (l: R[], dx: R[b V], dy: R[b V]) {\n    p = softmax(x, V)\n    q = log_softmax(x * y, V)\n    return grad(sum(sum(p * y + q * p, V), b) + sum(logsumexp(y - x, V), b), x, y)\n}\n",
    ),
    (
        "indexing_and_joins",
        "dim V = 6\ndim D = 4\ndef f(t: R[V D], ids: Int[n], x: R[m D]) -> (l: R[], dt: R[V D], dx: R[m D]) {\n    e = take(t, clamp(ids, 0, 5), V)\n    s = x[m = 1:-1 as k] * 2.0\n    odd = x[m = ::2 as j]\n    j2 = concat(x, s: m, k -> r)\n    one = t[V = 2] + x[m = 0]\n    return grad(sum(sum(e * e, D), n) + sum(sum(j2 * j2, D), r) + sum(sum(odd, D), j) + sum(one * one, D), t, x)\n}\n",
    ),
    (
        "scans",
        "dim b = 2\ndim n = 5\ndef f(x: R[b n]) -> (l: R[], dx: R[b n]) {\n    c = cumsum(x * x, n)\n    p = cumprod(x + 0.5, n)\n    return grad(sum(sum(c * p, n), b), x)\n}\n",
    ),
    (
        "calls_and_loops",
        "dim L = 3\ndim D = 4\nparam w: R[L D D]\ndef layer(h: R[b D], m: R[D D]) -> R[b D] {\n    return tanh(h @ m) + h\n}\ndef f(x: R[b D]) -> (l: R[], dw: R[L D D], dx: R[b D]) {\n    h = x\n    for i in 0..3 {\n        h = layer(h, w[L = i])\n    }\n    return grad(sum(sum(h * h, D), b), w, x)\n}\n",
    ),
    (
        "a_callee_differentiates",
        "dim D = 4\nparam w: R[D]\ndef inner(x: R[b D], y: R[b D]) -> (l: R[], dx: R[b D], dy: R[b D]) {\n    return grad(sum(sum(x * y * w, D), b), x, y)\n}\ndef f(x: R[b D]) -> (l: R[], dx: R[b D], dw: R[D]) {\n    l1, d1, d2 = inner(x, x)\n    return grad(l1 + sum(sum(d1 * x, D), b), x, w)\n}\n",
    ),
    (
        "unused_target_is_zero",
        "dim D = 4\nparam w: R[D]\ndef f(x: R[D], y: R[D]) -> (l: R[], dx: R[D], dy: R[D], dw: R[D]) {\n    return grad(sum(x * x, D), x, y, w)\n}\n",
    ),
];

/// The programs as cases of one float kind (`R[` becomes `prefix[`, `cast(` becomes `cast(`).
fn programs(prefix: &str, cast: &str) -> Vec<Case> {
    PROGRAMS
        .iter()
        .map(|(name, source)| Case {
            name: format!("grad_{name}"),
            source: source.replace("R[", &format!("{prefix}[")).replace("cast(", &format!("{cast}(")),
            function: "f".into(),
            sizes: vec![("b", 2), ("n", 7), ("m", 5)],
            special_values: false,
            ints: Vec::new(),
        })
        .collect()
}

#[test]
fn gradients_agree_on_every_backend_and_with_pytorch() {
    let failures = run_cases(programs("", "float"), "grad");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `torch.autograd.gradcheck`'s step and tolerances (f64).
const EPS: f64 = 1e-6;
const ATOL: f64 = 1e-5;
const RTOL: f64 = 1e-3;

/// The value (result 0) at the given inputs, by the interpreter.
fn value_at(graph: &nax_ir::Graph, args: &[Value], weights: &HashMap<String, HostTensor>) -> f64 {
    let out = run_all(Backend::Interp, false, graph, args, weights).expect("the value runs");
    out[0].to_f64_vec()[0]
}

/// The central difference of the value (result 0, by the interpreter)
/// along element `i` of `target`, with this step.
fn central_difference(
    graph: &nax_ir::Graph,
    args: &[Value],
    weights: &HashMap<String, HostTensor>,
    module: &nax_front::CheckedModule,
    target: GradTarget,
    i: usize,
    step: f64,
) -> f64 {
    let at = |by: f64| match target {
        GradTarget::Param(p) => {
            let Value::Tensor(t) = &args[p] else { panic!("a tensor argument") };
            let mut a = args.to_vec();
            a[p] = Value::Tensor(moved(t, i, by));
            value_at(graph, &a, weights)
        }
        GradTarget::Weight(w) => {
            let name = &module.weights[w].name;
            let mut ws = weights.clone();
            ws.insert(name.clone(), moved(&weights[name], i, by));
            value_at(graph, args, &ws)
        }
    };
    (at(step) - at(-step)) / (2.0 * step)
}

/// `t` with element `i` moved by `by`.
fn moved(t: &HostTensor, i: usize, by: f64) -> HostTensor {
    let mut v = t.to_f64_vec();
    v[i] += by;
    HostTensor::from_f64(t.dtype(), t.shape().to_vec(), t.names().to_vec(), &v).expect("same shape")
}

#[test]
fn gradients_match_finite_differences_in_f64_on_every_backend() {
    let mut rng = SmallRng::seed_from_u64(15);
    let mut failures = Vec::new();
    let backends = [Backend::Interp, Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation];
    for case in programs("f64", "f64") {
        let (checked, graph, rewritten, args, weights) = prepare(&case, &mut rng, false).expect("the case runs");
        let f = checked.module.functions.iter().find(|f| f.name == case.function).expect("f");
        for backend in backends {
            let g = if backend == Backend::Interp { &graph } else { &rewritten };
            for check_bounds in [false, true] {
                if check_bounds && backend == Backend::Interp {
                    continue;
                }
                let out = run_all(backend, check_bounds, g, &args, &weights).unwrap_or_else(|e| panic!("{} on {}: {e}", case.name, backend.name()));
                for (k, target) in f.grad_targets.iter().enumerate() {
                    let derivative = out[k + 1].to_f64_vec();
                    // Up to 16 elements of each target, spread over it.
                    let count = derivative.len();
                    for i in (0..count).step_by(count.div_ceil(16).max(1)) {
                        let estimate = central_difference(&graph, &args, &weights, &checked.module, *target, i, EPS);
                        let got = derivative[i];
                        if (got - estimate).abs() > ATOL + RTOL * estimate.abs() {
                            failures.push(format!(
                                "{} on {}{}: derivative {k} element {i} is {got}, finite differences give {estimate}",
                                case.name,
                                backend.name(),
                                if check_bounds { " --check-bounds" } else { "" }
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A vector argument of f32 values along one axis named `n`.
fn vector(values: &[f64]) -> Value {
    Value::Tensor(HostTensor::from_f64(nax_runtime::DType::F32, vec![values.len()], vec![Some("n".into())], values).expect("a vector"))
}

/// Section 15's conventions, each at the points where it decides: the
/// first derivative `f` returns at the given vector, on every back end.
#[test]
fn the_conventions_of_section_15_hold_on_every_backend() {
    let cases: &[(&str, &str, &[f64], &[f64])] = &[
        ("relu'(0) = 0", "sum(relu(x), n)", &[0.0, 1.5, -1.0], &[0.0, 1.0, 0.0]),
        ("abs'(0) = 0", "sum(abs(x), n)", &[0.0, 2.0, -2.0], &[0.0, 1.0, -1.0]),
        ("maximum halves ties", "sum(maximum(x, 1.0) + minimum(x, 2.0), n)", &[1.0, 2.0, 3.0, 0.0], &[1.5, 1.5, 1.0, 1.0]),
        ("max shares ties", "max(x, n) + min(x, n)", &[3.0, 1.0, 3.0, 2.0], &[0.5, 1.0, 0.5, 0.0]),
        ("clamp includes its bounds", "sum(clamp(x, 0.0, 1.0), n)", &[0.0, 1.0, 0.5, 2.0, -1.0], &[1.0, 1.0, 1.0, 0.0, 0.0]),
        ("where gives the other operand exactly zero", "sum(where(x > 0.0, sqrt(x), 0.0), n)", &[0.0, 4.0, -1.0], &[0.0, 0.25, 0.0]),
        ("through a chain after the where", "sum(where(x > 0.0, log(sqrt(x)) * 2.0, x), n)", &[0.0, 0.25, -1.0], &[1.0, 4.0, 1.0]),
        ("masked_fill likewise", "sum(masked_fill(log(x), x <= 0.0, 0.0), n)", &[0.0, 2.0, -1.0], &[0.0, 0.5, 0.0]),
        ("sqrt'(0) = inf", "sum(sqrt(x), n)", &[0.0, 1.0], &[f64::INFINITY, 0.5]),
        ("steps have derivative zero", "sum(floor(x) + ceil(x) + round(x) + sign(x), n)", &[0.5, -1.5], &[0.0, 0.0]),
        ("an integer stops the derivative", "sum(float(int(x * 3.0)) + x, n)", &[0.5, 1.5], &[1.0, 1.0]),
        ("repeated take indices add up", "sum(take(x, clamp(arange(n) * 0 + 1, 0, 2), n), n)", &[5.0, 6.0, 7.0], &[0.0, 3.0, 0.0]),
    ];
    let backends = [Backend::Interp, Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation];
    let mut failures = Vec::new();
    // Each case: what it shows, the loss, the point, the derivative there.
    for (what, body, at, want) in cases {
        let source = format!("def f(x: [n]) -> (l: [], d: [n]) {{\n    return grad({body}, x)\n}}\n");
        let checked = nax_front::check_source(&source);
        assert!(!checked.has_errors(), "{what}: {:?}", checked.diagnostics);
        let lowered = nax::pipeline::lower(&checked.module, "f", true, &mut nax::Timings::start()).unwrap_or_else(|e| panic!("{what}: {e}"));
        for backend in backends {
            let g = if backend == Backend::Interp { &lowered.lowered } else { lowered.graph() };
            let out = run_all(backend, false, g, &[vector(at)], &HashMap::new()).unwrap_or_else(|e| panic!("{what} on {}: {e}", backend.name()));
            let got = out[1].to_f64_vec();
            if got.iter().zip(*want).any(|(g, w)| g != w) || got.len() != want.len() {
                failures.push(format!("{what} on {}: {got:?}, expected {want:?}", backend.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The graph with every f32 value computed in f64 (so that finite
/// differences of a generated f32 program measure the derivative, not
/// f32's rounding).
fn in_f64(g: &nax_ir::Graph) -> nax_ir::Graph {
    use nax_runtime::DType;
    let mut g = g.clone();
    for node in g.graph.node_weights_mut() {
        if let nax_ir::Type::Tensor(t) = &mut node.ty
            && t.dtype == DType::F32
        {
            t.dtype = DType::F64;
        }
        if let nax_ir::Op::Map { compute, .. } = &mut node.op
            && *compute == DType::F32
        {
            *compute = DType::F64;
        }
    }
    g
}

/// A tensor's f32 values as f64.
fn widened(t: &HostTensor) -> HostTensor {
    if t.dtype() != nax_runtime::DType::F32 {
        return t.clone();
    }
    HostTensor::from_f64(nax_runtime::DType::F64, t.shape().to_vec(), t.names().to_vec(), &t.to_f64_vec()).expect("same shape")
}

/// A generated module (calls, patterns, section 13's operations) with a
/// function `loss` appended: it calls the module's last function in a
/// loop of two turns (the first argument scaled by the turn), yields each
/// result's sum of squares, and returns `grad` of their sum by every float
/// tensor argument and weight. `None` when the last function's result is
/// not a float.
fn differentiable_program(rng: &mut SmallRng) -> Option<String> {
    let source = crate::generate::well_formed_program(rng);
    let checked = nax_front::check_source(&source);
    let g = checked.module.functions.iter().max_by_key(|f| f.span.start)?;
    let [result] = g.results.as_slice() else { return None };
    let nax_front::check::types::Type::Tensor(r) = &result.ty else { return None };
    if r.dtype != nax_runtime::DType::F32 || r.axes.iter().any(|a| a.name.is_none()) {
        return None;
    }
    let mut params = Vec::new();
    let mut args = Vec::new();
    let mut targets = Vec::new();
    let mut derivatives = Vec::new();
    for (i, b) in g.bindings[..g.params].iter().enumerate() {
        match &b.ty {
            nax_front::check::types::Type::Tensor(t) => {
                let axes: Vec<&str> = t.axes.iter().map(|a| a.name.as_deref().unwrap_or("_")).collect();
                params.push(format!("{}: [{}]", b.name, axes.join(" ")));
                args.push(if i == 0 { format!("{} * float(t + 1)", b.name) } else { b.name.clone() });
                targets.push(b.name.clone());
                derivatives.push(format!("d_{}: [{}]", b.name, axes.join(" ")));
            }
            _ => args.push("0.75".into()),
        }
    }
    for w in &checked.module.weights {
        if w.ty.dtype != nax_runtime::DType::F32 {
            return None;
        }
        let axes: Vec<&str> = w.ty.axes.iter().map(|a| a.name.as_deref().unwrap_or("_")).collect();
        targets.push(w.name.clone());
        derivatives.push(format!("d_{}: [{}]", w.name, axes.join(" ")));
    }
    if targets.is_empty() {
        return None;
    }
    let square = r.axes.iter().filter_map(|a| a.name.as_deref()).fold("v * v".to_string(), |e, a| format!("sum({e}, {a})"));
    Some(format!(
        "{source}\ndim turns = 2\ndef loss({}) -> (l: [], {}) {{\n    s = for t in turns {{\n        v = {}({})\n        yield {square}\n    }}\n    return grad(sum(s, turns), {})\n}}\n",
        params.join(", "),
        derivatives.join(", "),
        g.name,
        args.join(", "),
        targets.join(", ")
    ))
}

/// Random differentiable programs with calls and loops: every back end's
/// derivatives (bounds-checked too) against f64 finite differences of the
/// interpreter's value, on up to 4 elements of each target.
#[test]
fn generated_programs_have_the_derivatives_finite_differences_give() {
    // NAX_GRAD_GENERATED=N runs N programs (default 1000), NAX_SEED picks the seed.
    let count: usize = std::env::var("NAX_GRAD_GENERATED").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let seed: u64 = std::env::var("NAX_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(41);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let (mut run, mut skipped, mut not_run, mut checked_elements) = (0, 0, 0, 0);
    let backends = [
        (Backend::Llvm, false),
        (Backend::Mlir, false),
        (Backend::Cranelift, false),
        (Backend::CudaEmulation, false),
        (Backend::Llvm, true),
        (Backend::Cranelift, true),
    ];
    while run < count {
        let Some(source) = differentiable_program(&mut rng) else {
            skipped += 1;
            continue;
        };
        let case = Case { name: format!("generated_grad_{run}"), source, function: "loss".into(), sizes: Vec::new(), special_values: false, ints: Vec::new() };
        run += 1;
        let Some((checked, graph, rewritten, args, weights)) = prepare(&case, &mut rng, true) else {
            not_run += 1;
            continue;
        };
        let (graph, rewritten) = (in_f64(&graph), in_f64(&rewritten));
        let args: Vec<Value> = args.iter().map(|a| if let Value::Tensor(t) = a { Value::Tensor(widened(t)) } else { a.clone() }).collect();
        let weights: HashMap<String, HostTensor> = weights.iter().map(|(k, t)| (k.clone(), widened(t))).collect();
        let f = checked.module.functions.iter().find(|f| f.name == "loss").expect("loss");
        let reference = match run_all(Backend::Interp, false, &graph, &args, &weights) {
            Ok(out) => out,
            Err(e) if e.contains("is not known at this call") => {
                not_run += 1;
                continue;
            }
            Err(e) => panic!("{}: interp: {e}\n{}", case.name, case.source),
        };
        let value = reference[0].to_f64_vec()[0];
        if !value.is_finite() || value.abs() > 1e12 {
            not_run += 1;
            continue;
        }
        let mut results = vec![("interp".to_string(), reference)];
        for (backend, check_bounds) in backends {
            let out = run_all(backend, check_bounds, &rewritten, &args, &weights)
                .unwrap_or_else(|e| panic!("{} on {}: {e}\n{}", case.name, backend.name(), case.source));
            results.push((format!("{}{}", backend.name(), if check_bounds { " --check-bounds" } else { "" }), out));
        }
        for (k, target) in f.grad_targets.iter().enumerate() {
            let count = results[0].1[k + 1].to_f64_vec().len();
            for i in (0..count).step_by(count.div_ceil(4).max(1)) {
                // Central differences at two steps: where they disagree, the
                // value is not smooth at this scale (a kink, a cos of 1e7)
                // and neither measures the derivative.
                let difference = |step: f64| central_difference(&graph, &args, &weights, &checked.module, *target, i, step);
                let (estimate, coarser) = (difference(EPS), difference(4.0 * EPS));
                if !estimate.is_finite() || (estimate - coarser).abs() > ATOL + RTOL * estimate.abs() {
                    continue;
                }
                checked_elements += 1;
                for (label, out) in &results {
                    let got = out[k + 1].to_f64_vec()[i];
                    // gradcheck's tolerance, relative to the value's scale (a sum of large terms).
                    let scale = estimate.abs().max(value.abs() * 1e-6);
                    if (got - estimate).abs() > ATOL + RTOL * scale {
                        failures.push(format!(
                            "{} on {label}: derivative {k} element {i} is {got}, finite differences give {estimate}\n{}",
                            case.name, case.source
                        ));
                    }
                }
            }
        }
        if failures.len() > 5 {
            break;
        }
    }
    println!(
        "{run} generated programs, {not_run} of them not run (sizes no argument gives, a value past 1e12); {checked_elements} derivatives checked; {skipped} modules without a float result skipped"
    );
    assert!(not_run * 4 < run, "too few generated programs ran: {not_run} of {run} did not");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A derivative of a bf16 program is computed in bf16 (LANGUAGE.md section
/// 15: in the forward's dtype), the same on every back end, and within 2%
/// of its scale of the f32 program's at the same (bf16) point.
#[test]
fn bf16_derivatives_follow_the_f32_ones_on_every_backend() {
    let source = |kind: &str| {
        format!(
            "dim b = 4\ndim D = 8\nparam w: {kind}[D]\ndef f(x: {kind}[b D]) -> (l: {kind}[], d_w: {kind}[D], d_x: {kind}[b D]) {{\n    e = tanh(x * w) - 0.5\n    return grad(mean(sum(e * e, D), b), w, x)\n}}\n"
        )
    };
    let point = |dtype: nax_runtime::DType, shape: Vec<usize>, names: Vec<Option<String>>, seed: u64| {
        let values: Vec<f64> =
            (0..shape.iter().product::<usize>()).map(|i| f64::from(half::bf16::from_f64(((i as u64 * 7 + seed) % 13) as f64 / 6.5 - 1.0))).collect();
        HostTensor::from_f64(dtype, shape, names, &values).expect("a tensor")
    };
    let run = |kind: &str, dtype: nax_runtime::DType, backend: Backend| {
        let checked = nax_front::check_source(&source(kind));
        assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
        let lowered = nax::pipeline::lower(&checked.module, "f", true, &mut nax::Timings::start()).expect("lowers");
        let g = if backend == Backend::Interp { &lowered.lowered } else { lowered.graph() };
        let x = Value::Tensor(point(dtype, vec![4, 8], vec![Some("b".into()), Some("D".into())], 3));
        let weights = HashMap::from([("w".to_string(), point(dtype, vec![8], vec![Some("D".into())], 5))]);
        run_all(backend, false, g, &[x], &weights).unwrap_or_else(|e| panic!("{kind} on {}: {e}", backend.name()))
    };
    let f32s = run("f32", nax_runtime::DType::F32, Backend::Interp);
    let mut reference: Option<Vec<HostTensor>> = None;
    for backend in [Backend::Interp, Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation] {
        let out = run("bf16", nax_runtime::DType::BF16, backend);
        assert!(out.iter().all(|t| t.dtype() == nax_runtime::DType::BF16), "{}: the results are bf16", backend.name());
        for (k, (got, want)) in out.iter().zip(&f32s).enumerate().skip(1) {
            let (got, want) = (got.to_f64_vec(), want.to_f64_vec());
            let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
            assert!(worst <= 2e-2 * scale, "{}: derivative {k} differs from f32's by {worst}, over 2% of {scale}", backend.name());
        }
        match &reference {
            None => reference = Some(out),
            Some(r) => {
                for (k, (a, b)) in out.iter().zip(r).enumerate() {
                    crate::backends::compare(&format!("bf16 derivative {k} on {}", backend.name()), a, b, 0).unwrap();
                }
            }
        }
    }
}
