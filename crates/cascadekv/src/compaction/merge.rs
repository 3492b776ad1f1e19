//! K-way merge of sorted runs of LSTs (FluidKV Algorithm 3, COMPACTION: "merge-sort
//! the KV from inputs").
//!
//! A [`RunCursor`] streams one run — a list of non-overlapping LSTs in key order,
//! restricted to a key range — a batch of entries at a time, so memory stays bounded
//! whatever the run's size. A batch's keys and inline values are copied into one
//! reusable buffer, so streaming allocates nothing per entry. [`merge`] walks several
//! cursors given newest first and emits, for every key, the newest version; versions it
//! drops are reported to the caller (for dead-byte accounting of separated values).
//!
//! Thread-safety: cursors are owned by one compaction thread.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use crate::error::Result;
use crate::table::Lst;
use crate::value::{ValuePtr, ValueRef};

const BATCH: usize = 256;

/// Where an entry's value is, in the cursor's buffer.
#[derive(Debug, Clone)]
enum Slot {
    Tombstone,
    Inline(Range<usize>),
    Separated(ValuePtr),
}

/// Streams entries of a run within `[lo, hi)`.
#[derive(Debug)]
pub(crate) struct RunCursor {
    lsts: Vec<Arc<Lst>>,
    idx: usize,
    /// Key and inline value bytes of the current batch.
    arena: Vec<u8>,
    /// The current batch: key range in `arena` and value.
    entries: Vec<(Range<usize>, Slot)>,
    /// Next entry of `entries` to hand out.
    pos: usize,
    /// Resume after this key (exclusive), or at `lo` (inclusive) at the start.
    after: Option<Box<[u8]>>,
    lo: Option<Box<[u8]>>,
    hi: Option<Box<[u8]>>,
    done: bool,
}

impl RunCursor {
    /// A cursor over `lsts` (key order, non-overlapping) for keys in `[lo, hi)`.
    pub fn new(lsts: Vec<Arc<Lst>>, lo: Option<Box<[u8]>>, hi: Option<Box<[u8]>>) -> Self {
        // Skip tables entirely below `lo` or at/after `hi`.
        let lsts: Vec<Arc<Lst>> = lsts
            .into_iter()
            .filter(|l| {
                lo.as_ref().is_none_or(|lo| &l.max_key >= lo)
                    && hi.as_ref().is_none_or(|hi| &l.min_key < hi)
            })
            .collect();
        RunCursor {
            lsts,
            idx: 0,
            arena: Vec::new(),
            entries: Vec::new(),
            pos: 0,
            after: None,
            lo,
            hi,
            done: false,
        }
    }

    fn refill(&mut self) -> Result<()> {
        while self.pos >= self.entries.len() && !self.done {
            let Some(l) = self.lsts.get(self.idx) else {
                self.done = true;
                return Ok(());
            };
            self.arena.clear();
            self.entries.clear();
            self.pos = 0;
            let after = self.after.take();
            let start: Option<&[u8]> = after.as_deref().or(self.lo.as_deref());
            let hi = self.hi.as_deref();
            let mut hit_hi = false;
            let (arena, entries) = (&mut self.arena, &mut self.entries);
            l.scan_from(start, |k, v| {
                if after.as_deref().is_some_and(|a| k <= a) {
                    return true;
                }
                if hi.is_some_and(|h| k >= h) {
                    hit_hi = true;
                    return false;
                }
                let key = push(arena, k);
                let slot = match v {
                    ValueRef::Tombstone => Slot::Tombstone,
                    ValueRef::Inline(b) => Slot::Inline(push(arena, b)),
                    ValueRef::Separated(p) => Slot::Separated(p),
                };
                entries.push((key, slot));
                entries.len() < BATCH
            })?;
            if hit_hi {
                self.done = true;
            } else if self.entries.len() >= BATCH {
                self.after = self
                    .entries
                    .last()
                    .map(|(k, _)| self.arena[k.clone()].into());
            } else {
                self.idx += 1;
            }
        }
        Ok(())
    }

    /// Loads the next batch if the current one is used up; then [`RunCursor::head`]
    /// shows the next entry (or `None` at the end of the run).
    pub fn fill(&mut self) -> Result<()> {
        self.refill()
    }

    /// The next entry, if [`RunCursor::fill`] found one.
    pub fn head(&self) -> Option<(&[u8], ValueRef<'_>)> {
        let (k, slot) = self.entries.get(self.pos)?;
        let v = match slot {
            Slot::Tombstone => ValueRef::Tombstone,
            Slot::Inline(r) => ValueRef::Inline(self.arena.get(r.clone())?),
            Slot::Separated(p) => ValueRef::Separated(*p),
        };
        Some((self.arena.get(k.clone())?, v))
    }

    /// Moves past the head entry.
    pub fn advance(&mut self) {
        self.pos += 1;
    }
}

fn push(arena: &mut Vec<u8>, b: &[u8]) -> Range<usize> {
    let start = arena.len();
    arena.extend_from_slice(b);
    start..arena.len()
}

/// Merges `cursors` (index 0 = newest). Calls `emit(key, newest value)` per key in
/// order and `dropped(key, value)` for every older version it discards.
pub(crate) fn merge(
    cursors: &mut [RunCursor],
    mut emit: impl FnMut(&[u8], ValueRef<'_>) -> Result<()>,
    mut dropped: impl FnMut(&[u8], ValueRef<'_>),
) -> Result<()> {
    let mut holders: Vec<usize> = Vec::with_capacity(cursors.len());
    loop {
        for c in cursors.iter_mut() {
            c.fill()?;
        }
        // The smallest head key; the newest cursor holding it wins.
        holders.clear();
        let mut best: Option<&[u8]> = None;
        for (i, c) in cursors.iter().enumerate() {
            let Some((k, _)) = c.head() else { continue };
            // One comparison per cursor, not `>` then `==` (`perf` of a load: `memcmp`
            // was a fifth of the compaction thread's samples).
            match best.map(|b| k.cmp(b)) {
                Some(Ordering::Greater) => {}
                Some(Ordering::Equal) => holders.push(i),
                _ => {
                    best = Some(k);
                    holders.clear();
                    holders.push(i);
                }
            }
        }
        if best.is_none() {
            return Ok(());
        }
        for (n, &i) in holders.iter().enumerate() {
            if let Some((k, v)) = cursors[i].head() {
                if n == 0 {
                    emit(k, v)?;
                } else {
                    dropped(k, v);
                }
            }
        }
        for &i in &holders {
            cursors[i].advance();
        }
    }
}
