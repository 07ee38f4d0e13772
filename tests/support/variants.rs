//! A model's source in another float dtype, derived from the one file
//! (shared by the GPT-2 test and the benchmarks' `gpt2_*_bf16` rows).

/// The model of `source` in bf16: every tensor type without a kind (f32)
/// declared bf16, its parameters, weights, results and renames alike
/// (positions, `arange(..)`, renamed by `as`, stay integers).
pub fn bf16_variant(source: &str) -> String {
    source.replace(": [", ": bf16[").replace("-> [", "-> bf16[").replace(") as [", ") as bf16[").replace("arange(n) as bf16[", "arange(n) as Int[")
}
