//! The concurrent ordered DRAM index of a FastStore: a B-link tree with FluidKV's LSN
//! validation (§5.1, Algorithm 1 `PutValidate`).
//!
//! Structure. Leaves hold up to [`LEAF_CAP`] sorted entries — key prefixes in their
//! own array (binary search touches a few cache lines), keys ([`IKey`]) and versions —
//! behind one `RwLock` per leaf. Each leaf knows its exclusive upper bound (`high`) and
//! its right sibling (`next`), so a reader that reaches a leaf through a stale path
//! moves right (Lehman & Yao's B-link rule). Inner nodes are immutable: a split copies
//! the path above the leaf (at most a few nodes of [`INNER_CAP`] entries) and publishes
//! a new root with one atomic store. Splits are serialized by `smo`; they happen once
//! every ~`LEAF_CAP/2` inserts.
//!
//! Validation. A put locks the key's leaf and replaces the current version only if its
//! LSN is newer, so with writers racing on one key the newest LSN wins and the index
//! always agrees with what log replay would rebuild. Older versions stay only while a
//! snapshot needs them.
//!
//! Thread-safety: all methods take `&self`; any thread may call them. Lock order is
//! leaf → `smo`: a splitter takes `smo` while holding its leaf, and while holding `smo`
//! never waits for a leaf lock (it releases its leaf, then copies inner nodes). Entries
//! are never removed (deletes are tombstones), and the whole index is dropped only
//! when no reader can reach it.

use std::ops::Bound;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};

use super::ikey::{slice_at, IKey, Probe};
use super::version::Version;
use crate::snapshot::Snapshots;

/// Entries per leaf.
pub const LEAF_CAP: usize = 64;
/// Children per inner node.
pub const INNER_CAP: usize = 64;
/// Longest common prefix a node strips before taking its inline 8-byte slices.
const MAX_SKIP: usize = 32;

/// Estimated DRAM per entry for capacity accounting: prefix + key + versions, divided
/// by the ~70% fill of a B-tree under random inserts, plus lock and node headers.
pub const ENTRY_OVERHEAD: usize = 128;

#[derive(Debug)]
struct SlotState {
    cur: Version,
    /// Older versions, newest first; kept only while a snapshot needs them.
    #[expect(
        clippy::box_collection,
        reason = "8 bytes instead of 24 per key: the vector is rarely present"
    )]
    older: Option<Box<Vec<Version>>>,
}

/// A key and its versions.
#[derive(Debug)]
struct Entry {
    key: IKey,
    slot: SlotState,
}

/// Entries sit in insertion order (an insert moves nothing but one byte per entry of
/// `order`); `order` lists entry indices in key order (Masstree's permutation idea).
/// Prefixes and the permutation live inline, in the same allocation as the lock, so
/// a search costs one cache-miss chain; `entries` is touched only on a prefix match.
#[derive(Debug)]
struct Leaf {
    len: usize,
    /// Every key here starts with `pfx[..skip]`; `pre` holds each key's 8 bytes after it.
    skip: usize,
    pfx: [u8; MAX_SKIP],
    pre: [u64; LEAF_CAP],
    order: [u8; LEAF_CAP],
    entries: Vec<Entry>,
    /// Every key here is `< high`; `None` = no bound.
    high: Option<IKey>,
    next: Option<Arc<LeafNode>>,
}

type LeafNode = RwLock<Leaf>;

/// Immutable inner node; separator prefixes and children inline.
#[derive(Debug)]
struct Inner {
    /// Every separator starts with `pfx[..skip]`.
    skip: usize,
    pfx: [u8; MAX_SKIP],
    /// `pres[i]` = the 8 bytes of `seps[i]` after the common prefix.
    pres: [u64; INNER_CAP],
    /// `seps[i]` is the smallest key of `kids[i + 1]`'s range.
    seps: Vec<IKey>,
    kids: [Option<Node>; INNER_CAP],
}

#[derive(Debug, Clone)]
enum Node {
    Inner(Arc<Inner>),
    Leaf(Arc<LeafNode>),
}

/// Outcome of [`Index::put_validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The key was new to this index.
    Inserted,
    /// An older version was replaced.
    Replaced,
    /// A newer version was already there; nothing changed.
    Stale,
}

/// The index.
#[derive(Debug)]
pub struct Index {
    root: ArcSwap<Node>,
    smo: Mutex<()>,
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Leaf {
    fn empty() -> Self {
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

    fn len(&self) -> usize {
        self.len
    }

    fn order(&self) -> &[u8] {
        &self.order[..self.len]
    }

    /// Entry index of the `pos`-th key in key order.
    fn at(&self, pos: usize) -> usize {
        self.order[pos] as usize
    }

    fn key(&self, e: usize) -> &IKey {
        &self.entries[e].key
    }

    /// Finds `p`: `Ok(entry)` if present, `Err(pos)` = its insert position in key
    /// order. One branchless pass over the inline prefixes (vectorized; its cache
    /// misses overlap instead of forming a binary search's dependent chain); full keys
    /// are only compared among entries with an equal prefix.
    fn find(&self, p: &Probe<'_>) -> Result<usize, usize> {
        let Some(x) = strip(p.key, &self.pfx[..self.skip]) else {
            return Err(0);
        };
        let Some(x) = x else {
            return Err(self.len);
        };
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
    fn pos_of(&self, e: usize) -> usize {
        self.order()
            .iter()
            .position(|&x| x as usize == e)
            .unwrap_or(0)
    }

    fn insert(&mut self, pos: usize, key: IKey, slot: SlotState) {
        let e = self.entries.len();
        if self.len == 0 {
            self.set_prefix(&key, key.len());
        } else if key.common_prefix(&self.pfx[..self.skip], self.skip) < self.skip {
            // The new key does not share the prefix: shorten it, re-slice the rest.
            let n = key.common_prefix(&self.pfx[..self.skip], self.skip);
            self.skip = n;
            for i in 0..self.len {
                self.pre[i] = self.entries[i].key.slice_at(n);
            }
        }
        self.pre[e] = key.slice_at(self.skip);
        self.entries.push(Entry { key, slot });
        self.order.copy_within(pos..self.len, pos + 1);
        self.order[pos] = e as u8;
        self.len += 1;
    }

    /// Takes the common prefix of `min` (and a key `n` bytes long sharing it).
    fn set_prefix(&mut self, min: &IKey, n: usize) {
        self.skip = n.min(MAX_SKIP).min(min.len());
        min.copy_prefix(&mut self.pfx[..self.skip]);
    }

    /// Recomputes prefix and slices from the entries (after a split).
    fn reslice(&mut self) {
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
            self.pre[i] = self.entries[i].key.slice_at(self.skip);
        }
    }

    /// Moves the upper half (in key order) into a new leaf; both halves come out
    /// compacted in key order.
    fn split_off_upper(&mut self) -> Leaf {
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
                dst.order[n] = n as u8;
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
    fn beyond(&self, p: &Probe<'_>) -> bool {
        self.high
            .as_ref()
            .is_some_and(|h| h.cmp_probe(p) != std::cmp::Ordering::Greater)
    }

    /// Position (in key order) of the first entry inside the lower bound.
    fn lower(&self, lo: Bound<&[u8]>) -> usize {
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

impl Inner {
    /// Builds a node from `seps` and `kids` (`kids.len() == seps.len() + 1 <= INNER_CAP`).
    fn new(seps: Vec<IKey>, kids: Vec<Node>) -> Self {
        let mut pfx = [0u8; MAX_SKIP];
        let skip = match (seps.first(), seps.last()) {
            (Some(a), Some(b)) => {
                let n = a.common_prefix(&b.to_boxed(), MAX_SKIP);
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
        Inner {
            skip,
            pfx,
            pres,
            seps,
            kids: arr,
        }
    }

    fn kid(&self, i: usize) -> Option<&Node> {
        self.kids.get(i).and_then(Option::as_ref)
    }

    fn kids_vec(&self) -> Vec<Node> {
        self.kids.iter().map_while(Option::clone).collect()
    }

    fn child_for(&self, p: &Probe<'_>) -> usize {
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

    fn child_for_key(&self, k: &IKey) -> usize {
        self.seps
            .partition_point(|s| s.cmp_key(k) != std::cmp::Ordering::Greater)
    }
}

/// Compares `key` with a node's common prefix `pfx`: `None` if the key sorts before
/// every key with that prefix, `Some(None)` if after, else `Some(Some(slice))` with
/// the key's 8 bytes after the prefix.
#[allow(clippy::option_option)]
fn strip(key: &[u8], pfx: &[u8]) -> Option<Option<u64>> {
    let n = pfx.len().min(key.len());
    match key[..n].cmp(&pfx[..n]) {
        std::cmp::Ordering::Less => None,
        std::cmp::Ordering::Greater => Some(None),
        std::cmp::Ordering::Equal if key.len() < pfx.len() => None,
        std::cmp::Ordering::Equal => Some(Some(slice_at(key, pfx.len()))),
    }
}

fn past_hi(k: &IKey, hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Unbounded => false,
        Bound::Included(h) => k.cmp_probe(&Probe::new(h)) == std::cmp::Ordering::Greater,
        Bound::Excluded(h) => k.cmp_probe(&Probe::new(h)) != std::cmp::Ordering::Less,
    }
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Index {
            root: ArcSwap::from_pointee(Node::Leaf(Arc::new(RwLock::new(Leaf::empty())))),
            smo: Mutex::new(()),
        }
    }

    /// The leaf whose range should hold `p` according to the current root (it may have
    /// split since; callers move right).
    fn leaf_for(&self, p: Option<&Probe<'_>>) -> Arc<LeafNode> {
        let root = self.root.load();
        let mut n: &Node = &root;
        loop {
            match n {
                Node::Leaf(l) => return l.clone(),
                Node::Inner(i) => {
                    let c = p.map_or(0, |p| i.child_for(p));
                    match i.kid(c) {
                        Some(k) => n = k,
                        None => return first_leaf(i),
                    }
                }
            }
        }
    }

    /// Number of keys (tombstones included). Walks the leaves: for statistics only.
    pub fn len(&self) -> usize {
        let mut n = 0;
        let mut cur = Some(self.leaf_for(None));
        while let Some(l) = cur {
            let g = l.read();
            n += g.len();
            cur = g.next.clone();
        }
        n
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Algorithm 1 `PutValidate`: install `v` unless the key already holds a newer LSN.
    pub fn put_validate(&self, key: &[u8], v: Version, snaps: &Snapshots) -> PutOutcome {
        let p = Probe::new(key);
        let mut v = Some(v);
        loop {
            let mut leaf = self.leaf_for(Some(&p));
            let mut g = leaf.write();
            while g.beyond(&p) {
                let Some(next) = g.next.clone() else { break };
                drop(g);
                leaf = next;
                g = leaf.write();
            }
            match g.find(&p) {
                Ok(e) => {
                    let Some(v) = v.take() else {
                        return PutOutcome::Stale;
                    };
                    return update(&mut g.entries[e].slot, v, snaps);
                }
                Err(pos) if g.len() < LEAF_CAP => {
                    let Some(v) = v.take() else {
                        return PutOutcome::Stale;
                    };
                    let slot = SlotState {
                        cur: v,
                        older: None,
                    };
                    g.insert(pos, IKey::new(key), slot);
                    return PutOutcome::Inserted;
                }
                Err(_) => {
                    self.split(&leaf, g);
                }
            }
        }
    }

    /// Splits the full leaf `node` (write-locked as `g`) and publishes the new sibling
    /// in the inner levels.
    fn split(&self, node: &Arc<LeafNode>, mut g: parking_lot::RwLockWriteGuard<'_, Leaf>) {
        let smo = self.smo.lock();
        let right = g.split_off_upper();
        let Some(sep) = right.entries.first().map(|e| e.key.clone()) else {
            return;
        };
        let right = Arc::new(RwLock::new(right));
        g.high = Some(sep.clone());
        g.next = Some(right.clone());
        drop(g);
        // Copy the path from the root to the leaf's parent, adding the separator.
        let root = self.root.load_full();
        let mut path: Vec<(Arc<Inner>, usize)> = Vec::new();
        let mut n = (*root).clone();
        while let Node::Inner(i) = n {
            // `sep` lies strictly inside the split leaf's old range, so descending by it
            // reaches that leaf (all earlier splits are published: we hold `smo`).
            let c = i.child_for_key(&sep);
            let next = i.kid(c).cloned();
            path.push((i, c));
            match next {
                Some(k) => n = k,
                None => break,
            }
        }
        let mut carry: Option<(IKey, Node)> = Some((sep, Node::Leaf(right)));
        let mut replacement: Option<Node> = None;
        for (inner, idx) in path.iter().rev() {
            let mut seps = inner.seps.clone();
            let mut kids = inner.kids_vec();
            if let Some(r) = replacement.take() {
                kids[*idx] = r;
            }
            if let Some((s, k)) = carry.take() {
                seps.insert(*idx, s);
                kids.insert(*idx + 1, k);
            }
            if kids.len() > INNER_CAP {
                let m = seps.len() / 2;
                let right_seps = seps.split_off(m + 1);
                let up = seps.pop();
                let right_kids = kids.split_off(m + 1);
                replacement = Some(Node::Inner(Arc::new(Inner::new(seps, kids))));
                if let Some(up) = up {
                    let right = Inner::new(right_seps, right_kids);
                    carry = Some((up, Node::Inner(Arc::new(right))));
                }
            } else {
                replacement = Some(Node::Inner(Arc::new(Inner::new(seps, kids))));
            }
        }
        let new_root = match (replacement, carry) {
            (Some(r), None) => r,
            (left, Some((s, k))) => {
                let left = left.unwrap_or_else(|| Node::Leaf(node.clone()));
                Node::Inner(Arc::new(Inner::new(vec![s], vec![left, k])))
            }
            (None, None) => return,
        };
        self.root.store(Arc::new(new_root));
        drop(smo);
    }

    /// Builds the tree bottom-up from `entries`, which must be sorted by key with no
    /// duplicates (recovery sorts the replayed records). Leaves are filled to 3/4 so
    /// that early inserts do not split at once. Replaces the contents of the index;
    /// call it before the index is shared.
    pub fn bulk_load(&self, entries: impl IntoIterator<Item = (IKey, Version)>) {
        let fill = LEAF_CAP * 3 / 4;
        let mut leaves: Vec<Leaf> = Vec::new();
        let mut cur = Leaf::empty();
        for (key, v) in entries {
            if cur.len == fill {
                leaves.push(std::mem::replace(&mut cur, Leaf::empty()));
            }
            let n = cur.len;
            cur.order[n] = n as u8;
            cur.entries.push(Entry {
                key,
                slot: SlotState {
                    cur: v,
                    older: None,
                },
            });
            cur.len += 1;
        }
        leaves.push(cur);
        // Link right to left so each leaf can point at its successor.
        let mut level: Vec<(Option<IKey>, Node)> = Vec::with_capacity(leaves.len());
        let mut next: Option<(IKey, Arc<LeafNode>)> = None;
        for mut leaf in leaves.into_iter().rev() {
            leaf.reslice();
            if let Some((low, node)) = next.take() {
                leaf.high = Some(low);
                leaf.next = Some(node);
            }
            let low = leaf.entries.first().map(|e| e.key.clone());
            let node = Arc::new(RwLock::new(leaf));
            if let Some(l) = &low {
                next = Some((l.clone(), node.clone()));
            }
            level.push((low, Node::Leaf(node)));
        }
        level.reverse();
        // Inner levels: groups of up to 3/4 of INNER_CAP children.
        let per = INNER_CAP * 3 / 4;
        while level.len() > 1 {
            let mut up = Vec::with_capacity(level.len() / per + 1);
            let mut it = level.into_iter().peekable();
            while it.peek().is_some() {
                let group: Vec<(Option<IKey>, Node)> = it.by_ref().take(per).collect();
                let low = group.first().and_then(|g| g.0.clone());
                let seps: Vec<IKey> = group.iter().skip(1).filter_map(|g| g.0.clone()).collect();
                let kids: Vec<Node> = group.into_iter().map(|g| g.1).collect();
                up.push((low, Node::Inner(Arc::new(Inner::new(seps, kids)))));
            }
            level = up;
        }
        if let Some((_, root)) = level.pop() {
            self.root.store(Arc::new(root));
        }
    }

    /// The newest version of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Version> {
        self.read_key(key, |s| Some(s.cur.clone()))
    }

    /// The newest version of `key` visible to snapshot `snap` (epoch `<= snap`).
    pub fn get_at(&self, key: &[u8], snap: u64) -> Option<Version> {
        self.read_key(key, |s| visible(s, snap))
    }

    fn read_key(
        &self,
        key: &[u8],
        f: impl FnOnce(&SlotState) -> Option<Version>,
    ) -> Option<Version> {
        let p = Probe::new(key);
        let mut leaf = self.leaf_for(Some(&p));
        let mut g = leaf.read();
        while g.beyond(&p) {
            let next = g.next.clone()?;
            drop(g);
            leaf = next;
            g = leaf.read();
        }
        let e = g.find(&p).ok()?;
        f(&g.entries[e].slot)
    }

    /// Visits up to `max` entries in `(lo, hi)`, appending each with the version it
    /// has at snapshot `snap` to `out` (keys with no version at `snap` are skipped).
    /// Returns the last key visited if it stopped because `max` was reached.
    pub fn collect_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) -> Option<Box<[u8]>> {
        if bounds_empty(lo, hi) {
            return None;
        }
        let start = match lo {
            Bound::Included(k) | Bound::Excluded(k) => Some(Probe::new(k)),
            Bound::Unbounded => None,
        };
        let mut leaf = self.leaf_for(start.as_ref());
        let mut visited = 0;
        let mut first = true;
        loop {
            let g = leaf.read();
            if let Some(p) = &start {
                if first && g.beyond(p) {
                    let next = g.next.clone()?;
                    drop(g);
                    leaf = next;
                    continue;
                }
            }
            let from = if first { g.lower(lo) } else { 0 };
            first = false;
            for pos in from..g.len() {
                let en = &g.entries[g.at(pos)];
                if past_hi(&en.key, hi) {
                    return None;
                }
                visited += 1;
                if let Some(v) = visible(&en.slot, snap) {
                    out.push((en.key.to_boxed(), v));
                }
                if visited >= max {
                    return Some(en.key.to_boxed());
                }
            }
            let next = g.next.clone()?;
            drop(g);
            leaf = next;
        }
    }

    /// Visits every key with its newest version, in key order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &Version)) {
        let mut cur = Some(self.leaf_for(None));
        while let Some(l) = cur {
            let g = l.read();
            for &e in g.order() {
                let en = &g.entries[e as usize];
                f(&en.key.to_boxed(), &en.slot.cur);
            }
            cur = g.next.clone();
        }
    }
}

fn first_leaf(i: &Inner) -> Arc<LeafNode> {
    let mut n = i.kid(0);
    while let Some(node) = n {
        match node {
            Node::Leaf(l) => return l.clone(),
            Node::Inner(i) => n = i.kid(0),
        }
    }
    Arc::new(RwLock::new(Leaf::empty()))
}

/// True when no key can lie between `lo` and `hi`.
pub fn bounds_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

fn visible(st: &SlotState, snap: u64) -> Option<Version> {
    if st.cur.epoch <= snap {
        return Some(st.cur.clone());
    }
    st.older.as_ref()?.iter().find(|v| v.epoch <= snap).cloned()
}

fn update(st: &mut SlotState, v: Version, snaps: &Snapshots) -> PutOutcome {
    if st.cur.lsn >= v.lsn {
        return PutOutcome::Stale;
    }
    let old = std::mem::replace(&mut st.cur, v);
    let keep_old = snaps.needed(old.epoch, st.cur.epoch);
    if keep_old || st.older.is_some() {
        let mut older = st.older.take().unwrap_or_default();
        if keep_old {
            older.insert(0, old);
        }
        // Drop versions no live snapshot can reach: version i is visible to snapshots
        // in [epoch_i, epoch of the next newer version).
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
    PutOutcome::Replaced
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faststore::version::Val;
    use std::collections::BTreeMap;

    fn ver(lsn: u64, epoch: u64, v: &[u8]) -> Version {
        Version {
            lsn,
            epoch,
            val: Val::inline(v),
        }
    }

    #[test]
    fn newest_lsn_wins_in_any_arrival_order() {
        let s = Snapshots::default();
        let i = Index::new();
        assert_eq!(
            i.put_validate(b"k", ver(5, 1, b"five"), &s),
            PutOutcome::Inserted
        );
        assert_eq!(
            i.put_validate(b"k", ver(3, 1, b"three"), &s),
            PutOutcome::Stale
        );
        assert_eq!(
            i.put_validate(b"k", ver(9, 1, b"nine"), &s),
            PutOutcome::Replaced
        );
        assert_eq!(i.get(b"k").map(|v| v.lsn), Some(9));
    }

    #[test]
    fn many_keys_split_into_a_deep_tree_and_stay_ordered() {
        let s = Snapshots::default();
        let i = Index::new();
        let mut model = BTreeMap::new();
        let mut x: u64 = 7;
        for n in 0..60_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 20) as usize;
            let k: Vec<u8> = (0..len).map(|j| (x >> (j % 8 * 8)) as u8 % 4).collect();
            i.put_validate(&k, ver(n + 1, 1, &n.to_le_bytes()), &s);
            model.insert(k, n);
        }
        assert_eq!(i.len(), model.len());
        let mut all = Vec::new();
        i.for_each(|k, v| all.push((k.to_vec(), v.lsn - 1)));
        assert_eq!(
            all,
            model
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect::<Vec<_>>()
        );
        for (k, v) in model.iter().step_by(97) {
            assert_eq!(i.get(k).map(|x| x.lsn - 1), Some(*v));
        }
        // Range with bounds in the middle, in batches.
        let lo = model.keys().nth(1000).cloned().unwrap_or_default();
        let hi = model.keys().nth(5000).cloned().unwrap_or_default();
        let mut out = Vec::new();
        let mut from = Bound::Included(lo.clone());
        loop {
            let b = match &from {
                Bound::Included(k) => Bound::Included(k.as_slice()),
                Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            };
            match i.collect_range(b, Bound::Excluded(&hi), u64::MAX, 333, &mut out) {
                Some(last) => from = Bound::Excluded(last.to_vec()),
                None => break,
            }
        }
        let want: Vec<_> = model.range(lo..hi).map(|(k, _)| k.clone()).collect();
        assert_eq!(
            out.into_iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(),
            want
        );
    }

    #[test]
    fn long_shared_prefixes_and_prefix_breaking_inserts() {
        let s = Snapshots::default();
        let i = Index::new();
        let mut model = BTreeMap::new();
        let mut n = 0u64;
        // YCSB-style keys, keys sharing 40 bytes, then short keys that break prefixes.
        for round in 0..3 {
            for j in 0..3000u64 {
                let k = match round {
                    0 => format!("user{:020}", j * 7919 % 100_000).into_bytes(),
                    1 => format!("{}{j:06}", "p".repeat(40)).into_bytes(),
                    _ => format!("user{}", j % 97).into_bytes(),
                };
                n += 1;
                i.put_validate(&k, ver(n, 1, &n.to_le_bytes()), &s);
                model.insert(k, n);
            }
        }
        let mut all = Vec::new();
        i.for_each(|k, v| all.push((k.to_vec(), v.lsn)));
        assert_eq!(
            all,
            model
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect::<Vec<_>>()
        );
        for (k, v) in &model {
            assert_eq!(
                i.get(k).map(|x| x.lsn),
                Some(*v),
                "{:?}",
                String::from_utf8_lossy(k)
            );
        }
        for probe in [
            &b"user"[..],
            b"",
            b"user5",
            b"pppp",
            b"q",
            b"user0000000000000000000",
            b"zzz",
        ] {
            let mut out = Vec::new();
            i.collect_range(
                Bound::Included(probe),
                Bound::Unbounded,
                u64::MAX,
                5,
                &mut out,
            );
            let want: Vec<_> = model
                .range(probe.to_vec()..)
                .take(5)
                .map(|(k, _)| k.clone())
                .collect();
            assert_eq!(
                out.into_iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(),
                want
            );
        }
    }

    #[test]
    fn bulk_load_then_insert_and_scan() {
        let s = Snapshots::default();
        for n in [0u64, 1, 47, 48, 49, 5000, 40_000] {
            let i = Index::new();
            let keys: Vec<Vec<u8>> = (0..n)
                .map(|j| format!("k{:08}", j * 2).into_bytes())
                .collect();
            i.bulk_load(
                keys.iter()
                    .enumerate()
                    .map(|(j, k)| (IKey::new(k), ver(j as u64 + 1, 0, b"v"))),
            );
            assert_eq!(i.len(), n as usize);
            for (j, k) in keys.iter().enumerate().step_by(7) {
                assert_eq!(i.get(k).map(|v| v.lsn), Some(j as u64 + 1));
            }
            // Odd keys go between the loaded ones and split the full leaves.
            for j in 0..n.min(3000) {
                let k = format!("k{:08}", j * 2 + 1).into_bytes();
                assert_eq!(
                    i.put_validate(&k, ver(1, 1, b"x"), &s),
                    PutOutcome::Inserted
                );
            }
            let mut all = Vec::new();
            i.for_each(|k, _| all.push(k.to_vec()));
            let mut want: Vec<Vec<u8>> = keys.clone();
            want.extend((0..n.min(3000)).map(|j| format!("k{:08}", j * 2 + 1).into_bytes()));
            want.sort();
            assert_eq!(all, want, "n = {n}");
        }
    }

    #[test]
    fn racing_writers_and_readers_with_splits() {
        let s = Arc::new(Snapshots::default());
        let i = Arc::new(Index::new());
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let (s, i) = (s.clone(), i.clone());
                std::thread::spawn(move || {
                    for n in 0..20_000u64 {
                        let k = (n * 7919 % 5000).to_be_bytes();
                        let lsn = n * 4 + t + 1;
                        i.put_validate(&k, ver(lsn, 1, &lsn.to_le_bytes()), &s);
                        if n % 3 == 0 {
                            assert!(i.get(&k).is_some());
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().is_ok());
        }
        assert_eq!(i.len(), 5000);
        for k in 0..5000u64 {
            let max = (0..20_000u64)
                .filter(|n| n * 7919 % 5000 == k)
                .map(|n| n * 4 + 4)
                .max();
            assert_eq!(i.get(&k.to_be_bytes()).map(|v| v.lsn), max, "key {k}");
        }
    }

    #[test]
    fn snapshots_keep_the_versions_they_see() {
        let s = Snapshots::default();
        let i = Index::new();
        i.put_validate(b"a", ver(1, s.write_epoch(), b"old"), &s);
        let snap = s.acquire();
        i.put_validate(b"a", ver(2, s.write_epoch(), b"new"), &s);
        i.put_validate(b"b", ver(3, s.write_epoch(), b"born later"), &s);
        assert_eq!(
            i.get_at(b"a", snap).map(|v| v.val),
            Some(Val::inline(b"old"))
        );
        assert_eq!(i.get_at(b"b", snap), None);
        assert_eq!(i.get(b"a").map(|v| v.val), Some(Val::inline(b"new")));
        s.release(snap);
        i.put_validate(b"a", ver(4, s.write_epoch(), b"newest"), &s);
        assert_eq!(i.get_at(b"a", snap).map(|v| v.lsn), None);
    }
}
