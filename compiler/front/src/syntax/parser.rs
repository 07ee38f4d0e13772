//! The parser: tokens to the syntax tree (LANGUAGE.md sections 2 and 3).
//!
//! Recursive descent with precedence climbing. Errors are E0101 diagnostics;
//! after one, the parser skips to the end of the statement or declaration and
//! goes on, so every independent syntax error of a file is reported. A
//! missing `)` does not cascade: newlines are insignificant inside brackets,
//! so when the token that breaks an expression begins a line, parsing resumes
//! right there. Nesting deeper than [`MAX_DEPTH`] is an E0101, never a stack
//! overflow.

use super::ast::*;
use super::lexer::{Token, TokenKind, lex};
use crate::diagnostics::{Code, Diagnostic, Span};

/// How deep expressions, types and patterns may nest (parentheses, unary
/// operators and operator chains all count). Keeps every recursive pass over
/// the tree within a small stack.
pub const MAX_DEPTH: usize = 512;

/// Runs a recursive step on a grown stack when little is left, so nesting up
/// to [`MAX_DEPTH`] never overflows, whatever thread the parser (or any later
/// recursive pass over the tree) runs on.
pub fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, f)
}

/// Parses a whole file. Syntax errors go to `diags`; the returned module holds
/// every declaration that parsed.
pub fn parse(source: &str, diags: &mut Vec<Diagnostic>) -> Module {
    let tokens = lex(source, diags);
    let mut parser = Parser { tokens, pos: 0, open_brackets: Vec::new(), depth: 0, diags };
    parser.module()
}

/// The built-ins whose second argument is a pattern `inputs -> output`.
fn takes_pattern(callee: &str) -> bool {
    matches!(callee, "rearrange" | "reduce" | "repeat" | "split")
}

/// Marker for "an error was reported; recover".
struct Failed;

type PResult<T> = Result<T, Failed>;

struct Parser<'d> {
    tokens: Vec<Token>,
    pos: usize,
    /// The open `(` and `[` and where they are: newlines are skipped while any is open.
    open_brackets: Vec<(char, Span)>,
    /// Current nesting, bounded by MAX_DEPTH.
    depth: usize,
    diags: &'d mut Vec<Diagnostic>,
}

impl Parser<'_> {
    // ---- token access -------------------------------------------------

    fn skip_insignificant_newlines(&mut self) {
        if !self.open_brackets.is_empty() {
            while self.tokens[self.pos].kind == TokenKind::Newline {
                self.pos += 1;
            }
        }
    }

    fn peek(&mut self) -> &TokenKind {
        self.skip_insignificant_newlines();
        &self.tokens[self.pos].kind
    }

    fn peek_at(&mut self, ahead: usize) -> &TokenKind {
        self.skip_insignificant_newlines();
        let mut i = self.pos;
        let mut left = ahead;
        while left > 0 && i + 1 < self.tokens.len() {
            i += 1;
            if !self.open_brackets.is_empty() {
                while i + 1 < self.tokens.len() && self.tokens[i].kind == TokenKind::Newline {
                    i += 1;
                }
            }
            left -= 1;
        }
        &self.tokens[i].kind
    }

    fn span(&mut self) -> Span {
        self.skip_insignificant_newlines();
        self.tokens[self.pos].span
    }

    fn prev_end(&self) -> usize {
        if self.pos == 0 { 0 } else { self.tokens[self.pos - 1].span.end }
    }

    fn bump(&mut self) -> Token {
        self.skip_insignificant_newlines();
        let tok = self.tokens[self.pos].clone();
        if tok.kind != TokenKind::Eof {
            self.pos += 1;
        }
        match tok.kind {
            TokenKind::LParen => self.open_brackets.push(('(', tok.span)),
            TokenKind::LBracket => self.open_brackets.push(('[', tok.span)),
            TokenKind::RParen | TokenKind::RBracket => {
                self.open_brackets.pop();
            }
            _ => {}
        }
        tok
    }

    fn at(&mut self, kind: &TokenKind) -> bool {
        self.peek() == kind
    }

    fn eat(&mut self, kind: &TokenKind) -> bool {
        if self.at(kind) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn error_here(&mut self, expected: &str) -> Failed {
        let span = self.span();
        let found = self.tokens[self.pos].kind.describe();
        // A bracket left open makes the next line part of the statement: blame the bracket.
        if let Some(&(bracket, open)) = self.open_brackets.last()
            && self.starts_line(self.pos)
        {
            self.diags.push(
                Diagnostic::new(Code::E0101, open, format!("syntax error: this `{bracket}` is never closed"))
                    .primary("unclosed bracket")
                    .label(span, format!("expected {expected} before this {found}")),
            );
            return Failed;
        }
        self.diags
            .push(Diagnostic::new(Code::E0101, span, format!("syntax error: expected {expected}, found {found}")).primary(format!("expected {expected}")));
        Failed
    }

    fn expect(&mut self, kind: TokenKind, expected: &str) -> PResult<Span> {
        if self.at(&kind) { Ok(self.bump().span) } else { Err(self.error_here(expected)) }
    }

    fn ident(&mut self, expected: &str) -> PResult<Ident> {
        if let TokenKind::Ident(name) = self.peek().clone() {
            let span = self.bump().span;
            Ok(Ident { name, span })
        } else {
            Err(self.error_here(expected))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.span();
            self.diags.push(
                Diagnostic::new(Code::E0101, span, format!("syntax error: expression nested more than {MAX_DEPTH} levels deep"))
                    .primary("nested too deeply")
                    .note("split the expression into several statements"),
            );
            return Err(Failed);
        }
        Ok(())
    }

    /// Whether the token at `pos` is the first on its line.
    fn starts_line(&self, pos: usize) -> bool {
        pos == 0 || self.tokens[pos - 1].kind == TokenKind::Newline
    }

    fn at_line_start_keyword(&self) -> bool {
        let t = &self.tokens[self.pos].kind;
        matches!(t, TokenKind::Def | TokenKind::Dim | TokenKind::Param) && self.starts_line(self.pos)
    }

    /// After an error inside a statement that began at token `stmt_start`:
    /// resume at the first token of a later line, or at `}` or the end.
    fn recover_statement(&mut self, stmt_start: usize) {
        self.open_brackets.clear();
        self.depth = 0;
        if self.pos > stmt_start && self.starts_line(self.pos) {
            return;
        }
        loop {
            match self.tokens[self.pos].kind {
                TokenKind::Newline => {
                    self.pos += 1;
                    return;
                }
                TokenKind::RBrace | TokenKind::Eof => return,
                _ => self.pos += 1,
            }
        }
    }

    /// After an error in a declaration header: skip to the next line that starts a declaration.
    fn recover_item(&mut self) {
        self.open_brackets.clear();
        self.depth = 0;
        loop {
            match self.tokens[self.pos].kind {
                TokenKind::Eof => return,
                TokenKind::Def | TokenKind::Dim | TokenKind::Param if self.starts_line(self.pos) => return,
                _ => self.pos += 1,
            }
        }
    }

    fn skip_newlines(&mut self) {
        while self.tokens[self.pos].kind == TokenKind::Newline {
            self.pos += 1;
        }
    }

    /// Requires the end of a line (or of the file, or a `}`) after a statement or declaration.
    fn end_of_line(&mut self) -> PResult<()> {
        match self.tokens[self.pos].kind {
            TokenKind::Newline => {
                self.pos += 1;
                Ok(())
            }
            TokenKind::Eof | TokenKind::RBrace => Ok(()),
            _ => Err(self.error_here("end of line")),
        }
    }

    // ---- declarations ---------------------------------------------------

    fn module(&mut self) -> Module {
        let mut items = Vec::new();
        loop {
            self.skip_newlines();
            let start = self.pos;
            let item = match self.tokens[self.pos].kind {
                TokenKind::Eof => break,
                TokenKind::Dim => self.dim_decl().map(Item::Dim),
                TokenKind::Param => self.param_decl().map(Item::Param),
                TokenKind::Def => self.fn_def().map(Item::Def),
                _ => Err(self.error_here("`dim`, `param` or `def`")),
            };
            match item {
                Ok(item) => items.push(item),
                Err(Failed) => {
                    if self.pos == start {
                        self.pos += 1;
                    }
                    self.recover_item();
                }
            }
        }
        Module { items }
    }

    fn dim_decl(&mut self) -> PResult<DimDecl> {
        let start = self.bump().span;
        let name = self.ident("a dim name")?;
        let value = match self.tokens[self.pos].kind {
            TokenKind::Eq => {
                self.bump();
                Some(self.dim_expr()?)
            }
            TokenKind::Newline | TokenKind::Eof => None,
            _ => return Err(self.error_here("`=` or end of line")),
        };
        let span = start.to(Span::new(start.start, self.prev_end()));
        self.end_of_line()?;
        Ok(DimDecl { name, value, span })
    }

    fn dim_expr(&mut self) -> PResult<DimExpr> {
        self.dim_binary(0)
    }

    /// `+ -` (precedence 0) and `* /` (precedence 1), left-associative.
    fn dim_binary(&mut self, min_prec: u8) -> PResult<DimExpr> {
        let saved = self.depth;
        let mut lhs = self.dim_atom()?;
        loop {
            let (op, prec) = match self.peek() {
                TokenKind::Plus => (DimOp::Add, 0),
                TokenKind::Minus => (DimOp::Sub, 0),
                TokenKind::Star => (DimOp::Mul, 1),
                TokenKind::Slash => (DimOp::Div, 1),
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            self.enter()?;
            self.bump();
            let rhs = with_stack(|| self.dim_binary(prec + 1))?;
            let span = lhs.span().to(rhs.span());
            lhs = DimExpr::Binary(Box::new(lhs), op, Box::new(rhs), span);
        }
        self.depth = saved;
        Ok(lhs)
    }

    fn dim_atom(&mut self) -> PResult<DimExpr> {
        match self.peek().clone() {
            TokenKind::Int(n) => Ok(DimExpr::Number(n, self.bump().span)),
            TokenKind::Ident(name) => {
                let span = self.bump().span;
                Ok(DimExpr::Name(Ident { name, span }))
            }
            TokenKind::LParen => {
                self.enter()?;
                self.bump();
                let inner = with_stack(|| self.dim_expr())?;
                self.expect(TokenKind::RParen, "`)`")?;
                self.depth -= 1;
                Ok(inner)
            }
            _ => Err(self.error_here("an integer expression of dims")),
        }
    }

    fn param_decl(&mut self) -> PResult<ParamDecl> {
        let start = self.bump().span;
        let name = self.ident("a weight name")?;
        self.expect(TokenKind::Colon, "`:`")?;
        let ty = self.type_expr()?;
        let span = start.to(ty.span);
        self.end_of_line()?;
        Ok(ParamDecl { name, ty, span })
    }

    fn fn_def(&mut self) -> PResult<FnDef> {
        let start = self.bump().span;
        let name = self.ident("a function name")?;
        self.expect(TokenKind::LParen, "`(`")?;
        let mut params = Vec::new();
        while !self.at(&TokenKind::RParen) {
            let pname = self.ident("a parameter name or `)`")?;
            self.expect(TokenKind::Colon, "`:`")?;
            let ty = self.type_ref()?;
            let default = if self.eat(&TokenKind::Eq) { Some(self.expr()?) } else { None };
            params.push(FnParam { name: pname, ty, default });
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        self.expect(TokenKind::RParen, "`,` or `)`")?;
        self.expect(TokenKind::Arrow, "`->` and the result type")?;
        let results = self.results()?;
        self.expect(TokenKind::LBrace, "`{`")?;
        let body = self.block(Some(&name))?;
        let span = start.to(Span::new(start.start, self.prev_end()));
        Ok(FnDef { name, params, results, body, span })
    }

    /// `TYPE` or `(NAME: TYPE, ...)`.
    fn results(&mut self) -> PResult<Results> {
        if !self.at(&TokenKind::LParen) {
            return Ok(Results::One(self.type_ref()?));
        }
        let open = self.bump().span;
        let mut results = Vec::new();
        while !self.at(&TokenKind::RParen) {
            let name = self.ident("a result name or `)`")?;
            self.expect(TokenKind::Colon, "`:` and the result's type")?;
            let ty = self.type_ref()?;
            results.push(NamedResult { name, ty });
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        let close = self.expect(TokenKind::RParen, "`,` or `)`")?;
        Ok(Results::Named { results, span: open.to(close) })
    }

    /// The statements of a function body (`function` is its name) or of a
    /// loop's body (`None`), up to and including its `}`.
    fn block(&mut self, function: Option<&Ident>) -> PResult<Vec<Stmt>> {
        let mut body: Vec<Stmt> = Vec::new();
        let mut reported_after_end = false;
        let what = if function.is_some() { "the function" } else { "the loop" };
        loop {
            self.skip_newlines();
            match self.tokens[self.pos].kind {
                TokenKind::RBrace => {
                    let close = self.bump().span;
                    if let Some(fn_name) = function
                        && !matches!(body.last(), Some(Stmt::Return { .. }))
                        && !reported_after_end
                    {
                        self.diags.push(
                            Diagnostic::new(Code::E0101, close, format!("syntax error: function `{}` does not end with `return`", fn_name.name))
                                .primary("expected `return` before this")
                                .label(fn_name.span, "function declared here"),
                        );
                    }
                    return Ok(body);
                }
                TokenKind::Eof => {
                    return Err(self.error_here(&format!("`}}` to close the body of {what}")));
                }
                _ if self.at_line_start_keyword() => {
                    return Err(self.error_here(&format!("`}}` to close the body of {what}")));
                }
                _ => {}
            }
            let start = self.pos;
            match self.stmt() {
                Ok(stmt) => {
                    let ended = match body.last() {
                        Some(Stmt::Return { .. }) if function.is_some() => Some("`return` must be the last statement"),
                        Some(Stmt::Yield { .. }) => Some("`yield` must be the last statement of its loop"),
                        _ => None,
                    };
                    if let Some(why) = ended
                        && !reported_after_end
                    {
                        reported_after_end = true;
                        let what = if function.is_some() { "`return`" } else { "`yield`" };
                        self.diags.push(Diagnostic::new(Code::E0101, stmt.span(), format!("syntax error: statement after {what}")).primary(why));
                    }
                    if let (Stmt::Yield { span, .. }, Some(_)) = (&stmt, function) {
                        self.diags.push(
                            Diagnostic::new(Code::E0101, *span, "syntax error: `yield` outside a loop")
                                .primary("`yield` ends a loop's body")
                                .note("a function gives its results with `return`"),
                        );
                    }
                    body.push(stmt);
                }
                Err(Failed) => self.recover_statement(start),
            }
        }
    }

    /// A statement. Once its targets (or `return`) have parsed, a syntax error
    /// in the value still gives a statement, whose value is [`ExprKind::Error`],
    /// so that later uses of its names raise no follow-on errors.
    fn stmt(&mut self) -> PResult<Stmt> {
        let start_pos = self.pos;
        let start = self.span();
        if self.at(&TokenKind::For) {
            return self.for_loop(Vec::new(), start);
        }
        enum Head {
            Bind(Vec<Ident>),
            Return,
            Yield,
        }
        let head = if self.eat(&TokenKind::Return) {
            Head::Return
        } else if self.eat(&TokenKind::Yield) {
            Head::Yield
        } else {
            let mut targets = vec![self.ident("a statement (`name = ...`, `for`, or `return ...`)")?];
            while self.eat(&TokenKind::Comma) {
                targets.push(self.ident("a name to bind")?);
            }
            self.expect(TokenKind::Eq, "`=`")?;
            if self.at(&TokenKind::For) {
                return self.for_loop(targets, start);
            }
            Head::Bind(targets)
        };
        let several = !matches!(head, Head::Bind(_));
        let mut values = Vec::new();
        let parsed = (|| {
            values.push(self.expr()?);
            while several && self.eat(&TokenKind::Comma) {
                values.push(self.expr()?);
            }
            self.end_of_line()
        })();
        if parsed.is_err() {
            let span = Span::new(start.start, self.span().start.max(start.end));
            self.recover_statement(start_pos);
            values = vec![Expr { kind: ExprKind::Error, span }];
        }
        let span = start.to(values.last().map_or(start, |v| v.span));
        Ok(match head {
            Head::Bind(targets) => Stmt::Assign { targets, value: values.pop().expect("one value"), span },
            Head::Return => Stmt::Return { values, span },
            Head::Yield => Stmt::Yield { values, span },
        })
    }

    /// `for i in L { ... }` or `for i in A..B { ... }`, bound by `targets`.
    fn for_loop(&mut self, targets: Vec<Ident>, start: Span) -> PResult<Stmt> {
        self.enter()?;
        let parsed = with_stack(|| self.for_loop_inner(targets, start));
        self.depth = self.depth.saturating_sub(1);
        parsed
    }

    fn for_loop_inner(&mut self, targets: Vec<Ident>, start: Span) -> PResult<Stmt> {
        let header_start = self.expect(TokenKind::For, "`for`")?;
        let var = self.ident("the loop's variable")?;
        self.expect(TokenKind::In, "`in` and the loop's range")?;
        let first = self.expr()?;
        let range = if self.eat(&TokenKind::DotDot) { LoopRange::Between(first, self.expr()?) } else { LoopRange::Dim(first) };
        let header = header_start.to(Span::new(header_start.start, self.prev_end()));
        self.expect(TokenKind::LBrace, "`{` to open the loop's body")?;
        let body = self.block(None)?;
        let span = start.to(Span::new(start.start, self.prev_end()));
        self.end_of_line()?;
        Ok(Stmt::Loop { targets, body: Box::new(ForLoop { var, range, body, header }), span })
    }

    // ---- types ----------------------------------------------------------

    fn type_ref(&mut self) -> PResult<TypeRef> {
        if let TokenKind::Ident(name) = self.peek().clone() {
            let host = match name.as_str() {
                "float" => Some(HostType::Float),
                "int" => Some(HostType::Int),
                "bool" => Some(HostType::Bool),
                _ => None,
            };
            if let Some(host) = host
                && self.peek_at(1) != &TokenKind::LBracket
            {
                return Ok(TypeRef::Host(host, self.bump().span));
            }
        }
        self.type_expr().map(TypeRef::Tensor)
    }

    fn type_expr(&mut self) -> PResult<TypeExpr> {
        let start = self.span();
        let kind = if let TokenKind::Ident(_) = self.peek() {
            let name = self.ident("a type")?;
            let domain = if self.at(&TokenKind::LParen) {
                self.bump();
                let d = self.ident("the axis of the domain")?;
                self.expect(TokenKind::RParen, "`)`")?;
                Some(d)
            } else {
                None
            };
            let span = name.span.to(Span::new(name.span.start, self.prev_end()));
            Some(KindExpr { name, domain, span })
        } else {
            None
        };
        self.expect(TokenKind::LBracket, "`[` and the axes of a type")?;
        let mut axes = Vec::new();
        while !self.at(&TokenKind::RBracket) {
            axes.push(self.axis_entry("an axis, or `]`")?);
        }
        let end = self.bump().span;
        Ok(TypeExpr { kind, axes, span: start.to(end) })
    }

    /// A name, a number, a group `( ... )` or a grouped size `16gh`.
    fn axis_entry(&mut self, expected: &str) -> PResult<AxisEntry> {
        match self.peek().clone() {
            TokenKind::Ident(name) => {
                let span = self.bump().span;
                Ok(AxisEntry::Name(Ident { name, span }))
            }
            TokenKind::Int(n) => Ok(AxisEntry::Number(n, self.bump().span)),
            TokenKind::GroupedSize(n, name) => {
                let span = self.bump().span;
                let digits = n.to_string().len();
                let number_span = Span::new(span.start, (span.start + digits).min(span.end));
                let name_span = Span::new(number_span.end, span.end);
                Ok(AxisEntry::Group {
                    parts: vec![AxisEntry::Name(Ident { name, span: name_span }), AxisEntry::Number(n, number_span)],
                    span,
                    shorthand: true,
                    ellipses: Vec::new(),
                })
            }
            TokenKind::LParen => {
                self.enter()?;
                let open = self.bump().span;
                let (mut parts, mut ellipses) = (Vec::new(), Vec::new());
                while !self.at(&TokenKind::RParen) {
                    if self.at(&TokenKind::Ellipsis) {
                        ellipses.push((parts.len(), self.bump().span));
                        continue;
                    }
                    parts.push(with_stack(|| self.axis_entry("an axis, `...` or `)`"))?);
                }
                let close = self.bump().span;
                self.depth -= 1;
                Ok(AxisEntry::Group { parts, span: open.to(close), shorthand: false, ellipses })
            }
            _ => Err(self.error_here(expected)),
        }
    }

    // ---- expressions ----------------------------------------------------

    fn expr(&mut self) -> PResult<Expr> {
        with_stack(|| self.binary(0))
    }

    /// Binary operators by precedence climbing: `or` < `and` < comparisons
    /// (not chained) < `+ -` < `* / @`, all left-associative.
    fn binary(&mut self, min_prec: u8) -> PResult<Expr> {
        let saved = self.depth;
        let mut lhs = self.unary()?;
        let mut compared = false;
        while let Some((op, prec)) = binary_op(self.peek()) {
            if prec < min_prec {
                break;
            }
            if op.is_comparison() && compared {
                let span = self.span();
                self.diags.push(
                    Diagnostic::new(Code::E0101, span, "syntax error: comparisons cannot be chained")
                        .primary("a second comparison")
                        .label(lhs.span, "this is already a comparison")
                        .note("write `a < b and b < c`"),
                );
                return Err(Failed);
            }
            self.enter()?;
            self.bump();
            let rhs = with_stack(|| self.binary(prec + 1))?;
            compared = op.is_comparison();
            let span = lhs.span.to(rhs.span);
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span };
        }
        self.depth = saved;
        Ok(lhs)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.peek() {
            TokenKind::Minus => UnaryOp::Neg,
            TokenKind::Bang => UnaryOp::Not,
            _ => return self.as_expr(),
        };
        self.enter()?;
        let start = self.bump().span;
        let operand = with_stack(|| self.unary())?;
        self.depth -= 1;
        let span = start.to(operand.span);
        Ok(Expr { kind: ExprKind::Unary(op, Box::new(operand)), span })
    }

    fn as_expr(&mut self) -> PResult<Expr> {
        let saved = self.depth;
        let mut e = self.atom()?;
        while self.at(&TokenKind::LBracket) {
            self.enter()?;
            e = self.indexing(e)?;
        }
        while self.eat(&TokenKind::As) {
            self.enter()?;
            let ty = self.type_expr()?;
            let span = e.span.to(ty.span);
            e = Expr { kind: ExprKind::As(Box::new(e), ty), span };
        }
        self.depth = saved;
        Ok(e)
    }

    fn atom(&mut self) -> PResult<Expr> {
        let span = self.span();
        let kind = match self.peek().clone() {
            TokenKind::Int(n) => ExprKind::Int(n),
            TokenKind::Float(x) => ExprKind::Float(x),
            TokenKind::Inf => ExprKind::Inf,
            TokenKind::True => ExprKind::Bool(true),
            TokenKind::False => ExprKind::Bool(false),
            TokenKind::Str(s) => ExprKind::Str(s),
            TokenKind::Ident(name) => {
                if self.peek_at(1) == &TokenKind::LParen {
                    return self.call();
                }
                ExprKind::Name(name)
            }
            TokenKind::LParen => {
                self.enter()?;
                self.bump();
                let inner = self.expr()?;
                let close = self.expect(TokenKind::RParen, "`)`")?;
                self.depth -= 1;
                return Ok(Expr { kind: inner.kind, span: span.to(close) });
            }
            _ => return Err(self.error_here("an expression")),
        };
        self.bump();
        Ok(Expr { kind, span })
    }

    /// `x[n = i, m = i:j:s as k]` after its operand.
    fn indexing(&mut self, operand: Expr) -> PResult<Expr> {
        self.bump();
        let mut entries = Vec::new();
        loop {
            let axis = self.ident("an axis name")?;
            self.expect(TokenKind::Eq, "`=` and an index or a slice")?;
            let start = if self.at(&TokenKind::Colon) { None } else { Some(self.bound()?) };
            let at = if self.eat(&TokenKind::Colon) {
                let stop =
                    if matches!(self.peek(), TokenKind::Colon | TokenKind::Comma | TokenKind::RBracket | TokenKind::As) { None } else { Some(self.bound()?) };
                let step = if self.eat(&TokenKind::Colon) { Some(self.bound()?) } else { None };
                let rename = if self.eat(&TokenKind::As) { Some(self.ident("the slice's axis name")?) } else { None };
                IndexAt::Slice(Box::new(SliceAt { start, stop, step, rename }))
            } else {
                match start {
                    Some(index) => IndexAt::Element(index),
                    None => return Err(self.error_here("an index or a slice")),
                }
            };
            let span = axis.span.to(Span::new(self.prev_end(), self.prev_end()));
            entries.push(IndexEntry { axis, at, span });
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        let close = self.expect(TokenKind::RBracket, "`,` or `]`")?;
        let span = operand.span.to(close);
        Ok(Expr { kind: ExprKind::Index(Box::new(operand), entries), span })
    }

    /// An index or a slice bound: an integer (possibly negative) or a name.
    fn bound(&mut self) -> PResult<Expr> {
        let span = self.span();
        let negative = self.eat(&TokenKind::Minus);
        let kind = match self.peek().clone() {
            TokenKind::Int(n) => ExprKind::Int(n),
            TokenKind::Ident(name) => ExprKind::Name(name),
            _ => return Err(self.error_here("an integer or the name of an `int`")),
        };
        let end = self.bump().span;
        let value = Expr { kind, span: if negative { end } else { span } };
        Ok(if negative { Expr { kind: ExprKind::Unary(UnaryOp::Neg, Box::new(value)), span: span.to(end) } } else { value })
    }

    fn call(&mut self) -> PResult<Expr> {
        let callee = self.ident("a function")?;
        self.enter()?;
        self.expect(TokenKind::LParen, "`(`")?;
        let mut call = Call { callee, args: Vec::new(), type_arg: None, pattern: None, keywords: Vec::new() };
        let name = call.callee.name.clone();
        let mut first = true;
        if matches!(name.as_str(), "zeros" | "ones" | "full") && !self.at(&TokenKind::RParen) {
            call.type_arg = Some(self.type_expr()?);
            first = false;
        } else if name == "einsum" || name == "concat" {
            self.einsum_args(&mut call)?;
            first = false;
        } else if takes_pattern(&name) && !self.at(&TokenKind::RParen) {
            call.args.push(self.expr()?);
            self.expect(TokenKind::Comma, "`,` and a pattern")?;
            let start = self.span();
            let input = self.pattern_side()?;
            self.expect(TokenKind::Arrow, "`->` in the pattern")?;
            let output = self.pattern_side()?;
            let span = start.to(Span::new(start.start, self.prev_end().max(start.start)));
            call.pattern = Some(Pattern { inputs: vec![input], output, span });
            first = false;
        }
        loop {
            if self.at(&TokenKind::RParen) {
                break;
            }
            if !first {
                self.expect(TokenKind::Comma, "`,` or `)`")?;
                if self.at(&TokenKind::RParen) {
                    break;
                }
            }
            first = false;
            if matches!(self.peek(), TokenKind::Ident(_)) && self.peek_at(1) == &TokenKind::Eq {
                let kname = self.ident("a keyword")?;
                self.bump();
                let value = self.expr()?;
                call.keywords.push(Keyword { name: kname, value });
            } else {
                call.args.push(self.expr()?);
            }
        }
        let close = self.bump().span;
        self.depth -= 1;
        let span = call.callee.span.to(close);
        Ok(Expr { kind: ExprKind::Call(Box::new(call)), span })
    }

    /// `a, b, ...: side, side, ... -> side`.
    fn einsum_args(&mut self, call: &mut Call) -> PResult<()> {
        call.args.push(self.expr()?);
        while self.eat(&TokenKind::Comma) {
            call.args.push(self.expr()?);
        }
        self.expect(TokenKind::Colon, "`,` or `:` and the einsum pattern")?;
        let start = self.span();
        let mut inputs = vec![self.pattern_side()?];
        while self.eat(&TokenKind::Comma) {
            inputs.push(self.pattern_side()?);
        }
        self.expect(TokenKind::Arrow, "`,` or `->` in the pattern")?;
        let output = self.pattern_side()?;
        let span = start.to(Span::new(start.start, self.prev_end().max(start.start)));
        call.pattern = Some(Pattern { inputs, output, span });
        Ok(())
    }

    fn pattern_side(&mut self) -> PResult<PatternSide> {
        let start = self.span();
        let (mut entries, mut ellipses, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        while !matches!(self.peek(), TokenKind::Arrow | TokenKind::Comma | TokenKind::RParen) {
            if self.at(&TokenKind::Ellipsis) {
                let span = self.bump().span;
                ellipses.push((entries.len(), span));
                spans.push(span);
                continue;
            }
            let entry = self.axis_entry("a pattern entry (a name, a number, a group or `...`)")?;
            spans.push(entry.span());
            entries.push(entry);
        }
        let span = match (spans.first(), spans.last()) {
            (Some(a), Some(b)) => a.to(*b),
            _ => Span::new(start.start, start.start),
        };
        Ok(PatternSide { entries, ellipses, span })
    }
}

/// A binary operator and its precedence (higher binds tighter).
fn binary_op(t: &TokenKind) -> Option<(BinaryOp, u8)> {
    Some(match t {
        TokenKind::Or => (BinaryOp::Or, 1),
        TokenKind::And => (BinaryOp::And, 2),
        TokenKind::EqEq => (BinaryOp::Eq, 3),
        TokenKind::NotEq => (BinaryOp::Ne, 3),
        TokenKind::Lt => (BinaryOp::Lt, 3),
        TokenKind::Le => (BinaryOp::Le, 3),
        TokenKind::Gt => (BinaryOp::Gt, 3),
        TokenKind::Ge => (BinaryOp::Ge, 3),
        TokenKind::Plus => (BinaryOp::Add, 4),
        TokenKind::Minus => (BinaryOp::Sub, 4),
        TokenKind::Star => (BinaryOp::Mul, 5),
        TokenKind::Slash => (BinaryOp::Div, 5),
        TokenKind::At => (BinaryOp::MatMul, 5),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(src: &str) -> Vec<Diagnostic> {
        let mut d = Vec::new();
        parse(src, &mut d);
        d
    }

    #[test]
    fn precedence_of_as_and_unary() {
        let mut d = Vec::new();
        let m = parse("def f(x: [n]) -> [n] {\n  y = -x as [k] * 2\n  return y\n}\n", &mut d);
        assert!(d.is_empty(), "{d:?}");
        let Item::Def(f) = &m.items[0] else { panic!() };
        let Stmt::Assign { value, .. } = &f.body[0] else { panic!() };
        let ExprKind::Binary(BinaryOp::Mul, lhs, _) = &value.kind else { panic!("{value:?}") };
        let ExprKind::Unary(UnaryOp::Neg, inner) = &lhs.kind else { panic!() };
        assert!(matches!(inner.kind, ExprKind::As(..)));
    }

    #[test]
    fn missing_paren_gives_one_error() {
        let d = errors("dim n = 8\ndef f(x: [n]) -> [n] {\n  y = exp(x\n  z = y + 1\n  return z\n}\n");
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn several_errors_are_all_reported() {
        let d = errors("dim D 512\ndef f(x: [n]) -> [n] {\n  y = (x + ) * 2\n  z = x +* 3\n  return x\n}\n");
        assert_eq!(d.len(), 3, "{d:?}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_an_overflow() {
        let src = format!("def f(x: [n]) -> [n] {{\n  y = {}x\n  return y\n}}\n", "(".repeat(10_000));
        let d = errors(&src);
        assert!(!d.is_empty() && d.iter().all(|d| d.code == Code::E0101));
    }

    #[test]
    fn chained_comparison_is_an_error() {
        let d = errors("def f(x: [n]) -> [n] {\n  y = x < 1 < 2\n  return x\n}\n");
        assert_eq!(d.len(), 1);
    }
}
