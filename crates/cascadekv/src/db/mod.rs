//! The embedded API: [`Db`] — a thin façade over the stages.
//!
//! `Db` is `Send + Sync`; share it between threads by reference or `Arc`. Every method
//! takes `&self`. Writes from one thread go to that thread's exclusive log.
//!
//! * Write path: FluidKV Algorithm 1, in `FastStore::write` (`faststore/write.rs`);
//!   this module only retries when the FastStore was frozen meanwhile, slows writers
//!   down when too many FastStores wait for the flush thread, poisons the store on an
//!   I/O error and switches the FastStore when it is full.
//! * Read path (Algorithm 2): active FastStore, immutable FastStores newest first,
//!   buffer-trees newest first, StableStore; the first stage that knows the key
//!   (tombstones included) answers.
//! * Data flow (Algorithm 3): the stage set and its transitions are `stages.rs`;
//!   the background jobs that drive them are `flush.rs`, `compact.rs` and
//!   `background.rs`; the read:write mix that sets their thresholds is `load.rs`.
//!
//! Files: `engine.rs` (shared state and its guards), `open.rs` and `recovery.rs`,
//! `iter.rs` and `snapshot.rs` (consistent reads), `stats.rs`, `options.rs`, `batch.rs`.

mod background;
mod batch;
mod compact;
pub(crate) mod engine;
mod flush;
mod iter;
mod load;
mod open;
mod options;
mod promote;
pub(crate) mod recovery;
mod slow;
#[cfg(test)]
mod switch_tests;

pub(crate) use open::take_lock;
mod snapshot;
mod stats;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub use batch::{BatchOp, WriteBatch};
pub use iter::DbIter;
pub(crate) use open::open_private_pool;
pub use options::{DemotionPolicy, Durability, Options};
pub use snapshot::Snapshot;
pub use stats::Stats;

use crate::error::{Error, Result};
use crate::faststore::{Op, Written};
use engine::Engine;

/// What recovery found at open. New fields may be added in any release.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RecoveryInfo {
    /// The previous session closed cleanly.
    pub clean_shutdown: bool,
    /// The pool was created by this open.
    pub created: bool,
    /// Logs read.
    pub logs: u64,
    /// Records applied.
    pub records: u64,
    /// Records of cut-off batches that were dropped.
    pub torn_batch_records: u64,
    /// Tables (LSTs) the manifest lists.
    pub tables: u64,
    /// Wall time of the log replay.
    pub replay_micros: u64,
    /// The FastStore index was loaded from the checkpoint of a clean close instead of
    /// replaying the logs (`records` then counts the entries loaded).
    pub from_checkpoint: bool,
    /// Slow-tier files no manifest named, removed (a job that crashed before its edit).
    pub slow_orphans: u64,
    /// Sync-journal blocks whose bytes were written back into the pool's logs before
    /// they were read (a crash left them only in the journal, or in both).
    pub journal_blocks_redone: u64,
}

/// A CascadeKV database.
pub struct Db {
    engine: Arc<Engine>,
    /// Background thread handles, joined by `close`.
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.engine.dir)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (or creates) the store in `dir`, replaying its logs.
    ///
    /// # Errors
    /// `NotAStore`, `Locked`, `UnsupportedVersion`, `InvalidArgument` (options),
    /// `Corruption` (damaged store: the message names the file, offset and structure
    /// and says to run `cascade verify`), `Io`.
    pub fn open(dir: impl Into<PathBuf>, opts: Options) -> Result<Db> {
        let dir = dir.into();
        let engine = Arc::new(open::open(dir.clone(), opts).map_err(|e| refused(&dir, e))?);
        let threads = if engine.opts.background {
            background::start(&engine)?
        } else {
            Vec::new()
        };
        Ok(Db {
            engine,
            threads: Mutex::new(threads),
        })
    }

    /// Opens the store with its pool mapped copy-on-write and no background threads:
    /// recovery and reads work as usual, and nothing reaches the files (what
    /// `cascade verify` reads a store through).
    pub(crate) fn open_private(dir: impl Into<PathBuf>, mut opts: Options) -> Result<Db> {
        opts.background = false;
        let engine = Arc::new(open::open_with(dir.into(), opts, true)?);
        Ok(Db {
            engine,
            threads: Mutex::new(Vec::new()),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.engine.opts
    }

    /// What recovery did at open.
    pub fn recovery_info(&self) -> &RecoveryInfo {
        &self.engine.recovery
    }

    /// Sets `key` to `value` with the default durability.
    ///
    /// # Errors
    /// `InvalidArgument` (key or value size), `PoolFull`, `Closed`, `Poisoned`, `Io`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_with(key, value, self.engine.opts.durability)
    }

    /// Sets `key` to `value`.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn put_with(&self, key: &[u8], value: &[u8], d: Durability) -> Result<()> {
        self.engine.opts.check_key(key)?;
        self.engine.opts.check_value(value)?;
        self.write_ops(&[(key, Some(value))], false, d)
    }

    /// Deletes `key` with the default durability (deleting a missing key is fine).
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_with(key, self.engine.opts.durability)
    }

    /// Deletes `key`.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn delete_with(&self, key: &[u8], d: Durability) -> Result<()> {
        self.engine.opts.check_key(key)?;
        self.write_ops(&[(key, None)], false, d)
    }

    /// Applies a batch atomically with the default durability.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_with(batch, self.engine.opts.durability)
    }

    /// Applies a batch atomically: after a crash all of it or none is visible.
    ///
    /// # Errors
    /// As [`Db::put`]; nothing of the batch is applied on error.
    pub fn write_with(&self, batch: &WriteBatch, d: Durability) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut ops: Vec<Op<'_>> = Vec::with_capacity(batch.len());
        for op in batch.ops() {
            match op {
                BatchOp::Put(k, v) => {
                    self.engine.opts.check_key(k)?;
                    self.engine.opts.check_value(v)?;
                    ops.push((k, Some(v)));
                }
                BatchOp::Delete(k) => {
                    self.engine.opts.check_key(k)?;
                    ops.push((k, None));
                }
            }
        }
        if u32::try_from(ops.len()).is_err() {
            return Err(Error::invalid("batch has more than 2^32-1 operations"));
        }
        self.write_ops(&ops, true, d)
    }

    fn write_ops(&self, ops: &[Op<'_>], batch: bool, d: Durability) -> Result<()> {
        let e = &*self.engine;
        let mut stalled: Option<Instant> = None;
        // While stalled, the background threads run at normal priority (`priority.rs`).
        let mut stall_guard: Option<crate::priority::StallGuard> = None;
        loop {
            e.check_writable()?;
            let stages = e.stages.load();
            // Memory budget: too many FastStores wait for the flush thread; slow the
            // writer down gradually (never blocks forever: a failed flush poisons).
            if e.opts.background && stages.immutable.len() >= e.opts.max_immutable_faststores {
                if e.space_blocked.load(Ordering::Acquire) {
                    // Out of space: puts fail at once; deletes go on (they free space
                    // once flushed), past the memory budget if need be.
                    if ops.iter().any(|(_, v)| v.is_some()) {
                        return Err(Error::PoolFull {
                            chunks: e.pool.chunk_count(),
                            wanted: 1,
                        });
                    }
                } else {
                    drop(stages);
                    stall_a_little(e, &mut stalled, &mut stall_guard);
                    continue;
                }
            }
            // The slow tier is behind and the pool half full: wait for demotion to
            // make room (`db/slow.rs`) rather than fill the pool.
            if slow::behind(e) && !e.poisoned.load(Ordering::Acquire) {
                drop(stages);
                stall_a_little(e, &mut stalled, &mut stall_guard);
                continue;
            }
            stall_guard = None;
            if let Some(t) = stalled.take() {
                let waited = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
                e.counters.stalls.fetch_add(1, Ordering::Relaxed);
                e.counters.stall_micros.fetch_add(waited, Ordering::Relaxed);
            }
            let fs = &stages.active;
            let sync = d == Durability::Sync;
            let (dram, log) = match fs.write(&e.write_ctx(), ops, batch, sync) {
                Ok(Written::Done { dram, log }) => (dram, log),
                Ok(Written::Retry) => {
                    std::thread::yield_now();
                    continue;
                }
                Err(err) => {
                    if matches!(err, Error::Io { .. } | Error::Internal(_)) {
                        e.poison(&err);
                    }
                    return Err(err);
                }
            };
            e.load.note_write();
            if let Some(p) = &e.placement {
                for (k, _) in ops {
                    p.note_put(k);
                }
            }
            if dram > 0 || log > 0 {
                let d = e.active_bytes.fetch_add(dram, Ordering::AcqRel) + dram;
                let l = e.active_log_bytes.fetch_add(log, Ordering::AcqRel) + log;
                let (dram_cap, log_cap) = e.switch_capacity();
                if d >= dram_cap || l >= log_cap {
                    // Past twice its capacity the writer waits for the stage lock: a
                    // transition that holds it (a background switch or install,
                    // preempted on a loaded host) must not let the active FastStore
                    // grow without bound. Before this, one CI run (session 18) put
                    // ~10x the capacity into one FastStore.
                    let wait = d >= dram_cap.saturating_mul(2) || l >= log_cap.saturating_mul(2);
                    let fs = fs.clone();
                    drop(stages);
                    e.switch(&fs, wait);
                }
            }
            return Ok(());
        }
    }

    /// The value of `key`, or `None`.
    ///
    /// # Errors
    /// `InvalidArgument` (key size), `Closed`, `Corruption`/`ChecksumMismatch` when the
    /// bytes holding this key's value are damaged (never wrong data).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Like [`Db::get`], but copies the value into `out` (cleared first) and returns
    /// whether the key was found: a reader that reuses `out` allocates nothing per
    /// read (the role of RocksDB's `PinnableSlice`). `out` is left empty when the key
    /// is absent; its contents are unspecified after an error.
    ///
    /// # Errors
    /// As [`Db::get`].
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let e = &*self.engine;
        e.opts.check_key(key)?;
        e.check_open()?;
        e.load.note_read();
        let found = e.lookup_into(&e.stages.load(), key, None, out)?;
        if !found {
            out.clear();
        }
        Ok(found)
    }

    /// Persists every log record written so far (all threads). After it returns,
    /// all earlier `Buffered` writes survive power loss (RocksDB's `SyncWAL`).
    ///
    /// # Errors
    /// `Closed`, `Io` (the store is then poisoned).
    pub fn sync(&self) -> Result<()> {
        self.engine.check_open()?;
        self.engine
            .sync_all_logs()
            .inspect_err(|e| self.engine.poison(e))
    }

    /// Persists every log record the calling thread has written (its slot in each live
    /// FastStore): group commit for a thread that made several `Buffered` writes and
    /// wants them all durable with one flush + fence. Records of other threads that
    /// share the slot ([`crate::set_thread_log_slot`]) are persisted too: when such a
    /// thread's persist already covers this thread's records, this waits for it instead
    /// of fencing again, and the fence runs without the slot's lock, so the others keep
    /// appending meanwhile (one fence per slot at a time: who arrives during one fences
    /// all that was appended meanwhile right after it).
    ///
    /// # Errors
    /// `Closed`, `Io` (the store is then poisoned).
    pub fn sync_thread(&self) -> Result<()> {
        self.engine.check_open()?;
        let stages = self.engine.stages.load();
        for fs in stages.fast() {
            if let Err(e) = fs.sync_my_slot() {
                self.engine.poison(&e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Moves everything in FastStores into LSTs now: switches the active FastStore (if
    /// it holds anything) and flushes every immutable one before returning. Reads and
    /// writes continue meanwhile.
    ///
    /// # Errors
    /// `Closed`, `PoolFull`, `Io`.
    pub fn flush_faststore(&self) -> Result<()> {
        let e = &*self.engine;
        e.check_open()?;
        let active = e.stages.load().active.clone();
        if !active.index().is_empty() {
            e.switch(&active, true);
        }
        while flush::flush_oldest(e)? {}
        e.stages.sweep();
        e.pool.free_released()?;
        Ok(())
    }

    /// Compacts every buffer-tree into StableStore now (whatever the load-aware
    /// threshold), cleaning the value log's victims on the way; with no buffer-tree
    /// waiting, runs one cleaning of the value log if it has victims. With a slow tier,
    /// then demotes what StableStore holds beyond the fast budget and runs every due
    /// slow-tier merge. Returns false if there was nothing to do.
    ///
    /// # Errors
    /// `Closed`, `PoolFull`, `Io`, `Corruption` (a damaged input table or value).
    pub fn compact(&self) -> Result<bool> {
        self.engine.check_open()?;
        let mut done = compact::compact_now(&self.engine)?;
        // With a slow tier: demote what is over the fast budget, then every due merge,
        // then promotions if the read trigger wants them (and again, for the room
        // they take).
        loop {
            while slow::demote(&self.engine, true)? || slow::merge_step(&self.engine, false)? {
                done = true;
            }
            if !promote::promote(&self.engine)? {
                break;
            }
            done = true;
        }
        self.engine.stages.sweep();
        self.engine.pool.free_released()?;
        Ok(done)
    }

    /// Closes the store: persists and seals all logs, marks a clean shutdown. Later calls on
    /// this handle return [`Error::Closed`]. Dropping a `Db` closes it too.
    ///
    /// # Errors
    /// `Io` while persisting.
    pub fn close(&self) -> Result<()> {
        let e = &*self.engine;
        if e.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        e.bg.stop();
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
        // Waits for in-flight writes (they hold their slot) and persists them.
        e.sync_all_logs()?;
        if e.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        // Writers check `closed` under their slot lock, so nothing is appended after
        // this: every log ends in a seal, the durable evidence replay checks against.
        e.seal_all_logs()?;
        if e.opts.checkpoint_at_close {
            // Optional: if it cannot be written (no room, a full disk), the next open
            // replays the logs. A half-written one fails its checksum there and is
            // freed; a real I/O failure of the pool shows in the sync below.
            let _ = e.write_checkpoint();
        }
        e.pool.mem().sync_all()?;
        e.pool.allocator().set_clean(e.pool.mem(), true)
    }
}

/// A damaged store is refused with what to do next: `Corruption` whose reason names the
/// damage and the two tools (a checksum mismatch is folded into the reason).
fn refused(dir: &std::path::Path, e: Error) -> Error {
    let (file, offset, what) = match e {
        Error::Corruption {
            file,
            offset,
            reason,
        } => (file, offset, reason),
        Error::ChecksumMismatch {
            file,
            offset,
            expected,
            actual,
        } => (
            file,
            offset,
            format!("checksum mismatch (stored {expected:#010x}, computed {actual:#010x})"),
        ),
        other => return other,
    };
    Error::Corruption {
        file,
        offset,
        reason: format!(
            "{what}; the store was not opened: run `cascade verify --dir {d}` to list every \
             damaged record, then `cascade repair --dir {d}` to salvage the intact data",
            d = dir.display()
        ),
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// One wait of a stalled writer: wakes the background threads (at normal priority
/// while `guard` is held, `priority.rs`) and sleeps a quarter of the time waited so
/// far, 20 µs to 2 ms; `stalled` keeps when the stall began.
fn stall_a_little(
    e: &Engine,
    stalled: &mut Option<Instant>,
    guard: &mut Option<crate::priority::StallGuard>,
) {
    let t = *stalled.get_or_insert_with(Instant::now);
    guard.get_or_insert_with(crate::priority::StallGuard::new);
    e.bg.wake();
    let waited = crate::coding::micros(t.elapsed());
    std::thread::sleep(Duration::from_micros((waited / 4).clamp(20, 2000)));
}
