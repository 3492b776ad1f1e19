//! The FastStore's concurrent ordered index: a B+-tree with optimistic lock coupling
//! (OLC; Leis et al. 2016, the Masstree family FluidKV's FastStore uses, §5.1) and
//! FluidKV's Algorithm 1 (`PutValidate`, §5.1: a put replaces a key's version only with
//! a newer LSN).
//!
//! Reads write nothing: a reader descends by node versions ([`lock`]) — it reads a
//! node with relaxed atomic loads and re-checks the version, restarting from the root
//! if a writer intervened — and never stores to a node, so gets and scans on different
//! threads do not bounce cache lines. Writers lock the nodes they change (one leaf for
//! an insert or update; parent and node for a split), each with one compare-exchange on
//! the version it read. Splits happen in place (the left half stays, a new right node
//! takes the upper half, the parent gets one separator): nothing is copied along the
//! path, and a full inner node is split on the way down so a parent always has room.
//! Entries (key + versions) sit behind one pointer from their leaf. A put that replaces
//! a fixed-size version (tombstone, ≤ 16 B inline value, log address) with a newer LSN
//! rewrites the entry's words in place under the leaf's lock (a seqlock per entry:
//! readers copy the version whole or retry; no allocation, nothing retired); any other
//! change publishes a new entry, and the replaced one is reclaimed through
//! `crossbeam-epoch` ([`entry`]). Keys of any length up to `MAX_KEY_LEN`: nodes compare
//! 8-byte slices after a per-node shared prefix, and full keys (held by entries and
//! separators) only when slices tie ([`node`]).
//!
//! Soundness: all `unsafe` of the FastStore index is in this module, each block with
//! `// SAFETY:`; every public function is safe for any input and any interleaving. The
//! invariants it rests on are listed in [`node`] and docs/design.md ("Optimistic
//! index"). Nodes and separators are freed only by `Drop` (`&mut self`); entries only by
//! the epoch collector after a writer unlinked them. Loom models: `loom_tests.rs`;
//! stress and model tests, also run under `AddressSanitizer`: `tests.rs`.
//!
//! Thread-safety: `Olc` is `Send + Sync`; all methods take `&self`. Each node's fields
//! are guarded by its version lock (writers) and validated by it (readers); `root` is
//! an atomic pointer replaced only while the old root is locked.

mod build;
mod entry;
mod lock;
mod node;
mod read;
mod write;

#[cfg(all(test, not(loom)))]
mod key_tests;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

use node::{Header, Leaf, INNER_MAX, LEAF_MAX};

/// Atomics: loom's under `--cfg loom` (the models), the standard ones otherwise.
mod sync {
    #[cfg(loom)]
    pub(super) use ::loom::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    #[cfg(not(loom))]
    pub(super) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

    /// How a thread waits before retrying after a conflict: a few exponentially longer
    /// spins, then `yield_now` (crossbeam-utils' `Backoff::snooze`). Spinning alone
    /// let a thread that conflicts with a writer the scheduler preempted — 32 writers
    /// on 2 cores — burn its whole time slice before the writer could finish (a
    /// multi-millisecond stall per conflict; docs/benchmarks.md, session 14).
    #[cfg(not(loom))]
    pub(super) use crossbeam_utils::Backoff;

    /// Under loom every wait is a yield (the model explores the interleavings).
    #[cfg(loom)]
    pub(super) struct Backoff;

    #[cfg(loom)]
    impl Backoff {
        pub(super) fn new() -> Backoff {
            Backoff
        }

        pub(super) fn snooze(&self) {
            ::loom::thread::yield_now();
        }
    }

    /// Runs `attempt` until it succeeds (`None`: a conflict; back off and restart).
    #[inline]
    pub(super) fn retry<T>(mut attempt: impl FnMut() -> Option<T>) -> T {
        let wait = Backoff::new();
        loop {
            if let Some(x) = attempt() {
                return x;
            }
            wait.snooze();
        }
    }
}

/// The optimistic index.
#[derive(Debug)]
pub struct Olc {
    /// The root node (a leaf until the first split).
    root: sync::AtomicPtr<Header>,
    /// Split a leaf when it holds this many entries (`<= LEAF_MAX`; tests use tiny
    /// nodes to force splits).
    leaf_cap: usize,
    /// Split an inner node when it holds this many separators (`<= INNER_MAX`).
    inner_cap: usize,
    /// Roots replaced by `bulk_load`, freed by `Drop` (a racing reader may still be
    /// inside one).
    orphans: parking_lot::Mutex<Vec<std::sync::atomic::AtomicPtr<Header>>>,
}

// `Olc` is `Send + Sync` through its atomic fields; what its pointers own is too (entries
// are read by any thread and freed by whichever thread the collector runs on).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<entry::Entry>();
    send_sync::<Olc>();
};

impl Default for Olc {
    fn default() -> Self {
        Self::new()
    }
}

impl Olc {
    /// An empty index with full-size nodes.
    #[must_use]
    pub fn new() -> Self {
        Self::with_caps(LEAF_MAX, INNER_MAX)
    }

    /// An empty index whose leaves split at `leaf_cap` entries and inner nodes at
    /// `inner_cap` separators (each clamped to `2..=` the node size).
    #[must_use]
    pub fn with_caps(leaf_cap: usize, inner_cap: usize) -> Self {
        let root = Box::into_raw(Leaf::new(0)).cast::<Header>();
        Olc {
            root: sync::AtomicPtr::new(root),
            leaf_cap: leaf_cap.clamp(2, LEAF_MAX),
            inner_cap: inner_cap.clamp(2, INNER_MAX),
            orphans: parking_lot::Mutex::new(Vec::new()),
        }
    }
}
