//! The hash part of the FastStore's hybrid index (HiKV §3.1, §3.3): key → versions,
//! for point reads and writes that need no order.
//!
//! Layout. [`PARTS`] partitions chosen by the top bits of the key's hash
//! (`coding::hash64`, the hash that already picks LSN stripes), each an open-addressing
//! table (`hashbrown::HashTable`, SIMD probing of one-byte signatures — HiKV's 16-byte
//! signature + location entries play this role) behind its own `RwLock`. An entry keeps
//! its full hash so a table grows without rehashing keys. The versions an entry holds
//! are exactly what the ordered index would hold for the key (`node::SlotState`), and
//! are changed by the same `node::update`, so LSN validation, tombstones and snapshot
//! versions mean the same in both parts.
//!
//! Differs from HiKV: reads take the partition's read lock (one shared word per
//! partition; with 256 partitions two threads meet on one about 0.4 % of the time)
//! instead of reading an 8-byte atomic entry lock-free, because an entry here owns a
//! version chain, not a pointer into persistent memory.
//!
//! Thread-safety: all methods take `&self`; each partition's `RwLock` guards its table.
//! A caller holds at most one partition lock at a time, so there is no lock order.

use hashbrown::HashTable;
use parking_lot::RwLock;

use super::ikey::{IKey, Probe};
use super::node::{update, SlotState};
use super::version::Version;
use super::PutOutcome;
use crate::coding::hash64;
use crate::epoch::Snapshots;

/// Partitions (a power of two).
pub(super) const PARTS: usize = 256;
const PART_SHIFT: u32 = 40;

/// Estimated DRAM per entry beyond the ordered index's [`super::ENTRY_OVERHEAD`]: an
/// 80-byte entry in a table between 7/16 and 7/8 full (hashbrown doubles at 7/8),
/// its control byte, and the update queues' buffers. Measured with the index
/// benchmark (`index_candidates --candidates d,e`, 2M keys): the hybrid index holds
/// 187 B/key more than the tree alone with 8-byte keys, 203 with 24-byte keys (whose
/// 16 heap bytes of key tail are counted separately).
pub(crate) const HASH_ENTRY_OVERHEAD: usize = 192;

#[derive(Debug)]
struct HEntry {
    hash: u64,
    key: IKey,
    slot: SlotState,
}

impl HEntry {
    /// A new key's entry holding only `v`.
    fn new(hash: u64, key: IKey, v: Version) -> Self {
        HEntry {
            hash,
            key,
            slot: SlotState {
                cur: v,
                older: None,
            },
        }
    }
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Part(RwLock<HashTable<HEntry>>);

/// The partitioned hash index.
#[derive(Debug)]
pub(super) struct HashIndex {
    parts: Box<[Part]>,
}

/// `key`'s hash, as the hash index uses it.
pub(super) fn key_hash(key: &[u8]) -> u64 {
    hash64(key)
}

fn same(e: &HEntry, hash: u64, p: &Probe<'_>) -> bool {
    e.hash == hash && e.key.cmp_probe(p) == std::cmp::Ordering::Equal
}

impl HashIndex {
    pub(super) fn new() -> Self {
        HashIndex {
            parts: (0..PARTS).map(|_| Part::default()).collect(),
        }
    }

    /// The partition of `hash`: bits 40.. (hashbrown takes a bucket from the low bits
    /// and the one-byte signature from the top seven, so neither repeats within one
    /// partition).
    fn part(&self, hash: u64) -> &RwLock<HashTable<HEntry>> {
        let i = usize::try_from(hash >> PART_SHIFT).unwrap_or(0);
        &self.parts[i % PARTS].0
    }

    /// Installs `v` for `key` unless the key holds a newer LSN (`node::update`).
    pub(super) fn put_validate(
        &self,
        key: &[u8],
        hash: u64,
        v: Version,
        snaps: &Snapshots,
    ) -> PutOutcome {
        let p = Probe::new(key);
        let mut t = self.part(hash).write();
        if let Some(e) = t.find_mut(hash, |e| same(e, hash, &p)) {
            return update(&mut e.slot, v, snaps);
        }
        t.insert_unique(hash, HEntry::new(hash, IKey::new(key), v), |e| e.hash);
        PutOutcome::Inserted
    }

    /// Calls `f` with `key`'s versions under the partition's read lock.
    pub(super) fn read<R>(&self, key: &[u8], f: impl FnOnce(&SlotState) -> Option<R>) -> Option<R> {
        let hash = key_hash(key);
        let p = Probe::new(key);
        let t = self.part(hash).read();
        f(&t.find(hash, |e| same(e, hash, &p))?.slot)
    }

    /// Inserts a key known to be absent (recovery, before the index is shared).
    pub(super) fn load(&self, key: IKey, hash: u64, v: Version) {
        self.part(hash)
            .write()
            .insert_unique(hash, HEntry::new(hash, key, v), |e| e.hash);
    }

    /// Removes every key (recovery, before the index is shared).
    pub(super) fn clear(&self) {
        for p in &*self.parts {
            p.0.write().clear();
        }
    }

    /// Number of keys (tombstones included).
    pub(super) fn len(&self) -> usize {
        self.parts.iter().map(|p| p.0.read().len()).sum()
    }

    /// True when no partition holds a key.
    pub(super) fn is_empty(&self) -> bool {
        self.parts.iter().all(|p| p.0.read().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::faststore::version::ver;

    fn cur(h: &HashIndex, k: &[u8]) -> Option<Version> {
        h.read(k, |s| Some(s.cur.clone()))
    }

    #[test]
    fn newest_lsn_wins_and_keys_are_exact() {
        let s = Snapshots::default();
        let h = HashIndex::new();
        let put = |k: &[u8], lsn| h.put_validate(k, key_hash(k), ver(lsn, 0, k), &s);
        assert_eq!(put(b"key", 5), PutOutcome::Inserted);
        assert_eq!(put(b"key", 3), PutOutcome::Stale);
        assert_eq!(put(b"key", 9), PutOutcome::Replaced);
        // Keys sharing 8-byte prefixes, and a key that is a prefix of another.
        assert_eq!(put(b"key\0", 1), PutOutcome::Inserted);
        assert_eq!(put(b"prefix-long-key-a", 1), PutOutcome::Inserted);
        assert_eq!(put(b"prefix-long-key-b", 2), PutOutcome::Inserted);
        assert_eq!(cur(&h, b"key").map(|v| v.lsn), Some(9));
        assert_eq!(cur(&h, b"key\0").map(|v| v.lsn), Some(1));
        assert_eq!(cur(&h, b"prefix-long-key-b").map(|v| v.lsn), Some(2));
        assert_eq!(cur(&h, b"prefix-long-key-"), None);
        assert_eq!(cur(&h, b"ke"), None);
        assert_eq!(h.len(), 4);
        assert!(!h.is_empty());
    }

    #[test]
    fn grows_through_many_keys_in_every_partition() {
        let s = Snapshots::default();
        let h = HashIndex::new();
        for i in 0..100_000u64 {
            let k = i.to_be_bytes();
            h.put_validate(&k, key_hash(&k), ver(i + 1, 0, &k), &s);
        }
        assert_eq!(h.len(), 100_000);
        for i in (0..100_000u64).step_by(7) {
            let k = i.to_be_bytes();
            assert_eq!(cur(&h, &k).map(|v| v.lsn), Some(i + 1));
        }
        assert_eq!(cur(&h, &100_000u64.to_be_bytes()), None);
    }
}
