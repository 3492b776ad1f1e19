//! Node layout of the optimistic index, and the searches inside one node.
//!
//! Both kinds start with the same [`Header`] (`#[repr(C)]`), so a child pointer is a
//! `*const Header` whose `leaf` flag says which kind it points at.
//!
//! * [`Leaf`]: up to [`LEAF_MAX`] entries in key order — each key's 8-byte slice (big
//!   endian, after the node's `skip` prefix bytes) inline, and a pointer to its
//!   [`Entry`] (full key and versions: one pointer away), plus the right sibling
//!   (`next`) for forward scans.
//! * [`Inner`]: up to [`INNER_MAX`] separators (slice inline, full key behind a pointer)
//!   and one more child. `seps[i]` is the smallest key of `kids[i + 1]`; `high` the
//!   node's exclusive upper bound (null: none).
//!
//! `skip`: every key that can ever be routed to a node shares its first `skip` bytes,
//! the common prefix of the node's bounds when it was created (a node's range only
//! shrinks: splits move its upper part out, nothing merges). So slices start after
//! that prefix, and keys like YCSB's `user000…` still differ in their slices.
//!
//! Invariants (every one holds whenever the node's lock is free):
//! * `count` entries / separators sit at positions `[0, count)`, sorted, no duplicates.
//! * A leaf's entry slot holds null or an entry no writer has retired: a writer clears
//!   or overwrites a slot before it retires what the slot held, and copies entries only
//!   within its write section (so a pinned reader may dereference what it loads).
//! * Nodes and separator keys are freed only by `Drop` of the whole index (`&mut`), so
//!   any non-null node or separator pointer a reader loads stays valid while it holds
//!   `&Olc`.
//! * `leaf` and `skip` never change after a node is published (with a release store
//!   of its pointer, read with acquire loads).
//!
//! Thread-safety: every field readers see is an atomic; writers change them only while
//! holding the node's [`VersionLock`]; readers validate with it.

use crossbeam_epoch::{Atomic, Guard};

use super::entry::Entry;
use super::lock::VersionLock;
use super::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::faststore::ikey::{slice_at, IKey, Probe};

/// Most entries a leaf holds (loom models use tiny nodes: every op splits).
pub(super) const LEAF_MAX: usize = if cfg!(loom) { 2 } else { 32 };
/// Most separators an inner node holds (children: one more).
pub(super) const INNER_MAX: usize = if cfg!(loom) { 2 } else { 32 };

/// What both node kinds start with.
#[repr(C)]
#[derive(Debug)]
pub(super) struct Header {
    pub(super) lock: VersionLock,
    /// Entries (leaf) or separators (inner) in use.
    pub(super) count: AtomicUsize,
    /// True for a [`Leaf`], false for an [`Inner`] (immutable).
    pub(super) leaf: bool,
    /// Shared prefix length of every key routed here (immutable).
    pub(super) skip: usize,
}

#[repr(C)]
#[derive(Debug)]
pub(super) struct Leaf {
    pub(super) h: Header,
    pub(super) next: AtomicPtr<Leaf>,
    /// At least the length of every key the leaf holds (written and read only under
    /// the leaf's lock): a split whose right half needs a longer `skip` shifts the
    /// slices it has instead of reading each moved entry's key, when every key ends
    /// within the old slices (`write.rs`, `split_leaf_node`).
    pub(super) max_len: AtomicUsize,
    pub(super) slices: [AtomicU64; LEAF_MAX],
    pub(super) entries: [Atomic<Entry>; LEAF_MAX],
}

#[repr(C)]
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) h: Header,
    /// Exclusive upper bound of the node's range; null = unbounded.
    pub(super) high: AtomicPtr<IKey>,
    pub(super) slices: [AtomicU64; INNER_MAX],
    /// Before `seps`: a descent reads the slices and one child, and the separators
    /// only on a slice tie, so the lines it reads are the node's first ones.
    pub(super) kids: [AtomicPtr<Header>; INNER_MAX + 1],
    pub(super) seps: [AtomicPtr<IKey>; INNER_MAX],
}

/// A node, typed.
#[derive(Debug, Clone, Copy)]
pub(super) enum NodeRef<'t> {
    Leaf(&'t Leaf),
    Inner(&'t Inner),
}

fn header(skip: usize, leaf: bool) -> Header {
    Header {
        lock: VersionLock::new(),
        count: AtomicUsize::new(0),
        leaf,
        skip,
    }
}

impl Leaf {
    pub(super) fn new(skip: usize) -> Box<Leaf> {
        Box::new(Leaf {
            h: header(skip, true),
            next: AtomicPtr::new(std::ptr::null_mut()),
            max_len: AtomicUsize::new(0),
            slices: std::array::from_fn(|_| AtomicU64::new(0)),
            entries: std::array::from_fn(|_| Atomic::null()),
        })
    }

    /// Entries in use, as a possibly racing reader sees it (bounded by the array).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.h.count.load(Ordering::Relaxed).min(LEAF_MAX)
    }

    /// Finds `p` among the first `n` entries: `Ok(pos)` if present, `Err(pos)` its
    /// insert position; `None` if a slot was empty (a racing writer: restart).
    /// The slices are searched first; full keys are compared only on equal slices.
    #[inline]
    pub(super) fn find(&self, p: &Probe<'_>, n: usize, g: &Guard) -> Option<Result<usize, usize>> {
        let x = slice_at(p.key, self.h.skip);
        let mut lo = lower_bound(&self.slices[..n], x);
        while lo < n && self.slices[lo].load(Ordering::Relaxed) == x {
            let e = self.entries[lo].load(Ordering::Acquire, g);
            // SAFETY: a non-null slot holds an entry no writer had retired when it was
            // loaded (module invariants), and `g` keeps it from being freed.
            let e = unsafe { e.as_ref() }?;
            match e.key.cmp_probe(p) {
                std::cmp::Ordering::Less => lo += 1,
                std::cmp::Ordering::Equal => return Some(Ok(lo)),
                std::cmp::Ordering::Greater => break,
            }
        }
        Some(Err(lo))
    }
}

impl Inner {
    pub(super) fn new(skip: usize) -> Box<Inner> {
        Box::new(Inner {
            h: header(skip, false),
            high: AtomicPtr::new(std::ptr::null_mut()),
            slices: std::array::from_fn(|_| AtomicU64::new(0)),
            seps: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            kids: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        })
    }

    /// Separators in use, as a possibly racing reader sees it (bounded by the array).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.h.count.load(Ordering::Relaxed).min(INNER_MAX)
    }

    /// Separator `i`; `None` if the slot is empty (a racing writer).
    #[inline]
    pub(super) fn sep(&self, i: usize) -> Option<&IKey> {
        let s = self.seps.get(i)?.load(Ordering::Acquire);
        // SAFETY: separators are only freed by the index's `Drop` (module invariants),
        // so a non-null one lives as long as `&self`.
        unsafe { s.as_ref() }
    }

    /// Child `i`; `None` if the slot is empty (a racing writer). Prefetches the
    /// child's lines before its header is read, so the misses of one level overlap
    /// instead of forming a chain (a search touches several lines of the node).
    #[inline]
    pub(super) fn kid(&self, i: usize) -> Option<NodeRef<'_>> {
        let k = self.kids.get(i)?.load(Ordering::Acquire);
        prefetch_node(k);
        // SAFETY: nodes are only freed by the index's `Drop` (module invariants), and
        // every child pointer was stored from a fully built `Box<Leaf>` / `Box<Inner>`.
        unsafe { node_ref(k) }
    }

    /// The child whose range holds `p` among the first `n` separators: the number of
    /// separators `<= p` (`or_equal`) or `< p`; `None` on an empty slot (restart).
    #[inline]
    pub(super) fn child_for(&self, p: &Probe<'_>, n: usize, or_equal: bool) -> Option<usize> {
        let x = slice_at(p.key, self.h.skip);
        let mut lo = lower_bound(&self.slices[..n], x);
        while lo < n && self.slices[lo].load(Ordering::Relaxed) == x {
            let c = self.sep(lo)?.cmp_probe(p);
            if c == std::cmp::Ordering::Less || (or_equal && c == std::cmp::Ordering::Equal) {
                lo += 1;
            } else {
                break;
            }
        }
        Some(lo)
    }
}

/// Types a node pointer; `None` for null.
///
/// # Safety
/// `p` is null or points at the `Header` of a live `Leaf` or `Inner` (as published by
/// this index) that outlives `'t`.
#[inline]
pub(super) unsafe fn node_ref<'t>(p: *const Header) -> Option<NodeRef<'t>> {
    // SAFETY: the caller guarantees `p` is null or a live node's header.
    let h = unsafe { p.as_ref() }?;
    Some(if h.leaf {
        // SAFETY: `leaf` is set only in `Leaf::new`, and `Header` is the first field of
        // the `#[repr(C)]` `Leaf`, so the pointer is the leaf's.
        NodeRef::Leaf(unsafe { &*p.cast::<Leaf>() })
    } else {
        // SAFETY: as above, for `Inner`.
        NodeRef::Inner(unsafe { &*p.cast::<Inner>() })
    })
}

impl<'t> NodeRef<'t> {
    pub(super) fn header(self) -> &'t Header {
        match self {
            NodeRef::Leaf(l) => &l.h,
            NodeRef::Inner(i) => &i.h,
        }
    }
}

/// Cache lines a search reads (plus one: nodes are 8-byte aligned, not line
/// aligned): a whole leaf, or an inner node's header, bound, slices and child pointers.
const NODE_LINES: usize = {
    let leaf = std::mem::size_of::<Leaf>();
    let inner = std::mem::offset_of!(Inner, seps);
    (if leaf > inner { leaf } else { inner }).div_ceil(64) + 1
};

/// Asks the CPU to start loading the lines of the node `p` points at that a search
/// reads, all at once (a hint: no effect on what the program computes, none under
/// loom). Without it, the header, each probe of the binary search and the entry
/// pointer are a chain of dependent misses.
#[inline]
pub(super) fn prefetch_node(p: *const Header) {
    if p.is_null() {
        return;
    }
    let base = p.cast::<u8>();
    for i in 0..NODE_LINES {
        prefetch_line(base.wrapping_add(i * 64));
    }
}

/// A prefetch hint for the cache line holding `p` (any address; nothing is read).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline]
pub(super) fn prefetch_line(p: *const u8) {
    // SAFETY: `prefetcht0` only hints the cache; it never faults and reads nothing the
    // program sees, whatever `p` is. SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
}

/// No prefetch elsewhere (and under loom, which models no caches).
#[cfg(not(all(target_arch = "x86_64", not(loom))))]
#[inline]
pub(super) fn prefetch_line(_p: *const u8) {}

/// Index of the first slice `>= x` among sorted `s` (binary search; loads relaxed).
#[inline]
fn lower_bound(s: &[AtomicU64], x: u64) -> usize {
    let (mut lo, mut len) = (0, s.len());
    while len > 0 {
        let half = len / 2;
        if s[lo + half].load(Ordering::Relaxed) < x {
            lo += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    lo
}

/// Length of the common prefix of `a` and the (optional) upper bound `b`; 0 when
/// unbounded. Used for the `skip` of a node whose range is `[a, b)`.
pub(super) fn shared_prefix(a: &IKey, b: Option<&IKey>) -> usize {
    b.map_or(0, |b| a.common_prefix_key(b))
}
