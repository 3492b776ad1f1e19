//! A counting global allocator for DRAM accounting in benchmarks.
//!
//! [`CountingAlloc`] wraps [`std::alloc::System`] and keeps two process-wide
//! counters: the bytes currently live on the heap and the peak of that value
//! since start (or since the last [`reset_peak`]). A binary opts in with
//!
//! ```ignore
//! #[global_allocator]
//! static A: cascade_bench::alloc::CountingAlloc = cascade_bench::alloc::CountingAlloc;
//! ```
//!
//! Without that, [`heap_bytes`] and [`peak_heap_bytes`] stay at 0.
//!
//! Thread safety: the counters are atomics updated with relaxed ordering, so
//! any thread may allocate and read them concurrently. Readings are exact
//! when no other thread is allocating; otherwise they are a momentary view.
//! Each counter sits on its own cache line, but every allocation still
//! touches the shared "current" counter, which costs some throughput on
//! allocation-heavy, many-threaded workloads (equally for all measured code).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A counter alone on its cache line, so the two counters do not false-share.
#[repr(align(64))]
struct PaddedCounter(AtomicUsize);

static CURRENT: PaddedCounter = PaddedCounter(AtomicUsize::new(0));
static PEAK: PaddedCounter = PaddedCounter(AtomicUsize::new(0));

/// Global allocator that forwards to [`System`] and counts live heap bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

/// Bytes currently allocated through [`CountingAlloc`] (requested sizes).
pub fn heap_bytes() -> usize {
    CURRENT.0.load(Relaxed)
}

/// Highest value [`heap_bytes`] has reached since start or [`reset_peak`].
pub fn peak_heap_bytes() -> usize {
    PEAK.0.load(Relaxed)
}

/// Restarts peak tracking from the current live heap size.
pub fn reset_peak() {
    PEAK.0.store(CURRENT.0.load(Relaxed), Relaxed);
}

fn record_alloc(size: usize) {
    let now = CURRENT.0.fetch_add(size, Relaxed) + size;
    // Only write the peak line when a new peak is actually reached.
    if now > PEAK.0.load(Relaxed) {
        PEAK.0.fetch_max(now, Relaxed);
    }
}

fn record_dealloc(size: usize) {
    CURRENT.0.fetch_sub(size, Relaxed);
}

// SAFETY: every method forwards to `System`, which upholds the `GlobalAlloc`
// contract; the bookkeeping only touches atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has non-zero size, as `System` requires.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as `alloc`, passed through unchanged.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence
        // from `System`) with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        record_dealloc(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` describe a live block
        // from this allocator and that `new_size` is valid for `layout.align()`.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            // On failure the old block stays live and the counters are unchanged.
            record_dealloc(layout.size());
            record_alloc(new_size);
        }
        new_ptr
    }
}
