//! Generators of nax source text for the robustness tests and the checker benchmark.
//!
//! Three families:
//!
//! * noise for "the checker never panics": [`random_source_bytes`] (raw bytes biased towards
//!   nax punctuation and words) and [`mutate_tokens`] (token-level edits of a real program);
//! * well-formed modules that must check with no error: [`well_formed_program`] (small, random,
//!   einops' ellipsis `...`, keyword sizes of groups that only the call confirms, and
//!   section 13's indexing, slices, concatenations, scans and arg-reductions included)
//!   and [`large_module`] (thousands of lines, deterministic, for the speed benchmark);
//! * [`extreme_program`]: a well-formed module whose sizes are pushed to the edges (0, 2^31,
//!   2^32, 2^53, 2^63, 2^64 and their neighbours) in dims and pattern keywords, with functions
//!   sized by host `int` arguments, for runs that must end in a result or a clean error; and
//!   [`extreme_size`] for those arguments and run-time sizes.
//!
//! The well-formed generators track the axes of every value they bind and only write
//! constructs whose meaning LANGUAGE.md fixes. Every axis is named and no value repeats an
//! axis name, so elementwise operands always line up by name. Names live in disjoint
//! families so they never clash: dims `d0..`, weights `w0..`, functions `f0..`, tensor
//! parameters `x0..`, the float parameter `k0`, symbolic parameter axes `p0..`, axes that
//! patterns introduce `rF_0..` (F: the function's number, so that a callee's derived axes
//! reach its callers under names of their own), and local values `v0..`.
//!
//! Calls carry derived sizes across functions: a function may return axes its body
//! derived (a split's part, a group's solved part, a slice's length, a concatenation's sum,
//! a keyword size, an `as` name), which enter the caller's scope; a function with symbolic
//! parameters may split them in two at run time, and then asks its callers for an even size.

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng, rngs::SmallRng};

/// Operators and punctuation of nax.
const PUNCT: &[&str] = &["...", "+", "-", "*", "/", "@", "==", "!=", "<", "<=", ">", ">=", "!", "=", "->", ",", ":", "(", ")", "[", "]", "{", "}"];
/// Keywords, built-ins, kinds and a few plain names.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "dim", "param", "def", "return", "and", "or", "as", "rearrange", "reduce", "repeat", "einsum",
    "split", "softmax", "log_softmax", "logsumexp", "sum", "mean", "max", "min", "prod", "exp",
    "log", "sqrt", "tanh", "where", "clamp", "masked_fill", "matmul", "arange", "zeros", "full",
    "Real", "Mask", "Prob", "Logit", "LogProb", "f16", "bf16", "Int", "float", "true", "false",
    "b", "n", "D", "x", "f",
];
/// Number-like tokens, including grouped sizes and out-of-range integers.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "3",
    "16",
    "512",
    "16gh",
    "3h",
    "1e-5",
    ".5",
    "2.0",
    "inf",
    "257",
    "2147483648",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551617",
];
/// Strings, one of them unterminated.
const STRINGS: &[&str] = &["\"mean\"", "'max'", "\"\"", "\"open"];
/// Fragments for raw bytes that are not tokens: blanks, comments, non-ASCII text.
const FILLER: &[&str] = &[" ", "  ", "\n", "\t", "\r\n", "# c\n", "é", "∑", "\u{0}"];

/// Elementwise built-ins of one operand, safe on any range; all give Real except `exp` of a
/// `LogProb`, which is a `Prob`.
const UNARY: &[&str] = &["exp", "tanh", "sigmoid", "relu", "gelu", "silu", "softplus", "abs", "sin", "cos", "erf"];
/// The arithmetic operators.
const ARITH: &[&str] = &["+", "-", "*", "/"];
/// Host float and int literals (none of them zero, so they are safe divisors).
const LITERALS: &[&str] = &["0.5", "2.0", "1.5", "3", "1e-3", ".25", "10.0"];
/// Reductions accepted by `reduce`.
const REDUCTIONS: &[&str] = &["sum", "mean", "max", "min", "prod"];
/// The largest rank a generated value may have.
const MAX_RANK: usize = 4;
/// The size the suites that run generated programs give a symbolic parameter axis.
pub const PARAMETER_SIZE: u64 = 4;
/// Calls nest at most this deep, so that inlining a module stays small.
const MAX_CALL_DEPTH: usize = 3;
/// At most this many calls per function body.
const MAX_CALLS: usize = 4;

/// A random element of `items`, or `""` if it is empty.
fn pick<'a>(rng: &mut SmallRng, items: &[&'a str]) -> &'a str {
    items.choose(rng).copied().unwrap_or("")
}

/// A random token of the nax vocabulary (punctuation, words, numbers, strings, newline).
fn vocab_token(rng: &mut SmallRng) -> &'static str {
    match rng.random_range(0..10) {
        0..=3 => pick(rng, PUNCT),
        4..=6 => pick(rng, WORDS),
        7 | 8 => pick(rng, NUMBERS),
        _ if rng.random_bool(0.5) => pick(rng, STRINGS),
        _ => "\n",
    }
}

/// Random bytes, some of them valid UTF-8 fragments of nax (biased towards nax punctuation).
pub fn random_source_bytes(rng: &mut SmallRng, max_len: usize) -> Vec<u8> {
    let len = rng.random_range(0..=max_len);
    let mut out = Vec::with_capacity(len.min(1 << 16) + 32);
    while out.len() < len {
        match rng.random_range(0..6) {
            0 => out.push(rng.random::<u8>()),
            1 => out.extend_from_slice(pick(rng, FILLER).as_bytes()),
            _ => out.extend_from_slice(vocab_token(rng).as_bytes()),
        }
        if rng.random_bool(0.3) {
            out.push(b' ');
        }
    }
    out.truncate(len);
    out
}

/// The end of the run of bytes from `i` on that satisfy `keep`.
fn run_end(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && keep(b[i]) {
        i += 1;
    }
    i
}

/// The end of a number starting at `i`: digits, dots, a grouped size's name, an exponent sign.
fn number_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        let c = b[i];
        let sign = (c == b'-' || c == b'+') && i > 0 && matches!(b[i - 1], b'e' | b'E') && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || sign) {
            break;
        }
        i += 1;
    }
    i
}

/// Splits `source` into tokens whose concatenation is `source`: blank runs, newlines,
/// comments, identifiers, numbers, strings, two-character operators and single characters.
fn tokenize(source: &str) -> Vec<&str> {
    let b = source.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let end = match c {
            b' ' | b'\t' | b'\r' => run_end(b, i, |c| matches!(c, b' ' | b'\t' | b'\r')),
            b'#' => run_end(b, i, |c| c != b'\n'),
            b'"' | b'\'' => {
                let close = run_end(b, i + 1, |d| d != c && d != b'\n');
                if b.get(close) == Some(&c) { close + 1 } else { close }
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => run_end(b, i, |c| c.is_ascii_alphanumeric() || c == b'_'),
            _ if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) => number_end(b, i),
            _ if ["->", "==", "!=", "<=", ">="].iter().any(|op| b[i..].starts_with(op.as_bytes())) => i + 2,
            _ => i + source[i..].chars().next().map_or(1, char::len_utf8),
        };
        toks.push(&source[i..end]);
        i = end;
    }
    toks
}

/// A token-level mutation of a nax source: split `source` into tokens (identifiers, numbers,
/// strings, operators/punctuation, newlines, comments) and apply 1..=4 random edits: delete a
/// token, duplicate one, swap two, replace one with a random token from a nax vocabulary
/// (keywords, builtins like rearrange/einsum/softmax, `->`, `(`, `)`, `[`, `]`, `{`, `}`, `,`,
/// `:`, `=`, `@`, numbers such as 0, 1, 3, 16gh, 1e-5, inf, strings), or insert one.
pub fn mutate_tokens(rng: &mut SmallRng, source: &str) -> String {
    let mut toks: Vec<String> = tokenize(source).into_iter().map(String::from).collect();
    for _ in 0..rng.random_range(1..=4) {
        let solid: Vec<usize> = (0..toks.len()).filter(|&i| !toks[i].bytes().all(|c| matches!(c, b' ' | b'\t' | b'\r'))).collect();
        let (Some(&i), Some(&j)) = (solid.choose(rng), solid.choose(rng)) else {
            toks.push(vocab_token(rng).to_string());
            continue;
        };
        match rng.random_range(0..5) {
            0 => {
                toks.remove(i);
            }
            1 => {
                let copy = toks[i].clone();
                toks.splice(i + 1..i + 1, [" ".to_string(), copy]);
            }
            2 => toks.swap(i, j),
            3 => toks[i] = vocab_token(rng).to_string(),
            _ => {
                let at = rng.random_range(0..=toks.len());
                toks.splice(at..at, [" ".to_string(), vocab_token(rng).to_string()]);
            }
        }
    }
    toks.concat()
}

/// Axis names written as a pattern side or inside a type's brackets.
fn join(axes: &[String]) -> String {
    axes.join(" ")
}

/// Whether every name of `a` is a name of `b`.
fn subset(a: &[String], b: &[String]) -> bool {
    a.iter().all(|x| b.contains(x))
}

/// Whether no name repeats in `axes`.
fn distinct(axes: &[String]) -> bool {
    axes.iter().enumerate().all(|(i, a)| !axes[..i].contains(a))
}

/// The axes of an elementwise result of two operands where one's names are a subset of the
/// other's: the superset's axes, or the left operand's when both qualify (section 5).
fn broadcast(left: &[String], right: &[String]) -> Vec<String> {
    if subset(right, left) { left.to_vec() } else { right.to_vec() }
}

/// The caller's axis that the callee's symbolic name `q` is bound to, if any.
fn lookup(map: &[(String, String)], q: &str) -> Option<String> {
    map.iter().find(|(p, _)| p == q).map(|(_, a)| a.clone())
}

/// 1..=`max_rank` distinct names drawn from `pool` (which must not be empty), in random order.
fn random_axes(rng: &mut SmallRng, pool: &[String], max_rank: usize) -> Vec<String> {
    let mut axes = pool.to_vec();
    axes.shuffle(rng);
    axes.truncate(rng.random_range(1..=max_rank.min(pool.len()).max(1)));
    axes
}

/// A tensor value in scope while a function body is generated.
#[derive(Clone)]
struct Val {
    name: String,
    axes: Vec<String>,
    /// Whether its kind is surely `Real` (not a `Prob` or `LogProb` a softmax may have made).
    real: bool,
}

/// A generated expression and what is known of its type.
#[derive(Clone)]
struct Expr {
    text: String,
    axes: Vec<String>,
    /// Whether its kind is surely `Real`.
    real: bool,
    /// Whether it can be an operand of an operator without parentheses.
    atomic: bool,
}

impl Expr {
    /// The expression that reads a value.
    fn of(v: &Val) -> Expr {
        Expr { text: v.name.clone(), axes: v.axes.clone(), real: v.real, atomic: true }
    }

    /// The text as an operand of an operator: parenthesized unless atomic.
    fn operand(&self) -> String {
        if self.atomic { self.text.clone() } else { format!("({})", self.text) }
    }
}

/// `f(x)` for a random built-in `f` of [`UNARY`]; the result is surely Real unless `f` is `exp`
/// (of a possible `LogProb`).
fn unary_builtin(rng: &mut SmallRng, x: Expr) -> Expr {
    let f = pick(rng, UNARY);
    Expr { text: format!("{f}({})", x.text), real: x.real || f != "exp", atomic: true, ..x }
}

/// A generated function's signature, for calls from later functions.
struct Sig {
    name: String,
    /// The axes of each tensor parameter: dims, or symbolic names bound at the call.
    params: Vec<Vec<String>>,
    /// Whether a trailing `k0: float` parameter follows the tensors.
    scalar: bool,
    result: Vec<String>,
    /// The result's axes that the body derived, with their sizes when known while compiling.
    derived: Vec<(String, Option<u64>)>,
    /// The symbolic parameter axes whose size must be even (the body splits them in two).
    even: Vec<String>,
    /// The symbolic parameter axes whose size must be [`PARAMETER_SIZE`] (a keyword states a
    /// group's size with them in it).
    fixed: Vec<String>,
    /// 1 + the deepest call in the body (0 without calls).
    depth: usize,
}

/// A module being generated: its text so far and what later functions may use.
struct Module {
    text: String,
    /// Every dim with its size (`None`: known only at run time).
    dims: Vec<(String, Option<u64>)>,
    /// The `param` weights, in scope in every function.
    weights: Vec<Val>,
    /// Parameter shapes that functions share, so calls find arguments.
    shapes: Vec<Vec<String>>,
    sigs: Vec<Sig>,
}

impl Module {
    /// Whether `name` is a dim of the module.
    fn is_dim(&self, name: &str) -> bool {
        self.dims.iter().any(|(d, _)| d == name)
    }
}

/// The declarations of a module: `ndims` dims of distinct sizes 1..=24, up to two dims derived
/// from them, perhaps one known only at run time, `nweights` rank-2 weights and a pool of shapes.
fn module(rng: &mut SmallRng, ndims: usize, nweights: usize, title: &str) -> Module {
    let mut text = format!("# {title}\n");
    let mut sizes: Vec<u64> = (1..=24).collect();
    sizes.shuffle(rng);
    let base: Vec<(String, u64)> = sizes.iter().take(ndims.max(2)).enumerate().map(|(i, &s)| (format!("d{i}"), s)).collect();
    let mut dims: Vec<(String, Option<u64>)> = Vec::new();
    for (d, s) in &base {
        text += &format!("dim {d} = {s}\n");
        dims.push((d.clone(), Some(*s)));
    }
    for _ in 0..rng.random_range(0..=2) {
        let (Some((a, sa)), Some((b, sb))) = (base.choose(rng), base.choose(rng)) else { break };
        let (expr, size) = match rng.random_range(0..3) {
            0 => (format!("{a} + {b}"), sa + sb),
            1 if sa % 2 == 0 => (format!("{a} / 2"), sa / 2),
            _ => (format!("{a} * 2"), sa * 2),
        };
        let name = format!("d{}", dims.len());
        text += &format!("dim {name} = {expr}\n");
        dims.push((name, Some(size)));
    }
    if rng.random_bool(0.3) {
        let name = format!("d{}", dims.len());
        text += &format!("dim {name}\n");
        dims.push((name, None));
    }
    let names: Vec<String> = dims.iter().map(|(d, _)| d.clone()).collect();
    let mut weights = Vec::new();
    for i in 0..nweights {
        let mut axes = names.clone();
        axes.shuffle(rng);
        axes.truncate(2);
        text += &format!("param w{i}: [{}]\n", join(&axes));
        weights.push(Val { name: format!("w{i}"), axes, real: true });
    }
    let shapes = (0..rng.random_range(3..=6)).map(|_| random_axes(rng, &names, 3)).collect();
    Module { text, dims, weights, shapes, sigs: Vec::new() }
}

/// The state of one function body being generated.
struct Body<'m> {
    m: &'m Module,
    /// Every size name in scope, with its size when known while compiling.
    sizes: Vec<(String, Option<u64>)>,
    vals: Vec<Val>,
    /// Whether the function has the float parameter `k0`.
    scalar: bool,
    text: String,
    next_val: usize,
    next_axis: usize,
    /// The function's number, which its derived axes' names carry.
    function: usize,
    /// Symbolic parameter axes that must be even (split in two at run time).
    even: Vec<String>,
    /// Symbolic parameter axes that must be [`PARAMETER_SIZE`] (a keyword sizes a group of them).
    fixed: Vec<String>,
    calls: usize,
    depth: usize,
}

impl Body<'_> {
    /// The size of the name `n` in scope, if known while compiling.
    fn size(&self, n: &str) -> Option<u64> {
        self.sizes.iter().find(|(s, _)| s == n).and_then(|(_, z)| *z)
    }

    /// Whether the axes named `a` and `b` surely have equal sizes.
    fn same_size(&self, a: &str, b: &str) -> bool {
        a == b || self.size(a).is_some_and(|s| self.size(b) == Some(s))
    }

    /// A new axis name, entered into scope with `size`.
    fn fresh_axis(&mut self, size: Option<u64>) -> String {
        let name = format!("r{}_{}", self.function, self.next_axis);
        self.next_axis += 1;
        self.sizes.push((name.clone(), size));
        name
    }

    /// A new value name.
    fn fresh_val(&mut self) -> String {
        self.next_val += 1;
        format!("v{}", self.next_val - 1)
    }

    /// Appends a statement line, sometimes with a trailing comment.
    fn line(&mut self, rng: &mut SmallRng, stmt: &str) {
        let note = if rng.random_bool(0.05) { "  # note" } else { "" };
        self.text += &format!("    {stmt}{note}\n");
    }

    /// A value in scope.
    fn atom(&self, rng: &mut SmallRng) -> Option<Expr> {
        self.vals.choose(rng).map(Expr::of)
    }

    /// A value in scope or, while `depth` allows, a nested expression.
    fn operand(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let nested = if depth > 0 && rng.random_bool(0.3) { self.expr(rng, depth - 1) } else { None };
        nested.or_else(|| self.atom(rng))
    }

    /// A value whose names are a subset or a superset of `axes`, sometimes under a built-in.
    fn partner(&self, rng: &mut SmallRng, axes: &[String]) -> Option<Expr> {
        let cands: Vec<&Val> = self.vals.iter().filter(|v| subset(&v.axes, axes) || subset(axes, &v.axes)).collect();
        let e = Expr::of(cands.choose(rng)?);
        Some(if rng.random_bool(0.2) { unary_builtin(rng, e) } else { e })
    }

    /// A host scalar: a literal, a size name used as an int, or the float parameter.
    fn scalar_text(&self, rng: &mut SmallRng) -> String {
        match rng.random_range(0..10) {
            0..=2 => self.sizes.choose(rng).map_or("2.0".into(), |(n, _)| n.clone()),
            3 if self.scalar => "k0".into(),
            _ => pick(rng, LITERALS).into(),
        }
    }

    /// A random expression, or `None` when no attempt fits the values in scope. A failed
    /// attempt forgets the names its discarded operands entered into scope.
    fn expr(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        for _ in 0..8 {
            let mark = self.sizes.len();
            let e = match rng.random_range(0..17) {
                0..=2 => self.arith(rng, depth),
                3 => self.unary(rng, depth),
                4 => self.softmax(rng, depth),
                5 => self.reduce_axis(rng, depth),
                6 => self.reduce_pattern(rng, depth),
                7 => self.rearrange(rng, depth),
                8 => self.regroup(rng, depth),
                9 => self.repeat(rng, depth),
                10 => self.einsum(rng, depth),
                11 => self.matmul(rng, depth),
                12 => self.call(rng),
                13 => self.rename(rng, depth),
                14 => self.section13(rng, depth),
                15 => self.keyword_group(rng, depth),
                _ => self.select(rng, depth),
            };
            if e.is_some() {
                return e;
            }
            self.sizes.truncate(mark);
        }
        None
    }

    /// `x + y`, `x * 2.0`, `maximum(x, y)`, ... with operands that line up by name.
    fn arith(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        // Drawn first: a size name that `l` introduces can't be used before `l`.
        let s = self.scalar_text(rng);
        let l = self.operand(rng, depth)?;
        let op = pick(rng, ARITH);
        if rng.random_bool(0.3) {
            let text = if rng.random_bool(0.5) { format!("{} {op} {s}", l.operand()) } else { format!("{s} {op} {}", l.operand()) };
            return Some(Expr { text, axes: l.axes, real: true, atomic: false });
        }
        // The partner was bound before this statement, so it may come first.
        let r = self.partner(rng, &l.axes)?;
        let (a, b) = if rng.random_bool(0.5) { (l, r) } else { (r, l) };
        let axes = broadcast(&a.axes, &b.axes);
        if rng.random_bool(0.15) {
            let f = if rng.random_bool(0.5) { "maximum" } else { "minimum" };
            return Some(Expr { text: format!("{f}({}, {})", a.text, b.text), axes, real: a.real && b.real, atomic: true });
        }
        Some(Expr { text: format!("{} {op} {}", a.operand(), b.operand()), axes, real: true, atomic: false })
    }

    /// An elementwise built-in, `sqrt` of a `relu`, a negation, an identity
    /// the optimizer knows (where it holds and where it does not), or a
    /// `masked_fill` of a value in scope by a comparison of itself.
    fn unary(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        // Drawn before the operand, whose size keywords must reach the text.
        if rng.random_bool(0.1)
            && let Some(a) = self.atom(rng).filter(|a| a.real)
        {
            return Some(Expr { text: format!("masked_fill({0}, {0} > 0.5, -1.0)", a.text), real: true, atomic: true, ..a });
        }
        let x = self.operand(rng, depth)?;
        Some(match rng.random_range(0..10) {
            0 => Expr { text: format!("-{}", x.operand()), atomic: false, ..x },
            1 => Expr { text: format!("sqrt(relu({}))", x.text), real: true, atomic: true, ..x },
            2 => Expr { text: format!("exp(log(sigmoid({})))", x.text), real: true, atomic: true, ..x },
            3 => Expr { text: format!("log(exp(tanh({})))", x.text), real: true, atomic: true, ..x },
            _ => unary_builtin(rng, x),
        })
    }

    /// `softmax(x, a)` or `log_softmax(x, a)`: a Prob or LogProb, so not surely Real.
    fn softmax(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        let a = x.axes.choose(rng)?;
        let text = match rng.random_range(0..6) {
            0 => format!("log_softmax({}, {a})", x.text),
            1 => format!("log(softmax({}, {a}))", x.text),
            _ => format!("softmax({}, {a})", x.text),
        };
        Some(Expr { text, axes: x.axes.clone(), real: false, atomic: true })
    }

    /// `sum(x, a)`, `mean`, `max`, `min`, `prod` or `logsumexp` over one axis of a rank >= 2 value.
    fn reduce_axis(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        if x.axes.len() < 2 {
            return None;
        }
        let i = rng.random_range(0..x.axes.len());
        let f = pick(rng, &["sum", "mean", "max", "min", "prod", "logsumexp"]);
        let text = format!("{f}({}, {})", x.text, x.axes[i]);
        let mut axes = x.axes;
        axes.remove(i);
        Some(Expr { text, axes, real: x.real || f == "logsumexp", atomic: true })
    }

    /// `reduce(x, a b c -> a c, mean)`: keeps a non-empty proper subset, in order.
    fn reduce_pattern(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        let n = x.axes.len();
        if n < 2 {
            return None;
        }
        let mut keep: Vec<usize> = (0..n).collect();
        keep.shuffle(rng);
        keep.truncate(rng.random_range(1..n));
        keep.sort_unstable();
        let out: Vec<String> = keep.iter().map(|&i| x.axes[i].clone()).collect();
        let red = pick(rng, REDUCTIONS);
        let red = if rng.random_bool(0.3) { format!("\"{red}\"") } else { red.to_string() };
        // With an ellipsis when every axis but the first is reduced: `reduce(x, a ... -> a, max)`.
        let input = if keep == [0] && rng.random_bool(0.5) { format!("{} ...", x.axes[0]) } else { join(&x.axes) };
        let text = format!("reduce({}, {input} -> {}, {red})", x.text, join(&out));
        Some(Expr { text, axes: out, real: x.real, atomic: true })
    }

    /// `rearrange(x, a b c -> c a b)`: a permutation; or, with an ellipsis,
    /// `rearrange(x, a ... -> ... a)` (the first axis moved last).
    fn rearrange(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        if x.axes.len() >= 2 && rng.random_bool(0.3) {
            let mut out = x.axes.clone();
            out.rotate_left(1);
            let text = format!("rearrange({}, {} ... -> ... {})", x.text, x.axes[0], x.axes[0]);
            return Some(Expr { text, axes: out, real: x.real, atomic: true });
        }
        let mut out = x.axes.clone();
        out.shuffle(rng);
        let text = format!("rearrange({}, {} -> {})", x.text, join(&x.axes), join(&out));
        Some(Expr { text, axes: out, real: x.real, atomic: true })
    }

    /// `rearrange(x, a (g h) -> a g h, g=2)`, or with `g` a known name in scope that divides the
    /// axis (as `(H e)`), `h` being solved for; both parts are names not on the operand.
    fn regroup(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        if x.axes.len() >= MAX_RANK {
            return None;
        }
        let i = rng.random_range(0..x.axes.len());
        let s = self.size(&x.axes[i])?;
        let known: Vec<(String, u64)> =
            self.sizes.iter().filter_map(|(n, z)| z.filter(|&k| k > 1 && k < s && s % k == 0 && !x.axes.contains(n)).map(|k| (n.clone(), k))).collect();
        let (g, f, keyword) = match known.choose(rng) {
            Some((n, k)) if rng.random_bool(0.5) => (n.clone(), *k, String::new()),
            _ => {
                let f = *(2..s).filter(|f| s % f == 0).collect::<Vec<u64>>().choose(rng)?;
                let g = self.fresh_axis(Some(f));
                let keyword = format!(", {g}={f}");
                (g, f, keyword)
            }
        };
        let h = self.fresh_axis(Some(s / f));
        let mut lhs = x.axes.clone();
        lhs[i] = format!("({g} {h})");
        let mut out = x.axes.clone();
        out.splice(i..=i, [g, h]);
        if rng.random_bool(0.3) {
            out.shuffle(rng);
        }
        let text = format!("rearrange({}, {} -> {}{keyword})", x.text, lhs.join(" "), join(&out));
        Some(Expr { text, axes: out, real: x.real, atomic: true })
    }

    /// `rearrange(rearrange(x, a b c -> a (b c)), a r0 -> r0 a, r0=12)`: a keyword stating a
    /// group's size, the product of two axes' sizes. Where one is a symbolic parameter axis
    /// only the call confirms it; the function then asks its callers for [`PARAMETER_SIZE`].
    fn keyword_group(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        if x.axes.len() < 2 {
            return None;
        }
        let i = rng.random_range(0..x.axes.len() - 1);
        let size = |a: &String| self.size(a).or_else(|| a.starts_with('p').then_some(PARAMETER_SIZE));
        let product = size(&x.axes[i])? * size(&x.axes[i + 1])?;
        if product == 0 {
            return None;
        }
        for a in &x.axes[i..=i + 1] {
            if self.size(a).is_none() && !self.fixed.contains(a) {
                self.fixed.push(a.clone());
            }
        }
        let mut grouped = x.axes.clone();
        grouped.splice(i..=i + 1, [format!("({} {})", x.axes[i], x.axes[i + 1])]);
        let inner = format!("rearrange({}, {} -> {})", x.text, join(&x.axes), grouped.join(" "));
        let k = self.fresh_axis(Some(product));
        let mut read = x.axes.clone();
        read.splice(i..=i + 1, [k.clone()]);
        let mut out = read.clone();
        if rng.random_bool(0.5) {
            out.shuffle(rng);
        }
        let text = format!("rearrange({inner}, {} -> {}, {k}={product})", join(&read), join(&out));
        Some(Expr { text, axes: out, real: x.real, atomic: true })
    }

    /// `repeat(x, a b -> a r b, r=3)`, or adding a name in scope that has a size (a dim).
    fn repeat(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        if x.axes.len() >= MAX_RANK {
            return None;
        }
        let outside: Vec<String> = self.sizes.iter().map(|(n, _)| n.clone()).filter(|n| !x.axes.contains(n)).collect();
        let (name, keyword) = match outside.choose(rng) {
            Some(n) if rng.random_bool(0.4) => (n.clone(), String::new()),
            _ => {
                let k = rng.random_range(2..=4);
                let r = self.fresh_axis(Some(k));
                let keyword = format!(", {r}={k}");
                (r, keyword)
            }
        };
        let mut out = x.axes.clone();
        out.insert(rng.random_range(0..=out.len()), name);
        let text = format!("repeat({}, {} -> {}{keyword})", x.text, join(&x.axes), join(&out));
        Some(Expr { text, axes: out, real: x.real, atomic: true })
    }

    /// `einsum(x, y: a b, b c -> c a)`: each side the operand's own names, the output a
    /// non-empty subset of their union.
    fn einsum(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let l = self.operand(rng, depth)?;
        let sharing: Vec<&Val> = self.vals.iter().filter(|v| v.axes.iter().any(|a| l.axes.contains(a))).collect();
        let r = match sharing.choose(rng) {
            Some(v) if rng.random_bool(0.8) => Expr::of(v),
            _ => self.atom(rng)?,
        };
        let mut out = l.axes.clone();
        out.extend(r.axes.iter().filter(|a| !l.axes.contains(a)).cloned());
        out.shuffle(rng);
        out.truncate(rng.random_range(1..=out.len().clamp(1, MAX_RANK)));
        let gap = if rng.random_bool(0.1) { "\n        " } else { " " };
        let text = format!("einsum({}, {}:{gap}{}, {} -> {})", l.text, r.text, join(&l.axes), join(&r.axes), join(&out));
        // A scaled contraction, as attention's scores are.
        if rng.random_bool(0.2) {
            return Some(Expr { text: format!("{text} / 4.0"), axes: out, real: true, atomic: false });
        }
        Some(Expr { text, axes: out, real: true, atomic: true })
    }

    /// The axes of `x @ y` when it surely checks: equal contracted sizes, batch axes that line
    /// up by name (or are absent), a rank-1 `x` only with a rank-2 `y`, and no repeated name.
    fn matmul_axes(&self, x: &[String], y: &[String]) -> Option<Vec<String>> {
        let (n, m) = (x.len(), y.len());
        if n == 0 || m < 2 || !self.same_size(&x[n - 1], &y[m - 2]) {
            return None;
        }
        let axes = if n == 1 {
            if m != 2 {
                return None;
            }
            vec![y[1].clone()]
        } else {
            let (bx, by) = (&x[..n - 2], &y[..m - 2]);
            let mut axes = if subset(by, bx) {
                bx.to_vec()
            } else if subset(bx, by) {
                by.to_vec()
            } else {
                return None;
            };
            axes.push(x[n - 2].clone());
            axes.push(y[m - 1].clone());
            axes
        };
        (distinct(&axes) && axes.len() <= MAX_RANK).then_some(axes)
    }

    /// `x @ y` or `matmul(x, y)` with a value (often a weight) that fits.
    fn matmul(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let l = self.operand(rng, depth)?;
        let fits: Vec<(&Val, Vec<String>)> = self.vals.iter().filter_map(|v| Some((v, self.matmul_axes(&l.axes, &v.axes)?))).collect();
        let (r, axes) = fits.choose(rng)?;
        Some(if rng.random_bool(0.8) {
            Expr { text: format!("{} @ {}", l.operand(), r.name), axes: axes.clone(), real: true, atomic: false }
        } else {
            Expr { text: format!("matmul({}, {})", l.text, r.name), axes: axes.clone(), real: true, atomic: true }
        })
    }

    /// A call of an earlier function. A dim in a parameter type takes an argument axis of the
    /// same name; a symbolic name takes any axis, the same one wherever it recurs, but not the
    /// caller's axis named like another entry of that parameter (which would read as a
    /// transposition). The result's symbolic names become the caller's axes.
    fn call(&mut self, rng: &mut SmallRng) -> Option<Expr> {
        let m = self.m;
        let sig = m.sigs.choose(rng)?;
        if self.calls >= MAX_CALLS || sig.depth >= MAX_CALL_DEPTH {
            return None;
        }
        let mut map: Vec<(String, String)> = Vec::new();
        let mut args = Vec::new();
        for p in &sig.params {
            // An even parameter takes an axis of even size, or a symbolic parameter of this
            // function's own, which then must be even too.
            let even_ok = |q: &String, a: &String| !sig.even.contains(q) || self.size(a).map_or(a.starts_with('p'), |n| n % 2 == 0);
            let fixed_ok = |q: &String, a: &String| !sig.fixed.contains(q) || self.size(a).map_or(a.starts_with('p'), |n| n == PARAMETER_SIZE);
            let cands: Vec<&Val> = self
                .vals
                .iter()
                .filter(|v| v.real && v.axes.len() == p.len())
                .filter(|v| {
                    p.iter().zip(&v.axes).all(|(q, a)| {
                        even_ok(q, a)
                            && fixed_ok(q, a)
                            && if m.is_dim(q) { q == a } else { (a == q || !p.contains(a)) && lookup(&map, q).is_none_or(|b| &b == a) }
                    })
                })
                .collect();
            if let Some(v) = cands.choose(rng) {
                for (q, a) in p.iter().zip(&v.axes) {
                    if !m.is_dim(q) && lookup(&map, q).is_none() {
                        map.push((q.clone(), a.clone()));
                    }
                    if sig.even.contains(q) && self.size(a).is_none() && !self.even.contains(a) {
                        self.even.push(a.clone());
                    }
                    if sig.fixed.contains(q) && self.size(a).is_none() && !self.fixed.contains(a) {
                        self.fixed.push(a.clone());
                    }
                }
                args.push(v.name.clone());
            } else if p.iter().all(|q| m.is_dim(q)) {
                let same: Vec<&Val> = self.vals.iter().filter(|v| v.real && v.axes.len() == p.len() && subset(p, &v.axes)).collect();
                let v = same.choose(rng)?;
                args.push(format!("rearrange({}, {} -> {})", v.name, join(&v.axes), join(p)));
            } else {
                return None;
            }
        }
        if sig.scalar {
            args.push(pick(rng, LITERALS).to_string());
        }
        let axes: Vec<String> = sig.result.iter().map(|q| lookup(&map, q).unwrap_or_else(|| q.clone())).collect();
        // The callee's derived axes enter this scope: not twice (a second call would
        // require its sizes equal to the first's).
        if !distinct(&axes) || sig.derived.iter().any(|(d, _)| self.sizes.iter().any(|(n, _)| n == d)) {
            return None;
        }
        self.sizes.extend(sig.derived.iter().cloned());
        self.calls += 1;
        self.depth = self.depth.max(sig.depth + 1);
        Some(Expr { text: format!("{}({})", sig.name, args.join(", ")), axes, real: true, atomic: true })
    }

    /// `x as [a r0 c]`: renames one axis to a new name of the same size.
    fn rename(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        let i = rng.random_range(0..x.axes.len());
        let mut axes = x.axes.clone();
        axes[i] = self.fresh_axis(self.size(&x.axes[i]));
        let text = format!("{} as [{}]", x.operand(), join(&axes));
        Some(Expr { text, axes, real: x.real, atomic: false })
    }

    /// Section 13 on an axis whose size is known: `x[a = i]` (rank >= 2),
    /// `x[a = i:j:s as r0]` (bounds from either end), `concat(v, f(v): a, a
    /// -> r0)` of a value `v`, `cumsum`/`cumprod` along `a`, or
    /// `float(argmax(x, a))` (rank >= 2).
    fn section13(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        let x = self.operand(rng, depth)?;
        let i = rng.random_range(0..x.axes.len());
        let a = x.axes[i].clone();
        let n = self.size(&a).filter(|&n| n >= 1)? as i64;
        let mut axes = x.axes.clone();
        match rng.random_range(0..5) {
            0 if x.axes.len() >= 2 => {
                let at = rng.random_range(-n..n);
                axes.remove(i);
                Some(Expr { text: format!("{}[{a} = {at}]", x.operand()), axes, real: x.real, atomic: true })
            }
            1 => {
                let (start, stop) = (rng.random_range(0..n), rng.random_range(0..=n));
                let (start, stop) = (start.min(stop), start.max(stop));
                let step = rng.random_range(1..=3);
                let len = ((stop - start) as u64).div_ceil(step);
                // Bounds written from the end half the time.
                let bound = |b: i64, rng: &mut SmallRng| if b > 0 && b < n && rng.random_bool(0.5) { (b - n).to_string() } else { b.to_string() };
                let (s, e) = (bound(start, rng), bound(stop, rng));
                axes[i] = self.fresh_axis(Some(len));
                let step_text = if step == 1 { String::new() } else { format!(":{step}") };
                Some(Expr { text: format!("{}[{a} = {s}:{e}{step_text} as {}]", x.operand(), axes[i]), axes, real: x.real, atomic: true })
            }
            // Joined with a function of itself: only a value's name, since an
            // expression written twice would bind its pattern's names twice.
            2 if self.vals.iter().any(|v| v.name == x.text) => {
                axes[i] = self.fresh_axis(Some(2 * n as u64));
                let other = unary_builtin(rng, x.clone());
                Some(Expr { text: format!("concat({}, {}: {a}, {a} -> {})", x.text, other.text, axes[i]), axes, real: true, atomic: true })
            }
            3 => {
                let f = pick(rng, &["cumsum", "cumprod"]);
                Some(Expr { text: format!("{f}({}, {a})", x.text), axes, real: true, atomic: true })
            }
            _ if x.axes.len() >= 2 => {
                let f = pick(rng, &["argmax", "argmin"]);
                axes.remove(i);
                Some(Expr { text: format!("float({f}({}, {a}))", x.text), axes, real: true, atomic: true })
            }
            _ => None,
        }
    }

    /// A mask made from a value with `text`: comparisons, `!`, `and`.
    fn mask(rng: &mut SmallRng, t: &str) -> String {
        match rng.random_range(0..4) {
            0 => format!("{t} > 0.0"),
            1 => format!("!({t} > 0.5)"),
            2 => format!("{t} < 1.0 and {t} > -1.0"),
            _ => format!("{t} != 0.0"),
        }
    }

    /// `where(mask, a, b)`, `clamp(x, lo, hi)` or `masked_fill(x, mask, value)`, the masks
    /// lining up by name without adding axes.
    fn select(&mut self, rng: &mut SmallRng, depth: usize) -> Option<Expr> {
        match rng.random_range(0..3) {
            0 => {
                let a = self.atom(rng)?;
                let b = self.partner(rng, &a.axes)?;
                let text = format!("where({}, {}, {})", Self::mask(rng, &a.text), a.text, b.text);
                Some(Expr { text, axes: broadcast(&a.axes, &b.axes), real: a.real && b.real, atomic: true })
            }
            1 => {
                let x = self.operand(rng, depth)?;
                let (lo, hi) = *[("-1.0", "1.0"), ("0.0", "6.0"), ("-3", "3")].choose(rng)?;
                Some(Expr { text: format!("clamp({}, {lo}, {hi})", x.text), atomic: true, ..x })
            }
            _ => {
                let x = self.operand(rng, depth)?;
                let within: Vec<&Val> = self.vals.iter().filter(|v| subset(&v.axes, &x.axes)).collect();
                let b = within.choose(rng)?;
                let value = pick(rng, &["0.0", "-inf", "1.0"]);
                let text = format!("masked_fill({}, {}, {value})", x.text, Self::mask(rng, &b.name));
                Some(Expr { text, atomic: true, ..x })
            }
        }
    }

    /// `v0, v1 = split(x, a (2 r0) -> a r0)` (or `2r0`, `(r0 3)`) on an axis whose size the
    /// count divides; false, with nothing written, when no axis fits.
    fn split(&mut self, rng: &mut SmallRng) -> bool {
        let mark = self.sizes.len();
        let fit = self.operand(rng, 1).and_then(|x| {
            let axes: Vec<(usize, Option<u64>)> = x
                .axes
                .iter()
                .enumerate()
                .filter_map(|(i, a)| match self.size(a) {
                    Some(s) => (s % 2 == 0 || s % 3 == 0).then_some((i, Some(s))),
                    // A symbolic parameter axis, split in two at run time.
                    None => a.starts_with('p').then_some((i, None)),
                })
                .collect();
            let &(i, s) = axes.choose(rng)?;
            let counts: Vec<u64> = match s {
                Some(s) => [2, 3, 4].into_iter().filter(|k| s % k == 0).collect(),
                None => vec![2],
            };
            Some((x, i, s, *counts.choose(rng)?))
        });
        let Some((x, i, s, k)) = fit else {
            self.sizes.truncate(mark);
            return false;
        };
        if s.is_none() && !self.even.contains(&x.axes[i]) {
            self.even.push(x.axes[i].clone());
        }
        let h = self.fresh_axis(s.map(|s| s / k));
        let mut lhs = x.axes.clone();
        lhs[i] = match rng.random_range(0..3) {
            0 => format!("{k}{h}"),
            1 => format!("({k} {h})"),
            _ => format!("({h} {k})"),
        };
        let mut out = x.axes.clone();
        out[i] = h;
        if rng.random_bool(0.3) {
            out.shuffle(rng);
        }
        let names: Vec<String> = (0..k).map(|_| self.fresh_val()).collect();
        let stmt = format!("{} = split({}, {} -> {})", names.join(", "), x.text, lhs.join(" "), join(&out));
        self.line(rng, &stmt);
        for name in names {
            self.vals.push(Val { name, axes: out.clone(), real: x.real });
        }
        true
    }

    /// One statement: a split, or an assignment to a new name or (sometimes) an earlier one.
    fn statement(&mut self, rng: &mut SmallRng) {
        if rng.random_bool(0.05) {
            self.text += "    # a comment line\n";
        }
        if rng.random_bool(0.12) && self.split(rng) {
            return;
        }
        let Some(e) = self.expr(rng, 2) else { return };
        let locals: Vec<String> = self.vals.iter().map(|v| v.name.clone()).filter(|n| n.starts_with('v')).collect();
        let name = match locals.choose(rng) {
            Some(n) if rng.random_bool(0.1) => n.clone(),
            _ => self.fresh_val(),
        };
        self.line(rng, &format!("{name} = {}", e.text));
        self.vals.retain(|v| v.name != name);
        self.vals.push(Val { name, axes: e.axes, real: e.real });
    }
}

/// Appends a function of about `nstmts` statements to `m`. Its parameters take shapes from the
/// module's pool or random dims, or (a quarter of the time) symbolic names `p0..p3`; it returns
/// the latest value whose axes are all dims or parameter axes (made Real by `* 1.0` if it may be
/// a Prob), its axes declared in a random order.
fn add_function(rng: &mut SmallRng, m: &mut Module, nstmts: usize) {
    let dims: Vec<String> = m.dims.iter().map(|(d, _)| d.clone()).collect();
    let syms: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
    let generic = rng.random_bool(0.25);
    let mut body = Body {
        m: &*m,
        sizes: m.dims.clone(),
        vals: m.weights.clone(),
        scalar: rng.random_bool(0.3),
        text: String::new(),
        next_val: 0,
        next_axis: 0,
        function: m.sigs.len(),
        even: Vec::new(),
        fixed: Vec::new(),
        calls: 0,
        depth: 0,
    };
    let mut params: Vec<Vec<String>> = Vec::new();
    for _ in 0..rng.random_range(1..=3) {
        let axes = match m.shapes.choose(rng) {
            _ if generic => random_axes(rng, &syms, 3),
            Some(s) if rng.random_bool(0.7) => s.clone(),
            _ => random_axes(rng, &dims, 3),
        };
        for a in &axes {
            if !body.sizes.iter().any(|(n, _)| n == a) {
                body.sizes.push((a.clone(), None));
            }
        }
        body.vals.push(Val { name: format!("x{}", params.len()), axes: axes.clone(), real: true });
        params.push(axes);
    }
    for _ in 0..nstmts {
        body.statement(rng);
    }
    // A result axis is a dim, a parameter's axis, or one the body derived (`rF_N`).
    let own = format!("r{}_", body.function);
    let allowed = |n: &String| m.is_dim(n) || params.iter().any(|p| p.contains(n)) || n.starts_with(&own);
    let ret = body.vals.iter().rev().find(|v| v.axes.iter().all(allowed)).cloned().unwrap_or_else(|| Val {
        name: "x0".into(),
        axes: params.first().cloned().unwrap_or_default(),
        real: true,
    });
    let ret_name = if ret.real {
        ret.name.clone()
    } else {
        let name = body.fresh_val();
        body.line(rng, &format!("{name} = {} * 1.0", ret.name));
        name
    };
    let mut result = ret.axes.clone();
    if rng.random_bool(0.3) {
        result.shuffle(rng);
    }
    let mut sig_params: Vec<String> = params.iter().enumerate().map(|(i, p)| format!("x{i}: [{}]", join(p))).collect();
    if body.scalar {
        sig_params.push(if rng.random_bool(0.5) { "k0: float = 1.0".into() } else { "k0: float".into() });
    }
    let name = format!("f{}", m.sigs.len());
    let derived: Vec<(String, Option<u64>)> = result.iter().filter(|n| n.starts_with(&own)).map(|n| (n.clone(), body.size(n))).collect();
    let (text, depth, scalar, even, fixed) = (body.text, body.depth, body.scalar, body.even, body.fixed);
    m.text += &format!("\ndef {name}({}) -> [{}] {{\n{text}    return {ret_name}\n}}\n", sig_params.join(", "), join(&result));
    m.sigs.push(Sig { name, params, scalar, result, derived, even, fixed, depth });
}

/// A random well-formed nax module with random shapes that must check with no error.
pub fn well_formed_program(rng: &mut SmallRng) -> String {
    let (ndims, nweights) = (rng.random_range(2..=6), rng.random_range(0..=2));
    let mut m = module(rng, ndims, nweights, "a random well-formed module");
    for _ in 0..rng.random_range(1..=4) {
        let nstmts = rng.random_range(1..=8);
        add_function(rng, &mut m, nstmts);
    }
    m.text
}

/// A well-formed module of about `lines` lines (deterministic for a seed): many functions using
/// rearrange/reduce/repeat/einsum/split patterns, `@` matmuls, elementwise arithmetic with broadcasting
/// by name, softmax, and calls to earlier functions. Used by the checker speed benchmark (5k–20k lines).
pub fn large_module(lines: usize, seed: u64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (ndims, nweights) = (rng.random_range(6..=8), rng.random_range(3..=5));
    let mut m = module(&mut rng, ndims, nweights, &format!("a large generated module, seed {seed}"));
    let mut count = m.text.lines().count();
    while count < lines {
        let (start, nstmts) = (m.text.len(), rng.random_range(8..=24));
        add_function(&mut rng, &mut m, nstmts);
        count += m.text[start..].matches('\n').count();
    }
    m.text
}

/// Sizes at and around the edges a size meets: nothing, one, 32-bit, f64-exact, i64 and u64
/// limits, and past them all.
const EXTREME_SIZES: &[&str] = &[
    "0",
    "1",
    "2",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "4294967297",
    "9007199254740992",
    "9007199254740993",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "18446744073709551617",
    "1000000000000000000000000000000",
];

/// A size for a run-time argument or an input's axis: small more often than not (0 included),
/// else an extreme one that fits an i64.
pub fn extreme_size(rng: &mut SmallRng) -> u64 {
    match rng.random_range(0..10) {
        0..=4 => rng.random_range(0..=5),
        _ => *[1u64 << 31, (1 << 31) - 1, 1 << 32, (1 << 32) + 1, 1 << 53, 1 << 62, i64::MAX as u64].choose(rng).unwrap_or(&0),
    }
}

/// A well-formed module with its sizes pushed to the edges: each `dim` of a literal size and
/// each pattern keyword size is replaced, now and then, by an [`EXTREME_SIZES`] entry (so some
/// modules no longer check: the sizes overflow, are 0, or no longer divide); half get functions
/// sized by a host `int` argument (`fk`: `repeat(x, q -> q r, r=k)`, `fg`: `rearrange(x, q (h g)
/// -> q h g, h=k)`).
pub fn extreme_program(rng: &mut SmallRng) -> String {
    let base = well_formed_program(rng);
    let mut out = String::with_capacity(base.len() + 200);
    for line in base.lines() {
        let mut line = line.to_string();
        if let Some(rest) = line.strip_prefix("dim ")
            && let Some((name, size)) = rest.split_once(" = ")
            && size.bytes().all(|b| b.is_ascii_digit())
            && rng.random_bool(0.5)
        {
            line = format!("dim {name} = {}", pick(rng, EXTREME_SIZES));
        }
        // Keyword sizes: `, r3=4)` at the end of a pattern call.
        let mut edited = String::with_capacity(line.len());
        let mut rest = line.as_str();
        while let Some(at) = rest.find('=') {
            let (before, after) = rest.split_at(at);
            let digits = after[1..].bytes().take_while(u8::is_ascii_digit).count();
            let keyword = before.ends_with(|c: char| c.is_ascii_alphanumeric()) && !before.ends_with(' ') && digits > 0;
            edited += before;
            if keyword && rng.random_bool(0.3) {
                edited += "=";
                edited += pick(rng, EXTREME_SIZES);
            } else {
                edited += &after[..=digits];
            }
            rest = &after[1 + digits..];
        }
        edited += rest;
        out += &edited;
        out.push('\n');
    }
    if rng.random_bool(0.5) {
        out += "\ndef fk(x: [q], k: int) -> [q r] {\n    return repeat(x, q -> q r, r=k)\n}\n";
        out += "\ndef fg(x: [q e], k: int) -> [q h g] {\n    return rearrange(x, q (h g) -> q h g, h=k)\n}\n";
    }
    out
}
