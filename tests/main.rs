//! The single integration-test binary: every suite links the compiler once.
//!
//! - `aot`: AOT shared libraries (`nax build --emit so`, ABI.md) called from a C harness;
//! - `api`: the host API (`nax::Engine`) end to end, and the runtime's dependency tree;
//! - `backends`: every case on every back end, compared with the interpreter and PyTorch;
//! - `calls`: derived sizes through calls (split, groups, keyword sizes, slices, concat, `as`, ...) on every back end;
//! - `conformance`: the shared checker cases (`../shared/conformance`), through `nax check --format json`;
//! - `diagnostics`: file-driven tests, `.nax` beside its expected rendered `.stderr` (`NAX_BLESS=1` updates);
//! - `explain`: every error code's documented examples;
//! - `run`: `nax run` end to end, and every kind of bad input (sizes too large for memory included);
//! - `robustness`: generated inputs, none of which may panic the checker;
//! - `cli`: the command line's exit codes and outputs;
//! - `cuda`: the CUDA target without a GPU: PTX for every case and workload, checked and assembled by `ptxas`;
//! - `exec`: the shared execution cases, through `nax run` on every back end;
//! - `footprint`: a size planted wrong after verification is the driver's internal error on every native back end;
//! - `examples`: the example models check clean;
//! - `native_math`: the accuracy of the native back ends' f32 math over the whole f32 range;
//! - `grad`: gradients (LANGUAGE.md section 15) against PyTorch's autograd and f64 finite differences, on every back end;
//! - `gpt2`: examples/gpt2 against transformers' GPT-2 (prefill, decoding step, greedy generation);
//! - `graph`: every checked function lowers to a graph that verifies and whose text form parses back;
//! - `reference`: the book's reference part against the contracts it restates;
//! - `shard`: one program over several processes (SHARDING.md), ranks as threads, on every back end.

mod aot;
mod api;
mod backends;
mod calls;
mod cli;
mod conformance;
mod cuda;
mod diagnostics;
mod einops;
mod examples;
mod exec;
mod explain;
mod footprint;
#[path = "support/generate.rs"]
mod generate;
mod gpt2;
mod grad;
mod graph;
mod long_sums;
mod native_math;
mod products;
mod reference;
mod robustness;
mod run;
mod shard;
mod shard_library;
mod support;
#[path = "support/variants.rs"]
mod variants;
