//! [`Engine`]: the state an open store shares between the API, the background threads
//! and iterators, with the lock or protocol that guards each field.
//!
//! Lock order (a thread holding one may take only those after it):
//! 1. `flush_lock` / `compact_lock` (job locks: one flush, one compaction at a time),
//!    then `slow_lock` (one slow-tier change at a time; a demotion holds
//!    `compact_lock` and then `slow_lock`, a slow-tier merge only `slow_lock`);
//! 2. a FastStore log slot (`FastStore::slots[i]`, held for one write; the switcher
//!    and iterators lock each slot in turn, never two at once);
//! 3. the stage-set lock inside [`StageSet`] (held while building the next stage set);
//! 4. the manifest's mutex (held for one edit: append, sync, apply);
//! 5. leaf-level locks inside an index, the allocator mutex, the snapshot registry's
//!    mutex and `poison` (leaves: nothing is taken while holding them).
//!
//! A writer holds its slot (2) and may take the stage-set lock (3) to switch only after
//! releasing the slot. The flush thread holds `flush_lock` (1), appends a manifest edit
//! (4), then takes the stage-set lock (3) after the edit is done — never the other way
//! round. A background job never waits for a log slot while holding (3) or (4), except
//! the freeze, which waits for each slot of the *old*, already frozen FastStore: a
//! writer holding such a slot only finishes its write, it takes no lock.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::background::Signal;
use super::load::{LoadMode, LoadTracker};
use super::options::Options;
use super::RecoveryInfo;
use crate::epoch::Snapshots;
use crate::error::{Error, Result};
use crate::faststore::{FastStore, IndexKind, Lsns, WriteCtx};
use crate::manifest::Manifest;
use crate::pmem::Pool;
use crate::stages::{StageSet, Stages};
use crate::table::builder::TableOptions;
use crate::value::{ValuePtr, ValueRef};
use crate::vlog;

/// Engine counters (monotonic since open). Each is an independent relaxed atomic.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub switches: AtomicU64,
    pub flushes: AtomicU64,
    pub compactions: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub compaction_bytes: AtomicU64,
    pub flush_micros: AtomicU64,
    pub compaction_micros: AtomicU64,
    pub stall_micros: AtomicU64,
    pub stalls: AtomicU64,
    pub moved_tables: AtomicU64,
    /// Log and user bytes of FastStores already flushed (live ones are in their slots).
    pub retired_log_bytes: AtomicU64,
    pub retired_user_bytes: AtomicU64,
    /// Compactions that cleaned the value log, their time, and what they moved.
    pub cleanings: AtomicU64,
    pub clean_micros: AtomicU64,
    pub cleaned_value_bytes: AtomicU64,
    /// Value-log segments released (no table points into them any more) and their bytes.
    pub released_segments: AtomicU64,
    pub released_segment_bytes: AtomicU64,
    /// Gets answered by the slow tier.
    pub slow_gets: AtomicU64,
    /// Demotions, the pool table bytes they moved, and their time.
    pub demotions: AtomicU64,
    pub demoted_bytes: AtomicU64,
    /// Slow-tier merges and splits, and their time.
    pub slow_merges: AtomicU64,
    pub slow_splits: AtomicU64,
    pub slow_micros: AtomicU64,
    /// Bytes written to the slow tier (demotions, merges, splits).
    pub slow_bytes_written: AtomicU64,
    /// Of which by demotions.
    pub slow_demote_bytes_written: AtomicU64,
}

/// The shared state of an open store.
pub(crate) struct Engine {
    /// What the background scrubber did (independent atomics; see `integrity/scrub.rs`).
    pub scrub: crate::integrity::scrub::ScrubCounters,
    /// Data directory. Immutable.
    pub dir: PathBuf,
    /// Options. Immutable.
    pub opts: Options,
    /// The fast-tier pool: internally synchronized (allocator mutex; chunk contents by
    /// ownership, see `pmem/persist.rs`).
    pub pool: Arc<Pool>,
    /// The published stage set; transitions serialized by its own lock.
    pub stages: StageSet,
    /// Serializes flushes (background thread and `flush_faststore`).
    pub flush_lock: Mutex<()>,
    /// Serializes compactions (background thread and `compact`).
    pub compact_lock: Mutex<()>,
    /// Serializes slow-tier changes (demotions, merges, splits).
    pub slow_lock: Mutex<()>,
    /// What slow-tier jobs need (`None` without a slow directory): immutable but for
    /// its atomics, its demotion cursor (under `slow_lock`) and `behind`.
    pub slow: Option<crate::slowtier::compact::Ctx>,
    /// Popularity tracking and placement policy (with a slow tier, unless it is off:
    /// `pin_fraction` 0 and key-order demotion). Internally synchronized.
    pub placement: Option<crate::placement::Placement>,

    /// Durable record of the stages; internally locked.
    pub manifest: Manifest,
    /// How tables are cut; `ids` is an atomic counter, the rest immutable.
    pub topts: TableOptions,
    /// LSN stripes (atomics, Algorithm 1).
    pub lsns: Lsns,
    /// Snapshot registry (internally locked).
    pub snaps: Arc<Snapshots>,
    /// Generation number of the next FastStore (atomic; taken under the stage lock).
    pub next_generation: AtomicU64,
    /// Set once by `close`; writes check it inside their slot (see `FastStore::write`).
    pub closed: AtomicBool,
    /// Why the store refuses writes; guarded by its mutex, mirrored by `poisoned`.
    pub poison: Mutex<Option<String>>,
    /// Fast check for `poison` (Release on set, Acquire on read).
    pub poisoned: AtomicBool,
    /// What recovery found. Immutable.
    pub recovery: RecoveryInfo,
    /// Counters (relaxed atomics).
    pub counters: Counters,
    /// Index bytes of the active FastStore, published by writers in coarse steps;
    /// reset by the switcher. Atomic.
    pub active_bytes: AtomicU64,
    /// Log bytes of the active FastStore, published and reset the same way.
    pub active_log_bytes: AtomicU64,
    /// Log bytes at which the active FastStore is switched (resolved option). Immutable.
    pub log_capacity: u64,
    /// Log bytes at which it is switched while writes dominate
    /// (`faststore_write_heavy_factor` × `log_capacity`, at most a quarter of the
    /// pool, never below `log_capacity`). Immutable.
    pub log_capacity_write_heavy: u64,
    /// A background flush or compaction ran out of pool space (atomic flag).
    pub space_blocked: AtomicBool,
    /// Read:write mix (atomics and its own mutex).
    pub load: LoadTracker,
    /// Wakes and stops the background threads.
    pub bg: Signal,
    /// Held for the life of the store: the lock file (`LOCK`).
    pub _lock: std::fs::File,
    /// Held for the life of the store: the slow directory's lock file.
    pub _slow_lock: Option<std::fs::File>,
}

/// Bytes of index growth a slot accumulates before publishing them to the shared
/// counter (keeps the shared cache line cold): 1/64 of the capacity, 1–256 KiB.
pub(crate) fn publish_bytes(capacity: u64) -> u64 {
    (capacity / 64).clamp(1024, 256 * 1024)
}

impl Engine {
    /// The index and log bytes at which the active FastStore is switched now: the
    /// configured capacities, times `faststore_write_heavy_factor` while writes
    /// dominate (FluidKV §4.4, `load.rs`).
    pub fn switch_capacity(&self) -> (u64, u64) {
        if self.opts.faststore_write_heavy_factor > 1 && self.load.mode() == LoadMode::WriteHeavy {
            let f = u64::from(self.opts.faststore_write_heavy_factor);
            (
                self.opts.faststore_capacity.saturating_mul(f),
                self.log_capacity_write_heavy,
            )
        } else {
            (self.opts.faststore_capacity, self.log_capacity)
        }
    }

    /// Refuses writes for the rest of this open: an I/O error left the state unknown.
    pub(crate) fn poison(&self, e: &Error) {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }

    /// StableStore bytes (with their separated values) the pool keeps before demoting:
    /// `Options::fast_budget`, or a quarter of this pool (whatever `pool_size` says: an
    /// existing pool keeps its size).
    pub(crate) fn fast_budget(&self) -> u64 {
        match self.opts.fast_budget {
            0 => self.pool.chunk_count() * self.pool.chunk_size() / 4,
            b => b,
        }
    }

    /// `Closed` or `Poisoned` if the store takes no writes.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.poisoned.load(Ordering::Acquire) {
            let why = self.poison.lock().clone().unwrap_or_default();
            return Err(Error::Poisoned(why));
        }
        Ok(())
    }

    /// `Closed` once the store is closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// What a FastStore write needs from the engine.
    pub(crate) fn write_ctx(&self) -> WriteCtx<'_> {
        WriteCtx {
            lsns: &self.lsns,
            snaps: &self.snaps,
            closed: &self.closed,
            inline_threshold: self.opts.inline_threshold,
            pack_limit: self
                .opts
                .pack_log_entries
                .then_some(self.opts.inline_threshold),
            publish_step: publish_bytes(self.opts.faststore_capacity),
        }
    }

    /// A fresh FastStore with the next generation number (its index as
    /// `Options::hash_index` says).
    pub(crate) fn new_faststore(&self) -> FastStore {
        let gen = self.next_generation.fetch_add(1, Ordering::AcqRel);
        FastStore::with_group(
            &self.pool,
            gen,
            self.opts.log_slots,
            self.opts.sync_group_size,
            &index_kind(&self.opts, &self.snaps),
        )
    }

    /// Freezes `old` (if still active) and installs a new active FastStore; `old`
    /// stays readable as the newest immutable stage (FluidKV Algorithm 3, lines 1–5).
    /// With `wait = false` gives up if another transition holds the stage lock.
    ///
    /// The size counters restart before the new FastStore is published, so every
    /// byte written into it is counted; bytes of writes still finishing on `old` may
    /// be counted too (an early switch, never a late one).
    pub(crate) fn switch(&self, old: &Arc<FastStore>, wait: bool) -> bool {
        let switched = self.stages.freeze(old, wait, || {
            self.active_bytes.store(0, Ordering::Release);
            self.active_log_bytes.store(0, Ordering::Release);
            self.new_faststore()
        });
        if switched {
            self.counters.switches.fetch_add(1, Ordering::Relaxed);
            self.bg.wake();
        }
        switched
    }

    /// Point lookup through `stages`, newest stage first (FluidKV Algorithm 2): the
    /// value of `key` as of snapshot `snap` (`None`: the newest) into `out`; false if
    /// the key is absent or deleted. `out` is cleared first and not reallocated when
    /// it has room, and nothing else is allocated: the FastStore copies an inline value
    /// under its leaf lock, a table hands out the value borrowed from its verified data
    /// block, and a separated value is read (and verified) into `out` after any lock
    /// is released.
    pub(crate) fn lookup_into(
        &self,
        stages: &Stages,
        key: &[u8],
        snap: Option<u64>,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let mut slow = false;
        let found = 'found: {
            for fs in stages.fast() {
                if let Some(f) = fs
                    .index()
                    .with_version(key, snap, |v| take(v.val.as_value_ref(), out))
                {
                    break 'found Some(f);
                }
            }
            for t in &stages.buffer {
                if let Some(f) = t.tables.get_with(key, true, |v| take(v, out))? {
                    break 'found Some(f);
                }
            }
            if let Some(f) =
                stages
                    .stable
                    .tables()
                    .get_with(key, self.opts.stable_filters, |v| take(v, out))?
            {
                break 'found Some(f);
            }
            let f = stages.slow.get_with(key, |v| take(v, out))?;
            if f.is_some() {
                self.counters.slow_gets.fetch_add(1, Ordering::Relaxed);
                slow = true;
            }
            f
        };
        if let (Some(p), Some(Found::Copied | Found::Separated(_))) = (&self.placement, &found) {
            p.note_get(key, slow);
        }
        match found {
            None | Some(Found::Deleted) => Ok(false),
            Some(Found::Copied) => Ok(true),
            Some(Found::Separated(p)) => vlog::read_into(&self.pool, key, p, out).map(|()| true),
        }
    }

    /// Turns a stage's value into bytes (reading and verifying the log record of a
    /// separated value). `None` for a tombstone.
    pub(crate) fn resolve(&self, key: &[u8], v: ValueRef<'_>) -> Result<Option<Vec<u8>>> {
        match v {
            ValueRef::Tombstone => Ok(None),
            ValueRef::Inline(b) => Ok(Some(b.to_vec())),
            ValueRef::Separated(p) => vlog::read(&self.pool, key, p).map(Some),
        }
    }

    /// Persists every log record written so far (all threads, every live FastStore).
    pub(crate) fn sync_all_logs(&self) -> Result<()> {
        let stages = self.stages.load();
        for fs in stages.fast() {
            fs.for_each_slot(|s| s.writer.sync())?;
        }
        Ok(())
    }

    /// Persists and seals every FastStore log (a clean close; nothing is appended
    /// afterwards): replay then reports any damaged record in them as corruption.
    /// At a clean close, after the logs are sealed: a checkpoint of the FastStore
    /// index for the next open (`faststore/checkpoint.rs`). An immutable FastStore
    /// still waiting for its flush is flushed first (what the background thread would
    /// have done next; it appends nothing to the sealed logs), so that the active one
    /// holds everything unflushed.
    pub(crate) fn write_checkpoint(&self) -> Result<bool> {
        while super::flush::flush_oldest(self)? {}
        let stages = self.stages.load();
        if !stages.immutable.is_empty() {
            return Ok(false);
        }
        crate::faststore::checkpoint::write(&self.pool, &stages.active, self.lsns.max_issued())
    }

    pub(crate) fn seal_all_logs(&self) -> Result<()> {
        let stages = self.stages.load();
        for fs in stages.fast() {
            fs.for_each_slot(|s| s.writer.seal())?;
        }
        Ok(())
    }
}

/// What a stage's lookup found, once its lock or block borrow has ended.
enum Found {
    Deleted,
    /// An inline value, already copied into the caller's buffer.
    Copied,
    Separated(ValuePtr),
}

fn take(v: ValueRef<'_>, out: &mut Vec<u8>) -> Found {
    match v {
        ValueRef::Tombstone => Found::Deleted,
        ValueRef::Inline(b) => {
            out.clear();
            out.extend_from_slice(b);
            Found::Copied
        }
        ValueRef::Separated(p) => Found::Separated(p),
    }
}

/// The FastStore index `opts` asks for.
pub(crate) fn index_kind(opts: &Options, snaps: &Arc<Snapshots>) -> IndexKind {
    if opts.hash_index {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        IndexKind::Hybrid {
            snaps: snaps.clone(),
            threads: cores.saturating_sub(1).max(1),
        }
    } else {
        IndexKind::Ordered
    }
}
