//! Snapshot epochs: which versions a reader may still need.
//!
//! Every write is stamped with the current *write epoch*. Taking a snapshot advances
//! the epoch (so the snapshot sees epochs `<= s` and later writes get `> s`) and
//! registers `s` until the snapshot is dropped. A version with epoch `e_old` that is
//! replaced by one with epoch `e_new` must be kept while some live snapshot `s` has
//! `e_old <= s < e_new`: that reader's view still ends at the old version.
//!
//! Thread-safety: all methods take `&self`. The fast path of a write — no snapshot
//! was taken since the key was last written — only compares two numbers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Registry of live snapshots and the current write epoch.
#[derive(Debug)]
pub struct Snapshots {
    epoch: AtomicU64,
    live: AtomicUsize,
    list: Mutex<BTreeMap<u64, usize>>,
}

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots {
            epoch: AtomicU64::new(1),
            live: AtomicUsize::new(0),
            list: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Snapshots {
    /// The epoch new writes are stamped with.
    pub fn write_epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Registers a snapshot at the current epoch and advances the epoch. The caller
    /// must then wait for writers that read the old epoch before using the snapshot.
    pub fn acquire(&self) -> u64 {
        let mut l = self.list.lock();
        let s = self.epoch.fetch_add(1, Ordering::AcqRel);
        *l.entry(s).or_insert(0) += 1;
        self.live.fetch_add(1, Ordering::AcqRel);
        s
    }

    /// Registers snapshot `s` once more (a copy of a live snapshot handle).
    pub fn retain(&self, s: u64) {
        let mut l = self.list.lock();
        *l.entry(s).or_insert(0) += 1;
        self.live.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops one registration of snapshot `s`.
    pub fn release(&self, s: u64) {
        let mut l = self.list.lock();
        if let Some(n) = l.get_mut(&s) {
            *n -= 1;
            if *n == 0 {
                l.remove(&s);
            }
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// True if a live snapshot `s` has `lo <= s < hi`.
    pub fn needed(&self, lo: u64, hi: u64) -> bool {
        if lo >= hi || self.live.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.list.lock().range(lo..hi).next().is_some()
    }

    /// Number of live snapshots.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_tracks_live_snapshots() {
        let s = Snapshots::default();
        assert!(!s.needed(1, 100));
        let a = s.acquire();
        assert_eq!(s.write_epoch(), a + 1);
        assert!(s.needed(a, a + 1));
        assert!(!s.needed(a + 1, a + 5));
        assert!(!s.needed(a, a));
        s.release(a);
        assert!(!s.needed(a, a + 1));
        assert_eq!(s.live(), 0);
    }
}
