//! Striped LSN counters (FluidKV Algorithm 1, line 2).
//!
//! 256 counters, chosen by key hash, each on its own cache line: writers of different
//! keys rarely touch the same counter, and all writes of one key draw from one counter,
//! so their order is recoverable from the LSNs alone.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::coding::{hash64, usize_from};

/// Number of stripes.
pub const STRIPES: usize = 256;

#[derive(Debug)]
#[repr(align(64))]
struct Counter(AtomicU64);

/// The counters.
#[derive(Debug)]
pub struct Lsns {
    c: Box<[Counter]>,
}

impl Lsns {
    /// All counters start at `start` (one past the largest LSN recovered).
    pub fn new(start: u64) -> Self {
        Lsns {
            c: (0..STRIPES)
                .map(|_| Counter(AtomicU64::new(start.max(1))))
                .collect(),
        }
    }

    /// The next LSN for `key`. `SeqCst` so that it is ordered with the FastStore
    /// frozen-flag check that follows it (see `FastStore::write`).
    pub fn next(&self, key: &[u8]) -> u64 {
        let i = usize_from(hash64(key)) % STRIPES;
        self.c[i].0.fetch_add(1, Ordering::SeqCst)
    }

    /// Largest LSN handed out so far (upper bound).
    pub fn max_issued(&self) -> u64 {
        self.c
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .max()
            .unwrap_or(1)
            - 1
    }
}
