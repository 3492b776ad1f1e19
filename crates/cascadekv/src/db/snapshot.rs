//! [`Snapshot`]: a consistent, point-in-time view of the store.
//!
//! Taking one registers a snapshot epoch `s` (every later write is stamped `> s`),
//! keeps the stage set current at that moment, and waits until every write stamped
//! `<= s` has finished (by locking each log slot once). Reads through it then see
//! exactly the writes acknowledged before it was taken: FastStores answer with the
//! newest version visible at `s` (older versions stay in the index while a snapshot
//! needs them, `epoch.rs`), and the tables of the kept stage set are immutable.
//! Writes made later, and stage changes made later (switch, flush, compaction), are
//! never seen, however long the snapshot lives. Like a RocksDB snapshot it pins what
//! it can reach — the FastStores and tables of its stage set — until it is dropped.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::engine::Engine;
use super::iter::DbIter;
use super::Db;
use crate::error::Result;
use crate::stages::Stages;

/// A consistent view of the store at one instant. See the module docs.
pub struct Snapshot<'a> {
    pub(super) engine: &'a Engine,
    pub(super) stages: Arc<Stages>,
    pub(super) epoch: u64,
}

impl std::fmt::Debug for Snapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl Db {
    /// Takes a snapshot: reads through it see every write acknowledged before this call
    /// and none after.
    ///
    /// # Errors
    /// `Closed`.
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        let e = &*self.engine;
        e.check_open()?;
        let epoch = e.snaps.acquire();
        // Writes stamped with an epoch <= `epoch` hold their slot until indexed.
        let stages = e.stages.load_full();
        for fs in stages.fast() {
            fs.wait_for_writers();
        }
        Ok(Snapshot {
            engine: e,
            stages,
            epoch,
        })
    }

    /// Iterates over keys in `range` (e.g. `..`, `b"a".to_vec()..b"m".to_vec()`) of a
    /// snapshot taken now.
    ///
    /// # Errors
    /// `Closed`; the iterator yields `Corruption`/`ChecksumMismatch` for damaged data.
    #[expect(
        clippy::iter_not_returning_iterator,
        reason = "taking the snapshot can fail (closed store); RocksDB's name for it"
    )]
    pub fn iter<R: RangeBounds<Vec<u8>>>(&self, range: R) -> Result<DbIter<'_>> {
        self.iter_bounds(range.start_bound().cloned(), range.end_bound().cloned())
    }

    /// Iterates over keys between `lo` and `hi` of a snapshot taken now.
    ///
    /// # Errors
    /// As [`Db::iter`].
    pub fn iter_bounds(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Result<DbIter<'_>> {
        Ok(DbIter::new(self.snapshot()?, lo, hi))
    }

    /// Collects up to `limit` pairs with `start <= key < end` (`None` = unbounded).
    ///
    /// # Errors
    /// As [`Db::iter`].
    pub fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let lo = start.map_or(Bound::Unbounded, |s| Bound::Included(s.to_vec()));
        let hi = end.map_or(Bound::Unbounded, |e| Bound::Excluded(e.to_vec()));
        let mut it = self.iter_bounds(lo, hi)?;
        // A short scan needs only a short first batch from each stage.
        it.set_batch(limit);
        it.take(limit).collect()
    }
}

impl<'a> Snapshot<'a> {
    /// The value `key` had when the snapshot was taken.
    ///
    /// # Errors
    /// `InvalidArgument` (key size), `Closed`, `Corruption`/`ChecksumMismatch`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let e = self.engine;
        e.opts.check_key(key)?;
        e.check_open()?;
        let mut out = Vec::new();
        Ok(
            e.lookup_into(&self.stages, key, Some(self.epoch), &mut out)?
                .then_some(out),
        )
    }

    /// Iterates over keys in `range` as they were when the snapshot was taken.
    ///
    /// # Errors
    /// `Closed`.
    #[expect(
        clippy::iter_not_returning_iterator,
        reason = "taking the snapshot can fail (closed store); RocksDB's name for it"
    )]
    pub fn iter<R: RangeBounds<Vec<u8>>>(&self, range: R) -> Result<DbIter<'a>> {
        self.engine.check_open()?;
        Ok(DbIter::new(
            self.clone(),
            range.start_bound().cloned(),
            range.end_bound().cloned(),
        ))
    }
}

impl Clone for Snapshot<'_> {
    fn clone(&self) -> Self {
        self.engine.snaps.retain(self.epoch);
        Snapshot {
            engine: self.engine,
            stages: self.stages.clone(),
            epoch: self.epoch,
        }
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.engine.snaps.release(self.epoch);
    }
}
