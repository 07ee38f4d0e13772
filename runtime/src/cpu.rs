//! The CPU features compiled code may use, as LLVM names them, and whether
//! the machine running it has them. The compiler compiles a library for a
//! list of these (and only these, so the list says everything the code
//! needs); the library checks the list when it is opened, so a machine
//! without a feature gets an error naming it instead of an illegal
//! instruction.

/// Every feature compiled code may be allowed to use, beyond x86-64's
/// baseline (SSE2), by its LLVM name.
pub const FEATURES: [&str; 23] = [
    "sse3",
    "ssse3",
    "sse4.1",
    "sse4.2",
    "popcnt",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi",
    "bmi2",
    "lzcnt",
    "movbe",
    "avx512f",
    "avx512bw",
    "avx512cd",
    "avx512dq",
    "avx512vl",
    "avx512vnni",
    "avx512bf16",
    "avx512fp16",
    "avx512vbmi",
    "avx512ifma",
];

/// Whether this machine has `feature` (one of [`FEATURES`]); `None` for a
/// name not in the list.
pub fn has(feature: &str) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as detected;
        Some(match feature {
            "sse3" => detected!("sse3"),
            "ssse3" => detected!("ssse3"),
            "sse4.1" => detected!("sse4.1"),
            "sse4.2" => detected!("sse4.2"),
            "popcnt" => detected!("popcnt"),
            "avx" => detected!("avx"),
            "avx2" => detected!("avx2"),
            "fma" => detected!("fma"),
            "f16c" => detected!("f16c"),
            "bmi" => detected!("bmi1"),
            "bmi2" => detected!("bmi2"),
            "lzcnt" => detected!("lzcnt"),
            "movbe" => detected!("movbe"),
            "avx512f" => detected!("avx512f"),
            "avx512bw" => detected!("avx512bw"),
            "avx512cd" => detected!("avx512cd"),
            "avx512dq" => detected!("avx512dq"),
            "avx512vl" => detected!("avx512vl"),
            "avx512vnni" => detected!("avx512vnni"),
            "avx512bf16" => detected!("avx512bf16"),
            "avx512fp16" => detected!("avx512fp16"),
            "avx512vbmi" => detected!("avx512vbmi"),
            "avx512ifma" => detected!("avx512ifma"),
            _ => return None,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        FEATURES.contains(&feature).then_some(false)
    }
}

/// The features of `needed` this machine lacks, in order (a name not in
/// [`FEATURES`] counts as lacking: nothing can vouch for it).
pub fn missing<'a>(needed: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    needed.into_iter().filter(|f| has(f) != Some(true)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_feature_is_detected_and_others_are_missing() {
        for f in FEATURES {
            assert!(has(f).is_some(), "{f}");
        }
        assert_eq!(has("amx-tile"), None);
        assert_eq!(missing(["no-such-feature"]), ["no-such-feature"]);
        // SSE3 is on every x86-64 machine these tests run on.
        assert!(missing(["sse3"]).is_empty());
    }
}
