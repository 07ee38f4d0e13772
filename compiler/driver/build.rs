//! Builds the C ABI's static archive (`runtime/capi`, crate `nax-capi`)
//! that `nax build --emit so` links into every shared library, and gives
//! its path to the compiler as `NAX_CAPI_ARCHIVE` (embedded in the `nax`
//! binary, so an installed `nax` needs nothing beside it but `cc`).
//!
//! The archive is built by a nested `cargo build --release -p nax-capi
//! --features library` (with the library's own allocator) into
//! `target/capi` (its own target directory, so it never waits on the
//! outer build's lock), always optimised and without debug information,
//! whatever profile the outer build uses.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    // The repository's root: this package is compiler/driver.
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..");
    // The archive's crates: the C ABI, the runtime, and the host data and
    // the contract below it.
    for watched in [
        "runtime/src",
        "runtime/capi/src",
        "runtime/host/src",
        "runtime/contract/src",
        "runtime/Cargo.toml",
        "runtime/capi/Cargo.toml",
        "runtime/host/Cargo.toml",
        "runtime/contract/Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from).join("capi");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "nax-capi", "--lib", "--features", "library", "--target-dir"])
        .arg(&target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "false");
    // The outer build's flags are for the host tools, not the archive.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR", "RUSTC_WORKSPACE_WRAPPER"] {
        command.env_remove(var);
    }
    let status = command.status().expect("cannot run cargo to build the C ABI's archive (runtime/capi)");
    assert!(status.success(), "building the C ABI's archive (cargo build --release -p nax-capi) failed");
    let archive = target_dir.join("release").join("libnax_capi.a");
    assert!(archive.is_file(), "the C ABI's archive is not at {}", archive.display());
    println!("cargo:rustc-env=NAX_CAPI_ARCHIVE={}", archive.display());
}
