//! Writers of the optimistic index: Algorithm 1 put, in-place splits, remove.
//!
//! A put descends as a reader does (validating each node's version after reading its
//! child and the child's version: lock coupling without locks), then takes the one lock
//! it needs by upgrading the version it read — so whatever it read is still current.
//! Splits (Leis et al. 2016, §"B-tree"): a full leaf is split with its parent locked;
//! a full inner node is split on the way down, so a parent always has room for one
//! more separator and no split propagates upwards. The root is replaced only while the
//! old root is locked. Every conflict is a restart from the root.
//!
//! Thread-safety: writers change a node only while holding its lock (a `WriteGuard`
//! in scope); lock order is parent before child, and a writer that cannot upgrade a
//! version it read releases everything and restarts, so there is no deadlock.

use crossbeam_epoch::{self as epoch, Guard, Owned};

use super::entry::{apply, retire, Entry};
use super::node::{node_ref, shared_prefix, Header, Inner, Leaf, NodeRef};
use super::sync::{retry, Ordering};
use super::Olc;
use crate::epoch::Snapshots;
use crate::faststore::ikey::{IKey, Probe};
use crate::faststore::version::Version;
use crate::faststore::PutOutcome;

/// The parent a descent came through: node, the version read, child index taken.
type Parent<'t> = Option<(&'t Inner, u64, usize)>;

impl Olc {
    /// Algorithm 1 `PutValidate` (FluidKV §5.1): installs `v` unless `key` already
    /// holds a version with a newer or equal LSN (then `Stale`; an older version is
    /// still kept where a live snapshot can see it).
    pub fn put_validate(&self, key: &[u8], v: Version, snaps: &Snapshots) -> PutOutcome {
        let p = Probe::new(key);
        let g = epoch::pin();
        let mut v = Some(v);
        retry(|| self.try_put(&p, &mut v, snaps, &g))
    }

    /// The root and its version; `None` if it is locked or was replaced meanwhile.
    pub(super) fn read_root(&self) -> Option<(NodeRef<'_>, u64)> {
        let r = self.root.load(Ordering::Acquire);
        // SAFETY: `root` always holds a live node published with a release store;
        // nodes are freed only by `Drop`.
        let node = unsafe { node_ref(r) }?;
        let v = node.header().lock.read()?;
        (self.root.load(Ordering::Acquire) == r).then_some((node, v))
    }

    /// One attempt; `None` = restart.
    fn try_put(
        &self,
        p: &Probe<'_>,
        v: &mut Option<Version>,
        snaps: &Snapshots,
        g: &Guard,
    ) -> Option<PutOutcome> {
        let (mut node, mut ver) = self.read_root()?;
        let mut parent: Parent<'_> = None;
        loop {
            match node {
                NodeRef::Inner(inner) => {
                    let n = inner.len();
                    if n >= self.inner_cap {
                        self.split_inner(inner, ver, parent);
                        return None;
                    }
                    let c = inner.child_for(p, n, true)?;
                    let kid = inner.kid(c)?;
                    let kv = kid.header().lock.read()?;
                    if !inner.h.lock.check(ver) {
                        return None;
                    }
                    parent = Some((inner, ver, c));
                    (node, ver) = (kid, kv);
                }
                NodeRef::Leaf(leaf) => {
                    let n = leaf.len();
                    return match leaf.find(p, n, g)? {
                        Ok(pos) => {
                            let _w = leaf.h.lock.upgrade(ver)?;
                            let Some(nv) = v.take() else {
                                return Some(PutOutcome::Stale);
                            };
                            Some(replace(leaf, pos, nv, snaps, g))
                        }
                        Err(pos) if n < self.leaf_cap => {
                            let _w = leaf.h.lock.upgrade(ver)?;
                            let Some(nv) = v.take() else {
                                return Some(PutOutcome::Stale);
                            };
                            insert_at(leaf, pos, n, Entry::first(IKey::new(p.key), nv));
                            Some(PutOutcome::Inserted)
                        }
                        Err(_) => {
                            self.split_leaf(leaf, ver, parent, g);
                            None
                        }
                    };
                }
            }
        }
    }

    /// Splits the full inner node `node` (read at version `ver`) below `parent`, if
    /// neither changed since they were read.
    fn split_inner(&self, node: &Inner, ver: u64, parent: Parent<'_>) {
        if let Some((par, pv, c)) = parent {
            let Some(_pw) = par.h.lock.upgrade(pv) else {
                return;
            };
            let Some(_nw) = node.h.lock.upgrade(ver) else {
                return;
            };
            let (sep, right) = split_inner_node(node);
            par_insert(par, c, sep, right);
        } else {
            let Some(_nw) = node.h.lock.upgrade(ver) else {
                return;
            };
            let (sep, right) = split_inner_node(node);
            self.grow(std::ptr::from_ref(&node.h).cast_mut(), sep, right);
        }
    }

    /// Splits the full leaf `leaf` (read at version `ver`) below `parent`, if neither
    /// changed since they were read.
    fn split_leaf(&self, leaf: &Leaf, ver: u64, parent: Parent<'_>, g: &Guard) {
        if let Some((par, pv, c)) = parent {
            let Some(_pw) = par.h.lock.upgrade(pv) else {
                return;
            };
            let Some(_lw) = leaf.h.lock.upgrade(ver) else {
                return;
            };
            // The leaf's exclusive upper bound: the separator right of it.
            let high = if c < par.len() {
                par.sep(c)
            } else {
                // SAFETY: `high` is null or a separator, freed only by `Drop`.
                unsafe { par.high.load(Ordering::Relaxed).as_ref() }
            };
            if let Some((sep, right)) = split_leaf_node(leaf, high, g) {
                par_insert(par, c, sep, right);
            }
        } else {
            let Some(_lw) = leaf.h.lock.upgrade(ver) else {
                return;
            };
            if let Some((sep, right)) = split_leaf_node(leaf, None, g) {
                self.grow(std::ptr::from_ref(&leaf.h).cast_mut(), sep, right);
            }
        }
    }

    /// Replaces the root `old` (locked by the caller, just split into `old` and
    /// `right` at `sep`) with a new root above both.
    fn grow(&self, old: *mut Header, sep: *mut IKey, right: *mut Header) {
        let root = Inner::new(0);
        // SAFETY: `sep` is a separator just allocated by the split, not yet freed.
        root.slices[0].store(unsafe { &*sep }.slice_at(0), Ordering::Relaxed);
        root.seps[0].store(sep, Ordering::Relaxed);
        root.kids[0].store(old, Ordering::Relaxed);
        root.kids[1].store(right, Ordering::Relaxed);
        root.h.count.store(1, Ordering::Relaxed);
        let root = Box::into_raw(root).cast::<Header>();
        self.root.store(root, Ordering::Release);
    }

    /// Removes `key`; false if it was absent. The emptied slot's entry is retired
    /// through the epoch collector. Leaves are never merged.
    pub fn remove(&self, key: &[u8]) -> bool {
        let p = Probe::new(key);
        let g = epoch::pin();
        retry(|| self.try_remove(&p, &g))
    }

    fn try_remove(&self, p: &Probe<'_>, g: &Guard) -> Option<bool> {
        let (leaf, ver) = self.leaf_for(p)?;
        let n = leaf.len();
        let Ok(pos) = leaf.find(p, n, g)? else {
            return leaf.h.lock.check(ver).then_some(false);
        };
        let _w = leaf.h.lock.upgrade(ver)?;
        let e = leaf.entries[pos].load(Ordering::Relaxed, g);
        for i in pos + 1..n {
            let s = leaf.slices[i].load(Ordering::Relaxed);
            leaf.slices[i - 1].store(s, Ordering::Relaxed);
            let x = leaf.entries[i].load(Ordering::Relaxed, g);
            leaf.entries[i - 1].store(x, Ordering::Relaxed);
        }
        leaf.entries[n - 1].store(epoch::Shared::null(), Ordering::Relaxed);
        leaf.h.count.store(n - 1, Ordering::Relaxed);
        // SAFETY: the entry was in slot `pos` only; the loop overwrote that slot (or
        // the last store cleared it), so no slot holds it any more; retired once.
        unsafe { retire(e, g) };
        Some(true)
    }
}

/// Algorithm 1 on the entry at `pos` of the locked `leaf`: in place where the entry's
/// fixed-size cell takes the new version (`entry::apply`), else by swapping in a new
/// entry and retiring the old one.
fn replace(leaf: &Leaf, pos: usize, v: Version, snaps: &Snapshots, g: &Guard) -> PutOutcome {
    let old = leaf.entries[pos].load(Ordering::Acquire, g);
    // SAFETY: the leaf is locked, so the entry in a slot below `count` is live.
    let Some(cur) = (unsafe { old.as_ref() }) else {
        return PutOutcome::Stale;
    };
    let (out, new) = apply(cur, v, snaps);
    if let Some(new) = new {
        leaf.entries[pos].store(new, Ordering::Release);
        // SAFETY: slot `pos` no longer holds `old`, and it was in no other slot.
        unsafe { retire(old, g) };
    }
    out
}

/// Inserts `e` at `pos` of the locked `leaf`, which holds `n < LEAF_MAX` entries.
fn insert_at(leaf: &Leaf, pos: usize, n: usize, e: Owned<Entry>) {
    let slice = e.key.slice_at(leaf.h.skip);
    if e.key.len() > leaf.max_len.load(Ordering::Relaxed) {
        leaf.max_len.store(e.key.len(), Ordering::Relaxed);
    }
    // SAFETY: the shifted pointers are entries the locked leaf holds; `unprotected` only
    // types the loads and stores (nothing is dereferenced).
    let g = unsafe { epoch::unprotected() };
    for i in (pos..n).rev() {
        let s = leaf.slices[i].load(Ordering::Relaxed);
        leaf.slices[i + 1].store(s, Ordering::Relaxed);
        let x = leaf.entries[i].load(Ordering::Relaxed, g);
        leaf.entries[i + 1].store(x, Ordering::Relaxed);
    }
    leaf.slices[pos].store(slice, Ordering::Relaxed);
    leaf.entries[pos].store(e, Ordering::Release);
    leaf.h.count.store(n + 1, Ordering::Relaxed);
}

/// Moves the upper half of the locked, full `leaf` into a new right sibling whose
/// range ends at `high`. Returns the separator (the right node's smallest key, newly
/// allocated) and the new node, already linked as `leaf.next`.
fn split_leaf_node(
    leaf: &Leaf,
    high: Option<&IKey>,
    g: &Guard,
) -> Option<(*mut IKey, *mut Header)> {
    let n = leaf.len();
    let mid = n / 2;
    let first = leaf.entries[mid].load(Ordering::Relaxed, g);
    // SAFETY: the leaf is locked; its slot below `count` holds a live entry.
    let sep = Box::new(unsafe { first.as_ref() }?.key.clone());
    let right = Leaf::new(shared_prefix(&sep, high));
    let max_len = leaf.max_len.load(Ordering::Relaxed);
    right.max_len.store(max_len, Ordering::Relaxed);
    // The right half's range is inside the leaf's, so its `skip` is at least as long.
    // When every key ends within the leaf's slices (`max_len <= skip + 8`), a slice at
    // the longer skip is the old one shifted left (both are zero-padded past the key's
    // end), so the moved entries need not be read: for 8-byte keys that was one cache
    // miss per moved entry, ~9 % of a 4 M-key load's samples.
    let shift = right
        .h
        .skip
        .checked_sub(leaf.h.skip)
        .filter(|_| max_len <= leaf.h.skip + 8);
    for (j, i) in (mid..n).enumerate() {
        let e = leaf.entries[i].load(Ordering::Relaxed, g);
        let slice = match shift {
            Some(d) if d < 8 => leaf.slices[i].load(Ordering::Relaxed) << (8 * d),
            Some(_) => 0,
            // SAFETY: as above.
            None => unsafe { e.as_ref() }.map_or(0, |e| e.key.slice_at(right.h.skip)),
        };
        right.slices[j].store(slice, Ordering::Relaxed);
        right.entries[j].store(e, Ordering::Relaxed);
    }
    right.h.count.store(n - mid, Ordering::Relaxed);
    right
        .next
        .store(leaf.next.load(Ordering::Relaxed), Ordering::Relaxed);
    let right = Box::into_raw(right);
    leaf.next.store(right, Ordering::Release);
    for slot in &leaf.entries[mid..n] {
        slot.store(epoch::Shared::null(), Ordering::Relaxed);
    }
    leaf.h.count.store(mid, Ordering::Relaxed);
    Some((Box::into_raw(sep), right.cast::<Header>()))
}

/// Moves the upper half of the locked, full inner `node` into a new right sibling.
/// Returns the separator that goes up (the middle one) and the new node.
fn split_inner_node(node: &Inner) -> (*mut IKey, *mut Header) {
    let n = node.len();
    let mid = n / 2;
    let up = node.seps[mid].load(Ordering::Relaxed);
    let high = node.high.load(Ordering::Relaxed);
    // SAFETY: separators and bounds are freed only by `Drop`; `up` is non-null below
    // `count` of a locked node.
    let skip = unsafe { up.as_ref() }.map_or(0, |u| shared_prefix(u, unsafe { high.as_ref() }));
    let right = Inner::new(skip);
    for (j, i) in (mid + 1..n).enumerate() {
        let s = node.seps[i].load(Ordering::Relaxed);
        // SAFETY: as above.
        let slice = unsafe { s.as_ref() }.map_or(0, |s| s.slice_at(skip));
        right.slices[j].store(slice, Ordering::Relaxed);
        right.seps[j].store(s, Ordering::Relaxed);
    }
    for (j, i) in (mid + 1..=n).enumerate() {
        right.kids[j].store(node.kids[i].load(Ordering::Relaxed), Ordering::Relaxed);
    }
    right.h.count.store(n - mid - 1, Ordering::Relaxed);
    right.high.store(high, Ordering::Relaxed);
    node.high.store(up, Ordering::Relaxed);
    for s in &node.seps[mid..n] {
        s.store(std::ptr::null_mut(), Ordering::Relaxed);
    }
    for k in &node.kids[mid + 1..=n] {
        k.store(std::ptr::null_mut(), Ordering::Relaxed);
    }
    node.h.count.store(mid, Ordering::Relaxed);
    (up, Box::into_raw(right).cast::<Header>())
}

/// Adds separator `sep` with its right child `kid` at child position `c` of the locked
/// `par`, which has room (full inner nodes are split on the way down).
fn par_insert(par: &Inner, c: usize, sep: *mut IKey, kid: *mut Header) {
    let n = par.len();
    for i in (c..n).rev() {
        par.seps[i + 1].store(par.seps[i].load(Ordering::Relaxed), Ordering::Relaxed);
        let s = par.slices[i].load(Ordering::Relaxed);
        par.slices[i + 1].store(s, Ordering::Relaxed);
    }
    for i in (c + 1..=n).rev() {
        par.kids[i + 1].store(par.kids[i].load(Ordering::Relaxed), Ordering::Relaxed);
    }
    // SAFETY: `sep` was just allocated by the split and is freed only by `Drop`.
    let slice = unsafe { &*sep }.slice_at(par.h.skip);
    par.slices[c].store(slice, Ordering::Relaxed);
    par.seps[c].store(sep, Ordering::Release);
    par.kids[c + 1].store(kid, Ordering::Release);
    par.h.count.store(n + 1, Ordering::Relaxed);
}
