//! The kernel IR's text form, for `nax build --emit kernels` and file
//! tests; it parses back to the same text.
//!
//! ```text
//! program f
//! buffer %0 f32[4 3] input 0
//! buffer %1 f32[1 3] input 1
//! buffer %2 f32[4 3] temporary
//! kernel %2 loops [4 parallel, 3 vector] store add(f32, load %0[i0 i1], load %1[_ i1])
//! result %2
//! ```
//!
//! A load's indices are loops (`i1`), fixed positions (`2`), or `_` for a
//! size-1 axis read at 0 (a broadcast). A kernel's schedule, when not the
//! plain one, follows its loops: `order [i0 i2 i1]`, `tile 128x16` (with a transposed read staged
//! through a scratch tile: `transpose %0[i1 i0] by 16`, the buffer, its index and the lanes of a block,
//! then `stream 16` where a store's results leave in streaming stores of 16 lanes, and `ahead 3072` where it asks for its operands 3072 bytes ahead),
//! `columns 64`, `flat 2` (flat parallel loops: a GPU's, a CPU's softmax rows), `prefetch 1` (rows ahead, in a kernel with row reductions), `gemm [BATCH] ROWS COLS INNER`
//! (loops, `_` for none; an epilogue follows as `then EXPR;`), `flash [BATCH] ROWS COLS 64x128 %S %A %M`
//! (an attention's loops, tiles and tile buffers). Row reductions come next, each ending in `;`
//! (`row mean f32 load %0[i0 i1];`), and the body reads them as `row0`, ...
//! An attention's body is `attention KEYS LOGIT [where VISIBLE] by VALUE`;
//! a scatter-add's `scatter AXIS [from INIT] at POSITION add VALUE`.
//! The products' microkernels come before the kernels, one line per dtype:
//! `microkernel f32 6x16 lanes 8 block 256x680x2048` (rows x columns of
//! its tile, lanes per vector, and the blocking: depth x rows x columns).

use crate::kernel::{Body, BufferKind, Expr, Index, Program, Role};
use nax_ir::Literal;
use nax_ir::text::{along_name, map_fn_name, print_symbols, reduction_name, size_text};
use std::fmt::Write;

fn index_text(i: Index) -> String {
    match i {
        Index::Loop(l) => format!("i{l}"),
        Index::Const(c) => c.to_string(),
        Index::Zero => "_".to_string(),
    }
}

/// A buffer read at an index: `%0[i1 i0]`.
fn access_text(buffer: usize, index: &[Index]) -> String {
    let idx: Vec<String> = index.iter().map(|&i| index_text(i)).collect();
    format!("%{buffer}[{}]", idx.join(" "))
}

fn expr_text(e: &Expr) -> String {
    match e {
        Expr::Load { buffer, index } => format!("load {}", access_text(*buffer, index)),
        Expr::Literal(Literal::Int(v)) => v.to_string(),
        Expr::Literal(Literal::Float(v)) => format!("{v:?}"),
        Expr::Literal(Literal::Bool(v)) => v.to_string(),
        Expr::Size(s) => format!("size {}", size_text(*s)),
        Expr::LoopIndex(l) => format!("i{l}"),
        Expr::Apply { func, compute, args } => {
            let args: Vec<String> = args.iter().map(expr_text).collect();
            format!("{}({}, {})", map_fn_name(*func), compute.as_str(), args.join(", "))
        }
        Expr::Row(r) => format!("row{r}"),
        Expr::Gather { buffer, index, computed } => {
            let at: String = computed.iter().map(|(a, e)| format!(" at {a} {}", expr_text(e))).collect();
            format!("gather {}{at} ;", access_text(*buffer, index))
        }
    }
}

/// Prints a program in its text form.
pub fn print(p: &Program) -> String {
    let mut out = format!("program {}\n", p.name);
    print_symbols(&p.symbols, &mut out);
    for (size, index) in &p.size_arguments {
        let _ = writeln!(out, "size_argument {} input {index}", size_text(*size));
    }
    for (i, b) in p.buffers.iter().enumerate() {
        let shape: Vec<String> = b.shape.iter().map(|&s| size_text(s)).collect();
        let kind = match &b.kind {
            BufferKind::Input(k) => format!("input {k}"),
            BufferKind::Weight(w) => format!("weight {w:?}"),
            BufferKind::Temporary => "temporary".to_string(),
            BufferKind::Alias(a) => format!("alias %{a}"),
            BufferKind::Tile => "tile".to_string(),
            BufferKind::Fault => "fault".to_string(),
        };
        let _ = writeln!(out, "buffer %{i} {}[{}] {kind}", b.dtype.as_str(), shape.join(" "));
    }
    for k in &p.products {
        let (m, b) = (k.micro, k.blocking);
        let _ = writeln!(out, "microkernel {} {}x{} lanes {} block {}x{}x{}", m.dtype.as_str(), m.rows, m.cols, m.lanes, b.depth, b.rows, b.cols);
    }
    for k in &p.kernels {
        let loops: Vec<String> = k.loops.iter().map(|l| format!("{} {}", size_text(l.extent), l.role.name())).collect();
        let body = match &k.body {
            Body::Store(e) => format!("store {}", expr_text(e)),
            Body::Reduce { op, value } => format!("reduce {} {}", reduction_name(*op), expr_text(value)),
            Body::Along { func, axis, value } => format!("along {} i{axis} {}", along_name(*func), expr_text(value)),
            Body::Attention { keys, logit, visible, value } => {
                let visible = visible.as_ref().map_or(String::new(), |v| format!(" where {}", expr_text(v)));
                format!("attention i{keys} {}{visible} by {}", expr_text(logit), expr_text(value))
            }
            Body::Scatter { axis, init, position, value } => {
                let init = init.as_ref().map_or(String::new(), |e| format!(" from {}", expr_text(e)));
                format!("scatter i{axis}{init} at {} add {}", expr_text(position), expr_text(value))
            }
        };
        let mut schedule = String::new();
        if !k.schedule.order.is_empty() {
            let order: Vec<String> = k.schedule.order.iter().map(|l| format!("i{l}")).collect();
            let _ = write!(schedule, " order [{}]", order.join(" "));
        }
        if let Some((outer, inner)) = k.schedule.tile {
            let _ = write!(schedule, " tile {outer}x{inner}");
        }
        if let Some(t) = &k.schedule.transpose {
            let _ = write!(schedule, " transpose {} by {}", access_text(t.buffer, &t.index), t.lanes);
        }
        if let Some(lanes) = k.schedule.stream {
            let _ = write!(schedule, " stream {lanes}");
        }
        if let Some(bytes) = k.schedule.stream_ahead {
            let _ = write!(schedule, " ahead {bytes}");
        }
        if let Some(c) = k.schedule.columns {
            let _ = write!(schedule, " columns {c}");
        }
        if k.schedule.flat > 0 {
            let _ = write!(schedule, " flat {}", k.schedule.flat);
        }
        if let Some(rows) = k.schedule.prefetch {
            let _ = write!(schedule, " prefetch {rows}");
        }
        if let Some(g) = &k.schedule.gemm {
            let batch: Vec<String> = g.batch.iter().map(|l| format!("i{l}")).collect();
            let optional = |l: Option<usize>| l.map_or("_".to_string(), |l| format!("i{l}"));
            let _ = write!(schedule, " gemm [{}] {} {} i{}", batch.join(" "), optional(g.rows), optional(g.cols), g.inner);
            if let Some(e) = &g.epilogue {
                let _ = write!(schedule, " then {};", expr_text(e));
            }
        }
        if let Some(a) = &k.schedule.attention {
            let batch: Vec<String> = a.batch.iter().map(|l| format!("i{l}")).collect();
            let _ = write!(
                schedule,
                " flash [{}] i{} i{} {}x{} %{} %{} %{}",
                batch.join(" "),
                a.rows,
                a.cols,
                a.tile.0,
                a.tile.1,
                a.scratch[0],
                a.scratch[1],
                a.scratch[2]
            );
        }
        let checks: String = k.checks.iter().map(|c| format!(" check %{} {} {:?};", c.buffer, size_text(c.bound), c.axis)).collect();
        let rows: String = k.rows.iter().map(|r| format!(" row {} {} {};", reduction_name(r.op), r.dtype.as_str(), expr_text(&r.value))).collect();
        let _ = writeln!(out, "kernel %{} loops [{}]{schedule}{checks}{rows} {body}", k.output, loops.join(", "));
    }
    let results: Vec<String> = p.results.iter().map(|r| format!("%{r}")).collect();
    let _ = writeln!(out, "result {}", results.join(" "));
    out
}

/// A syntax error in a kernel program's text form.
pub type ParseError = nax_ir::text::ParseError;

/// A cursor over one line of kernel text.
struct Cursor<'a> {
    rest: &'a str,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError { line: self.line, message: message.into() }
    }

    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_space();
        match self.rest.strip_prefix(s) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), ParseError> {
        if self.eat(s) { Ok(()) } else { Err(self.err(format!("expected `{s}` at `{}`", self.rest))) }
    }

    /// A string in double quotes (without escapes).
    fn quoted(&mut self) -> Result<String, ParseError> {
        self.expect("\"")?;
        let end = self.rest.find('"').ok_or_else(|| self.err("an unterminated string"))?;
        let (w, r) = self.rest.split_at(end);
        self.rest = &r[1..];
        Ok(w.to_string())
    }

    /// A word: up to a space, a comma, a bracket or a parenthesis.
    fn word(&mut self) -> Result<&'a str, ParseError> {
        self.skip_space();
        let end = self.rest.find(|c: char| c.is_whitespace() || ",[]()".contains(c)).unwrap_or(self.rest.len());
        if end == 0 {
            return Err(self.err(format!("expected a word at `{}`", self.rest)));
        }
        let (w, r) = self.rest.split_at(end);
        self.rest = r;
        Ok(w)
    }

    fn number<T: std::str::FromStr>(&mut self) -> Result<T, ParseError> {
        let w = self.word()?;
        w.parse().map_err(|_| self.err(format!("`{w}` is not a number")))
    }

    /// `%N`.
    fn reference(&mut self) -> Result<usize, ParseError> {
        self.expect("%")?;
        self.number()
    }

    fn loop_index(&mut self) -> Result<usize, ParseError> {
        let w = self.word()?;
        w.strip_prefix('i').and_then(|n| n.parse().ok()).ok_or_else(|| self.err(format!("expected a loop `iN`, found `{w}`")))
    }

    /// `%N[INDEX ...]`.
    fn access(&mut self) -> Result<(usize, Vec<Index>), ParseError> {
        let buffer = self.reference()?;
        self.expect("[")?;
        let mut index = Vec::new();
        while !self.eat("]") {
            let w = self.word()?;
            index.push(match w.strip_prefix('i') {
                Some(n) => Index::Loop(n.parse().map_err(|_| self.err(format!("bad index `{w}`")))?),
                None if w == "_" => Index::Zero,
                None => Index::Const(w.parse().map_err(|_| self.err(format!("bad index `{w}`")))?),
            });
        }
        Ok((buffer, index))
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.skip_space();
        if self.eat("load") {
            let (buffer, index) = self.access()?;
            return Ok(Expr::Load { buffer, index });
        }
        if self.eat("gather") {
            let (buffer, index) = self.access()?;
            let mut computed = Vec::new();
            while self.eat("at") {
                let axis = self.number()?;
                computed.push((axis, self.expr()?));
            }
            self.expect(";")?;
            return Ok(Expr::Gather { buffer, index, computed });
        }
        let w = self.word()?;
        if w == "size" {
            let s = self.word()?;
            return Ok(Expr::Size(nax_ir::text::parse_size_text(s, self.line)?));
        }
        if self.eat("(") {
            let func = nax_ir::text::map_fn_named(w).ok_or_else(|| self.err(format!("unknown function `{w}`")))?;
            let compute = nax_ir::text::parse_dtype_text(self.word()?, self.line)?;
            let mut args = Vec::new();
            while self.eat(",") {
                args.push(self.expr()?);
            }
            self.expect(")")?;
            return Ok(Expr::Apply { func, compute, args });
        }
        Ok(match w {
            _ if w.strip_prefix("row").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())) => {
                Expr::Row(w[3..].parse().map_err(|_| self.err("bad row"))?)
            }
            "true" => Expr::Literal(Literal::Bool(true)),
            "false" => Expr::Literal(Literal::Bool(false)),
            _ if w.starts_with('i') && w[1..].chars().all(|c| c.is_ascii_digit()) => Expr::LoopIndex(w[1..].parse().map_err(|_| self.err("bad loop"))?),
            _ if w.contains(['.', 'e', 'E', 'n', 'N']) => Expr::Literal(Literal::Float(w.parse().map_err(|_| self.err(format!("bad number `{w}`")))?)),
            _ => Expr::Literal(Literal::Int(w.parse().map_err(|_| self.err(format!("bad number `{w}`")))?)),
        })
    }
}

/// A tile's edges, `AxB`.
fn tile_edges(c: &mut Cursor) -> Result<(u64, u64), ParseError> {
    let w = c.word()?;
    let edges = w.split_once('x').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    edges.ok_or_else(|| c.err(format!("expected a tile `OUTERxINNER`, found `{w}`")))
}

fn role_named(w: &str) -> Option<Role> {
    [Role::Parallel, Role::Serial, Role::Vector, Role::ParallelVector, Role::Reduce].into_iter().find(|&r| r.name() == w)
}

/// Parses a program's text form back.
pub fn parse(text: &str) -> Result<Program, ParseError> {
    let mut header = nax_ir::text::Header::default();
    let mut p = Program {
        name: String::new(),
        buffers: Vec::new(),
        kernels: Vec::new(),
        results: Vec::new(),
        symbols: Default::default(),
        size_arguments: Vec::new(),
        products: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || header.line(line, i + 1)? {
            continue;
        }
        let mut c = Cursor { rest: line, line: i + 1 };
        match c.word()? {
            "program" => p.name = c.word()?.to_string(),
            "buffer" => {
                let index = c.reference()?;
                if index != p.buffers.len() {
                    return Err(c.err(format!("buffer %{index} out of order")));
                }
                let dtype = nax_ir::text::parse_dtype_text(c.word()?, c.line)?;
                c.expect("[")?;
                let mut shape = Vec::new();
                while !c.eat("]") {
                    shape.push(nax_ir::text::parse_size_text(c.word()?, c.line)?);
                }
                let kind = match c.word()? {
                    "input" => BufferKind::Input(c.number()?),
                    "weight" => {
                        let w = c.word()?;
                        BufferKind::Weight(w.trim_matches('"').to_string())
                    }
                    "temporary" => BufferKind::Temporary,
                    "alias" => BufferKind::Alias(c.reference()?),
                    "tile" => BufferKind::Tile,
                    "fault" => BufferKind::Fault,
                    other => return Err(c.err(format!("unknown buffer kind `{other}`"))),
                };
                p.buffers.push(crate::kernel::Buffer { dtype, shape, kind });
            }
            "microkernel" => {
                let dtype = nax_ir::text::parse_dtype_text(c.word()?, c.line)?;
                let (rows, cols) = tile_edges(&mut c)?;
                c.expect("lanes")?;
                let lanes = c.number()?;
                c.expect("block")?;
                let w = c.word()?;
                let edges: Option<Vec<u32>> = w.split('x').map(|n| n.parse().ok()).collect();
                let Some(&[depth, block_rows, block_cols]) = edges.as_deref() else {
                    return Err(c.err(format!("expected a blocking `DEPTHxROWSxCOLS`, found `{w}`")));
                };
                let number = |x: u64| u32::try_from(x).map_err(|_| c.err(format!("the microkernel edge {x} is too large")));
                p.products.push(crate::ProductKernel {
                    micro: nax_contract::plan::Microkernel { dtype, rows: number(rows)?, cols: number(cols)?, lanes },
                    blocking: nax_contract::plan::Blocking { depth, rows: block_rows, cols: block_cols },
                });
            }
            "kernel" => {
                let output = c.reference()?;
                c.expect("loops")?;
                c.expect("[")?;
                let mut loops = Vec::new();
                while !c.eat("]") {
                    c.eat(",");
                    let extent = nax_ir::text::parse_size_text(c.word()?, c.line)?;
                    let role = c.word()?;
                    let role = role_named(role).ok_or_else(|| c.err(format!("unknown loop role `{role}`")))?;
                    loops.push(crate::kernel::Loop { extent, role });
                }
                let mut schedule = crate::kernel::Schedule::default();
                if c.eat("order") {
                    c.expect("[")?;
                    while !c.eat("]") {
                        schedule.order.push(c.loop_index()?);
                    }
                }
                if c.eat("tile") {
                    schedule.tile = Some(tile_edges(&mut c)?);
                }
                if c.eat("transpose") {
                    let (buffer, index) = c.access()?;
                    c.expect("by")?;
                    schedule.transpose = Some(crate::kernel::Transpose { buffer, index, lanes: c.number()? });
                }
                if c.eat("stream") {
                    schedule.stream = Some(c.number()?);
                }
                if c.eat("ahead") {
                    schedule.stream_ahead = Some(c.number()?);
                }
                if c.eat("columns") {
                    schedule.columns = Some(c.number()?);
                }
                if c.eat("flat") {
                    schedule.flat = c.number()?;
                }
                if c.eat("prefetch") {
                    schedule.prefetch = Some(c.number()?);
                }
                if c.eat("gemm") {
                    c.expect("[")?;
                    let mut batch = Vec::new();
                    while !c.eat("]") {
                        batch.push(c.loop_index()?);
                    }
                    let optional = |c: &mut Cursor| if c.eat("_") { Ok(None) } else { c.loop_index().map(Some) };
                    let rows = optional(&mut c)?;
                    let cols = optional(&mut c)?;
                    let inner = c.loop_index()?;
                    let epilogue = if c.eat("then") {
                        let e = c.expr()?;
                        c.expect(";")?;
                        Some(e)
                    } else {
                        None
                    };
                    schedule.gemm = Some(crate::kernel::GemmLoops { batch, rows, cols, inner, epilogue });
                }
                if c.eat("flash") {
                    c.expect("[")?;
                    let mut batch = Vec::new();
                    while !c.eat("]") {
                        batch.push(c.loop_index()?);
                    }
                    let (rows, cols) = (c.loop_index()?, c.loop_index()?);
                    let tile = tile_edges(&mut c)?;
                    let scratch = [c.reference()?, c.reference()?, c.reference()?];
                    schedule.attention = Some(crate::kernel::AttentionLoops { batch, rows, cols, tile, scratch });
                }
                let mut checks = Vec::new();
                while c.eat("check ") {
                    let buffer = c.reference()?;
                    let bound = nax_ir::text::parse_size_text(c.word()?, c.line)?;
                    let axis = c.quoted()?;
                    c.expect(";")?;
                    checks.push(crate::kernel::IndexCheck { buffer, bound, axis });
                }
                let mut rows = Vec::new();
                while c.eat("row ") {
                    let w = c.word()?;
                    let op = nax_ir::text::reduction_named(w).ok_or_else(|| c.err(format!("unknown reduction `{w}`")))?;
                    let dtype = nax_ir::text::parse_dtype_text(c.word()?, c.line)?;
                    rows.push(crate::kernel::RowReduction { op, dtype, value: c.expr()? });
                    c.expect(";")?;
                }
                let body = match c.word()? {
                    "store" => Body::Store(c.expr()?),
                    "reduce" => {
                        let w = c.word()?;
                        let op = nax_ir::text::reduction_named(w).ok_or_else(|| c.err(format!("unknown reduction `{w}`")))?;
                        Body::Reduce { op, value: c.expr()? }
                    }
                    "along" => {
                        let w = c.word()?;
                        let func = nax_ir::text::along_named(w).ok_or_else(|| c.err(format!("unknown operation `{w}`")))?;
                        let axis = c.loop_index()?;
                        Body::Along { func, axis, value: c.expr()? }
                    }
                    "attention" => {
                        let keys = c.loop_index()?;
                        let logit = c.expr()?;
                        let visible = if c.eat("where") { Some(c.expr()?) } else { None };
                        c.expect("by")?;
                        Body::Attention { keys, logit, visible, value: c.expr()? }
                    }
                    "scatter" => {
                        let axis = c.loop_index()?;
                        let init = if c.eat("from") { Some(c.expr()?) } else { None };
                        c.expect("at")?;
                        let position = c.expr()?;
                        c.expect("add")?;
                        Body::Scatter { axis, init, position, value: c.expr()? }
                    }
                    other => return Err(c.err(format!("unknown kernel body `{other}`"))),
                };
                c.skip_space();
                if !c.rest.is_empty() {
                    return Err(c.err(format!("unexpected `{}`", c.rest)));
                }
                p.kernels.push(crate::kernel::Kernel { output, loops, rows, body, schedule, checks });
            }
            "result" => loop {
                c.skip_space();
                if c.rest.is_empty() {
                    break;
                }
                p.results.push(c.reference()?);
            },
            other => return Err(c.err(format!("unknown line `{other}`"))),
        }
    }
    p.symbols = header.symbols;
    p.size_arguments = header.size_arguments;
    if p.results.is_empty() || p.results.iter().any(|&r| r >= p.buffers.len()) || p.kernels.iter().any(|k| k.output >= p.buffers.len()) {
        return Err(ParseError { line: text.lines().count(), message: "a kernel or the result names a buffer that does not exist".into() });
    }
    Ok(p)
}
