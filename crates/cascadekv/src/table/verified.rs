//! Which data blocks of one pool-resident LST have passed their checksum since this
//! process opened the store (issue #29 item 3: "a read path that pays once per block").
//!
//! RocksDB verifies a block once, when it enters its block cache; an LST in the pool is
//! read in place from the mapping, so there is no cache to enter. Instead each table
//! keeps one bit per block unit (`offset / block_size`): clear when the `Lst` handle is
//! made (at open, or when a flush or compaction places the table), set by the first
//! read whose CRC-32C and header verified, and read by later gets, which then skip the
//! checksum (scans — and so compactions, merges and demotions, which read through them —
//! always verify, so bytes changed after their first check are never rewritten into a
//! new table under a fresh checksum) (FluidKV §4.3 reads a 512 B block per lookup; the CRC over it was
//! 11–13 % of a `readrandom` after `settle` and pulled every line of the block into
//! cache, where a search needs two or three of them).
//!
//! Invariants:
//! * A bit is set only after `Block::open` verified the block at that unit (checksum,
//!   kind, count), by a get, a scan or the scrubber's walk (`check.rs`).
//! * A bit is cleared by a walk (the scrubber, pass after pass: `integrity/scrub.rs`)
//!   that finds that block damaged, so every read after that re-verifies it and returns
//!   the error. What a flip between a block's first verified read and the next scrub
//!   pass leads to is in README "Guarantees" and docs/design.md §6.
//! * The bits live in DRAM only: a new `Lst` (every open) starts with none set, so the
//!   first read of each block after an open is always verified.
//! * Slow-tier tables have no bits: each read is a `pread` into a fresh buffer, and it is
//!   always verified.
//!
//! Concurrency: relaxed atomics. A bit only says "these immutable bytes verified once";
//! it guards no other memory, and a reader racing a scrubber's clear at worst skips one
//! more check it would have skipped a moment earlier.

use std::sync::atomic::{AtomicU64, Ordering};

/// One bit per block unit of a table.
#[derive(Debug, Default)]
pub(crate) struct Verified {
    words: Box<[AtomicU64]>,
}

impl Verified {
    /// Bits for a table of `units` block units, none set.
    pub(crate) fn new(units: u64) -> Verified {
        let words = usize::try_from(units.div_ceil(64)).unwrap_or(0);
        Verified {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// No bits: every read of the table is verified (slow-tier tables).
    pub(crate) fn none() -> Verified {
        Verified::default()
    }

    fn at(&self, unit: u64) -> Option<(&AtomicU64, u64)> {
        let w = self.words.get(usize::try_from(unit / 64).ok()?)?;
        Some((w, 1 << (unit % 64)))
    }

    /// True if the block at `unit` verified since the handle was made (and no walk has
    /// found it damaged since).
    pub(crate) fn is_set(&self, unit: u64) -> bool {
        self.at(unit)
            .is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
    }

    /// Records that the block at `unit` just verified. A store only when the bit was
    /// clear, so the word's cache line stays shared among readers once warm.
    pub(crate) fn set(&self, unit: u64) {
        let clear = self
            .at(unit)
            .filter(|(w, b)| w.load(Ordering::Relaxed) & b == 0);
        if let Some((w, b)) = clear {
            w.fetch_or(b, Ordering::Relaxed);
        }
    }

    /// Forgets that the block at `unit` verified: the next read checks it again.
    pub(crate) fn clear(&self, unit: u64) {
        if let Some((w, b)) = self.at(unit) {
            w.fetch_and(!b, Ordering::Relaxed);
        }
    }

    /// Bits set.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    /// DRAM the bits take.
    pub(crate) fn dram_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_and_out_of_range() {
        let v = Verified::new(130);
        assert_eq!(v.dram_bytes(), 24);
        for u in [0, 63, 64, 129] {
            assert!(!v.is_set(u));
            v.set(u);
            assert!(v.is_set(u));
        }
        assert_eq!(v.count(), 4);
        assert!(!v.is_set(1) && !v.is_set(65));
        v.clear(64);
        assert!(!v.is_set(64) && v.is_set(63) && v.is_set(129));
        // Beyond the table: never set, so such a read is always verified.
        v.set(192);
        assert!(!v.is_set(192));
        let none = Verified::none();
        none.set(0);
        assert!(!none.is_set(0));
        assert_eq!(none.count(), 0);
    }
}
