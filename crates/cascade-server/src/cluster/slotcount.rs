//! Keys per hash slot, kept on the write path so `CLUSTER COUNTKEYSINSLOT` answers in
//! O(1) (Redis answers it from its per-slot dictionaries) instead of scanning every
//! key's metadata (1.4–6.5 s at 1M keys, `docs/benchmarks.md`).
//!
//! Only in cluster mode, only for physical database 0 (the one cluster mode serves):
//! built by one scan of its metadata at start (`Store::enable_slot_counts`), then
//! every commit adds the key creations and deletions its transaction counted
//! (`Tx::set_meta` / `purge_quietly`, the same places that keep `DBSIZE`), a flush of
//! database 0 zeroes them, a replica adds what its applied records created and
//! deleted (`replication/raise.rs`), and a full sync rebuilds them (`Store::reload`).
//! Like Redis's count, a key that is expired but not yet deleted is counted. The
//! counts are memory only; nothing is persisted.
//!
//! Shared state: 16384 atomics (relaxed: a count read while a commit is applying may
//! miss that commit, as a scan would). Updated by committing threads under the
//! commit's stripe locks; read by any thread.

use std::sync::atomic::{AtomicI64, Ordering};

use cascadekv::Db;

use super::keyslot::{self, SLOTS};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::NS_META;

/// Keys per slot of physical database 0.
pub(crate) struct SlotCounts {
    counts: Box<[AtomicI64]>,
}

impl std::fmt::Debug for SlotCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotCounts").finish_non_exhaustive()
    }
}

impl SlotCounts {
    /// Counts the keys of database 0 in `db`.
    ///
    /// # Errors
    /// The keyspace could not be read.
    pub(crate) fn build(db: &Db) -> CmdResult<SlotCounts> {
        let sc = SlotCounts {
            counts: (0..SLOTS).map(|_| AtomicI64::new(0)).collect(),
        };
        sc.rebuild(db)?;
        Ok(sc)
    }

    /// Recounts from the engine (after a full sync replaced the data).
    ///
    /// # Errors
    /// The keyspace could not be read.
    pub(crate) fn rebuild(&self, db: &Db) -> CmdResult<()> {
        let mut n = vec![0i64; SLOTS];
        let mut it = db.iter_bounds(
            std::ops::Bound::Included(vec![NS_META]),
            std::ops::Bound::Excluded(vec![NS_META + 1]),
        )?;
        while let Some(kv) = it.next() {
            if it.failed() {
                return Err(kv.err().map_or_else(
                    || CmdError::Engine("ERR the keyspace could not be read".into()),
                    Into::into,
                ));
            }
            if let Ok((k, _)) = kv {
                n[usize::from(keyslot::slot(&k[1..]))] += 1;
            }
        }
        for (c, v) in self.counts.iter().zip(n) {
            c.store(v, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Adds `delta` keys to `slot`.
    pub(crate) fn add(&self, slot: u16, delta: i64) {
        if let Some(c) = self.counts.get(usize::from(slot)) {
            c.fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// Database 0 was emptied.
    pub(crate) fn clear(&self) {
        for c in &*self.counts {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// Keys in `slot`.
    pub(crate) fn get(&self, slot: u16) -> i64 {
        self.counts
            .get(usize::from(slot))
            .map_or(0, |c| c.load(Ordering::Relaxed).max(0))
    }
}
