//! A counting global allocator for DRAM accounting in benchmarks.
//!
//! [`CountingAlloc`] wraps an allocator ([`std::alloc::System`] by default) and keeps two process-wide
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
//! Thread safety and cost: each thread counts into its own cache-line-padded shard
//! (picked once per thread), so allocation-heavy multi-threaded workloads do not
//! bounce one shared counter between cores. [`heap_bytes`] sums the shards (a
//! momentary view while other threads allocate). The peak is *sampled*: every
//! [`heap_bytes`] call and every [`sample_peak`] call (the benchmark runner calls it
//! on a timer) raises it to the current sum, so short spikes between samples can be
//! missed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::Relaxed};

const SHARDS: usize = 64;

/// A counter alone on its cache line, so shards do not false-share.
#[repr(align(64))]
struct Shard(AtomicIsize);

static CURRENT: [Shard; SHARDS] = [const { Shard(AtomicIsize::new(0)) }; SHARDS];
static PEAK: AtomicUsize = AtomicUsize::new(0);
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Global allocator that forwards to `A` (the C library's [`System`] allocator unless
/// a binary names another) and counts live heap bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc<A = System>(pub A);

fn shard() -> &'static AtomicIsize {
    let i = MY_SHARD
        .try_with(|c| {
            let mut i = c.get();
            if i == usize::MAX {
                i = NEXT_SHARD.fetch_add(1, Relaxed) % SHARDS;
                c.set(i);
            }
            i
        })
        .unwrap_or(0);
    &CURRENT[i].0
}

/// Bytes currently allocated through [`CountingAlloc`] (requested sizes); also
/// samples the peak.
pub fn heap_bytes() -> usize {
    let sum: isize = CURRENT.iter().map(|s| s.0.load(Relaxed)).sum();
    // Shards are read one at a time while other threads allocate and free, so the
    // sum can momentarily dip below 0; count that as 0.
    let now = usize::try_from(sum).unwrap_or(0);
    PEAK.fetch_max(now, Relaxed);
    now
}

/// Raises the recorded peak to the current heap size.
pub fn sample_peak() {
    heap_bytes();
}

/// Highest sampled value of [`heap_bytes`] since start or [`reset_peak`].
pub fn peak_heap_bytes() -> usize {
    PEAK.load(Relaxed).max(heap_bytes())
}

/// Restarts peak tracking from the current live heap size.
pub fn reset_peak() {
    PEAK.store(0, Relaxed);
    heap_bytes();
}

/// `size` is a `Layout` size or a `realloc` size, both at most `isize::MAX` by the
/// `GlobalAlloc` contract.
#[expect(
    clippy::cast_possible_wrap,
    reason = "allocation sizes never exceed isize::MAX, so the cast is lossless"
)]
fn record_alloc(size: usize) {
    shard().fetch_add(size as isize, Relaxed);
}

/// `size` is a `Layout` size, at most `isize::MAX`.
#[expect(
    clippy::cast_possible_wrap,
    reason = "allocation sizes never exceed isize::MAX, so the cast is lossless"
)]
fn record_dealloc(size: usize) {
    shard().fetch_sub(size as isize, Relaxed);
}

/// Turns transparent huge pages off for the whole process (`prctl(PR_SET_THP_DISABLE)`;
/// Linux only) when `off_by_default` and the environment does not say
/// `CASCADE_THP=on`, or whenever it says `CASCADE_THP=off`. Returns whether they are
/// off. Call it before any thread starts; child processes inherit the flag.
///
/// The trade-off, measured on this repository's host (docs/benchmarks.md, session
/// 18): mimalloc asks for huge pages for its arenas (`MADV_HUGEPAGE`), so the first
/// touch of each 2 MiB region makes the kernel zero a whole huge page inside the
/// allocation that touched it — on a VM whose memory the host backs lazily, slowly.
/// With durable writes that is a stall on the request path: `clear_page_erms` under
/// `do_huge_pmd_anonymous_page` was 23 % of a 32-thread `fillrandom --durability sync`
/// profile, and a server worker zeroing one held every reply of its round (p99.9 of
/// redis-benchmark writes 8–15 ms with huge pages, 3–10 ms without). But random reads
/// of a large in-memory index miss the TLB less on huge pages: 4 M keys, one thread,
/// `readrandom` ran 13–35 % faster with them. So `cascade serve`, where a request
/// costs far more in the network than in its lookup, turns them off, as Redis does by
/// default (`disable-thp yes`); so does `cascade bench --durability sync`, whose
/// writers wait on the device, not the TLB (session 19, 32 threads, alternating:
/// fillrandom 100 B +7–9 %, YCSB load 1 KB +13–15 %, p99.9 lower in 5 of 6 pairs);
/// the other commands keep what the system gives.
#[must_use]
pub fn choose_transparent_huge_pages(off_by_default: bool) -> bool {
    let off = match std::env::var("CASCADE_THP").as_deref() {
        Ok("off") => true,
        Ok("on") => false,
        _ => off_by_default,
    };
    if !off {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        rustix::thread::disable_transparent_huge_pages(true).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

// SAFETY: every method forwards to the inner allocator `A`, which upholds the `GlobalAlloc`
// contract, and returns its result unchanged. The bookkeeping only touches atomics
// and a `const`-initialised thread-local without a destructor (a plain TLS slot on
// targets with native thread-locals, such as Linux), so it does not allocate or
// re-enter the allocator, and it cannot panic, so nothing unwinds out of these methods.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has non-zero size, as `A` requires.
        let ptr = unsafe { self.0.alloc(layout) };
        if !ptr.is_null() {
            record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as `alloc`, passed through unchanged.
        let ptr = unsafe { self.0.alloc_zeroed(layout) };
        if !ptr.is_null() {
            record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence
        // from `A`) with this `layout`.
        unsafe { self.0.dealloc(ptr, layout) };
        record_dealloc(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees that `ptr` is a live block from this allocator
        // (hence from `A`) allocated with `layout`, and that `new_size` is
        // non-zero and does not overflow `isize` when rounded up to `layout.align()`.
        let new_ptr = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            // On failure the old block stays live and the counters are unchanged.
            record_dealloc(layout.size());
            record_alloc(new_size);
        }
        new_ptr
    }
}

#[cfg(test)]
mod tests {
    /// The kernel's own view of the flag (`THP_enabled` in `/proc/self/status`).
    #[cfg(target_os = "linux")]
    fn thp_enabled() -> Option<bool> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
        Some(line.split_whitespace().nth(1)? == "1")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_are_off_for_the_process_afterwards() {
        if std::env::var("CASCADE_THP").is_ok_and(|v| v == "on") {
            assert!(!super::choose_transparent_huge_pages(true));
            return;
        }
        assert!(super::choose_transparent_huge_pages(true));
        // Kernels before 5.0 do not report the flag; where they do, it must be off.
        if let Some(on) = thp_enabled() {
            assert!(!on, "THP_enabled still 1 after PR_SET_THP_DISABLE");
        }
    }
}
