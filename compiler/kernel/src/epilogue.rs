//! Epilogue fusion, after kernels are formed: an elementwise store that
//! reads a matrix product's output at its own position, and is its only
//! reader, becomes the product's epilogue (`x @ w + b`, `gelu(x @ w)`,
//! `(q @ k) * s`): the product writes the store's output, and the store's
//! expression runs over it in place, so the product's own buffer and its
//! second kernel are gone.

use crate::kernel::{Body, BufferKind, Expr, Index, Program, Schedule};
use crate::rows::{Readers, remove_kernels};

/// Fuses each such store into its product. The pairs are independent (a
/// store takes one product, and what it becomes is no store and no
/// product without an epilogue), so one sweep finds them all and they are
/// fused together.
pub fn fuse(p: &mut Program) {
    let pairs = fusions(p);
    let products = pairs.iter().map(|&(product, ..)| product).collect();
    for (product, store, mut value) in pairs {
        let mut k = p.kernels[product].clone();
        let out = p.kernels[store].output;
        value.rewrite(&mut |e| {
            if let Expr::Load { buffer, .. } = e
                && *buffer == k.output
            {
                *buffer = out;
            }
        });
        k.output = out;
        if let Some(g) = &mut k.schedule.gemm {
            g.epilogue = Some(value);
        }
        // The product's checks pass to the kernel after it when it is removed.
        k.checks = std::mem::take(&mut p.kernels[store].checks);
        p.kernels[store] = k;
    }
    remove_kernels(p, products);
}

/// The (product, store) pairs, each store's first: the product is a GEMM
/// kernel without an epilogue whose output is a temporary only the store
/// reads, at the store's own position; the store is a plain elementwise
/// kernel over the same loops, of the same dtype, after the product; and
/// the store's value.
fn fusions(p: &Program) -> Vec<(usize, usize, Expr)> {
    let readers = Readers::new(p);
    let mut pairs = Vec::new();
    for (si, s) in p.kernels.iter().enumerate() {
        let Body::Store(value) = &s.body else { continue };
        if !s.rows.is_empty() || s.schedule != Schedule::default() || p.buffers[s.output].kind != BufferKind::Temporary || s.reads_own_output() {
            continue;
        }
        let own: Vec<Index> = (0..s.loops.len()).map(Index::Loop).collect();
        for (buffer, index) in value.loads() {
            if index != own.as_slice() || !readers.only_reader(p, buffer, si, &own) || p.buffers[buffer].dtype != p.buffers[s.output].dtype {
                continue;
            }
            let Some(pi) = readers.writer(buffer) else { continue };
            let k = &p.kernels[pi];
            let rank = p.buffers[buffer].shape.len();
            if pi < si && k.schedule.gemm.as_ref().is_some_and(|g| g.epilogue.is_none()) && k.loops.len() == rank + 1 && s.loops.len() == rank {
                pairs.push((pi, si, value.clone()));
                break;
            }
        }
    }
    pairs
}
