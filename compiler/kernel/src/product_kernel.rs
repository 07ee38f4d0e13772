//! The matrix-product microkernel and its cache blocking, decided once per
//! program and dtype from the machine's vector width and cache sizes (its
//! [`Machine`]), in the manner of BLIS: the tile of C whose accumulators
//! fill the vector registers, a panel of B of the blocking's depth filling
//! half the first-level cache, a block of A half the second, a block of B
//! a quarter of the last. A GPU ([`Machine::CUDA`]) runs its contractions
//! as loop nests, not through the CPU runtime's packed products.

use nax_contract::DType;
use nax_contract::Machine;
use nax_contract::plan::{Blocking, Microkernel};

/// A microkernel of a program and the blocking its products use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductKernel {
    pub micro: Microkernel,
    pub blocking: Blocking,
}

impl ProductKernel {
    /// The microkernel and blocking of products of `dtype` (f32 or f64) on
    /// `machine`: two vectors of columns by as many rows as leave registers
    /// for them (8 with 32 vector registers, as AVX-512 has; 6 with 16), so
    /// the tile's loads are a small part of its multiply-adds.
    pub fn for_machine(machine: &Machine, dtype: DType) -> ProductKernel {
        let vector_bytes = u64::from(machine.vector_bytes());
        let size = dtype.size_bytes() as u64;
        let lanes = (vector_bytes / size).max(1);
        let rows: u64 = if vector_bytes >= 64 { 8 } else { 6 };
        let cols = 2 * lanes;
        let [l1, l2, l3] = machine.cache_bytes;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microkernels_fill_the_vector_registers() {
        let cpu = |name| Machine::parse(name).unwrap();
        let k = ProductKernel::for_machine(&cpu("x86-64-v4"), DType::F32);
        assert_eq!((k.micro.rows, k.micro.cols, k.micro.lanes), (8, 32, 16));
        let avx2 = cpu("x86-64-v3");
        let k = ProductKernel::for_machine(&avx2, DType::F64);
        assert_eq!((k.micro.rows, k.micro.cols, k.micro.lanes), (6, 8, 4));
        // A B panel of the blocking's depth fills half the first level: 32 KiB / 2 / (16 x 4 bytes).
        let k = ProductKernel::for_machine(&avx2, DType::F32);
        assert_eq!(k.blocking.depth, 256);
        assert_eq!(k.blocking.rows % k.micro.rows, 0);
        assert_eq!(k.blocking.cols % k.micro.cols, 0);
        let narrow = ProductKernel::for_machine(&cpu("x86-64-v4").with_vector_bytes(16), DType::F32);
        assert_eq!((narrow.micro.rows, narrow.micro.cols, narrow.micro.lanes), (6, 8, 4));
    }
}
