//! K-way merge of sorted runs of LSTs (FluidKV Algorithm 3, COMPACTION: "merge-sort
//! the KV from inputs").
//!
//! A [`RunCursor`] streams one run — a list of non-overlapping LSTs in key order,
//! restricted to a key range — a batch of entries at a time, so memory stays bounded
//! whatever the run's size. [`merge`] walks several cursors given newest first and
//! emits, for every key, the newest version; versions it drops are reported to the
//! caller (for dead-byte accounting of separated values).
//!
//! Thread-safety: cursors are owned by one compaction thread.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::Result;
use crate::faststore::Val;
use crate::table::{to_val, Lst};

const BATCH: usize = 256;

/// Streams entries of a run within `[lo, hi)`.
#[derive(Debug)]
pub struct RunCursor {
    lsts: Vec<Arc<Lst>>,
    idx: usize,
    buf: VecDeque<(Box<[u8]>, Val)>,
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
            buf: VecDeque::new(),
            after: None,
            lo,
            hi,
            done: false,
        }
    }

    fn refill(&mut self) -> Result<()> {
        while self.buf.is_empty() && !self.done {
            let Some(l) = self.lsts.get(self.idx) else {
                self.done = true;
                return Ok(());
            };
            let after = self.after.take();
            let start: Option<&[u8]> = after.as_deref().or(self.lo.as_deref());
            let hi = self.hi.as_deref();
            let (mut n, mut hit_hi) = (0, false);
            let buf = &mut self.buf;
            l.scan_from(start, |k, v| {
                if after.as_deref().is_some_and(|a| k <= a) {
                    return true;
                }
                if hi.is_some_and(|h| k >= h) {
                    hit_hi = true;
                    return false;
                }
                buf.push_back((k.into(), to_val(&v)));
                n += 1;
                n < BATCH
            })?;
            if hit_hi {
                self.done = true;
            } else if n >= BATCH {
                self.after = self.buf.back().map(|(k, _)| k.clone());
            } else {
                self.idx += 1;
            }
        }
        Ok(())
    }

    /// The next entry's key, if any.
    pub fn peek_key(&mut self) -> Result<Option<&[u8]>> {
        self.refill()?;
        Ok(self.buf.front().map(|(k, _)| &k[..]))
    }

    /// Takes the next entry.
    pub fn next_entry(&mut self) -> Result<Option<(Box<[u8]>, Val)>> {
        self.refill()?;
        Ok(self.buf.pop_front())
    }
}

/// Merges `cursors` (index 0 = newest). Calls `emit(key, newest value)` per key in
/// order and `dropped(key, value)` for every older version it discards.
pub fn merge(
    cursors: &mut [RunCursor],
    mut emit: impl FnMut(Box<[u8]>, Val) -> Result<()>,
    mut dropped: impl FnMut(&[u8], &Val),
) -> Result<()> {
    loop {
        // The smallest head key; the newest cursor holding it wins.
        let mut best: Option<(usize, Box<[u8]>)> = None;
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(k) = c.peek_key()? {
                if best.as_ref().is_none_or(|(_, b)| k < &b[..]) {
                    best = Some((i, k.into()));
                }
            }
        }
        let Some((win, key)) = best else {
            return Ok(());
        };
        let mut winner = None;
        for (i, c) in cursors.iter_mut().enumerate() {
            if c.peek_key()? == Some(&key[..]) {
                if let Some((k, v)) = c.next_entry()? {
                    if i == win {
                        winner = Some((k, v));
                    } else {
                        dropped(&k, &v);
                    }
                }
            }
        }
        if let Some((k, v)) = winner {
            emit(k, v)?;
        }
    }
}
