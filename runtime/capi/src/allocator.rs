//! The library's allocator: the C library's `malloc` for small blocks, and
//! blocks of 1 MiB or more (weights, temporaries, results, packed
//! panels) mapped on their own, aligned to 2 MiB and advised onto
//! transparent huge pages, as the JIT's allocator (mimalloc) places them,
//! and kept when freed for the next block of about their size (up to
//! [`CACHE_BYTES`], as mimalloc keeps its segments: a result allocated per
//! call does not fault its pages in again), all returned to the system
//! when the last model closes ([`release_cache`]). glibc alone
//! puts large blocks 16 bytes past a cache line on 4 KiB pages, which
//! cost the block's library about 3% against the JIT (measured
//! interleaved, `benches/compare.py --workload block_so`); asking it for
//! 2 MiB-aligned blocks fragments its heap (the resident set grew by
//! 20 MiB over 100 open/call/close rounds), and mapping each block afresh
//! cost 10% in page faults. mimalloc itself is not linked in: its
//! thread-exit hooks would outlive a library unloaded with `dlclose`.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks at least this large are aligned to huge pages.
const LARGE: usize = 1 << 20;

/// A transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

/// At most this many bytes of freed large blocks are kept for reuse.
const CACHE_BYTES: usize = 256 << 20;

/// Freed large blocks kept for reuse: (address, mapped length), 0 for a
/// free slot. A fixed array, so the allocator never allocates for itself.
static CACHE: std::sync::Mutex<[(usize, usize); 16]> = std::sync::Mutex::new([(0, 0); 16]);

/// The cache, even if a thread panicked holding it (its entries stay valid).
fn cache() -> std::sync::MutexGuard<'static, [(usize, usize); 16]> {
    CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Returns every kept block to the system (when no model is open).
pub fn release_cache() {
    for slot in cache().iter_mut() {
        if slot.1 > 0 {
            // SAFETY: a kept block: a mapping of its own of this length, in no one's use.
            unsafe { libc::munmap(slot.0 as *mut libc::c_void, slot.1) };
            *slot = (0, 0);
        }
    }
}

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
        let need = mapped(layout.size());
        {
            // The smallest kept block that fits, if it is at most twice the size.
            let mut kept = cache();
            let best = kept.iter_mut().filter(|(a, l)| *l >= need && *l <= 2 * need && a % align == 0).min_by_key(|(_, l)| *l);
            if let Some(slot) = best {
                let (address, length) = *slot;
                *slot = (0, 0);
                if length > need {
                    // SAFETY: the kept block's tail past the new block, returned
                    // to the system, so the block's mapping is exactly `need` long.
                    unsafe { libc::munmap((address + need) as *mut libc::c_void, length - need) };
                }
                return address as *mut u8;
            }
        }
        let (len, Some(span)) = (need, need.checked_add(align)) else { return std::ptr::null_mut() };
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
            let len = mapped(layout.size());
            let mut kept = cache();
            let held: usize = kept.iter().map(|(_, l)| l).sum();
            match kept.iter_mut().find(|(_, l)| *l == 0) {
                Some(slot) if held + len <= CACHE_BYTES => *slot = (ptr as usize, len),
                _ => {
                    // SAFETY: the block is a mapping of its own of this length.
                    unsafe { libc::munmap(ptr.cast(), len) };
                }
            }
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
        // A freed large block is kept and given to the next block of about its size.
        release_cache();
        let layout = Layout::from_size_align(3 * LARGE, 8).unwrap();
        // SAFETY: blocks allocated and freed once each.
        unsafe {
            let p = a.alloc(layout);
            a.dealloc(p, layout);
            let q = a.alloc(Layout::from_size_align(2 * LARGE, 8).unwrap());
            assert_eq!(p, q, "the kept block is reused");
            a.dealloc(q, Layout::from_size_align(2 * LARGE, 8).unwrap());
        }
        release_cache();
        assert!(cache().iter().all(|&(_, l)| l == 0));
    }
}
