//! The library's allocator: the C library's `malloc` for small blocks, and
//! blocks of 1 MiB or more (weights, temporaries, results, packed
//! panels) mapped on their own, aligned to 2 MiB and advised onto
//! transparent huge pages, as the JIT's allocator (mimalloc) places them,
//! and unmapped when freed, so nothing of them stays behind. glibc alone
//! puts large blocks 16 bytes past a cache line on 4 KiB pages, which
//! cost the block's library about 3% against the JIT (measured
//! interleaved, `benches/compare.py --workload block_so`); asking it for
//! 2 MiB-aligned blocks fragments its heap (the resident set grew by
//! 20 MiB over 100 open/call/close rounds). mimalloc itself is not linked
//! in: its thread-exit hooks would outlive a library unloaded with
//! `dlclose`; this allocator keeps no state.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks at least this large are aligned to huge pages.
const LARGE: usize = 1 << 20;

/// A transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

/// See the module's documentation.
pub struct LibraryAllocator;

/// A large block's mapped length: its size in whole pages.
fn mapped(size: usize) -> usize {
    size.div_ceil(4096) * 4096
}

// SAFETY: small blocks are the system allocator's; large ones are
// mappings of their own, unmapped whole when freed; a block's size (from
// its layout) says which.
unsafe impl GlobalAlloc for LibraryAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() < LARGE {
            // SAFETY: the caller's contract.
            return unsafe { System.alloc(layout) };
        }
        let align = HUGE_PAGE.max(layout.align());
        let (len, Some(span)) = (mapped(layout.size()), mapped(layout.size()).checked_add(align)) else { return std::ptr::null_mut() };
        // SAFETY: a fresh private anonymous mapping; nothing else is touched.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), span, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if base == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let start = (base as usize).div_ceil(align) * align;
        // SAFETY: the head before the aligned start and the tail after the
        // block are parts of the mapping just made, returned to the system;
        // the advice covers the block's whole huge pages.
        unsafe {
            if start > base as usize {
                libc::munmap(base, start - base as usize);
            }
            let tail = base as usize + span - (start + len);
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
            libc::madvise(start as *mut libc::c_void, len / HUGE_PAGE * HUGE_PAGE, libc::MADV_HUGEPAGE);
        }
        start as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() < LARGE {
            // SAFETY: the caller's contract: the block is the system allocator's.
            unsafe { System.dealloc(ptr, layout) }
        } else {
            // SAFETY: the block is a mapping of its own of this length.
            unsafe { libc::munmap(ptr.cast(), mapped(layout.size())) };
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() < LARGE && new_size < LARGE {
            // SAFETY: the caller's contract; both sizes are the system allocator's.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller's contract (a valid layout of the new size).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: the caller's contract.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_huge_page_aligned_and_every_block_comes_back() {
        let a = LibraryAllocator;
        for (size, align) in [(24, 8), (4096, 64), (LARGE, 8), (3 * LARGE + 5, 4096)] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a nonzero size; the block is written inside, grown, shrunk and freed once.
            unsafe {
                let p = a.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0);
                if size >= LARGE {
                    assert_eq!(p as usize % HUGE_PAGE, 0);
                }
                p.write_bytes(7, size);
                let q = a.realloc(p, layout, size * 2);
                assert_eq!(*q.add(size - 1), 7);
                let r = a.realloc(q, Layout::from_size_align(size * 2, align).unwrap(), 16);
                assert_eq!(*r, 7);
                a.dealloc(r, Layout::from_size_align(16, align).unwrap());
            }
        }
    }
}
