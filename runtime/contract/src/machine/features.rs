//! The CPU features compiled code may use beyond x86-64's baseline (SSE2),
//! by their LLVM names, as a set, and whether this machine has each. A
//! library compiled ahead of time lists the features its code uses (and
//! only these, so the list says everything the code needs) and checks the
//! list when it is opened, so a machine without one gets an error naming
//! it instead of an illegal instruction.

use std::fmt;

/// A feature compiled code may be allowed to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    Sse3,
    Ssse3,
    Sse41,
    Sse42,
    Popcnt,
    Avx,
    Avx2,
    Fma,
    F16c,
    Bmi,
    Bmi2,
    Lzcnt,
    Movbe,
    Avx512f,
    Avx512bw,
    Avx512cd,
    Avx512dq,
    Avx512vl,
    Avx512vnni,
    Avx512bf16,
    Avx512fp16,
    Avx512vbmi,
    Avx512ifma,
}

impl Feature {
    /// Every feature, in the order libraries list them.
    pub const ALL: [Feature; 23] = [
        Feature::Sse3,
        Feature::Ssse3,
        Feature::Sse41,
        Feature::Sse42,
        Feature::Popcnt,
        Feature::Avx,
        Feature::Avx2,
        Feature::Fma,
        Feature::F16c,
        Feature::Bmi,
        Feature::Bmi2,
        Feature::Lzcnt,
        Feature::Movbe,
        Feature::Avx512f,
        Feature::Avx512bw,
        Feature::Avx512cd,
        Feature::Avx512dq,
        Feature::Avx512vl,
        Feature::Avx512vnni,
        Feature::Avx512bf16,
        Feature::Avx512fp16,
        Feature::Avx512vbmi,
        Feature::Avx512ifma,
    ];

    /// Its name as LLVM spells it (and as a library lists it).
    pub fn name(self) -> &'static str {
        match self {
            Feature::Sse3 => "sse3",
            Feature::Ssse3 => "ssse3",
            Feature::Sse41 => "sse4.1",
            Feature::Sse42 => "sse4.2",
            Feature::Popcnt => "popcnt",
            Feature::Avx => "avx",
            Feature::Avx2 => "avx2",
            Feature::Fma => "fma",
            Feature::F16c => "f16c",
            Feature::Bmi => "bmi",
            Feature::Bmi2 => "bmi2",
            Feature::Lzcnt => "lzcnt",
            Feature::Movbe => "movbe",
            Feature::Avx512f => "avx512f",
            Feature::Avx512bw => "avx512bw",
            Feature::Avx512cd => "avx512cd",
            Feature::Avx512dq => "avx512dq",
            Feature::Avx512vl => "avx512vl",
            Feature::Avx512vnni => "avx512vnni",
            Feature::Avx512bf16 => "avx512bf16",
            Feature::Avx512fp16 => "avx512fp16",
            Feature::Avx512vbmi => "avx512vbmi",
            Feature::Avx512ifma => "avx512ifma",
        }
    }

    /// The feature LLVM calls `name`; `None` for a name not in [`Feature::ALL`].
    pub fn named(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the machine this process runs on has it.
    pub fn detected(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as detected;
            match self {
                Feature::Sse3 => detected!("sse3"),
                Feature::Ssse3 => detected!("ssse3"),
                Feature::Sse41 => detected!("sse4.1"),
                Feature::Sse42 => detected!("sse4.2"),
                Feature::Popcnt => detected!("popcnt"),
                Feature::Avx => detected!("avx"),
                Feature::Avx2 => detected!("avx2"),
                Feature::Fma => detected!("fma"),
                Feature::F16c => detected!("f16c"),
                Feature::Bmi => detected!("bmi1"),
                Feature::Bmi2 => detected!("bmi2"),
                Feature::Lzcnt => detected!("lzcnt"),
                Feature::Movbe => detected!("movbe"),
                Feature::Avx512f => detected!("avx512f"),
                Feature::Avx512bw => detected!("avx512bw"),
                Feature::Avx512cd => detected!("avx512cd"),
                Feature::Avx512dq => detected!("avx512dq"),
                Feature::Avx512vl => detected!("avx512vl"),
                Feature::Avx512vnni => detected!("avx512vnni"),
                Feature::Avx512bf16 => detected!("avx512bf16"),
                Feature::Avx512fp16 => detected!("avx512fp16"),
                Feature::Avx512vbmi => detected!("avx512vbmi"),
                Feature::Avx512ifma => detected!("avx512ifma"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Feature`]s.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Features(u32);

impl Features {
    /// No feature: any x86-64 CPU.
    pub const NONE: Features = Features(0);

    /// Whether `feature` is in the set.
    pub fn contains(self, feature: Feature) -> bool {
        self.0 & Features::bit(feature) != 0
    }

    /// Whether every feature of `other` is in the set.
    pub fn contains_all(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }

    /// The set with `feature` added.
    pub fn with(self, feature: Feature) -> Features {
        Features(self.0 | Features::bit(feature))
    }

    /// The features, in [`Feature::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Feature> {
        Feature::ALL.into_iter().filter(move |&f| self.contains(f))
    }

    /// The features' LLVM names, in order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Feature::name).collect()
    }

    /// The features the machine this process runs on has.
    pub fn detected() -> Features {
        Feature::ALL.into_iter().filter(|f| f.detected()).collect()
    }

    fn bit(feature: Feature) -> u32 {
        1 << feature as u32
    }
}

impl FromIterator<Feature> for Features {
    fn from_iter<I: IntoIterator<Item = Feature>>(features: I) -> Features {
        features.into_iter().fold(Features::NONE, Features::with)
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sets_keep_their_order() {
        for f in Feature::ALL {
            assert_eq!(Feature::named(f.name()), Some(f));
        }
        assert_eq!(Feature::named("amx-tile"), None);
        let set: Features = [Feature::Avx512f, Feature::Sse3].into_iter().collect();
        assert_eq!(set.names(), ["sse3", "avx512f"]);
        assert!(set.contains_all(Features::NONE.with(Feature::Sse3)));
        assert!(!set.contains(Feature::Avx2));
        // SSE3 is on every x86-64 machine these tests run on.
        assert!(Features::detected().contains(Feature::Sse3));
    }
}
