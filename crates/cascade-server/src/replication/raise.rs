//! What a replica's clients hear when records from the primary are applied: the
//! same machinery the primary's commands use (`Store::commit`), fed from the
//! records instead of a transaction, as Redis raises them for commands propagated
//! from its master.
//!
//! - WATCH and blocked clients (`crate::notify`): every user key a record writes
//!   (its metadata or one of its elements) is touched; a FLUSHDB/FLUSHALL touches
//!   the watched and waited-on keys that existed before it, as on the primary. So a
//!   MULTI/EXEC on a replica watching a key the primary changed aborts.
//! - Client-side caching (`crate::tracking`): the same keys are invalidated (origin
//!   0: no replica client caused them, so NOLOOP never hides them); a flush sends
//!   the flush invalidation.
//! - Keyspace notifications (`crate::pubsub`): the record carries the events the
//!   primary's command raised for every class (`record.rs`); the replica publishes
//!   those its own `notify-keyspace-events` enables.
//!
//! User keys are found from engine keys as the primary's transaction finds them
//! (`keyspace::owner_of` for element entries, the metadata namespace for the key
//! itself), under the physical database's prefix (`databases::prefix`).
//!
//! In cluster mode the per-slot key counts (`cluster/slotcount.rs`) follow the
//! records too: a metadata put of a key that did not exist adds one to its slot, a
//! metadata delete of one that did removes one (existence is read before the batch,
//! through the burst's own earlier writes).
//!
//! Called by `apply.rs` after the batch holding the records is written, still under
//! every stripe lock, like the primary's commit. No state of its own beyond one
//! burst.

use crate::databases::DB_PREFIX;
use crate::keyspace::{self, NS_META};
use crate::shared::Shared;
use crate::store::qualified;

/// The physical database and user key an engine key belongs to (`None`: an expiry
/// entry, a server-wide entry, or a malformed key).
fn user_key(k: &[u8]) -> Option<(u16, &[u8])> {
    let (phys, rest) = match k.first() {
        Some(&DB_PREFIX) => {
            let p = u16::from_be_bytes(k.get(1..3)?.try_into().ok()?);
            (p, k.get(3..)?)
        }
        _ => (0, k),
    };
    match rest.first() {
        Some(&NS_META) => Some((phys, &rest[1..])),
        _ => keyspace::owner_of(rest).map(|u| (phys, u)),
    }
}

/// The notifications of a burst of applied records, gathered while they are decoded
/// and raised once their batch is written.
#[derive(Default)]
pub(crate) struct Raised {
    /// Qualified keys for WATCH and blocked clients.
    touched: Vec<Vec<u8>>,
    /// User keys for client-side caching.
    invalid: Vec<Vec<u8>>,
    /// Keyspace notifications: class, event, key, logical database.
    events: Vec<(u32, String, Vec<u8>, u32)>,
    /// Per-slot key count changes of database 0 (cluster mode).
    slots: Vec<(u16, i64)>,
    /// Whether each database-0 key written in this burst exists after its last write.
    exists: std::collections::HashMap<Vec<u8>, bool>,
}

impl Raised {
    /// Notes a record's engine writes and its notifications (cheap when nobody
    /// watches, waits, tracks or subscribes).
    pub(crate) fn note(
        &mut self,
        shared: &Shared,
        keys: impl Iterator<Item = impl AsRef<[u8]>>,
        events: Vec<(u32, String, Vec<u8>, u32)>,
    ) {
        let store = &shared.store;
        let watch = store.notify().active();
        let track = store.tracking().active();
        if watch || track {
            for k in keys {
                let Some((p, key)) = user_key(k.as_ref()) else {
                    continue;
                };
                if watch {
                    let q = qualified(p, key);
                    if self.touched.last() != Some(&q) {
                        self.touched.push(q);
                    }
                }
                if track && self.invalid.last().is_none_or(|x| x.as_slice() != key) {
                    self.invalid.push(key.to_vec());
                }
            }
        }
        if store.pubsub().events.publishing() {
            self.events.extend(events);
        }
    }

    /// Notes the key creations and deletions of a record's writes in database 0 for
    /// the per-slot counts (cluster mode only).
    ///
    /// # Errors
    /// Reading a key's metadata failed.
    pub(crate) fn count_slots(
        &mut self,
        shared: &Shared,
        writes: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> crate::error::CmdResult<()> {
        if shared.store.slot_counts().is_none() {
            return Ok(());
        }
        for (k, v) in writes {
            if k.first() != Some(&NS_META) {
                continue;
            }
            let before = match self.exists.get(k) {
                Some(&e) => e,
                None => shared.store.db().get(k)?.is_some(),
            };
            let after = v.is_some();
            if before != after {
                let slot = crate::cluster::keyslot::slot(&k[1..]);
                self.slots.push((slot, if after { 1 } else { -1 }));
            }
            self.exists.insert(k.clone(), after);
        }
        Ok(())
    }

    /// A FLUSHDB/FLUSHALL record emptied database 0: what this burst knew of its keys
    /// is void (the flush zeroed the counts).
    pub(crate) fn forget_db0(&mut self) {
        self.exists.clear();
        self.slots.clear();
    }

    /// Raises what was noted (the batch is written).
    pub(crate) fn raise(&mut self, shared: &Shared) {
        let store = &shared.store;
        if let Some(sc) = store.slot_counts() {
            for (slot, d) in self.slots.drain(..) {
                sc.add(slot, d);
            }
        }
        if !self.touched.is_empty() {
            store.notify().touched(&std::mem::take(&mut self.touched));
        }
        for (class, event, key, db) in self.events.drain(..) {
            store.pubsub().notify(class, &event, &key, db);
        }
        if !self.invalid.is_empty() {
            store
                .tracking()
                .invalidate(store.pubsub(), &std::mem::take(&mut self.invalid), 0);
        }
    }
}

/// The watched and waited-on keys of physical database `p` that exist now (read
/// before a FLUSHDB/FLUSHALL record empties it).
pub(crate) fn live_before_flush(shared: &Shared, p: u16) -> Vec<Vec<u8>> {
    let store = &shared.store;
    if !store.notify().active() {
        return Vec::new();
    }
    let mut keys = store.notify().watched_keys();
    keys.extend(store.notify().waited_keys());
    let q = qualified(p, b"");
    let mut pre = crate::databases::prefix(p);
    keys.into_iter()
        .filter(|k| {
            k.strip_prefix(q.as_slice()).is_some_and(|u| {
                pre.truncate(if p == 0 { 0 } else { 3 });
                pre.extend_from_slice(&keyspace::meta_key(u));
                store.db().get(&pre).ok().flatten().is_some()
            })
        })
        .collect()
}

/// After a FLUSHDB/FLUSHALL record: watchers of the keys that existed are touched,
/// tracking clients get the flush invalidation.
pub(crate) fn flushed(shared: &Shared, live: &[Vec<u8>]) {
    let store = &shared.store;
    if !live.is_empty() {
        store.notify().touched(live);
    }
    store.tracking().flush(store.pubsub());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_keys_of_engine_keys() {
        assert_eq!(user_key(b"\x01abc"), Some((0, &b"abc"[..])));
        let mut db3 = vec![DB_PREFIX, 0, 3];
        db3.extend_from_slice(&keyspace::meta_key(b"k"));
        assert_eq!(user_key(&db3), Some((3, &b"k"[..])));
        let field = keyspace::sub_key(keyspace::NS_HASH, b"h", b"f");
        assert_eq!(user_key(&field), Some((0, &b"h"[..])));
        assert_eq!(user_key(b""), None);
        assert_eq!(user_key(&[DB_PREFIX, 0]), None);
    }
}
