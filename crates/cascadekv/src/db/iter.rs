//! Range iteration over a consistent snapshot.
//!
//! [`DbIter`] registers a snapshot epoch `s`, waits until every write stamped `<= s`
//! has finished (by locking each log slot once), then merges the stages newest first:
//! for each key the newest stage holding a version visible at `s` decides, and
//! tombstones hide the key. Entries are fetched in small batches, each batch a fresh
//! seek, so the iterator holds no lock and no index reference between calls; writes
//! made after the snapshot are never seen, however long the iteration takes.

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::{Db, Stages};
use crate::error::{Error, Result};
use crate::faststore::Val;

const BATCH: usize = 128;

/// Iterator over `(key, value)` pairs in key order, from a consistent snapshot.
pub struct DbIter<'a> {
    db: &'a Db,
    stages: Arc<Stages>,
    snap: u64,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
    /// Entries fetched per stage per refill.
    batch: usize,
}

impl std::fmt::Debug for DbIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter").field("snap", &self.snap).finish()
    }
}

impl Db {
    /// Iterates over keys in `range` (e.g. `..`, `b"a".to_vec()..b"m".to_vec()`).
    pub fn iter<R: RangeBounds<Vec<u8>>>(&self, range: R) -> Result<DbIter<'_>> {
        self.iter_bounds(range.start_bound().cloned(), range.end_bound().cloned())
    }

    /// Iterates over keys between `lo` and `hi`.
    pub fn iter_bounds(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Result<DbIter<'_>> {
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let snap = self.inner.snaps.acquire();
        // Writes stamped with an epoch <= snap hold their slot until indexed.
        let stages = self.inner.stages.load_full();
        for fs in stages.fast() {
            let _ = fs.for_each_slot(|_| Ok::<(), ()>(()));
        }
        Ok(DbIter {
            db: self,
            stages,
            snap,
            lo,
            hi,
            buf: VecDeque::new(),
            done: false,
            batch: BATCH,
        })
    }

    /// Collects up to `limit` pairs with `start <= key < end` (`None` = unbounded).
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
        it.batch = limit.clamp(1, BATCH);
        it.take(limit).collect()
    }
}

impl DbIter<'_> {
    fn refill(&mut self) -> Result<()> {
        let lo = as_ref(&self.lo);
        let hi = as_ref(&self.hi);
        let mut cutoff: Option<Box<[u8]>> = None;
        // One sorted run per stage, newest stage first.
        let mut runs: Vec<Vec<(Box<[u8]>, Val)>> = Vec::new();
        for fs in self.stages.fast() {
            let mut out = Vec::new();
            let last = fs
                .index()
                .collect_range(lo, hi, self.snap, self.batch, &mut out);
            lower(&mut cutoff, last);
            if !out.is_empty() {
                runs.push(out.into_iter().map(|(k, v)| (k, v.val)).collect());
            }
        }
        let tables = self
            .stages
            .buffer
            .iter()
            .map(|t| &t.tables)
            .chain(std::iter::once(&*self.stages.stable));
        for set in tables {
            let mut out = Vec::new();
            let last = set.collect_range(lo, hi, self.batch, &mut out)?;
            lower(&mut cutoff, last);
            if !out.is_empty() {
                runs.push(out);
            }
        }
        let merged: Vec<(Box<[u8]>, Val)> = if runs.len() <= 1 {
            // One stage has data in this range: it is already sorted and unique.
            runs.pop().unwrap_or_default()
        } else {
            // A key already decided by a newer stage is kept.
            let mut m: BTreeMap<Box<[u8]>, Val> = BTreeMap::new();
            for run in runs {
                for (k, v) in run {
                    m.entry(k).or_insert(v);
                }
            }
            m.into_iter().collect()
        };
        if let Some(c) = &cutoff {
            self.lo = Bound::Excluded(c.to_vec());
        } else {
            self.done = true;
        }
        for (k, v) in merged {
            if cutoff.as_ref().is_some_and(|c| k > *c) {
                break;
            }
            if let Some(val) = self.db.resolve_owned(&k, v)? {
                self.buf.push_back((k.into_vec(), val));
            }
        }
        Ok(())
    }
}

/// Keeps the smallest "stopped early at" key: entries up to it are complete in every
/// stage.
fn lower(cutoff: &mut Option<Box<[u8]>>, last: Option<Box<[u8]>>) {
    if let Some(last) = last {
        if cutoff.as_ref().is_none_or(|c| last < *c) {
            *cutoff = Some(last);
        }
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for DbIter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.buf.is_empty() && !self.done {
            if let Err(e) = self.refill() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.buf.pop_front().map(Ok)
    }
}

impl Drop for DbIter<'_> {
    fn drop(&mut self) {
        self.db.inner.snaps.release(self.snap);
    }
}
