//! An index entry — one key and its versions — and FluidKV's Algorithm 1 on it.
//!
//! An [`Entry`] holds its key (immutable) and one of two bodies, chosen when the entry
//! is built and never changed afterwards:
//!
//! * [`Body::Fixed`] — the common case: one version, no older ones kept, and a value of
//!   fixed size (tombstone, ≤ 16 inline bytes, or a log address). Its words sit in a
//!   [`Cell`], a seqlock: an Algorithm 1 put that replaces the version with a newer LSN
//!   while no snapshot needs the old one **rewrites the words in place** — no
//!   allocation and nothing retired (FluidKV §4.2 keeps 8+8 B KVs in the index itself,
//!   and its Algorithm 1, §5.1, changes a key's version in place under the leaf lock).
//! * [`Body::Chain`] — anything else (a heap value, or older versions a snapshot still
//!   sees): an immutable [`SlotState`]; a put that changes it builds a new entry, swaps
//!   the leaf's pointer under the leaf's lock and retires the old one through
//!   `crossbeam-epoch`.
//!
//! Protocol of a `Fixed` cell (a seqlock whose writers are serialized by the leaf lock):
//! * writers: only a writer holding the lock of the leaf whose slot holds the entry
//!   (so one at a time; an entry sits in exactly one leaf, and a split moves it with
//!   both leaves locked). It stores `seq | WRITING`, a release fence, the words
//!   (relaxed), then the new `seq` (release) with the new tag and length in its low
//!   byte. An unlinked entry is never written again.
//! * readers: `seq` (acquire; retry while `WRITING`), the words (relaxed), an acquire
//!   fence, `seq` again (relaxed); the copy is accepted only if both `seq` loads agree,
//!   so a reader sees the old or the new (lsn, epoch, value) whole, never a mix. Every
//!   word is an atomic: readers and the writer race on no plain memory.
//!
//! Why the entry's own sequence word and not the leaf's version: a reader hands the
//! versions to a callback (`read_key`) or walks a scan's entries *after* it validated
//! the leaf, and a split may meanwhile move the entry to another leaf whose lock a
//! later writer takes; the sequence word covers exactly the words it guards wherever
//! the entry sits, on the line the writer dirties anyway. The writer still holds the
//! leaf's lock (exclusion against removes, splits and other writers).
//!
//! Thread-safety: entries are shared; `Chain` bodies and keys are read-only, `Fixed`
//! cells follow the protocol above; `retire` is called by the writer that unlinked
//! the entry, inside its write section.

use crossbeam_epoch::{Guard, Owned, Shared};

use super::node::prefetch_line;
use super::sync::{fence, AtomicU64, Backoff, Ordering};
use crate::epoch::Snapshots;
use crate::faststore::ikey::IKey;
use crate::faststore::node::{update, SlotState};
use crate::faststore::version::{Val, Version};
use crate::faststore::PutOutcome;
use crate::value::ValuePtr;

/// A key and its versions.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) key: IKey,
    body: Body,
}

/// What an entry holds besides its key (the variant never changes).
#[derive(Debug)]
enum Body {
    Fixed(Cell),
    Chain(SlotState),
}

/// One fixed-size version as atomic words (module docs: the seqlock protocol).
#[derive(Debug)]
struct Cell {
    /// Bits 8..: count of completed in-place writes; bits 0..8: [`WRITING`], the
    /// value's tag and length.
    seq: AtomicU64,
    lsn: AtomicU64,
    epoch: AtomicU64,
    /// The value: inline bytes (little endian), or address and length.
    w: [AtomicU64; 2],
}

/// `seq` bit: a write is in progress.
const WRITING: u64 = 1;
const TAG_TOMB: u64 = 0 << 1;
const TAG_TINY: u64 = 1 << 1;
const TAG_ADDR: u64 = 2 << 1;
const TAG_MASK: u64 = 3 << 1;
/// Tiny length (0..=16) in bits 3..8.
const LEN_SHIFT: u32 = 3;
const META: u64 = 0xff;

/// A fixed-size value as the cell's low `seq` byte and two words; `None` for a heap
/// value.
fn encode(val: &Val) -> Option<(u64, [u64; 2])> {
    Some(match val {
        Val::Tomb => (TAG_TOMB, [0, 0]),
        Val::Tiny { len, bytes } => {
            let (a, b) = bytes.split_at(8);
            let w = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
            (TAG_TINY | (u64::from(*len) << LEN_SHIFT), [w(a), w(b)])
        }
        Val::Addr(p) => (TAG_ADDR, [p.addr, u64::from(p.len)]),
        Val::Heap(_) => return None,
    })
}

/// The value `encode` made `meta` and `w` from.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the length fits 5 bits, the address length was a u32"
)]
fn decode(meta: u64, w: [u64; 2]) -> Val {
    match meta & TAG_MASK {
        TAG_TINY => {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&w[0].to_le_bytes());
            bytes[8..].copy_from_slice(&w[1].to_le_bytes());
            Val::Tiny {
                len: ((meta >> LEN_SHIFT) as u8).min(16),
                bytes,
            }
        }
        TAG_ADDR => Val::Addr(ValuePtr {
            addr: w[0],
            len: w[1] as u32,
        }),
        _ => Val::Tomb,
    }
}

impl Cell {
    fn new(lsn: u64, epoch: u64, meta: u64, w: [u64; 2]) -> Cell {
        Cell {
            seq: AtomicU64::new(meta),
            lsn: AtomicU64::new(lsn),
            epoch: AtomicU64::new(epoch),
            w: [AtomicU64::new(w[0]), AtomicU64::new(w[1])],
        }
    }

    /// A consistent copy of the version (spins while a write is in progress; a write
    /// section is a handful of stores).
    fn load(&self) -> Version {
        let wait = Backoff::new();
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & WRITING == 0 {
                let lsn = self.lsn.load(Ordering::Relaxed);
                let epoch = self.epoch.load(Ordering::Relaxed);
                let w = [
                    self.w[0].load(Ordering::Relaxed),
                    self.w[1].load(Ordering::Relaxed),
                ];
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return Version {
                        lsn,
                        epoch,
                        val: decode(s1 & META, w),
                    };
                }
            }
            wait.snooze();
        }
    }

    /// (lsn, epoch) as the one writer sees them (caller holds the leaf lock, so no
    /// write is in progress).
    fn lsn_epoch(&self) -> (u64, u64) {
        (
            self.lsn.load(Ordering::Relaxed),
            self.epoch.load(Ordering::Relaxed),
        )
    }

    /// Rewrites the version in place. The caller holds the lock of the leaf whose slot
    /// holds this entry (the only writer; module docs).
    fn store(&self, lsn: u64, epoch: u64, meta: u64, w: [u64; 2]) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s | WRITING, Ordering::Relaxed);
        // Orders the `WRITING` mark before the words: a reader whose relaxed loads see a
        // new word sees the mark (or later) at its acquire-fenced second `seq` load.
        fence(Ordering::Release);
        self.lsn.store(lsn, Ordering::Relaxed);
        self.epoch.store(epoch, Ordering::Relaxed);
        self.w[0].store(w[0], Ordering::Relaxed);
        self.w[1].store(w[1], Ordering::Relaxed);
        let next = ((s >> 8).wrapping_add(1) << 8) | (meta & !WRITING & META);
        self.seq.store(next, Ordering::Release);
    }
}

impl Entry {
    /// A new entry holding just `v`.
    pub(super) fn first(key: IKey, v: Version) -> Owned<Entry> {
        Self::from_slot(
            key,
            SlotState {
                cur: v,
                older: None,
            },
        )
    }

    /// An entry for `slot`: a `Fixed` cell where it fits one, else a chain.
    fn from_slot(key: IKey, slot: SlotState) -> Owned<Entry> {
        let body = match (&slot.older, encode(&slot.cur.val)) {
            (None, Some((meta, w))) => {
                Body::Fixed(Cell::new(slot.cur.lsn, slot.cur.epoch, meta, w))
            }
            _ => Body::Chain(slot),
        };
        Owned::new(Entry { key, body })
    }

    /// Calls `f` with a consistent view of the versions (a copy of a `Fixed` cell, or
    /// the immutable chain).
    #[inline]
    pub(super) fn with_slot<R>(&self, f: impl FnOnce(&SlotState) -> R) -> R {
        match &self.body {
            Body::Fixed(c) => f(&SlotState {
                cur: c.load(),
                older: None,
            }),
            Body::Chain(st) => f(st),
        }
    }

    /// True if the versions are updated in place (tests).
    #[cfg(all(test, not(loom)))]
    pub(super) fn is_fixed(&self) -> bool {
        matches!(self.body, Body::Fixed(_))
    }
}

/// Algorithm 1 (`PutValidate`, FluidKV §5.1) on `old`, which sits in a leaf whose lock
/// the caller holds: the outcome, and the entry to publish in its place if the
/// versions changed and could not be rewritten in place (`None`: `old` stays — as it
/// was, or rewritten in place).
pub(super) fn apply(
    old: &Entry,
    v: Version,
    snaps: &Snapshots,
) -> (PutOutcome, Option<Owned<Entry>>) {
    let slot = match &old.body {
        Body::Fixed(c) => {
            let (lsn, epoch) = c.lsn_epoch();
            if lsn == v.lsn {
                return (PutOutcome::Stale, None);
            }
            // The common case: a newer LSN (never an older one, Algorithm 1 line 5),
            // and no snapshot that still needs the replaced version.
            if lsn < v.lsn && !snaps.needed(epoch, v.epoch) {
                let Some((meta, w)) = encode(&v.val) else {
                    return (PutOutcome::Replaced, Some(Entry::first(old.key.clone(), v)));
                };
                c.store(v.lsn, v.epoch, meta, w);
                return (PutOutcome::Replaced, None);
            }
            let mut slot = SlotState {
                cur: c.load(),
                older: None,
            };
            let out = update(&mut slot, v, snaps);
            // A stale version changes the chain only if a snapshot needs it.
            if out == PutOutcome::Stale && slot.older.is_none() {
                return (out, None);
            }
            (out, slot)
        }
        Body::Chain(st) => {
            if st.cur.lsn == v.lsn {
                return (PutOutcome::Stale, None);
            }
            if st.cur.lsn < v.lsn && st.older.is_none() && !snaps.needed(st.cur.epoch, v.epoch) {
                return (PutOutcome::Replaced, Some(Entry::first(old.key.clone(), v)));
            }
            let mut slot = SlotState {
                cur: st.cur.clone(),
                older: st.older.clone(),
            };
            let out = update(&mut slot, v, snaps);
            if out == PutOutcome::Stale && same_chain(&slot, st) {
                return (out, None);
            }
            (out, slot)
        }
    };
    let (out, slot) = slot;
    (out, Some(Entry::from_slot(old.key.clone(), slot)))
}

fn same_chain(a: &SlotState, b: &SlotState) -> bool {
    let lsns = |s: &SlotState| -> Vec<u64> {
        s.older
            .as_deref()
            .map(|o| o.iter().map(|v| v.lsn).collect())
            .unwrap_or_default()
    };
    a.cur.lsn == b.cur.lsn && lsns(a) == lsns(b)
}

/// Prefetches the lines of the entry `e` points at (null: nothing); a hint only.
#[inline]
pub(super) fn prefetch_entry(e: *const Entry) {
    if e.is_null() {
        return;
    }
    let base = e.cast::<u8>();
    prefetch_line(base);
    prefetch_line(base.wrapping_add(std::mem::size_of::<Entry>() - 1));
}

/// Hands an unlinked entry to the epoch collector.
///
/// # Safety
/// `e` was unlinked from the index (no slot holds it any more) by the caller, who
/// retires it exactly once.
pub(super) unsafe fn retire(e: Shared<'_, Entry>, g: &Guard) {
    // SAFETY: no slot holds `e` (caller), so only readers pinned before the unlink can
    // still reach it, and the collector frees it after they unpin.
    unsafe { g.defer_destroy(e) };
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fixed_values_round_trip_through_the_cell() {
        let vals = [
            Val::Tomb,
            Val::inline(b""),
            Val::inline(b"12345678"),
            Val::inline(b"0123456789abcdef"),
            Val::Addr(ValuePtr {
                addr: u64::MAX - 3,
                len: u32::MAX,
            }),
        ];
        for val in &vals {
            let (meta, w) = encode(val).unwrap_or_else(|| panic!("{val:?} is fixed"));
            let c = Cell::new(7, 3, meta, w);
            assert_eq!(
                c.load(),
                Version {
                    lsn: 7,
                    epoch: 3,
                    val: val.clone()
                }
            );
            for other in &vals {
                let (m, w) = encode(other).unwrap_or_else(|| panic!("fixed"));
                c.store(9, 4, m, w);
                assert_eq!(
                    c.load(),
                    Version {
                        lsn: 9,
                        epoch: 4,
                        val: other.clone()
                    }
                );
            }
        }
        assert!(encode(&Val::Heap(vec![1; 17].into())).is_none());
    }

    #[test]
    fn newer_fixed_versions_are_written_in_place_older_ones_refused() {
        let s = Snapshots::default();
        let g = crossbeam_epoch::pin();
        let e = Entry::first(IKey::new(b"k"), crate::faststore::version::ver(5, 1, b"a"));
        let e = e.into_shared(&g);
        // SAFETY: just built; freed at the end of the test, never shared.
        let r = unsafe { e.deref() };
        assert!(r.is_fixed());
        let (out, new) = apply(r, crate::faststore::version::ver(9, 1, b"b"), &s);
        assert_eq!(out, PutOutcome::Replaced);
        assert!(new.is_none(), "a newer fixed version is written in place");
        let (out, new) = apply(r, crate::faststore::version::ver(7, 1, b"c"), &s);
        assert_eq!(out, PutOutcome::Stale);
        assert!(new.is_none(), "an older LSN changes nothing");
        let (out, new) = apply(r, crate::faststore::version::ver(9, 1, b"d"), &s);
        assert_eq!(out, PutOutcome::Stale);
        assert!(new.is_none());
        r.with_slot(|st| {
            assert_eq!(st.cur, crate::faststore::version::ver(9, 1, b"b"));
        });
        // A snapshot that sees the current version forces a chain (a new entry).
        let snap = s.acquire();
        let w = s.write_epoch();
        let (out, new) = apply(r, crate::faststore::version::ver(11, w, b"e"), &s);
        assert_eq!(out, PutOutcome::Replaced);
        let new = new.unwrap_or_else(|| panic!("a snapshot needs the old version"));
        assert!(!new.is_fixed());
        new.with_slot(|st| {
            assert_eq!(
                crate::faststore::node::visible(st, snap).map(|v| v.lsn),
                Some(9)
            );
        });
        s.release(snap);
        // SAFETY: never shared; dropped once.
        drop(unsafe { e.into_owned() });
    }
}
