//! The C math functions compiled kernels call (f64 `exp`, `sin`, `pow`,
//! ...: the f32 math is inline code), implemented once, here, by the
//! `libm` crate (a port of musl's, in Rust). Every way of running native
//! code binds the kernels' calls to these: the JITs map each name to
//! [`address`], and an AOT library links its own copies (`nax_libm_NAME`),
//! so JIT and AOT give the same numbers, on every machine, whatever C
//! library it has.

/// The functions' C names, all `double f(double)` but `pow`, `double
/// pow(double, double)`.
pub const NAMES: [&str; 9] = ["exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf", "pow"];

/// `e^x`.
pub extern "C" fn exp(x: f64) -> f64 {
    ::libm::exp(x)
}

/// The natural logarithm.
pub extern "C" fn log(x: f64) -> f64 {
    ::libm::log(x)
}

/// `log(1 + x)`, accurate near 0.
pub extern "C" fn log1p(x: f64) -> f64 {
    ::libm::log1p(x)
}

/// `e^x - 1`, accurate near 0.
pub extern "C" fn expm1(x: f64) -> f64 {
    ::libm::expm1(x)
}

/// The sine.
pub extern "C" fn sin(x: f64) -> f64 {
    ::libm::sin(x)
}

/// The cosine.
pub extern "C" fn cos(x: f64) -> f64 {
    ::libm::cos(x)
}

/// The hyperbolic tangent.
pub extern "C" fn tanh(x: f64) -> f64 {
    ::libm::tanh(x)
}

/// The error function.
pub extern "C" fn erf(x: f64) -> f64 {
    ::libm::erf(x)
}

/// `x^y`.
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    ::libm::pow(x, y)
}

/// The address of the implementation of one of [`NAMES`], with its C
/// signature; `None` for another name.
pub fn address(name: &str) -> Option<*const u8> {
    Some(match name {
        "exp" => exp as *const u8,
        "log" => log as *const u8,
        "log1p" => log1p as *const u8,
        "expm1" => expm1 as *const u8,
        "sin" => sin as *const u8,
        "cos" => cos as *const u8,
        "tanh" => tanh as *const u8,
        "erf" => erf as *const u8,
        "pow" => pow as *const u8,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_name_has_an_implementation() {
        for name in super::NAMES {
            assert!(super::address(name).is_some(), "{name}");
        }
        assert!(super::address("lgamma").is_none());
    }
}
