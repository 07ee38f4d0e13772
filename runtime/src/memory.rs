//! The memory plan of a call: what its executor will allocate at most
//! while it runs (its [`Peak`], which each executor computes from the
//! call's sizes before anything runs), and how much memory this process
//! can still have ([`available`]): the least of what the machine has
//! available (`MemAvailable` of `/proc/meminfo`: free memory plus the
//! caches the kernel can drop, swap not counted), what the process's
//! cgroup leaves (its limit less its usage, reclaimable file cache not
//! counted as used; cgroup v2 and v1, every level from the process's own
//! up) and what the address-space limit (`ulimit -v`) leaves beyond the
//! process's current mappings. A call whose peak does not fit is refused
//! with the figures, instead of ending in an allocation abort or an
//! out-of-memory kill halfway.
//!
//! Decision: nothing here is cached (the figures change between calls),
//! and calls whose peak is under [`SMALL_PEAK`] are not measured at all,
//! so that small calls pay nothing. The `sysinfo` crate's cgroup figures
//! read only the cgroup file system's root and not the address-space
//! limit, hence this module.

use std::path::{Path, PathBuf};

/// Calls whose peak is under this many bytes are not measured against
/// what is available: they cannot be the call that exhausts memory.
pub const SMALL_PEAK: u128 = 64 << 20;

/// What a call's executor allocates, at most, while it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// Bytes it allocates at its peak (temporaries, the result, copies).
    pub bytes: u128,
    /// Bytes of that it already holds from earlier calls and reuses
    /// (counted as used by the process, so added back to what is available).
    pub reusable: u128,
}

/// The limit that leaves a process the least memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The machine's available memory.
    Machine,
    /// The process's cgroup limit.
    Cgroup,
    /// The address-space limit (`ulimit -v`).
    AddressSpace,
}

impl Limit {
    /// How a message names it.
    pub fn describe(self) -> &'static str {
        match self {
            Limit::Machine => "the machine has available",
            Limit::Cgroup => "the process's cgroup memory limit leaves",
            Limit::AddressSpace => "the address-space limit (ulimit -v) leaves",
        }
    }
}

/// Memory this process can still have, and which limit sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Available {
    /// Bytes.
    pub bytes: u128,
    /// The limit that leaves the least.
    pub limit: Limit,
}

/// What this process can still have (`None` where nothing can be read).
pub fn available() -> Option<Available> {
    [(Limit::Machine, machine()), (Limit::Cgroup, cgroup()), (Limit::AddressSpace, address_space())]
        .into_iter()
        .filter_map(|(limit, bytes)| Some(Available { bytes: bytes?, limit }))
        .min_by_key(|a| a.bytes)
}

/// `MemAvailable` of `/proc/meminfo`.
fn machine() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u128 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// Limits at or above this are "no limit" (cgroup v1 writes 2^63 less a page).
const NO_LIMIT: u128 = 1 << 62;

/// The least that any level of the process's memory cgroup leaves.
fn cgroup() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut least: Option<u128> = None;
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let version = if id == "0" && controllers.is_empty() {
            Version::Two
        } else if controllers.split(',').any(|c| c == "memory") {
            Version::One
        } else {
            continue;
        };
        let root = Path::new(version.root());
        let mut dir: PathBuf = root.join(path.trim_start_matches('/'));
        loop {
            if let Some(left) = version.left(&dir) {
                least = Some(least.map_or(left, |l| l.min(left)));
            }
            if dir == root || !dir.pop() || !dir.starts_with(root) {
                break;
            }
        }
    }
    least
}

/// A cgroup hierarchy's version, which names its files.
#[derive(Clone, Copy)]
enum Version {
    One,
    Two,
}

impl Version {
    fn root(self) -> &'static str {
        match self {
            Version::One => "/sys/fs/cgroup/memory",
            Version::Two => "/sys/fs/cgroup",
        }
    }

    /// What the cgroup at `dir` leaves (`None` without a limit there).
    fn left(self, dir: &Path) -> Option<u128> {
        let (limit, usage, inactive) = match self {
            Version::One => ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
            Version::Two => ("memory.max", "memory.current", "inactive_file"),
        };
        let number = |file: &str| std::fs::read_to_string(dir.join(file)).ok()?.trim().parse::<u128>().ok();
        let limit = number(limit).filter(|&l| l < NO_LIMIT)?;
        let usage = number(usage)?;
        let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
        let reclaimable = stat
            .lines()
            .find_map(|l| l.strip_prefix(inactive).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse::<u128>().ok())
            .unwrap_or(0);
        Some(limit.saturating_sub(usage.saturating_sub(reclaimable)))
    }
}

/// The address-space limit less the process's mappings (`None` without a limit).
fn address_space() -> Option<u128> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u128 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf only reads system configuration.
    let page = u128::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    Some(u128::from(limit.rlim_cur).saturating_sub(pages * page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_some_memory_available() {
        let a = available().expect("/proc/meminfo is readable on Linux");
        // Bounded by the machine's total, which does not move (what is
        // available does, between two reads, when other processes run).
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total_kib: u128 = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap();
        assert!(a.bytes > 0 && a.bytes <= total_kib * 1024, "{a:?} of {total_kib} KiB");
    }

    #[test]
    fn a_cgroup_v1_level_leaves_its_limit_less_what_it_cannot_reclaim() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        std::fs::write(dir.join("memory.limit_in_bytes"), "1000000\n").unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), "600000\n").unwrap();
        std::fs::write(dir.join("memory.stat"), "cache 1\ntotal_inactive_file 100000\n").unwrap();
        assert_eq!(Version::One.left(dir), Some(500_000));
        std::fs::write(dir.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(Version::One.left(dir), None, "no limit");
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        assert_eq!(Version::Two.left(dir), None, "no limit");
        std::fs::write(dir.join("memory.max"), "2000\n").unwrap();
        std::fs::write(dir.join("memory.current"), "5000\n").unwrap();
        std::fs::write(dir.join("memory.stat"), "inactive_file 10\n").unwrap();
        assert_eq!(Version::Two.left(dir), Some(0), "over its limit");
    }
}
