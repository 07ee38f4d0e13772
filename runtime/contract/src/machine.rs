//! The machine code is compiled for and runs on, described once (in the
//! manner of Cranelift's `TargetIsa`): its processor (this machine's, any
//! x86-64, a CPU by name, or a GPU), the features its code may use, the
//! width of its vector registers, its cache sizes, whether it has the
//! AMX tiles and whether its bf16 dot products outrun its FMAs. Kernel
//! formation plans its loops and products from it, the back ends spell it
//! for their code generators, an ahead-of-time library lists its features
//! and checks them when opened, and the runtime dispatches its products
//! on the host's.

mod features;
mod host;

pub use features::{Feature, Features};
use std::sync::OnceLock;

/// Which processor a [`Machine`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processor {
    /// The machine this process runs on.
    Native,
    /// Any x86-64 CPU (SSE2 only).
    Generic,
    /// A CPU of [`NAMED_CPUS`].
    Named(&'static NamedCpu),
    /// An NVIDIA GPU of compute capability 9.0 (H100, H200).
    Cuda,
}

/// A CPU `--cpu NAME` knows: its name (as LLVM spells it, and as code is
/// tuned for) and its features, as the groups each generation adds.
#[derive(Debug, PartialEq, Eq)]
pub struct NamedCpu {
    /// The name.
    pub name: &'static str,
    /// What its code may use: the union of these groups.
    pub groups: &'static [&'static [Feature]],
    /// Whether it has the AMX tiles.
    pub amx: bool,
    /// Whether its `vdpbf16ps` outruns its FMAs (see [`Machine::fast_bf16_dots`]).
    pub fast_bf16_dots: bool,
}

impl NamedCpu {
    /// Every feature its code may use.
    pub fn features(&self) -> Features {
        self.groups.iter().flat_map(|g| g.iter().copied()).collect()
    }
}

use Feature::*;

/// What x86-64-v2 adds to the baseline.
const V2: &[Feature] = &[Sse3, Ssse3, Sse41, Sse42, Popcnt];
/// What x86-64-v3 adds to v2.
const V3: &[Feature] = &[Avx, Avx2, Fma, F16c, Bmi, Bmi2, Lzcnt, Movbe];
/// What x86-64-v4 adds to v3.
const V4: &[Feature] = &[Avx512f, Avx512bw, Avx512cd, Avx512dq, Avx512vl];
/// What Cascade Lake adds to v4.
const VNNI: &[Feature] = &[Avx512vnni];
/// What Ice Lake adds to Cascade Lake.
const ICELAKE: &[Feature] = &[Avx512vbmi, Avx512ifma];

/// The CPUs `--cpu NAME` takes.
pub const NAMED_CPUS: [NamedCpu; 13] = [
    NamedCpu { name: "x86-64-v2", groups: &[V2], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "x86-64-v3", groups: &[V2, V3], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "x86-64-v4", groups: &[V2, V3, V4], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "haswell", groups: &[V2, V3], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "skylake", groups: &[V2, V3], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "skylake-avx512", groups: &[V2, V3, V4], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "cascadelake", groups: &[V2, V3, V4, VNNI], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "icelake-server", groups: &[V2, V3, V4, VNNI, ICELAKE], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "sapphirerapids", groups: &[V2, V3, V4, VNNI, ICELAKE, &[Avx512bf16, Avx512fp16]], amx: true, fast_bf16_dots: false },
    NamedCpu { name: "znver2", groups: &[V2, V3], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "znver3", groups: &[V2, V3], amx: false, fast_bf16_dots: false },
    NamedCpu { name: "znver4", groups: &[V2, V3, V4, VNNI, ICELAKE, &[Avx512bf16]], amx: false, fast_bf16_dots: true },
    NamedCpu { name: "znver5", groups: &[V2, V3, V4, VNNI, ICELAKE, &[Avx512bf16]], amx: false, fast_bf16_dots: true },
];

/// A name `--cpu` does not take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not a CPU nax knows; give native, generic or one of: {}", NAMED_CPUS.map(|c| c.name).join(", "))]
pub struct UnknownCpu {
    /// The name given.
    pub name: String,
}

/// A machine: see the module's documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Which processor it is.
    pub processor: Processor,
    /// The features its code may use.
    pub features: Features,
    /// Whether its CPU has the AMX tiles (AMX-TILE and AMX-BF16).
    pub amx: bool,
    /// Whether AVX512_BF16's `vdpbf16ps` does more work a cycle than its
    /// FMAs: AMD's cores (Zen 4, Zen 5) issue it as they issue FMAs, each
    /// twice an FMA's work; Intel's issue one every two cycles against
    /// two FMAs a cycle (measured on a Xeon of family 6, model 207).
    pub fast_bf16_dots: bool,
    /// Bytes of the first-level data cache, the second-level cache (per
    /// core) and the last-level cache.
    pub cache_bytes: [u64; 3],
    /// The widest vectors a code generator uses on it, whatever its
    /// features allow ([`Machine::with_vector_bytes`]).
    pub vector_limit: u32,
}

impl Machine {
    /// Any x86-64 machine: SSE2's 16-byte vectors, and caches of 32 KiB,
    /// 1 MiB and 32 MiB assumed.
    pub const GENERIC: Machine = Machine {
        processor: Processor::Generic,
        features: Features::NONE,
        amx: false,
        fast_bf16_dots: false,
        cache_bytes: [32 << 10, 1 << 20, 32 << 20],
        vector_limit: u32::MAX,
    };

    /// An NVIDIA GPU of compute capability 9.0 (H100, H200): one 4-byte
    /// lane per thread, 256 KiB of L1 and shared memory per SM, 50 MiB of
    /// L2.
    pub const CUDA: Machine = Machine {
        processor: Processor::Cuda,
        features: Features::NONE,
        amx: false,
        fast_bf16_dots: false,
        cache_bytes: [256 << 10, 50 << 20, 50 << 20],
        vector_limit: 4,
    };

    /// The machine this process runs on, detected once: its features, its
    /// caches as Linux reports them (the generic sizes where it does not),
    /// whether it has AMX, whether its bf16 dot products outrun its FMAs.
    pub fn host() -> Machine {
        static HOST: OnceLock<Machine> = OnceLock::new();
        *HOST.get_or_init(|| {
            let features = Features::detected();
            Machine {
                processor: Processor::Native,
                features,
                amx: host::amx(),
                fast_bf16_dots: host::amd() && features.contains(Avx512bf16),
                cache_bytes: host::caches().unwrap_or(Machine::GENERIC.cache_bytes),
                vector_limit: u32::MAX,
            }
        })
    }

    /// A CPU of [`NAMED_CPUS`], with the generic caches.
    pub fn named(cpu: &'static NamedCpu) -> Machine {
        Machine { processor: Processor::Named(cpu), features: cpu.features(), amx: cpu.amx, fast_bf16_dots: cpu.fast_bf16_dots, ..Machine::GENERIC }
    }

    /// The machine `--cpu NAME` names: `native`, `generic` or one of
    /// [`NAMED_CPUS`].
    pub fn parse(name: &str) -> Result<Machine, UnknownCpu> {
        match name {
            "native" => Ok(Machine::host()),
            "generic" => Ok(Machine::GENERIC),
            _ => NAMED_CPUS.iter().find(|c| c.name == name).map(Machine::named).ok_or_else(|| UnknownCpu { name: name.to_string() }),
        }
    }

    /// Whether it is a GPU.
    pub fn gpu(&self) -> bool {
        self.processor == Processor::Cuda
    }

    /// Whether its code may use `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        self.features.contains(feature)
    }

    /// Bytes per vector register its code uses: 32 with AVX2 and FMA, 64
    /// if it also has AVX-512 F, else SSE2's 16; at most
    /// [`Machine::vector_limit`]. Code chosen by this width may use the
    /// features it implies.
    pub fn vector_bytes(&self) -> u32 {
        let avx2 = self.has(Avx2) && self.has(Fma);
        let widest = if avx2 && self.has(Avx512f) {
            64
        } else if avx2 {
            32
        } else {
            16
        };
        widest.min(self.vector_limit)
    }

    /// The same machine seen through vectors of at most `bytes`.
    pub fn with_vector_bytes(self, bytes: u32) -> Machine {
        Machine { vector_limit: self.vector_limit.min(bytes), ..self }
    }

    /// The names of `needed` (LLVM's) whose features this machine lacks,
    /// in order; a name not in [`Feature::ALL`] counts as lacking: nothing
    /// can vouch for it.
    pub fn missing<'a>(&self, needed: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        needed.into_iter().filter(|name| !Feature::named(name).is_some_and(|f| self.has(f))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_width_follows_the_features_and_the_limit() {
        let named = |name| Machine::parse(name).unwrap();
        assert_eq!(Machine::GENERIC.vector_bytes(), 16);
        assert_eq!(named("x86-64-v3").vector_bytes(), 32);
        assert_eq!(named("znver4").vector_bytes(), 64);
        assert_eq!(named("znver4").with_vector_bytes(16).vector_bytes(), 16);
        assert_eq!(Machine::CUDA.vector_bytes(), 4);
        assert!(Machine::CUDA.gpu() && !Machine::GENERIC.gpu());
        assert!(named("sapphirerapids").amx && !named("znver5").amx);
        assert!(named("znver4").fast_bf16_dots && !named("sapphirerapids").fast_bf16_dots && !Machine::GENERIC.fast_bf16_dots);
        assert!(named("znver4").has(Avx512bf16) && !named("znver4").has(Avx512fp16));
    }

    #[test]
    fn names_parse_and_unknown_ones_are_refused_with_the_choices() {
        for c in &NAMED_CPUS {
            assert_eq!(Machine::parse(c.name).unwrap().processor, Processor::Named(c));
        }
        assert_eq!(Machine::parse("native").unwrap(), Machine::host());
        let e = Machine::parse("pentium").unwrap_err();
        assert!(e.to_string().starts_with("`pentium` is not a CPU nax knows; give native, generic or one of: x86-64-v2, "), "{e}");
    }

    #[test]
    fn a_library_lacks_what_the_machine_has_not_and_any_name_it_does_not_know() {
        let v3 = Machine::parse("x86-64-v3").unwrap();
        assert_eq!(v3.missing(["avx2", "avx512f", "no-such-feature"]), ["avx512f", "no-such-feature"]);
        // SSE3 is on every x86-64 machine these tests run on.
        assert!(Machine::host().missing(["sse3"]).is_empty());
    }
}
