//! Products of few rows on a weight packed for them (a decoding step's
//! matrix-vector products): bound by reading B once, so B is packed once
//! into strips of [`STRIP`] columns (the last one narrower, as wide as
//! the columns left: the strips take the weight's own bytes), each strip
//! its `k` rows one after the other, in B's own element type (a bf16
//! weight stays two bytes per element) and already read as an operand (a
//! subnormal as a zero of its sign). A thread streams a
//! contiguous run of strips, one after the other, which the hardware
//! prefetchers read at the memory's speed (a row-major weight read in
//! place touches a new page every row), and keeps each strip's sums, at
//! most [`UNPACKED_ROWS`] rows of [`STRIP`] columns, in vector registers
//! over the whole depth: each element of B is loaded once, widened in a
//! register and multiplied into every row of A.
//!
//! The strips' kernel is written with AVX-512 intrinsics for f32, bf16
//! and f16 B (the widening of bf16 is a shift, of f16 `vcvtph2ps`), chosen
//! at run time where the CPU has AVX-512F; elsewhere, for f64 and for the
//! narrower last strip, a portable loop compiled for the widest vectors
//! the machine has reads the same strips. Tests run both on the same
//! products.

use super::{Element, Epilogue, Format, LINE, Product, UNPACKED_ROWS, parts, widened_rows, write_columns};
use rayon::prelude::*;

/// Columns of one strip: four AVX-512 vectors of f32 sums per row of A.
pub(super) const STRIP: usize = 64;

/// A weight's B packed into strips (see the module's doc).
pub(super) struct Rows {
    words: Vec<u64>,
    /// Its depth and its columns, which a product must have to read it.
    k: usize,
    n: usize,
}

impl Rows {
    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    fn address(&self) -> usize {
        (self.words.as_ptr() as usize).div_ceil(LINE) * LINE
    }

    /// Whether these are the strips of a B of `k` rows and `n` columns.
    pub(super) fn fits(&self, p: &Product) -> bool {
        self.k == p.k && self.n == p.n
    }
}

/// `p`'s B packed into strips, one task per strip.
///
/// # Safety
/// Every element of B that `p`'s shape and steps reach is inside B.
pub(super) unsafe fn pack<T: Element>(p: &Product) -> Rows {
    let size = std::mem::size_of::<T>();
    let mut words = vec![0u64; (p.n * p.k * size).div_ceil(8) + LINE / 8];
    let address = (words.as_mut_ptr() as usize).div_ceil(LINE) * LINE;
    (0..p.n.div_ceil(STRIP)).into_par_iter().for_each(|s| {
        let (j0, cols) = (s * STRIP, STRIP.min(p.n - s * STRIP));
        // SAFETY: the strip's `k * cols` elements follow the whole strips
        // before it, inside the buffer.
        let dst = unsafe { std::slice::from_raw_parts_mut((address as *mut T).add(j0 * p.k), p.k * cols) };
        // SAFETY (both): (kk, j0 + j) is inside B for kk < k, j < cols.
        let at = |kk: usize, j: usize| T::narrow(unsafe { *(p.b.at(kk, j0 + j, size) as *const T) }.operand());
        if p.b.col_step == 1 {
            for (kk, row) in dst.chunks_exact_mut(cols).enumerate() {
                for (j, slot) in row.iter_mut().enumerate() {
                    *slot = at(kk, j);
                }
            }
            return;
        }
        // Any other B (a transposed weight's depth is contiguous): 16
        // depth positions of each column at a time, along its depth.
        for k0 in (0..p.k).step_by(16) {
            for j in 0..cols {
                for kk in k0..(k0 + 16).min(p.k) {
                    dst[kk * cols + j] = at(kk, j);
                }
            }
        }
    });
    Rows { words, k: p.k, n: p.n }
}

/// One strip's sums: `out[i][j]` is row `i` of A (`m` rows of `k`,
/// widened, row after row) times column `j` of the strip at `b`, `width`
/// columns wide.
type StripFn<W> = unsafe fn(a: &[W], m: usize, k: usize, b: usize, width: usize, out: &mut [[W; STRIP]; UNPACKED_ROWS]);

/// `p` with its B read from `rows` (packed from this product's B by
/// [`pack`]): the strips split across the threads in contiguous runs when
/// the product is large enough, each strip's columns of C written (added
/// to C where the product accumulates) and then finished by `finish`.
///
/// # Safety
/// As [`super::multiply`]; `rows` fits `p`; `p.m` is at most [`UNPACKED_ROWS`].
pub(super) unsafe fn multiply<T: Element>(p: &Product, rows: &Rows, threads: usize, work: usize, finish: Epilogue<'_>) {
    // SAFETY: as the caller promised.
    unsafe { multiply_with::<T>(p, rows, threads, work, finish, strip_kernel::<T>()) }
}

/// [`multiply`] with the whole strips' kernel `kernel` (the narrower last
/// strip's is the portable one).
///
/// # Safety
/// As [`multiply`]; `kernel` runs on this machine.
unsafe fn multiply_with<T: Element>(p: &Product, rows: &Rows, threads: usize, work: usize, finish: Epilogue<'_>, kernel: StripFn<T::Wide>) {
    debug_assert!(rows.fits(p) && p.m <= UNPACKED_ROWS, "strips of another product");
    let size = std::mem::size_of::<T>();
    // SAFETY: as the caller promised.
    let a = unsafe { widened_rows::<T>(p) };
    let strips = p.n.div_ceil(STRIP);
    let parts = parts(p, threads, work).min(strips);
    let (base, last) = (rows.address(), portable_strip_for::<T>());
    let run = |part: usize| {
        let mut out = [[T::Wide::default(); STRIP]; UNPACKED_ROWS];
        for s in strips * part / parts..strips * (part + 1) / parts {
            let (j0, cols) = (s * STRIP, STRIP.min(p.n - s * STRIP));
            let strip = if cols == STRIP { kernel } else { last };
            // SAFETY: strip `s` holds `k * cols` elements after the whole strips before it; the kernels run here.
            unsafe { strip(&a, p.m, p.k, base + j0 * p.k * size, cols, &mut out) };
            // SAFETY: the strip's columns of C, as the caller promised.
            unsafe { write_columns::<T, STRIP>(p, j0, cols, &out[..p.m]) };
            finish(0, p.m, j0, cols);
        }
    };
    if parts > 1 {
        (0..parts).into_par_iter().for_each(run);
    } else {
        run(0);
    }
}

/// The strips' kernel for `T` on this machine.
fn strip_kernel<T: Element>() -> StripFn<T::Wide> {
    #[cfg(target_arch = "x86_64")]
    if nax_contract::Machine::host().has(nax_contract::Feature::Avx512f)
        && let Some(kernel) = avx512::kernel::<T>()
    {
        return kernel;
    }
    portable_strip_for::<T>()
}

for_widest_vectors! {
    /// [`portable_strip`] for this machine.
    fn portable_strip_for = portable_strip(a: &[T::Wide], m: usize, k: usize, b: usize, width: usize, out: &mut [[T::Wide; STRIP]; UNPACKED_ROWS])
}

/// A strip's sums with plain loops (see [`StripFn`]).
///
/// # Safety
/// `b` holds a strip of `k * width` elements of `T`; `width` is at most [`STRIP`].
#[inline(always)]
unsafe fn portable_strip<T: Element>(a: &[T::Wide], m: usize, k: usize, b: usize, width: usize, out: &mut [[T::Wide; STRIP]; UNPACKED_ROWS]) {
    // SAFETY: as the caller promised.
    let strip = unsafe { std::slice::from_raw_parts(b as *const T, k * width) };
    for sums in out.iter_mut() {
        sums.fill(T::Wide::default());
    }
    for (kk, row) in strip.chunks_exact(width).enumerate() {
        for (i, sums) in out.iter_mut().enumerate().take(m) {
            let x = a[i * k + kk];
            for (s, &y) in sums.iter_mut().zip(row) {
                *s = *s + x * y.widen();
            }
        }
    }
}

/// The AVX-512 kernels: the strip's sums in 4 x m vector registers.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Element, Format, STRIP, StripFn, UNPACKED_ROWS};
    use std::arch::x86_64::*;

    /// The kernel for `T`'s strips, where there is one (f32, bf16, f16).
    pub(super) fn kernel<T: Element>() -> Option<StripFn<T::Wide>> {
        let f32_kernel: StripFn<f32> = match T::FORMAT {
            Format::F32 => strip::<{ Format::F32 as u8 }>,
            Format::BF16 => strip::<{ Format::BF16 as u8 }>,
            Format::F16 => strip::<{ Format::F16 as u8 }>,
            Format::F64 => return None,
        };
        // SAFETY: `T::Wide` is f32 for these formats (the `Element`
        // impls), so the two function types are the same.
        Some(unsafe { std::mem::transmute::<StripFn<f32>, StripFn<T::Wide>>(f32_kernel) })
    }

    /// How far ahead of the row it multiplies a kernel asks for the
    /// strip's next lines, in bytes: the hardware prefetchers alone left a
    /// bf16 strip's stream at two thirds of the memory's speed. Four rows
    /// of f32, sixteen of bf16 or f16 (GPT-2's step, Xeon with AMX, medians
    /// of interleaved runs: f32 at 1024 bytes 1-5% faster than at 2048 in
    /// three runs, at 4096 16% slower; bf16 at 2048 2% faster than at 1024,
    /// at 4096 9% slower).
    const fn prefetch<const FORMAT: u8>() -> usize {
        if FORMAT == Format::F32 as u8 { 1024 } else { 2048 }
    }

    /// Row `kk` of a strip of `FORMAT` elements at `b`, widened.
    ///
    /// # Safety
    /// The row is inside the strip; AVX-512F.
    #[inline(always)]
    unsafe fn row<const FORMAT: u8>(b: usize, kk: usize) -> [__m512; 4] {
        // SAFETY: as the caller promised: 64 elements at the row.
        unsafe {
            if FORMAT == Format::F32 as u8 {
                let at = (b as *const f32).add(kk * STRIP);
                [_mm512_loadu_ps(at), _mm512_loadu_ps(at.add(16)), _mm512_loadu_ps(at.add(32)), _mm512_loadu_ps(at.add(48))]
            } else {
                let at = (b as *const __m256i).add(kk * STRIP / 16);
                let half = |q: usize| _mm256_loadu_si256(at.add(q));
                if FORMAT == Format::BF16 as u8 {
                    // A bf16 is the high half of the f32 with its bits.
                    let widen = |q: usize| _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(half(q))));
                    [widen(0), widen(1), widen(2), widen(3)]
                } else {
                    [_mm512_cvtph_ps(half(0)), _mm512_cvtph_ps(half(1)), _mm512_cvtph_ps(half(2)), _mm512_cvtph_ps(half(3))]
                }
            }
        }
    }

    /// The sums of `M` rows, over the strip's rows in order, with fused
    /// multiply-adds.
    ///
    /// # Safety
    /// As [`StripFn`]; AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn rows<const M: usize, const FORMAT: u8>(a: &[f32], k: usize, b: usize, out: &mut [[f32; STRIP]; UNPACKED_ROWS]) {
        let mut sums = [[_mm512_setzero_ps(); 4]; M];
        let row_bytes = STRIP * if FORMAT == Format::F32 as u8 { 4 } else { 2 };
        for kk in 0..k {
            // The strip's lines `prefetch` bytes ahead (past its end, into
            // the next strip's), asked for now.
            for line in (0..row_bytes).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>((b + kk * row_bytes + prefetch::<FORMAT>() + line) as *const i8);
            }
            // SAFETY: row kk of the strip, as the caller promised.
            let v = unsafe { row::<FORMAT>(b, kk) };
            for (i, s) in sums.iter_mut().enumerate() {
                let x = _mm512_set1_ps(a[i * k + kk]);
                for q in 0..4 {
                    s[q] = _mm512_fmadd_ps(x, v[q], s[q]);
                }
            }
        }
        for (s, row) in sums.iter().zip(out.iter_mut()) {
            for (q, &sum) in s.iter().enumerate() {
                // SAFETY: 16 f32 of the row's 64.
                unsafe { _mm512_storeu_ps(row.as_mut_ptr().add(16 * q), sum) };
            }
        }
    }

    /// [`rows`] for `m` rows (1 to [`UNPACKED_ROWS`]) of a whole strip.
    ///
    /// # Safety
    /// As [`StripFn`], `width` [`STRIP`]; chosen only where the CPU has AVX-512F.
    unsafe fn strip<const FORMAT: u8>(a: &[f32], m: usize, k: usize, b: usize, width: usize, out: &mut [[f32; STRIP]; UNPACKED_ROWS]) {
        debug_assert_eq!(width, STRIP, "a whole strip");
        // SAFETY: as the caller promised.
        unsafe {
            match m {
                1 => rows::<1, FORMAT>(a, k, b, out),
                2 => rows::<2, FORMAT>(a, k, b, out),
                3 => rows::<3, FORMAT>(a, k, b, out),
                _ => rows::<4, FORMAT>(a, k, b, out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::{Strided, Wide};

    /// `c = a b` through strips, for B of every element type the kernels
    /// read, stored either way, against f64 sums: the AVX-512 kernel (where
    /// this CPU has it) and the portable one, on one and two threads.
    fn check<T: Element>(from: fn(f32) -> T) {
        for (m, n, k) in [(1, 200, 70), (3, 17, 33), (4, 129, 5), (2, 64, 1)] {
            for b_transposed in [false, true] {
                let a: Vec<T> = (0..m * k).map(|i| from(((i % 7) as f32 - 3.0) * 0.25)).collect();
                let b: Vec<T> = (0..k * n).map(|i| from(((i % 5) as f32 - 2.0) * 0.5)).collect();
                let (row_step, col_step) = if b_transposed { (1, k as isize) } else { (n as isize, 1) };
                let p = |c: &mut Vec<T>| Product {
                    m,
                    n,
                    k,
                    a: Strided { ptr: a.as_ptr() as usize, row_step: k as isize, col_step: 1 },
                    b: Strided { ptr: b.as_ptr() as usize, row_step, col_step },
                    c: Strided { ptr: c.as_mut_ptr() as usize, row_step: n as isize, col_step: 1 },
                    accumulate: false,
                };
                let mut c = vec![T::default(); m * n];
                // SAFETY: B holds every element the steps reach.
                let rows = unsafe { pack::<T>(&p(&mut c)) };
                let mut kernels: Vec<StripFn<T::Wide>> = vec![portable_strip_for::<T>(), strip_kernel::<T>()];
                kernels.dedup_by_key(|f| *f as usize);
                for kernel in kernels {
                    for threads in [1, 2] {
                        c.fill(T::default());
                        let finished = std::sync::Mutex::new(vec![0u32; n]);
                        let finish = |_: usize, _: usize, j: usize, cols: usize| finished.lock().unwrap()[j..j + cols].iter_mut().for_each(|f| *f += 1);
                        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                        // SAFETY: the matrices hold every element; the strips are this product's.
                        pool.install(|| unsafe { multiply_with::<T>(&p(&mut c), &rows, threads, 0, &finish, kernel) });
                        assert!(finished.into_inner().unwrap().iter().all(|&f| f == 1), "every column finished once");
                        for i in 0..m {
                            for j in 0..n {
                                let b_at = |q: usize| if b_transposed { b[j * k + q] } else { b[q * n + j] };
                                let want: f64 = (0..k).map(|q| f64::from(a[i * k + q].widen().to_f32()) * f64::from(b_at(q).widen().to_f32())).sum();
                                let got = f64::from(c[i * n + j].widen().to_f32());
                                // The inputs are multiples of 1/8 and small: every sum is exact.
                                assert_eq!(got, want, "{m}x{n}x{k} at ({i}, {j}), B transposed: {b_transposed}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn strips_of_every_element_type_give_exact_sums() {
        check::<f32>(|x| x);
        check::<half::bf16>(half::bf16::from_f32);
        check::<half::f16>(half::f16::from_f32);
        check::<f64>(f64::from);
    }

    /// A subnormal in B is packed as a zero of its sign, as every product reads it.
    #[test]
    fn strips_hold_subnormals_as_zeros() {
        let b = [1e-40f32, -1e-40, 2.0];
        let a = [1e30f32];
        let mut c = [f32::NAN; 3];
        let p = Product {
            m: 1,
            n: 3,
            k: 1,
            a: Strided { ptr: a.as_ptr() as usize, row_step: 1, col_step: 1 },
            b: Strided { ptr: b.as_ptr() as usize, row_step: 3, col_step: 1 },
            c: Strided { ptr: c.as_mut_ptr() as usize, row_step: 3, col_step: 1 },
            accumulate: false,
        };
        // SAFETY: the matrices hold every element the steps reach.
        unsafe {
            let rows = pack::<f32>(&p);
            multiply::<f32>(&p, &rows, 1, 0, &|_, _, _, _| ());
        }
        // Read as they are, they would give -1e-10 and 1e-10.
        assert_eq!(c, [0.0, 0.0, 2e30]);
    }
}
