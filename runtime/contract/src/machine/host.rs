//! What the machine this process runs on has beyond its features: the
//! sizes of its caches (as Linux reports them), whether its CPU has the
//! AMX tiles and whether it is AMD's.

/// The first-level data, second-level and last-level cache sizes of CPU 0,
/// from sysfs; `None` where Linux does not say.
pub(super) fn caches() -> Option<[u64; 3]> {
    let mut caches = [None; 3];
    for index in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).ok().map(|s| s.trim().to_string());
        let Some(level) = read("level").and_then(|l| l.parse::<usize>().ok()) else { break };
        if read("type").as_deref() == Some("Instruction") {
            continue;
        }
        let size = read("size").and_then(|s| parse_size(&s));
        let slot = level.clamp(1, 3) - 1;
        caches[slot] = caches[slot].max(size);
    }
    let [Some(l1), Some(l2), l3] = caches else { return None };
    Some([l1, l2, l3.unwrap_or(l2)])
}

/// `48K`, `1024K`, `32M` or a plain number of bytes.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    })
}

/// Whether the CPU has AMX-TILE and AMX-BF16 (whether the OS lets a
/// process use the tile state is the runtime's to ask).
#[cfg(target_arch = "x86_64")]
pub(super) fn amx() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // CPUID leaf 7, sub-leaf 0: EDX bit 22 is AMX-BF16, bit 24 AMX-TILE.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU.
    let (max, features) = unsafe { (__cpuid(0).eax, __cpuid_count(7, 0).edx) };
    max >= 7 && features & (1 << 22) != 0 && features & (1 << 24) != 0
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn amx() -> bool {
    false
}

/// Whether the CPU is AMD's (CPUID's vendor string "AuthenticAMD").
#[cfg(target_arch = "x86_64")]
pub(super) fn amd() -> bool {
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU.
    let vendor = unsafe { std::arch::x86_64::__cpuid(0) };
    // The vendor string's twelve bytes are in EBX, EDX and ECX.
    [vendor.ebx, vendor.edx, vendor.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163]
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn amd() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_with_units() {
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("4X"), None);
    }
}
