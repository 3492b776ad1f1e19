//! An index entry — one key and its versions — and FluidKV's Algorithm 1 on it.
//!
//! An [`Entry`] is immutable once published: a put that changes a key's versions builds
//! a new entry and swaps the leaf's pointer to it under the leaf's lock; the old one is
//! retired through `crossbeam-epoch` and freed once no pinned reader can hold it. So a
//! reader may hand `&SlotState` to a callback without any lock, and a get never writes
//! a shared cache line. Key and versions share one allocation (one pointer away from
//! the leaf).
//!
//! Algorithm 1 (`PutValidate`, FluidKV §5.1): a put replaces the current version only
//! with a newer LSN; an older one is kept only where a live snapshot can see it
//! (`node::update` decides, exactly as for the B-link tree and the hash index).
//!
//! Thread-safety: entries are shared read-only; `retire` is called by the writer that
//! unlinked the entry, inside its write section.

use crossbeam_epoch::{Guard, Owned, Shared};

use super::node::prefetch_line;
use crate::epoch::Snapshots;
use crate::faststore::ikey::IKey;
use crate::faststore::node::{update, SlotState};
use crate::faststore::version::Version;
use crate::faststore::PutOutcome;

/// A key and its versions (immutable once published).
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) key: IKey,
    pub(super) slot: SlotState,
}

impl Entry {
    /// A new entry holding just `v`.
    pub(super) fn first(key: IKey, v: Version) -> Owned<Entry> {
        Owned::new(Entry {
            key,
            slot: SlotState {
                cur: v,
                older: None,
            },
        })
    }
}

/// Algorithm 1 on `old`: the outcome, and the entry to publish in its place if the
/// versions changed (`None`: leave `old` as it is).
pub(super) fn apply(
    old: &Entry,
    v: Version,
    snaps: &Snapshots,
) -> (PutOutcome, Option<Owned<Entry>>) {
    let st = &old.slot;
    if st.cur.lsn == v.lsn {
        return (PutOutcome::Stale, None);
    }
    // The common case: a newer version, no older ones kept, no snapshot needing the
    // replaced one.
    if st.cur.lsn < v.lsn && st.older.is_none() && !snaps.needed(st.cur.epoch, v.epoch) {
        return (PutOutcome::Replaced, Some(Entry::first(old.key.clone(), v)));
    }
    let mut slot = SlotState {
        cur: st.cur.clone(),
        older: st.older.clone(),
    };
    let out = update(&mut slot, v, snaps);
    // A stale version changes the chain only if a snapshot needs it.
    if out == PutOutcome::Stale && same_chain(&slot, st) {
        return (out, None);
    }
    (
        out,
        Some(Owned::new(Entry {
            key: old.key.clone(),
            slot,
        })),
    )
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
