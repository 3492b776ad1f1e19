//! Range iteration over a consistent snapshot.
//!
//! A [`DbIter`] owns a [`Snapshot`] and merges its stages newest first: for each key
//! the newest stage holding a version visible at the snapshot decides, and tombstones
//! hide the key. Entries are fetched in small batches, each batch a fresh seek, so the
//! iterator holds no lock and no index reference between calls; writes made after the
//! snapshot are never seen, however long the iteration takes.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use super::snapshot::Snapshot;
use crate::error::Result;
use crate::value::Value;

const BATCH: usize = 128;

/// Iterator over `(key, value)` pairs in key order, from a consistent snapshot.
pub struct DbIter<'a> {
    snap: Snapshot<'a>,
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

impl<'a> DbIter<'a> {
    pub(super) fn new(snap: Snapshot<'a>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        DbIter {
            snap,
            lo,
            hi,
            buf: VecDeque::new(),
            done: false,
            batch: BATCH,
        }
    }

    /// Fetches at most `n` entries per stage per refill (short scans).
    pub(super) fn set_batch(&mut self, n: usize) {
        self.batch = n.clamp(1, BATCH);
    }
}

impl DbIter<'_> {
    fn refill(&mut self) -> Result<()> {
        let lo = as_ref(&self.lo);
        let hi = as_ref(&self.hi);
        let mut cutoff: Option<Box<[u8]>> = None;
        // One sorted run per stage, newest stage first.
        let mut runs: Vec<Vec<(Box<[u8]>, Value)>> = Vec::new();
        let stages = &self.snap.stages;
        for fs in stages.fast() {
            let mut out = Vec::new();
            let last = fs
                .index()
                .collect_range(lo, hi, self.snap.epoch, self.batch, &mut out);
            lower(&mut cutoff, last);
            if !out.is_empty() {
                runs.push(
                    out.into_iter()
                        .map(|(k, v)| (k, v.val.into_value()))
                        .collect(),
                );
            }
        }
        let tables = stages
            .buffer
            .iter()
            .map(|t| &t.tables)
            .chain(std::iter::once(stages.stable.tables()));
        for set in tables {
            let mut out = Vec::new();
            let last = set.collect_range(lo, hi, self.batch, &mut out)?;
            lower(&mut cutoff, last);
            if !out.is_empty() {
                runs.push(out);
            }
        }
        let merged: Vec<(Box<[u8]>, Value)> = if runs.len() <= 1 {
            // One stage has data in this range: it is already sorted and unique.
            runs.pop().unwrap_or_default()
        } else {
            // A key already decided by a newer stage is kept.
            let mut m: BTreeMap<Box<[u8]>, Value> = BTreeMap::new();
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
            let val = match v {
                Value::Inline(b) => Some(b),
                other => self.snap.engine.resolve(&k, other.as_value_ref())?,
            };
            if let Some(val) = val {
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
