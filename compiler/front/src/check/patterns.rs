//! Pattern operations (LANGUAGE.md section 9): `rearrange`, `reduce`,
//! `repeat`, `einsum` and `split`, with keyword sizes, and the reductions
//! shared with `sum(x, a)` and its siblings.
//!
//! Checks run in a fixed order so that the code reported is the one the spec
//! asks for: the pattern's form (E0407, E0406), the rank of each input side
//! (E0403), probable transpositions (E0408, before any size mismatch they
//! cause), dtypes (E0502, E0505), binding sizes (E0401, E0402), the output
//! side (E0405, E0407, E0409) and finally the element count (E0401).

use super::range::Range;
use super::sizes::{MAX_SIZE, Size};
use super::types::{Axis, DType, Kind, TensorType, Type, describe_axes};
use super::{FnChecker, entry_text};
use crate::checked::{Elem, PatternOp, Reduction, ResolvedPattern, TExpr, TExprKind};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, AxisEntry, BinaryOp, ExprKind, HostType, PatternSide, UnaryOp};

/// The most results `split` may give.
pub const MAX_SPLIT: u64 = 256;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Rearrange,
    Reduce,
    Repeat,
    Einsum,
    Split,
}

/// The prefix of the names an ellipsis gives the unnamed axes it stands
/// for: `…` is no identifier, so no source can write or clash with them.
const HIDDEN: &str = "\u{2026}";

/// Where an ellipsis stands inside one of a side's groups, if one does.
fn grouped_ellipsis(side: &ast::PatternSide) -> Option<Span> {
    side.entries.iter().find_map(|e| match e {
        AxisEntry::Group { ellipses, .. } => ellipses.first().map(|e| e.1),
        _ => None,
    })
}

/// A pattern's result with the axes an ellipsis named ([`HIDDEN`]) unnamed again.
fn unname_hidden(ty: Type) -> Type {
    match ty {
        Type::Tensor(mut t) => {
            for axis in &mut t.axes {
                if axis.name.as_deref().is_some_and(|n| n.starts_with(HIDDEN)) {
                    axis.name = None;
                }
            }
            Type::Tensor(t)
        }
        other => other,
    }
}

/// Every name of a side, groups included, in order.
fn side_names(side: &PatternSide) -> Vec<&ast::Ident> {
    let mut out = Vec::new();
    for e in &side.entries {
        collect_names(e, &mut out);
    }
    out
}

fn collect_names<'a>(e: &'a AxisEntry, out: &mut Vec<&'a ast::Ident>) {
    match e {
        AxisEntry::Name(i) => out.push(i),
        AxisEntry::Number(..) => {}
        AxisEntry::Group { parts, .. } => parts.iter().for_each(|p| collect_names(p, out)),
    }
}

/// Every number of a side, groups and grouped sizes included.
fn side_numbers(side: &PatternSide) -> Vec<(u64, Span)> {
    let mut out = Vec::new();
    for e in &side.entries {
        match e {
            AxisEntry::Number(n, s) => out.push((*n, *s)),
            AxisEntry::Group { parts, .. } => out.extend(parts.iter().filter_map(|p| if let AxisEntry::Number(n, s) = p { Some((*n, *s)) } else { None })),
            AxisEntry::Name(_) => {}
        }
    }
    out
}

/// The numbers (other than 1) of `input` that no equal number of `output` matches.
fn unmatched_numbers(input: &PatternSide, output: &PatternSide) -> Vec<(u64, Span)> {
    let mut out_numbers: Vec<u64> = side_numbers(output).into_iter().map(|(n, _)| n).collect();
    let mut left = Vec::new();
    for (n, s) in side_numbers(input) {
        if n == 1 {
            continue;
        }
        match out_numbers.iter().position(|&m| m == n) {
            Some(i) => {
                out_numbers.remove(i);
            }
            None => left.push((n, s)),
        }
    }
    left
}

fn malformed(span: Span, message: impl Into<String>, label: &str) -> Diagnostic {
    Diagnostic::new(Code::E0407, span, message).primary(label.to_string())
}

impl FnChecker<'_> {
    /// A call of a pattern operation.
    pub(super) fn pattern_call(&mut self, call: &ast::Call, span: Span) -> TExpr {
        let op = match call.callee.name.as_str() {
            "rearrange" => Op::Rearrange,
            "reduce" => Op::Reduce,
            "repeat" => Op::Repeat,
            "split" => Op::Split,
            _ => Op::Einsum,
        };
        let n_operands = if op == Op::Einsum { call.args.len() } else { 1.min(call.args.len()) };
        let operands: Vec<TExpr> = call.args[..n_operands].iter().map(|a| self.expr(a)).collect();
        let fail = |args: Vec<TExpr>| TExpr {
            kind: TExprKind::Pattern { op: PatternOp::Rearrange, args, pattern: ResolvedPattern { inputs: Vec::new(), output: Vec::new() } },
            ty: Type::Error,
            span,
        };
        let Some(pattern) = &call.pattern else { return fail(operands) };
        // The reduction of `reduce`; any other extra positional argument is E0202.
        let extra = &call.args[n_operands..];
        let mut reduction = None;
        match (op, extra) {
            (Op::Reduce, [r]) => {
                let name = match &r.kind {
                    ExprKind::Name(n) | ExprKind::Str(n) => Some(n.as_str()),
                    _ => None,
                };
                match name.and_then(Reduction::parse) {
                    Some(red) => reduction = Some(red),
                    None => {
                        let what = name.map_or("this".to_string(), |n| format!("`{n}`"));
                        self.report(
                            Diagnostic::new(Code::E0406, r.span, format!("{what} is not a reduction: use sum, mean, max, min or prod"))
                                .primary("bad reduction"),
                        );
                        return fail(operands);
                    }
                }
            }
            (Op::Reduce, []) => {
                self.report(
                    Diagnostic::new(Code::E0202, call.callee.span, "`reduce` needs a reduction: sum, mean, max, min or prod").primary("missing reduction"),
                );
                return fail(operands);
            }
            (_, []) => {}
            (_, [first, ..]) => {
                self.report(
                    Diagnostic::new(Code::E0202, first.span, format!("`{}` takes no argument after its pattern but keywords", call.callee.name))
                        .primary("unexpected argument"),
                );
                return fail(operands);
            }
        }
        if operands.iter().any(|o| o.ty.is_error()) {
            return fail(operands);
        }
        match self.pattern(op, reduction, pattern, call, &operands, span) {
            Some((pop, resolved, ty)) => TExpr { kind: TExprKind::Pattern { op: pop, args: operands, pattern: resolved }, ty: unname_hidden(ty), span },
            None => fail(operands),
        }
    }

    /// Checks a pattern against its operands; `None` after reporting an error.
    fn pattern(
        &mut self,
        op: Op,
        reduction: Option<Reduction>,
        pattern: &ast::Pattern,
        call: &ast::Call,
        operands: &[TExpr],
        span: Span,
    ) -> Option<(PatternOp, ResolvedPattern, Type)> {
        // 1. The form of the pattern, and the ellipses replaced by the
        // names of the axes they stand for.
        let split = self.pattern_form(op, pattern, operands.len())?;
        let tensors: Vec<TensorType> = operands.iter().filter_map(|o| Self::as_tensor(&o.ty)).collect();
        let expanded;
        let pattern = if pattern.inputs.iter().chain([&pattern.output]).any(|s| !s.ellipses.is_empty() || grouped_ellipsis(s).is_some()) {
            expanded = self.expand_ellipses(op, pattern, &tensors, operands)?;
            &expanded
        } else {
            pattern
        };
        let keywords = self.keyword_sizes(pattern, call)?;

        // 2. Ranks.
        for ((side, t), o) in pattern.inputs.iter().zip(&tensors).zip(operands) {
            if side.entries.len() != t.rank() {
                self.report_rank(if side.entries.is_empty() { pattern.span } else { side.span }, side, t, o.span, "one entry per axis");
                return None;
            }
        }

        // 3. Probable transpositions.
        for ((side, t), o) in pattern.inputs.iter().zip(&tensors).zip(operands) {
            for (p, entry) in side.entries.iter().enumerate() {
                let AxisEntry::Name(id) = entry else { continue };
                if t.axes[p].name.as_deref() == Some(&id.name) {
                    continue;
                }
                if let Some(q) = t.axes.iter().position(|a| a.name.as_deref() == Some(&id.name)) {
                    let here = t.axes[p].name.as_ref().map_or("an unnamed axis".to_string(), |n| format!("axis '{n}'"));
                    self.report(
                        Diagnostic::new(
                            Code::E0408,
                            id.span,
                            format!(
                                "'{}' names axis {} of the operand {} but stands at position {}, where the operand has {here}: probably a transposition",
                                id.name,
                                q + 1,
                                describe_axes(&t.axes, &self.syms),
                                p + 1
                            ),
                        )
                        .primary("names another axis of the operand")
                        .label(o.span, "the operand")
                        .note("patterns name axes by position; to transpose, write the input in the operand's order and permute on the output"),
                    );
                    return None;
                }
            }
        }

        // 4. Dtypes.
        if op == Op::Einsum {
            for (t, o) in tensors.iter().zip(operands) {
                if t.dtype == DType::Bool {
                    self.reject_mask(o, "`einsum`");
                    return None;
                }
            }
            if let Some((i, t)) = tensors.iter().enumerate().find(|(_, t)| t.dtype != tensors[0].dtype) {
                self.report(
                    Diagnostic::new(
                        Code::E0502,
                        span,
                        format!(
                            "einsum operands must share a dtype, but operand 1 is {} and operand {} is {}",
                            tensors[0].dtype.as_str(),
                            i + 1,
                            t.dtype.as_str()
                        ),
                    )
                    .primary("operands of different dtypes")
                    .label(operands[0].span, tensors[0].dtype.as_str())
                    .label(operands[i].span, t.dtype.as_str())
                    .note("einsum does not promote, as in torch; convert with float()"),
                );
                return None;
            }
        }

        // 5. Bind the input sides.
        let mut env = Env { bound: keywords.clone(), keywords };
        let mut inputs: Vec<Vec<Vec<Elem>>> = Vec::new();
        for ((side, t), o) in pattern.inputs.iter().zip(&tensors).zip(operands) {
            let mut axes = Vec::with_capacity(side.entries.len());
            for (entry, axis) in side.entries.iter().zip(&t.axes) {
                axes.push(self.bind_entry(entry, axis, &mut env, o)?);
            }
            inputs.push(axes);
        }

        // 6. The output side.
        let input_names: Vec<&str> = pattern.inputs.iter().flat_map(|s| side_names(s).into_iter().map(|i| i.name.as_str())).collect();
        let mut output: Vec<Vec<Elem>> = Vec::new();
        let mut out_axes: Vec<Axis> = Vec::new();
        let mut number_pool: Vec<u64> = pattern.inputs.iter().flat_map(|s| side_numbers(s).into_iter().map(|(n, _)| n)).collect();
        for entry in &pattern.output.entries {
            let parts: Vec<&AxisEntry> = match entry {
                AxisEntry::Group { parts, .. } => parts.iter().collect(),
                other => vec![other],
            };
            let mut elems = Vec::new();
            for part in parts {
                match part {
                    AxisEntry::Name(id) => {
                        let size = if input_names.contains(&id.name.as_str()) {
                            env.lookup(self, &id.name)
                        } else if op == Op::Repeat {
                            match env.lookup(self, &id.name) {
                                Some(s) => Some(s),
                                None => {
                                    self.report(
                                        Diagnostic::new(Code::E0409, id.span, format!("the new axis '{}' of repeat has no size", id.name))
                                            .primary("size unknown")
                                            .note(format!("give it with a keyword, as in repeat(x, ..., {}=4)", id.name)),
                                    );
                                    return None;
                                }
                            }
                        } else {
                            self.report(
                                Diagnostic::new(Code::E0405, id.span, format!("the output name '{}' is not from the inputs", id.name))
                                    .primary("not on any input side")
                                    .label(pattern.span, "the pattern"),
                            );
                            return None;
                        };
                        let size = size?;
                        elems.push(Elem { name: Some(id.name.clone()), size });
                    }
                    AxisEntry::Number(n, nspan) => {
                        if *n != 1 && op != Op::Repeat {
                            match number_pool.iter().position(|m| m == n) {
                                Some(i) => {
                                    number_pool.remove(i);
                                }
                                None => {
                                    self.report(malformed(
                                        *nspan,
                                        format!("the number {n} on the output matches no equal number on the input"),
                                        "a number without a twin on the input",
                                    ));
                                    return None;
                                }
                            }
                        }
                        elems.push(Elem { name: None, size: Size::Const(*n) });
                    }
                    AxisEntry::Group { .. } => return None,
                }
            }
            let axis = match (entry, elems.as_slice()) {
                (AxisEntry::Group { span: group, .. }, _) => {
                    let mut size = Size::Const(1);
                    for e in &elems {
                        size = self.checked_mul(size, e.size, *group, "the group's size")?;
                    }
                    Axis::unnamed(size)
                }
                (_, [e]) => Axis { name: e.name.clone(), size: e.size },
                _ => return None,
            };
            out_axes.push(axis);
            output.push(elems);
        }
        let out_names: Vec<&str> = side_names(&pattern.output).into_iter().map(|i| i.name.as_str()).collect();
        if matches!(op, Op::Rearrange | Op::Split | Op::Repeat)
            && let Some(missing) = side_names(&pattern.inputs[0]).into_iter().find(|i| !out_names.contains(&i.name.as_str()))
        {
            let what = match op {
                Op::Rearrange => "rearrange",
                Op::Split => "split",
                _ => "repeat",
            };
            self.report(malformed(
                missing.span,
                format!("every input name of {what} must be in the output, but '{}' is not", missing.name),
                "missing from the output",
            ));
            return None;
        }

        // 7. Element counts, and the result's type.
        let resolved = ResolvedPattern { inputs, output };
        let elems_in: Vec<&Elem> = resolved.inputs.iter().flatten().flatten().collect();
        match op {
            Op::Rearrange | Op::Split => {
                let mut count_in = Size::Const(1);
                let mut skipped = false;
                for e in &elems_in {
                    if let Some((k, _)) = split
                        && !skipped
                        && e.name.is_none()
                        && self.syms.constant(e.size) == Some(k)
                    {
                        skipped = true;
                        continue;
                    }
                    count_in = self.checked_mul(count_in, e.size, span, "the input's element count")?;
                }
                let mut count_out = Size::Const(1);
                for a in &out_axes {
                    count_out = self.checked_mul(count_out, a.size, span, "the output's element count")?;
                }
                if !self.syms.unify(count_in, count_out) {
                    let t = &tensors[0];
                    let msg = if let Some((k, _)) = split {
                        format!(
                            "split's {k} results of {} elements each do not add up to the input {} of {} elements",
                            self.syms.display(count_out),
                            describe_axes(&t.axes, &self.syms),
                            self.element_count(t)
                        )
                    } else {
                        format!(
                            "rearrange must keep the number of elements: the input {} has {} but the output {} has {}",
                            describe_axes(&t.axes, &self.syms),
                            self.syms.display(count_in),
                            describe_axes(&out_axes, &self.syms),
                            self.syms.display(count_out)
                        )
                    };
                    self.report(Diagnostic::new(Code::E0401, pattern.span, msg).primary("element counts differ"));
                    return None;
                }
                let t = &tensors[0];
                let kind = carried_kind(t, &pattern.inputs[0], &pattern.output);
                let ty = TensorType { dtype: t.dtype, kind, axes: out_axes, range: t.range };
                self.commit(env);
                let pop = match split {
                    Some((count, _)) => {
                        let (axis, part) = split_position(&resolved, count, &self.syms);
                        PatternOp::Split { count: count as usize, axis, part }
                    }
                    None => PatternOp::Rearrange,
                };
                Some((pop, resolved, Type::Tensor(ty)))
            }
            Op::Repeat => {
                let t = &tensors[0];
                let kind = carried_kind(t, &pattern.inputs[0], &pattern.output);
                let ty = TensorType { dtype: t.dtype, kind, axes: out_axes, range: t.range };
                self.commit(env);
                Some((PatternOp::Repeat, resolved, Type::Tensor(ty)))
            }
            Op::Reduce => {
                let red = reduction.unwrap_or(Reduction::Sum);
                let t = &tensors[0];
                let ty = self.reduced_type(red, t, &resolved, &pattern.inputs[0], &pattern.output, out_axes);
                self.commit(env);
                Some((PatternOp::Reduce(red), resolved, Type::Tensor(ty)))
            }
            Op::Einsum => {
                let mut summed = Some(1u64);
                let mut seen: Vec<&str> = Vec::new();
                for e in &elems_in {
                    let Some(n) = e.name.as_deref() else { continue };
                    if out_names.contains(&n) || seen.contains(&n) {
                        continue;
                    }
                    seen.push(n);
                    summed = summed.zip(self.syms.constant(e.size)).and_then(|(a, b)| a.checked_mul(b));
                }
                let mut range = Some(Range::exact(1.0));
                for t in &tensors {
                    range = range.zip(t.range).map(|(a, b)| a * b);
                }
                let ty = TensorType { dtype: tensors[0].dtype, kind: Kind::Plain, axes: out_axes, range: range.map(|r| r.sum_over(summed)) };
                self.commit(env);
                Some((PatternOp::Einsum, resolved, Type::Tensor(ty)))
            }
        }
    }

    /// The pattern with each side's ellipsis `...` replaced by the names of
    /// the axes it stands for (LANGUAGE.md section 9): on an input side,
    /// the operand's axes that the side does not list, in their order (the
    /// entries before `...` bind the first axes, those after it the last);
    /// on the output side, every input's, in order of first appearance (in
    /// `einsum` they line up by name), in place of the `...` or inside the
    /// output's group that holds it (`(...)`, `(h ...)`: no axes make it
    /// `()`). An unnamed axis gets a name no source can write ([`HIDDEN`],
    /// the pattern's offset, and its place among the ellipsis's unnamed
    /// axes counted from the right, so that `einsum`'s line up from the
    /// right, as section 5's broadcasting does); the result's axes of those names are unnamed
    /// again ([`unname_hidden`]). `...` may stand once per side, on every
    /// side or on none, or on `reduce`'s input alone (its axes are then
    /// reduced): else E0407, as is `...` in a group on an input side; a side
    /// listing more entries than its operand has axes is E0403.
    fn expand_ellipses(&mut self, op: Op, pattern: &ast::Pattern, tensors: &[TensorType], operands: &[TExpr]) -> Option<ast::Pattern> {
        let malformed_here = |span, message: String| malformed(span, message, "misplaced `...`");
        for side in &pattern.inputs {
            if let Some(span) = grouped_ellipsis(side) {
                self.report(
                    malformed_here(span, "`...` may stand in a group only on the output side: an input group splits one axis".into())
                        .note("name the parts of the axis, `(h w)`, or move `...` out of the group"),
                );
                return None;
            }
        }
        for side in pattern.inputs.iter().chain([&pattern.output]) {
            let mut all: Vec<Span> = side.ellipses.iter().map(|e| e.1).collect();
            for entry in &side.entries {
                if let AxisEntry::Group { ellipses, .. } = entry {
                    all.extend(ellipses.iter().map(|e| e.1));
                }
            }
            if let Some(&span) = all.get(1) {
                self.report(malformed_here(span, "`...` may appear only once per side of a pattern".into()));
                return None;
            }
        }
        let on_inputs = pattern.inputs.iter().filter(|s| !s.ellipses.is_empty()).count();
        let on_output = !pattern.output.ellipses.is_empty() || grouped_ellipsis(&pattern.output).is_some();
        let input_only = op == Op::Reduce && !on_output;
        if on_inputs != pattern.inputs.len() || !(on_output || input_only) || tensors.len() != pattern.inputs.len() {
            let span = pattern
                .inputs
                .iter()
                .chain([&pattern.output])
                .find_map(|s| s.ellipses.first().map(|e| e.1).or_else(|| grouped_ellipsis(s)))
                .unwrap_or(pattern.span);
            let message = if op == Op::Reduce {
                "`...` must stand on every side of the pattern or on none, or on reduce's input side alone"
            } else {
                "`...` must stand on every side of the pattern or on none"
            };
            self.report(malformed_here(span, message.into()));
            return None;
        }
        let mut expanded = pattern.clone();
        let mut union: Vec<String> = Vec::new();
        for ((side, t), o) in expanded.inputs.iter_mut().zip(tensors).zip(operands) {
            let (at, span) = side.ellipses[0];
            let Some(count) = t.rank().checked_sub(side.entries.len()) else {
                self.report_rank(side.span, side, t, o.span, "more entries than axes");
                return None;
            };
            let covered = &t.axes[at..at + count];
            let unnamed = covered.iter().filter(|a| a.name.is_none()).count();
            let mut seen_unnamed = 0;
            let mut names = Vec::with_capacity(count);
            for axis in covered {
                let name = match &axis.name {
                    Some(name) => name.clone(),
                    None => {
                        seen_unnamed += 1;
                        // Unique to this pattern (pattern names bind sizes of the body).
                        format!("{HIDDEN}{}.{}", pattern.span.start, unnamed - seen_unnamed)
                    }
                };
                names.push(AxisEntry::Name(ast::Ident { name: name.clone(), span }));
                if !union.contains(&name) {
                    union.push(name);
                }
            }
            side.entries.splice(at..at, names);
            side.ellipses.clear();
        }
        // The unnamed axes in one run, the leftmost (the highest count from the right) first.
        if let Some(first) = union.iter().position(|n| n.starts_with(HIDDEN)) {
            let mut hidden: Vec<String> = union.iter().filter(|n| n.starts_with(HIDDEN)).cloned().collect();
            hidden.sort_by_key(|n| std::cmp::Reverse(n.rsplit('.').next().and_then(|k| k.parse::<usize>().ok()).unwrap_or(0)));
            union.retain(|n| !n.starts_with(HIDDEN));
            union.splice(first..first, hidden);
        }
        let names = |span| union.iter().map(move |n| AxisEntry::Name(ast::Ident { name: n.clone(), span })).collect::<Vec<_>>();
        if let Some(&(at, span)) = expanded.output.ellipses.first() {
            expanded.output.entries.splice(at..at, names(span));
            expanded.output.ellipses.clear();
        }
        for entry in &mut expanded.output.entries {
            if let AxisEntry::Group { parts, ellipses, .. } = entry
                && let Some(&(at, span)) = ellipses.first()
            {
                parts.splice(at..at, names(span));
                ellipses.clear();
            }
        }
        // A name written on a side that `...` also stands for there would
        // be two axes of one name (`b ... -> D b ...` on `[b 3 D]`).
        for (side, original) in expanded.inputs.iter().chain([&expanded.output]).zip(pattern.inputs.iter().chain([&pattern.output])) {
            let names = side_names(side);
            let written = side_names(original);
            if let Some(twice) = written.iter().find(|w| names.iter().filter(|n| n.name == w.name).count() > 1) {
                let span = original.ellipses.first().map(|e| e.1).or_else(|| grouped_ellipsis(original)).unwrap_or(twice.span);
                self.report(
                    malformed(
                        twice.span,
                        format!("'{}' appears twice on one side of the pattern: written, and among the axes `...` stands for", twice.name),
                        "a repeated name",
                    )
                    .label(span, "`...` stands for an axis of this name too"),
                );
                return None;
            }
        }
        Some(expanded)
    }

    /// E0403: a pattern side whose entries do not fit its operand's rank.
    fn report_rank(&mut self, span: Span, side: &ast::PatternSide, t: &TensorType, operand: Span, label: &str) {
        let listed = side.entries.iter().map(entry_text).collect::<Vec<_>>().join(" ");
        let besides = if side.ellipses.is_empty() { "" } else { " besides `...`" };
        let message = format!(
            "the pattern side `{listed}` has {} entries{besides} but the operand has {} axes {}",
            side.entries.len(),
            t.rank(),
            describe_axes(&t.axes, &self.syms)
        );
        self.report(Diagnostic::new(Code::E0403, span, message).primary(label).label(operand, "the operand"));
    }

    /// `a * b`, or E0401 at `span` (`what` is the product's role) when it
    /// is past the largest size.
    fn checked_mul(&mut self, a: Size, b: Size, span: Span, what: &str) -> Option<Size> {
        match super::checked_product(&mut self.syms, a, b, span, what) {
            Ok(product) => Some(product),
            Err(d) => {
                self.report(d);
                None
            }
        }
    }

    fn element_count(&self, t: &TensorType) -> String {
        let mut total = Some(1u64);
        for a in &t.axes {
            total = total.zip(self.syms.constant(a.size)).and_then(|(x, y)| x.checked_mul(y));
        }
        total.map_or("an unknown number".to_string(), |v| v.to_string())
    }

    /// The form of a pattern (E0407), and for split the number of results and its span.
    fn pattern_form(&mut self, op: Op, pattern: &ast::Pattern, operands: usize) -> Option<Option<(u64, Span)>> {
        if pattern.inputs.len() != operands {
            self.report(malformed(
                pattern.span,
                format!("the pattern has {} input sides for {} operands", pattern.inputs.len(), operands),
                "one input side per operand",
            ));
            return None;
        }
        for side in pattern.inputs.iter().chain(std::iter::once(&pattern.output)) {
            for entry in &side.entries {
                if let AxisEntry::Group { parts, .. } = entry
                    && let Some(AxisEntry::Group { span, .. }) = parts.iter().find(|p| matches!(p, AxisEntry::Group { .. }))
                {
                    self.report(malformed(*span, "groups can't be nested", "a group inside a group"));
                    return None;
                }
            }
            let names = side_names(side);
            for (i, id) in names.iter().enumerate() {
                if let Some(first) = names[..i].iter().find(|o| o.name == id.name) {
                    self.report(
                        malformed(id.span, format!("'{}' appears twice on one side of the pattern", id.name), "a repeated name")
                            .label(first.span, "first here"),
                    );
                    return None;
                }
            }
        }
        if op == Op::Einsum {
            for side in &pattern.inputs {
                if let Some(bad) = side.entries.iter().find(|e| !matches!(e, AxisEntry::Name(_))) {
                    self.report(malformed(bad.span(), "einsum's input sides take only names", "not a name"));
                    return None;
                }
            }
            if let Some(bad) = pattern.output.entries.iter().find(|e| matches!(e, AxisEntry::Group { .. })) {
                self.report(malformed(bad.span(), "einsum's output side takes no groups", "a group"));
                return None;
            }
        }
        if op != Op::Split {
            return Some(None);
        }
        let left = unmatched_numbers(&pattern.inputs[0], &pattern.output);
        match left.as_slice() {
            [(k, s)] if *k <= MAX_SPLIT => Some(Some((*k, *s))),
            [(k, s)] => {
                self.report(malformed(*s, format!("split gives at most {MAX_SPLIT} results, not {k}"), "too many results"));
                None
            }
            [] => {
                self.report(malformed(
                    pattern.span,
                    "split needs one number on the left that is not on the right: the number of results",
                    "no number of results",
                ));
                None
            }
            [_, (_, s2), ..] => {
                let numbers: Vec<String> = left.iter().map(|(n, _)| n.to_string()).collect();
                self.report(malformed(
                    *s2,
                    format!("split needs exactly one number on the left that is not on the right, but {} all qualify", numbers.join(" and ")),
                    "a second number of results",
                ));
                None
            }
        }
    }

    /// Keyword sizes: each names a new name of the pattern and is a positive integer (E0406).
    fn keyword_sizes(&mut self, pattern: &ast::Pattern, call: &ast::Call) -> Option<Vec<(String, Size)>> {
        let mut out: Vec<(String, Size)> = Vec::new();
        let names: Vec<&str> =
            pattern.inputs.iter().chain(std::iter::once(&pattern.output)).flat_map(|s| side_names(s).into_iter().map(|i| i.name.as_str())).collect();
        for k in &call.keywords {
            let name = &k.name.name;
            let problem = if self.sizes.contains_key(name) {
                Some(format!("the keyword `{name}` names a size already in scope ({}); keywords only size new names", self.syms.display(self.sizes[name])))
            } else if !names.contains(&name.as_str()) {
                Some(format!("the keyword `{name}` is not a name of the pattern"))
            } else if out.iter().any(|(n, _)| n == name) {
                Some(format!("the keyword `{name}` is given twice"))
            } else {
                None
            };
            if let Some(message) = problem {
                self.report(Diagnostic::new(Code::E0406, k.name.span, message).primary("bad keyword argument"));
                return None;
            }
            let value = self.expr(&k.value);
            if value.ty.is_error() {
                return None;
            }
            let size = match self.keyword_value(&value, Some(name)) {
                Ok(Size::Const(n)) if n > MAX_SIZE => {
                    self.report(
                        Diagnostic::new(Code::E0401, k.value.span, format!("the size `{name}` = {n} is larger than {MAX_SIZE}, the largest size"))
                            .primary("not a valid size"),
                    );
                    return None;
                }
                Ok(Size::Const(0)) => {
                    self.report(
                        Diagnostic::new(Code::E0406, k.value.span, format!("the size `{name}` must be a positive integer, not 0"))
                            .primary("not a positive size"),
                    );
                    return None;
                }
                Ok(size) => size,
                Err(what) => {
                    self.report(
                        Diagnostic::new(Code::E0406, k.value.span, format!("the size `{name}` must be a positive integer, not {what}"))
                            .primary("not a size")
                            .note("a keyword size is an integer, a size name, an `int` parameter, or `+`, `-` and `*` of those"),
                    );
                    return None;
                }
            };
            out.push((name.clone(), size));
        }
        Some(out)
    }

    /// The size a keyword's value gives: an integer, a size name, an `int`
    /// parameter (its value at the call), or `+`, `-`, `*` of those (a
    /// size derived from them, checked at the call where a parameter is in
    /// it). Else what the value is, for the message: a negative constant,
    /// a float, a value computed from something else.
    fn keyword_value(&mut self, value: &TExpr, name: Option<&str>) -> Result<Size, String> {
        let span = value.span;
        match (&value.kind, &value.ty) {
            (TExprKind::Int(n), _) => Ok(Size::Const(*n)),
            (TExprKind::SizeValue(s), _) => Ok(*s),
            (TExprKind::Local(i), Type::Host(HostType::Int, _)) if *i < self.params => {
                // A host int parameter gives the size at the call boundary,
                // named after the keyword where it is the whole value.
                let named = name.map_or_else(|| self.bindings[*i].name.clone(), str::to_string);
                let sym = Size::Sym(self.syms.fresh(&named, span));
                self.size_arguments.push((sym, *i));
                Ok(sym)
            }
            (TExprKind::Unary(UnaryOp::Neg, operand), _) => match self.keyword_value(operand, None)? {
                Size::Const(0) => Ok(Size::Const(0)),
                Size::Const(n) => Err(format!("-{n}")),
                _ => Err("a negated size".into()),
            },
            (TExprKind::Binary { op: op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), lhs, rhs, .. }, Type::Host(HostType::Int, _)) => {
                let (a, b) = (self.keyword_value(lhs, None)?, self.keyword_value(rhs, None)?);
                let size = match op {
                    BinaryOp::Mul => self.syms.mul(a, b, span),
                    _ => self.syms.add_sub(a, b, *op == BinaryOp::Sub, span),
                };
                size.ok_or_else(|| match (self.syms.constant(a), self.syms.constant(b)) {
                    (Some(x), Some(y)) if *op == BinaryOp::Sub && y > x => format!("{}", x as i128 - y as i128),
                    _ => format!("`{}`, past the largest size", self.syms.display(a)),
                })
            }
            (_, ty) => Err(match ty {
                Type::Host(HostType::Int, _) => "a value computed at run time from something other than sizes and `int` parameters".into(),
                ty => ty.display(&self.syms).to_string(),
            }),
        }
    }

    /// Binds one input entry to the operand axis it stands for.
    fn bind_entry(&mut self, entry: &AxisEntry, axis: &Axis, env: &mut Env, operand: &TExpr) -> Option<Vec<Elem>> {
        let mismatch = |c: &mut Self, span: Span, what: String| {
            let d = Diagnostic::new(Code::E0401, span, format!("{what}, but it stands for {}", super::types::describe_axis(axis, &c.syms)))
                .primary("size mismatch")
                .label(operand.span, "the operand");
            c.report(d);
        };
        match entry {
            AxisEntry::Name(id) => {
                let keyword = env.keywords.iter().any(|(n, _)| *n == id.name);
                match env.lookup(self, &id.name) {
                    // A keyword size that only the call can confirm (the axis's
                    // size is symbolic) joins the axis's class under its own
                    // name, so that the boundary's refusal names it.
                    Some(s) if keyword && self.syms.constant(axis.size).is_none() => {
                        let named = Size::Sym(self.syms.fresh(&id.name, id.span));
                        if !(self.syms.unify(named, axis.size) && self.syms.unify(named, s)) {
                            let what = format!("'{}' has size {}", id.name, self.syms.display(s));
                            mismatch(self, id.span, what);
                            return None;
                        }
                    }
                    Some(s) if !self.syms.unify(s, axis.size) => {
                        let what = format!("'{}' has size {}", id.name, self.syms.display(s));
                        mismatch(self, id.span, what);
                        return None;
                    }
                    Some(_) => {}
                    None => env.bound.push((id.name.clone(), axis.size)),
                }
                Some(vec![Elem { name: Some(id.name.clone()), size: axis.size }])
            }
            AxisEntry::Number(n, span) => {
                if !self.syms.unify(Size::Const(*n), axis.size) {
                    mismatch(self, *span, format!("the number {n} is a size"));
                    return None;
                }
                Some(vec![Elem { name: None, size: axis.size }])
            }
            AxisEntry::Group { parts, span, .. } => {
                let mut known = Size::Const(1);
                let mut unknown = Vec::new();
                for part in parts {
                    match part {
                        AxisEntry::Name(id) => match env.lookup(self, &id.name) {
                            Some(s) => known = self.checked_mul(known, s, *span, "the group's size")?,
                            None => unknown.push(id),
                        },
                        AxisEntry::Number(n, _) => known = self.checked_mul(known, Size::Const(*n), *span, "the group's size")?,
                        AxisEntry::Group { .. } => return None,
                    }
                }
                let text = entry_text(entry);
                match unknown.as_slice() {
                    [] => {
                        if !self.syms.unify(known, axis.size) {
                            let what = format!("the group {text} has size {}", self.syms.display(known));
                            mismatch(self, *span, what);
                            return None;
                        }
                    }
                    [id] => match self.syms.div_exact(axis.size, known, Some(&id.name), id.span) {
                        Some(part) => env.bound.push((id.name.clone(), part)),
                        None => {
                            let what =
                                format!("the group {text} can't fit: {} is not a multiple of {}", self.syms.display(axis.size), self.syms.display(known));
                            mismatch(self, *span, what);
                            return None;
                        }
                    },
                    [a, b, ..] => {
                        self.report(
                            Diagnostic::new(Code::E0402, *span, format!("the group {text} has two unknown parts, '{}' and '{}'", a.name, b.name))
                                .primary("at most one part may be unknown")
                                .note(format!("give one of them with a keyword, as in {}=8", a.name)),
                        );
                        return None;
                    }
                }
                let elems = parts
                    .iter()
                    .map(|p| match p {
                        AxisEntry::Name(id) => Elem { name: Some(id.name.clone()), size: env.lookup(self, &id.name).unwrap_or(Size::Const(0)) },
                        AxisEntry::Number(n, _) => Elem { name: None, size: Size::Const(*n) },
                        AxisEntry::Group { .. } => Elem { name: None, size: Size::Const(0) },
                    })
                    .collect();
                Some(elems)
            }
        }
    }

    /// Brings a checked pattern's new names (and keyword sizes) into scope.
    fn commit(&mut self, env: Env) {
        for (name, size) in env.bound.into_iter().chain(env.keywords) {
            self.sizes.entry(name).or_insert(size);
        }
    }

    /// Reduces the operand's axes at `positions` (`sum(x, a)` and its siblings).
    pub(super) fn reduce_axes(&mut self, op: Reduction, arg: TExpr, t: &TensorType, positions: &[usize], span: Span) -> TExpr {
        let elem = |a: &Axis| Elem { name: a.name.clone(), size: a.size };
        let inputs = vec![t.axes.iter().map(|a| vec![elem(a)]).collect()];
        let kept: Vec<Axis> = t.axes.iter().enumerate().filter(|(i, _)| !positions.contains(i)).map(|(_, a)| a.clone()).collect();
        let output = kept.iter().map(|a| vec![elem(a)]).collect();
        let resolved = ResolvedPattern { inputs, output };
        let domain = t.kind.domain().and_then(|d| t.axis_position(d));
        let domain_state =
            domain.map(|p| if positions.contains(&p) { DomainFate::Reduced } else { DomainFate::Kept(t.kind.domain().unwrap_or_default().to_string()) });
        let count = self.count_of(positions.iter().map(|&p| t.axes[p].size));
        let other = self.count_of(positions.iter().filter(|&&p| Some(p) != domain).map(|&p| t.axes[p].size));
        let ty = reduction_type(op, t, kept, count, other, domain_state);
        TExpr { kind: TExprKind::Pattern { op: PatternOp::Reduce(op), args: vec![arg], pattern: resolved }, ty: Type::Tensor(ty), span }
    }

    fn count_of(&self, sizes: impl Iterator<Item = Size>) -> Option<u64> {
        let mut total = Some(1u64);
        for s in sizes {
            total = total.zip(self.syms.constant(s)).and_then(|(a, b)| a.checked_mul(b));
        }
        total
    }

    fn reduced_type(
        &mut self,
        op: Reduction,
        t: &TensorType,
        resolved: &ResolvedPattern,
        input: &PatternSide,
        output: &PatternSide,
        out_axes: Vec<Axis>,
    ) -> TensorType {
        let out_names: Vec<&str> = side_names(output).into_iter().map(|i| i.name.as_str()).collect();
        let mut pool: Vec<u64> = side_numbers(output).into_iter().map(|(n, _)| n).collect();
        let domain_pos = t.kind.domain().and_then(|d| t.axis_position(d));
        let mut reduced_sizes = Vec::new();
        let mut other_sizes = Vec::new();
        for (p, axis) in resolved.inputs[0].iter().enumerate() {
            for e in axis {
                let kept = match &e.name {
                    Some(n) => out_names.contains(&n.as_str()),
                    None => match self.syms.constant(e.size).and_then(|v| pool.iter().position(|&m| m == v)) {
                        Some(i) => {
                            pool.remove(i);
                            true
                        }
                        None => false,
                    },
                };
                if !kept {
                    reduced_sizes.push(e.size);
                    if Some(p) != domain_pos {
                        other_sizes.push(e.size);
                    }
                }
            }
        }
        let domain = domain_pos.map(|p| match &input.entries[p] {
            AxisEntry::Name(id) if out_names.contains(&id.name.as_str()) => {
                if output.entries.iter().any(|e| matches!(e, AxisEntry::Name(o) if o.name == id.name)) {
                    DomainFate::Kept(id.name.clone())
                } else {
                    DomainFate::Grouped
                }
            }
            AxisEntry::Name(_) => DomainFate::Reduced,
            _ => DomainFate::Grouped,
        });
        let count = self.count_of(reduced_sizes.into_iter());
        let other = self.count_of(other_sizes.into_iter());
        reduction_type(op, t, out_axes, count, other, domain)
    }
}

/// The names bound while checking one pattern (committed to scope only when it checks).
struct Env {
    bound: Vec<(String, Size)>,
    keywords: Vec<(String, Size)>,
}

impl Env {
    fn lookup(&self, c: &FnChecker<'_>, name: &str) -> Option<Size> {
        c.sizes.get(name).copied().or_else(|| self.bound.iter().find(|(n, _)| n == name).map(|(_, s)| *s))
    }
}

/// What a pattern does to the domain axis of a Logit/Prob/LogProb operand.
pub(super) enum DomainFate {
    /// It survives under this name.
    Kept(String),
    /// It is reduced away.
    Reduced,
    /// It is split or grouped with other axes.
    Grouped,
}

/// The kind after a pattern that moves axes: the domain follows its axis's new name.
fn carried_kind(t: &TensorType, input: &PatternSide, output: &PatternSide) -> Kind {
    let Some(p) = t.kind.domain().and_then(|d| t.axis_position(d)) else { return Kind::Plain };
    match input.entries.get(p) {
        Some(AxisEntry::Name(id)) if output.entries.iter().any(|e| matches!(e, AxisEntry::Name(o) if o.name == id.name)) => t.kind.with_domain(id.name.clone()),
        _ => Kind::Plain,
    }
}

/// The element type a reduction gives (LANGUAGE.md section 9).
pub(super) fn reduction_type(op: Reduction, t: &TensorType, axes: Vec<Axis>, count: Option<u64>, other: Option<u64>, domain: Option<DomainFate>) -> TensorType {
    let range = t.range.unwrap_or(Range::new(0.0, 1.0));
    let summed = range.sum_over(count);
    let plain = |dtype: DType, range: Option<Range>| TensorType { dtype, kind: Kind::Plain, axes: axes.clone(), range };
    if t.dtype == DType::Bool {
        return match op {
            Reduction::Sum => plain(DType::I64, Some(Range::new(0.0, count.map_or(f64::INFINITY, |c| c as f64)))),
            Reduction::Mean => plain(DType::F32, Some(Range::new(0.0, 1.0))),
            Reduction::Max | Reduction::Min => plain(DType::Bool, None),
            Reduction::Prod => plain(DType::I64, Some(Range::new(0.0, 1.0))),
        };
    }
    let dtype = if op == Reduction::Mean { t.dtype.to_float() } else { t.dtype };
    let reduced_range = match op {
        Reduction::Sum => summed,
        Reduction::Mean | Reduction::Max | Reduction::Min => range,
        Reduction::Prod => range.prod(),
    };
    let kind = match (&domain, op, &t.kind) {
        (Some(DomainFate::Kept(name)), Reduction::Max | Reduction::Min, k) => k.with_domain(name.clone()),
        (Some(DomainFate::Kept(name)), Reduction::Mean, Kind::Prob(_)) => Kind::Prob(name.clone()),
        (Some(DomainFate::Reduced), Reduction::Sum, Kind::Prob(_)) => {
            let c = other.map_or(f64::INFINITY, |c| c as f64);
            let lo = if other.is_some() { c } else { 1.0 };
            return plain(dtype, Some(Range::new(lo, c)));
        }
        _ => Kind::Plain,
    };
    TensorType { dtype, kind, axes, range: Some(reduced_range) }
}

/// Where split's number of results stands in the resolved input: (axis, part).
fn split_position(resolved: &ResolvedPattern, count: u64, syms: &super::sizes::Symbols) -> (usize, usize) {
    let output_numbers: Vec<u64> = resolved.output.iter().flatten().filter(|e| e.name.is_none()).filter_map(|e| syms.constant(e.size)).collect();
    for (a, axis) in resolved.inputs[0].iter().enumerate() {
        for (p, e) in axis.iter().enumerate() {
            if e.name.is_none() && syms.constant(e.size) == Some(count) && !output_numbers.contains(&count) {
                return (a, p);
            }
        }
    }
    (0, 0)
}
