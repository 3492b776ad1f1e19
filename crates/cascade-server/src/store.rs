//! The Redis keyspace over one [`Db`]: per-key locking, typed metadata, atomic
//! multi-entry writes, key counts and expiry.
//!
//! Thread-safety: `Store` is shared by all worker threads. Reads take no lock (the
//! engine gives each read a consistent view of one key). Every command that writes a
//! key first takes that key's stripe lock (1024 stripes by key hash; several keys are
//! locked in ascending stripe order, so there is no deadlock), then reads the key's
//! metadata, then writes all its changes in one atomic engine batch ([`Txn`]). So
//! read-modify-write commands (INCR, HSET, SETNX, ...) are atomic with respect to each
//! other, as on a single-threaded Redis.
//!
//! Writes go to the calling worker thread's own engine log. They are written
//! `Buffered`; the worker makes them durable (group commit) before it sends replies
//! when the server runs with `--durability sync` (see `worker.rs`).
//!
//! `keys` and `expires` count `0x01` entries (and those with an expiry) as `DBSIZE` and
//! `INFO keyspace` report them; like Redis they include keys that expired but were not
//! yet reclaimed. They are recounted by one scan at open.

use std::ops::Bound;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use cascadekv::{Db, WriteBatch};
use parking_lot::{Mutex, MutexGuard};

use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    self, expire_key, meta_key, now_ms, prefix_end, sub_prefix, Meta, Type, NS_EXPIRE, NS_HASH,
    NS_META, NS_ZMEMBER, NS_ZSCORE,
};

const STRIPES: usize = 1024;

/// The keyspace. See the module docs.
pub struct Store {
    db: Arc<Db>,
    stripes: Box<[Mutex<()>]>,
    keys: AtomicI64,
    expires: AtomicI64,
    /// Keys deleted by the expiry sweeper (INFO `expired_keys`).
    pub expired_keys: AtomicI64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("keys", &self.keys.load(Ordering::Relaxed))
            .finish()
    }
}

/// Locks held by a writing command.
pub type Guards<'a> = Vec<MutexGuard<'a, ()>>;

impl Store {
    /// Wraps `db`, counting its keys (one scan of namespace 1).
    pub fn open(db: Arc<Db>) -> CmdResult<Store> {
        let store = Store {
            db,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            keys: AtomicI64::new(0),
            expires: AtomicI64::new(0),
            expired_keys: AtomicI64::new(0),
        };
        let (mut keys, mut expires) = (0i64, 0i64);
        let it = store.db.iter_bounds(
            Bound::Included(vec![NS_META]),
            Bound::Excluded(vec![NS_META + 1]),
        )?;
        for kv in it {
            let (_, v) = kv?;
            keys += 1;
            if Meta::decode(&v)?.expire_at.is_some() {
                expires += 1;
            }
        }
        store.keys.store(keys, Ordering::Relaxed);
        store.expires.store(expires, Ordering::Relaxed);
        Ok(store)
    }

    /// The engine.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Keys (DBSIZE).
    pub fn key_count(&self) -> i64 {
        self.keys.load(Ordering::Relaxed).max(0)
    }

    /// Keys with an expiry.
    pub fn expires_count(&self) -> i64 {
        self.expires.load(Ordering::Relaxed).max(0)
    }

    fn stripe(key: &[u8]) -> usize {
        (crate::keyspace::hash64(key) as usize) % STRIPES
    }

    /// Locks `key` for a read-modify-write.
    pub fn lock(&self, key: &[u8]) -> Guards<'_> {
        vec![self.stripes[Self::stripe(key)].lock()]
    }

    /// Locks several keys (ascending stripe order, each stripe once).
    pub fn lock_many<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Guards<'_> {
        let mut idx: Vec<usize> = keys.into_iter().map(Self::stripe).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].lock()).collect()
    }

    /// Locks every stripe (FLUSHDB).
    pub fn lock_all(&self) -> Guards<'_> {
        self.stripes.iter().map(|m| m.lock()).collect()
    }

    /// The stored metadata of `key`, expired or not.
    pub fn raw_meta(&self, key: &[u8]) -> CmdResult<Option<Meta>> {
        match self.db.get(&meta_key(key))? {
            Some(v) => Ok(Some(Meta::decode(&v)?)),
            None => Ok(None),
        }
    }

    /// The metadata of `key` if it exists and has not expired.
    pub fn meta(&self, key: &[u8]) -> CmdResult<Option<Meta>> {
        Ok(self.raw_meta(key)?.filter(|m| !m.expired(now_ms())))
    }

    /// Like [`Store::meta`], but a key of another type than `ty` is `WRONGTYPE`.
    pub fn typed(&self, key: &[u8], ty: Type) -> CmdResult<Option<Meta>> {
        match self.meta(key)? {
            Some(m) if m.ty != ty => Err(CmdError::WrongType),
            m => Ok(m),
        }
    }

    /// Starts a write of `key` (caller holds its lock): returns its live metadata; an
    /// expired key is purged in `txn` and reported as absent.
    pub fn begin(&self, txn: &mut Txn, key: &[u8]) -> CmdResult<Option<Meta>> {
        match self.raw_meta(key)? {
            Some(m) if m.expired(now_ms()) => {
                self.remove(txn, key, &m)?;
                Ok(None)
            }
            m => Ok(m),
        }
    }

    /// Like [`Store::begin`] with a type check.
    pub fn begin_typed(&self, txn: &mut Txn, key: &[u8], ty: Type) -> CmdResult<Option<Meta>> {
        match self.begin(txn, key)? {
            Some(m) if m.ty != ty => Err(CmdError::WrongType),
            m => Ok(m),
        }
    }

    /// Writes `key`'s metadata `new`, replacing `old` (as returned by `begin`).
    pub fn set_meta(&self, txn: &mut Txn, key: &[u8], old: Option<&Meta>, new: &Meta) {
        let old_exp = old.and_then(|m| m.expire_at);
        if old_exp != new.expire_at {
            if let Some(t) = old_exp {
                txn.batch.delete(expire_key(t, key));
            }
            if let Some(t) = new.expire_at {
                txn.batch.put(expire_key(t, key), Vec::new());
            }
        }
        txn.batch.put(meta_key(key), new.encode());
        if old.is_none() {
            txn.dkeys += 1;
        }
        txn.dexpires += i64::from(new.expire_at.is_some()) - i64::from(old_exp.is_some());
    }

    /// Deletes `key` and everything it owns.
    pub fn remove(&self, txn: &mut Txn, key: &[u8], old: &Meta) -> CmdResult<()> {
        txn.batch.delete(meta_key(key));
        if let Some(t) = old.expire_at {
            txn.batch.delete(expire_key(t, key));
            txn.dexpires -= 1;
        }
        txn.dkeys -= 1;
        let spaces: &[u8] = match old.ty {
            Type::String => &[],
            Type::Hash => &[NS_HASH],
            Type::ZSet => &[NS_ZMEMBER, NS_ZSCORE],
        };
        for &ns in spaces {
            for (k, _) in self.prefix_scan(&sub_prefix(ns, key), usize::MAX)? {
                txn.batch.delete(k);
            }
        }
        Ok(())
    }

    /// After `removed` elements of the hash or zset `key` (metadata `old`) were
    /// deleted in `txn`: writes the new count, or deletes the key when none are left.
    pub fn shrink(&self, txn: &mut Txn, key: &[u8], old: &Meta, removed: u64) -> CmdResult<()> {
        if removed == 0 {
            return Ok(());
        }
        let count = old.count().saturating_sub(removed);
        if count == 0 {
            self.remove(txn, key, old)
        } else {
            let new = Meta::collection(old.ty, count, old.expire_at);
            self.set_meta(txn, key, Some(old), &new);
            Ok(())
        }
    }

    /// Engine entries whose key starts with `prefix` (up to `limit`).
    pub fn prefix_scan(&self, prefix: &[u8], limit: usize) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = prefix_end(prefix);
        Ok(self.db.scan(Some(prefix), end.as_deref(), limit)?)
    }

    /// Engine entries in `[start, end)`.
    pub fn range(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self.db.scan(Some(start), end, limit)?)
    }

    /// Applies `txn` and then its count changes.
    pub fn commit(&self, txn: Txn) -> CmdResult<()> {
        let Txn {
            batch,
            dkeys,
            dexpires,
        } = txn;
        match batch.ops() {
            [] => {}
            [cascadekv::BatchOp::Put(k, v)] => self.db.put(k, v)?,
            [cascadekv::BatchOp::Delete(k)] => self.db.delete(k)?,
            _ => self.db.write(&batch)?,
        }
        self.keys.fetch_add(dkeys, Ordering::Relaxed);
        self.expires.fetch_add(dexpires, Ordering::Relaxed);
        Ok(())
    }

    /// Deletes up to `max` keys whose expiry has passed (the active expiry sweeper).
    /// Returns how many it deleted.
    pub fn sweep_expired(&self, max: usize) -> CmdResult<usize> {
        let now = now_ms();
        let hi = expire_key(now.saturating_add(1), b"");
        let due = self.range(&[NS_EXPIRE], Some(&hi), max)?;
        let mut n = 0;
        for (qk, _) in due {
            let Some((at, key)) = keyspace::parse_expire_key(&qk) else {
                continue;
            };
            let _g = self.lock(key);
            let mut txn = Txn::default();
            match self.raw_meta(key)? {
                Some(m) if m.expire_at == Some(at) && m.expired(now) => {
                    self.remove(&mut txn, key, &m)?;
                    n += 1;
                }
                // A stale queue entry (the expiry changed meanwhile): drop it.
                Some(m) if m.expire_at == Some(at) => continue,
                _ => {
                    txn.batch.delete(qk.clone());
                }
            }
            self.commit(txn)?;
        }
        self.expired_keys.fetch_add(n as i64, Ordering::Relaxed);
        Ok(n)
    }

    /// Deletes every key (FLUSHDB). Holds every stripe lock meanwhile.
    pub fn flush_all(&self) -> CmdResult<()> {
        let _g = self.lock_all();
        loop {
            let chunk = self.db.scan(None, None, 4096)?;
            if chunk.is_empty() {
                break;
            }
            let mut b = WriteBatch::new();
            for (k, _) in chunk {
                b.delete(k);
            }
            self.db.write(&b)?;
        }
        self.keys.store(0, Ordering::Relaxed);
        self.expires.store(0, Ordering::Relaxed);
        Ok(())
    }
}

/// The changes of one command: applied atomically by [`Store::commit`].
#[derive(Debug, Default)]
pub struct Txn {
    /// Engine operations.
    pub batch: WriteBatch,
    dkeys: i64,
    dexpires: i64,
}
