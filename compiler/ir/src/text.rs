//! The graph's text form, which prints and parses back to the same graph
//! (as Cranelift's IR does): `nax build --emit graph` writes it, and the
//! file tests compare it. Lines starting with `#` are comments.
//!
//! ```text
//! graph f
//! sym $0 "V" free
//! sym $1 "b" free = $0
//! %0 = input 0 "x" : f32 plain [b:$1 D:512] range -inf inf
//! %1 = map exp compute f32 %0[0 1] : f32 plain [b:$1 D:512] range 0.0 inf
//! inputs %0
//! output %1
//! ```

use crate::graph::Type;
use crate::graph::{Graph, Literal, MapFn, Node, Op, Output};
use nax_contract::DType;
use nax_contract::HostType;
use nax_contract::shard::{Exchange, ReduceOp, Split};
use nax_contract::{Size, SymDef, SymId};
use nax_contract::{SizeTable, Symbol};
use nax_ops::{AlongAxis, Constructor, Elementwise, Reduction};
use nax_ops::{BinaryOp, UnaryOp};
use nax_values::{Axis, Kind, Range, TensorType};
use petgraph::graph::{DiGraph, NodeIndex};
use std::fmt::Write;

/// Every elementwise function and its name in the text form.
const MAP_FNS: &[(&str, MapFn)] = &[
    ("neg", MapFn::Unary(UnaryOp::Neg)),
    ("not", MapFn::Unary(UnaryOp::Not)),
    ("add", MapFn::Binary(BinaryOp::Add)),
    ("sub", MapFn::Binary(BinaryOp::Sub)),
    ("mul", MapFn::Binary(BinaryOp::Mul)),
    ("div", MapFn::Binary(BinaryOp::Div)),
    ("eq", MapFn::Binary(BinaryOp::Eq)),
    ("ne", MapFn::Binary(BinaryOp::Ne)),
    ("lt", MapFn::Binary(BinaryOp::Lt)),
    ("le", MapFn::Binary(BinaryOp::Le)),
    ("gt", MapFn::Binary(BinaryOp::Gt)),
    ("ge", MapFn::Binary(BinaryOp::Ge)),
    ("and", MapFn::Binary(BinaryOp::And)),
    ("or", MapFn::Binary(BinaryOp::Or)),
    ("exp", MapFn::Builtin(Elementwise::Exp)),
    ("log", MapFn::Builtin(Elementwise::Log)),
    ("log1p", MapFn::Builtin(Elementwise::Log1p)),
    ("expm1", MapFn::Builtin(Elementwise::Expm1)),
    ("sqrt", MapFn::Builtin(Elementwise::Sqrt)),
    ("rsqrt", MapFn::Builtin(Elementwise::Rsqrt)),
    ("abs", MapFn::Builtin(Elementwise::Abs)),
    ("sin", MapFn::Builtin(Elementwise::Sin)),
    ("cos", MapFn::Builtin(Elementwise::Cos)),
    ("tanh", MapFn::Builtin(Elementwise::Tanh)),
    ("erf", MapFn::Builtin(Elementwise::Erf)),
    ("floor", MapFn::Builtin(Elementwise::Floor)),
    ("ceil", MapFn::Builtin(Elementwise::Ceil)),
    ("round", MapFn::Builtin(Elementwise::Round)),
    ("sign", MapFn::Builtin(Elementwise::Sign)),
    ("sigmoid", MapFn::Builtin(Elementwise::Sigmoid)),
    ("relu", MapFn::Builtin(Elementwise::Relu)),
    ("gelu", MapFn::Builtin(Elementwise::Gelu)),
    ("silu", MapFn::Builtin(Elementwise::Silu)),
    ("softplus", MapFn::Builtin(Elementwise::Softplus)),
    ("pow", MapFn::Builtin(Elementwise::Pow)),
    ("maximum", MapFn::Builtin(Elementwise::Maximum)),
    ("minimum", MapFn::Builtin(Elementwise::Minimum)),
    ("where", MapFn::Builtin(Elementwise::Where)),
    ("clamp", MapFn::Builtin(Elementwise::Clamp)),
    ("masked_fill", MapFn::Builtin(Elementwise::MaskedFill)),
    ("float", MapFn::Builtin(Elementwise::ToFloat)),
    ("int", MapFn::Builtin(Elementwise::ToInt)),
];

const REDUCTIONS: &[(&str, Reduction)] =
    &[("sum", Reduction::Sum), ("mean", Reduction::Mean), ("max", Reduction::Max), ("min", Reduction::Min), ("prod", Reduction::Prod)];
const ALONG: &[(&str, AlongAxis)] = &[("softmax", AlongAxis::Softmax), ("log_softmax", AlongAxis::LogSoftmax), ("logsumexp", AlongAxis::LogSumExp)];
const CONSTRUCTORS: &[(&str, Constructor)] =
    &[("zeros", Constructor::Zeros), ("ones", Constructor::Ones), ("full", Constructor::Full), ("arange", Constructor::Arange)];

/// The text-form name of an entry of one of the tables above.
fn name_of<T: PartialEq + Copy>(table: &[(&'static str, T)], v: T) -> &'static str {
    table.iter().find(|(_, x)| *x == v).map_or("?", |(n, _)| n)
}

/// The text-form name of an elementwise function.
pub fn map_fn_name(f: MapFn) -> &'static str {
    name_of(MAP_FNS, f)
}

/// The text-form name of a reduction.
pub fn reduction_name(r: Reduction) -> &'static str {
    name_of(REDUCTIONS, r)
}

/// The text-form name of an operation along an axis.
pub fn along_name(a: AlongAxis) -> &'static str {
    name_of(ALONG, a)
}

/// A size as the text form writes it: a number or `$id`.
pub fn size_text(s: Size) -> String {
    match s {
        Size::Const(v) => v.to_string(),
        Size::Sym(id) => format!("${}", id.0),
    }
}

fn range_text(r: Option<Range>) -> String {
    r.map_or("norange".to_string(), |r| format!("range {:?} {:?}", r.lo, r.hi))
}

/// A type as the text form writes it (`f32 plain [b:$1 D:512] range -inf inf`).
pub fn type_text(ty: &Type) -> String {
    match ty {
        Type::Host(h, r) => format!("host {} {}", h.as_str(), range_text(*r)),
        Type::Tensor(t) => {
            let kind = match &t.kind {
                Kind::Plain => "plain".to_string(),
                Kind::Logit(a) => format!("logit({a})"),
                Kind::Prob(a) => format!("prob({a})"),
                Kind::LogProb(a) => format!("logprob({a})"),
            };
            let axes: Vec<String> = t.axes.iter().map(|a| format!("{}:{}", a.name.as_deref().unwrap_or("_"), size_text(a.size))).collect();
            format!("{} {kind} [{}] {}", t.dtype.as_str(), axes.join(" "), range_text(t.range))
        }
    }
}

fn list(v: &[usize]) -> String {
    format!("[{}]", v.iter().map(usize::to_string).collect::<Vec<_>>().join(" "))
}

/// Prints a size table: one `sym` line per symbol, with its definition and
/// then ` = $C` (the class it was required equal to, when it is not its
/// class's representative) or ` = N` (the constant its class has).
pub fn print_symbols(symbols: &SizeTable, out: &mut String) {
    for (i, s) in symbols.symbols.iter().enumerate() {
        let def = match s.def {
            SymDef::Free => "free".to_string(),
            SymDef::Mul(a, b) => format!("mul {} {}", size_text(a), size_text(b)),
            SymDef::Div(a, b) => format!("div {} {}", size_text(a), size_text(b)),
            SymDef::Add(a, b) => format!("add {} {}", size_text(a), size_text(b)),
            SymDef::Sub(a, b) => format!("sub {} {}", size_text(a), size_text(b)),
            SymDef::CeilDiv(a, b) => format!("ceildiv {} {}", size_text(a), size_text(b)),
            SymDef::Signed => "signed".to_string(),
            SymDef::Position(a, b) => format!("position {} {}", size_text(a), size_text(b)),
            SymDef::Gap(a, b) => format!("gap {} {}", size_text(a), size_text(b)),
        };
        let link = if s.class.0 as usize != i { format!(" = ${}", s.class.0) } else { s.value.map_or(String::new(), |v| format!(" = {v}")) };
        let _ = writeln!(out, "sym ${i} {:?} {def}{link}", s.name);
    }
}

/// Prints a graph in its text form.
pub fn print(g: &Graph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "graph {}", g.name);
    print_symbols(&g.symbols, &mut out);
    for (size, index) in &g.size_arguments {
        let _ = writeln!(out, "size_argument {} input {index}", size_text(*size));
    }
    for n in g.graph.node_indices() {
        let node = &g.graph[n];
        let ops: Vec<String> = g.operands(n).iter().map(|o| format!("%{}", o.index())).collect();
        let operand = |i: usize| ops.get(i).cloned().unwrap_or_default();
        let text = match &node.op {
            Op::Input { index, name } => format!("input {index} {name:?}"),
            Op::Weight { name } => format!("weight {name:?}"),
            Op::Literal(Literal::Int(v)) => format!("literal int {v}"),
            Op::Literal(Literal::Float(v)) => format!("literal float {v:?}"),
            Op::Literal(Literal::Bool(v)) => format!("literal bool {v}"),
            Op::SizeValue(s) => format!("size {}", size_text(*s)),
            Op::Map { func, maps, compute } => {
                let args: Vec<String> = ops.iter().zip(maps).map(|(o, m)| format!("{o}{}", list(m))).collect();
                format!("map {} compute {} {}", name_of(MAP_FNS, *func), compute.as_str(), args.join(" "))
            }
            Op::Contract { labels, output } => {
                let args: Vec<String> = ops.iter().zip(labels).map(|(o, l)| format!("{o}{}", list(l))).collect();
                format!("contract {} -> {}", args.join(" "), list(output))
            }
            Op::Reduce { op, axes } => format!("reduce {} {} {}", name_of(REDUCTIONS, *op), list(axes), operand(0)),
            Op::Along { func, axis } => format!("along {} {axis} {}", name_of(ALONG, *func), operand(0)),
            Op::Reshape => format!("reshape {}", operand(0)),
            Op::Rename => format!("rename {}", operand(0)),
            Op::Permute { perm } => format!("permute {} {}", list(perm), operand(0)),
            Op::Expand { map } => format!("expand {} {}", list(map), operand(0)),
            Op::Select { axis, index, count } => format!("select {axis} {index} {count} {}", operand(0)),
            Op::Slice { axis, start, step } => format!("slice {axis} {} {step} {}", size_text(*start), operand(0)),
            Op::Concat { axis } => format!("concat {axis} {}", ops.join(" ")),
            Op::Take { axis } => format!("take {axis} {} {}", operand(0), operand(1)),
            Op::ScatterAdd { axis } => format!("scatter_add {axis} {}", ops.join(" ")),
            Op::Scan { op, axis } => format!("scan {} {axis} {}", name_of(REDUCTIONS, *op), operand(0)),
            Op::ArgReduce { op, axis } => format!("arg {} {axis} {}", name_of(REDUCTIONS, *op), operand(0)),
            Op::Construct { func } => format!("construct {} {}", name_of(CONSTRUCTORS, *func), ops.join(" ")).trim_end().to_string(),
            Op::Exchange(exchange) => format!("exchange {} {}", exchange_text(exchange), operand(0)),
        };
        let _ = writeln!(out, "%{} = {text} : {}", n.index(), type_text(&node.ty));
    }
    let inputs: Vec<String> = g.inputs.iter().map(|i| format!("%{}", i.index())).collect();
    let _ = writeln!(out, "inputs {}", inputs.join(" "));
    let outputs: Vec<String> =
        g.outputs.iter().map(|o| o.name.as_ref().map_or_else(|| format!("%{}", o.node.index()), |n| format!("{n}=%{}", o.node.index()))).collect();
    let _ = writeln!(out, "output {}", outputs.join(" "));
    out
}

/// A syntax error in a graph's text form: the line and what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// A cursor over the words of one line.
struct Words<'a> {
    words: Vec<&'a str>,
    pos: usize,
    line: usize,
}

impl<'a> Words<'a> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError { line: self.line, message: message.into() }
    }

    fn next(&mut self) -> Result<&'a str, ParseError> {
        let w = self.words.get(self.pos).copied().ok_or_else(|| self.err("unexpected end of line"))?;
        self.pos += 1;
        Ok(w)
    }

    fn expect(&mut self, word: &str) -> Result<(), ParseError> {
        let w = self.next()?;
        if w == word { Ok(()) } else { Err(self.err(format!("expected `{word}`, found `{w}`"))) }
    }

    fn number<T: std::str::FromStr>(&mut self) -> Result<T, ParseError> {
        let w = self.next()?;
        w.parse().map_err(|_| self.err(format!("`{w}` is not a number")))
    }

    fn quoted(&mut self) -> Result<String, ParseError> {
        let w = self.next()?;
        w.strip_prefix('"').and_then(|x| x.strip_suffix('"')).map(str::to_string).ok_or_else(|| self.err(format!("expected a quoted name, found `{w}`")))
    }

    fn done(&self) -> bool {
        self.pos >= self.words.len()
    }
}

/// Splits a line into words, keeping `[...]` lists and `"..."` names together.
fn split_words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b' ' {
            i += 1;
            continue;
        }
        let start = i;
        let mut depth = 0i32;
        let mut quoted = false;
        while i < bytes.len() && (bytes[i] != b' ' || depth > 0 || quoted) {
            match bytes[i] {
                b'[' if !quoted => depth += 1,
                b']' if !quoted => depth -= 1,
                b'"' => quoted = !quoted,
                _ => {}
            }
            i += 1;
        }
        out.push(&line[start..i]);
    }
    out
}

fn parse_size(w: &mut Words, text: &str) -> Result<Size, ParseError> {
    match text.strip_prefix('$') {
        Some(id) => id.parse().map(|i| Size::Sym(SymId(i))).map_err(|_| w.err(format!("bad symbol `{text}`"))),
        None => text.parse().map(Size::Const).map_err(|_| w.err(format!("bad size `{text}`"))),
    }
}

fn parse_list(w: &mut Words, text: &str) -> Result<Vec<usize>, ParseError> {
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or_else(|| w.err(format!("expected a list, found `{text}`")))?;
    inner.split_whitespace().map(|x| x.parse().map_err(|_| w.err(format!("bad index `{x}`")))).collect()
}

fn parse_dtype(w: &mut Words) -> Result<DType, ParseError> {
    let t = w.next()?;
    parse_dtype_text(t, w.line)
}

fn parse_range(w: &mut Words) -> Result<Option<Range>, ParseError> {
    match w.next()? {
        "norange" => Ok(None),
        "range" => {
            let lo = w.number::<f64>()?;
            let hi = w.number::<f64>()?;
            Ok(Some(Range { lo, hi }))
        }
        other => Err(w.err(format!("expected a range, found `{other}`"))),
    }
}

fn parse_type(w: &mut Words) -> Result<Type, ParseError> {
    if w.words.get(w.pos) == Some(&"host") {
        w.next()?;
        let h = match w.next()? {
            "float" => HostType::Float,
            "int" => HostType::Int,
            "bool" => HostType::Bool,
            other => return Err(w.err(format!("unknown host type `{other}`"))),
        };
        return Ok(Type::Host(h, parse_range(w)?));
    }
    let dtype = parse_dtype(w)?;
    let k = w.next()?;
    let domain = |prefix: &str| k.strip_prefix(prefix).and_then(|x| x.strip_suffix(')')).map(str::to_string);
    let kind = if k == "plain" {
        Kind::Plain
    } else if let Some(a) = domain("logit(") {
        Kind::Logit(a)
    } else if let Some(a) = domain("logprob(") {
        Kind::LogProb(a)
    } else if let Some(a) = domain("prob(") {
        Kind::Prob(a)
    } else {
        return Err(w.err(format!("unknown kind `{k}`")));
    };
    let axes_text = w.next()?;
    let inner = axes_text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or_else(|| w.err("expected the axes in [ ]"))?;
    let mut axes = Vec::new();
    for a in inner.split_whitespace() {
        let (name, size) = a.split_once(':').ok_or_else(|| w.err(format!("bad axis `{a}`")))?;
        axes.push(Axis { name: (name != "_").then(|| name.to_string()), size: parse_size(w, size)? });
    }
    Ok(Type::Tensor(TensorType { dtype, kind, axes, range: parse_range(w)? }))
}

fn node_ref(w: &mut Words, text: &str) -> Result<NodeIndex, ParseError> {
    text.strip_prefix('%').and_then(|t| t.parse().ok()).map(NodeIndex::new).ok_or_else(|| w.err(format!("expected a node `%N`, found `{text}`")))
}

/// `%3[0 1]`: an operand with its list.
fn operand_with_list(w: &mut Words) -> Result<(NodeIndex, Vec<usize>), ParseError> {
    let t = w.next()?;
    let open = t.find('[').ok_or_else(|| w.err(format!("expected `%N[...]`, found `{t}`")))?;
    let n = node_ref(w, &t[..open])?;
    Ok((n, parse_list(w, &t[open..])?))
}

/// The lines every text form shares: the symbol table and the sizes given
/// by host int parameters.
#[derive(Default)]
pub struct Header {
    pub symbols: SizeTable,
    pub size_arguments: Vec<(Size, usize)>,
}

impl Header {
    /// Reads `line` (number `line_no`) if it is a header line; `Ok(false)` otherwise.
    pub fn line(&mut self, line: &str, line_no: usize) -> Result<bool, ParseError> {
        let mut w = Words { words: split_words(line), pos: 0, line: line_no };
        match w.words.first().copied() {
            Some("sym") => {
                w.next()?;
                let id = w.next()?;
                let name = w.quoted()?;
                let kind = w.next()?;
                let def = if kind == "free" {
                    SymDef::Free
                } else if kind == "signed" {
                    SymDef::Signed
                } else {
                    let (a, b) = (w.next()?, w.next()?);
                    let (a, b) = (parse_size(&mut w, a)?, parse_size(&mut w, b)?);
                    match kind {
                        "mul" => SymDef::Mul(a, b),
                        "div" => SymDef::Div(a, b),
                        "add" => SymDef::Add(a, b),
                        "sub" => SymDef::Sub(a, b),
                        "ceildiv" => SymDef::CeilDiv(a, b),
                        "position" => SymDef::Position(a, b),
                        "gap" => SymDef::Gap(a, b),
                        other => return Err(w.err(format!("unknown symbol definition `{other}`"))),
                    }
                };
                let new = self.symbols.symbols.len();
                if format!("${new}") != id {
                    return Err(w.err(format!("symbol {id} out of order")));
                }
                let mut symbol = Symbol { name, def, class: SymId(new as u32), value: None };
                if !w.done() {
                    w.expect("=")?;
                    let target = w.next()?;
                    match parse_size(&mut w, target)? {
                        Size::Const(v) => symbol.value = Some(v),
                        Size::Sym(c) => {
                            let Some(class) = self.symbols.symbols.get(c.0 as usize) else {
                                return Err(w.err(format!("symbol {id} joins ${}, which is not defined before it", c.0)));
                            };
                            (symbol.class, symbol.value) = (class.class, class.value);
                        }
                    }
                }
                self.symbols.symbols.push(symbol);
            }
            Some("size_argument") => {
                w.next()?;
                let t = w.next()?;
                let size = parse_size(&mut w, t)?;
                w.expect("input")?;
                self.size_arguments.push((size, w.number()?));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Parses a size as the text form writes it.
pub fn parse_size_text(text: &str, line: usize) -> Result<Size, ParseError> {
    let mut w = Words { words: Vec::new(), pos: 0, line };
    parse_size(&mut w, text)
}

/// Parses a dtype name.
pub fn parse_dtype_text(text: &str, line: usize) -> Result<DType, ParseError> {
    DType::ALL.into_iter().find(|d| d.as_str() == text).ok_or(ParseError { line, message: format!("unknown dtype `{text}`") })
}

/// The elementwise function, reduction or operation along an axis called `name`.
pub fn map_fn_named(name: &str) -> Option<MapFn> {
    MAP_FNS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The reduction called `name`.
pub fn reduction_named(name: &str) -> Option<Reduction> {
    REDUCTIONS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The operation along an axis called `name`.
pub fn along_named(name: &str) -> Option<AlongAxis> {
    ALONG.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Parses the text form back into a graph.
pub fn parse(text: &str) -> Result<Graph, ParseError> {
    let mut g = Graph {
        name: String::new(),
        graph: DiGraph::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        symbols: SizeTable::default(),
        size_arguments: Vec::new(),
    };
    let mut header = Header::default();
    for (i, line) in text.lines().enumerate() {
        // `#` starts a comment line (`--emit graph` annotates graphs with them).
        if line.trim_start().starts_with('#') {
            continue;
        }
        if header.line(line, i + 1)? {
            continue;
        }
        let mut w = Words { words: split_words(line), pos: 0, line: i + 1 };
        if w.done() {
            continue;
        }
        match w.next()? {
            "graph" => g.name = w.next()?.to_string(),
            "inputs" => {
                while !w.done() {
                    let t = w.next()?;
                    g.inputs.push(node_ref(&mut w, t)?);
                }
            }
            "output" => {
                while !w.done() {
                    let t = w.next()?;
                    let (name, node) = match t.split_once('=') {
                        Some((name, node)) => (Some(name.to_string()), node),
                        None => (None, t),
                    };
                    g.outputs.push(Output { name, node: node_ref(&mut w, node)? });
                }
            }
            first if first.starts_with('%') => {
                let index = node_ref(&mut w, first)?;
                if index.index() != g.graph.node_count() {
                    return Err(w.err(format!("node {first} out of order")));
                }
                w.expect("=")?;
                let (op, operands) = parse_op(&mut w)?;
                w.expect(":")?;
                let ty = parse_type(&mut w)?;
                if !w.done() {
                    return Err(w.err("unexpected words after the type"));
                }
                if let Some(bad) = operands.iter().find(|o| o.index() >= index.index()) {
                    return Err(w.err(format!("operand %{} is not defined before %{}", bad.index(), index.index())));
                }
                let n = g.graph.add_node(Node { op, ty });
                for (k, o) in operands.into_iter().enumerate() {
                    g.graph.add_edge(o, n, k);
                }
            }
            other => return Err(w.err(format!("unknown line `{other}`"))),
        }
    }
    g.symbols = header.symbols;
    g.size_arguments = header.size_arguments;
    let count = g.graph.node_count();
    if g.outputs.is_empty() || g.output_nodes().any(|o| o.index() >= count) || g.inputs.iter().any(|i| i.index() >= count) {
        return Err(ParseError { line: text.lines().count(), message: "inputs or output name a node that does not exist".into() });
    }
    Ok(g)
}

/// The entry of `table` called `name`.
fn lookup<T: Copy>(w: &Words, table: &[(&str, T)], name: &str) -> Result<T, ParseError> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).ok_or_else(|| w.err(format!("unknown name `{name}`")))
}

fn parse_op(w: &mut Words) -> Result<(Op, Vec<NodeIndex>), ParseError> {
    let single = |w: &mut Words| -> Result<Vec<NodeIndex>, ParseError> {
        let t = w.next()?;
        Ok(vec![node_ref(w, t)?])
    };
    let kind = w.next()?;
    Ok(match kind {
        "input" => {
            let index = w.number()?;
            (Op::Input { index, name: w.quoted()? }, Vec::new())
        }
        "weight" => (Op::Weight { name: w.quoted()? }, Vec::new()),
        "literal" => {
            let lit = match w.next()? {
                "int" => Literal::Int(w.number()?),
                "float" => Literal::Float(w.number()?),
                "bool" => Literal::Bool(w.number()?),
                other => return Err(w.err(format!("unknown literal `{other}`"))),
            };
            (Op::Literal(lit), Vec::new())
        }
        "size" => {
            let t = w.next()?;
            (Op::SizeValue(parse_size(w, t)?), Vec::new())
        }
        "map" => {
            let name = w.next()?;
            let func = lookup(w, MAP_FNS, name)?;
            w.expect("compute")?;
            let compute = parse_dtype(w)?;
            let mut maps = Vec::new();
            let mut operands = Vec::new();
            while w.words.get(w.pos).is_some_and(|t| t.starts_with('%')) {
                let (n, m) = operand_with_list(w)?;
                operands.push(n);
                maps.push(m);
            }
            (Op::Map { func, maps, compute }, operands)
        }
        "contract" => {
            let mut labels = Vec::new();
            let mut operands = Vec::new();
            while w.words.get(w.pos).is_some_and(|t| t.starts_with('%')) {
                let (n, l) = operand_with_list(w)?;
                operands.push(n);
                labels.push(l);
            }
            w.expect("->")?;
            let t = w.next()?;
            (Op::Contract { labels, output: parse_list(w, t)? }, operands)
        }
        "reduce" => {
            let name = w.next()?;
            let op = lookup(w, REDUCTIONS, name)?;
            let t = w.next()?;
            let axes = parse_list(w, t)?;
            (Op::Reduce { op, axes }, single(w)?)
        }
        "along" => {
            let name = w.next()?;
            let func = lookup(w, ALONG, name)?;
            let axis = w.number()?;
            (Op::Along { func, axis }, single(w)?)
        }
        "reshape" => (Op::Reshape, single(w)?),
        "rename" => (Op::Rename, single(w)?),
        "permute" => {
            let t = w.next()?;
            let perm = parse_list(w, t)?;
            (Op::Permute { perm }, single(w)?)
        }
        "expand" => {
            let t = w.next()?;
            let map = parse_list(w, t)?;
            (Op::Expand { map }, single(w)?)
        }
        "select" => {
            let (axis, index, count) = (w.number()?, w.number()?, w.number()?);
            (Op::Select { axis, index, count }, single(w)?)
        }
        "slice" => {
            let axis = w.number()?;
            let t = w.next()?;
            let start = parse_size(w, t)?;
            let step = w.number()?;
            (Op::Slice { axis, start, step }, single(w)?)
        }
        "concat" => {
            let axis = w.number()?;
            let mut operands = Vec::new();
            while w.words.get(w.pos).is_some_and(|t| t.starts_with('%')) {
                operands.extend(single(w)?);
            }
            (Op::Concat { axis }, operands)
        }
        "take" | "scatter_add" => {
            let axis = w.number()?;
            let mut operands = single(w)?;
            operands.extend(single(w)?);
            // A scatter's optional base.
            if kind == "scatter_add" && w.words.get(w.pos).is_some_and(|t| t.starts_with('%')) {
                operands.extend(single(w)?);
            }
            (if kind == "take" { Op::Take { axis } } else { Op::ScatterAdd { axis } }, operands)
        }
        "scan" | "arg" => {
            let name = w.next()?;
            let op = lookup(w, REDUCTIONS, name)?;
            let axis = w.number()?;
            let node = if kind == "scan" { Op::Scan { op, axis } } else { Op::ArgReduce { op, axis } };
            (node, single(w)?)
        }
        "construct" => {
            let name = w.next()?;
            let func = lookup(w, CONSTRUCTORS, name)?;
            let operands = if w.words.get(w.pos).is_some_and(|t| t.starts_with('%')) { single(w)? } else { Vec::new() };
            (Op::Construct { func }, operands)
        }
        "exchange" => {
            let exchange = match w.next()? {
                "all_reduce" => {
                    let name = w.next()?;
                    let op = ReduceOp::parse(name).ok_or_else(|| w.err(format!("unknown reduction `{name}`")))?;
                    Exchange::AllReduce { op, mesh_axis: w.number()? }
                }
                "reduce_scatter" => {
                    let name = w.next()?;
                    let op = ReduceOp::parse(name).ok_or_else(|| w.err(format!("unknown reduction `{name}`")))?;
                    let axis = w.number()?;
                    Exchange::ReduceScatter { op, axis, split: Split { mesh_axis: w.number()?, parts: w.number()?, outer: w.number()? } }
                }
                kind @ ("all_gather" | "block") => {
                    let axis = w.number()?;
                    let split = Split { mesh_axis: w.number()?, parts: w.number()?, outer: w.number()? };
                    if kind == "block" { Exchange::Block { axis, split } } else { Exchange::AllGather { axis, split } }
                }
                other => return Err(w.err(format!("unknown exchange `{other}`"))),
            };
            (Op::Exchange(exchange), single(w)?)
        }
        other => return Err(w.err(format!("unknown operation `{other}`"))),
    })
}

/// An exchange's words: `all_reduce sum MESH_AXIS`, `all_gather AXIS
/// MESH_AXIS PARTS OUTER`, `block AXIS MESH_AXIS PARTS OUTER`,
/// `reduce_scatter sum AXIS MESH_AXIS PARTS OUTER`.
pub fn exchange_text(exchange: &Exchange) -> String {
    match exchange {
        Exchange::AllReduce { op, mesh_axis } => format!("all_reduce {} {mesh_axis}", op.name()),
        Exchange::AllGather { axis, split } => format!("all_gather {axis} {} {} {}", split.mesh_axis, split.parts, split.outer),
        Exchange::Block { axis, split } => format!("block {axis} {} {} {}", split.mesh_axis, split.parts, split.outer),
        Exchange::ReduceScatter { op, axis, split } => format!("reduce_scatter {} {axis} {} {} {}", op.name(), split.mesh_axis, split.parts, split.outer),
    }
}
