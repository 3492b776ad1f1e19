//! Range iteration over a consistent snapshot, in both directions.
//!
//! A [`DbIter`] owns a [`Snapshot`] and merges its stages newest first: for each key
//! the newest stage holding a version visible at the snapshot decides, and tombstones
//! hide the key. Entries are fetched in small batches, each batch a fresh seek from
//! the end it continues, so the iterator holds no lock and no index reference between
//! calls; writes made after the snapshot are never seen, however long the iteration
//! takes.
//!
//! A batch asks every stage for at most `batch` keys beyond the last one handed out.
//! A stage that stopped early reports where; keys up to the nearest such stop are
//! complete in every stage, so only those are handed out and the next batch resumes
//! there. An entry whose value fails verification comes out as that entry's `Err`
//! and iteration may go on past it; an error reading the stages themselves (a damaged
//! table index, say) is the last item. The front (`next`) walks up from the range's start, the back (`next_back`)
//! walks down from its end; each remembers the last key it yielded, and neither yields
//! a key the other has already passed, so every key comes out exactly once.

use std::collections::VecDeque;
use std::ops::Bound;

use super::snapshot::Snapshot;
use crate::error::Result;
use crate::slowtier::tier::clip;
use crate::value::{Value, ValuePtr};
use crate::vlog;

/// Separated values a scan prefetches ahead of the one it reads (each up to 512 B).
const PREFETCH_AHEAD: usize = 8;

const BATCH: usize = 128;

/// Iterator over `(key, value)` pairs in key order — and, through
/// [`DoubleEndedIterator`] (`.rev()`), in reverse — from a consistent snapshot.
pub struct DbIter<'a> {
    snap: Snapshot<'a>,
    /// Lower bound of the range.
    lo: Bound<Vec<u8>>,
    /// Upper bound of the range.
    hi: Bound<Vec<u8>>,
    front: Side,
    back: Side,
    /// Entries fetched per stage per refill.
    batch: usize,
    /// The iteration ended early: a stage could not be read.
    failed: bool,
}

/// One end of the iteration.
#[derive(Default)]
struct Side {
    /// Fetched, not yet yielded; in the order this side yields them.
    /// Fetched entries; an entry whose value could not be read holds its error.
    buf: VecDeque<(Vec<u8>, Result<Vec<u8>>)>,
    /// Resume after this key (exclusive); `None` = from the range's own bound.
    resume: Option<Vec<u8>>,
    /// Last key yielded from this side.
    last: Option<Vec<u8>>,
    /// No more keys on this side.
    done: bool,
}

impl std::fmt::Debug for DbIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIter")
            .field("snap", &self.snap)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Forward,
    Backward,
}

impl<'a> DbIter<'a> {
    pub(super) fn new(snap: Snapshot<'a>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        DbIter {
            snap,
            lo,
            hi,
            front: Side::default(),
            back: Side::default(),
            batch: BATCH,
            failed: false,
        }
    }

    /// True when the iteration ended early because a stage could not be read (its
    /// last item was that error), as opposed to one entry's value failing (that entry
    /// was an `Err`, and the iteration went on).
    #[must_use]
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Fetches at most `n` entries per stage per refill (short scans).
    pub(super) fn set_batch(&mut self, n: usize) {
        self.batch = n.clamp(1, BATCH);
    }

    fn refill(&mut self, dir: Dir) -> Result<()> {
        let (lo, hi) = match dir {
            Dir::Forward => (
                self.front
                    .resume
                    .as_deref()
                    .map_or(as_ref(&self.lo), Bound::Excluded),
                as_ref(&self.hi),
            ),
            Dir::Backward => (
                as_ref(&self.lo),
                self.back
                    .resume
                    .as_deref()
                    .map_or(as_ref(&self.hi), Bound::Excluded),
            ),
        };
        let mut cutoff: Option<Box<[u8]>> = None;
        let stages = &self.snap.stages;
        let forward = dir == Dir::Forward;
        // Stages are read largest first (the slow tier, StableStore, buffer-trees from
        // the oldest, FastStores from the oldest): the first that fills its batch sets
        // the stop, and every later one collects nothing past it. They are merged
        // newest first.
        let mut slow_runs = Vec::new();
        stages
            .slow
            .collect(lo, hi, self.batch, forward, &mut slow_runs, &mut cutoff)?;
        let mut table_runs = Vec::new();
        let tables = std::iter::once(stages.stable.tables())
            .chain(stages.buffer.iter().rev().map(|t| &t.tables));
        for set in tables {
            let mut out = Vec::new();
            let c = cutoff.clone();
            let (lo, hi) = clip(forward, lo, hi, c.as_deref());
            let last = match dir {
                Dir::Forward => set.collect_range(lo, hi, self.batch, &mut out)?,
                Dir::Backward => set.collect_range_rev(lo, hi, self.batch, &mut out)?,
            };
            tighten(dir, &mut cutoff, last);
            table_runs.push(out);
        }
        let mut fast_runs = Vec::new();
        for fs in stages.fast().rev() {
            let mut out = Vec::new();
            let (idx, snap, max) = (fs.index(), self.snap.epoch, self.batch);
            let c = cutoff.clone();
            let (lo, hi) = clip(forward, lo, hi, c.as_deref());
            let last = match dir {
                Dir::Forward => idx.collect_range(lo, hi, snap, max, &mut out),
                Dir::Backward => idx.collect_range_rev(lo, hi, snap, max, &mut out),
            };
            tighten(dir, &mut cutoff, last);
            fast_runs.push(
                out.into_iter()
                    .map(|(k, v)| (k, v.val.into_value()))
                    .collect::<Vec<_>>(),
            );
        }
        // Newest first: FastStores, buffer-trees, StableStore, the slow tier.
        let runs: Vec<Vec<(Box<[u8]>, Value)>> = fast_runs
            .into_iter()
            .rev()
            .chain(table_runs.into_iter().rev())
            .filter(|r| !r.is_empty())
            .chain(slow_runs)
            .collect();
        let merged = merge_runs(runs, dir);
        self.deliver(dir, merged, cutoff.as_deref());
        Ok(())
    }

    /// Resolves the merged entries of one refill up to `cutoff` (values read and
    /// verified; tombstones dropped) and queues them on side `dir`.
    fn deliver(&mut self, dir: Dir, merged: Vec<(Box<[u8]>, Value)>, cutoff: Option<&[u8]>) {
        let side = match dir {
            Dir::Forward => &mut self.front,
            Dir::Backward => &mut self.back,
        };
        match cutoff {
            Some(c) => side.resume = Some(c.to_vec()),
            None => side.done = true,
        }
        // Separated values lie in log order, not key order: start loading the next
        // few records while the current one is read and verified.
        let engine = self.snap.engine;
        let ptrs: Vec<ValuePtr> = merged
            .iter()
            .filter_map(|(_, v)| match v {
                Value::Separated(p) => Some(*p),
                _ => None,
            })
            .collect();
        for p in ptrs.iter().take(PREFETCH_AHEAD) {
            vlog::prefetch(&engine.pool, *p);
        }
        let mut seen = 0;
        for (k, v) in merged {
            if matches!(v, Value::Separated(_)) {
                if let Some(p) = ptrs.get(seen + PREFETCH_AHEAD) {
                    vlog::prefetch(&engine.pool, *p);
                }
                seen += 1;
            }
            let beyond = cutoff.is_some_and(|c| match dir {
                Dir::Forward => *k > *c,
                Dir::Backward => *k < *c,
            });
            if beyond {
                break;
            }
            // A value that fails verification is that entry's error; the entries
            // around it are still handed out.
            let val = match v {
                Value::Inline(b) => Ok(Some(b)),
                other => engine.resolve(&k, other.as_value_ref()),
            };
            match val {
                Ok(Some(val)) => side.buf.push_back((k.into_vec(), Ok(val))),
                Ok(None) => {}
                Err(e) => side.buf.push_back((k.into_vec(), Err(e))),
            }
        }
    }

    /// The next entry from one end, unless it reaches what the other end yielded.
    fn step(&mut self, dir: Dir) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            let side = match dir {
                Dir::Forward => &mut self.front,
                Dir::Backward => &mut self.back,
            };
            if let Some((k, v)) = side.buf.pop_front() {
                let other = match dir {
                    Dir::Forward => &self.back,
                    Dir::Backward => &self.front,
                };
                let met = other.last.as_ref().is_some_and(|o| match dir {
                    Dir::Forward => k >= *o,
                    Dir::Backward => k <= *o,
                });
                let side = match dir {
                    Dir::Forward => &mut self.front,
                    Dir::Backward => &mut self.back,
                };
                if met {
                    side.buf.clear();
                    side.done = true;
                    return None;
                }
                side.last = Some(k.clone());
                return Some(v.map(|v| (k, v)));
            }
            if side.done {
                return None;
            }
            if let Err(e) = self.refill(dir) {
                self.failed = true;
                self.front.done = true;
                self.back.done = true;
                self.front.buf.clear();
                self.back.buf.clear();
                return Some(Err(e));
            }
        }
    }
}

/// Merges sorted runs (each in `dir`'s order, newest stage first) into one run in that
/// order; of a key found in several runs, the newest stage's entry is kept.
fn merge_runs(mut runs: Vec<Vec<(Box<[u8]>, Value)>>, dir: Dir) -> Vec<(Box<[u8]>, Value)> {
    if runs.len() <= 1 {
        // One stage has data in this range: it is already sorted and unique.
        return runs.pop().unwrap_or_default();
    }
    let mut out = Vec::with_capacity(runs.iter().map(Vec::len).sum());
    let mut its: Vec<_> = runs.into_iter().map(|r| r.into_iter().peekable()).collect();
    loop {
        // The run holding the next key; on a tie the first (newest) stays chosen.
        let mut best: Option<(usize, &[u8])> = None;
        for (i, it) in its.iter_mut().enumerate() {
            let Some((k, _)) = it.peek() else { continue };
            let better = best.is_none_or(|(_, b)| match dir {
                Dir::Forward => **k < *b,
                Dir::Backward => **k > *b,
            });
            if better {
                best = Some((i, k));
            }
        }
        let Some((b, _)) = best else { break };
        let Some((k, v)) = its[b].next() else { break };
        for it in &mut its {
            while it.next_if(|(k2, _)| *k2 == k).is_some() {}
        }
        out.push((k, v));
    }
    out
}

/// Keeps the nearest "stopped early at" key: entries up to it (from the side being
/// filled) are complete in every stage.
fn tighten(dir: Dir, cutoff: &mut Option<Box<[u8]>>, last: Option<Box<[u8]>>) {
    if let Some(last) = last {
        let nearer = cutoff.as_ref().is_none_or(|c| match dir {
            Dir::Forward => last < *c,
            Dir::Backward => last > *c,
        });
        if nearer {
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
        self.step(Dir::Forward)
    }
}

impl DoubleEndedIterator for DbIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(Dir::Backward)
    }
}
