//! The derivatives of elementwise nodes (operators and built-ins), with
//! LANGUAGE.md section 15's conventions where a function is not smooth:
//! `relu'(0) = abs'(0) = 0`, `maximum`/`minimum` halve between equal
//! operands, `clamp` passes inside its bounds (bounds included) and gives
//! its bounds nothing, `where` and `masked_fill` give the operand they did
//! not pick exactly zero, `pow` as PyTorch (no derivative by `x` where the
//! exponent is 0, none by the exponent where `x` is 0 and the exponent not
//! negative). Each local derivative is computed over the node's axes, the
//! operands read through their index maps; the contribution is then
//! summed back to each operand's shape.

use super::{Arg, Reverse, adjoint_type};
use crate::LowerError;
use nax_ir::{MapFn, Type};
use nax_ops::{BinaryOp, Elementwise as E, UnaryOp};
use nax_values::TensorType;
use petgraph::graph::NodeIndex;
use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// What an operand receives, over the node's axes.
enum Local {
    /// `g * d` (zero where `g` is zero): the local derivative `d`.
    Scale(Arg),
    /// The contribution itself.
    Pass(NodeIndex),
}

/// An operand's local derivative `d`, a node of the result's axes (`r`).
fn scaled(d: NodeIndex, r: &TensorType) -> Vec<Option<Local>> {
    vec![Some(Local::Scale((d, (0..r.rank()).collect())))]
}

impl Reverse<'_> {
    pub(super) fn map_rule(
        &mut self,
        func: MapFn,
        maps: &[Vec<usize>],
        n: NodeIndex,
        g: NodeIndex,
        operands: &[NodeIndex],
        needs: &[bool],
    ) -> Result<Vec<Option<NodeIndex>>, LowerError> {
        let r = adjoint_type(&self.tensor(n)?);
        let args: Vec<Arg> = operands.iter().zip(maps).map(|(&o, m)| (o, m.clone())).collect();
        let need = |k: usize| needs.get(k).copied().unwrap_or(false);
        let locals = match func {
            MapFn::Unary(UnaryOp::Neg) => vec![Some(Local::Pass(self.negate(g, &r)))],
            MapFn::Binary(BinaryOp::Add) => vec![Some(Local::Pass(g)), Some(Local::Pass(g))],
            MapFn::Binary(BinaryOp::Sub) => vec![Some(Local::Pass(g)), Some(Local::Pass(self.negate(g, &r)))],
            MapFn::Binary(BinaryOp::Mul) => {
                vec![Some(Local::Scale(args[1].clone())), Some(Local::Scale(args[0].clone()))]
            }
            MapFn::Binary(BinaryOp::Div) => {
                // 1 / y, and -z / y.
                let one = self.lit(1.0);
                let dx = self.op(BinaryOp::Div, one, args[1].clone(), &r);
                let quotient = self.op(BinaryOp::Div, self.here(n), args[1].clone(), &r);
                let dy = self.negate(quotient, &r);
                vec![Some(Local::Scale(self.here(dx))), Some(Local::Scale(self.here(dy)))]
            }
            MapFn::Builtin(f) => self.builtin(f, &args, n, g, &r),
            // Comparisons, logic and `@` (a contraction by then) carry nothing.
            MapFn::Unary(UnaryOp::Not) | MapFn::Binary(_) => Vec::new(),
        };
        let mut parts = Vec::with_capacity(operands.len());
        for k in 0..operands.len() {
            let contribution = match locals.get(k) {
                Some(_) if !need(k) => None,
                Some(Some(Local::Scale(d))) => Some(self.scale_by(g, d.clone(), &r)),
                Some(Some(Local::Pass(c))) => Some(*c),
                _ => None,
            };
            parts.push(match contribution {
                Some(c) if matches!(self.g.graph[operands[k]].ty, Type::Tensor(_)) => Some(self.unbroadcast(c, &r, &maps[k], operands[k])?),
                _ => None,
            });
        }
        Ok(parts)
    }

    fn op(&mut self, op: BinaryOp, a: Arg, b: Arg, r: &TensorType) -> NodeIndex {
        self.map(MapFn::Binary(op), &[a, b], r)
    }

    fn f(&mut self, f: E, a: Arg, r: &TensorType) -> NodeIndex {
        self.map(MapFn::Builtin(f), &[a], r)
    }

    fn negate(&mut self, n: NodeIndex, r: &TensorType) -> NodeIndex {
        self.same_shape(MapFn::Unary(UnaryOp::Neg), &[n], r)
    }

    fn lit(&mut self, v: f64) -> Arg {
        (self.float(v), Vec::new())
    }

    /// `g * d` (`d` read through its map), zero wherever `g` is zero.
    fn scale_by(&mut self, g: NodeIndex, d: Arg, r: &TensorType) -> NodeIndex {
        let zero = self.lit(0.0);
        let gg = self.here(g);
        let vanishes = self.op(BinaryOp::Eq, gg.clone(), zero.clone(), r);
        let product = self.op(BinaryOp::Mul, gg, d, r);
        self.pick(self.here(vanishes), zero, self.here(product), r)
    }

    /// `where(mask, a, b)` of arguments.
    fn pick(&mut self, mask: Arg, a: Arg, b: Arg, r: &TensorType) -> NodeIndex {
        self.map(MapFn::Builtin(E::Where), &[mask, a, b], r)
    }

    /// The local derivatives of a built-in's operands (`args`), the node
    /// being `z` and its adjoint `g`.
    fn builtin(&mut self, f: E, args: &[Arg], z: NodeIndex, g: NodeIndex, r: &TensorType) -> Vec<Option<Local>> {
        let x = args[0].clone();
        let (zz, gg) = (self.here(z), self.here(g));
        let zero = self.lit(0.0);
        let one = self.lit(1.0);
        match f {
            E::Exp => vec![Some(Local::Scale(zz))],
            E::Log => scaled(self.op(BinaryOp::Div, one, x, r), r),
            E::Log1p => {
                let shifted = self.op(BinaryOp::Add, x, one.clone(), r);
                let shifted = self.here(shifted);
                scaled(self.op(BinaryOp::Div, one, shifted, r), r)
            }
            E::Expm1 => scaled(self.op(BinaryOp::Add, zz, one, r), r),
            E::Sqrt => {
                let half = self.lit(0.5);
                scaled(self.op(BinaryOp::Div, half, zz, r), r)
            }
            E::Rsqrt => {
                // -z^3 / 2
                let square = self.op(BinaryOp::Mul, zz.clone(), zz.clone(), r);
                let cube = self.op(BinaryOp::Mul, self.here(square), zz, r);
                let factor = self.lit(-0.5);
                scaled(self.op(BinaryOp::Mul, self.here(cube), factor, r), r)
            }
            E::Abs => scaled(self.f(E::Sign, x, r), r),
            E::Sin => scaled(self.f(E::Cos, x, r), r),
            E::Cos => {
                let sin = self.f(E::Sin, x, r);
                scaled(self.negate(sin, r), r)
            }
            E::Tanh => {
                let square = self.op(BinaryOp::Mul, zz.clone(), zz, r);
                scaled(self.op(BinaryOp::Sub, one, self.here(square), r), r)
            }
            E::Erf => scaled(self.gaussian(x, 2.0 / PI.sqrt(), 1.0, r), r),
            E::Sigmoid => {
                let rest = self.op(BinaryOp::Sub, one, zz.clone(), r);
                scaled(self.op(BinaryOp::Mul, zz, self.here(rest), r), r)
            }
            E::Gelu => {
                // Φ(x) + x φ(x), with Φ(x) = (1 + erf(x / √2)) / 2.
                let k = self.lit(FRAC_1_SQRT_2);
                let argument = self.op(BinaryOp::Mul, x.clone(), k, r);
                let erf = self.f(E::Erf, self.here(argument), r);
                let shifted = self.op(BinaryOp::Add, self.here(erf), one, r);
                let half = self.lit(0.5);
                let cdf = self.op(BinaryOp::Mul, self.here(shifted), half, r);
                let density = self.gaussian(x.clone(), 1.0 / (2.0 * PI).sqrt(), 0.5, r);
                let tail = self.op(BinaryOp::Mul, x, self.here(density), r);
                scaled(self.op(BinaryOp::Add, self.here(cdf), self.here(tail), r), r)
            }
            E::Silu => {
                // s (1 + x (1 - s)), with s = sigmoid(x).
                let s = self.f(E::Sigmoid, x.clone(), r);
                let rest = self.op(BinaryOp::Sub, one.clone(), self.here(s), r);
                let inner = self.op(BinaryOp::Mul, x, self.here(rest), r);
                let factor = self.op(BinaryOp::Add, one, self.here(inner), r);
                scaled(self.op(BinaryOp::Mul, self.here(s), self.here(factor), r), r)
            }
            E::Relu => {
                let positive = self.op(BinaryOp::Gt, x, zero.clone(), r);
                vec![Some(Local::Pass(self.pick(self.here(positive), gg, zero, r)))]
            }
            E::Softplus => {
                // x itself above the threshold; sigmoid(x) below.
                let s = self.f(E::Sigmoid, x.clone(), r);
                let below = self.scale_by(g, self.here(s), r);
                let threshold = self.lit(nax_ops::SOFTPLUS_THRESHOLD);
                let above = self.op(BinaryOp::Gt, x, threshold, r);
                vec![Some(Local::Pass(self.pick(self.here(above), gg, self.here(below), r)))]
            }
            E::Pow => {
                let y = args[1].clone();
                // By x: y x^(y - 1), none where y is 0.
                let lowered = self.op(BinaryOp::Sub, y.clone(), one, r);
                let power = self.map(MapFn::Builtin(E::Pow), &[x.clone(), self.here(lowered)], r);
                let dx = self.op(BinaryOp::Mul, y.clone(), self.here(power), r);
                let by_x = self.scale_by(g, self.here(dx), r);
                let constant = self.op(BinaryOp::Eq, y.clone(), zero.clone(), r);
                let by_x = self.pick(self.here(constant), zero.clone(), self.here(by_x), r);
                // By y: z log(x), none where x is 0 and y is not negative.
                let log = self.f(E::Log, x.clone(), r);
                let dy = self.op(BinaryOp::Mul, zz, self.here(log), r);
                let by_y = self.scale_by(g, self.here(dy), r);
                let base_zero = self.op(BinaryOp::Eq, x, zero.clone(), r);
                let not_negative = self.op(BinaryOp::Ge, y, zero.clone(), r);
                let guarded = self.pick(self.here(not_negative), zero, self.here(by_y), r);
                let by_y = self.pick(self.here(base_zero), self.here(guarded), self.here(by_y), r);
                vec![Some(Local::Pass(by_x)), Some(Local::Pass(by_y))]
            }
            E::Maximum | E::Minimum => {
                let y = args[1].clone();
                let wins = if f == E::Maximum { BinaryOp::Gt } else { BinaryOp::Lt };
                let half = self.lit(0.5);
                let shared = self.op(BinaryOp::Mul, gg.clone(), half, r);
                let tie = self.op(BinaryOp::Eq, x.clone(), y.clone(), r);
                let tied = self.pick(self.here(tie), self.here(shared), zero, r);
                let x_wins = self.op(wins, x.clone(), y.clone(), r);
                let y_wins = self.op(wins, y, x, r);
                let to_x = self.pick(self.here(x_wins), gg.clone(), self.here(tied), r);
                let to_y = self.pick(self.here(y_wins), gg, self.here(tied), r);
                vec![Some(Local::Pass(to_x)), Some(Local::Pass(to_y))]
            }
            E::Where => {
                // where(m, a, b): a where m holds, b elsewhere; the mask nothing.
                let to_a = self.pick(x.clone(), gg.clone(), zero.clone(), r);
                let to_b = self.pick(x, zero, gg, r);
                vec![None, Some(Local::Pass(to_a)), Some(Local::Pass(to_b))]
            }
            E::MaskedFill => {
                // masked_fill(x, m, v): x where m does not hold.
                let kept = self.pick(args[1].clone(), zero, gg, r);
                vec![Some(Local::Pass(kept))]
            }
            E::Clamp => {
                // clamp(x, lo, hi): x inside its bounds, bounds included; the bounds nothing.
                let above = self.op(BinaryOp::Ge, x.clone(), args[1].clone(), r);
                let below = self.op(BinaryOp::Le, x, args[2].clone(), r);
                let inner = self.pick(self.here(below), gg, zero.clone(), r);
                vec![Some(Local::Pass(self.pick(self.here(above), self.here(inner), zero, r)))]
            }
            E::ToFloat => vec![Some(Local::Pass(g))],
            E::Floor | E::Ceil | E::Round | E::Sign | E::ToInt => Vec::new(),
        }
    }

    /// `c exp(-k x^2)`.
    fn gaussian(&mut self, x: Arg, c: f64, k: f64, r: &TensorType) -> NodeIndex {
        let square = self.op(BinaryOp::Mul, x.clone(), x, r);
        let factor = self.lit(-k);
        let exponent = self.op(BinaryOp::Mul, self.here(square), factor, r);
        let e = self.f(E::Exp, self.here(exponent), r);
        let scale = self.lit(c);
        self.op(BinaryOp::Mul, self.here(e), scale, r)
    }
}
