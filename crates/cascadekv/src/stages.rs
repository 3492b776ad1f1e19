//! The stage set and its three transitions (FluidKV Algorithm 3).
//!
//! A [`Stages`] value is what a reader consults, newest first: the active FastStore,
//! the immutable FastStores waiting for a flush, the buffer-trees, the StableStore. It
//! is immutable; a transition builds the next one and publishes it with one atomic
//! store. A reader keeps whatever `Stages` it loaded for as long as it needs it, and
//! everything reachable from it (FastStore indexes, tables, their chunks) stays alive
//! through reference counts until the last such reader lets go — so teardown never
//! waits for readers and readers never see freed memory.
//!
//! The transitions, each under [`StageSet`]'s lock so that they see each other's
//! results:
//! * **freeze** (lines 1–5): the active FastStore becomes the newest immutable one and a
//!   fresh FastStore takes writes; then wait for writes still in flight on the old one
//!   (they hold their log slot, so locking each slot once is enough);
//! * **install a flush** (lines 6–16): an immutable FastStore is replaced by the
//!   buffer-tree built from it, in front of the older buffer-trees;
//! * **install a compaction** (lines 17–33): the buffer-trees it merged leave, and the
//!   StableStore becomes the old one minus the tables it replaced plus its output.
//!
//! The caller makes the change durable (manifest edit) *before* installing it, and
//! releases what it replaced (log segments, obsolete tables) only *after*.
//!
//! Retirement (issue #13, tail latency): a replaced `Stages` is not dropped by
//! whichever reader lets go of it last — that reader would free a whole flushed
//! FastStore index (hundreds of thousands of heap nodes) or hundreds of tables'
//! fence copies in the middle of a get; a server worker's clients all waited for it
//! (`perf` of the GET phase of `redis-benchmark -P 16 -c 50` caught workers freeing
//! `Fences` and waiting on the allocator's lock). Each transition keeps the stages it
//! replaced in `retired`; [`StageSet::sweep`] drops those no reader holds any more
//! (strong count 1: ours — the old value is no longer published, so no new reader
//! can take it). The background threads sweep every window (50 ms), so a retired
//! generation outlives its last reader by at most that; `Db::flush_faststore` and
//! `Db::compact` sweep before they free released pool space.
//!
//! Thread-safety: `current` is read lock-free by every reader and writer; `lock`
//! serializes the transitions (held by the writer that switches, the flush thread and
//! the compaction thread for the few microseconds of building the next value);
//! `retired` has its own mutex, taken by transitions and sweeps, never by readers.

use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use crate::bufferstore::BufferTree;
use crate::faststore::FastStore;
use crate::slowtier::SlowTier;
use crate::stablestore::StableStore;
use crate::table::Lst;

/// The stages a reader consults, newest first. Immutable: a change builds a new one.
#[derive(Debug)]
pub(crate) struct Stages {
    /// The FastStore taking writes.
    pub active: Arc<FastStore>,
    /// Immutable FastStores, newest first.
    pub immutable: Vec<Arc<FastStore>>,
    /// Buffer-trees, newest first.
    pub buffer: Vec<Arc<BufferTree>>,
    /// StableStore.
    pub stable: Arc<StableStore>,
    /// The slow tier (empty without a slow directory), consulted last.
    pub slow: Arc<SlowTier>,
}

impl Stages {
    /// FastStores, newest first.
    pub fn fast(&self) -> impl DoubleEndedIterator<Item = &Arc<FastStore>> {
        std::iter::once(&self.active).chain(self.immutable.iter())
    }
}

/// Retired stage sets past which a transition sweeps itself.
const RETIRED_CAP: usize = 64;

/// The current stage set and the lock that serializes its transitions.
#[derive(Debug)]
pub(crate) struct StageSet {
    /// The published stage set; replaced only under `lock`.
    current: ArcSwap<Stages>,
    /// Serializes freeze, flush install and compaction install.
    lock: Mutex<()>,
    /// Stage sets replaced by a transition, kept until no reader holds them.
    retired: Mutex<Vec<Arc<Stages>>>,
}

impl StageSet {
    /// The stage set recovery built.
    pub fn new(stages: Stages) -> Self {
        StageSet {
            current: ArcSwap::from_pointee(stages),
            lock: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
        }
    }

    /// Publishes `next` and retires the stages it replaces. A transition does not
    /// sweep (a writer that freezes would then pay for the frees) unless the list
    /// grew past [`RETIRED_CAP`], which only a store without background threads, or
    /// with readers that keep old stages (snapshots), reaches.
    fn publish(&self, next: Stages) {
        let old = self.current.swap(Arc::new(next));
        let len = {
            let mut retired = self.retired.lock();
            retired.push(old);
            retired.len()
        };
        if len > RETIRED_CAP {
            self.sweep();
        }
    }

    /// Drops the retired stage sets that no reader holds any more; returns how many
    /// are still held. The caller pays for the frees, so only transitions and the
    /// background threads call it.
    pub fn sweep(&self) -> usize {
        // Take the free ones out under the lock, drop them after releasing it.
        let free: Vec<Arc<Stages>> = {
            let mut retired = self.retired.lock();
            let (free, held) = std::mem::take(&mut *retired)
                .into_iter()
                .partition(|s| Arc::strong_count(s) == 1);
            *retired = held;
            free
        };
        drop(free);
        self.retired.lock().len()
    }

    /// The current stages, for a short read (no reference-count traffic).
    pub fn load(&self) -> Guard<Arc<Stages>> {
        self.current.load()
    }

    /// The current stages, to keep (iterators, compaction inputs).
    pub fn load_full(&self) -> Arc<Stages> {
        self.current.load_full()
    }

    /// Freeze: if `old` is still the active FastStore, freezes it, installs `fresh()`
    /// as the active one and waits for writes in flight on `old`. Returns false (and
    /// changes nothing) if `old` is no longer active or, with `wait = false`, if
    /// another transition holds the lock.
    pub fn freeze(
        &self,
        old: &Arc<FastStore>,
        wait: bool,
        fresh: impl FnOnce() -> FastStore,
    ) -> bool {
        let _g = if wait {
            self.lock.lock()
        } else {
            match self.lock.try_lock() {
                Some(g) => g,
                None => return false,
            }
        };
        let cur = self.current.load();
        if !Arc::ptr_eq(&cur.active, old) {
            return false;
        }
        old.freeze();
        let mut immutable = Vec::with_capacity(cur.immutable.len() + 1);
        immutable.push(old.clone());
        immutable.extend(cur.immutable.iter().cloned());
        let next = Stages {
            active: Arc::new(fresh()),
            immutable,
            buffer: cur.buffer.clone(),
            stable: cur.stable.clone(),
            slow: cur.slow.clone(),
        };
        drop(cur);
        self.publish(next);
        old.wait_for_writers();
        true
    }

    /// Holds the transition lock (tests of what writers do while a transition is
    /// slow).
    #[cfg(test)]
    pub fn hold_lock(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.lock.lock()
    }

    /// Installs a flush: `fs` leaves the immutable FastStores and `tree` becomes the
    /// newest buffer-tree.
    pub fn install_flush(&self, fs: &Arc<FastStore>, tree: Arc<BufferTree>) {
        let _g = self.lock.lock();
        let cur = self.current.load();
        let mut buffer = Vec::with_capacity(cur.buffer.len() + 1);
        buffer.push(tree);
        buffer.extend(cur.buffer.iter().cloned());
        let next = Stages {
            active: cur.active.clone(),
            immutable: cur
                .immutable
                .iter()
                .filter(|f| !Arc::ptr_eq(f, fs))
                .cloned()
                .collect(),
            buffer,
            stable: cur.stable.clone(),
            slow: cur.slow.clone(),
        };
        drop(cur);
        self.publish(next);
    }

    /// Installs a compaction: the buffer-trees with sequence numbers in `trees` leave,
    /// and StableStore loses the tables with ids in `removed` and gains `added`.
    /// Buffer-trees flushed while the compaction ran stay in front.
    pub fn install_compaction(
        &self,
        trees: &[u64],
        removed: &HashSet<u64>,
        added: impl IntoIterator<Item = Arc<Lst>>,
    ) {
        let _g = self.lock.lock();
        let cur = self.current.load();
        let next = Stages {
            active: cur.active.clone(),
            immutable: cur.immutable.clone(),
            buffer: cur
                .buffer
                .iter()
                .filter(|t| !trees.contains(&t.seq))
                .cloned()
                .collect(),
            stable: Arc::new(cur.stable.with_compaction(removed, added)),
            slow: cur.slow.clone(),
        };
        drop(cur);
        self.publish(next);
    }

    /// Installs a slow-tier change: StableStore loses the tables with ids in
    /// `removed` (a demotion) and gains `added` (the entries a demotion pinned in the
    /// fast tier), and `tier` builds the next slow tier from the current one. The
    /// caller serializes slow-tier changes (`Engine::slow_lock`), so `tier` sees every
    /// earlier one.
    pub fn install_slow(
        &self,
        removed: &HashSet<u64>,
        added: Vec<Arc<Lst>>,
        tier: impl FnOnce(&SlowTier) -> SlowTier,
    ) {
        let _g = self.lock.lock();
        let cur = self.current.load();
        let next = Stages {
            active: cur.active.clone(),
            immutable: cur.immutable.clone(),
            buffer: cur.buffer.clone(),
            stable: if removed.is_empty() && added.is_empty() {
                cur.stable.clone()
            } else {
                Arc::new(cur.stable.with_compaction(removed, added))
            },
            slow: Arc::new(tier(&cur.slow)),
        };
        drop(cur);
        self.publish(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faststore::IndexKind;
    use crate::pmem::test_pool;

    fn stages(pool: &Arc<crate::pmem::Pool>) -> Stages {
        Stages {
            active: Arc::new(FastStore::with_group(pool, 1, 1, 1, &IndexKind::Ordered)),
            immutable: Vec::new(),
            buffer: Vec::new(),
            stable: Arc::new(StableStore::new(Vec::new())),
            slow: Arc::default(),
        }
    }

    /// A replaced stage set outlives its last reader until a sweep, and a sweep
    /// frees exactly the retired sets no reader holds.
    #[test]
    fn retired_stages_are_freed_by_sweeps_not_by_readers() {
        let pool = test_pool();
        let set = StageSet::new(stages(&pool));
        let reader = set.load_full();
        let first = Arc::downgrade(&reader.active);
        let active = reader.active.clone();
        assert!(set.freeze(&active, true, || FastStore::with_group(
            &pool,
            2,
            1,
            1,
            &IndexKind::Ordered
        )));
        drop(active);
        // The reader still holds the first stage set: a sweep keeps it.
        assert_eq!(set.sweep(), 1);
        // The reader lets go; its drop frees nothing (the FastStore is also still
        // the immutable one of the current set, so check the stage set itself).
        let retired = Arc::downgrade(&reader);
        drop(reader);
        assert!(
            retired.upgrade().is_some(),
            "the reader's drop freed the stage set"
        );
        assert_eq!(set.sweep(), 0);
        assert!(retired.upgrade().is_none(), "the sweep did not free it");
        assert!(
            first.upgrade().is_some(),
            "the current set still has the FastStore"
        );
    }
}
