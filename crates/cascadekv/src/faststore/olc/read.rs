//! Readers of the optimistic index: point reads, ranges in both directions, full walks.
//!
//! Every read is a sequence of optimistic node reads, each accepted only once the
//! node's version is checked unchanged; none stores to the index. Point reads and
//! range starts descend from the root with lock coupling (a child's version is read
//! before the parent's is re-checked, so the child's range is the one the parent
//! described). Forward ranges then follow leaves' `next` links; a leaf whose check
//! fails is read again (its lower bound never changes, so it still starts where the
//! previous one ended). Descending ranges re-descend per leaf with the leaf's lower
//! bound as the new upper bound, as the B-link tree did.
//!
//! What a reader hands out (keys, versions) comes from entries it loaded while pinned
//! to the epoch collector, which keeps them alive until it unpins, even if a writer
//! replaces them meanwhile; versions a writer rewrites in place are copied out whole
//! through the entry's sequence word (`Entry::with_slot`, [`super::entry`]).
//!
//! Thread-safety: `&self` only; see [`super::lock`] for the validation protocol.

use std::ops::Bound;

use crossbeam_epoch::{self as epoch, Guard, Shared};

use super::entry::prefetch_entry;
use super::entry::Entry;
use super::node::{prefetch_node, Leaf, NodeRef, LEAF_MAX};
use super::sync::{retry, Ordering};
use super::Olc;
use crate::faststore::ikey::{below_lo, bounds_empty, low_reaches, past_hi, IKey, Probe};
use crate::faststore::node::{visible, SlotState};
use crate::faststore::version::Version;

/// Where a descent goes.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The leaf for keys `<= p` (`true`) or `< p` (`false`) at their upper end.
    Key(&'a Probe<'a>, bool),
    First,
    Last,
}

/// The entries of one leaf read consistently: pointers, in key order.
struct Snap<'g> {
    entries: [Shared<'g, Entry>; LEAF_MAX],
    n: usize,
}

impl Olc {
    /// Descends to the leaf for `t`; with the leaf's version and its lower bound (the
    /// nearest separator left of the path; `None` for the leftmost leaf).
    fn descend(&self, t: Target<'_>) -> Option<(&Leaf, u64, Option<&IKey>)> {
        let (mut node, mut ver) = self.read_root()?;
        let mut low = None;
        loop {
            match node {
                NodeRef::Leaf(l) => return Some((l, ver, low)),
                NodeRef::Inner(inner) => {
                    let n = inner.len();
                    let c = match t {
                        Target::Key(p, or_equal) => inner.child_for(p, n, or_equal)?,
                        Target::First => 0,
                        Target::Last => n,
                    };
                    if c > 0 {
                        low = Some(inner.sep(c - 1)?);
                    }
                    let kid = inner.kid(c)?;
                    let kv = kid.header().lock.read()?;
                    if !inner.h.lock.check(ver) {
                        return None;
                    }
                    (node, ver) = (kid, kv);
                }
            }
        }
    }

    /// The leaf whose range holds `p`, with its version (`None`: restart).
    pub(super) fn leaf_for(&self, p: &Probe<'_>) -> Option<(&Leaf, u64)> {
        self.descend(Target::Key(p, true)).map(|(l, v, _)| (l, v))
    }

    /// Finds `p`'s entry; `None` = restart, `Some(None)` = absent.
    #[expect(clippy::option_option, reason = "restart, absent, found")]
    fn try_find<'g>(&self, p: &Probe<'_>, g: &'g Guard) -> Option<Option<Shared<'g, Entry>>> {
        let (leaf, ver) = self.leaf_for(p)?;
        let found = leaf.find(p, leaf.len(), g)?;
        let e = found
            .ok()
            .map(|pos| leaf.entries[pos].load(Ordering::Acquire, g));
        leaf.h.lock.check(ver).then_some(e)
    }

    /// Calls `f` with `key`'s versions (read without locks; `f` runs while this
    /// thread is pinned, so it should only copy what it needs).
    pub(in crate::faststore) fn read_key<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&SlotState) -> Option<R>,
    ) -> Option<R> {
        let p = Probe::new(key);
        let g = epoch::pin();
        let e = retry(|| self.try_find(&p, &g));
        // SAFETY: loaded from a slot while pinned (module invariants: not retired then),
        // so `g` keeps it alive for `f`.
        let e = unsafe { e?.as_ref() }?;
        e.with_slot(f)
    }

    /// The newest version of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Version> {
        self.read_key(key, |s| Some(s.cur.clone()))
    }

    /// The newest version of `key` visible to snapshot `snap` (epoch `<= snap`).
    pub fn get_at(&self, key: &[u8], snap: u64) -> Option<Version> {
        self.read_key(key, |s| visible(s, snap))
    }

    /// Reads `leaf` consistently from position `from` on (`None`: it changed, read it
    /// again); with its right sibling.
    fn read_leaf<'g>(
        leaf: &Leaf,
        ver: u64,
        from: impl FnOnce(usize) -> Option<usize>,
        g: &'g Guard,
    ) -> Option<(Snap<'g>, *mut Leaf)> {
        let n = leaf.len();
        let from = from(n)?.min(n);
        let mut s = Snap {
            entries: [Shared::null(); LEAF_MAX],
            n: n - from,
        };
        for (d, slot) in s.entries.iter_mut().zip(&leaf.entries[from..n]) {
            *d = slot.load(Ordering::Acquire, g);
            // The caller visits every entry: start all their misses now, not one per
            // entry as it goes (each entry is its own allocation).
            prefetch_entry(d.as_raw());
        }
        let next = leaf.next.load(Ordering::Acquire);
        prefetch_node(next.cast_const().cast());
        leaf.h.lock.check(ver).then_some((s, next))
    }

    /// Reads all of `leaf` consistently (retrying while writers change it); with its
    /// right sibling.
    fn read_whole<'g>(leaf: &Leaf, g: &'g Guard) -> (Snap<'g>, *mut Leaf) {
        retry(|| {
            let ver = leaf.h.lock.read()?;
            Self::read_leaf(leaf, ver, |_| Some(0), g)
        })
    }

    /// Visits up to `max` entries in `(lo, hi)` in key order, appending each with the
    /// version it has at snapshot `snap` (keys with none are skipped but count as
    /// visited). Returns the last key visited if it stopped because `max` was reached.
    pub fn collect_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) -> Option<Box<[u8]>> {
        if bounds_empty(lo, hi) || max == 0 {
            return None;
        }
        let g = epoch::pin();
        let lo_p = match lo {
            Bound::Included(k) | Bound::Excluded(k) => Some(Probe::new(k)),
            Bound::Unbounded => None,
        };
        // The first leaf: from the root, positioned at `lo`.
        let t = lo_p
            .as_ref()
            .map_or(Target::First, |p| Target::Key(p, true));
        let (mut snap_leaf, mut next) = retry(|| {
            self.descend(t).and_then(|(leaf, ver, _)| {
                let from = |n| match &lo_p {
                    None => Some(0),
                    Some(p) => match leaf.find(p, n, &g)? {
                        Ok(i) if matches!(lo, Bound::Excluded(_)) => Some(i + 1),
                        Ok(i) | Err(i) => Some(i),
                    },
                };
                Self::read_leaf(leaf, ver, from, &g)
            })
        });
        let mut visited = 0;
        loop {
            for e in &snap_leaf.entries[..snap_leaf.n] {
                // SAFETY: loaded while pinned from a slot of a validated leaf read.
                let Some(e) = (unsafe { e.as_ref() }) else {
                    continue;
                };
                if past_hi(&e.key, hi) {
                    return None;
                }
                visited += 1;
                if let Some(v) = e.with_slot(|s| visible(s, snap)) {
                    out.push((e.key.to_boxed(), v));
                }
                if visited >= max {
                    return Some(e.key.to_boxed());
                }
            }
            // SAFETY: leaves are freed only by `Drop`.
            let leaf = unsafe { next.as_ref() }?;
            (snap_leaf, next) = Self::read_whole(leaf, &g);
        }
    }

    /// Like [`Olc::collect_range`] in descending key order.
    pub fn collect_range_rev(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) -> Option<Box<[u8]>> {
        if bounds_empty(lo, hi) || max == 0 {
            return None;
        }
        let g = epoch::pin();
        let mut visited = 0;
        // Later steps: strictly below the previous leaf's lower bound.
        let mut upper: Option<Box<[u8]>> = None;
        loop {
            let bound = match (&upper, hi) {
                (Some(u), _) => Bound::Excluded(&u[..]),
                (None, b) => b,
            };
            let probe = match bound {
                Bound::Included(k) | Bound::Excluded(k) => Some(Probe::new(k)),
                Bound::Unbounded => None,
            };
            let t = match (&probe, bound) {
                (Some(p), Bound::Included(_)) => Target::Key(p, true),
                (Some(p), _) => Target::Key(p, false),
                (None, _) => Target::Last,
            };
            let (snap_leaf, low) = retry(|| {
                self.descend(t).and_then(|(leaf, ver, low)| {
                    let low = low.map(IKey::to_boxed);
                    Self::read_leaf(leaf, ver, |_| Some(0), &g).map(|(s, _)| (s, low))
                })
            });
            for e in snap_leaf.entries[..snap_leaf.n].iter().rev() {
                // SAFETY: loaded while pinned from a slot of a validated leaf read.
                let Some(e) = (unsafe { e.as_ref() }) else {
                    continue;
                };
                if past_hi(&e.key, bound) {
                    continue;
                }
                if below_lo(&e.key, lo) {
                    return None;
                }
                visited += 1;
                if let Some(v) = e.with_slot(|s| visible(s, snap)) {
                    out.push((e.key.to_boxed(), v));
                }
                if visited >= max {
                    return Some(e.key.to_boxed());
                }
            }
            let low = low?;
            if low_reaches(&low, lo) {
                return None;
            }
            upper = Some(low);
        }
    }

    /// Visits every key with its newest version, in key order (pinned one leaf at a
    /// time, so a long walk does not hold back reclamation).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &Version)) {
        let mut key = Vec::new();
        let mut leaf = retry(|| self.descend(Target::First)).0;
        loop {
            let g = epoch::pin();
            let (s, next) = Self::read_whole(leaf, &g);
            for e in &s.entries[..s.n] {
                // SAFETY: loaded while pinned from a slot of a validated leaf read.
                if let Some(e) = unsafe { e.as_ref() } {
                    e.key.write_to(&mut key);
                    e.with_slot(|s| f(&key, &s.cur));
                }
            }
            drop(g);
            // SAFETY: leaves are freed only by `Drop`.
            match unsafe { next.as_ref() } {
                Some(l) => leaf = l,
                None => return,
            }
        }
    }

    /// Number of keys (tombstones included), for statistics: the sum of the leaves'
    /// counts along the leaf chain. Only each leaf's header line is read (not its
    /// entries), so a stats call on a 4 M-key index costs ~100 K leaf reads instead of
    /// 4 M entry reads (the benchmark sampler calls it once a second; it was a fifth
    /// of a 2-thread load's samples). Under concurrent writes the sum is a moment's
    /// approximation: each count is read with a validated version, but leaves are
    /// read one after another.
    pub fn len(&self) -> usize {
        let mut n = 0;
        let mut leaf = retry(|| self.descend(Target::First)).0;
        loop {
            let (count, next) = retry(|| {
                let ver = leaf.h.lock.read()?;
                let count = leaf.len();
                let next = leaf.next.load(Ordering::Acquire);
                leaf.h.lock.check(ver).then_some((count, next))
            });
            n += count;
            // SAFETY: leaves are freed only by `Drop`.
            match unsafe { next.as_ref() } {
                Some(l) => leaf = l,
                None => return n,
            }
        }
    }

    /// True when no key is present.
    pub fn is_empty(&self) -> bool {
        // With `max` 1 the walk stops (returning the key) at the first key it visits.
        self.collect_range(
            Bound::Unbounded,
            Bound::Unbounded,
            u64::MAX,
            1,
            &mut Vec::new(),
        )
        .is_none()
    }
}
