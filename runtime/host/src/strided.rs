//! The strided pointwise kernel (a view's copy, and the eager named
//! tensors' arithmetic, `nax-named`): `out[i] = op(a[i], b[i])` over a result of any
//! shape, each operand read through its own strides (0 where it
//! broadcasts), the result written row-major.
//!
//! The work is shaped so that the inner loops vectorise:
//!
//! - Axes are first merged where every operand steps through them as one
//!   (a same-layout add becomes one long row; a suffix or prefix broadcast
//!   becomes rows of a contiguous and a repeated operand), and size-1 axes
//!   are dropped.
//! - Rows: along the innermost axis each operand is contiguous, repeated
//!   (stride 0) or strided; the contiguous and repeated cases are plain
//!   zips of slices.
//! - An operand that reads across the output's rows (a transposed one: its
//!   innermost stride is more than 1) is read in tiles of the innermost
//!   axis and of the axis along which it is contiguous: each tile is copied
//!   run by run (whole cache lines, read once) to a small buffer that the
//!   rows then read from L1. Reading it in place instead would touch a
//!   cache line per element, and with power-of-two strides those lines
//!   evict each other.
//! - Large results are split into contiguous blocks run on rayon's current
//!   pool (a caller's `ThreadPool::install` chooses it), tile-aligned.

use std::collections::TryReserveError;
use std::mem::{MaybeUninit, size_of};

use crate::tensor::row_major_strides;

/// The index geometry of a pointwise op after merging axes: the result's
/// sizes and, per axis, each operand's stride in elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    dims: Vec<usize>,
    a: Vec<usize>,
    b: Vec<usize>,
    len: usize,
}

impl Geometry {
    /// The geometry of a result of sizes `dims` whose operands step by
    /// `a[k]` and `b[k]` elements along axis `k` (0 where they broadcast).
    /// `None` when the element count overflows `usize`.
    pub fn new(dims: &[usize], a: &[usize], b: &[usize]) -> Option<Geometry> {
        let axes: Vec<(usize, usize, usize)> = dims.iter().zip(a).zip(b).map(|((&d, &sa), &sb)| (d, sa, sb)).collect();
        // The element count of the axes kept, which the kernel writes.
        let len = if axes.iter().any(|&(d, _, _)| d == 0) { 0 } else { axes.iter().try_fold(1usize, |acc, &(d, _, _)| acc.checked_mul(d))? };
        let mut g = Geometry { dims: Vec::with_capacity(axes.len()), a: Vec::with_capacity(axes.len()), b: Vec::with_capacity(axes.len()), len };
        for (d, sa, sb) in axes.into_iter().filter(|&(d, _, _)| d != 1) {
            let merges = |outer: Option<&usize>, inner: usize| outer.is_some_and(|&o| Some(o) == inner.checked_mul(d));
            if merges(g.a.last(), sa) && merges(g.b.last(), sb) {
                if let (Some(gd), Some(ga), Some(gb)) = (g.dims.last_mut(), g.a.last_mut(), g.b.last_mut()) {
                    *gd *= d;
                    *ga = sa;
                    *gb = sb;
                }
            } else {
                g.dims.push(d);
                g.a.push(sa);
                g.b.push(sb);
            }
        }
        if g.dims.is_empty() {
            g.dims.push(1);
            g.a.push(0);
            g.b.push(0);
        }
        Some(g)
    }
}

/// The sizes that shape the work.
#[derive(Clone, Copy, Debug)]
struct Tuning {
    /// Results up to this many elements run on the calling thread.
    grain: usize,
    /// The extent of a tile along the axis the transposed operand is
    /// contiguous in.
    tile_rows: usize,
    /// The extent of a tile along the innermost axis.
    tile_cols: usize,
}

impl Tuning {
    /// Tiles of 16 KiB of the transposed operand (half a typical L1 data
    /// cache): 32 columns of 512-byte runs (128 f32), the runs long enough
    /// for the hardware prefetchers. Measured best among 16 to 1024 rows
    /// by 4 to 256 columns on the 4096 x 4096 f32 benchmark.
    fn for_type<T>() -> Tuning {
        Tuning { grain: 1 << 15, tile_rows: (512 / size_of::<T>().max(1)).max(8), tile_cols: 32 }
    }
}

/// `op(a, b)` elementwise over `geo`, on rayon's current pool. The only
/// error is a failed allocation of the result.
pub fn pointwise<T, U, F>(geo: &Geometry, a: &[T], b: &[T], op: F) -> Result<Vec<U>, TryReserveError>
where
    T: Copy + Sync,
    U: Copy + Send,
    F: Fn(T, T) -> U + Sync,
{
    pointwise_tuned(geo, a, b, &op, Tuning::for_type::<T>())
}

/// [`pointwise`] with explicit sizes (the tests use tiny ones).
fn pointwise_tuned<T, U, F>(geo: &Geometry, a: &[T], b: &[T], op: &F, tuning: Tuning) -> Result<Vec<U>, TryReserveError>
where
    T: Copy + Sync,
    U: Copy + Send,
    F: Fn(T, T) -> U + Sync,
{
    let mut out: Vec<U> = Vec::new();
    out.try_reserve_exact(geo.len)?;
    if geo.len > 0 {
        let plan = Plan { geo, out: row_major_strides(&geo.dims), tiling: tiling(geo), tuning };
        let whole = Block { dims: geo.dims.clone(), a: 0, b: 0 };
        plan.fill(whole, &mut out.spare_capacity_mut()[..geo.len], a, b, op);
    }
    // SAFETY: the capacity is at least `geo.len`, and `fill` has written
    // every one of the first `geo.len` slots: `geo.len` is the product of
    // `geo.dims` (see `Geometry::new`), `fill` splits its slice into
    // disjoint blocks that cover it, and in each block visits every index
    // of the block's sizes once (`rows` or `tiles`), writing every slot of
    // each row segment it takes (`row`). A panic (an out-of-bounds read)
    // would unwind before this point, leaving the length 0.
    unsafe { out.set_len(geo.len) };
    Ok(out)
}

/// How an operand that reads across the output's rows (its innermost
/// stride is more than 1: a transposed one) is read: in tiles of the
/// innermost axis and of `axis`, the one along which it steps least (less
/// than along the innermost axis).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tiling {
    axis: usize,
    transposed: Input,
}

/// One of the two inputs of the kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Input {
    A,
    B,
}

/// The tiling of `geo`, if an operand reads across the output's rows.
fn tiling(geo: &Geometry) -> Option<Tiling> {
    let inner = geo.dims.len().checked_sub(1)?;
    let across = |s: &[usize]| s.get(inner).is_some_and(|&st| st > 1);
    let (s, transposed) = if across(&geo.b) {
        (&geo.b, Input::B)
    } else if across(&geo.a) {
        (&geo.a, Input::A)
    } else {
        return None;
    };
    let inner_stride = s.get(inner).copied().unwrap_or(0);
    let axis = (0..inner).filter(|&k| s[k] != 0 && s[k] < inner_stride).min_by_key(|&k| s[k])?;
    Some(Tiling { axis, transposed })
}

/// A piece of the result: the indices `0..dims[k]` along each axis,
/// starting at offsets `a` and `b` into the operands. Its elements are
/// contiguous in the output: the axes before its first axis of size above 1
/// have size 1 and the axes after that one are whole.
struct Block {
    dims: Vec<usize>,
    a: usize,
    b: usize,
}

/// What every block of one op shares.
struct Plan<'g> {
    geo: &'g Geometry,
    /// The output's strides (row-major).
    out: Vec<usize>,
    /// See [`Tiling`].
    tiling: Option<Tiling>,
    tuning: Tuning,
}

impl Plan<'_> {
    /// Writes every slot of `out`, which holds `block`'s elements.
    fn fill<T, U, F>(&self, block: Block, out: &mut [MaybeUninit<U>], a: &[T], b: &[T], op: &F)
    where
        T: Copy + Sync,
        U: Copy + Send,
        F: Fn(T, T) -> U + Sync,
    {
        if out.len() > self.tuning.grain
            && let Some((lo, hi, at)) = self.split(&block, out.len())
        {
            let (out_lo, out_hi) = out.split_at_mut(at);
            rayon::join(|| self.fill(lo, out_lo, a, b, op), || self.fill(hi, out_hi, a, b, op));
            return;
        }
        match self.tiling {
            Some(t) if block.dims.get(t.axis).is_some_and(|&d| d > 1) => self.tiles(t, &block, out, a, b, op),
            _ => self.rows(&block, out, a, b, op),
        }
    }

    /// Two blocks that together are `block` (of `len` elements), split
    /// along its first axis of size above 1, and the element count of the
    /// first; `None` when that axis is the tile axis and splitting it would
    /// cut tiles of a block not much larger than a tile band.
    fn split(&self, block: &Block, len: usize) -> Option<(Block, Block, usize)> {
        let m = block.dims.iter().position(|&d| d > 1)?;
        let size = block.dims[m];
        let rows = self.tuning.tile_rows;
        let mid = if self.tiling.is_none_or(|t| t.axis != m) {
            size / 2
        } else if size > rows {
            // The multiple of the tile extent nearest above the half: it is
            // below `size` since `size > rows`.
            (size / 2).div_ceil(rows) * rows
        } else if len / rows >= self.tuning.grain {
            size / 2
        } else {
            return None;
        };
        let after: usize = block.dims[m + 1..].iter().product();
        let mut lo = Block { dims: block.dims.clone(), a: block.a, b: block.b };
        lo.dims[m] = mid;
        let mut hi = Block { dims: block.dims.clone(), a: block.a + mid * self.geo.a[m], b: block.b + mid * self.geo.b[m] };
        hi.dims[m] = size - mid;
        Some((lo, hi, mid * after))
    }

    /// Writes `block` row by row along the innermost axis.
    fn rows<T, U, F>(&self, block: &Block, out: &mut [MaybeUninit<U>], a: &[T], b: &[T], op: &F)
    where
        T: Copy,
        U: Copy,
        F: Fn(T, T) -> U,
    {
        let inner = block.dims.len() - 1;
        let n = block.dims[inner];
        let (sa, sb) = (self.geo.a[inner], self.geo.b[inner]);
        let strides = [&self.geo.a[..inner], &self.geo.b[..inner], &self.out[..inner]];
        for_each_offset(&block.dims[..inner], strides, [block.a, block.b, 0], |[oa, ob, o]| {
            let (ra, rb) = (Run::new(a, oa, sa), Run::new(b, ob, sb));
            row(&mut out[o..o + n], ra, rb, op);
        });
    }

    /// Writes `block` in tiles of the tiling's axis and the innermost
    /// axis. Each tile of the transposed operand is first copied, column by
    /// column (runs along the axis it steps least in), to a buffer that the
    /// rows then read: every cache line of that operand is read once and
    /// used whole, whatever its strides.
    fn tiles<T, U, F>(&self, tiling: Tiling, block: &Block, out: &mut [MaybeUninit<U>], a: &[T], b: &[T], op: &F)
    where
        T: Copy,
        U: Copy,
        F: Fn(T, T) -> U,
    {
        let (p, transposed) = (tiling.axis, tiling.transposed);
        let inner = block.dims.len() - 1;
        let (n, rows) = (block.dims[inner], block.dims[p]);
        let (sa, sb) = (self.geo.a[inner], self.geo.b[inner]);
        let (pa, pb, po) = (self.geo.a[p], self.geo.b[p], self.out[p]);
        let (x, px, sx) = match transposed {
            Input::A => (a, pa, sa),
            Input::B => (b, pb, sb),
        };
        let Tuning { tile_rows, tile_cols, .. } = self.tuning;
        let mut buf: Vec<T> = Vec::with_capacity(tile_rows * tile_cols);
        let mut outer = block.dims[..inner].to_vec();
        outer[p] = 1;
        let strides = [&self.geo.a[..inner], &self.geo.b[..inner], &self.out[..inner]];
        for_each_offset(&outer, strides, [block.a, block.b, 0], |[oa, ob, o]| {
            let ox = match transposed {
                Input::A => oa,
                Input::B => ob,
            };
            for i0 in (0..rows).step_by(tile_rows) {
                let h = tile_rows.min(rows - i0);
                for j0 in (0..n).step_by(tile_cols) {
                    let w = tile_cols.min(n - j0);
                    // The tile, column-major: element (ii, jj) at jj * h + ii.
                    buf.clear();
                    for jj in 0..w {
                        let start = ox + i0 * px + (j0 + jj) * sx;
                        if px == 1 {
                            buf.extend_from_slice(&x[start..start + h]);
                        } else {
                            buf.extend((0..h).map(|ii| x[start + ii * px]));
                        }
                    }
                    for ii in 0..h {
                        let i = i0 + ii;
                        let seg = &mut out[o + i * po + j0..][..w];
                        match transposed {
                            Input::A => {
                                let rb = Run::new(b, ob + i * pb + j0 * sb, sb);
                                row(seg, Run::new(&buf, ii, h), rb, op)
                            }
                            Input::B => {
                                let ra = Run::new(a, oa + i * pa + j0 * sa, sa);
                                row(seg, ra, Run::new(&buf, ii, h), op)
                            }
                        }
                    }
                }
            }
        });
    }
}

/// Calls `f` with the offsets `[a, b, out]` of every index of `dims`
/// (row-major order), starting from `start` and stepping by `strides`.
/// Every size must be at least 1.
fn for_each_offset(dims: &[usize], strides: [&[usize]; 3], start: [usize; 3], mut f: impl FnMut([usize; 3])) {
    let mut idx = vec![0usize; dims.len()];
    let mut off = start;
    loop {
        f(off);
        let mut k = dims.len();
        loop {
            let Some(prev) = k.checked_sub(1) else {
                return;
            };
            k = prev;
            idx[k] += 1;
            if idx[k] < dims[k] {
                for (o, s) in off.iter_mut().zip(strides) {
                    *o += s[k];
                }
                break;
            }
            for (o, s) in off.iter_mut().zip(strides) {
                *o -= s[k] * (dims[k] - 1);
            }
            idx[k] = 0;
        }
    }
}

/// An input read from `offset`, stepping by `stride` elements.
struct Run<'d, T> {
    data: &'d [T],
    offset: usize,
    stride: usize,
}

impl<'d, T> Run<'d, T> {
    fn new(data: &'d [T], offset: usize, stride: usize) -> Run<'d, T> {
        Run { data, offset, stride }
    }
}

/// Writes `out[j] = op(a[j], b[j])` for every `j` of `out`, reading each
/// input along its run. Contiguous and repeated inputs are zips of slices
/// (these loops vectorise); an out-of-bounds read panics, it never leaves a
/// slot unwritten.
#[inline(always)]
fn row<T: Copy, U: Copy, F: Fn(T, T) -> U>(out: &mut [MaybeUninit<U>], a: Run<'_, T>, b: Run<'_, T>, op: &F) {
    let Run { data: a, offset: oa, stride: sa } = a;
    let Run { data: b, offset: ob, stride: sb } = b;
    let n = out.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in out.iter_mut().zip(&a[oa..oa + n]).zip(&b[ob..ob + n]) {
                o.write(op(x, y));
            }
        }
        (1, 0) => {
            let y = b[ob];
            for (o, &x) in out.iter_mut().zip(&a[oa..oa + n]) {
                o.write(op(x, y));
            }
        }
        (0, 1) => {
            let x = a[oa];
            for (o, &y) in out.iter_mut().zip(&b[ob..ob + n]) {
                o.write(op(x, y));
            }
        }
        (0, 0) => {
            let v = op(a[oa], b[ob]);
            for o in out {
                o.write(v);
            }
        }
        (1, _) => {
            for (j, (o, &x)) in out.iter_mut().zip(&a[oa..oa + n]).enumerate() {
                o.write(op(x, b[ob + j * sb]));
            }
        }
        (_, 1) => {
            for (j, (o, &y)) in out.iter_mut().zip(&b[ob..ob + n]).enumerate() {
                o.write(op(a[oa + j * sa], y));
            }
        }
        _ => {
            for (j, o) in out.iter_mut().enumerate() {
                o.write(op(a[oa + j * sa], b[ob + j * sb]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: every index of `dims`, read through the strides.
    fn naive(dims: &[usize], sa: &[usize], sb: &[usize], a: &[i64], b: &[i64]) -> Vec<i64> {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|flat| {
                let (mut rem, mut oa, mut ob) = (flat, 0, 0);
                for k in (0..dims.len()).rev() {
                    let i = rem % dims[k];
                    rem /= dims[k];
                    oa += i * sa[k];
                    ob += i * sb[k];
                }
                a[oa] * 1000 + b[ob]
            })
            .collect()
    }

    /// The strides of an operand of `dims` whose axes are stored in the
    /// order `perm` (outermost first), with the axes in `broadcast` read
    /// with stride 0; and the operand's element count.
    fn operand(dims: &[usize], perm: &[usize], broadcast: &[bool]) -> (Vec<usize>, usize) {
        let mut strides = vec![0; dims.len()];
        let mut acc = 1;
        for &k in perm.iter().rev() {
            if !broadcast[k] {
                strides[k] = acc;
                acc *= dims[k];
            }
        }
        (strides, acc)
    }

    fn check(dims: &[usize], sa: &[usize], na: usize, sb: &[usize], nb: usize, tuning: Tuning) {
        let a: Vec<i64> = (0..na as i64).collect();
        let b: Vec<i64> = (0..nb as i64).map(|x| x * 7 + 1).collect();
        let geo = Geometry::new(dims, sa, sb).unwrap();
        let got = pointwise_tuned(&geo, &a, &b, &|x: i64, y: i64| x * 1000 + y, tuning).unwrap();
        assert_eq!(got, naive(dims, sa, sb, &a, &b), "{dims:?} {sa:?} {sb:?}");
    }

    fn tiny() -> Tuning {
        Tuning { grain: 3, tile_rows: 2, tile_cols: 3 }
    }

    #[test]
    fn geometry_merges_axes() {
        let g = Geometry::new(&[2, 3, 4], &[12, 4, 1], &[12, 4, 1]).unwrap();
        assert_eq!((g.dims.as_slice(), g.a.as_slice()), (&[24][..], &[1][..]));
        // A suffix broadcast: rows of a contiguous and a repeated operand.
        let g = Geometry::new(&[2, 3, 4], &[12, 4, 1], &[0, 0, 1]).unwrap();
        assert_eq!(g.dims, [6, 4]);
        assert_eq!((g.a.as_slice(), g.b.as_slice()), (&[4, 1][..], &[0, 1][..]));
        // Size-1 axes are dropped; rank 0 is one element.
        let g = Geometry::new(&[1, 5, 1], &[5, 1, 1], &[0, 1, 0]).unwrap();
        assert_eq!(g.dims, [5]);
        let g = Geometry::new(&[], &[], &[]).unwrap();
        assert_eq!((g.dims.as_slice(), g.len), (&[1][..], 1));
        assert_eq!(Geometry::new(&[0, 3], &[3, 1], &[3, 1]).unwrap().len, 0);
        assert!(Geometry::new(&[usize::MAX, 2], &[0, 0], &[0, 0]).is_none());
    }

    #[test]
    fn transposed_operand_is_tiled() {
        let g = Geometry::new(&[5, 7], &[7, 1], &[1, 5]).unwrap();
        let t = tiling(&g).unwrap();
        assert_eq!((t.axis, t.transposed), (0, Input::B));
        let g = Geometry::new(&[5, 7], &[1, 5], &[7, 1]).unwrap();
        assert_eq!(tiling(&g).unwrap().transposed, Input::A);
        check(&[5, 7], &[1, 5], 35, &[7, 1], 35, tiny());
        check(&[5, 7], &[7, 1], 35, &[1, 5], 35, tiny());
        check(&[64, 100], &[100, 1], 6400, &[1, 64], 6400, Tuning::for_type::<i64>());
        // Three axes, the transposed operand contiguous along the first.
        check(&[3, 4, 5], &[20, 5, 1], 60, &[1, 15, 3], 60, tiny());
        // Splitting a block no larger than a tile band along the tile axis.
        let t = Tuning { grain: 2, tile_rows: 4, tile_cols: 2 };
        check(&[3, 40, 5], &[200, 5, 1], 600, &[1, 15, 3], 600, t);
    }

    #[test]
    fn large_results_split_across_threads() {
        let t = Tuning::for_type::<i64>();
        check(&[300, 257], &[257, 1], 300 * 257, &[1, 300], 300 * 257, t);
        check(&[300, 257], &[257, 1], 300 * 257, &[0, 1], 257, t);
        check(&[1 << 16], &[1], 1 << 16, &[1], 1 << 16, t);
    }

    /// Result sizes, then for each operand the order its axes are stored
    /// in and which axes it broadcasts.
    type Case = (Vec<usize>, Vec<usize>, Vec<bool>, Vec<usize>, Vec<bool>);

    fn case() -> impl Strategy<Value = Case> {
        (0usize..=4).prop_flat_map(|rank| {
            let perm = Just((0..rank).collect::<Vec<usize>>()).prop_shuffle();
            (
                proptest::collection::vec(1usize..=5, rank),
                perm.clone(),
                proptest::collection::vec(any::<bool>(), rank),
                perm,
                proptest::collection::vec(any::<bool>(), rank),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn matches_naive_strides((dims, pa, ba, pb, bb) in case(), grain in 1usize..8,
                                 rows in 1usize..4, cols in 1usize..4) {
            let (sa, na) = operand(&dims, &pa, &ba);
            let (sb, nb) = operand(&dims, &pb, &bb);
            let t = Tuning { grain, tile_rows: rows, tile_cols: cols };
            check(&dims, &sa, na, &sb, nb, t);
        }
    }
}
