//! The concurrent ordered DRAM index of a FastStore: a B-link tree with FluidKV's LSN
//! validation (§5.1, Algorithm 1 `PutValidate`).
//!
//! No longer the engine's index (that is [`super::olc`]): it remains as the baseline of
//! `index_candidates` (`internals::BLinkTree`), so it keeps only what that benchmark
//! calls — put, get, forward ranges — and the walks its tests use.
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

use super::ikey::{bounds_empty, past_hi, IKey, Probe};
use super::node::{
    first_leaf, update, visible, InnerNode, Leaf, LeafNode, Node, SlotState, INNER_CAP, LEAF_CAP,
};
use super::version::Version;
use crate::epoch::Snapshots;

/// Outcome of [`Tree::put_validate`].
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
pub struct Tree {
    root: ArcSwap<Node>,
    smo: Mutex<()>,
}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    /// An empty index.
    #[must_use]
    pub fn new() -> Self {
        Tree {
            root: ArcSwap::from_pointee(Node::Leaf(Arc::new(RwLock::new(Leaf::empty())))),
            smo: Mutex::new(()),
        }
    }

    /// The leaf whose range should hold `p` in the tree under `root`, borrowed from it:
    /// a point operation holds the root's guard and touches no reference count unless
    /// a split sends it right (perf of fillrandom: the `Arc` clone and drop per put was
    /// about 7 % of the load, its decrement the hottest instruction of `put_validate`).
    /// `None` only for a malformed inner node (a child slot missing).
    fn descend<'r>(root: &'r Node, p: &Probe<'_>) -> Option<&'r Arc<LeafNode>> {
        let mut n = root;
        loop {
            match n {
                Node::Leaf(l) => return Some(l),
                Node::Inner(i) => n = i.kid(i.child_for(p))?,
            }
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
            let next = g.next.clone();
            cur = next;
        }
        n
    }

    /// True when empty (cheap: a tree with inner nodes has non-empty leaves).
    pub fn is_empty(&self) -> bool {
        match &**self.root.load() {
            Node::Leaf(l) => l.read().len() == 0,
            Node::Inner(_) => false,
        }
    }

    /// Algorithm 1 `PutValidate`: install `v` unless the key already holds a newer LSN.
    pub fn put_validate(&self, key: &[u8], v: Version, snaps: &Snapshots) -> PutOutcome {
        let p = Probe::new(key);
        let mut v = Some(v);
        loop {
            let root = self.root.load();
            let fallback;
            let leaf = if let Some(l) = Self::descend(&root, &p) {
                l
            } else {
                fallback = self.leaf_for(Some(&p));
                &fallback
            };
            let g = leaf.write();
            let next = match &g.next {
                Some(n) if g.beyond(&p) => n.clone(),
                _ => match self.install(leaf, g, &p, &mut v, snaps) {
                    Some(done) => return done,
                    None => continue,
                },
            };
            // A split moved the key right since `root` was read: follow the links.
            drop(g);
            let mut leaf = next;
            let done = loop {
                let g = leaf.write();
                let next = match &g.next {
                    Some(n) if g.beyond(&p) => n.clone(),
                    _ => break self.install(&leaf, g, &p, &mut v, snaps),
                };
                drop(g);
                leaf = next;
            };
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// Installs `v` in the write-locked leaf `g` that covers `p`; `None` if the leaf
    /// was full and has been split (the caller retries from the root).
    fn install(
        &self,
        leaf: &Arc<LeafNode>,
        mut g: parking_lot::RwLockWriteGuard<'_, Leaf>,
        p: &Probe<'_>,
        v: &mut Option<Version>,
        snaps: &Snapshots,
    ) -> Option<PutOutcome> {
        match g.find(p) {
            Ok(e) => Some(match v.take() {
                Some(v) => update(&mut g.entries[e].slot, v, snaps),
                None => PutOutcome::Stale,
            }),
            Err(pos) if g.len() < LEAF_CAP => {
                let Some(v) = v.take() else {
                    return Some(PutOutcome::Stale);
                };
                let slot = SlotState {
                    cur: v,
                    older: None,
                };
                g.insert(pos, IKey::new(p.key), slot);
                Some(PutOutcome::Inserted)
            }
            Err(_) => {
                self.split(leaf, g);
                None
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
        let mut path: Vec<(Arc<InnerNode>, usize)> = Vec::new();
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
                replacement = Some(Node::Inner(Arc::new(InnerNode::new(seps, kids))));
                if let Some(up) = up {
                    let right = InnerNode::new(right_seps, right_kids);
                    carry = Some((up, Node::Inner(Arc::new(right))));
                }
            } else {
                replacement = Some(Node::Inner(Arc::new(InnerNode::new(seps, kids))));
            }
        }
        let new_root = match (replacement, carry) {
            (Some(r), None) => r,
            (left, Some((s, k))) => {
                let left = left.unwrap_or_else(|| Node::Leaf(node.clone()));
                Node::Inner(Arc::new(InnerNode::new(vec![s], vec![left, k])))
            }
            (None, None) => return,
        };
        self.root.store(Arc::new(new_root));
        drop(smo);
    }

    /// The newest version of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Version> {
        self.read_key(key, |s| Some(s.cur.clone()))
    }

    /// Calls `f` with `key`'s versions while its leaf is read-locked.
    pub(super) fn read_key<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&SlotState) -> Option<R>,
    ) -> Option<R> {
        let p = Probe::new(key);
        let root = self.root.load();
        let g = Self::descend(&root, &p)?.read();
        if !g.beyond(&p) {
            let e = g.find(&p).ok()?;
            return f(&g.entries[e].slot);
        }
        // A split moved the key right since `root` was read: follow the links.
        let mut leaf = g.next.clone()?;
        drop(g);
        loop {
            let g = leaf.read();
            if !g.beyond(&p) {
                let e = g.find(&p).ok()?;
                return f(&g.entries[e].slot);
            }
            let next = g.next.clone()?;
            drop(g);
            leaf = next;
        }
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
            let next = g.next.clone();
            cur = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::faststore::version::ver;

    #[test]
    fn many_keys_split_into_a_deep_tree_and_stay_ordered() {
        let s = Snapshots::default();
        let i = Tree::new();
        let mut model = BTreeMap::new();
        let mut x: u64 = 7;
        // Thousands of leaves at LEAF_CAP = 256: inner nodes split too.
        for n in 0..400_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 20) as usize;
            let k: Vec<u8> = (0..len).map(|j| x.to_le_bytes()[j % 8] % 4).collect();
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
        let want: Vec<_> = model
            .range(lo.clone()..hi.clone())
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(
            out.into_iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(),
            want
        );
    }

    #[test]
    fn long_shared_prefixes_and_prefix_breaking_inserts() {
        let s = Snapshots::default();
        let i = Tree::new();
        let mut model = BTreeMap::new();
        let mut n = 0u64;
        // YCSB-style keys, keys sharing 40 bytes, short keys that break prefixes, then
        // keys whose 4 bytes after a leaf's prefix tie in long runs (`a-sa…`, `b-sa…`:
        // a leaf spanning two first letters strips no prefix).
        for round in 0..4 {
            for j in 0..3000u64 {
                let k = match round {
                    0 => format!("user{:020}", j * 7919 % 100_000).into_bytes(),
                    1 => format!("{}{j:06}", "p".repeat(40)).into_bytes(),
                    2 => format!("user{}", j % 97).into_bytes(),
                    _ => format!(
                        "{}-same-{:06}",
                        ["a", "b", "c"][(j % 3) as usize],
                        j * 31 % 5000
                    )
                    .into_bytes(),
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
        // Absent keys whose leaf slices tie with present ones.
        for absent in [
            &b"a-same-999999"[..],
            b"b-same-000001x",
            b"c-same-",
            b"a-same",
        ] {
            assert!(!model.contains_key(absent));
            assert!(
                i.get(absent).is_none(),
                "{:?}",
                String::from_utf8_lossy(absent)
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
            b"a-same-",
            b"b-same-002500",
            b"b-same-0025001",
            b"c-samf",
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
    fn racing_writers_and_readers_with_splits() {
        // 50 000 keys: hundreds of leaf splits and inner-node splits while the
        // threads race.
        const KEYS: u64 = 50_000;
        const PUTS: u64 = 60_000;
        let s = Arc::new(Snapshots::default());
        let i = Arc::new(Tree::new());
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let (s, i) = (s.clone(), i.clone());
                std::thread::spawn(move || {
                    for n in 0..PUTS {
                        let k = (n * 7919 % KEYS).to_be_bytes();
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
        assert_eq!(i.len() as u64, KEYS);
        // The newest LSN of each key: thread 3's last put of it.
        let mut max = std::collections::HashMap::new();
        for n in 0..PUTS {
            max.insert(n * 7919 % KEYS, n * 4 + 4);
        }
        for k in 0..KEYS {
            assert_eq!(
                i.get(&k.to_be_bytes()).map(|v| v.lsn),
                max.get(&k).copied(),
                "key {k}"
            );
        }
    }
}
