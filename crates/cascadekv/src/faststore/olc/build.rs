//! Building the optimistic index from sorted input (recovery), and freeing it.
//!
//! `bulk_load` builds complete leaves (3/4 full, so early inserts do not split at once)
//! and inner levels bottom-up, computes each node's `skip` from its final bounds, and
//! publishes the new root with one release store, holding the old root's lock (so no
//! racing put can grow a root above the old one). The previous root is kept in
//! `orphans` and freed by `Drop`, since a racing reader may still be inside it.
//!
//! Ownership for `Drop`: each node is the child of exactly one inner node slot in
//! `[0, count]` (splits clear the slots they move), each separator sits in exactly one
//! slot in `[0, count)`, and each live entry in exactly one leaf slot in `[0, count)`;
//! `high` bounds and `next` links alias and are never freed through.
//!
//! Thread-safety: `bulk_load` takes `&self` but is meant for an index not yet shared;
//! called on a shared one it is still sound (writes racing with it may be lost).

use crossbeam_epoch as epoch;

use super::entry::Entry;
use super::node::{node_ref, shared_prefix, Header, Inner, Leaf, NodeRef};
use super::sync::Ordering;
use super::Olc;
use crate::faststore::ikey::IKey;
use crate::faststore::version::Version;

/// A node of the level being built, with its lower bound (`None`: leftmost).
type Built = (Option<*mut IKey>, *mut Header);

impl Olc {
    /// Builds the index from `entries`, which must be sorted by key with no duplicates
    /// (recovery sorts the replayed records; out-of-order input makes lookups miss, but
    /// is memory-safe). Replaces the contents of the index.
    pub fn bulk_load(&self, entries: impl IntoIterator<Item = (IKey, Version)>) {
        let fill = (self.leaf_cap * 3 / 4).max(1);
        let mut leaves: Vec<(Option<*mut IKey>, Box<Leaf>)> = Vec::new();
        let mut cur = Leaf::new(0);
        let mut low = None;
        for (key, v) in entries {
            let n = cur.h.count.load(Ordering::Relaxed);
            if n == fill {
                leaves.push((low, std::mem::replace(&mut cur, Leaf::new(0))));
                low = Some(Box::into_raw(Box::new(key.clone())));
            }
            let n = cur.h.count.load(Ordering::Relaxed);
            if key.len() > cur.max_len.load(Ordering::Relaxed) {
                cur.max_len.store(key.len(), Ordering::Relaxed);
            }
            cur.entries[n].store(Entry::first(key, v), Ordering::Relaxed);
            cur.h.count.store(n + 1, Ordering::Relaxed);
        }
        leaves.push((low, cur));
        // Bounds, slices and links, right to left.
        let mut level: Vec<Built> = Vec::with_capacity(leaves.len());
        let mut right: Option<(Option<*mut IKey>, *mut Leaf)> = None;
        for (low, mut leaf) in leaves.into_iter().rev() {
            let high = right.and_then(|r| r.0);
            leaf.h.skip = bound_prefix(low, high);
            // SAFETY: the leaf is not shared yet; `unprotected` only types the loads.
            let g = unsafe { epoch::unprotected() };
            for i in 0..leaf.len() {
                let e = leaf.entries[i].load(Ordering::Relaxed, g);
                // SAFETY: this function stored every entry below `count` just above.
                let s = unsafe { e.as_ref() }.map_or(0, |e| e.key.slice_at(leaf.h.skip));
                leaf.slices[i].store(s, Ordering::Relaxed);
            }
            leaf.next.store(
                right.map_or(std::ptr::null_mut(), |r| r.1),
                Ordering::Relaxed,
            );
            let p = Box::into_raw(leaf);
            right = Some((low, p));
            level.push((low, p.cast::<Header>()));
        }
        level.reverse();
        let per = (self.inner_cap * 3 / 4).max(2);
        while level.len() > 1 {
            let groups: Vec<&[Built]> = level.chunks(per).collect();
            let mut up = Vec::with_capacity(groups.len());
            for (j, group) in groups.iter().enumerate() {
                let low = group[0].0;
                let high = groups.get(j + 1).and_then(|g| g[0].0);
                let node = Inner::new(bound_prefix(low, high));
                for (i, (sep, kid)) in group.iter().enumerate() {
                    node.kids[i].store(*kid, Ordering::Relaxed);
                    if i > 0 {
                        let sep = sep.unwrap_or(std::ptr::null_mut());
                        // SAFETY: every node but the leftmost has a lower bound, just
                        // allocated above and freed only by `Drop`.
                        let s = unsafe { sep.as_ref() }.map_or(0, |s| s.slice_at(node.h.skip));
                        node.slices[i - 1].store(s, Ordering::Relaxed);
                        node.seps[i - 1].store(sep, Ordering::Relaxed);
                    }
                }
                node.h.count.store(group.len() - 1, Ordering::Relaxed);
                node.high
                    .store(high.unwrap_or(std::ptr::null_mut()), Ordering::Relaxed);
                up.push((low, Box::into_raw(node).cast::<Header>()));
            }
            level = up;
        }
        if let Some(&(_, root)) = level.first() {
            // Swap with the old root locked: a racing put that read it can then no
            // longer grow a new root above it (its upgrade fails), so the old tree
            // stays disjoint from the new one and `Drop` frees each node once.
            let wait = super::sync::Backoff::new();
            loop {
                let old = self.root.load(Ordering::Acquire);
                // SAFETY: `root` always holds a live node; nodes are freed by `Drop`.
                let Some(node) = (unsafe { node_ref(old) }) else {
                    break;
                };
                let lock = &node.header().lock;
                let Some(_w) = lock.read().and_then(|v| lock.upgrade(v)) else {
                    wait.snooze();
                    continue;
                };
                if self.root.load(Ordering::Acquire) == old {
                    self.root.store(root, Ordering::Release);
                    let old = std::sync::atomic::AtomicPtr::new(old);
                    self.orphans.lock().push(old);
                    break;
                }
            }
        }
    }
}

/// `skip` of a node whose range is `[low, high)` (`None`: unbounded).
fn bound_prefix(low: Option<*mut IKey>, high: Option<*mut IKey>) -> usize {
    let Some(low) = low else {
        return 0;
    };
    // SAFETY: bounds are separators allocated by `bulk_load`, not yet freed.
    let high = high.and_then(|h| unsafe { h.as_ref() });
    // SAFETY: as above.
    unsafe { low.as_ref() }.map_or(0, |l| shared_prefix(l, high))
}

/// Frees the subtree under `p` with every entry and separator it owns.
///
/// # Safety
/// `p` is null or a node of this index that no thread can reach any more, and no other
/// call frees it or anything below it.
unsafe fn free_subtree(p: *mut Header) {
    // SAFETY: `p` is null or a live node (caller).
    match unsafe { node_ref(p) } {
        None => {}
        Some(NodeRef::Leaf(l)) => {
            // SAFETY: unreachable by other threads (caller): nothing is pinned on it.
            let g = unsafe { epoch::unprotected() };
            for slot in &l.entries[..l.len()] {
                let e = slot.load(Ordering::Relaxed, g);
                if !e.is_null() {
                    // SAFETY: each live entry sits in exactly one slot below `count`
                    // (module invariants), so it is freed once; it was never retired.
                    drop(unsafe { e.into_owned() });
                }
            }
            // SAFETY: a header with `leaf` set is the start of a `Box<Leaf>`.
            drop(unsafe { Box::from_raw(p.cast::<Leaf>()) });
        }
        Some(NodeRef::Inner(i)) => {
            let n = i.len();
            for k in &i.kids[..=n] {
                // SAFETY: each child sits in exactly one slot of one parent.
                unsafe { free_subtree(k.load(Ordering::Relaxed)) };
            }
            for s in &i.seps[..n] {
                let s = s.load(Ordering::Relaxed);
                if !s.is_null() {
                    // SAFETY: each separator sits in exactly one slot below `count`.
                    drop(unsafe { Box::from_raw(s) });
                }
            }
            // SAFETY: a header without `leaf` is the start of a `Box<Inner>`.
            drop(unsafe { Box::from_raw(p.cast::<Inner>()) });
        }
    }
}

impl Drop for Olc {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no thread holds a reference into the index; root and
        // orphans are disjoint trees (bulk_load swaps a whole root out).
        unsafe { free_subtree(self.root.load(Ordering::Relaxed)) };
        for o in self.orphans.get_mut().drain(..) {
            // SAFETY: as above.
            unsafe { free_subtree(o.into_inner()) };
        }
    }
}
