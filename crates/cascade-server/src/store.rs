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
//! `--durability sync` (see `worker.rs`), and no worker replies before the writes of
//! others it could have read are durable (`durable.rs`, counted by `commit`).
//!
//! `keys` and `expires` count `0x01` entries (and those with an expiry) as `DBSIZE` and
//! `INFO keyspace` report them; like Redis they include keys that expired but were not
//! yet reclaimed. They are recounted by one scan at open and changed only by commits
//! (atomics, any thread).

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::iter::{Peekable, Rev};
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use cascadekv::{Db, DbIter, WriteBatch};
use parking_lot::{Mutex, MutexGuard};

use crate::cursors::Cursors;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    self, expire_key, meta_key, now_ms, prefix_end, sub_prefix, Meta, Type, NS_EXPIRE, NS_META,
};
use crate::notify::Notify;
use crate::resp::reply::{self, Out};
use crate::scripting::gate::Gate;

const STRIPES: usize = 1024;

/// The keyspace. See the module docs.
pub(crate) struct Store {
    db: Arc<Db>,
    stripes: Box<[Mutex<()>]>,
    keys: AtomicI64,
    expires: AtomicI64,
    /// Keys deleted by the expiry sweeper (INFO `expired_keys`).
    expired_keys: AtomicI64,
    /// WATCH flags and parked clients.
    notify: Notify,
    /// SCAN, SSCAN, HSCAN and ZSCAN cursors.
    cursors: Cursors,
    /// Scripts run alone: data commands hold it shared (`scripting/gate.rs`).
    gate: Gate,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("keys", &self.keys.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Stripe locks held by a command.
pub(crate) type Guards<'a> = Vec<MutexGuard<'a, ()>>;

impl Store {
    /// Wraps `db`, counting its keys (one scan of namespace 1).
    pub(crate) fn open(db: Arc<Db>) -> CmdResult<Store> {
        let store = Store {
            db,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            keys: AtomicI64::new(0),
            expires: AtomicI64::new(0),
            expired_keys: AtomicI64::new(0),
            notify: Notify::default(),
            cursors: Cursors::new(crate::hash::hash64(&now_ms().to_le_bytes())),
            gate: Gate::default(),
        };
        let (mut keys, mut expires) = (0i64, 0i64);
        let mut it = store.db.iter_bounds(
            Bound::Included(vec![NS_META]),
            Bound::Excluded(vec![NS_META + 1]),
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
        drop(it);
        store.keys.store(keys, Ordering::Relaxed);
        store.expires.store(expires, Ordering::Relaxed);
        Ok(store)
    }

    /// The engine.
    pub(crate) fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Key-change notifications.
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

    /// Keys (DBSIZE).
    pub(crate) fn key_count(&self) -> i64 {
        self.keys.load(Ordering::Relaxed).max(0)
    }

    /// Keys with an expiry.
    pub(crate) fn expires_count(&self) -> i64 {
        self.expires.load(Ordering::Relaxed).max(0)
    }

    /// Keys deleted by the expiry sweeper since start.
    pub(crate) fn expired_keys(&self) -> i64 {
        self.expired_keys.load(Ordering::Relaxed)
    }

    fn stripe(key: &[u8]) -> usize {
        // The remainder is below STRIPES, so it fits any usize.
        usize::try_from(crate::hash::hash64(key) % STRIPES as u64).unwrap_or(0)
    }

    /// Locks several keys (ascending stripe order, each stripe once).
    pub(crate) fn lock_many<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Guards<'_> {
        let mut idx: Vec<usize> = keys.into_iter().map(Self::stripe).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].lock()).collect()
    }

    /// Locks every stripe (FLUSHDB).
    pub(crate) fn lock_all(&self) -> Guards<'_> {
        self.stripes.iter().map(|m| m.lock()).collect()
    }

    /// Applies `tx` as one atomic engine batch, then its count changes.
    pub(crate) fn commit(&self, tx: Tx<'_>) -> CmdResult<()> {
        let Tx {
            writes,
            dkeys,
            dexpires,
            flushed,
            touched,
            ..
        } = tx;
        if flushed || !writes.is_empty() {
            // Counted before any of it is visible (the reply barrier, durable.rs).
            crate::durable::note_write();
        }
        if flushed {
            let watched = self.notify.watched_keys();
            let live: Vec<Vec<u8>> = {
                let probe = Tx::new(self);
                watched
                    .into_iter()
                    .filter(|k| probe.meta(k).ok().flatten().is_some())
                    .collect()
            };
            self.flush_all()?;
            self.notify.touched(&live);
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
        self.keys.fetch_add(dkeys, Ordering::Relaxed);
        self.expires.fetch_add(dexpires, Ordering::Relaxed);
        self.notify.touched(&touched);
        Ok(())
    }

    /// Deletes up to `max` keys whose expiry has passed (the active expiry sweeper).
    /// Returns how many it deleted.
    pub(crate) fn sweep_expired(&self, max: usize) -> CmdResult<usize> {
        let now = now_ms();
        let hi = expire_key(now.saturating_add(1), b"");
        let due = self.db.scan(Some(&[NS_EXPIRE]), Some(&hi), max)?;
        let mut n = 0usize;
        for (qk, _) in due {
            let Some((at, key)) = keyspace::parse_expire_key(&qk) else {
                continue;
            };
            let _gate = self.gate.enter()?;
            let _g = self.lock_many([key]);
            let mut tx = Tx::new(self);
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
        self.expired_keys
            .fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
        Ok(n)
    }

    /// Deletes every key (function libraries stay, as in Redis). The caller holds
    /// every stripe lock.
    fn flush_all(&self) -> CmdResult<()> {
        let keep = [keyspace::NS_FUNCTION];
        let after = [keyspace::NS_FUNCTION + 1];
        for (lo, hi) in [(None, Some(&keep[..])), (Some(&after[..]), None)] {
            loop {
                let chunk = self.db.scan(lo, hi, 4096)?;
                if chunk.is_empty() {
                    break;
                }
                let mut b = WriteBatch::new();
                for (k, _) in chunk {
                    b.delete(k);
                }
                self.db.write(&b)?;
            }
        }
        self.keys.store(0, Ordering::Relaxed);
        self.expires.store(0, Ordering::Relaxed);
        Ok(())
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
    /// FLUSHDB ran: the engine's contents are gone for this transaction's reads, and
    /// are deleted at commit before its writes are applied.
    flushed: bool,
    /// User keys changed (recorded while anyone watches or waits).
    touched: Vec<Vec<u8>>,
    /// Blocking commands may park the client (not inside MULTI/EXEC).
    may_block: bool,
    /// This runs a parked blocking command again after one of its keys changed.
    /// How this command came to run (blocking commands care).
    run: RunKind,
}

impl<'s> Tx<'s> {
    /// An empty transaction over `store`.
    pub(crate) fn new(store: &'s Store) -> Tx<'s> {
        Tx {
            store,
            writes: BTreeMap::new(),
            dkeys: 0,
            dexpires: 0,
            now: now_ms(),
            flushed: false,
            touched: Vec::new(),
            may_block: false,
            run: RunKind::Fresh,
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

    /// FLUSHDB: every key goes, atomically with the rest of this transaction.
    pub(crate) fn flush(&mut self) {
        self.writes.clear();
        self.flushed = true;
        // Counts restart from zero at the commit's flush.
        self.dkeys = 0;
        self.dexpires = 0;
    }

    /// Keys as this transaction sees them (DBSIZE).
    pub(crate) fn key_count(&self) -> i64 {
        let base = if self.flushed {
            0
        } else {
            self.store.key_count()
        };
        (base + self.dkeys).max(0)
    }

    fn touch(&mut self, key: &[u8]) {
        if self.store.notify.active() {
            self.touched.push(key.to_vec());
        }
    }

    /// The time this command sees (Unix ms).
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Reads an engine entry, pending writes first.
    pub(crate) fn get(&self, k: &[u8]) -> CmdResult<Option<Vec<u8>>> {
        match self.writes.get(k) {
            Some(v) => Ok(v.clone()),
            None if self.flushed => Ok(None),
            None => Ok(self.store.db.get(k)?),
        }
    }

    /// True if the entry exists.
    pub(crate) fn contains(&self, k: &[u8]) -> CmdResult<bool> {
        match self.writes.get(k) {
            Some(v) => Ok(v.is_some()),
            None if self.flushed => Ok(false),
            None => Ok(self.store.db.get(k)?.is_some()),
        }
    }

    /// Writes an engine entry.
    pub(crate) fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.writes.insert(k, Some(v));
    }

    /// Deletes an engine entry.
    pub(crate) fn delete(&mut self, k: Vec<u8>) {
        self.writes.insert(k, None);
    }

    /// Entries in `[lo, hi]` (per the bounds) in key order, pending writes merged in.
    pub(crate) fn range(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> CmdResult<TxIter<'_>> {
        let (db, over) = self.range_parts(lo, hi)?;
        Ok(Merged {
            db: db.map(Iterator::peekable),
            over: over.map(Iterator::peekable),
            rev: false,
        })
    }

    /// Like [`Tx::range`], in descending key order (ZREVRANGE, ZPOPMAX).
    pub(crate) fn range_rev(
        &self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> CmdResult<TxRevIter<'_>> {
        let (db, over) = self.range_parts(lo, hi)?;
        Ok(Merged {
            db: db.map(|d| d.rev().peekable()),
            over: over.map(|o| o.rev().peekable()),
            rev: true,
        })
    }

    /// The engine iterator and the pending writes of a key range.
    fn range_parts(
        &self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> CmdResult<(Option<DbIter<'_>>, Option<Pending<'_>>)> {
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        let db = if self.flushed {
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
            .range::<Vec<u8>, _>((Bound::Included(lo.to_vec()), hi_b.clone()))
            .next()
            .is_some();
        if self.flushed || pending {
            return self
                .range(Bound::Included(lo.to_vec()), hi_b)?
                .take(limit)
                .collect();
        }
        Ok(self.store.db.scan(Some(lo), hi, limit)?)
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
        Ok(self.raw_meta(key)?.filter(|m| !m.expired(self.now)))
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
        self.touch(key);
        if old.is_none() {
            self.dkeys += 1;
        }
        self.dexpires += i64::from(new.expire_at.is_some()) - i64::from(old_exp.is_some());
    }

    /// Deletes `key` and everything it owns (a change: watchers see it).
    pub(crate) fn remove(&mut self, key: &[u8], old: &Meta) -> CmdResult<()> {
        self.touch(key);
        self.purge(key, old)
    }

    /// Deletes an expired `key` and everything it owns (not a change for watchers).
    fn purge(&mut self, key: &[u8], old: &Meta) -> CmdResult<()> {
        self.delete(meta_key(key));
        if let Some(t) = old.expire_at {
            self.delete(expire_key(t, key));
            self.dexpires -= 1;
        }
        self.dkeys -= 1;
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
pub(crate) type TxIter<'a> = Merged<DbIter<'a>, Pending<'a>>;
/// [`Tx::range_rev`]'s iterator.
pub(crate) type TxRevIter<'a> = Merged<Rev<DbIter<'a>>, Rev<Pending<'a>>>;

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
