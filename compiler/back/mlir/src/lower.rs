//! Lowering out of nax's dialect: one rewrite pattern per op of
//! `dialects/nax.irdl.mlir`, applied by MLIR's greedy driver, each turning
//! its op into the LLVM dialect (an element's address by `getelementptr
//! inbounds`, then `llvm.load`, `llvm.store` or `llvm.intr.prefetch`).
//! What a pattern cannot build it leaves in place, and the module then
//! fails to translate: reported as an internal error, never a crash.

use melior::Context;
use melior::ir::attribute::{DenseI32ArrayAttribute, IntegerAttribute, TypeAttribute};
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRef};
use melior::ir::r#type::IntegerType;
use melior::ir::{Attribute, Identifier, Location, Type, TypeLike, Value, ValueLike};
use melior::{PatternRewriter, RewritePattern, RewritePatternSet, create_op_rewrite_pattern};
use mlir_sys::{MlirOperation, MlirPatternRewriter, mlirShapedTypeGetElementType};

/// `getelementptr`'s `inbounds` flag (with the `nusw` it implies).
const INBOUNDS: i64 = 3;

/// The patterns that lower every op of the `nax` dialect.
pub fn patterns(context: &Context) -> RewritePatternSet<'_> {
    let set = RewritePatternSet::new(context);
    set.add(pattern(context, "nax.load", &["llvm.getelementptr", "llvm.load"], lower_load));
    set.add(pattern(context, "nax.store", &["llvm.getelementptr", "llvm.store"], lower_store));
    set.add(pattern(context, "nax.size", &["llvm.getelementptr", "llvm.load"], lower_size));
    set.add(pattern(context, "nax.prefetch", &["llvm.getelementptr", "llvm.intr.prefetch"], lower_prefetch));
    set
}

/// A rewrite of one op: builds its replacement before it, and gives the
/// values that replace its results, or `None` when it cannot.
type Rewrite = for<'c, 'a> fn(&'c Context, &Rewriter<'c, 'a>, OperationRef<'c, 'a>) -> Option<Vec<Value<'c, 'a>>>;

/// The rewriter of a pattern's callback, with what building ops needs.
struct Rewriter<'c, 'a> {
    rewriter: PatternRewriter,
    location: Location<'c>,
    _op: std::marker::PhantomData<&'a ()>,
}

impl<'c: 'a, 'a> Rewriter<'c, 'a> {
    /// Inserts an op before the matched one; its first result, if any.
    fn insert(&self, builder: OperationBuilder<'c>) -> Option<Option<Value<'c, 'a>>> {
        let op = builder.build().ok()?;
        let base = self.rewriter.as_rewriter_base();
        let inserted = base.insert(op);
        // SAFETY: the op now lives in the matched op's block, as long as it.
        let raw = inserted.to_raw();
        let op: OperationRef<'c, 'a> = unsafe { OperationRef::from_raw(raw) };
        Some(op.result(0).ok().map(Into::into))
    }

    /// The address of element `index` of `base`, elements of `element`;
    /// `inbounds` unless it is only prefetched.
    fn element(&self, context: &'c Context, base: Value<'c, 'a>, index: Value<'c, 'a>, element: Type<'c>, inbounds: bool) -> Option<Value<'c, 'a>> {
        let mut attributes = vec![
            (Identifier::new(context, "rawConstantIndices"), DenseI32ArrayAttribute::new(context, &[i32::MIN]).into()),
            (Identifier::new(context, "elem_type"), TypeAttribute::new(element).into()),
        ];
        if inbounds {
            attributes.push((Identifier::new(context, "noWrapFlags"), i32_attribute(context, INBOUNDS)));
        }
        let gep =
            OperationBuilder::new("llvm.getelementptr", self.location).add_attributes(&attributes).add_operands(&[base, index]).add_results(&[base.r#type()]);
        self.insert(gep)?
    }
}

fn i32_attribute(context: &Context, v: i64) -> Attribute<'_> {
    IntegerAttribute::new(IntegerType::new(context, 32).into(), v).into()
}

/// A pattern for ops named `root` that runs `rewrite`.
fn pattern(context: &Context, root: &str, generated: &[&str], rewrite: Rewrite) -> RewritePattern {
    let callback = move |_pattern, op: MlirOperation, rewriter: MlirPatternRewriter| {
        // SAFETY: MLIR calls back with a live op of its context and a rewriter
        // positioned before it, both valid for the call.
        let (op, rewriter) = unsafe { (OperationRef::from_raw(op), PatternRewriter::from_raw(rewriter)) };
        // `to_ref` reinterprets the `ContextRef` it borrows as a `Context`
        // (both are one pointer): the `ContextRef` must outlive the borrow.
        let context_ref = op.context();
        // SAFETY: `context_ref` lives until the end of the call, and the
        // context it points to outlives the op.
        let context = unsafe { context_ref.to_ref() };
        let r = Rewriter { rewriter, location: op.location(), _op: std::marker::PhantomData };
        match rewrite(context, &r, op) {
            Some(values) => {
                rewriter.as_rewriter_base().replace_op_with_values(op, &values);
                true
            }
            None => false,
        }
    };
    create_op_rewrite_pattern(root, 1, context, callback, generated)
}

/// The scalar element type of a scalar or vector type.
fn element_type(t: Type<'_>) -> Type<'_> {
    if t.is_vector() {
        // SAFETY: `t` is a vector type, a shaped type.
        unsafe { Type::from_raw(mlirShapedTypeGetElementType(t.to_raw())) }
    } else {
        t
    }
}

/// The alignment of an access of type `t`: one element's, for a vector
/// (panels and rows start anywhere); the type's own otherwise (none given).
fn alignment<'c>(context: &'c Context, t: Type<'c>) -> Vec<(Identifier<'c>, Attribute<'c>)> {
    if !t.is_vector() {
        return Vec::new();
    }
    let element = element_type(t);
    let bytes = if element.is_integer() {
        IntegerType::try_from(element).map_or(8, |i| i.width().div_ceil(8))
    } else if element.is_f64() {
        8
    } else {
        4
    };
    vec![(Identifier::new(context, "alignment"), IntegerAttribute::new(IntegerType::new(context, 64).into(), i64::from(bytes)).into())]
}

fn lower_load<'c, 'a>(context: &'c Context, r: &Rewriter<'c, 'a>, op: OperationRef<'c, 'a>) -> Option<Vec<Value<'c, 'a>>> {
    let (base, index) = (op.operand(0).ok()?, op.operand(1).ok()?);
    let t = op.result(0).ok()?.r#type();
    let address = r.element(context, base, index, element_type(t), true)?;
    let load = OperationBuilder::new("llvm.load", r.location).add_operands(&[address]).add_attributes(&alignment(context, t)).add_results(&[t]);
    Some(vec![r.insert(load)??])
}

fn lower_store<'c, 'a>(context: &'c Context, r: &Rewriter<'c, 'a>, op: OperationRef<'c, 'a>) -> Option<Vec<Value<'c, 'a>>> {
    let (value, base, index) = (op.operand(0).ok()?, op.operand(1).ok()?, op.operand(2).ok()?);
    let t = value.r#type();
    let address = r.element(context, base, index, element_type(t), true)?;
    r.insert(OperationBuilder::new("llvm.store", r.location).add_operands(&[value, address]).add_attributes(&alignment(context, t)))?;
    Some(Vec::new())
}

fn lower_size<'c, 'a>(context: &'c Context, r: &Rewriter<'c, 'a>, op: OperationRef<'c, 'a>) -> Option<Vec<Value<'c, 'a>>> {
    let sizes = op.operand(0).ok()?;
    let slot = IntegerAttribute::try_from(op.attribute("slot").ok()?).ok()?.value();
    let i64t: Type = IntegerType::new(context, 64).into();
    let constant = OperationBuilder::new("llvm.mlir.constant", r.location)
        .add_attributes(&[(Identifier::new(context, "value"), IntegerAttribute::new(i64t, slot).into())])
        .add_results(&[i64t]);
    let slot = r.insert(constant)??;
    let address = r.element(context, sizes, slot, i64t, true)?;
    Some(vec![r.insert(OperationBuilder::new("llvm.load", r.location).add_operands(&[address]).add_results(&[i64t]))??])
}

fn lower_prefetch<'c, 'a>(context: &'c Context, r: &Rewriter<'c, 'a>, op: OperationRef<'c, 'a>) -> Option<Vec<Value<'c, 'a>>> {
    let (base, index) = (op.operand(0).ok()?, op.operand(1).ok()?);
    let element = TypeAttribute::try_from(op.attribute("element").ok()?).ok()?.value();
    let write = IntegerAttribute::try_from(op.attribute("write").ok()?).ok()?.value();
    // Not `inbounds`: the address may lie past the buffer (a prefetch never faults).
    let address = r.element(context, base, index, element, false)?;
    // Kept in every cache level (hint 3), as data (cache 1).
    let prefetch = OperationBuilder::new("llvm.intr.prefetch", r.location).add_operands(&[address]).add_attributes(&[
        (Identifier::new(context, "rw"), i32_attribute(context, write)),
        (Identifier::new(context, "hint"), i32_attribute(context, 3)),
        (Identifier::new(context, "cache"), i32_attribute(context, 1)),
    ]);
    r.insert(prefetch)?;
    Some(Vec::new())
}
