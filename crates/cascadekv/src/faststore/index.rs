//! The FastStore's index: the ordered optimistic B+-tree alone ([`Olc`], FluidKV §5.1:
//! the Masstree family, with Algorithm 1's LSN validation), or HiKV's hybrid index
//! (§3.1–3.3) — a partitioned hash index ([`super::hash`]) for point operations beside
//! the same tree, updated asynchronously
//! ([`super::updates`]). `Options::hash_index` chooses; every caller sees one API.
//!
//! In the hybrid index a put installs its version in the hash part (LSN-validated
//! there, exactly as in the tree) and queues it for the tree; get, get-at-snapshot and
//! `with_version` read only the hash part. Anything ordered — range collection in
//! both directions, `for_each` (flush, checkpoint) — first fences the queues so it sees
//! every put acknowledged before it began. Recovery loads both parts. Invariants:
//! docs/design.md §11.
//!
//! Thread-safety: as its parts; all methods take `&self` and any thread may call them.
//! A put must come from the thread holding the caller's log slot (its queue is chosen
//! by the same thread number, `super::thread_no`).

use std::cell::Cell;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::hash::{key_hash, HashIndex};
use super::ikey::IKey;
use super::node::{visible, visible_ref};
use super::olc::Olc;
pub use super::tree::PutOutcome;
use super::updates::{Updates, SAMPLE_EVERY};
use super::version::Version;
use crate::epoch::Snapshots;

/// The index of one FastStore generation.
#[derive(Debug)]
pub struct Index(Kind);

#[derive(Debug)]
enum Kind {
    Ordered(Olc),
    Hybrid { hash: HashIndex, updates: Updates },
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

thread_local! {
    static TICK: Cell<u32> = const { Cell::new(0) };
}

/// True for one call in [`SAMPLE_EVERY`] on this thread (cost-model sampling).
fn sample() -> bool {
    TICK.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n % SAMPLE_EVERY == 0
    })
}

fn elapsed_ns(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Index {
    /// An empty ordered-only index.
    #[must_use]
    pub fn new() -> Self {
        Index(Kind::Ordered(Olc::new()))
    }

    /// An empty hybrid index with `queues` update queues (one per log slot) and up to
    /// `max_threads` backend threads applying them; `snaps` decides which old versions
    /// the tree keeps as it applies them.
    #[must_use]
    pub fn hybrid(snaps: Arc<Snapshots>, queues: usize, max_threads: usize) -> Self {
        Index(Kind::Hybrid {
            hash: HashIndex::new(),
            updates: Updates::new(Olc::new(), snaps, queues, max_threads),
        })
    }

    /// True for a hybrid index.
    #[must_use]
    pub fn is_hybrid(&self) -> bool {
        matches!(self.0, Kind::Hybrid { .. })
    }

    /// The ordered part, with every acknowledged put applied.
    fn fenced_tree(&self) -> &Olc {
        match &self.0 {
            Kind::Ordered(t) => t,
            Kind::Hybrid { updates, .. } => {
                updates.fence();
                &updates.shared.tree
            }
        }
    }

    /// Number of keys (tombstones included); for statistics.
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Kind::Ordered(t) => t.len(),
            Kind::Hybrid { hash, .. } => hash.len(),
        }
    }

    /// True when no key was put.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Kind::Ordered(t) => t.is_empty(),
            Kind::Hybrid { hash, .. } => hash.is_empty(),
        }
    }

    /// Algorithm 1 `PutValidate`: install `v` unless the key already holds a newer LSN.
    pub fn put_validate(&self, key: &[u8], v: Version, snaps: &Snapshots) -> PutOutcome {
        match &self.0 {
            Kind::Ordered(t) => t.put_validate(key, v, snaps),
            Kind::Hybrid { hash, updates } => {
                let t0 = sample().then(Instant::now);
                // Even a stale version is queued: the tree keeps it too if a snapshot
                // can see it (`node::update`).
                let out = hash.put_validate(key, key_hash(key), v.clone(), snaps);
                updates.push(super::thread_no(), IKey::new(key), v);
                if let Some(t0) = t0 {
                    let c = &updates.shared.costs;
                    c.write_n.fetch_add(1, Ordering::Relaxed);
                    c.write_ns.fetch_add(elapsed_ns(t0), Ordering::Relaxed);
                }
                out
            }
        }
    }

    /// Builds the index from `entries`, sorted by key with no duplicates (recovery).
    /// Replaces the contents; call it before the index is shared.
    pub fn bulk_load(&self, entries: impl IntoIterator<Item = (IKey, Version)>) {
        match &self.0 {
            Kind::Ordered(t) => t.bulk_load(entries),
            Kind::Hybrid { hash, updates } => {
                let mut key = Vec::new();
                hash.clear();
                updates
                    .shared
                    .tree
                    .bulk_load(entries.into_iter().inspect(|(k, v)| {
                        k.write_to(&mut key);
                        hash.load(k.clone(), key_hash(&key), v.clone());
                    }));
            }
        }
    }

    /// Reads `key`'s versions with `f` from the part that serves point reads.
    fn read_key<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&super::node::SlotState) -> Option<R>,
    ) -> Option<R> {
        match &self.0 {
            Kind::Ordered(t) => t.read_key(key, f),
            Kind::Hybrid { hash, updates } => {
                if !sample() {
                    return hash.read(key, f);
                }
                let t0 = Instant::now();
                let r = hash.read(key, f);
                let c = &updates.shared.costs;
                c.get_n.fetch_add(1, Ordering::Relaxed);
                c.get_ns.fetch_add(elapsed_ns(t0), Ordering::Relaxed);
                r
            }
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

    /// Calls `f` with the newest version of `key` visible at `snap` (`None`: the
    /// newest of all) while its entry is read-locked — nothing is cloned, so `f`
    /// should only copy what it needs.
    pub fn with_version<R>(
        &self,
        key: &[u8],
        snap: Option<u64>,
        f: impl FnOnce(&Version) -> R,
    ) -> Option<R> {
        self.read_key(key, |s| match snap {
            None => Some(f(&s.cur)),
            Some(snap) => visible_ref(s, snap).map(f),
        })
    }

    /// Runs the ordered operation `f` on the tree; in a hybrid index, after fencing the
    /// queues, timed as one scan for the cost model.
    fn ordered<R>(&self, f: impl FnOnce(&Olc) -> R) -> R {
        match &self.0 {
            Kind::Ordered(t) => f(t),
            Kind::Hybrid { updates, .. } => {
                let t0 = Instant::now();
                let r = f(self.fenced_tree());
                let c = &updates.shared.costs;
                c.scan_n.fetch_add(1, Ordering::Relaxed);
                c.scan_ns.fetch_add(elapsed_ns(t0), Ordering::Relaxed);
                r
            }
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
        self.ordered(|t| t.collect_range(lo, hi, snap, max, out))
    }

    /// Like [`Index::collect_range`] in descending key order.
    pub fn collect_range_rev(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: u64,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Version)>,
    ) -> Option<Box<[u8]>> {
        self.ordered(|t| t.collect_range_rev(lo, hi, snap, max, out))
    }

    /// Visits every key with its newest version, in key order.
    pub fn for_each(&self, f: impl FnMut(&[u8], &Version)) {
        self.fenced_tree().for_each(f);
    }

    /// Returns once every put acknowledged before the call is in the ordered part
    /// (a no-op for an ordered-only index).
    pub fn wait_for_updates(&self) {
        if let Kind::Hybrid { updates, .. } = &self.0 {
            updates.fence();
        }
    }

    /// Queued updates not yet in the ordered part, and backend threads working (both
    /// 0 for an ordered-only index).
    #[must_use]
    pub fn backlog(&self) -> (u64, usize) {
        match &self.0 {
            Kind::Ordered(_) => (0, 0),
            Kind::Hybrid { updates, .. } => (updates.backlog(), updates.active_threads()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faststore::version::Val;
    use std::collections::BTreeMap;

    use crate::faststore::version::ver;

    fn keys_in(i: &Index, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<Box<[u8]>> {
        let mut out = Vec::new();
        i.collect_range(lo, hi, u64::MAX, usize::MAX, &mut out);
        out.into_iter().map(|(k, _)| k).collect()
    }

    /// Both kinds answer every operation alike, with and without backend threads
    /// (none: the queues are applied by writers when full and by the scans' fences).
    #[test]
    fn hybrid_answers_as_the_tree_does() {
        let snaps = Arc::new(Snapshots::default());
        for idx in [
            Index::new(),
            Index::hybrid(snaps.clone(), 4, 0),
            Index::hybrid(snaps.clone(), 4, 1),
        ] {
            let mut model = BTreeMap::new();
            let mut x = 7u64;
            for lsn in 1..30_000u64 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let k = format!("key{:05}", (x >> 33) % 5000).into_bytes();
                let v = lsn.to_le_bytes();
                idx.put_validate(&k, ver(lsn, 0, &v), &snaps);
                model.insert(k, lsn);
                if lsn % 997 == 0 {
                    // Ordered reads right after puts see all of them.
                    let lo = format!("key{:05}", (x >> 20) % 5000).into_bytes();
                    let want: Vec<&Vec<u8>> =
                        model.range(lo.clone()..).take(50).map(|e| e.0).collect();
                    let mut out = Vec::new();
                    idx.collect_range(
                        Bound::Included(&lo),
                        Bound::Unbounded,
                        u64::MAX,
                        50,
                        &mut out,
                    );
                    let got: Vec<&[u8]> = out.iter().map(|(k, _)| &k[..]).collect();
                    assert_eq!(got, want.iter().map(|k| &k[..]).collect::<Vec<_>>());
                }
            }
            assert_eq!(idx.len(), model.len());
            for (k, lsn) in &model {
                assert_eq!(idx.get(k).map(|v| v.lsn), Some(*lsn));
            }
            assert_eq!(idx.get(b"key99999"), None);
            let mut n = 0;
            idx.for_each(|k, v| {
                assert_eq!(model.get(k), Some(&v.lsn));
                n += 1;
            });
            assert_eq!(n, model.len());
            assert_eq!(idx.backlog().0, 0);
        }
    }

    /// Writers on their own queues race a scanner: every key a writer acknowledged
    /// before a scan began is in that scan, with at least that version.
    #[test]
    fn scans_see_every_put_acknowledged_before_them() {
        use std::sync::atomic::AtomicU64;
        const N: u64 = 40_000;
        let snaps = Arc::new(Snapshots::default());
        let idx = Arc::new(Index::hybrid(snaps.clone(), 2, 1));
        let lsn = Arc::new(AtomicU64::new(1));
        // acked[w] = how many keys writer w has acknowledged.
        let acked: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        std::thread::scope(|s| {
            for w in 0..2u64 {
                let (idx, lsn, acked, snaps) =
                    (idx.clone(), lsn.clone(), acked.clone(), snaps.clone());
                s.spawn(move || {
                    super::super::set_thread_log_slot(usize::try_from(w).unwrap_or(0));
                    for i in 0..N {
                        let k = format!("w{w}-{:08}", i.wrapping_mul(2_654_435_761) % N);
                        let l = lsn.fetch_add(1, Ordering::Relaxed);
                        idx.put_validate(k.as_bytes(), ver(l, 0, b"v"), &snaps);
                        acked[usize::try_from(w).unwrap_or(0)].store(i + 1, Ordering::Release);
                    }
                });
            }
            let (idx, acked) = (idx.clone(), acked.clone());
            s.spawn(move || {
                let mut scans = 0;
                loop {
                    let before: Vec<u64> =
                        acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
                    for (w, &n) in before.iter().enumerate() {
                        let probe = n.saturating_sub(1);
                        if n == 0 {
                            continue;
                        }
                        let k = format!("w{w}-{:08}", probe.wrapping_mul(2_654_435_761) % N);
                        let got = keys_in(
                            &idx,
                            Bound::Included(k.as_bytes()),
                            Bound::Included(k.as_bytes()),
                        );
                        assert_eq!(got.len(), 1, "scan missed acknowledged key {k}");
                    }
                    scans += 1;
                    if before.iter().all(|&n| n == N) {
                        break;
                    }
                }
                assert!(scans > 1);
            });
        });
        assert_eq!(idx.len(), 2 * usize::try_from(N).unwrap_or(0));
        assert_eq!(
            keys_in(&idx, Bound::Unbounded, Bound::Unbounded).len(),
            idx.len()
        );
    }

    /// A version stamped before a snapshot reaches the tree after a newer one stamped
    /// after it (queues applied out of order): the snapshot still reads it, through
    /// both parts.
    #[test]
    fn a_late_older_version_stays_visible_to_its_snapshot() {
        let snaps = Arc::new(Snapshots::default());
        let idx = Index::hybrid(snaps.clone(), 2, 0);
        let e1 = snaps.write_epoch();
        idx.put_validate(b"k", ver(1, e1, b"old"), &snaps);
        let snap = snaps.acquire();
        let e2 = snaps.write_epoch();
        assert!(e2 > snap);
        // The newer write wins the race into the index; the older one arrives late.
        let late = Index::hybrid(snaps.clone(), 2, 0);
        late.put_validate(b"k", ver(3, e2, b"new"), &snaps);
        assert_eq!(
            late.put_validate(b"k", ver(2, e1, b"mid"), &snaps),
            PutOutcome::Stale
        );
        assert_eq!(
            late.get_at(b"k", snap).map(|v| v.val),
            Some(Val::inline(b"mid"))
        );
        assert_eq!(late.get(b"k").map(|v| v.val), Some(Val::inline(b"new")));
        let mut out = Vec::new();
        late.collect_range(Bound::Unbounded, Bound::Unbounded, snap, 10, &mut out);
        assert_eq!(
            out.first().map(|(_, v)| v.val.clone()),
            Some(Val::inline(b"mid"))
        );
        assert_eq!(idx.get_at(b"k", snap).map(|v| v.lsn), Some(1));
        snaps.release(snap);
        // Without a snapshot a late version is dropped.
        late.put_validate(b"k", ver(2, e1, b"mid"), &snaps);
        let mut out = Vec::new();
        late.collect_range(Bound::Unbounded, Bound::Unbounded, e1, 10, &mut out);
        assert!(out.is_empty() || out.iter().all(|(_, v)| v.lsn == 2));
    }
}
