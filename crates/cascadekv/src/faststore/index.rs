//! The concurrent ordered DRAM index of a FastStore, with FluidKV's LSN validation
//! (§5.1, Algorithm 1 `PutValidate`).
//!
//! Built on `crossbeam_skiplist::SkipMap` (lock-free ordered map; chosen by the
//! measurement in docs/benchmarks.md). Each key maps to a [`Slot`]: a tiny mutex around
//! the key's versions. A put finds or inserts the slot, locks it, and replaces the
//! current version only if its LSN is newer — so with writers racing on one key the
//! newest LSN wins and the index always agrees with what log replay would rebuild.
//! Older versions stay in the slot only while a snapshot needs them.
//!
//! Thread-safety: every method takes `&self` and may be called from any thread.
//! Entries are never removed while the index is shared; the whole index is dropped
//! only after no reader can reach it.

use std::ops::Bound;

use crossbeam_skiplist::SkipMap;
use parking_lot::Mutex;

use super::version::Version;
use crate::snapshot::Snapshots;

#[derive(Debug)]
struct SlotState {
    cur: Version,
    /// Older versions, newest first; kept only while a snapshot needs them.
    #[expect(
        clippy::box_collection,
        reason = "8 bytes instead of 24 per key: the vector is rarely present"
    )]
    older: Option<Box<Vec<Version>>>,
}

/// A key's versions.
#[derive(Debug)]
pub struct Slot {
    st: Mutex<SlotState>,
}

impl Slot {
    fn new(v: Version) -> Self {
        Slot {
            st: Mutex::new(SlotState {
                cur: v,
                older: None,
            }),
        }
    }
}

/// Outcome of [`Index::put_validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The key was new to this index.
    Inserted,
    /// An older version was replaced.
    Replaced,
    /// A newer version was already there; nothing changed.
    Stale,
}

/// Fixed per-entry DRAM overhead estimate used for capacity accounting
/// (skiplist node, tower, slot, allocation headers).
pub const ENTRY_OVERHEAD: usize = 112;

/// The index.
#[derive(Debug, Default)]
pub struct Index {
    map: SkipMap<Box<[u8]>, Slot>,
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys (tombstones included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Algorithm 1 `PutValidate`: install `v` unless the key already holds a newer LSN.
    pub fn put_validate(&self, key: &[u8], v: Version, snaps: &Snapshots) -> PutOutcome {
        if let Some(e) = self.map.get(key) {
            return update(e.value(), v, snaps);
        }
        let lsn = v.lsn;
        let e = self
            .map
            .get_or_insert_with(key.into(), || Slot::new(v.clone()));
        if e.value().st.lock().cur.lsn == lsn {
            return PutOutcome::Inserted;
        }
        update(e.value(), v, snaps)
    }

    /// The newest version of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Version> {
        self.map.get(key).map(|e| e.value().st.lock().cur.clone())
    }

    /// The newest version of `key` visible to snapshot `snap` (epoch `<= snap`).
    pub fn get_at(&self, key: &[u8], snap: u64) -> Option<Version> {
        self.map
            .get(key)
            .and_then(|e| visible(&e.value().st.lock(), snap))
    }

    /// Visits up to `max` entries in `(lo, hi)`, appending each with the version it
    /// has at snapshot `snap` to `out` (keys with no version at `snap` are skipped).
    /// Returns the last key visited if it stopped because `max` was reached.
    pub fn collect_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) -> Option<Box<[u8]>> {
        if bounds_empty(lo, hi) {
            return None;
        }
        let mut visited = 0;
        for e in self.map.range::<[u8], _>((lo, hi)) {
            visited += 1;
            if let Some(v) = visible(&e.value().st.lock(), snap) {
                out.push((e.key().clone(), v));
            }
            if visited >= max {
                return Some(e.key().clone());
            }
        }
        None
    }

    /// Visits every key with its newest version, in key order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &Version)) {
        for e in self.map.iter() {
            f(e.key(), &e.value().st.lock().cur);
        }
    }
}

/// True when no key can lie between `lo` and `hi`.
pub fn bounds_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

fn visible(st: &SlotState, snap: u64) -> Option<Version> {
    if st.cur.epoch <= snap {
        return Some(st.cur.clone());
    }
    st.older.as_ref()?.iter().find(|v| v.epoch <= snap).cloned()
}

fn update(slot: &Slot, v: Version, snaps: &Snapshots) -> PutOutcome {
    let mut st = slot.st.lock();
    if st.cur.lsn >= v.lsn {
        return PutOutcome::Stale;
    }
    let old = std::mem::replace(&mut st.cur, v);
    let keep_old = snaps.needed(old.epoch, st.cur.epoch);
    if keep_old || st.older.is_some() {
        let mut older = st.older.take().unwrap_or_default();
        if keep_old {
            older.insert(0, old);
        }
        // Drop versions no live snapshot can reach: version i is visible to snapshots
        // in [epoch_i, epoch of the next newer version).
        let mut newer_epoch = st.cur.epoch;
        older.retain(|o| {
            let keep = snaps.needed(o.epoch, newer_epoch);
            if keep {
                newer_epoch = o.epoch;
            }
            keep
        });
        if !older.is_empty() {
            st.older = Some(older);
        }
    }
    PutOutcome::Replaced
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faststore::version::Val;
    use std::sync::Arc;

    fn ver(lsn: u64, epoch: u64, v: &[u8]) -> Version {
        Version {
            lsn,
            epoch,
            val: Val::inline(v),
        }
    }

    #[test]
    fn newest_lsn_wins_in_any_arrival_order() {
        let s = Snapshots::default();
        let i = Index::new();
        assert_eq!(
            i.put_validate(b"k", ver(5, 1, b"five"), &s),
            PutOutcome::Inserted
        );
        assert_eq!(
            i.put_validate(b"k", ver(3, 1, b"three"), &s),
            PutOutcome::Stale
        );
        assert_eq!(
            i.put_validate(b"k", ver(9, 1, b"nine"), &s),
            PutOutcome::Replaced
        );
        assert_eq!(i.get(b"k").map(|v| v.lsn), Some(9));
    }

    #[test]
    fn racing_writers_leave_the_max_lsn() {
        let s = Arc::new(Snapshots::default());
        let i = Arc::new(Index::new());
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let (s, i) = (s.clone(), i.clone());
                std::thread::spawn(move || {
                    for n in 0..2000u64 {
                        let lsn = n * 4 + t + 1;
                        i.put_validate(&(n % 7).to_le_bytes(), ver(lsn, 1, &lsn.to_le_bytes()), &s);
                    }
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().is_ok());
        }
        for k in 0..7u64 {
            let max = (0..2000u64).filter(|n| n % 7 == k).map(|n| n * 4 + 4).max();
            assert_eq!(i.get(&k.to_le_bytes()).map(|v| v.lsn), max);
        }
    }

    #[test]
    fn snapshots_keep_the_versions_they_see() {
        let s = Snapshots::default();
        let i = Index::new();
        i.put_validate(b"a", ver(1, s.write_epoch(), b"old"), &s);
        let snap = s.acquire();
        i.put_validate(b"a", ver(2, s.write_epoch(), b"new"), &s);
        i.put_validate(b"b", ver(3, s.write_epoch(), b"born later"), &s);
        assert_eq!(
            i.get_at(b"a", snap).map(|v| v.val),
            Some(Val::inline(b"old"))
        );
        assert_eq!(i.get_at(b"b", snap), None);
        assert_eq!(i.get(b"a").map(|v| v.val), Some(Val::inline(b"new")));
        s.release(snap);
        i.put_validate(b"a", ver(4, s.write_epoch(), b"newest"), &s);
        assert!(i
            .map
            .get(&b"a"[..])
            .is_some_and(|e| e.value().st.lock().older.is_none()));
    }
}
