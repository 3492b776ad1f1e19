//! The tracking table of default-mode client-side caching: for each key some client
//! read, the ids of the clients that may hold it in their cache.
//!
//! Redis keeps this as a radix tree of keys to radix trees of client ids, bounded by
//! `tracking-table-max-keys`: over the bound it evicts keys picked at random, sending
//! their clients an invalidation. This table gives the same operations: remember a
//! (key, client) pair, take a key's clients (it is being invalidated), and pick a random
//! key in O(1) for eviction — the keys also sit in a dense vector, and a key's entry
//! knows its slot there, so removal is a swap-remove.
//!
//! Invariants: `slots[map[k].slot] == k` for every key; `items` is the sum of the
//! id-list lengths; an id appears at most once per key. Not thread-safe by itself:
//! `Tracking`'s mutex guards it (`mod.rs`).

use std::collections::HashMap;

/// One tracked key.
#[derive(Debug)]
struct Entry {
    /// Its position in `slots`.
    slot: usize,
    /// Clients that read it since its last invalidation (few per key, usually one).
    ids: Vec<u64>,
}

/// Keys to the clients that read them. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    slots: Vec<Vec<u8>>,
    map: HashMap<Vec<u8>, Entry>,
    items: usize,
}

impl KeyTable {
    /// Keys tracked (`tracking_total_keys`).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// (key, client) pairs (`tracking_total_items`).
    pub(crate) fn items(&self) -> usize {
        self.items
    }

    /// Records that client `id` read `key`.
    pub(crate) fn remember(&mut self, key: &[u8], id: u64) {
        if let Some(e) = self.map.get_mut(key) {
            if !e.ids.contains(&id) {
                e.ids.push(id);
                self.items += 1;
            }
            return;
        }
        self.map.insert(
            key.to_vec(),
            Entry {
                slot: self.slots.len(),
                ids: vec![id],
            },
        );
        self.slots.push(key.to_vec());
        self.items += 1;
    }

    /// Removes `key`, returning the clients that read it.
    pub(crate) fn take(&mut self, key: &[u8]) -> Option<Vec<u64>> {
        let e = self.map.remove(key)?;
        self.slots.swap_remove(e.slot);
        if let Some(moved) = self.slots.get(e.slot) {
            if let Some(m) = self.map.get_mut(moved) {
                m.slot = e.slot;
            }
        }
        self.items -= e.ids.len();
        Some(e.ids)
    }

    /// The key at position `r` modulo the size (a random pick when `r` is random).
    pub(crate) fn pick(&self, r: u64) -> Option<&[u8]> {
        let n = u64::try_from(self.slots.len()).ok().filter(|&n| n > 0)?;
        let i = usize::try_from(r % n).ok()?;
        self.slots.get(i).map(Vec::as_slice)
    }

    /// Forgets everything (FLUSHALL, or the last tracking client left).
    pub(crate) fn clear(&mut self) {
        self.slots = Vec::new();
        self.map = HashMap::new();
        self.items = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remember_take_and_counts() {
        let mut t = KeyTable::default();
        t.remember(b"a", 1);
        t.remember(b"a", 1);
        t.remember(b"a", 2);
        t.remember(b"b", 1);
        t.remember(b"c", 3);
        assert_eq!((t.len(), t.items()), (3, 4));
        assert_eq!(t.take(b"a"), Some(vec![1, 2]));
        assert_eq!(t.take(b"a"), None);
        assert_eq!((t.len(), t.items()), (2, 2));
        // The moved key still knows its slot: taking it works and keeps the rest.
        let mut left: Vec<Vec<u8>> = (0..2)
            .filter_map(|i| t.pick(i).map(<[u8]>::to_vec))
            .collect();
        left.sort();
        assert_eq!(left, vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(t.take(b"c"), Some(vec![3]));
        assert_eq!(t.pick(7), Some(&b"b"[..]));
        t.clear();
        assert_eq!((t.len(), t.items()), (0, 0));
        assert_eq!(t.pick(0), None);
    }

    #[test]
    fn slots_stay_consistent_under_churn() {
        let mut t = KeyTable::default();
        for i in 0..200u64 {
            t.remember(format!("k{i}").as_bytes(), i % 7);
        }
        for i in (0..200u64).step_by(3) {
            assert!(t.take(format!("k{i}").as_bytes()).is_some());
        }
        for (i, k) in t.slots.iter().enumerate() {
            assert_eq!(t.map[k].slot, i);
        }
        assert_eq!(t.len(), 200 - 67);
        assert_eq!(t.items(), t.len());
    }
}
