//! Derived sizes through calls: every form that derives a size (split,
//! rearrange and repeat groups, keyword sizes given or computed by the
//! caller, `as`, slices, concat's `-> k`, `take`, scans, arg-reductions,
//! einops' `...`, module dims) inside a callee called under other axis
//! names, from calls one to three deep, with constant and run-time sizes.
//! Each runs on every back end against the interpreter and, where torch
//! is importable, PyTorch running the `--emit torch` code (which works
//! from the checked program, not from the lowering).

use crate::backends::{Case, run_cases};
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// A case running `g`, with the given run-time sizes (4 for any other).
fn call_case(name: &str, source: &str, sizes: Vec<(&'static str, u64)>) -> Case {
    Case { name: name.into(), source: source.into(), function: "g".into(), sizes, special_values: false, ints: Vec::new() }
}

/// The programs of issue 25 and one per derived-size form through a call.
pub(crate) fn cases() -> Vec<Case> {
    vec![
        call_case(
            "split_concat_renamed",
            "def swap(x: [d]) -> [d] {\n    x1, x2 = split(x, (2 r) -> r)\n    return concat(x2, x1: r, r -> d)\n}\ndef g(k: [e]) -> [e] { return swap(k) }\n",
            vec![("e", 6)],
        ),
        call_case(
            "split_result_renamed",
            "def second(x: [d]) -> [r] {\n    x1, x2 = split(x, (2 r) -> r)\n    return x2\n}\ndef g(k: [e]) -> [r] { return second(k) }\n",
            vec![("e", 10)],
        ),
        call_case(
            "split_concat_constant_head",
            "dim K = 2\ndef rot(x: [h n e]) -> [h n e] {\n    x1, x2 = split(x, h n (2 r) -> h n r)\n    return concat(x2, x1: r, r -> e)\n}\ndef g(q: [K n e]) -> [K n e] { return rot(q) }\n",
            vec![("n", 3), ("e", 8)],
        ),
        call_case(
            "three_nested_calls",
            "dim B = 3\ndim Q = 12\ndef f1(x: [a c]) -> [a r] {\n    lo, hi = split(x, a (2 r) -> a r)\n    return hi - lo * 2.0\n}\ndef f2(y: [n w]) -> [n h d] {\n    z = f1(y)\n    return rearrange(z, n (h d) -> n h d, h=3)\n}\ndef f3(u: [B Q]) -> [d B h] { return f2(u) }\ndef g(u: [B Q]) -> [d B h] { return f3(u) }\n",
            vec![],
        ),
        call_case(
            "three_nested_calls_run_time",
            "def f1(x: [a c]) -> [a r] {\n    lo, hi = split(x, a (2 r) -> a r)\n    return hi - lo * 2.0\n}\ndef f2(y: [n w]) -> [n h d] {\n    z = f1(y)\n    return rearrange(z, n (h d) -> n h d, h=3)\n}\ndef g(u: [B Q]) -> [d B h] { return f2(u) }\n",
            vec![("B", 2), ("Q", 18)],
        ),
        call_case(
            "keyword_size_from_a_parameter",
            "def tile(x: [n], k: int) -> [t] {\n    y = repeat(x, n -> (r n), r=k)\n    return y as [t]\n}\ndef g(v: [m], j: int) -> [t] { return tile(v, j) }\n",
            vec![("m", 5)],
        ),
        call_case(
            "keyword_size_computed_by_the_caller",
            "def tile(x: [n], k: int) -> [t] {\n    y = repeat(x, n -> (r n), r=k)\n    return y as [t]\n}\ndef g(v: [m], j: int) -> [t] { return tile(v, j + 1) }\n",
            vec![("m", 5)],
        ),
        Case {
            ints: vec![("j", 3)],
            ..call_case(
                "keyword_sizes_of_int_expressions",
                "def heads(x: [b e], k: int) -> [b h d] { return rearrange(x, b (h d) -> b h d, h=2*k) }\ndef widen(x: [b h d], k: int) -> [b h d r] { return repeat(x, b h d -> b h d r, r=k+1-1+2*1) }\ndef g(z: [m w], j: int) -> [m h d r] { return widen(heads(z, j), j) }\n",
                // `k` is the callees' size from their `int` parameter, `j` at the call.
                vec![("m", 3), ("w", 12), ("k", 3)],
            )
        },
        call_case(
            "keyword_size_used_by_the_caller",
            "def rep(x: [n], k: int) -> [n r] { return repeat(x, n -> n r, r=k) }\ndef g(v: [m], j: int) -> [m r] {\n    y = rep(v, j)\n    return y + float(arange(r))\n}\n",
            vec![("m", 5)],
        ),
        call_case(
            "group_sizes_through_renamed_axes",
            "def heads(x: [b e]) -> [b h d] { return rearrange(x, b (h d) -> b h d, h=4) }\ndef merge(y: [p q s]) -> [p t] { return rearrange(y, p q s -> p (q s)) as [p t] }\ndef g(z: [m w]) -> [m w] {\n    return merge(heads(z)) as [m w]\n}\n",
            vec![("m", 3), ("w", 12)],
        ),
        call_case(
            "slices_through_a_call",
            "def window(x: [n d]) -> [k d] { return x[n = 1:-1 as k] }\ndef strided(x: [n d]) -> [d j] { return rearrange(x[n = ::2 as j], j d -> d j) }\ndef g(a: [t c]) -> [c j] {\n    w = window(a)\n    return strided(w) + sum(w, k) * 0.0 + 1.0\n}\n",
            vec![("t", 7), ("c", 3)],
        ),
        call_case(
            "concat_new_axis_through_a_call",
            "def join(a: [n d], b: [m d]) -> [k d] { return concat(a, b: n, m -> k) }\ndef join_again(a: [n d], b: [m d]) -> [s d] { return join(b, a) as [s d] }\ndef g(x: [p d], y: [q d]) -> [s d] {\n    z = join(x, y)\n    return join_again(z, x[p = 0:1 as o])\n}\n",
            vec![("p", 3), ("q", 5), ("d", 2)],
        ),
        call_case(
            "take_scan_argmax_through_a_call",
            "dim V = 6\ndef embed(t: [V D], ids: Int[n]) -> [n D] { return cumsum(take(t, ids, V), n) }\ndef pick(x: [n D]) -> Int[D] { return argmax(x, n) }\ndef g(w: [V E], tok: Int[s]) -> [s E] {\n    e = embed(w, clamp(tok, 0, 5))\n    return e + float(pick(e))\n}\n",
            vec![("E", 3), ("s", 5)],
        ),
        call_case(
            "ellipsis_through_a_call",
            "def flip(x: [b c d e]) -> [b e c d] { return rearrange(x, b ... e -> b e ...) }\ndef halves(x: [a b c e]) -> [a b c h] {\n    p, q = split(x, ... (2 h) -> ... h)\n    return p * q\n}\ndef g(y: [u v w z]) -> [u z v h] { return halves(flip(y)) }\n",
            vec![("u", 2), ("v", 3), ("w", 2), ("z", 4)],
        ),
        call_case(
            "module_dims_derived_through_a_call",
            "dim V = 8\ndim W = V / 2\ndef half(x: [V]) -> [W] {\n    a, b = split(x, (2 W) -> W)\n    return a + b\n}\ndef g(y: [V]) -> [W] { return half(y) * 2.0 }\n",
            vec![],
        ),
        call_case(
            "as_renames_through_two_calls",
            "def inner(x: [n m]) -> [r] { return rearrange(x, n m -> (n m)) as [r] }\ndef outer(y: [a b]) -> [s] { return inner(y) as [s] }\ndef g(z: [p q]) -> [p q] { return rearrange(outer(z), (a b) -> a b, a=3) as [p q] }\n",
            vec![("p", 3), ("q", 5)],
        ),
    ]
    .into_iter()
    .chain(int_slice_bound_cases())
    .collect()
}

/// `int` parameters as slice bounds (LANGUAGE.md section 13): positions
/// counted from the end when negative, clipped to the axis, an empty slice
/// when the stop comes before the start, as Python's; in the function
/// itself, through a call that passes the caller's parameters, and through
/// one that passes a negative literal, with a step and on a run-time axis.
fn int_slice_bound_cases() -> Vec<Case> {
    let source = "def window(x: [n d], i: int, j: int) -> [w d] { return x[n = i:j as w] }\n\
                  def tail(x: [n d], i: int) -> [m d] { return x[n = i::2 as m] * 2.0 }\n\
                  def trim(x: [n d], i: int, j: int) -> [k d] { return window(x, i, j) as [k d] }\n\
                  def g(x: [t d], a: int, b: int) -> [u d] {\n    y = window(x, a, b) + x[t = a:b as w]\n    return tail(trim(y, 0, -1), a) as [u d]\n}\n";
    let bounds: [(i64, i64); 8] = [(1, 5), (-4, 7), (2, -1), (-30, 3), (3, 30), (5, 2), (0, 0), (7, -8)];
    bounds
        .into_iter()
        .enumerate()
        .map(|(k, (a, b))| Case { ints: vec![("a", a), ("b", b)], ..call_case(&format!("int_slice_bounds_{k}"), source, vec![("t", 7), ("d", 2)]) })
        .collect()
}

/// Every case above on every back end, against the interpreter and PyTorch.
#[test]
fn derived_sizes_through_calls_agree_on_every_backend() {
    let only = std::env::var("NAX_CASE").ok();
    let cases = cases().into_iter().filter(|c| only.as_deref().is_none_or(|o| o == c.name)).collect();
    let failures = run_cases(cases, "calls");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Generated programs whose function under test calls others (one to
/// three deep), whose callees derive sizes (splits, run-time splits of
/// their symbolic parameters, groups, slices, concatenations, keyword
/// sizes, `as`) and return them under their own names, the arguments'
/// axes renamed at the call: on every back end against the interpreter
/// and, where torch is importable, PyTorch. At least 1,000 programs run
/// (`NAX_CALL_PROGRAMS=N` sets the count, `NAX_SEED` the seed).
#[test]
fn generated_programs_with_calls_agree_on_every_backend() {
    let want = std::env::var("NAX_CALL_PROGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let seed = std::env::var("NAX_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut cases = Vec::with_capacity(want);
    let mut derived = 0;
    while cases.len() < want {
        let source = crate::generate::well_formed_program(&mut rng);
        let checked = nax_front::check_source(&source);
        let Some(last) = checked.module.functions.iter().max_by_key(|f| f.span.start) else { continue };
        let body = &source[source.rfind("\ndef ").unwrap_or(0)..];
        let calls = checked.module.functions.iter().any(|f| f.name != last.name && body.contains(&format!("{}(", f.name)));
        if !calls {
            continue;
        }
        derived += usize::from(source.lines().any(|l| l.starts_with("def ") && l.contains("-> [") && l.rsplit("-> [").next().is_some_and(|r| r.contains('r'))));
        cases.push(Case {
            name: format!("generated_call_{}", cases.len()),
            source,
            function: last.name.clone(),
            sizes: Vec::new(),
            special_values: false,
            ints: Vec::new(),
        });
    }
    println!("{} generated programs with calls ({derived} with a function returning derived axes)", cases.len());
    // NAX_CASE=generated_call_N runs one of them.
    let only = std::env::var("NAX_CASE").ok();
    let cases = cases.into_iter().filter(|c| only.as_deref().is_none_or(|o| o == c.name)).collect();
    let failures = run_cases(cases, "generated-calls");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
