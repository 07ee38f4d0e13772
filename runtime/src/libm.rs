//! The C math functions compiled kernels call (f64 `exp`, `sin`, `pow`,
//! ...: the f32 math is inline code), implemented once, here, by the
//! `libm` crate (a port of musl's, in Rust). Every way of running native
//! code binds the kernels' calls to these: the JITs map each name to
//! [`address`], and an AOT library links its own copies (`nax_libm_NAME`),
//! so JIT and AOT give the same numbers, on every machine, whatever C
//! library it has.

/// Defines each function (`extern "C"`, the `libm` crate's), the list of
/// their C names and [`address`].
macro_rules! functions {
    ($($(#[$doc:meta])* $name:ident($($x:ident),*)),* $(,)?) => {
        /// The functions' C names, all `double f(double)` but `pow`,
        /// `double pow(double, double)`.
        pub const NAMES: [&str; [$(stringify!($name)),*].len()] = [$(stringify!($name)),*];

        $(
            $(#[$doc])*
            pub extern "C" fn $name($($x: f64),*) -> f64 {
                ::libm::$name($($x),*)
            }
        )*

        /// The address of the implementation of one of [`NAMES`], with its
        /// C signature; `None` for another name.
        pub fn address(name: &str) -> Option<*const u8> {
            match name {
                $(stringify!($name) => Some($name as *const u8),)*
                _ => None,
            }
        }
    };
}

functions!(
    /// `e^x`.
    exp(x),
    /// The natural logarithm.
    log(x),
    /// `log(1 + x)`, accurate near 0.
    log1p(x),
    /// `e^x - 1`, accurate near 0.
    expm1(x),
    /// The sine.
    sin(x),
    /// The cosine.
    cos(x),
    /// The error function.
    erf(x),
    /// The complementary error function, `1 - erf(x)` without its cancellation.
    erfc(x),
    /// `x^y`.
    pow(x, y),
);

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
