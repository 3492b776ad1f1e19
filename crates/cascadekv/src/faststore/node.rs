//! The nodes of the FastStore B-link tree ([`super::tree`]).
//!
//! A [`Leaf`] keeps up to [`LEAF_CAP`] entries in insertion order with a key-order
//! permutation (`order`), and, inline beside its lock, each key's 4 bytes after the
//! leaf's common prefix: a search is one branchless pass over those integers, whose
//! cache misses overlap, and only keys whose 4 bytes tie are compared in full. An
//! [`InnerNode`] node is immutable once published and is laid out the same way for its
//! separators, with 8 bytes each. Both strip a common prefix of up to 32 bytes so keys
//! like YCSB's `user000…` still compare as integers.
//!
//! Why 4 bytes in a leaf: a put or get of a key not in cache streams the leaf's whole
//! `pre` array (every leaf line is cold at 4M keys), so its size is most of the search's
//! cost; 4 bytes halve it (1 KiB for 256 entries). Index alone (`index_candidates
//! --candidates d`, 2M keys, three alternating pairs, 8 B keys): load 1.64 / 1.42 / 1.71
//! → 2.69 / 1.68 / 1.90 Mops/s, heap 129 → 123 B/key; with 24 B YCSB keys, whose
//! 4-byte slices tie a little more often, equal within noise (139 B/key against 145).
//!
//! Thread-safety: a `Leaf` is only touched under its `RwLock`; `InnerNode` nodes are
//! immutable and shared by `Arc`.

use std::ops::Bound;
use std::sync::Arc;

use parking_lot::RwLock;

use super::ikey::{slice_at, IKey, Probe};
use super::version::Version;
use super::PutOutcome;
use crate::epoch::Snapshots;

/// Entries per leaf. Every split copies the inner path above the leaf (immutable inner
/// nodes, `index.rs`), so splits were 29 % of a put's time at 64 (perf of fillrandom,
/// 8-byte keys). 256 (the most a `u8` permutation can name) measured fillrandom 1.13-1.81
/// → 2.37-2.52 Mops/s (engine) and 0.96-1.43 → 1.87-2.08 (FastStore only), with reads
/// unchanged and about 4 % less heap: the longer linear scan of `pre` streams through
/// adjacent lines.
pub const LEAF_CAP: usize = 256;
// Entry positions in a leaf are stored as `u8`.
const _: () = assert!(LEAF_CAP <= 256);

/// Entry number `i` (< [`LEAF_CAP`]) as a leaf's `order` array stores it.
#[expect(
    clippy::cast_possible_truncation,
    reason = "i < LEAF_CAP <= 256 (asserted above)"
)]
pub(super) const fn slot_no(i: usize) -> u8 {
    i as u8
}
/// The 4 bytes of an 8-byte slice that a leaf keeps per key: its high half, so the
/// integers still order as the keys do, and equal ones fall back to full keys.
const fn leaf_slice(s: u64) -> u32 {
    (s >> 32) as u32
}

/// Children per inner node.
pub const INNER_CAP: usize = 64;
/// Longest common prefix a node strips before taking its inline slices.
pub(super) const MAX_SKIP: usize = 32;

/// Estimated DRAM per entry for capacity accounting: prefix + key + versions, divided
/// by the ~70% fill of a B-tree under random inserts, plus lock and node headers.
pub const ENTRY_OVERHEAD: usize = 128;

#[derive(Debug)]
pub(super) struct SlotState {
    pub(super) cur: Version,
    /// Older versions, newest first; kept only while a snapshot needs them.
    #[expect(
        clippy::box_collection,
        reason = "8 bytes instead of 24 per key: the vector is rarely present"
    )]
    pub(super) older: Option<Box<Vec<Version>>>,
}

/// A key and its versions.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) key: IKey,
    pub(super) slot: SlotState,
}

/// Entries sit in insertion order (an insert moves nothing but one byte per entry of
/// `order`); `order` lists entry indices in key order (Masstree's permutation idea).
/// Prefixes and the permutation live inline, in the same allocation as the lock, so
/// a search costs one cache-miss chain; `entries` is touched only on a prefix match.
#[derive(Debug)]
pub(super) struct Leaf {
    pub(super) len: usize,
    /// Every key here starts with `pfx[..skip]`; `pre` holds each key's 4 bytes after it
    /// (the high half of its 8-byte slice, [`leaf_slice`]).
    pub(super) skip: usize,
    pub(super) pfx: [u8; MAX_SKIP],
    pub(super) pre: [u32; LEAF_CAP],
    pub(super) order: [u8; LEAF_CAP],
    pub(super) entries: Vec<Entry>,
    /// Every key here is `< high`; `None` = no bound.
    pub(super) high: Option<IKey>,
    pub(super) next: Option<Arc<LeafNode>>,
}

pub(super) type LeafNode = RwLock<Leaf>;

/// Immutable inner node; separator prefixes and children inline.
#[derive(Debug)]
pub(super) struct InnerNode {
    /// Every separator starts with `pfx[..skip]`.
    pub(super) skip: usize,
    pub(super) pfx: [u8; MAX_SKIP],
    /// `pres[i]` = the 8 bytes of `seps[i]` after the common prefix.
    pub(super) pres: [u64; INNER_CAP],
    /// `seps[i]` is the smallest key of `kids[i + 1]`'s range.
    pub(super) seps: Vec<IKey>,
    pub(super) kids: [Option<Node>; INNER_CAP],
}

#[derive(Debug, Clone)]
pub(super) enum Node {
    Inner(Arc<InnerNode>),
    Leaf(Arc<LeafNode>),
}

impl Leaf {
    pub(super) fn empty() -> Self {
        Leaf {
            len: 0,
            skip: 0,
            pfx: [0; MAX_SKIP],
            pre: [0; LEAF_CAP],
            order: [0; LEAF_CAP],
            entries: Vec::with_capacity(LEAF_CAP),
            high: None,
            next: None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn order(&self) -> &[u8] {
        &self.order[..self.len]
    }

    /// Entry index of the `pos`-th key in key order.
    pub(super) fn at(&self, pos: usize) -> usize {
        self.order[pos] as usize
    }

    pub(super) fn key(&self, e: usize) -> &IKey {
        &self.entries[e].key
    }

    /// Finds `p`: `Ok(entry)` if present, `Err(pos)` = its insert position in key
    /// order. One branchless pass over the inline prefixes (vectorized; its cache
    /// misses overlap instead of forming a binary search's dependent chain); full keys
    /// are only compared among entries with an equal prefix.
    pub(super) fn find(&self, p: &Probe<'_>) -> Result<usize, usize> {
        let Some(x) = strip(p.key, &self.pfx[..self.skip]) else {
            return Err(0);
        };
        let Some(x) = x else {
            return Err(self.len);
        };
        let x = leaf_slice(x);
        let pre = &self.pre[..self.len];
        let lo = pre.iter().filter(|&&v| v < x).count();
        let run = pre.iter().filter(|&&v| v == x).count();
        if run == 0 {
            return Err(lo);
        }
        match self.order[lo..lo + run].binary_search_by(|&e| self.key(e as usize).cmp_probe(p)) {
            Ok(i) => Ok(self.at(lo + i)),
            Err(i) => Err(lo + i),
        }
    }

    /// Position in key order of entry `e`.
    pub(super) fn pos_of(&self, e: usize) -> usize {
        self.order()
            .iter()
            .position(|&x| x as usize == e)
            .unwrap_or(0)
    }

    pub(super) fn insert(&mut self, pos: usize, key: IKey, slot: SlotState) {
        let e = self.entries.len();
        if self.len == 0 {
            self.set_prefix(&key, key.len());
        } else if key.common_prefix(&self.pfx[..self.skip], self.skip) < self.skip {
            // The new key does not share the prefix: shorten it, re-slice the rest.
            let n = key.common_prefix(&self.pfx[..self.skip], self.skip);
            self.skip = n;
            for i in 0..self.len {
                self.pre[i] = leaf_slice(self.entries[i].key.slice_at(n));
            }
        }
        self.pre[e] = leaf_slice(key.slice_at(self.skip));
        self.entries.push(Entry { key, slot });
        self.order.copy_within(pos..self.len, pos + 1);
        self.order[pos] = slot_no(e);
        self.len += 1;
    }

    /// Takes the common prefix of `min` (and a key `n` bytes long sharing it).
    pub(super) fn set_prefix(&mut self, min: &IKey, n: usize) {
        self.skip = n.min(MAX_SKIP).min(min.len());
        min.copy_prefix(&mut self.pfx[..self.skip]);
    }

    /// Recomputes prefix and slices from the entries (after a split).
    pub(super) fn reslice(&mut self) {
        if self.len == 0 {
            self.skip = 0;
            return;
        }
        let (first, last) = (self.at(0), self.at(self.len - 1));
        let lb = self.entries[last].key.to_boxed();
        let n = self.entries[first].key.common_prefix(&lb, MAX_SKIP);
        let min = self.entries[first].key.clone();
        self.set_prefix(&min, n);
        for i in 0..self.len {
            self.pre[i] = leaf_slice(self.entries[i].key.slice_at(self.skip));
        }
    }

    /// Moves the upper half (in key order) into a new leaf; both halves come out
    /// compacted in key order.
    pub(super) fn split_off_upper(&mut self) -> Leaf {
        let mid = self.len / 2;
        let mut lower = Leaf::empty();
        let mut upper = Leaf::empty();
        let mut entries: Vec<Option<Entry>> = std::mem::take(&mut self.entries)
            .into_iter()
            .map(Some)
            .collect();
        for (pos, &e) in self.order().iter().enumerate() {
            let e = e as usize;
            let dst = if pos < mid { &mut lower } else { &mut upper };
            if let Some(entry) = entries[e].take() {
                let n = dst.len;
                dst.order[n] = slot_no(n);
                dst.entries.push(entry);
                dst.len += 1;
            }
        }
        upper.high = self.high.take();
        upper.next = self.next.take();
        self.len = lower.len;
        self.order = lower.order;
        self.entries = lower.entries;
        self.reslice();
        upper.reslice();
        upper
    }

    /// True if `p` belongs to a leaf further right.
    pub(super) fn beyond(&self, p: &Probe<'_>) -> bool {
        self.high
            .as_ref()
            .is_some_and(|h| h.cmp_probe(p) != std::cmp::Ordering::Greater)
    }

    /// Position (in key order) of the first entry inside the lower bound.
    pub(super) fn lower(&self, lo: Bound<&[u8]>) -> usize {
        match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) => match self.find(&Probe::new(k)) {
                Ok(e) => self.pos_of(e),
                Err(i) => i,
            },
            Bound::Excluded(k) => match self.find(&Probe::new(k)) {
                Ok(e) => self.pos_of(e) + 1,
                Err(i) => i,
            },
        }
    }
}

impl InnerNode {
    /// Builds a node from `seps` and `kids` (`kids.len() == seps.len() + 1 <= INNER_CAP`).
    pub(super) fn new(seps: Vec<IKey>, kids: Vec<Node>) -> Self {
        let mut pfx = [0u8; MAX_SKIP];
        let skip = match (seps.first(), seps.last()) {
            (Some(a), Some(b)) => {
                let n = a.common_prefix_key(b).min(MAX_SKIP);
                a.copy_prefix(&mut pfx[..n]);
                n
            }
            _ => 0,
        };
        let mut pres = [0u64; INNER_CAP];
        for (p, s) in pres.iter_mut().zip(&seps) {
            *p = s.slice_at(skip);
        }
        let mut arr: [Option<Node>; INNER_CAP] = std::array::from_fn(|_| None);
        for (slot, k) in arr.iter_mut().zip(kids) {
            *slot = Some(k);
        }
        InnerNode {
            skip,
            pfx,
            pres,
            seps,
            kids: arr,
        }
    }

    pub(super) fn kid(&self, i: usize) -> Option<&Node> {
        self.kids.get(i).and_then(Option::as_ref)
    }

    pub(super) fn kids_vec(&self) -> Vec<Node> {
        self.kids.iter().map_while(Option::clone).collect()
    }

    #[inline]
    pub(super) fn child_for(&self, p: &Probe<'_>) -> usize {
        // Number of separators <= p: a branchless count over the sorted prefixes, then
        // full keys among equal prefixes.
        let n = self.seps.len();
        let Some(x) = strip(p.key, &self.pfx[..self.skip]) else {
            return 0;
        };
        let Some(x) = x else {
            return n;
        };
        let pres = &self.pres[..n];
        let lo = pres.iter().filter(|&&v| v < x).count();
        let run = pres[lo..].iter().take_while(|&&v| v == x).count();
        lo + self.seps[lo..lo + run]
            .partition_point(|s| s.cmp_probe(p) != std::cmp::Ordering::Greater)
    }

    pub(super) fn child_for_key(&self, k: &IKey) -> usize {
        self.seps
            .partition_point(|s| s.cmp_key(k) != std::cmp::Ordering::Greater)
    }
}

/// Compares `key` with a node's common prefix `pfx`: `None` if the key sorts before
/// every key with that prefix, `Some(None)` if after, else `Some(Some(slice))` with
/// the key's 8 bytes after the prefix.
#[allow(clippy::option_option)]
pub(super) fn strip(key: &[u8], pfx: &[u8]) -> Option<Option<u64>> {
    let n = pfx.len().min(key.len());
    match key[..n].cmp(&pfx[..n]) {
        std::cmp::Ordering::Less => None,
        std::cmp::Ordering::Greater => Some(None),
        std::cmp::Ordering::Equal if key.len() < pfx.len() => None,
        std::cmp::Ordering::Equal => Some(Some(slice_at(key, pfx.len()))),
    }
}

pub(super) fn first_leaf(i: &InnerNode) -> Arc<LeafNode> {
    let mut n = i.kid(0);
    while let Some(node) = n {
        match node {
            Node::Leaf(l) => return l.clone(),
            Node::Inner(i) => n = i.kid(0),
        }
    }
    Arc::new(RwLock::new(Leaf::empty()))
}

pub(super) fn visible(st: &SlotState, snap: u64) -> Option<Version> {
    visible_ref(st, snap).cloned()
}

/// The newest version of `st` with epoch `<= snap`, borrowed.
pub(super) fn visible_ref(st: &SlotState, snap: u64) -> Option<&Version> {
    if st.cur.epoch <= snap {
        return Some(&st.cur);
    }
    st.older.as_ref()?.iter().find(|v| v.epoch <= snap)
}

/// Installs `v` as the key's newest version if its LSN is newer (FluidKV Algorithm 1),
/// keeping the replaced one while a snapshot can see it. An older `v` (a late arrival:
/// a racing writer of the same key, or the hybrid index's queued updates, which reach
/// the ordered part out of order across queues) changes nothing current but is kept
/// in the version chain if a live snapshot can see it (`keep_late`).
pub(super) fn update(st: &mut SlotState, v: Version, snaps: &Snapshots) -> PutOutcome {
    if st.cur.lsn >= v.lsn {
        if st.cur.lsn > v.lsn {
            keep_late(st, v, snaps);
        }
        return PutOutcome::Stale;
    }
    let old = std::mem::replace(&mut st.cur, v);
    if snaps.needed(old.epoch, st.cur.epoch) {
        st.older.get_or_insert_with(Box::default).insert(0, old);
    }
    prune(st, snaps);
    PutOutcome::Replaced
}

/// Keeps `v`, older than `st.cur`, in the chain (ordered newest first by LSN) if a live
/// snapshot sees it: version `v` is visible to snapshots in `[v.epoch, epoch of the
/// next newer version)`. Without this, a write stamped before a snapshot that lost the
/// race to a newer write of the same key stamped after it would vanish from the
/// snapshot.
fn keep_late(st: &mut SlotState, v: Version, snaps: &Snapshots) {
    let older = st.older.as_deref().map_or(&[][..], |o| &o[..]);
    let pos = older
        .iter()
        .position(|o| o.lsn <= v.lsn)
        .unwrap_or(older.len());
    if older.get(pos).is_some_and(|o| o.lsn == v.lsn) {
        return;
    }
    let newer_epoch = pos
        .checked_sub(1)
        .and_then(|i| older.get(i))
        .map_or(st.cur.epoch, |o| o.epoch);
    if !snaps.needed(v.epoch, newer_epoch) {
        return;
    }
    st.older.get_or_insert_with(Box::default).insert(pos, v);
    prune(st, snaps);
}

/// Drops older versions no live snapshot can reach: version i is visible to snapshots
/// in `[epoch_i, epoch of the next newer version)`.
fn prune(st: &mut SlotState, snaps: &Snapshots) {
    let Some(mut older) = st.older.take() else {
        return;
    };
    let mut newer_epoch = st.cur.epoch;
    older.retain(|o| {
        let keep = snaps.needed(o.epoch, newer_epoch);
        if keep {
            newer_epoch = o.epoch;
        }
        keep
    });
    if !older.is_empty() {
        st.older = Some(older);
    }
}
