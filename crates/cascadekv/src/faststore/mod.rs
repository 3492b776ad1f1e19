//! FastStore: a concurrent DRAM range index plus thread-exclusive logs on the fast
//! tier (FluidKV §4.2, §5.1–5.2).
//!
//! A FastStore *generation* owns an [`Index`] and a fixed array of log slots. A writing
//! thread is bound to one slot for its lifetime (round-robin on first use), so with up
//! to `slots` writer threads every thread has a log of its own and no log tail is
//! shared; more threads than slots share slots through the slot's mutex, which stays
//! uncontended in the common case.
//!
//! With synchronous writes batched across threads (`Options::sync_group_size` > 1),
//! the generation also has [`group::GROUP_LOGS`] *group logs*: slots that no thread is
//! bound to, which the leader of a group borrows for the group's records (`group.rs`).
//! They sit after the thread slots, so `for_each_slot` and `wait_for_writers` lock them
//! last.
//!
//! Lifecycle: *active* (takes writes) → *frozen* (set by the switcher; writers that see
//! it retry on the new active FastStore) → *immutable* once every slot has been locked
//! and sealed by the switcher (no write can still be in flight). Readers may use any
//! generation at any time.
//!
//! Files: [`write`] is Algorithm 1 (LSN, log append, validated index insert,
//! accounting); [`index`] the index façade: [`olc`] the optimistic B+-tree with LSN
//! validation, alone or beside HiKV's hash index ([`hash`], updated through
//! [`updates`]); [`node`] the per-key version chain every index shares (and the
//! former B-link tree's nodes, [`tree`], kept only as the `index_candidates`
//! baseline); [`ikey`] the key representation; [`version`] what is stored per key;
//! [`lsn`] the LSN stripes.
//!
//! Thread-safety: `FastStore` is `Sync`. Each slot's `Mutex<LogSlot>` guards that
//! slot's log writer and counters; it is held for the whole of a write — LSN fetch, log
//! append, optional sync and index update — which is what lets the switcher and
//! snapshot creation wait for in-flight writes by locking every slot once. `frozen` is
//! an atomic set once by the switcher (`SeqCst`, ordered with the LSN draw).
//! `recovered` (mutex) and `recovered_bytes` (atomic) are written at open only.

pub(crate) mod checkpoint;
mod group;
mod hash;
pub(crate) mod ikey;
pub(crate) mod index;
pub(crate) mod lsn;
pub(crate) mod node;
pub(crate) mod olc;
mod slot_sync;
pub(crate) mod tree;
mod updates;
pub(crate) mod version;
mod write;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

pub use index::{Index, PutOutcome};
pub(crate) use lsn::Lsns;
pub(crate) use node::ENTRY_OVERHEAD;
pub use version::{Val, Version};
pub(crate) use write::{Op, WriteCtx, Written};

use crate::epoch::Snapshots;
use crate::log::LogWriter;
use crate::pmem::Pool;
use crate::vlog::Segment;

/// One thread's log and its accounting.
#[derive(Debug)]
pub(crate) struct LogSlot {
    /// The thread-exclusive log.
    pub writer: LogWriter,
    /// Estimated DRAM bytes this slot's writes added to the index.
    pub dram_bytes: u64,
    /// Part of `dram_bytes` not yet added to the store-wide counter.
    pub unpublished: u64,
    /// Log bytes written and not yet added to the store-wide counter.
    pub unpublished_log: u64,
    /// Key and value bytes written through this slot (for write amplification).
    pub user_bytes: u64,
    /// Scratch for the value of a packed record (`log/packed.rs`), kept to reuse.
    pub packed: Vec<u8>,
    /// Persist jobs of this log running without the lock (`slot_sync.rs`), and the
    /// tail the latest one covers up to.
    pub persisting: usize,
    /// See `persisting`.
    pub persisting_upto: (u64, u64),
}

#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

/// Which index a FastStore generation builds (`Options::hash_index`).
#[derive(Debug, Clone)]
pub(crate) enum IndexKind {
    /// The ordered index (`olc`) alone.
    Ordered,
    /// HiKV's hybrid index: hash part for point operations, the tree updated by up to
    /// `threads` backend threads; `snaps` is the store's snapshot registry.
    Hybrid {
        snaps: Arc<Snapshots>,
        threads: usize,
    },
}

/// One FastStore generation.
#[derive(Debug)]
pub(crate) struct FastStore {
    generation: u64,
    index: Index,
    slots: Box<[Padded<Mutex<LogSlot>>]>,
    /// Slots threads are bound to: `slots[..thread_slots]`; the rest are group logs.
    thread_slots: usize,
    /// One per slot: woken when a persist job of that slot ends (`slot_sync.rs`).
    slot_cvs: Box<[parking_lot::Condvar]>,
    frozen: AtomicBool,
    /// Log segments recovered into this generation at open (each with the
    /// generation's holder).
    recovered: Mutex<Vec<Arc<Segment>>>,
    /// Log bytes of the recovered segments (counts towards the log capacity).
    recovered_log_bytes: AtomicU64,
    /// DRAM estimate of recovered entries (not attributed to a slot).
    recovered_bytes: AtomicUsize,
    /// Horizontal batching of synchronous writes (`group.rs`; its own locks).
    group: group::Group,
}

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static THREAD_NO: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Binds the calling thread to log slot `n` (modulo the slot count) of every store it
/// writes to, instead of a slot of its own: threads bound to the same number share one
/// log. Their writes serialize on it, and [`crate::Db::sync_thread`] from any of them
/// persists it once for all, pipelined (`slot_sync.rs`) — a server whose workers
/// group-commit their rounds together. Call it before the thread's first write.
pub fn set_thread_log_slot(n: usize) {
    THREAD_NO.with(|c| c.set(Some(n)));
}

/// This thread's stable number (assigned on first use).
pub(crate) fn thread_no() -> usize {
    THREAD_NO.with(|c| {
        if let Some(n) = c.get() {
            n
        } else {
            let n = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            c.set(Some(n));
            n
        }
    })
}

impl FastStore {
    /// A new, empty generation with `slots` log slots on `pool`, whose synchronous
    /// writes are batched across threads in groups of at most `group` (1: each thread
    /// persists its own log), indexed by an `index` index.
    pub fn with_group(
        pool: &Arc<Pool>,
        generation: u64,
        slots: usize,
        group: usize,
        index: &IndexKind,
    ) -> Self {
        let n = slots.max(1);
        let group_logs = if group > 1 { group::GROUP_LOGS } else { 0 };
        let slots = (0..n + group_logs)
            .map(|_| {
                Padded(Mutex::new(LogSlot {
                    writer: LogWriter::new(pool.clone(), generation),
                    dram_bytes: 0,
                    unpublished: 0,
                    unpublished_log: 0,
                    user_bytes: 0,
                    packed: Vec::new(),
                    persisting: 0,
                    persisting_upto: (0, 0),
                }))
            })
            .collect();
        FastStore {
            generation,
            index: match index {
                IndexKind::Ordered => Index::new(),
                IndexKind::Hybrid { snaps, threads } => Index::hybrid(snaps.clone(), n, *threads),
            },
            slots,
            thread_slots: n,
            slot_cvs: (0..n).map(|_| parking_lot::Condvar::new()).collect(),
            frozen: AtomicBool::new(false),
            recovered: Mutex::new(Vec::new()),
            recovered_log_bytes: AtomicU64::new(0),
            recovered_bytes: AtomicUsize::new(0),
            group: group::Group::new(group),
        }
    }

    /// Generation number.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Locks the calling thread's log slot.
    pub fn my_slot(&self) -> MutexGuard<'_, LogSlot> {
        self.slots[self.my_slot_no()].0.lock()
    }

    /// The number of the calling thread's slot.
    fn my_slot_no(&self) -> usize {
        thread_no() % self.thread_slots
    }

    /// The group logs (module docs).
    fn group_logs(&self) -> &[Padded<Mutex<LogSlot>>] {
        &self.slots[self.thread_slots..]
    }

    /// Locks every slot in turn and runs `f` on it (flush, seal, snapshot barrier).
    pub fn for_each_slot<E>(
        &self,
        mut f: impl FnMut(&mut LogSlot) -> Result<(), E>,
    ) -> Result<(), E> {
        for s in &self.slots {
            f(&mut s.0.lock())?;
        }
        Ok(())
    }

    /// Waits until no write is in flight on this generation (locks each slot once).
    pub fn wait_for_writers(&self) {
        for s in &self.slots {
            drop(s.0.lock());
        }
    }

    /// Gives back the generation's holder on each of its log segments: called once the
    /// flush of this (frozen) generation is durable. Segments no table points into are
    /// freed when the last reader of this FastStore lets go (`vlog/segment.rs`).
    pub fn release_segments(&self) {
        for s in self.segments() {
            s.release();
        }
    }

    /// True once the switcher froze this generation.
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Freezes the generation: writers that see this retry elsewhere.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Records segments recovered into this generation (each created with one holder,
    /// the generation's).
    pub fn add_recovered(&self, segs: Vec<Arc<Segment>>, dram: usize) {
        let bytes: u64 = segs.iter().map(|s| s.bytes()).sum();
        self.recovered_log_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.recovered.lock().extend(segs);
        self.recovered_bytes.fetch_add(dram, Ordering::Relaxed);
    }

    /// Log bytes of the segments recovered into this generation.
    pub fn recovered_log_bytes(&self) -> u64 {
        self.recovered_log_bytes.load(Ordering::Relaxed)
    }

    /// Every log segment holding this generation's records.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        let mut v = self.recovered.lock().clone();
        for s in &self.slots {
            v.extend_from_slice(s.0.lock().writer.segments());
        }
        v
    }

    /// Estimated DRAM bytes held by the index.
    pub fn dram_bytes(&self) -> u64 {
        let mut n = self.recovered_bytes.load(Ordering::Relaxed) as u64;
        for s in &self.slots {
            n += s.0.lock().dram_bytes;
        }
        n
    }

    /// Log bytes and user bytes written through this generation's slots.
    pub fn written(&self) -> (u64, u64) {
        let (mut log, mut user) = (0, 0);
        for s in &self.slots {
            let g = s.0.lock();
            log += g.writer.bytes_written();
            user += g.user_bytes;
        }
        (log, user)
    }
}

/// DRAM an ordered index spends on one entry with this key and value.
fn entry_dram(key_len: usize, val: &Val) -> u64 {
    let key_heap = key_len.div_ceil(16) * 16;
    (ENTRY_OVERHEAD + key_heap + val.heap_bytes()) as u64
}

impl FastStore {
    /// DRAM this generation's index spends on one entry: a hybrid index keeps the key
    /// and versions in both parts.
    pub(crate) fn entry_dram(&self, key_len: usize, val: &Val) -> u64 {
        let ordered = entry_dram(key_len, val);
        if self.index.is_hybrid() {
            let key_heap = key_len.div_ceil(16) * 16;
            ordered + (hash::HASH_ENTRY_OVERHEAD + key_heap + val.heap_bytes()) as u64
        } else {
            ordered
        }
    }
}
