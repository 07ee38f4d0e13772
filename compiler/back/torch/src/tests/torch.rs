//! The generated code, run by PyTorch on random inputs: small programs and
//! the transformer block against hand-written torch, and every function of
//! the shared conformance and execution cases for the checked shape and
//! dtype. Skipped (with a message saying why) when `python3` or `torch` is
//! missing.

use super::emit_source;
use super::python::have_python;
use crate::dtype_name;
use crate::names::Namer;
use nax_front::CheckedModule;
use nax_front::check::sizes::{Size, SymId};
use nax_front::check::types::{Axis, Type};
use nax_front::syntax::ast::HostType;
use std::path::PathBuf;
use std::process::Command;

/// Why the torch tests cannot run here, if they cannot.
fn torch_missing() -> Option<String> {
    if !have_python() {
        return Some("python3 is not available".to_string());
    }
    match Command::new("python3").args(["-c", "import torch"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            Some(format!("`import torch` fails: {}", err.lines().last().unwrap_or("")))
        }
        Err(e) => Some(format!("python3 does not start: {e}")),
    }
}

/// Emits `src` as `gen.py` and runs `check` (Python that imports it as `gen`,
/// with `torch` and `close(actual, expected)` in scope).
fn run(test: &str, src: &str, check: &str) {
    run_modules(test, &[("gen".to_string(), src.to_string())], check);
}

/// Emits each source as the Python module of its name and runs `check`, which
/// imports them.
fn run_modules(test: &str, modules: &[(String, String)], check: &str) {
    let texts: Vec<(&String, String)> = modules.iter().map(|(name, src)| (name, emit_source(src))).collect();
    if let Some(why) = torch_missing() {
        println!("skipped {test}: {why}");
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("nax-back-torch-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    for (name, text) in &texts {
        std::fs::write(dir.join(format!("{name}.py")), text).expect("write a generated module");
    }
    let imports: Vec<String> = texts.iter().map(|(name, _)| format!("import {name}\n")).collect();
    let script = format!(
        "import torch\n{}torch.manual_seed(0)\n\ndef close(actual, expected):\n    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)\n\n{check}\nprint('ok')\n",
        imports.concat()
    );
    std::fs::write(dir.join("check.py"), &script).expect("write check.py");
    let out = Command::new("python3").arg("check.py").current_dir(&dir).output().expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    let generated: Vec<String> = texts.iter().map(|(name, text)| format!("--- {name}.py ---\n{text}")).collect();
    assert!(out.status.success(), "{test} failed:\n{}\n{}\n--- check ---\n{check}", String::from_utf8_lossy(&out.stderr), generated.concat());
}

#[test]
fn small_programs_run_as_hand_written_torch() {
    // One Python process for all (importing torch takes seconds); each check
    // refers to its module as `gen`.
    let programs = [broadcasting(), matmul(), patterns(), reductions(), elementwise(), calls()];
    let names = ["broadcasting", "matmul", "patterns", "reductions", "elementwise", "calls"];
    let modules: Vec<(String, String)> = names.iter().zip(&programs).map(|(n, (src, _))| (n.to_string(), src.to_string())).collect();
    let checks: Vec<String> = names.iter().zip(&programs).map(|(n, (_, check))| format!("gen = {n}\n{check}")).collect();
    run_modules("small", &modules, &checks.concat());
}

/// Broadcasting: a program and its check.
fn broadcasting() -> (&'static str, &'static str) {
    let src = "
def add_t(x: [n m], y: [m n]) -> [n m] { return x + y }
def right(x: [n 3], y: [3]) -> [n 3] { return x * y - 1.5 }
def by_name(x: [b n D], mu: [b n]) -> [b n D] { return x - mu }
def outer(i: Int[n 1], j: Int[m]) -> Mask[n m] { return i >= j }
def int_div(a: Int[n], c: Int[n]) -> [n] { return a / c }
def mixed(a: Int[n], x: [n]) -> [n] { return a * x + a }
def logic(p: Mask[n m], q: Mask[m]) -> Mask[m n] { return !(p and q) or p }
";
    let check = "
x, y = torch.randn(4, 5), torch.randn(5, 4)
close(gen.add_t(x, y), x + y.T)
x, y = torch.randn(4, 3), torch.randn(3)
close(gen.right(x, y), x * y - 1.5)
x, mu = torch.randn(2, 4, 6), torch.randn(2, 4)
close(gen.by_name(x, mu), x - mu[:, :, None])
i, j = torch.arange(5).reshape(5, 1), torch.arange(3)
close(gen.outer(i, j), i >= j)
a, c = torch.tensor([1, 7, -3]), torch.tensor([2, 2, 4])
close(gen.int_div(a, c), a / c)
x = torch.randn(3)
close(gen.mixed(a, x), a * x + a)
p, q = torch.rand(3, 4) > 0.5, torch.rand(4) > 0.5
close(gen.logic(p, q), (~(p & q) | p).T)
";
    (src, check)
}

/// Matmul: a program and its check.
fn matmul() -> (&'static str, &'static str) {
    let src = "
def mm(x: [h b n k], y: [b h k m]) -> [h b n m] { return x @ y }
def mv(x: [n k], v: [k]) -> [n] { return x @ v }
def vm(v: [k], x: [b k m]) -> [b m] { return v @ x }
def bcast(x: [b n k], y: [k m]) -> [b n m] { return matmul(x, y) }
";
    let check = "
x, y = torch.randn(2, 3, 4, 5), torch.randn(3, 2, 5, 6)
close(gen.mm(x, y), x @ y.permute(1, 0, 2, 3))
x, v = torch.randn(4, 5), torch.randn(5)
close(gen.mv(x, v), x @ v)
v, x = torch.randn(5), torch.randn(2, 5, 3)
close(gen.vm(v, x), v @ x)
x, y = torch.randn(2, 4, 5), torch.randn(5, 3)
close(gen.bcast(x, y), x @ y)
";
    (src, check)
}

/// Patterns: a program and its check.
fn patterns() -> (&'static str, &'static str) {
    let src = "
dim D = 8
def heads(x: [b n D]) -> [b h n d] { return rearrange(x, b n (h d) -> b h n d, h=2) }
def merge(x: [b h n d]) -> [b n 8] { return rearrange(x, b h n d -> b n (h d)) }
def unit(x: [n]) -> [1 n] { return rearrange(x, n -> 1 n) }
def rmax(x: [b n D]) -> [D b] { return reduce(x, b n D -> D b, max) }
def rsum(x: [b n D]) -> [n] { return reduce(x, b n D -> n, sum) }
def rprod(x: [b (2 n)]) -> [2 b] { return reduce(x, b (2 n) -> 2 b, prod) }
def rep(x: [b D]) -> [b r D] { return repeat(x, b D -> b r D, r=3) }
def interleave(x: [b D]) -> [b 16] { return repeat(x, b D -> b (D r), r=2) }
def ein(a: [i j], b: [j k], c: [k]) -> [i] { return einsum(a, b, c: i j, j k, k -> i) }
def hostpat(x: [n]) -> [n] { return x + rearrange(2.0, -> 1) + reduce(3, -> , sum) }
def sp(x: [n (2 D)]) -> [n D] {
    u, v = split(x, n (2 D) -> n D)
    return u - v
}
def three(x: [b n (3 D)]) -> [b n 8] {
    q, k, v = split(x, b n (3 H Dh) -> b H n Dh, H=2)
    return rearrange(q * k + v, b H n Dh -> b n (H Dh))
}
";
    let check = "
x = torch.randn(2, 3, 8)
close(gen.heads(x), x.reshape(2, 3, 2, 4).permute(0, 2, 1, 3))
y = torch.randn(2, 2, 3, 4)
close(gen.merge(y), y.permute(0, 2, 1, 3).reshape(2, 3, 8))
v = torch.randn(5)
close(gen.unit(v), v[None, :])
close(gen.rmax(x), x.amax(1).T)
close(gen.rsum(x), x.sum((0, 2)))
z = torch.rand(3, 8) + 0.5
close(gen.rprod(z), z.reshape(3, 2, 4).prod(2).T)
w = torch.randn(4, 8)
close(gen.rep(w), w[:, None, :].expand(4, 3, 8))
close(gen.interleave(w), w.repeat_interleave(2, dim=1))
a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
close(gen.ein(a, b, c), a @ (b @ c))
close(gen.hostpat(v), v + 5.0)
s = torch.randn(3, 16)
close(gen.sp(s), s[:, :8] - s[:, 8:])
t = torch.randn(2, 3, 24)
q, k, vv = t.reshape(2, 3, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
close(gen.three(t), (q * k + vv).permute(0, 2, 1, 3).reshape(2, 3, 8))
";
    (src, check)
}

/// Reductions: a program and its check.
fn reductions() -> (&'static str, &'static str) {
    let src = "
def count(m: Mask[n k]) -> Int[n] { return sum(m, k) }
def frac(m: Mask[n k]) -> [n] { return mean(m, k) }
def anyk(m: Mask[n k]) -> Mask[n] { return max(m, k) }
def allprod(m: Mask[n k]) -> Int[n] { return prod(m, k) }
def imean(i: Int[n k]) -> [n] { return mean(i, k) }
def sm(x: [n m]) -> Prob(n)[n m] { return softmax(x, n) }
def lsm(x: [n m]) -> LogProb(m)[n m] { return log_softmax(x, m) }
def lse(x: [n m]) -> [n] { return logsumexp(x, m) }
def first(x: [n n]) -> [n] { return sum(x, n) }
";
    let check = "
m = torch.rand(4, 5) > 0.5
close(gen.count(m), m.sum(1))
close(gen.frac(m), m.float().mean(1))
close(gen.anyk(m), m.any(1))
close(gen.allprod(m), m.all(1).long())
i = torch.randint(-5, 5, (4, 5))
close(gen.imean(i), i.float().mean(1))
x = torch.randn(4, 5)
close(gen.sm(x), torch.softmax(x, 0))
close(gen.lsm(x), torch.log_softmax(x, 1))
close(gen.lse(x), torch.logsumexp(x, 1))
sq = torch.randn(3, 3)
close(gen.first(sq), sq.sum(0))
";
    (src, check)
}

/// Elementwise: a program and its check.
fn elementwise() -> (&'static str, &'static str) {
    let src = "
def ew(x: [n], i: Int[n]) -> [n] {
    return abs(i) + floor(x) + gelu(x) + softplus(x * 30.0) + silu(x) + sign(x) + round(x * 3.0) + erf(x)
}
def wh(m: Mask[n], x: [n], y: Int[n]) -> [n] { return where(m, x, y) }
def cl(x: [n], lo: [n]) -> [n] { return clamp(x, lo, 0.5) + clamp(x, -0.5, 0.5) }
def mf(x: [n m], m: Mask[m]) -> [n m] { return masked_fill(x, m, 0.0) }
def mx(x: [n], y: [n]) -> [n] { return maximum(x, 0.0) + minimum(x, y) + pow(x, 2) }
def conv(x: [n], m: Mask[n]) -> Int[n] { return int(x * 4.0) + int(m) }
def host(s: float = 2.0) -> float { return exp(s) + sqrt(4) + maximum(s, 1) }
def cons(x: [n]) -> [n] { return x + ones([n]) + full([n], 2.5) + float(arange(n)) + reduce(zeros([n 2]), n k -> n, sum) }
";
    let check = "
import math
x, i = torch.randn(6), torch.randint(-3, 3, (6,))
F = torch.nn.functional
close(gen.ew(x, i), i.abs().float() + x.floor() + F.gelu(x) + F.softplus(x * 30.0) + F.silu(x) + x.sign() + (x * 3.0).round() + torch.erf(x))
m, y = torch.rand(6) > 0.5, torch.randint(-3, 3, (6,))
close(gen.wh(m, x, y), torch.where(m, x, y.float()))
lo = torch.randn(6) - 1.0
close(gen.cl(x, lo), torch.minimum(torch.maximum(x, lo), torch.tensor(0.5)) + x.clamp(-0.5, 0.5))
x2, m2 = torch.randn(3, 4), torch.rand(4) > 0.5
close(gen.mf(x2, m2), x2.masked_fill(m2, 0.0))
y2 = torch.randn(6)
close(gen.mx(x, y2), torch.clamp(x, min=0.0) + torch.minimum(x, y2) + x ** 2)
close(gen.conv(x, m), (x * 4.0).long() + m.long())
assert abs(gen.host() - (math.exp(2.0) + 2.0 + 2.0)) < 1e-9, gen.host()
assert abs(gen.host(0.5) - (math.exp(0.5) + 2.0 + 1.0)) < 1e-9
close(gen.cons(x), x + 1.0 + 2.5 + torch.arange(6).float())
";
    (src, check)
}

/// Calls: a program and its check.
fn calls() -> (&'static str, &'static str) {
    let src = "
dim V
dim D = 4
param emb: [V D]
param bias: [D]
def proj(x: [n D]) -> [n V] { return x @ rearrange(emb, V D -> D V) }
def logits(x: [n D]) -> [n V] { return proj(x + bias) }
def vocab(x: [n D]) -> [V] { return zeros([V]) + 0.0 * reduce(x, n D -> , max) }
def half(x: [(2 h)]) -> [h] {
    a, b = split(x, (2 h) -> h)
    return a * b
}
";
    let check = "
x, emb, bias = torch.randn(3, 4), torch.randn(7, 4), torch.randn(4)
close(gen.logits(x, emb=emb, bias=bias), (x + bias) @ emb.T)
close(gen.vocab(x, emb=emb), torch.zeros(7))
h = torch.randn(10)
close(gen.half(h), h[:5] * h[5:])
try:
    gen.half(torch.randn(7))
    raise AssertionError('an odd size was accepted')
except ValueError:
    pass
";
    (src, check)
}

#[test]
fn the_transformer_block_matches_hand_written_torch() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../examples/transformer_block.nax");
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let check = "
F = torch.nn.functional
B, N, D, H = 2, 7, 512, 8
def rnd(*shape, scale=0.02):
    return torch.randn(*shape) * scale
w = dict(ln1_g=1 + rnd(D), ln1_b=rnd(D), w_qkv=rnd(D, 3 * D), w_o=rnd(D, D), ln2_g=1 + rnd(D), ln2_b=rnd(D),
         w_1=rnd(D, 4 * D), b_1=rnd(4 * D), w_2=rnd(4 * D, D), b_2=rnd(D))
x = torch.randn(B, N, D)

def ln(x, g, b):
    return F.layer_norm(x, (D,), g, b, eps=1e-5)

def attention(x):
    q, k, v = (x @ w['w_qkv']).reshape(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4)
    s = (q @ k.transpose(-1, -2)) / (D // H) ** 0.5
    s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float('-inf'))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, N, D) @ w['w_o']

h = x + attention(ln(x, w['ln1_g'], w['ln1_b']))
expected = h + F.gelu(ln(h, w['ln2_g'], w['ln2_b']) @ w['w_1'] + w['b_1']) @ w['w_2'] + w['b_2']
close(gen.block(x, **w), expected)
";
    run("block", &src, check);
}

/// A Python call of every function of `module` on random arguments, with
/// sizes chosen for its free sizes (12, 24, 36: most groups divide them, and
/// different sizes catch transpositions), checking
/// the result's shape and dtype against the checked type. Functions whose
/// sizes do not solve with that choice are left out.
fn smoke_calls(module: &CheckedModule, py_module: &str) -> String {
    let mut global = Namer::new();
    let functions: Vec<String> = module.functions.iter().map(|f| global.fresh(&f.name)).collect();
    let weights: Vec<String> = module.weights.iter().map(|w| global.fresh(&w.name)).collect();
    let mut out = String::new();
    for (f, name) in module.functions.iter().zip(&functions) {
        let syms = &f.symbols;
        let mut given: Vec<(Size, u64)> = Vec::new();
        let params: Vec<&Type> = f.bindings.iter().take(f.params).map(|b| &b.ty).collect();
        let tensors = params.iter().filter_map(|t| match t {
            Type::Tensor(t) => Some(t),
            _ => None,
        });
        for t in tensors.chain(module.weights.iter().map(|w| &w.ty)) {
            for a in &t.axes {
                let s = syms.resolve(a.size);
                if matches!(s, Size::Sym(_)) && !given.iter().any(|(g, _)| *g == s) {
                    given.push((s, 12 * (1 + given.len() as u64 % 3)));
                }
            }
        }
        let Ok(values) = syms.table().solve(&given) else { continue };
        let shape = |axes: &[Axis]| -> Option<String> {
            let sizes: Option<Vec<String>> = axes
                .iter()
                .map(|a| match syms.resolve(a.size) {
                    Size::Const(c) => Some(c.to_string()),
                    Size::Sym(SymId(r)) => values.get(r as usize).copied().flatten().map(|v| v.to_string()),
                })
                .collect();
            sizes.map(|s| format!("({}{})", s.join(", "), if s.len() == 1 { "," } else { "" }))
        };
        let mut args = Vec::new();
        for ty in &params {
            args.push(match ty {
                Type::Tensor(t) => match shape(&t.axes) {
                    Some(s) => format!("_rand({s}, {})", dtype_name(t.dtype)),
                    None => break,
                },
                Type::Host(HostType::Float, _) => "1.5".to_string(),
                Type::Host(HostType::Int, _) => "3".to_string(),
                _ => "True".to_string(),
            });
        }
        let ws: Option<Vec<String>> =
            module.weights.iter().zip(&weights).map(|(w, n)| Some(format!("'{n}': _rand({}, {})", shape(&w.ty.axes)?, dtype_name(w.ty.dtype)))).collect();
        let (Some(ws), true) = (ws, args.len() == params.len()) else { continue };
        let [result] = f.results.as_slice() else { continue };
        let expect = match &result.ty {
            Type::Tensor(t) => format!("({}, {})", shape(&t.axes).unwrap_or_else(|| "None".to_string()), dtype_name(t.dtype)),
            Type::Host(h, _) => format!("({}, None)", h.as_str()),
            Type::Error => continue,
        };
        out.push_str(&format!("_call({py_module}.{name}, [{}], {{{}}}, {expect})\n", args.join(", "), ws.join(", ")));
    }
    out
}

#[test]
fn every_shared_case_runs_and_gives_the_checked_shape_and_dtype() {
    let cases = super::python::shared_cases();
    if cases.is_empty() {
        println!("skipped: the shared conformance and execution cases are absent");
        return;
    }
    let helpers = "
import inspect

def _rand(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-5, 6, shape, dtype=dtype)
    return torch.randn(shape).to(dtype)

def _call(f, args, weights, expect):
    params = inspect.signature(f).parameters
    out = f(*args, **{k: v for k, v in weights.items() if k in params})
    shape, dtype = expect
    if dtype is None:
        assert isinstance(out, shape), (f.__name__, out)
        return
    assert out.dtype == dtype, (f.__name__, out.dtype, dtype)
    assert shape is None or tuple(out.shape) == shape, (f.__name__, tuple(out.shape), shape)
";
    let mut modules = Vec::new();
    let mut calls = String::new();
    for (i, (file, src)) in cases.into_iter().enumerate() {
        let name = format!("case{i}");
        let checked = nax_front::check_source(&src);
        calls.push_str(&format!("# {}\n", file.display()));
        calls.push_str(&smoke_calls(&checked.module, &name));
        modules.push((name, src));
    }
    assert!(calls.matches("_call(").count() > 20, "too few functions run:\n{calls}");
    run_modules("shared", &modules, &format!("{helpers}\n{calls}"));
}
