//! The embedded API: [`Db`].
//!
//! `Db` is `Send + Sync`; share it between threads by reference or `Arc`. Every method
//! takes `&self`. Writes from one thread go to that thread's exclusive log.
//!
//! Write path (FluidKV Algorithm 1): lock this thread's log slot in the active
//! FastStore → take an LSN from the key's stripe → if the FastStore was frozen
//! meanwhile, retry on the new one → append the record → (Sync) flush + fence →
//! `put_validate` into the index → unlock. Holding the slot for the whole write is
//! what lets the FastStore switch and snapshot creation wait for in-flight writes.
//!
//! Read path (Algorithm 2): active FastStore, immutable FastStores newest first,
//! buffer-trees newest first, StableStore; the first stage that knows the key
//! (tombstones included) answers.
//!
//! Data flow (Algorithm 3): a full FastStore is frozen and replaced; a background
//! thread flushes it into LSTs and a buffer-tree (`flush.rs`); another compacts
//! buffer-trees into StableStore (`compact.rs`) when the load-aware threshold is
//! reached (`load.rs`). Every stage change is persisted in the manifest first, then
//! published as a new [`Stages`] value; readers keep whatever `Stages` they loaded, so
//! structures are torn down only when the last reader lets go of them.

mod background;
mod batch;
mod compact;
mod flush;
mod iter;
mod load;
mod lsn;
mod open;
mod options;
mod stats;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

pub use batch::{BatchOp, WriteBatch};
pub use iter::DbIter;
pub use options::{Durability, Options};
pub use stats::Stats;

pub use load::LoadMode;

use crate::bufferstore::BufferTree;
use crate::error::{Error, Result};
use crate::faststore::{entry_dram, FastStore, LogSlot, Val, Version};
use crate::log::record::{self, decode, Invalid, Kind, RecordIn};
use crate::manifest::Manifest;
use crate::pmem::Pool;
use crate::snapshot::Snapshots;
use crate::stablestore::TableSet;
use lsn::Lsns;

/// The stages a reader consults, newest first. Immutable: a change builds a new one.
#[derive(Debug)]
pub(crate) struct Stages {
    pub active: Arc<FastStore>,
    /// Immutable FastStores, newest first.
    pub immutable: Vec<Arc<FastStore>>,
    /// Buffer-trees, newest first.
    pub buffer: Vec<Arc<BufferTree>>,
    /// StableStore.
    pub stable: Arc<TableSet>,
}

impl Stages {
    /// FastStores, newest first.
    pub fn fast(&self) -> impl Iterator<Item = &Arc<FastStore>> {
        std::iter::once(&self.active).chain(self.immutable.iter())
    }
}

/// Engine counters (monotonic since open).
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
}

/// What recovery found at open.
#[derive(Debug, Clone, Default)]
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
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: Options,
    pub pool: Arc<Pool>,
    pub stages: ArcSwap<Stages>,
    /// Serializes stage changes (switch, flush install, compaction install).
    pub stage_lock: Mutex<()>,
    /// Serializes flushes (background thread and `flush_faststore`).
    pub flush_lock: Mutex<()>,
    /// Serializes compactions.
    pub compact_lock: Mutex<()>,
    pub manifest: Manifest,
    pub lst_ids: Arc<AtomicU64>,
    pub lsns: Lsns,
    pub snaps: Snapshots,
    pub next_generation: AtomicU64,
    pub closed: AtomicBool,
    pub poison: Mutex<Option<String>>,
    pub poisoned: AtomicBool,
    pub recovery: RecoveryInfo,
    pub counters: Counters,
    pub active_bytes: AtomicU64,
    /// A background flush or compaction ran out of pool space.
    pub space_blocked: AtomicBool,
    pub load: load::LoadTracker,
    pub bg: background::Signal,
    pub _lock: std::fs::File,
}

impl Inner {
    pub(crate) fn poison(&self, e: &Error) {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }
}

/// A CascadeKV database.
pub struct Db {
    inner: Arc<Inner>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

/// Bytes of index growth a slot accumulates before publishing them to the shared
/// counter (keeps the shared cache line cold): 1/64 of the capacity, 1–256 KiB.
fn publish_bytes(capacity: u64) -> u64 {
    (capacity / 64).clamp(1024, 256 * 1024)
}

impl Db {
    /// Opens (or creates) the store in `dir`, replaying its logs.
    pub fn open(dir: impl Into<PathBuf>, opts: Options) -> Result<Db> {
        let inner = Arc::new(open::open(dir.into(), opts)?);
        let threads = if inner.opts.background {
            background::start(&inner)?
        } else {
            Vec::new()
        };
        Ok(Db {
            inner,
            threads: Mutex::new(threads),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// What recovery did at open.
    pub fn recovery_info(&self) -> &RecoveryInfo {
        &self.inner.recovery
    }

    /// Sets `key` to `value` with the default durability.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_with(key, value, self.inner.opts.durability)
    }

    /// Sets `key` to `value`.
    pub fn put_with(&self, key: &[u8], value: &[u8], d: Durability) -> Result<()> {
        self.inner.opts.check_key(key)?;
        self.inner.opts.check_value(value)?;
        self.write_ops(&[(key, Some(value))], false, d)
    }

    /// Deletes `key` with the default durability (deleting a missing key is fine).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_with(key, self.inner.opts.durability)
    }

    /// Deletes `key`.
    pub fn delete_with(&self, key: &[u8], d: Durability) -> Result<()> {
        self.inner.opts.check_key(key)?;
        self.write_ops(&[(key, None)], false, d)
    }

    /// Applies a batch atomically with the default durability.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_with(batch, self.inner.opts.durability)
    }

    /// Applies a batch atomically: after a crash all of it or none is visible.
    pub fn write_with(&self, batch: &WriteBatch, d: Durability) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut ops: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(batch.len());
        for op in batch.ops() {
            match op {
                BatchOp::Put(k, v) => {
                    self.inner.opts.check_key(k)?;
                    self.inner.opts.check_value(v)?;
                    ops.push((k, Some(v)));
                }
                BatchOp::Delete(k) => {
                    self.inner.opts.check_key(k)?;
                    ops.push((k, None));
                }
            }
        }
        if u32::try_from(ops.len()).is_err() {
            return Err(Error::invalid("batch has more than 2^32-1 operations"));
        }
        self.write_ops(&ops, true, d)
    }

    fn check_writable(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.inner.poisoned.load(Ordering::Acquire) {
            let why = self.inner.poison.lock().clone().unwrap_or_default();
            return Err(Error::Poisoned(why));
        }
        Ok(())
    }

    fn write_ops(&self, ops: &[(&[u8], Option<&[u8]>)], batch: bool, d: Durability) -> Result<()> {
        let inner = &self.inner;
        let mut stalled: Option<std::time::Instant> = None;
        loop {
            self.check_writable()?;
            let stages = inner.stages.load();
            // Memory budget: too many FastStores wait for the flush thread; slow the
            // writer down gradually (never blocks forever: a failed flush poisons).
            if inner.opts.background
                && stages.immutable.len() >= inner.opts.max_immutable_faststores
            {
                if inner.space_blocked.load(Ordering::Acquire) {
                    return Err(Error::PoolFull {
                        chunks: inner.pool.chunk_count(),
                        wanted: 1,
                    });
                }
                let t = *stalled.get_or_insert_with(std::time::Instant::now);
                drop(stages);
                inner.bg.wake();
                let waited = t.elapsed().as_micros() as u64;
                std::thread::sleep(std::time::Duration::from_micros(
                    (waited / 4).clamp(20, 2000),
                ));
                continue;
            }
            if let Some(t) = stalled.take() {
                inner.counters.stalls.fetch_add(1, Ordering::Relaxed);
                inner
                    .counters
                    .stall_micros
                    .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
            let fs = &stages.active;
            let mut slot = fs.my_slot();
            if fs.is_frozen() {
                drop(slot);
                std::thread::yield_now();
                continue;
            }
            // LSNs are taken, then the frozen flag re-checked (both SeqCst): a write
            // that lands in this FastStore drew its LSN before the switch, so every
            // write to a newer FastStore has a larger LSN for the same key.
            let mut lsns = LsnBuf::default();
            for (k, _) in ops {
                lsns.push(inner.lsns.next(k));
            }
            if fs.is_frozen() || inner.closed.load(Ordering::Acquire) {
                continue;
            }
            let epoch = inner.snaps.write_epoch();
            let res = self.append_and_index(fs, &mut slot, ops, lsns.as_slice(), epoch, batch, d);
            let publish = match res {
                Ok(p) => p,
                Err(e) => {
                    if matches!(e, Error::Io { .. } | Error::Internal(_)) {
                        inner.poison(&e);
                    }
                    return Err(e);
                }
            };
            inner.load.note_write();
            drop(slot);
            if publish > 0 {
                let total = inner.active_bytes.fetch_add(publish, Ordering::AcqRel) + publish;
                if total >= inner.opts.faststore_capacity {
                    let fs = fs.clone();
                    drop(stages);
                    let _ = self.switch_faststore(&fs);
                }
            }
            return Ok(());
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn append_and_index(
        &self,
        fs: &FastStore,
        slot: &mut LogSlot,
        ops: &[(&[u8], Option<&[u8]>)],
        lsns: &[u64],
        epoch: u64,
        batch: bool,
        d: Durability,
    ) -> Result<u64> {
        let inner = &self.inner;
        let mut addrs = LsnBuf::default();
        if batch {
            let count = (ops.len() as u32).to_le_bytes();
            slot.writer.append(&RecordIn {
                kind: Kind::BatchHeader,
                lsn: 0,
                in_batch: false,
                key: &[],
                value: &count,
            })?;
        }
        for ((k, v), lsn) in ops.iter().zip(lsns) {
            let rec = RecordIn {
                kind: if v.is_some() { Kind::Put } else { Kind::Delete },
                lsn: *lsn,
                in_batch: batch,
                key: k,
                value: v.unwrap_or(&[]),
            };
            addrs.push(slot.writer.append(&rec)?);
        }
        if d == Durability::Sync {
            slot.writer.sync()?;
        }
        slot.user_bytes += ops
            .iter()
            .map(|(k, v)| (k.len() + v.map_or(0, <[u8]>::len)) as u64)
            .sum::<u64>();
        let before = slot.dram_bytes;
        for (((k, v), lsn), addr) in ops.iter().zip(lsns).zip(addrs.as_slice().iter().copied()) {
            let val = match v {
                None => Val::Tomb,
                Some(v) if v.len() <= inner.opts.inline_threshold => Val::inline(v),
                Some(v) => Val::Addr {
                    addr,
                    len: v.len() as u32,
                },
            };
            let dram = entry_dram(k.len(), &val);
            let outcome = fs.index().put_validate(
                k,
                Version {
                    lsn: *lsn,
                    epoch,
                    val,
                },
                &inner.snaps,
            );
            if outcome == crate::faststore::PutOutcome::Inserted {
                slot.dram_bytes += dram;
            }
        }
        // Publish growth to the shared counter in coarse steps.
        slot.unpublished += slot.dram_bytes - before;
        Ok(
            if slot.unpublished >= publish_bytes(inner.opts.faststore_capacity) {
                std::mem::take(&mut slot.unpublished)
            } else {
                0
            },
        )
    }

    /// Freezes `old` (if still active) and installs a new active FastStore; `old`
    /// stays readable as the newest immutable stage (FluidKV Algorithm 3, lines 1–5).
    /// Returns false if another thread holds the stage lock or `old` is not active.
    pub(crate) fn switch_faststore(&self, old: &Arc<FastStore>) -> bool {
        let inner = &self.inner;
        let Some(_g) = inner.stage_lock.try_lock() else {
            return false;
        };
        switch_locked(inner, old)
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.opts.check_key(key)?;
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.inner.load.note_read();
        let stages = self.inner.stages.load();
        for fs in stages.fast() {
            if let Some(v) = fs.index().get(key) {
                return self.resolve(key, &v.val);
            }
        }
        for t in &stages.buffer {
            if let Some(v) = t.tables.get(key)? {
                return self.resolve(key, &v);
            }
        }
        match stages.stable.get(key)? {
            Some(v) => self.resolve(key, &v),
            None => Ok(None),
        }
    }

    /// Turns an index value into bytes (reading and verifying the log record for
    /// key-value separated values).
    pub(crate) fn resolve(&self, key: &[u8], val: &Val) -> Result<Option<Vec<u8>>> {
        match val {
            Val::Tomb => Ok(None),
            Val::Addr { addr, len } => read_separated(&self.inner.pool, key, *addr, *len).map(Some),
            other => Ok(other.inline_bytes().map(<[u8]>::to_vec)),
        }
    }

    /// Like [`Db::resolve`], consuming the value (an inline heap value moves instead
    /// of being copied).
    pub(crate) fn resolve_owned(&self, key: &[u8], val: Val) -> Result<Option<Vec<u8>>> {
        match val {
            Val::Heap(b) => Ok(Some(b.into_vec())),
            other => self.resolve(key, &other),
        }
    }

    /// Persists every log record written so far (all threads). After it returns,
    /// all earlier `Buffered` writes survive power loss (RocksDB's `SyncWAL`).
    pub fn sync(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.sync_all_logs()
    }

    /// Persists every log record the calling thread has written (its slot in each live
    /// FastStore): group commit for a thread that made several `Buffered` writes and
    /// wants them all durable with one flush + fence. Records of other threads that
    /// share the slot are persisted too.
    pub fn sync_thread(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let stages = self.inner.stages.load();
        for fs in stages.fast() {
            let mut slot = fs.my_slot();
            if slot.writer.has_unsynced() {
                if let Err(e) = slot.writer.sync() {
                    self.inner.poison(&e);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn sync_all_logs(&self) -> Result<()> {
        let stages = self.inner.stages.load();
        for fs in stages.fast() {
            fs.for_each_slot(|s| s.writer.sync())?;
        }
        Ok(())
    }

    /// Moves everything in FastStores into LSTs now: switches the active FastStore (if
    /// it holds anything) and flushes every immutable one before returning. Reads and
    /// writes continue meanwhile.
    pub fn flush_faststore(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let active = self.inner.stages.load().active.clone();
        if !active.index().is_empty() {
            let _g = self.inner.stage_lock.lock();
            switch_locked(&self.inner, &active);
        }
        while flush::flush_oldest(&self.inner)? {}
        Ok(())
    }

    /// Compacts every buffer-tree into StableStore now (whatever the load-aware
    /// threshold). Returns false if there were no buffer-trees.
    pub fn compact(&self) -> Result<bool> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        compact::compact(&self.inner, 1)
    }

    /// Closes the store: persists all logs, marks a clean shutdown. Later calls on
    /// this handle return [`Error::Closed`]. Dropping a `Db` closes it too.
    pub fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.bg.stop();
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
        // Waits for in-flight writes (they hold their slot) and persists them.
        self.sync_all_logs()?;
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        self.inner.pool.mem().sync_all()?;
        self.inner
            .pool
            .allocator()
            .set_clean(self.inner.pool.mem(), true)
    }

    /// The pool (for tools and tests).
    pub fn pool(&self) -> &Arc<Pool> {
        &self.inner.pool
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Freezes `old` and installs a new active FastStore. Caller holds `stage_lock`.
pub(crate) fn switch_locked(inner: &Inner, old: &Arc<FastStore>) -> bool {
    let cur = inner.stages.load();
    if !Arc::ptr_eq(&cur.active, old) {
        return false;
    }
    let gen = inner.next_generation.fetch_add(1, Ordering::AcqRel);
    let fresh = Arc::new(FastStore::new(&inner.pool, gen, inner.opts.log_slots));
    old.freeze();
    let mut immutable = Vec::with_capacity(cur.immutable.len() + 1);
    immutable.push(old.clone());
    immutable.extend(cur.immutable.iter().cloned());
    inner.stages.store(Arc::new(Stages {
        active: fresh,
        immutable,
        buffer: cur.buffer.clone(),
        stable: cur.stable.clone(),
    }));
    inner.active_bytes.store(0, Ordering::Release);
    // Wait for writes still in flight on the old generation (they hold their slot).
    let _ = old.for_each_slot(|_| Ok::<(), ()>(()));
    inner.counters.switches.fetch_add(1, Ordering::Relaxed);
    inner.bg.wake();
    true
}

/// A list of u64 that stays on the stack for single writes (no allocation on the hot
/// path) and spills to the heap for batches.
#[derive(Default)]
struct LsnBuf {
    one: [u64; 1],
    len: usize,
    many: Vec<u64>,
}

impl LsnBuf {
    fn push(&mut self, v: u64) {
        if self.len == 0 {
            self.one[0] = v;
        } else {
            if self.len == 1 {
                self.many.push(self.one[0]);
            }
            self.many.push(v);
        }
        self.len += 1;
    }

    fn as_slice(&self) -> &[u64] {
        if self.len <= 1 {
            &self.one[..self.len]
        } else {
            &self.many
        }
    }
}

/// Reads and verifies the log record at `addr` (checksum, key, length) and returns its
/// value.
pub(crate) fn read_separated(pool: &Pool, key: &[u8], addr: u64, len: u32) -> Result<Vec<u8>> {
    let epoch = pool.epoch_at(addr);
    let max = record::encoded_len(record::MAX_KEY_LEN, len as usize, true);
    let avail = pool.mem().len().saturating_sub(addr).min(max);
    let bytes = pool.mem().read(addr, avail)?;
    match decode(bytes, epoch) {
        Ok(r) if r.value.len() == len as usize && r.key == key => Ok(r.value.to_vec()),
        Ok(_) => Err(Error::corruption(
            pool.path(),
            addr,
            "log record key or length differs from the index",
        )),
        Err(Invalid::Checksum { stored, actual }) => Err(Error::ChecksumMismatch {
            file: pool.path().to_path_buf(),
            offset: addr,
            expected: stored,
            actual,
        }),
        Err(why) => Err(Error::corruption(
            pool.path(),
            addr,
            format!("bad log record ({why:?})"),
        )),
    }
}
