//! Value ranges by interval arithmetic (LANGUAGE.md section 4, "Ranges").

/// An inclusive interval `[lo, hi]`; bounds may be infinite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
}

/// `a * b` where `0 * inf` counts as 0, as the spec says for bounds.
fn bound_mul(a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 { 0.0 } else { a * b }
}

fn clean(x: f64, if_nan: f64) -> f64 {
    if x.is_nan() { if_nan } else { x }
}

/// A bound as nax prints it: `inf`, `-inf` or the number.
pub fn bound_text(x: f64) -> String {
    if x == f64::INFINITY {
        "inf".into()
    } else if x == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        format!("{x}")
    }
}

impl std::fmt::Display for Range {
    /// `[lo, hi]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}, {}]", bound_text(self.lo), bound_text(self.hi))
    }
}

impl Range {
    pub const FULL: Range = Range { lo: f64::NEG_INFINITY, hi: f64::INFINITY };

    pub fn new(lo: f64, hi: f64) -> Range {
        Range { lo: clean(lo, f64::NEG_INFINITY), hi: clean(hi, f64::INFINITY) }
    }

    pub fn exact(x: f64) -> Range {
        Range::new(x, x)
    }

    pub fn contains_negatives(self) -> bool {
        self.lo < 0.0
    }

    /// The range of `x * x` for one value `x`: never negative.
    pub fn square(self) -> Range {
        let m = self * self;
        if self.lo <= 0.0 && self.hi >= 0.0 { Range::new(0.0, m.hi) } else { Range::new(m.lo.max(0.0), m.hi) }
    }

    pub fn union(self, o: Range) -> Range {
        Range::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }

    /// The range of a non-decreasing function applied elementwise.
    pub fn map_increasing(self, f: impl Fn(f64) -> f64) -> Range {
        Range::new(f(self.lo), f(self.hi))
    }

    /// `sum` over `count` elements (`None`: known only at run time).
    pub fn sum_over(self, count: Option<u64>) -> Range {
        match count {
            Some(c) => {
                let c = c as f64;
                Range::new(bound_mul(self.lo, c), bound_mul(self.hi, c))
            }
            None => Range::new(
                if self.lo == 0.0 {
                    0.0
                } else if self.lo < 0.0 {
                    f64::NEG_INFINITY
                } else {
                    self.lo
                },
                if self.hi == 0.0 {
                    0.0
                } else if self.hi > 0.0 {
                    f64::INFINITY
                } else {
                    self.hi
                },
            ),
        }
    }

    /// `prod` keeps `[0, 1]` and `[0, inf]`, otherwise `[-inf, inf]`.
    pub fn prod(self) -> Range {
        if self.lo >= 0.0 && self.hi <= 1.0 {
            Range::new(0.0, 1.0)
        } else if self.lo >= 0.0 {
            Range::new(0.0, f64::INFINITY)
        } else {
            Range::FULL
        }
    }
}

impl std::ops::Add for Range {
    type Output = Range;
    fn add(self, o: Range) -> Range {
        Range::new(self.lo + o.lo, self.hi + o.hi)
    }
}

impl std::ops::Sub for Range {
    type Output = Range;
    fn sub(self, o: Range) -> Range {
        Range::new(self.lo - o.hi, self.hi - o.lo)
    }
}

impl std::ops::Neg for Range {
    type Output = Range;
    fn neg(self) -> Range {
        Range::new(-self.hi, -self.lo)
    }
}

impl std::ops::Mul for Range {
    type Output = Range;
    fn mul(self, o: Range) -> Range {
        let c = [bound_mul(self.lo, o.lo), bound_mul(self.lo, o.hi), bound_mul(self.hi, o.lo), bound_mul(self.hi, o.hi)];
        Range::new(c.iter().copied().fold(f64::INFINITY, f64::min), c.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    }
}

impl std::ops::Div for Range {
    type Output = Range;
    /// A divisor whose range holds 0 gives `[-inf, inf]`.
    fn div(self, o: Range) -> Range {
        if o.lo <= 0.0 && o.hi >= 0.0 {
            return Range::FULL;
        }
        self * Range::new(1.0 / o.hi, 1.0 / o.lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_arithmetic() {
        let s = Range::new(0.0, 1.0);
        assert_eq!(s * Range::exact(2.0) - Range::exact(1.0), Range::new(-1.0, 1.0));
        assert_eq!(Range::exact(1.0) / s, Range::FULL);
        assert_eq!(Range::new(0.0, f64::INFINITY) + Range::exact(1.0), Range::new(1.0, f64::INFINITY));
        assert_eq!(Range::FULL.square(), Range::new(0.0, f64::INFINITY));
        assert_eq!(Range::new(0.0, 1.0).sum_over(Some(8)), Range::new(0.0, 8.0));
        assert_eq!(Range::new(0.0, 1.0).sum_over(None), Range::new(0.0, f64::INFINITY));
        assert_eq!(Range::new(0.0, 0.0) * Range::FULL, Range::exact(0.0));
    }
}
