//! The emitted text of small programs: the lines that matter.

use super::{assert_line, body, emit_source};
use crate::{EmitError, emit_module};

#[test]
fn broadcasting_by_name_permutes_and_indexes() {
    let text = emit_source(
        "def t(x: [n m], y: [m n]) -> [n m] { return x + y }
         def ln(x: [b n D], mu: [b n]) -> [b n D] { return x - mu }
         def inner(x: [b n D], s: [n]) -> [b n D] { return x * s }",
    );
    assert_line(&text, "t", "return x + y.permute(1, 0)");
    assert_line(&text, "ln", "return x - mu[:, :, None]");
    assert_line(&text, "inner", "return x * s[:, None]");
}

#[test]
fn from_the_right_leaves_broadcasting_to_torch() {
    let text = emit_source(
        "def r(x: [n 3], y: [3]) -> [n 3] { return x * y }
         def outer(i: Int[n 1], j: Int[m]) -> Mask[n m] { return i >= j }
         def scale(x: [n], i: Int[n]) -> [n] { return i / 2 + x * 0.5 }",
    );
    assert_line(&text, "r", "return x * y");
    assert_line(&text, "outer", "return i >= j");
    // `/` of integers is true division; the int operand is cast to the result's dtype.
    assert_line(&text, "scale", "return (i.to(torch.float32) / 2) + (x * 0.5)");
}

#[test]
fn matmul_aligns_batch_axes() {
    let text = emit_source(
        "def mm(x: [h b n k], y: [b h k m]) -> [h b n m] { return x @ y }
         def plain(x: [b n k], y: [k m]) -> [b n m] { return x @ y }
         def bias(x: [h n k], y: [b h k m]) -> [b h n m] { return matmul(x, y) }",
    );
    assert_line(&text, "mm", "return x @ y.permute(1, 0, 2, 3)");
    assert_line(&text, "plain", "return x @ y");
    assert_line(&text, "bias", "return x @ y");
}

#[test]
fn pattern_operations() {
    let text = emit_source(
        "dim D = 8
         def heads(x: [b n D]) -> [b h n d] { return rearrange(x, b n (h d) -> b h n d, h=2) }
         def col(x: [n]) -> [n 1] { return rearrange(x, n -> n 1) }
         def red(x: [b n D]) -> [D b] { return reduce(x, b n D -> D b, max) }
         def rep(x: [b D]) -> [b r D] { return repeat(x, b D -> b r D, r=3) }
         def ein(q: [b n D], k: [b m D]) -> [b n m] { return einsum(q, k: b n D, b m D -> b n m) }
         def sp(x: [n (2 D)]) -> [n D] {
             u, v = split(x, n (2 D) -> n D)
             return u - v
         }",
    );
    assert_line(&text, "heads", "return x.reshape((b, n, 2, 4)).permute(0, 2, 1, 3)");
    assert_line(&text, "col", "return x.reshape((n, 1))");
    assert_line(&text, "red", "return _extremum(x, (1,), True).permute(1, 0)");
    assert_line(&text, "rep", "return x.reshape((b, 1, 8)).expand((b, 3, 8))");
    assert_line(&text, "ein", "return torch.einsum('abc,adc->abd', q, k)");
    assert_line(&text, "sp", "u, v = x.reshape((n, 2, 8)).permute(1, 0, 2).unbind(0)");
}

#[test]
fn reductions_of_masks_and_along_axis() {
    let text = emit_source(
        "def count(m: Mask[n k]) -> Int[n] { return sum(m, k) }
         def frac(m: Mask[n k]) -> [n] { return reduce(m, n k -> n, mean) }
         def sm(x: [n m]) -> Prob(n)[n m] { return softmax(x, n) }
         def lse(x: Int[n m]) -> [n] { return logsumexp(x, m) }",
    );
    assert_line(&text, "count", "return m.sum(1)");
    assert_line(&text, "frac", "return m.to(torch.float32).mean(1)");
    assert_line(&text, "sm", "return torch.softmax(x, 0)");
    assert_line(&text, "lse", "return _logsumexp(x.to(torch.float32), 1)");
}

#[test]
fn calls_pass_weights_by_keyword() {
    let text = emit_source(
        "dim D = 4
         param w: [D D]
         param lambda: [D]
         def inner(x: [n D]) -> [n D] { return x @ w + lambda }
         def outer(x: [n D], s: float = 0.5) -> [n D] { return inner(x) * s }",
    );
    assert_line(&text, "inner", "def inner(x, *, w, lambda_):");
    assert_line(&text, "outer", "def outer(x, s=0.5, *, w, lambda_):");
    assert_line(&text, "outer", "return inner(x, w=w, lambda_=lambda_) * s");
}

#[test]
fn names_that_clash_with_python_are_renamed() {
    let text = emit_source(
        "def lambda(x: [n], torch: [n]) -> [n] {
             float = x + torch
             return float
         }
         def g(lambda: [n]) -> [n] { return lambda(lambda, lambda) }",
    );
    assert_line(&text, "lambda_", "def lambda_(x, torch_):");
    assert_line(&text, "lambda_", "float_ = x + torch_");
    assert_line(&text, "g", "return lambda_(lambda_2, lambda_2)");
}

#[test]
fn run_time_sizes_are_computed_and_checked() {
    let text = emit_source(
        "dim V
         dim W = V / 2
         def f(x: [V], y: [W]) -> [W 2] { return rearrange(x, (W 2) -> W 2) + rearrange(y, W -> W 1) }
         def g(x: [n]) -> [n] { return x * n }",
    );
    let f = body(&text, "f");
    assert!(f.contains(&"V = x.shape[0]".to_string()), "{f:#?}");
    assert!(f.contains(&"W = y.shape[0]".to_string()), "{f:#?}");
    assert!(f.iter().any(|l| l.starts_with("_size(_div(V, 2, 'W'), W")), "{f:#?}");
    assert_line(&text, "g", "return x * n");
}

#[test]
fn a_run_time_dim_is_learnt_from_a_weight_the_function_does_not_use() {
    let text = emit_source(
        "dim V
         param emb: [V 4]
         def f(x: [n]) -> [V] { return zeros([V]) }
         def g(x: [n]) -> [V] { return f(x) }",
    );
    assert_line(&text, "f", "def f(x, *, emb):");
    assert_line(&text, "f", "V = emb.shape[0]");
    assert_line(&text, "f", "return torch.zeros((V,), dtype=torch.float32, device=_dev)");
    assert_line(&text, "g", "return f(x, emb=emb)");
}

#[test]
fn what_cannot_be_emitted_is_an_error() {
    let bad = nax_front::check_source("def f(x: [n]) -> [n] { return x + y }");
    assert_eq!(emit_module(&bad.module), Err(EmitError::Unchecked { function: "f".to_string() }));
}

#[test]
fn a_keyword_size_computed_from_an_int_parameter_is_computed_in_python() {
    let keyword = nax_front::check_source("def f(x: [b m], k: int) -> [b h d] { return rearrange(x, b (h d) -> b h d, h=k * 2) }");
    assert!(!keyword.has_errors(), "{:?}", keyword.diagnostics);
    let text = emit_module(&keyword.module).expect("emits");
    assert_line(&text, "f", "k_2 = k_ * 2");
    assert_line(&text, "f", "d = _div(m, k_2, 'd')");
}

#[test]
fn a_host_int_parameter_gives_a_keyword_size() {
    let text = emit_source("def f(x: [b m], k: int) -> [b h d] { return rearrange(x, b (h d) -> b h d, h=k) }");
    assert_line(&text, "f", "h = k");
    assert_line(&text, "f", "d = _div(m, h, 'd')");
}
