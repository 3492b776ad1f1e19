//! The Redis keyspace over one [`Db`]: lock stripes, typed metadata, key counts,
//! expiry, and [`Tx`], the view through which every command reads and writes.
//!
//! A command's writes are collected in a [`Tx`] (an ordered overlay of puts and
//! deletes over the engine) and applied by [`Store::commit`] as one atomic engine
//! batch; reads through the same `Tx` see its own pending writes first, so a MULTI/EXEC
//! block or a command that touches several entries reads what it wrote.
//!
//! Locking: 1024 stripes by key hash. The dispatcher (`cmd/mod.rs`) takes the stripes of
//! every key a command names, in ascending stripe order and each once (so no deadlock),
//! before the command reads anything, and releases them after the commit. So
//! read-modify-write commands are atomic with respect to each other, as on a
//! single-threaded Redis. `FLUSHDB` takes every stripe. Commands without keys (SCAN,
//! KEYS, DBSIZE) take none and read the engine's per-read consistent view.
//!
//! Writes go to the calling worker thread's own engine log, `Buffered`; the worker
//! makes them durable (group commit) before replying when the server runs with
//! `--durability sync` (see `worker/`), and no worker replies before the writes of
//! others it could have read are durable (`durable.rs`, counted by `commit`). Under
//! `--durability sync` every engine write is also numbered after it reached the log,
//! while the writer's stripe locks are held ([`Guards`] keep the calling thread's
//! stripes, `visible.rs`), so a keyed read knows the newest write it could see and
//! needs no persist when that one is durable.
//!
//! `keys` and `expires` count `0x01` entries (and those with an expiry) as `DBSIZE` and
//! `INFO keyspace` report them; like Redis they include keys that expired but were not
//! yet reclaimed. They are recounted by one scan at open and changed only by commits
//! (atomics, any thread).

use std::borrow::Cow;
use std::collections::btree_map;
use std::collections::BTreeMap;
use std::iter::{Peekable, Rev};
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use cascadekv::{Db, DbIter, WriteBatch};
use parking_lot::{Mutex, MutexGuard};

use crate::cluster::slotcount::SlotCounts;
use crate::cursors::Cursors;
use crate::databases::{self, Databases, DB0_END, MAP_KEY};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    self, expire_key, meta_key, now_ms, prefix_end, sub_prefix, Meta, Type, NS_EXPIRE, NS_META,
};
use crate::notify::Notify;
use crate::pubsub::{class, PubSub};
use crate::replication::backlog::Feed;
use crate::resp::reply::{self, Out};
use crate::scripting::gate::Gate;
use crate::tracking::Tracking;
use crate::visible::{self, Seqs};

const STRIPES: usize = 1024;

/// The keyspace. See the module docs.
pub(crate) struct Store {
    db: Arc<Db>,
    stripes: Box<[Mutex<()>]>,
    /// Write numbers per stripe and the durable mark (`visible.rs`).
    seqs: Seqs,
    /// The numbered databases: where each lives, and its key counts.
    dbs: Databases,
    /// Keys deleted by the expiry sweeper (INFO `expired_keys`).
    expired_keys: AtomicI64,
    /// Key lookups of read-only commands that found a live key, and that did not
    /// (INFO `keyspace_hits`, `keyspace_misses`).
    lookups: [AtomicU64; 2],
    /// WATCH flags and parked clients.
    notify: Notify,
    /// SCAN, SSCAN, HSCAN and ZSCAN cursors.
    cursors: Cursors,
    /// Subscriptions and keyspace notifications.
    pubsub: PubSub,
    /// Client-side caching: who may cache which key (`crate::tracking`).
    tracking: Tracking,
    /// Scripts run alone: data commands hold it shared (`scripting/gate.rs`).
    gate: Gate,
    /// The replication stream of commits (`crate::replication::backlog`).
    feed: Feed,
    /// Last-access times (`OBJECT IDLETIME`, `crate::access`).
    access: crate::access::AccessClock,
    /// MIGRATE's cached connections (`cmd/keyspace/migrate.rs`).
    migrate: crate::cmd::keyspace::migrate::Sockets,
    /// Keys per hash slot of database 0, in cluster mode (`cluster/slotcount.rs`).
    slots: std::sync::OnceLock<SlotCounts>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dbs", &self.dbs)
            .finish_non_exhaustive()
    }
}

/// Stripe locks held by a command. While they are held the calling thread's writes
/// are numbered on their stripes (`visible.rs`); a holder of every stripe is taken to
/// have written (the replication applier writes the engine directly), so dropping
/// such guards numbers a write on the floor.
pub(crate) struct Guards<'a> {
    /// The stripes, ascending (`None`: every stripe).
    idx: Option<Vec<u16>>,
    mark: visible::Mark,
    seqs: Option<&'a Seqs>,
    _locks: Vec<MutexGuard<'a, ()>>,
}

impl Guards<'_> {
    /// Locks that hold nothing (a command without keys).
    pub(crate) fn none() -> Guards<'static> {
        Guards {
            idx: Some(Vec::new()),
            mark: visible::push_held(Some(&[])),
            seqs: None,
            _locks: Vec::new(),
        }
    }

    /// Whether these are the locks of keys (not none, not every stripe).
    pub(crate) fn keyed(&self) -> bool {
        self.idx.as_ref().is_some_and(|i| !i.is_empty())
    }
}

impl Drop for Guards<'_> {
    fn drop(&mut self) {
        // Before the fields (the locks) are dropped.
        if self.idx.is_none() {
            if let Some(s) = self.seqs {
                s.wrote();
            }
        }
        visible::pop_held(self.mark);
    }
}

impl Store {
    /// Wraps `db` with `databases` numbered databases, counting each one's keys (one
    /// scan of its namespace 1).
    pub(crate) fn open(db: Arc<Db>, databases: usize) -> CmdResult<Store> {
        let map = db.get(MAP_KEY)?;
        let store = Store {
            dbs: Databases::new(databases, map.as_deref())?,
            db,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            seqs: Seqs::new(STRIPES),
            expired_keys: AtomicI64::new(0),
            lookups: [AtomicU64::new(0), AtomicU64::new(0)],
            notify: Notify::default(),
            cursors: Cursors::new(crate::hash::hash64(&now_ms().to_le_bytes())),
            pubsub: PubSub::default(),
            tracking: Tracking::default(),
            gate: Gate::default(),
            feed: Feed::default(),
            access: crate::access::AccessClock::default(),
            migrate: crate::cmd::keyspace::migrate::Sockets::default(),
            slots: std::sync::OnceLock::new(),
        };
        for p in store.dbs.physical_ids() {
            let (keys, expires) = store.count_keys(p)?;
            store.dbs.add(p, keys, expires);
        }
        Ok(store)
    }

    /// Counts physical database `p`'s keys and those with an expiry.
    fn count_keys(&self, p: u16) -> CmdResult<(i64, i64)> {
        let (mut keys, mut expires) = (0i64, 0i64);
        let pre = databases::prefix(p);
        let bound = |ns: u8| {
            let mut k = pre.clone();
            k.push(ns);
            k
        };
        let mut it = self.db.iter_bounds(
            Bound::Included(bound(NS_META)),
            Bound::Excluded(bound(NS_META + 1)),
        )?;
        while let Some(kv) = it.next() {
            if it.failed() {
                // The keyspace could not be enumerated: refuse, never miscount.
                return Err(kv.err().map_or_else(
                    || CmdError::Engine("ERR the keyspace could not be read".into()),
                    Into::into,
                ));
            }
            keys += 1;
            // A key whose metadata fails verification still exists: it is counted,
            // and reading it answers with the error (the rest of the keyspace serves).
            match kv {
                Ok((_, v)) => {
                    if Meta::decode(&v)?.expire_at.is_some() {
                        expires += 1;
                    }
                }
                Err(e) if e.is_corruption() => {
                    eprintln!(
                        "warning: {e}; that key answers with this error until the store is \
                         repaired (run `cascade verify` to list all damage)"
                    );
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok((keys, expires))
    }

    /// The numbered databases.
    pub(crate) fn dbs(&self) -> &Databases {
        &self.dbs
    }

    /// SWAPDB: logical databases `a` and `b` trade contents, durably (the map is one
    /// engine entry). The caller holds every stripe lock.
    pub(crate) fn swap_dbs(&self, a: usize, b: usize) -> CmdResult<()> {
        let _feed = self.feed.enter();
        self.dbs.swap(a, b);
        crate::durable::note_write();
        let put = self.db.put(MAP_KEY, &self.dbs.encode());
        self.seqs.wrote();
        if let Err(e) = put {
            self.dbs.swap(a, b);
            return Err(e.into());
        }
        if self.feed.active() {
            self.feed
                .append(&crate::replication::record::encode_swap(a, b));
        }
        self.swap_registrations(a, b);
        Ok(())
    }

    /// After SWAPDB of logical `a` and `b` (now on physical `pb` and `pa`): WATCH and
    /// parked clients follow their logical database, and every watched or awaited key
    /// that exists on either side counts as changed (Redis's rule: a watcher's EXEC
    /// fails, a parked client runs again and finds what the swap brought).
    pub(crate) fn swap_registrations(&self, a: usize, b: usize) {
        if !self.notify.active() {
            return;
        }
        let (Some(pb), Some(pa)) = (self.dbs.physical(a), self.dbs.physical(b)) else {
            return;
        };
        let moved = self.notify.swap(pa, pb);
        let (in_a, in_b) = (Tx::on_physical(self, pa), Tx::on_physical(self, pb));
        let live = |k: &[u8]| {
            in_a.meta(k).ok().flatten().is_some() || in_b.meta(k).ok().flatten().is_some()
        };
        let changed: Vec<Vec<u8>> = moved
            .into_iter()
            .filter(|q| live(q.get(2..).unwrap_or_default()))
            .collect();
        self.notify.touched(&changed);
    }

    /// The replication stream of commits.
    pub(crate) fn feed(&self) -> &Feed {
        &self.feed
    }

    /// Re-reads the database map and recounts every database's keys (a replica, after
    /// a full sync replaced the engine's contents). The caller holds every stripe lock.
    pub(crate) fn reload(&self) -> CmdResult<()> {
        let map = self.db.get(MAP_KEY)?;
        self.dbs.replace_map(map.as_deref())?;
        for p in self.dbs.physical_ids() {
            let (keys, expires) = self.count_keys(p)?;
            self.dbs.clear(p);
            self.dbs.add(p, keys, expires);
        }
        if let Some(sc) = self.slots.get() {
            sc.rebuild(&self.db)?;
        }
        Ok(())
    }

    /// Starts keeping keys per hash slot (cluster mode, at start: one scan of
    /// database 0's metadata).
    ///
    /// # Errors
    /// The keyspace could not be read.
    pub(crate) fn enable_slot_counts(&self) -> CmdResult<()> {
        if self.slots.get().is_none() {
            let _ = self.slots.set(SlotCounts::build(&self.db)?);
        }
        Ok(())
    }

    /// Keys per hash slot of physical database 0, if kept.
    pub(crate) fn slot_counts(&self) -> Option<&SlotCounts> {
        self.slots.get()
    }

    /// True in cluster mode (the per-slot counts are kept exactly then, from start):
    /// only database 0 is served, so MOVE, SWAPDB and COPY ... DB refuse.
    pub(crate) fn cluster_mode(&self) -> bool {
        self.slots.get().is_some()
    }

    /// A key as the WATCH and blocking registries know it: qualified by its
    /// physical database.
    pub(crate) fn qualify(&self, db: usize, key: &[u8]) -> Vec<u8> {
        qualified(self.dbs.physical(db).unwrap_or(0), key)
    }

    /// Subscriptions and keyspace notifications.
    pub(crate) fn pubsub(&self) -> &PubSub {
        &self.pubsub
    }

    /// Client-side caching state.
    pub(crate) fn tracking(&self) -> &Tracking {
        &self.tracking
    }

    /// The engine.
    pub(crate) fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Last-access times of keys (`OBJECT IDLETIME`).
    pub(crate) fn access(&self) -> &crate::access::AccessClock {
        &self.access
    }

    /// MIGRATE's cached connections.
    pub(crate) fn migrate_sockets(&self) -> &crate::cmd::keyspace::migrate::Sockets {
        &self.migrate
    }

    /// WATCH flags and parked clients.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// The script gate.
    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The SCAN cursor table.
    pub(crate) fn cursors(&self) -> &Cursors {
        &self.cursors
    }

    /// Keys in every database.
    pub(crate) fn total_keys(&self) -> i64 {
        self.dbs.physical_ids().map(|p| self.dbs.keys(p)).sum()
    }

    /// Keys in logical database `db` (DBSIZE).
    pub(crate) fn key_count(&self, db: usize) -> i64 {
        self.dbs.physical(db).map_or(0, |p| self.dbs.keys(p))
    }

    /// Keys with an expiry in logical database `db`.
    pub(crate) fn expires_count(&self, db: usize) -> i64 {
        self.dbs.physical(db).map_or(0, |p| self.dbs.expires(p))
    }

    /// INFO's `keyspace_hits` and `keyspace_misses`.
    pub(crate) fn lookups(&self) -> (u64, u64) {
        (
            self.lookups[0].load(Ordering::Relaxed),
            self.lookups[1].load(Ordering::Relaxed),
        )
    }

    /// Adds a read-only command's lookups ([`Tx::lookups`]).
    pub(crate) fn count_lookups(&self, (hits, misses): (u64, u64)) {
        if hits > 0 {
            self.lookups[0].fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            self.lookups[1].fetch_add(misses, Ordering::Relaxed);
        }
    }

    /// CONFIG RESETSTAT.
    pub(crate) fn reset_lookups(&self) {
        for l in &self.lookups {
            l.store(0, Ordering::Relaxed);
        }
    }

    /// Keys deleted by the expiry sweeper since start.
    pub(crate) fn expired_keys(&self) -> i64 {
        self.expired_keys.load(Ordering::Relaxed)
    }

    fn stripe(key: &[u8]) -> u16 {
        // The remainder is below STRIPES (1024), so it fits a u16.
        u16::try_from(crate::hash::hash64(key) % STRIPES as u64).unwrap_or(0)
    }

    /// Locks several keys (ascending stripe order, each stripe once).
    pub(crate) fn lock_many<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Guards<'_> {
        let mut idx: Vec<u16> = keys.into_iter().map(Self::stripe).collect();
        idx.sort_unstable();
        idx.dedup();
        let locks = idx
            .iter()
            .filter_map(|&i| self.stripes.get(usize::from(i)))
            .map(Mutex::lock)
            .collect();
        Guards {
            mark: visible::push_held(Some(&idx)),
            idx: Some(idx),
            seqs: None,
            _locks: locks,
        }
    }

    /// Locks every stripe (FLUSHDB).
    pub(crate) fn lock_all(&self) -> Guards<'_> {
        let locks = self.stripes.iter().map(Mutex::lock).collect();
        Guards {
            idx: None,
            mark: visible::push_held(None),
            seqs: Some(&self.seqs),
            _locks: locks,
        }
    }

    /// Write numbers and the durable mark (`visible.rs`).
    pub(crate) fn seqs(&self) -> &Seqs {
        &self.seqs
    }

    /// The newest write a command holding `locks` could read (`visible.rs`).
    pub(crate) fn need(&self, locks: &Guards<'_>) -> u64 {
        self.seqs.need(locks.idx.as_deref())
    }

    /// Applies `tx` as one atomic engine batch, then its count changes.
    pub(crate) fn commit(&self, tx: Tx<'_>) -> CmdResult<()> {
        let Tx {
            writes,
            dkeys,
            dexpires,
            flushed,
            touched,
            events,
            phys,
            foreign,
            invalid,
            origin,
            slot_deltas,
            ..
        } = tx;
        let _feed = self.feed.enter();
        let changes = flushed.any() || !writes.is_empty();
        if changes && self.feed.is_replica() {
            return Err(CmdError::Msg(
                "READONLY You can't write against a read only replica.".into(),
            ));
        }
        if changes {
            // Counted before any of it is visible (the reply barrier, durable.rs).
            crate::durable::note_write();
        }
        // The replication record, encoded before the batch consumes the writes.
        // It carries the keyspace notifications too, so a replica's clients hear
        // them (recorded for every class while the feed is active: the replica's own
        // `notify-keyspace-events` decides what it publishes).
        let record = (changes && self.feed.active()).then(|| {
            let mut counts = vec![(phys, dkeys, dexpires)];
            counts.extend(foreign.iter().copied());
            // FLUSHDB of other databases than the last one (SELECT inside MULTI):
            // a flush-only record each, ahead of the one that carries the writes (a
            // flushed database's pending writes all came after its flush).
            let mut records: Vec<Vec<u8>> = if flushed.all {
                Vec::new()
            } else {
                let none: [(&[u8], Option<&[u8]>); 0] = [];
                flushed
                    .dbs
                    .iter()
                    .filter(|&&p| p != phys)
                    .map(|&p| {
                        crate::replication::record::encode_commit(1, p, none.into_iter(), &[], &[])
                    })
                    .collect()
            };
            let kind = if flushed.all {
                2
            } else {
                u8::from(flushed.dbs.contains(&phys))
            };
            records.push(crate::replication::record::encode_commit(
                kind,
                phys,
                writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
                &counts,
                &events,
            ));
            records
        });
        // The engine writes; numbered once they are in (even if one failed halfway),
        // while the caller's stripe locks are held (`visible.rs`).
        let flushed_any = flushed.any();
        let applied = self.apply(flushed, writes);
        if changes {
            self.seqs.wrote();
        }
        applied?;
        self.dbs.add(phys, dkeys, dexpires);
        for (p, k, e) in foreign {
            self.dbs.add(p, k, e);
        }
        if let Some(sc) = self.slots.get() {
            for (slot, d) in slot_deltas {
                sc.add(slot, d);
            }
        }
        for r in record.into_iter().flatten() {
            self.feed.append(&r);
        }
        self.notify.touched(&touched);
        // Keyspace notifications, once the change is visible (as Redis publishes them
        // after the command's effect).
        for (class, event, key, db) in events {
            self.pubsub
                .notify(class, event, &key, u32::try_from(db).unwrap_or(0));
        }
        // Client-side caching: invalidations, still under the command's stripe locks
        // (`crate::tracking`).
        if flushed_any {
            self.tracking.flush(&self.pubsub);
        }
        if !invalid.is_empty() {
            self.tracking.invalidate(&self.pubsub, &invalid, origin);
        }
        Ok(())
    }

    /// [`Store::commit`]'s engine part: the flush, then the writes.
    fn apply(&self, flushed: Flushed, writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> CmdResult<()> {
        if flushed.any() {
            let targets: Vec<u16> = if flushed.all {
                self.dbs.physical_ids().collect()
            } else {
                flushed.dbs
            };
            for p in targets {
                // Watched keys and keys parked clients wait on (a flush wakes them).
                let mut watched = self.notify.watched_keys();
                watched.extend(self.notify.waited_keys());
                let live: Vec<Vec<u8>> = {
                    let probe = Tx::on_physical(self, p);
                    let q = qualified(p, b"");
                    watched
                        .into_iter()
                        .filter(|k| {
                            k.strip_prefix(q.as_slice())
                                .is_some_and(|u| probe.meta(u).ok().flatten().is_some())
                        })
                        .collect()
                };
                self.flush_db(p)?;
                self.notify.touched(&live);
            }
        }
        if writes.len() == 1 {
            if let Some((k, v)) = writes.into_iter().next() {
                match v {
                    Some(v) => self.db.put(&k, &v)?,
                    None => self.db.delete(&k)?,
                }
            }
        } else if !writes.is_empty() {
            let mut batch = WriteBatch::new();
            for (k, v) in writes {
                match v {
                    Some(v) => batch.put(k, v),
                    None => batch.delete(k),
                };
            }
            self.db.write(&batch)?;
        }
        Ok(())
    }

    /// Deletes up to `max` keys whose expiry has passed (the active expiry sweeper).
    /// Returns how many it deleted.
    pub(crate) fn sweep_expired(&self, max: usize) -> CmdResult<usize> {
        if self.feed.is_replica() {
            // A replica's expired keys are deleted by the primary's stream.
            return Ok(0);
        }
        let mut n = 0usize;
        for p in self.dbs.physical_ids() {
            n += self.sweep_db(p, max)?;
        }
        self.expired_keys
            .fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
        Ok(n)
    }

    /// [`Store::sweep_expired`] of physical database `p`.
    fn sweep_db(&self, p: u16, max: usize) -> CmdResult<usize> {
        let now = now_ms();
        let probe = Tx::on_physical(self, p);
        let due = probe.scan_first(
            &[NS_EXPIRE],
            Some(&expire_key(now.saturating_add(1), b"")),
            max,
        )?;
        drop(probe);
        let mut n = 0usize;
        for (qk, _) in due {
            let Some((at, key)) = keyspace::parse_expire_key(&qk) else {
                continue;
            };
            let _gate = self.gate.enter()?;
            let _g = self.lock_many([key]);
            let mut tx = Tx::on_physical(self, p);
            match tx.raw_meta(key)? {
                Some(m) if m.expire_at == Some(at) && m.expired(now) => {
                    tx.purge(key, &m)?;
                    n += 1;
                }
                // A stale queue entry (the expiry changed meanwhile): drop it.
                Some(m) if m.expire_at == Some(at) => continue,
                _ => tx.delete(qk.clone()),
            }
            self.commit(tx)?;
        }
        Ok(n)
    }

    /// Deletes every key of physical database `p`. The caller holds every stripe lock.
    pub(crate) fn flush_db(&self, p: u16) -> CmdResult<()> {
        if p == 0 {
            if let Some(sc) = self.slots.get() {
                sc.clear();
            }
        }
        let (lo, hi) = db_bounds(&databases::prefix(p));
        let deleted = (|| loop {
            let chunk = self.db.scan(Some(&lo), hi.as_deref(), 4096)?;
            if chunk.is_empty() {
                return Ok::<(), CmdError>(());
            }
            let mut b = WriteBatch::new();
            for (k, _) in chunk {
                b.delete(k);
            }
            self.db.write(&b)?;
        })();
        // Numbered under the caller's locks, even if it stopped halfway (`visible.rs`).
        self.seqs.wrote();
        deleted?;
        self.dbs.clear(p);
        Ok(())
    }
}

/// A key qualified by its physical database (WATCH and blocking registries).
pub(crate) fn qualified(p: u16, key: &[u8]) -> Vec<u8> {
    let mut q = Vec::with_capacity(2 + key.len());
    q.extend_from_slice(&p.to_be_bytes());
    q.extend_from_slice(key);
    q
}

/// The engine range `[lo, hi)` of a database with prefix `pre` (`hi` `None`: to the
/// end). Database 0 is namespaces 0x01 up to [`DB0_END`].
fn db_bounds(pre: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    if pre.is_empty() {
        (vec![NS_META], Some(vec![DB0_END]))
    } else {
        (pre.to_vec(), prefix_end(pre))
    }
}

/// What FLUSHDB and FLUSHALL emptied in one transaction.
#[derive(Debug, Default)]
struct Flushed {
    /// FLUSHALL: every database.
    all: bool,
    /// Physical databases FLUSHDB emptied (SELECT inside MULTI can make it several).
    dbs: Vec<u16>,
}

impl Flushed {
    fn any(&self) -> bool {
        self.all || !self.dbs.is_empty()
    }

    /// True if physical database `p` was emptied.
    fn covers(&self, p: u16) -> bool {
        self.all || self.dbs.contains(&p)
    }
}

/// How a command came to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunKind {
    /// As it arrived.
    Fresh,
    /// A parked blocking command, run again.
    Retry,
    /// A fresh blocking command that arrived while a client parked earlier on one of
    /// its keys was woken and has not run yet: it queues behind that client.
    BehindWoken,
}

/// The reads and pending writes of one command (or one MULTI/EXEC block): an ordered
/// overlay over the engine, applied atomically by [`Store::commit`]. The caller holds
/// the stripe locks of every key it touches.
pub(crate) struct Tx<'s> {
    store: &'s Store,
    /// Pending writes: `Some` puts, `None` deletes.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    dkeys: i64,
    dexpires: i64,
    /// The time this command sees (Unix ms).
    now: u64,
    /// Live and absent keys [`Tx::meta`] found (hits, misses).
    lookups: std::cell::Cell<(u64, u64)>,
    /// The databases FLUSHDB or FLUSHALL emptied: their engine contents are gone for
    /// this transaction's reads, and are deleted at commit before its writes are
    /// applied.
    flushed: Flushed,
    /// The logical database (`SELECT`) this transaction reads and writes.
    db: usize,
    /// Its physical database, and that database's engine-key prefix.
    phys: u16,
    pre: Vec<u8>,
    /// Key-count changes of other physical databases (MOVE).
    foreign: Vec<(u16, i64, i64)>,
    /// User keys changed (recorded while anyone watches or waits).
    touched: Vec<Vec<u8>>,
    /// Keyspace notifications to publish after the commit: class, event, key (recorded
    /// only for enabled classes).
    events: Vec<(u32, &'static str, Vec<u8>, usize)>,
    /// User keys changed: by a metadata write (`Some(removed)`) or an element write
    /// (`None`); recorded while notifications are on.
    changes: Vec<(Vec<u8>, Option<bool>)>,
    /// User keys changed or expired, for client-side caching (recorded while anyone
    /// tracks, `track`).
    invalid: Vec<Vec<u8>>,
    /// Some client tracks keys (read once, when the transaction starts).
    track: bool,
    /// Keys created (+1) and deleted (-1) per hash slot in physical database 0, kept
    /// in cluster mode (`cluster/slotcount.rs`).
    slot_deltas: Vec<(u16, i64)>,
    /// The replication feed is active: keyspace notifications of every class are
    /// recorded for the replication record (read once, when the transaction starts).
    replicating: bool,
    /// The client whose command this is (0: the server itself, e.g. the expiry
    /// sweeper); tracking's NOLOOP skips its own changes.
    origin: u64,
    /// Blocking commands may park the client (not inside MULTI/EXEC).
    may_block: bool,
    /// This runs a parked blocking command again after one of its keys changed.
    /// How this command came to run (blocking commands care).
    run: RunKind,
}

impl<'s> Tx<'s> {
    /// An empty transaction over logical database `db` (out of range: database 0;
    /// SELECT checks the range).
    pub(crate) fn in_db(store: &'s Store, db: usize) -> Tx<'s> {
        let phys = store.dbs.physical(db).unwrap_or(0);
        let mut tx = Self::on_physical(store, phys);
        tx.db = db;
        tx
    }

    /// An empty transaction over physical database `phys` (the expiry sweeper).
    pub(crate) fn on_physical(store: &'s Store, phys: u16) -> Tx<'s> {
        Tx {
            db: store.dbs.logical(phys),
            phys,
            pre: databases::prefix(phys),
            foreign: Vec::new(),
            store,
            writes: BTreeMap::new(),
            dkeys: 0,
            dexpires: 0,
            now: now_ms(),
            lookups: std::cell::Cell::new((0, 0)),
            flushed: Flushed::default(),
            touched: Vec::new(),
            events: Vec::new(),
            changes: Vec::new(),
            invalid: Vec::new(),
            track: store.tracking.active(),
            replicating: store.feed.active(),
            slot_deltas: Vec::new(),
            origin: 0,
            may_block: false,
            run: RunKind::Fresh,
        }
    }

    /// Names the client running this transaction (see `origin`).
    pub(crate) fn set_origin(&mut self, id: u64) {
        self.origin = id;
    }

    /// Whether committing it writes anything (puts, deletes or a flush).
    pub(crate) fn writes_pending(&self) -> bool {
        self.flushed.any() || !self.writes.is_empty()
    }

    /// True if some client tracks keys (client-side caching): reads are to be
    /// remembered.
    pub(crate) fn tracking(&self) -> bool {
        self.track
    }

    /// Records `key` for client-side caching's invalidation (once per run of changes).
    fn invalidates(&mut self, key: &[u8]) {
        if self.track && self.invalid.last().is_none_or(|k| k.as_slice() != key) {
            self.invalid.push(key.to_vec());
        }
    }

    /// Marks this as the re-run of a parked blocking command.
    pub(crate) fn set_retry(&mut self) {
        self.run = RunKind::Retry;
    }

    /// Marks a fresh blocking command that must queue behind an earlier, woken
    /// client on one of its keys (`run_data`).
    pub(crate) fn set_behind_woken(&mut self) {
        self.run = RunKind::BehindWoken;
    }

    /// A blocking command parks without looking if a client parked earlier on one of
    /// its keys was woken and has not run yet: that client is served first, as Redis
    /// serves blocked clients before the next command (without this, a command that
    /// reached another worker first could take the element the woken client was
    /// woken for, and leave it parked).
    pub(crate) fn must_queue(&self) -> bool {
        self.run == RunKind::BehindWoken && self.may_block
    }

    /// True when a parked blocking command, run again, must pass over `key`: it now
    /// holds another type than `ty` (Redis serves a blocked client only from a key of
    /// the type it waits for; the first run answers `WRONGTYPE` instead).
    pub(crate) fn skip_on_retry(&self, key: &[u8], ty: Type) -> CmdResult<bool> {
        Ok(self.run == RunKind::Retry && self.meta(key)?.is_some_and(|m| m.ty != ty))
    }

    /// True when this runs a parked blocking command again (XREADGROUP answers an
    /// error when its stream is gone).
    pub(crate) fn retrying(&self) -> bool {
        self.run == RunKind::Retry
    }

    /// Lets blocking commands park the client.
    pub(crate) fn allow_blocking(&mut self) {
        self.may_block = true;
    }

    /// A blocking command found nothing: park for `timeout` seconds, or (inside
    /// MULTI/EXEC) reply with the null array at once.
    pub(crate) fn block(&self, timeout: f64, out: &mut Out) -> CmdResult<()> {
        if self.may_block {
            Err(CmdError::Block(timeout))
        } else {
            reply::nil_array(out);
            Ok(())
        }
    }

    /// Records a key created or deleted for the per-slot counts (cluster mode,
    /// database 0 only).
    fn slot_delta(&mut self, key: &[u8], d: i64) {
        if self.phys == 0 && self.store.slots.get().is_some() {
            self.slot_deltas
                .push((crate::cluster::keyslot::slot(key), d));
        }
    }

    /// FLUSHDB: every key goes, atomically with the rest of this transaction.
    pub(crate) fn flush(&mut self) {
        // Only this database's pending writes go: a MULTI block may have written
        // others before a SELECT.
        let (lo, hi) = db_bounds(&self.pre);
        self.writes
            .retain(|k, _| k < &lo || hi.as_ref().is_some_and(|h| k >= h));
        // Keys counted so far are gone with the rest (the flush zeroes database 0's
        // slot counts at the commit).
        if self.phys == 0 {
            self.slot_deltas.clear();
        }
        if !self.flushed.dbs.contains(&self.phys) {
            self.flushed.dbs.push(self.phys);
        }
        // Counts restart from zero at the commit's flush, also those kept for this
        // database before a SELECT.
        let phys = self.phys;
        self.foreign.retain(|&(p, _, _)| p != phys);
        self.dkeys = 0;
        self.dexpires = 0;
    }

    /// FLUSHALL: every key of every database goes, atomically with the rest of this
    /// transaction.
    pub(crate) fn flush_all(&mut self) {
        self.flush();
        self.writes.clear();
        self.foreign.clear();
        self.slot_deltas.clear();
        self.flushed.all = true;
    }

    /// The logical database this transaction works on.
    pub(crate) fn db(&self) -> usize {
        self.db
    }

    /// The store.
    pub(crate) fn store(&self) -> &'s Store {
        self.store
    }

    /// Moves this transaction to logical database `db` (SELECT inside MULTI): what
    /// it wrote so far stays pending, counted against its own database.
    pub(crate) fn switch_db(&mut self, db: usize) {
        if db == self.db {
            return;
        }
        self.foreign.push((self.phys, self.dkeys, self.dexpires));
        self.dkeys = 0;
        self.dexpires = 0;
        self.phys = self.store.dbs.physical(db).unwrap_or(0);
        self.pre = databases::prefix(self.phys);
        self.db = db;
    }

    /// Writes entry `k` of physical database `p` (MOVE writes the key into another
    /// database in the same batch).
    pub(crate) fn put_in(&mut self, p: u16, k: &[u8], v: Vec<u8>) {
        let mut pk = databases::prefix(p);
        pk.extend_from_slice(k);
        self.writes.insert(pk, Some(v));
    }

    /// Reads entry `k` of physical database `p`, pending writes first.
    pub(crate) fn get_in(&self, p: u16, k: &[u8]) -> CmdResult<Option<Vec<u8>>> {
        let mut pk = databases::prefix(p);
        pk.extend_from_slice(k);
        match self.writes.get(&pk) {
            Some(v) => Ok(v.clone()),
            None if self.flushed.covers(p) => Ok(None),
            None => Ok(self.store.db.get(&pk)?),
        }
    }

    /// `key` of physical database `p` changes (MOVE's destination): its watchers
    /// and the clients parked on it there hear of it.
    pub(crate) fn touch_in(&mut self, p: u16, key: &[u8]) {
        if self.store.notify.active() {
            self.touched.push(qualified(p, key));
        }
    }

    /// Changes the key counts of physical database `p` at commit (MOVE).
    pub(crate) fn count_in(&mut self, p: u16, keys: i64, expires: i64) {
        self.foreign.push((p, keys, expires));
    }

    /// `k` as an engine key of this transaction's database.
    fn pk<'k>(&self, k: &'k [u8]) -> Cow<'k, [u8]> {
        if self.pre.is_empty() {
            Cow::Borrowed(k)
        } else {
            let mut v = Vec::with_capacity(self.pre.len() + k.len());
            v.extend_from_slice(&self.pre);
            v.extend_from_slice(k);
            Cow::Owned(v)
        }
    }

    /// [`Tx::pk`] of an owned key.
    fn pk_owned(&self, mut k: Vec<u8>) -> Vec<u8> {
        if !self.pre.is_empty() {
            k.splice(0..0, self.pre.iter().copied());
        }
        k
    }

    /// A range bound in engine keys; an unbounded end stops at the database's range.
    fn pbound(&self, b: Bound<Vec<u8>>, lower: bool) -> Bound<Vec<u8>> {
        match b {
            Bound::Included(k) => Bound::Included(self.pk_owned(k)),
            Bound::Excluded(k) => Bound::Excluded(self.pk_owned(k)),
            Bound::Unbounded => {
                let (lo, hi) = db_bounds(&self.pre);
                if lower {
                    Bound::Included(lo)
                } else {
                    hi.map_or(Bound::Unbounded, Bound::Excluded)
                }
            }
        }
    }

    /// Keys as this transaction sees them (DBSIZE).
    pub(crate) fn key_count(&self) -> i64 {
        let base = if self.flushed.covers(self.phys) {
            0
        } else {
            self.store.dbs.keys(self.phys)
        };
        // Keys this block created here before a SELECT away and back.
        let earlier: i64 = self
            .foreign
            .iter()
            .filter(|&&(p, _, _)| p == self.phys)
            .map(|&(_, k, _)| k)
            .sum();
        (base + earlier + self.dkeys).max(0)
    }

    fn touch(&mut self, key: &[u8], removed: bool) {
        self.invalidates(key);
        if self.store.notify.active() {
            self.touched.push(qualified(self.phys, key));
        }
        if self.replicating || self.store.pubsub.events.publishing() {
            self.changes.push((key.to_vec(), Some(removed)));
        }
    }

    /// Drops what was recorded of changes to `key` for [`Tx::take_changes`] (a
    /// command that raises the key's events itself: COPY into another database).
    pub(crate) fn forget_changes_of(&mut self, key: &[u8]) {
        self.changes.retain(|(k, _)| k != key);
    }

    /// The user keys changed since the last call, each once in first-change order,
    /// with whether the key is gone at the end (recorded only while keyspace
    /// notifications are on; `cmd/events.rs` turns them into events).
    pub(crate) fn take_changes(&mut self) -> Vec<(Vec<u8>, bool)> {
        let mut out: Vec<(Vec<u8>, bool)> = Vec::new();
        for (k, removed) in self.changes.drain(..) {
            match out.iter_mut().find(|(o, _)| *o == k) {
                // An element write after the key's removal (the purge of its entries)
                // leaves it removed; a later metadata write decides.
                Some(o) => o.1 = removed.unwrap_or(o.1),
                None => out.push((k, removed.unwrap_or(false))),
            }
        }
        out
    }

    /// The time this command sees (Unix ms).
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Reads an engine entry, pending writes first.
    pub(crate) fn get(&self, k: &[u8]) -> CmdResult<Option<Vec<u8>>> {
        let k = self.pk(k);
        match self.writes.get(k.as_ref()) {
            Some(v) => Ok(v.clone()),
            None if self.flushed.covers(self.phys) => Ok(None),
            None => Ok(self.store.db.get(&k)?),
        }
    }

    /// True if the entry exists.
    pub(crate) fn contains(&self, k: &[u8]) -> CmdResult<bool> {
        let k = self.pk(k);
        match self.writes.get(k.as_ref()) {
            Some(v) => Ok(v.is_some()),
            None if self.flushed.covers(self.phys) => Ok(false),
            None => Ok(self.store.db.get(&k)?.is_some()),
        }
    }

    /// Writes an engine entry.
    pub(crate) fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.touch_element(&k);
        let k = self.pk_owned(k);
        self.writes.insert(k, Some(v));
    }

    /// Deletes an engine entry.
    pub(crate) fn delete(&mut self, k: Vec<u8>) {
        self.touch_element(&k);
        let k = self.pk_owned(k);
        self.writes.insert(k, None);
    }

    /// A write of an element entry changes its user key (HINCRBY of an existing
    /// field, LSET, ...: the key's metadata may stay as it is). Recorded once per run
    /// of writes to one key.
    fn touch_element(&mut self, k: &[u8]) {
        let watch = self.store.notify.active();
        let events = self.replicating || self.store.pubsub.events.publishing();
        if !(watch || events || self.track) {
            return;
        }
        let Some(key) = keyspace::owner_of(k) else {
            return;
        };
        self.invalidates(key);
        if watch {
            let q = qualified(self.phys, key);
            if self.touched.last() != Some(&q) {
                self.touched.push(q);
            }
        }
        if events && self.changes.last().is_none_or(|(t, _)| t.as_slice() != key) {
            self.changes.push((key.to_vec(), None));
        }
    }

    /// Entries in `[lo, hi]` (per the bounds) in key order, pending writes merged in.
    pub(crate) fn range(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> CmdResult<TxIter<'_>> {
        let (db, over) = self.range_parts(lo, hi)?;
        Ok(Strip {
            inner: Merged {
                db: db.map(Iterator::peekable),
                over: over.map(Iterator::peekable),
                rev: false,
            },
            n: self.pre.len(),
        })
    }

    /// Like [`Tx::range`], in descending key order (ZREVRANGE, ZPOPMAX).
    pub(crate) fn range_rev(
        &self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> CmdResult<TxRevIter<'_>> {
        let (db, over) = self.range_parts(lo, hi)?;
        Ok(Strip {
            inner: Merged {
                db: db.map(|d| d.rev().peekable()),
                over: over.map(|o| o.rev().peekable()),
                rev: true,
            },
            n: self.pre.len(),
        })
    }

    /// The engine iterator and the pending writes of a key range.
    fn range_parts(
        &self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> CmdResult<(Option<DbIter<'_>>, Option<Pending<'_>>)> {
        let (lo, hi) = (self.pbound(lo, true), self.pbound(hi, false));
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        let db = if self.flushed.covers(self.phys) {
            None
        } else {
            Some(self.store.db.iter_bounds(lo.clone(), hi.clone())?)
        };
        let over = if empty {
            None
        } else {
            Some(self.writes.range::<Vec<u8>, _>((lo, hi)))
        };
        Ok((db, over))
    }

    /// The first `limit` entries in `[lo, hi)` (`hi` `None`: unbounded), in key order.
    /// With nothing pending in the range this is one short engine scan (each stage
    /// is asked for only `limit` entries, not a full iterator batch): ZRANGE 0 9.
    pub(crate) fn scan_first(
        &self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
    ) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let hi_b = hi.map_or(Bound::Unbounded, |h| Bound::Excluded(h.to_vec()));
        let pending = self
            .writes
            .range::<Vec<u8>, _>((
                self.pbound(Bound::Included(lo.to_vec()), true),
                self.pbound(hi_b.clone(), false),
            ))
            .next()
            .is_some();
        if self.flushed.covers(self.phys) || pending || !self.pre.is_empty() {
            return self
                .range(Bound::Included(lo.to_vec()), hi_b)?
                .take(limit)
                .collect();
        }
        let hi = hi.map_or_else(|| vec![DB0_END], <[u8]>::to_vec);
        Ok(self.store.db.scan(Some(lo), Some(&hi), limit)?)
    }

    /// Up to `limit` entries whose key starts with `prefix`.
    pub(crate) fn prefix_scan(
        &self,
        prefix: &[u8],
        limit: usize,
    ) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let hi = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        self.range(Bound::Included(prefix.to_vec()), hi)?
            .take(limit)
            .collect()
    }

    /// The stored metadata of `key`, expired or not.
    pub(crate) fn raw_meta(&self, key: &[u8]) -> CmdResult<Option<Meta>> {
        match self.get(&meta_key(key))? {
            Some(v) => Ok(Some(Meta::from_vec(v)?)),
            None => Ok(None),
        }
    }

    /// The metadata of `key` if it exists and has not expired.
    pub(crate) fn meta(&self, key: &[u8]) -> CmdResult<Option<Meta>> {
        let m = self.raw_meta(key)?.filter(|m| !m.expired(self.now));
        let (h, mi) = self.lookups.get();
        self.lookups.set(if m.is_some() {
            (h + 1, mi)
        } else {
            (h, mi + 1)
        });
        Ok(m)
    }

    /// Live and absent keys found by [`Tx::meta`] so far (hits, misses).
    pub(crate) fn lookups(&self) -> (u64, u64) {
        self.lookups.get()
    }

    /// Like [`Tx::meta`], but a key of another type than `ty` is `WRONGTYPE`.
    pub(crate) fn typed(&self, key: &[u8], ty: Type) -> CmdResult<Option<Meta>> {
        match self.meta(key)? {
            Some(m) if m.ty != ty => Err(CmdError::WrongType),
            m => Ok(m),
        }
    }

    /// Starts a write of `key`: returns its live metadata; an expired key is purged in
    /// this transaction and reported as absent.
    pub(crate) fn begin(&mut self, key: &[u8]) -> CmdResult<Option<Meta>> {
        match self.raw_meta(key)? {
            Some(m) if m.expired(self.now) => {
                self.purge(key, &m)?;
                Ok(None)
            }
            m => Ok(m),
        }
    }

    /// Like [`Tx::begin`] with a type check.
    pub(crate) fn begin_typed(&mut self, key: &[u8], ty: Type) -> CmdResult<Option<Meta>> {
        match self.begin(key)? {
            Some(m) if m.ty != ty => Err(CmdError::WrongType),
            m => Ok(m),
        }
    }

    /// Writes `key`'s metadata `new`, replacing `old` (as returned by `begin`).
    pub(crate) fn set_meta(&mut self, key: &[u8], old: Option<&Meta>, new: &Meta) {
        let old_exp = old.and_then(|m| m.expire_at);
        if old_exp != new.expire_at {
            if let Some(t) = old_exp {
                self.delete(expire_key(t, key));
            }
            if let Some(t) = new.expire_at {
                self.put(expire_key(t, key), Vec::new());
            }
        }
        self.put(meta_key(key), new.encode());
        self.touch(key, false);
        if old.is_none() {
            self.dkeys += 1;
            self.slot_delta(key, 1);
            self.event(class::NEW, "new", key);
        }
        self.dexpires += i64::from(new.expire_at.is_some()) - i64::from(old_exp.is_some());
    }

    /// Deletes `key` and everything it owns (a change: watchers see it).
    pub(crate) fn remove(&mut self, key: &[u8], old: &Meta) -> CmdResult<()> {
        self.touch(key, true);
        self.purge_quietly(key, old)
    }

    /// Records keyspace notification `event` of `class` for `key`, published after
    /// the commit if that class is enabled (`notify-keyspace-events`).
    pub(crate) fn event(&mut self, class: u32, event: &'static str, key: &[u8]) {
        self.event_in(self.db, class, event, key);
    }

    /// True if events of `class` are published (a command may skip work that only
    /// decides an event).
    pub(crate) fn notifying(&self, class: u32) -> bool {
        self.replicating || self.store.pubsub.events.on(class)
    }

    /// [`Tx::event`] for a key of logical database `db` (MOVE's `move_to`).
    pub(crate) fn event_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.replicating || self.store.pubsub.events.on(class) {
            self.events.push((class, event, key.to_vec(), db));
        }
    }

    /// Deletes an expired `key` and everything it owns (not a change for watchers).
    fn purge(&mut self, key: &[u8], old: &Meta) -> CmdResult<()> {
        if old.expired(self.now) {
            self.event(class::EXPIRED, "expired", key);
            // An expired key is a change for client-side caches, as in Redis.
            self.invalidates(key);
        }
        self.purge_quietly(key, old)
    }

    /// Deletes `key` and everything it owns, with no notification.
    fn purge_quietly(&mut self, key: &[u8], old: &Meta) -> CmdResult<()> {
        self.delete(meta_key(key));
        if let Some(t) = old.expire_at {
            self.delete(expire_key(t, key));
            self.dexpires -= 1;
        }
        self.dkeys -= 1;
        self.slot_delta(key, -1);
        for &ns in old.ty.spaces() {
            for (k, _) in self.prefix_scan(&sub_prefix(ns, key), usize::MAX)? {
                self.delete(k);
            }
        }
        Ok(())
    }

    /// After `removed` elements of the hash or zset `key` (metadata `old`) were
    /// deleted: writes the new count, or deletes the key when none are left.
    pub(crate) fn shrink(&mut self, key: &[u8], old: &Meta, removed: u64) -> CmdResult<()> {
        if removed == 0 {
            return Ok(());
        }
        let count = old.count().saturating_sub(removed);
        if count == 0 {
            self.remove(key, old)
        } else {
            let mut new = Meta::collection(old.ty, count, old.expire_at);
            if old.ty == Type::List {
                new = Meta::list(count, old.list_head(), old.expire_at);
            }
            self.set_meta(key, Some(old), &new);
            Ok(())
        }
    }
}

/// Pending writes in a key range.
type Pending<'a> = btree_map::Range<'a, Vec<u8>, Option<Vec<u8>>>;

/// A [`Tx`]'s merged view of a key range: engine entries with the pending writes
/// applied, in key order (or, with `rev`, in descending key order).
pub(crate) struct Merged<D: Iterator, P: Iterator> {
    db: Option<Peekable<D>>,
    over: Option<Peekable<P>>,
    rev: bool,
}

/// [`Tx::range`]'s iterator.
pub(crate) type TxIter<'a> = Strip<Merged<DbIter<'a>, Pending<'a>>>;
/// [`Tx::range_rev`]'s iterator.
pub(crate) type TxRevIter<'a> = Strip<Merged<Rev<DbIter<'a>>, Rev<Pending<'a>>>>;

/// Strips the database prefix (`n` bytes) from the keys of a merged range.
pub(crate) struct Strip<I> {
    inner: I,
    n: usize,
}

impl<I: Iterator<Item = CmdResult<(Vec<u8>, Vec<u8>)>>> Iterator for Strip<I> {
    type Item = CmdResult<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let n = self.n;
        self.inner.next().map(|r| {
            r.map(|(mut k, v)| {
                if n > 0 {
                    k.drain(..n.min(k.len()));
                }
                (k, v)
            })
        })
    }
}

enum Next {
    Db,
    Over { shadows_db: bool },
    Done,
}

impl<'a, D, P> Iterator for Merged<D, P>
where
    D: Iterator<Item = cascadekv::Result<(Vec<u8>, Vec<u8>)>>,
    P: Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>,
{
    type Item = CmdResult<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let rev = self.rev;
        loop {
            let over_key = self
                .over
                .as_mut()
                .and_then(|o| o.peek().map(|(k, _)| k.as_slice()));
            let step = match (self.db.as_mut().and_then(Peekable::peek), over_key) {
                (Some(Err(_) | Ok(_)), None) | (Some(Err(_)), Some(_)) => Next::Db,
                (None, None) => Next::Done,
                (None, Some(_)) => Next::Over { shadows_db: false },
                (Some(Ok((d, _))), Some(o)) => match order(rev, d, o) {
                    std::cmp::Ordering::Less => Next::Db,
                    std::cmp::Ordering::Equal => Next::Over { shadows_db: true },
                    std::cmp::Ordering::Greater => Next::Over { shadows_db: false },
                },
            };
            match step {
                Next::Done => return None,
                Next::Db => return self.db.as_mut()?.next().map(|r| r.map_err(CmdError::from)),
                Next::Over { shadows_db } => {
                    if shadows_db {
                        if let Some(db) = self.db.as_mut() {
                            db.next();
                        }
                    }
                    let (k, v) = self.over.as_mut()?.next()?;
                    if let Some(v) = v {
                        return Some(Ok((k.clone(), v.clone())));
                    }
                }
            }
        }
    }
}

/// The order of two keys in an iterator's direction.
fn order(rev: bool, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if rev {
        b.cmp(a)
    } else {
        a.cmp(b)
    }
}
