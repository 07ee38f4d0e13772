//! What kernel formation knows of the machine the code will run on: the
//! width of its vector registers and the sizes of its caches. From them it
//! decides, once, the shape of each matrix-product microkernel (the tile of
//! C whose accumulators fill the vector registers) and the cache blocking
//! around it, in the manner of BLIS: a panel of B of the blocking's depth
//! fills half the first-level cache, a block of A half the second, a block
//! of B a quarter of the last.
//!
//! The JIT compiles for the host ([`Target::host`]); `nax build --cpu
//! generic` (and with it the file tests, whose expected text is then the
//! same on every machine) for [`Target::GENERIC`]; a back end whose
//! vectors are narrower than the host's says so with
//! [`Target::with_vector_bytes`]. A GPU ([`Target::CUDA`]) runs each
//! kernel's parallel loop one position per thread, and its contractions
//! as loop nests, not through the CPU runtime's packed matrix products.

use nax_runtime::DType;
use nax_runtime::plan::{Blocking, Microkernel};

/// A machine's vector width and cache sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Bytes per vector register (16 for SSE or NEON, 32 for AVX2, 64 for AVX-512).
    pub vector_bytes: u32,
    /// Bytes of the first-level data cache, the second-level cache (per
    /// core) and the last-level cache.
    pub cache_bytes: [u64; 3],
    /// A GPU: contractions are loop nests (not the CPU runtime's packed
    /// matrix products), no tiles, column blocks or reductions into memory,
    /// and each kernel's output loops one flat parallel loop
    /// ([`crate::Schedule::flat`]), one thread per position.
    pub gpu: bool,
    /// Every load and store of every kernel is checked against its
    /// buffer's length at run time (`--check-bounds`): an access outside
    /// fails the call instead of being made. The program gets a fault
    /// record ([`crate::BufferKind::Fault`]).
    pub check_bounds: bool,
}

/// A microkernel of a program and the blocking its products use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductKernel {
    pub micro: Microkernel,
    pub blocking: Blocking,
}

impl Target {
    /// Any x86-64 machine: 16-byte vectors (SSE2), and caches of 32 KiB,
    /// 1 MiB and 32 MiB assumed.
    pub const GENERIC: Target = Target { vector_bytes: 16, cache_bytes: [32 << 10, 1 << 20, 32 << 20], gpu: false, check_bounds: false };

    /// An NVIDIA GPU of compute capability 9.0 (H100, H200): one 4-byte
    /// lane per thread, 256 KiB of L1 and shared memory per SM, 50 MiB of
    /// L2.
    pub const CUDA: Target = Target { vector_bytes: 4, cache_bytes: [256 << 10, 50 << 20, 50 << 20], gpu: true, check_bounds: false };

    /// The machine this process runs on: AVX-512, AVX2 with FMA, or 16-byte
    /// vectors; its caches as Linux reports them (the generic sizes where
    /// it does not).
    pub fn host() -> Target {
        static HOST: std::sync::OnceLock<Target> = std::sync::OnceLock::new();
        *HOST.get_or_init(|| Target {
            vector_bytes: host_vector_bytes(),
            cache_bytes: host_caches().unwrap_or(Target::GENERIC.cache_bytes),
            gpu: false,
            check_bounds: false,
        })
    }

    /// The same machine seen through vectors of at most `bytes`.
    pub fn with_vector_bytes(self, bytes: u32) -> Target {
        Target { vector_bytes: self.vector_bytes.min(bytes), ..self }
    }

    /// The microkernel and blocking of products of `dtype` (f32 or f64):
    /// two vectors of columns by as many rows as leave registers for them
    /// (8 with 32 vector registers, as AVX-512 has; 6 with 16), so the
    /// tile's loads are a small part of its multiply-adds.
    pub fn product_kernel(&self, dtype: DType) -> ProductKernel {
        let size = dtype.size_bytes() as u64;
        let lanes = (u64::from(self.vector_bytes) / size).max(1);
        let rows: u64 = if self.vector_bytes >= 64 { 8 } else { 6 };
        let cols = 2 * lanes;
        let [l1, l2, l3] = self.cache_bytes;
        let round_down = |x: u64, unit: u64| (x / unit).max(1) * unit;
        let depth = round_down(l1 / 2 / (cols * size), 8).clamp(64, 512);
        let block_rows = round_down(l2 / 2 / (depth * size), rows).min(round_down(1024, rows));
        let block_cols = round_down(l3 / 4 / (depth * size), cols).min(round_down(8192, cols));
        ProductKernel {
            micro: Microkernel { dtype, rows: rows as u32, cols: cols as u32, lanes: lanes as u32 },
            blocking: Blocking { depth: depth as u32, rows: block_rows as u32, cols: block_cols as u32 },
        }
    }
}

/// The host's widest useful vector register, in bytes.
fn host_vector_bytes() -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 64;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return 32;
        }
    }
    16
}

/// The first-level data, second-level and last-level cache sizes of CPU 0,
/// from sysfs.
fn host_caches() -> Option<[u64; 3]> {
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

    #[test]
    fn microkernels_fill_the_vector_registers() {
        let avx512 = Target { vector_bytes: 64, ..Target::GENERIC };
        let k = avx512.product_kernel(DType::F32);
        assert_eq!((k.micro.rows, k.micro.cols, k.micro.lanes), (8, 32, 16));
        let avx2 = Target { vector_bytes: 32, ..Target::GENERIC };
        let k = avx2.product_kernel(DType::F64);
        assert_eq!((k.micro.rows, k.micro.cols, k.micro.lanes), (6, 8, 4));
        // A B panel of the blocking's depth fills half the first level: 32 KiB / 2 / (16 x 4 bytes).
        let k = avx2.product_kernel(DType::F32);
        assert_eq!(k.blocking.depth, 256);
        assert_eq!(k.blocking.rows % k.micro.rows, 0);
        assert_eq!(k.blocking.cols % k.micro.cols, 0);
        let narrow = avx512.with_vector_bytes(16).product_kernel(DType::F32);
        assert_eq!((narrow.micro.rows, narrow.micro.cols, narrow.micro.lanes), (6, 8, 4));
    }
}
