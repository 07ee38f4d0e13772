//! The C entries (`nax_capi_*`) the generated `NAME_*` functions call,
//! each with the generated library's [`Library`]: open a model (whole, or
//! a rank's part of a library split over a mesh), close it, call a
//! function of one result or of several (with where each result lies).
//! Each runs under [`guard`], so nothing unwinds across the C boundary.

use crate::collectives::NaxCollectives;
use crate::dlpack::{NaxArg, NaxResult, NaxShardResult};
use crate::library::Library;
use crate::model::{Model, ShardOptions};
use crate::status::{self, Failure, guard};
use std::ffi::{CStr, c_char, c_int};

/// `NAME_open`.
///
/// # Safety
/// `library` is the generated library's descriptor; `weights_path` is NULL
/// or a NUL-terminated string; `model` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nax_capi_open(library: *const Library, weights_path: *const c_char, threads: i32, model: *mut *mut Model) -> c_int {
    guard(|| {
        if model.is_null() {
            return Err(Failure::argument("NULL `model`: pass the address of a model pointer to fill"));
        }
        // SAFETY: the caller's contract.
        let library = unsafe { library.as_ref() }.ok_or_else(|| Failure::internal("NULL library descriptor"))?;
        // SAFETY: as above.
        let opened = unsafe { Model::open(library, weights_path, threads) }?;
        // SAFETY: `model` is writable (the caller's contract).
        unsafe { *model = Box::into_raw(Box::new(opened)) };
        Ok(())
    })
}

/// `NAME_open_sharded`: the rank's part of a library built split over a
/// mesh, its collectives run by the host's engine.
///
/// # Safety
/// As [`nax_capi_open`]; `options` NULL or readable; `collectives` NULL or
/// a table whose functions are callable as the ABI says, its context alive
/// until the model is closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nax_capi_open_sharded(
    library: *const Library,
    weights_path: *const c_char,
    options: *const ShardOptions,
    collectives: *const NaxCollectives,
    model: *mut *mut Model,
) -> c_int {
    guard(|| {
        if model.is_null() {
            return Err(Failure::argument("NULL `model`: pass the address of a model pointer to fill"));
        }
        // SAFETY: the caller's contract.
        let library = unsafe { library.as_ref() }.ok_or_else(|| Failure::internal("NULL library descriptor"))?;
        // SAFETY: as above.
        let options = unsafe { options.as_ref() }.copied().unwrap_or_default();
        // SAFETY: as above.
        let collectives =
            unsafe { collectives.as_ref() }.ok_or_else(|| Failure::argument("NULL `collectives`: fill a nax_collectives from the host's engine"))?;
        // SAFETY: as above.
        let opened = unsafe { Model::open_sharded(library, weights_path, options, collectives) }?;
        // SAFETY: `model` is writable (the caller's contract).
        unsafe { *model = Box::into_raw(Box::new(opened)) };
        Ok(())
    })
}

/// `NAME_close`.
///
/// # Safety
/// `model` is NULL or a model `nax_capi_open` gave and not closed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nax_capi_close(model: *mut Model) {
    if !model.is_null() {
        // Dropping joins the model's worker threads; a panic there is caught.
        // SAFETY: the caller's contract: the box is the model's, freed once.
        guard(|| {
            drop(unsafe { Box::from_raw(model) });
            Ok(())
        });
    }
}

/// `NAME_call`: a function of one result.
///
/// # Safety
/// `model` is NULL or an open model; `function` NULL or NUL-terminated;
/// `args` NULL or `nargs` arguments whose pointers are NULL or valid as
/// ABI.md says; `result` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nax_capi_call(model: *const Model, function: *const c_char, args: *const NaxArg, nargs: usize, result: *mut NaxResult) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { call(model, function, args, nargs, result, None) })
}

/// `NAME_call_n`: a function of any number of results (LANGUAGE.md section
/// 14), written to `results[0..nresults)`, `nresults` being exactly the
/// function's count.
///
/// # Safety
/// As [`nax_capi_call`]; `results` NULL or `nresults` writable results.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nax_capi_call_n(
    model: *const Model,
    function: *const c_char,
    args: *const NaxArg,
    nargs: usize,
    results: *mut NaxResult,
    nresults: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { call(model, function, args, nargs, results, Some(nresults)) })
}

/// `NAME_call_sharded`: as `NAME_call_n`, each result with where it lies
/// in the whole result (a rank's block of a sharded function's result).
///
/// # Safety
/// As [`nax_capi_call_n`]; `results` NULL or `nresults` writable results.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nax_capi_call_sharded(
    model: *const Model,
    function: *const c_char,
    args: *const NaxArg,
    nargs: usize,
    results: *mut NaxShardResult,
    nresults: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { call(model, function, args, nargs, results, Some(nresults)) })
}

/// What a call writes into the caller's array: a result, or a result with
/// where it lies.
trait Written {
    fn from_placed(r: NaxShardResult) -> Self;
}

impl Written for NaxResult {
    fn from_placed(r: NaxShardResult) -> NaxResult {
        r.result
    }
}

impl Written for NaxShardResult {
    fn from_placed(r: NaxShardResult) -> NaxShardResult {
        r
    }
}

/// A call through `NAME_call` (`nresults` none: exactly one result),
/// `NAME_call_n` or `NAME_call_sharded`; the results are written only
/// after the call succeeded.
///
/// # Safety
/// As [`nax_capi_call_n`].
unsafe fn call<R: Written>(
    model: *const Model,
    function: *const c_char,
    args: *const NaxArg,
    nargs: usize,
    results: *mut R,
    nresults: Option<usize>,
) -> Result<(), Failure> {
    // SAFETY: the caller's contract.
    let model = unsafe { model.as_ref() }.ok_or_else(|| Failure::argument("NULL `model`: open one with NAME_open"))?;
    if function.is_null() {
        return Err(Failure::argument("NULL `function`: name one of the library's functions"));
    }
    // SAFETY: NUL-terminated (the caller's contract).
    let function = unsafe { CStr::from_ptr(function) }.to_str().map_err(|_| Failure::argument("the function name is not UTF-8"))?;
    let signature = model.signature(function)?;
    let count = signature.results.len();
    match nresults {
        None if count != 1 => {
            return Err(Failure::argument(format!(
                "`{function}` has {count} results ({}): call it with NAME_call_n and {count} nax_result",
                signature.result_names()
            )));
        }
        Some(n) if n != count => {
            return Err(Failure::argument(format!("`{function}` has {count} results ({}), but nresults is {n}", signature.result_names())));
        }
        _ => {}
    }
    if results.is_null() {
        return Err(Failure::argument(match nresults {
            None => "NULL `result`: pass the address of a nax_result to fill".to_string(),
            Some(_) => format!("NULL `results`: pass an array of {count} nax_result to fill"),
        }));
    }
    // Arguments are named parameters, each at most once: more than the
    // function has is refused before the list is read or anything allocated.
    let params = &signature.params;
    if nargs > params.len() {
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        return Err(Failure::argument(format!(
            "`{function}` takes {} arguments ({}), but nargs is {nargs}: an argument is repeated or unknown",
            names.len(),
            names.join(", ")
        )));
    }
    let args: &[NaxArg] = match (args.is_null(), nargs) {
        (_, 0) => &[],
        (true, n) => return Err(Failure::argument(format!("NULL `args` with nargs = {n}"))),
        // SAFETY: `nargs` arguments (the caller's contract).
        (false, n) => unsafe { std::slice::from_raw_parts(args, n) },
    };
    // SAFETY: the arguments' pointers are valid as ABI.md says (the caller's contract).
    let out = unsafe { model.call(function, args) }?;
    for (i, r) in out.into_iter().enumerate() {
        // SAFETY: `results` holds `count` writable results; written only now, after success.
        unsafe { results.add(i).write(R::from_placed(r)) };
    }
    Ok(())
}

/// `NAME_last_error`.
#[unsafe(no_mangle)]
pub extern "C" fn nax_capi_last_error() -> *const c_char {
    status::last_error()
}

/// Defines `nax_libm_NAME` for each of the runtime's math functions: the
/// kernels' calls to the C math library bind to these inside the library,
/// so AOT and JIT give the same numbers.
macro_rules! libm_exports {
    ($($export:ident => $f:ident ( $($x:ident),* )),* $(,)?) => {$(
        #[doc = concat!("The kernels' `", stringify!($f), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $export($($x: f64),*) -> f64 {
            nax_runtime::libm::$f($($x),*)
        }
    )*};
}
libm_exports!(
    nax_libm_exp => exp(x),
    nax_libm_log => log(x),
    nax_libm_log1p => log1p(x),
    nax_libm_expm1 => expm1(x),
    nax_libm_sin => sin(x),
    nax_libm_cos => cos(x),
    nax_libm_erf => erf(x),
    nax_libm_erfc => erfc(x),
    nax_libm_pow => pow(x, y),
);
